package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"time"

	"github.com/docker/go-units"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/spf13/cobra"

	"github.com/dsh-container/dsh-container/backend"
	"github.com/dsh-container/dsh-container/backend/container"
	"github.com/dsh-container/dsh-container/manifest"
	"github.com/dsh-container/dsh-container/mcp"
	"github.com/dsh-container/dsh-container/registry"
	"github.com/dsh-container/dsh-container/server"
	"github.com/dsh-container/dsh-container/telemetry"
)

// mcpPath is where the streamable HTTP transport is served under --listen.
const mcpPath = "/mcp"

// mcpMaxLine bounds one JSON-RPC message from the client over stdio: room
// for a program at the runtime's default cap even when JSON escaping
// multiplies its size.
const mcpMaxLine = 4 << 20

type mcpOptions struct {
	Listen   string
	Tools    string
	Mode     string
	SDK      string
	Lang     string
	Pool     int
	MaxRuns  int
	Queue    int
	Shutdown time.Duration
	// Policy is --policy, ApprovalTimeout --approval-timeout (approve.go).
	Policy          string
	ApprovalTimeout time.Duration
	// limits and the OCI runtime, as run takes them
	run runOptions
}

func newMCPCmd(f *factory) *cobra.Command {
	opts := &mcpOptions{}
	d := container.DefaultLimits()
	cmd := &cobra.Command{
		Use:   "mcp [flags]",
		Short: "Serve Code Mode as an MCP server (stdio, or streamable HTTP with --listen)",
		Long: `Serve Code Mode as an MCP server: instead of one model round trip per tool
call, the model writes one program against all the tools and runs it with
run_code, in a fresh hardened container.

The tools are those of --tools: command tools and the tools of the MCP
servers under "mcpServers" (named SERVER__tool), which start once and stop
with this process:

  {"mcpServers": {
     "files":  {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-filesystem", "/srv"]},
     "github": {"url": "https://api.githubcopilot.com/mcp/", "headers": {"Authorization": "Bearer ${GITHUB_TOKEN}"}}}}

--mode code (default): tools/list offers run_code, whose description
carries the SDK of every tool in --lang; both: run_code and every tool
natively; native: the tools only (no containers, no Docker needed).

A run_code result is the program's logs and value as text, plus
structuredContent {value, logs, error}; a failed program is an error
result naming its kind. With a progress token the logs stream as progress
notifications while the program runs; notifications/cancelled aborts the
run and removes its container. When an upstream server's tools change,
clients get notifications/tools/list_changed.

Without --listen the server speaks over stdin and stdout (logs go to
stderr). --listen unix:///path.sock or tcp://127.0.0.1:PORT serves the
streamable HTTP transport at ` + mcpPath + ` on a Unix socket or a loopback
address only: the server has no authentication.

Budgets, the warm pool and admission work as for serve: at most
--max-runs programs run at once and --queue more wait; beyond that a call
is an error result saying so.

SIGINT or SIGTERM aborts the runs in flight, removes every container and
stops the MCP servers of --tools.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			opts.run.changed = func(name string) bool { return cmd.Flags().Changed(name) }
			return runMCP(cmd.Context(), f, opts)
		},
	}
	fl := cmd.Flags()
	addTraceFlags(fl, &opts.run.trace)
	fl.StringVar(&opts.Listen, "listen", "", "serve streamable HTTP at "+mcpPath+" on unix:///path.sock or tcp://127.0.0.1:PORT (default: stdio)")
	fl.StringVar(&opts.Tools, "tools", "", `tool manifest FILE: {"tools": [command tools], "mcpServers": {NAME: {command, args, env} | {url, headers}}}`)
	fl.StringVar(&opts.Mode, "mode", string(registry.ModeCode), "what tools/list offers: code (run_code with the SDK), both (run_code and the tools) or native (the tools)")
	addSDKFlag(fl, &opts.SDK)
	fl.StringVar(&opts.Lang, "lang", string(backend.TypeScript), "program language: typescript|python")
	fl.IntVar(&opts.Pool, "pool", 1, "pre-started sandboxes kept ready (0 disables the pool)")
	fl.IntVar(&opts.MaxRuns, "max-runs", runtime.NumCPU(), "programs running at once (0: no limit)")
	fl.IntVar(&opts.Queue, "queue", 64, "programs waiting for a slot before calls are refused")
	fl.DurationVar(&opts.Shutdown, "shutdown-timeout", 10*time.Second, "how long shutdown waits for HTTP connections to close")
	fl.DurationVar(&opts.run.Wall, "wall-timeout", d.WallTime, "wall-clock budget of each program")
	fl.DurationVar(&opts.run.Compute, "compute-timeout", d.ComputeTime, "CPU-time budget of each program (metered from the container's cgroup)")
	fl.StringVar(&opts.run.Memory, "memory", units.BytesSize(float64(d.MemoryBytes)), "memory limit of each program (e.g. 256MiB, 1g); swap is disabled")
	fl.Float64Var(&opts.run.CPUs, "cpus", float64(d.NanoCPUs)/1e9, "CPU rate limit of each program in CPUs")
	fl.Int64Var(&opts.run.Pids, "pids", d.Pids, "limit on processes and threads of each program")
	fl.StringVar(&opts.run.Runtime, "runtime", "", "OCI runtime registered with the daemon: runc|crun|runsc (default: the daemon's default)")
	addSeccompFlag(fl, &opts.run.Seccomp)
	addPolicyFlags(fl, &opts.Policy, &opts.ApprovalTimeout)
	addDriverFlags(cmd, f)
	return cmd
}

// parseMode validates a --mode flag; native is refused where there is
// nothing but a program to run.
func parseMode(v string, allowNative bool) (registry.Mode, error) {
	m, err := registry.ParseMode(v)
	if err != nil || v == "" {
		return "", usagef("--mode %q: use code, both or native", v)
	}
	if m == registry.ModeNative && !allowNative {
		return "", usagef("--mode native: there is nothing to run in native mode (it offers the tools themselves, for serve and mcp); use code or both")
	}
	return m, nil
}

// openTools loads the manifest at path ("" = no tools) and starts its MCP
// servers. A malformed manifest or a server that does not start is an
// error naming it (exit 2). The caller closes the toolset.
func openTools(ctx context.Context, path string, log *slog.Logger) (*manifest.Toolset, error) {
	m := &manifest.Manifest{}
	if path != "" {
		var err error
		if m, err = manifest.Load(path, manifest.Options{RequireCommand: true, AllowMCPServers: true}); err != nil {
			return nil, err
		}
	}
	ts, err := manifest.Open(ctx, m, &manifest.OpenOptions{Logger: log, Version: Version})
	if err != nil {
		return nil, fmt.Errorf("tool manifest %s: %w", path, err)
	}
	return ts, nil
}

// checkMCPServers is doctor's check of the MCP servers of the manifest at
// path: one line each, reachable with its tool count or not with the
// reason. It returns the number of problems.
func checkMCPServers(ctx context.Context, f *factory, path string) int {
	if path == "" {
		return 0
	}
	m, err := manifest.Load(path, manifest.Options{RequireCommand: true, AllowMCPServers: true})
	if err != nil {
		fmt.Fprintf(f.stdout, "FAIL  %v\n      fix: correct the manifest\n", err)
		return 1
	}
	problems := 0
	if len(m.MCPServers) == 0 {
		fmt.Fprintf(f.stdout, "note  %s names no MCP servers\n", path)
	}
	for _, st := range manifest.Check(ctx, m, &manifest.OpenOptions{Version: Version}) {
		if st.Err != nil {
			problems++
			fmt.Fprintf(f.stdout, "FAIL  MCP server %q (%s %s) is not reachable: %v\n      fix: start it or correct its entry in %s\n", st.Name, st.Transport, st.Where, st.Err, path)
			continue
		}
		fmt.Fprintf(f.stdout, "ok    MCP server %q (%s %s) reachable, %d tools\n", st.Name, st.Transport, st.Where, st.Tools)
	}
	return problems
}

func runMCP(ctx context.Context, f *factory, opts *mcpOptions) (retErr error) {
	mode, err := parseMode(opts.Mode, true)
	if err != nil {
		return err
	}
	view, err := parseSDKView(opts.SDK)
	if err != nil {
		return err
	}
	lang, err := backend.ParseLanguage(opts.Lang)
	if err != nil {
		return usagef("--lang: %v", err)
	}
	sc, err := seccompOption(opts.run.Seccomp)
	if err != nil {
		return err
	}
	limits, err := limitsFor(&opts.run)
	if err != nil {
		return err
	}
	if opts.Pool < 0 || opts.MaxRuns < 0 || opts.Queue < 0 {
		return usagef("--pool, --max-runs and --queue must not be negative")
	}
	pol, err := loadPolicy(opts.Policy)
	if err != nil {
		return err
	}
	var addr server.Address
	if opts.Listen != "" {
		if addr, err = server.ParseAddress(opts.Listen); err != nil {
			return usageError{err}
		}
		if !loopbackAddress(addr) {
			return usagef("--listen %s: MCP over HTTP listens on a Unix socket or a loopback address only (it has no authentication)", opts.Listen)
		}
	}
	level := slog.LevelInfo
	if f.verbose {
		level = slog.LevelDebug
	}
	log := telemetry.NewJSONLogger(f.stderr, level)
	tp, err := setupTracing(ctx, &opts.run.trace, log, true)
	if err != nil {
		return err
	}
	defer shutdownTracing(ctx, tp, log)

	tools, err := openTools(ctx, opts.Tools, log)
	if err != nil {
		return err
	}
	defer tools.Close()
	warnUnknownPolicyTools(log, pol, tools.Tools(), false)

	srvOpts := []mcp.Option{mcp.WithMode(mode), mcp.WithSDK(view), mcp.WithToolSource(tools), mcp.WithLogger(log), mcp.WithVersion(Version),
		mcp.WithRegistryOptions(approvalRegistryOptions(pol, opts.ApprovalTimeout)...),
		mcp.WithRegistryOptions(opts.run.trace.registryOptions()...)}
	if mode != registry.ModeNative {
		drv, err := f.connect(ctx)
		if err != nil {
			return err
		}
		defer drv.Close()
		tags, err := readyHost(ctx, f, drv, log, lang)
		if err != nil {
			return err
		}
		eg, err := egressOptions(pol, nil)
		if err != nil {
			return err
		}
		sr := serviceRuntime{limits: limits, seccomp: sc, pool: opts.Pool, maxRuns: opts.MaxRuns, queue: opts.Queue, log: log, extra: eg}
		rt, err := container.New(drv, sr.options(lang, tags[lang], opts.run.Runtime)...)
		if err != nil {
			return err
		}
		// Closing the runtime aborts what still runs and removes every
		// container, pooled ones included.
		defer func() {
			cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
			defer cancel()
			if err := rt.Close(cctx); err != nil {
				retErr = errors.Join(retErr, fmt.Errorf("closing the runtime: %w", err))
			}
		}()
		srvOpts = append(srvOpts, mcp.WithRuntime(rt))
	}
	srv, err := mcp.New(srvOpts...)
	if err != nil {
		return err
	}
	defer srv.Close()
	// A signal aborts the runs in flight, so that the session can close.
	stop := context.AfterFunc(ctx, srv.Close)
	defer stop()

	if opts.Listen == "" {
		log.Info("serving MCP on stdio", "mode", mode, "language", lang, "tools", len(tools.Tools()))
		err := srv.Run(ctx, &sdk.IOTransport{Reader: io.NopCloser(f.stdin), Writer: nopWriteCloser{f.stdout}, MaxLineLength: mcpMaxLine})
		if ctx.Err() != nil || err == nil || errors.Is(err, io.EOF) {
			return nil // the client went away, or a signal
		}
		return fmt.Errorf("serving MCP on stdio: %w", err)
	}
	return serveMCPHTTP(ctx, log, srv, addr, opts, mode, lang, len(tools.Tools()))
}

// loopbackAddress reports whether a is a Unix socket or a loopback TCP
// address (an IP, or localhost).
func loopbackAddress(a server.Address) bool {
	if a.Network == "unix" {
		return true
	}
	host, _, err := net.SplitHostPort(a.Address)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }

// serveMCPHTTP serves the streamable HTTP transport on addr, a Unix
// socket or a loopback address, until ctx is done.
func serveMCPHTTP(ctx context.Context, log *slog.Logger, srv *mcp.Server, addr server.Address, opts *mcpOptions, mode registry.Mode, lang backend.Language, tools int) error {
	ln, err := server.Listen(addr)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", addr, err)
	}
	if addr.Default {
		defer os.Remove(filepath.Dir(addr.Address)) // only when empty
	}
	if !server.Loopback(ln) {
		ln.Close()
		return usagef("--listen %s: MCP over HTTP listens on a Unix socket or a loopback address only (it has no authentication)", opts.Listen)
	}
	mux := http.NewServeMux()
	mux.Handle(mcpPath, srv.Handler())
	hs := &http.Server{
		Handler:           mux,
		ReadHeaderTimeout: 10 * time.Second,
		MaxHeaderBytes:    64 << 10,
		IdleTimeout:       2 * time.Minute,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	served := make(chan error, 1)
	go func() { served <- hs.Serve(ln) }()
	log.Info("serving MCP over streamable HTTP", "listen", listenURL(ln), "path", mcpPath, "mode", mode, "language", lang, "tools", tools)
	var serveErr error
	select {
	case err := <-served:
		serveErr = fmt.Errorf("serving on %s: %w", addr, err)
	case <-ctx.Done():
	}
	// Abort the runs, then close the connections; open event streams never
	// go idle, so Shutdown gets a bounded wait and Close ends the rest.
	srv.Close()
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), opts.Shutdown)
	defer cancel()
	if err := hs.Shutdown(sctx); err != nil {
		_ = hs.Close()
	}
	if serveErr != nil {
		return serveErr
	}
	log.Info("stopped")
	return nil
}
