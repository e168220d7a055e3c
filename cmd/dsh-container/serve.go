package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/docker/go-units"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/cobra"

	"github.com/dsh-container/dsh-container/backend"
	"github.com/dsh-container/dsh-container/backend/container"
	"github.com/dsh-container/dsh-container/images"
	"github.com/dsh-container/dsh-container/registry"
	"github.com/dsh-container/dsh-container/server"
	"github.com/dsh-container/dsh-container/telemetry"
)

type serveOptions struct {
	Listen    string
	Tools     string
	Mode      string
	SDK       string
	Pool      int
	MaxRuns   int
	Queue     int
	Languages []string
	Shutdown  time.Duration
	// RequestMemory is --max-request-memory: the bytes of request bodies
	// and start frames held at once.
	RequestMemory string
	// AllowRuntimes are the OCI runtimes a request may name.
	AllowRuntimes []string
	// auth, TLS and mTLS (serve_service.go)
	svc serviceOptions
	// limits and the OCI runtime, as run takes them
	run runOptions
	// Policy is --policy, ApprovalTimeout --approval-timeout (approve.go).
	Policy          string
	ApprovalTimeout time.Duration
}

func newServeCmd(f *factory) *cobra.Command {
	opts := &serveOptions{}
	d := container.DefaultLimits()
	cmd := &cobra.Command{
		Use:   "serve [flags]",
		Short: "Serve the HTTP API: run programs, the SDK, health and metrics",
		Long: `Serve the HTTP API of dsh-container as a long-lived daemon.

Endpoints:
  POST /v1/run   {"language":"typescript"|"python","code":"...","id":"optional"}
                 → the object "run --json" prints, plus "id" and "events"
                 (200 also when the program failed: "error" names the kind;
                 400 bad request, 413 body too large, 429 overloaded with
                 Retry-After, 503 image missing or Docker unreachable)
  GET  /v1/sdk?language=typescript|python&format=prompt|source
  GET  /healthz  200, or 503 with the reason
  GET  /metrics  Prometheus text

--runtime NAME makes NAME (runc, crun, runsc for gVisor) the OCI runtime of
every run. --allow-runtimes runc,runsc lets a request choose among those with
its "runtime" key (POST /v1/run and a session's start frame); any other name
is a 400, and without --allow-runtimes the key is refused. The default runtime
is always allowed. Each allowed runtime gets its own warm pool (--pool) and
admission (--max-runs, --queue) per language.

--listen is unix:///path.sock or tcp://HOST:PORT. The default is a Unix
socket in a private folder: $XDG_RUNTIME_DIR/dsh-container-api/api.sock, or
/tmp/dsh-container-api-<uid>/api.sock. serve refuses a non-loopback address
without --auth or --client-ca unless --insecure-no-auth is given.

  GET  /v1/sessions  a websocket: one run with tools the client defines and
                 answers, logs and events as they happen, abort (protocol:
                 docs/session-protocol.md)

--auth FILE lists tenants: {"tenants":[{"name":"alpha","tokenSha256":"<hex>",
"maxRuns":N,"queue":N}]} (maxRuns and queue default to --max-runs and
--queue, per tenant; the server's figures still bound the total). Every
endpoint but /healthz then needs "Authorization: Bearer <token>"; SIGHUP
reloads the file without touching runs in flight. --tls-cert/--tls-key serve
TLS; --client-ca requires client certificates it signed (mTLS).

Each language gets one container runtime with a warm pool of --pool
pre-started sandboxes and admission control: at most --max-runs programs run
at once and --queue more wait; beyond that a request gets 429 (both per
language; --max-runs 0 admits everything). Budgets apply to every run.

SIGINT or SIGTERM stops accepting connections, waits up to
--shutdown-timeout for runs in flight, aborts what is left, and removes
every container, pooled ones included. A second signal aborts the runs at
once.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			opts.run.changed = func(name string) bool { return cmd.Flags().Changed(name) }
			return runServe(cmd.Context(), f, opts)
		},
	}
	fl := cmd.Flags()
	addTraceFlags(fl, &opts.run.trace)
	fl.StringVar(&opts.Listen, "listen", "", "unix:///path.sock or tcp://HOST:PORT (default: a Unix socket under $XDG_RUNTIME_DIR or /tmp)")
	fl.StringVar(&opts.Tools, "tools", "", "tool manifest FILE (JSON: {\"tools\":[{name, description, inputSchema, command}]})")
	fl.StringVar(&opts.Mode, "mode", string(registry.ModeCode), "tool presentation: code or both (POST /v1/run runs programs) or native (GET /v1/tools lists the tools only)")
	addSDKFlag(fl, &opts.SDK)
	fl.IntVar(&opts.Pool, "pool", 1, "pre-started sandboxes kept ready per language (0 disables the pool)")
	fl.IntVar(&opts.MaxRuns, "max-runs", runtime.NumCPU(), "programs running at once per language (0: no limit)")
	fl.IntVar(&opts.Queue, "queue", 64, "programs waiting for a slot per language before requests get 429")
	fl.StringSliceVar(&opts.Languages, "languages", []string{string(backend.TypeScript), string(backend.Python)}, "languages to serve")
	fl.DurationVar(&opts.Shutdown, "shutdown-timeout", 45*time.Second, "how long shutdown waits for runs in flight before aborting them")
	fl.StringVar(&opts.RequestMemory, "max-request-memory", units.BytesSize(server.DefaultMaxRequestBytes), "request bodies and session start frames held at once, all tenants together (each from before it is read to its run's end), divided into a share per tenant that the others cannot take while it is at least tenants × 2MiB (below, a warning is logged and each share is 2MiB); past its share a request gets 429, past the total it waits, then gets 503")
	fl.DurationVar(&opts.run.Wall, "wall-timeout", d.WallTime, "wall-clock budget of each program")
	fl.DurationVar(&opts.run.Compute, "compute-timeout", d.ComputeTime, "CPU-time budget of each program (metered from the container's cgroup)")
	fl.StringVar(&opts.run.Memory, "memory", units.BytesSize(float64(d.MemoryBytes)), "memory limit of each program (e.g. 256MiB, 1g); swap is disabled")
	fl.Float64Var(&opts.run.CPUs, "cpus", float64(d.NanoCPUs)/1e9, "CPU rate limit of each program in CPUs")
	fl.Int64Var(&opts.run.Pids, "pids", d.Pids, "limit on processes and threads of each program")
	fl.StringVar(&opts.run.Runtime, "runtime", "", "OCI runtime registered with the daemon: runc|crun|runsc (default: the daemon's default)")
	fl.StringSliceVar(&opts.AllowRuntimes, "allow-runtimes", nil, "OCI runtimes a request may choose with its \"runtime\" key, e.g. runc,runsc (default: none; --runtime is always allowed)")
	addSeccompFlag(fl, &opts.run.Seccomp)
	addPolicyFlags(fl, &opts.Policy, &opts.ApprovalTimeout)
	addDriverFlags(cmd, f)
	addServiceFlags(fl, &opts.svc)
	cmd.AddCommand(newServeHealthzCmd(f))
	return cmd
}

// serveLanguages validates --languages.
func serveLanguages(names []string) ([]backend.Language, error) {
	var out []backend.Language
	for _, n := range names {
		l, err := backend.ParseLanguage(strings.TrimSpace(n))
		if err != nil {
			return nil, usagef("--languages: %v", err)
		}
		if slices.Contains(out, l) {
			return nil, usagef("--languages: %s given twice", l)
		}
		out = append(out, l)
	}
	if len(out) == 0 {
		return nil, usagef("--languages: name at least one of typescript, python")
	}
	return out, nil
}

func runServe(ctx context.Context, f *factory, opts *serveOptions) error {
	langs, err := serveLanguages(opts.Languages)
	if err != nil {
		return err
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
	if opts.Shutdown <= 0 {
		return usagef("--shutdown-timeout must be positive")
	}
	requestMemory, err := units.RAMInBytes(opts.RequestMemory)
	if err != nil || requestMemory < server.DefaultMaxBodyBytes {
		return usagef("--max-request-memory %q: give a size of at least %s (the request body limit), e.g. 64MiB", opts.RequestMemory, units.BytesSize(server.DefaultMaxBodyBytes))
	}
	allow, err := parseAllowRuntimes(opts.AllowRuntimes)
	if err != nil {
		return err
	}
	addr, err := server.ParseAddress(opts.Listen)
	if err != nil {
		return usageError{err}
	}
	mode, err := parseMode(opts.Mode, true)
	if err != nil {
		return err
	}
	view, err := parseSDKView(opts.SDK)
	if err != nil {
		return err
	}
	pol, err := loadPolicy(opts.Policy)
	if err != nil {
		return err
	}
	svc, err := opts.svc.setup(opts.MaxRuns, opts.Queue)
	if err != nil {
		return err
	}
	if err := opts.svc.checkAddress(addr); err != nil {
		return err
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
	warnUnknownPolicyTools(log, pol, tools.Tools(), true)

	drv, err := f.connect(ctx)
	if err != nil {
		return err
	}
	defer drv.Close()
	tags, err := readyHost(ctx, f, drv, log, langs...)
	if err != nil {
		return err
	}

	// The runtimes outlive every request; closing them drains the pools
	// and waits for every container's teardown.
	var runtimes []*container.Runtime
	closeRuntimes := func(ctx context.Context) error {
		var errs []error
		for _, rt := range runtimes {
			errs = append(errs, rt.Close(ctx))
		}
		return errors.Join(errs...)
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
		defer cancel()
		if err := closeRuntimes(cctx); err != nil {
			log.Error("closing runtimes", "err", err)
		}
	}()
	metricsReg := prometheus.NewRegistry()
	observer := server.NewRunObserver()
	metricsReg.MustRegister(observer)
	srvOpts := append([]server.Option{server.WithToolSource(tools), server.WithMode(mode), server.WithLogger(log),
		server.WithRegistryOptions(append([]registry.Option{registry.WithSDK(view)}, opts.run.trace.registryOptions()...)...),
		server.WithMetrics(metricsReg), server.WithMaxRequestBytes(requestMemory)}, svc.opts...)
	eg, err := egressOptions(pol, nil)
	if err != nil {
		return err
	}
	defName, extra, err := allowedRuntimes(drv.Capabilities(), opts.run.Runtime, allow)
	if err != nil {
		return err
	}
	sr := serviceRuntime{limits: limits, seccomp: sc, pool: opts.Pool, maxRuns: opts.MaxRuns, queue: opts.Queue, log: log,
		extra: append([]container.Option{container.WithObserver(observer)}, eg...)}
	for _, l := range langs {
		newRuntime := func(oci string) (*container.Runtime, error) {
			rt, err := container.New(drv, sr.options(l, tags[l], oci)...)
			if err == nil {
				runtimes = append(runtimes, rt)
			}
			return rt, err
		}
		rt, err := newRuntime(opts.run.Runtime)
		if err != nil {
			return err
		}
		srvOpts = append(srvOpts, server.WithRuntime(rt))
		if len(allow) == 0 {
			continue
		}
		srvOpts = append(srvOpts, server.WithNamedRuntime(defName, rt))
		for _, name := range extra {
			rt, err := newRuntime(name)
			if err != nil {
				return err
			}
			srvOpts = append(srvOpts, server.WithNamedRuntime(name, rt))
		}
	}
	srvOpts = append(srvOpts, server.WithRegistryOptions(approvalRegistryOptions(pol, opts.ApprovalTimeout)...))
	srvOpts = append(srvOpts, server.WithHealthCheck(func(ctx context.Context) error {
		if err := drv.Ping(ctx); err != nil {
			return err
		}
		for _, l := range langs {
			if ok, err := drv.ImageExists(ctx, tags[l]); err != nil {
				return fmt.Errorf("checking the %s runner image: %v", l, err)
			} else if !ok {
				return images.ErrMissing(tags[l])
			}
		}
		return nil
	}))
	api, err := server.New(srvOpts...)
	if err != nil {
		return err
	}

	ln, err := server.Listen(addr)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", addr, err)
	}
	if addr.Default {
		defer os.Remove(filepath.Dir(addr.Address)) // only when empty
	}
	if err := opts.svc.checkListener(ln, log); err != nil {
		ln.Close()
		return err
	}
	ln = opts.svc.limitConnections(ln)
	if svc.tls != nil {
		ln = tls.NewListener(ln, svc.tls)
	}
	defer opts.svc.reloadOnHUP(ctx, svc, opts.MaxRuns, opts.Queue, log)()
	hs := &http.Server{
		Handler:           api,
		ReadHeaderTimeout: 10 * time.Second,
		MaxHeaderBytes:    64 << 10,
		IdleTimeout:       2 * time.Minute,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	served := make(chan error, 1)
	go func() { served <- hs.Serve(ln) }()
	log.Info("serving", "listen", listenURL(ln), "languages", strings.Join(api.Languages(), ","),
		"pool", opts.Pool, "max_runs", opts.MaxRuns, "queue", opts.Queue, "tools", len(tools.Tools()))

	var serveErr error
	select {
	case err := <-served:
		serveErr = fmt.Errorf("serving on %s: %w", addr, err)
	case <-ctx.Done():
	}

	// Shut down: stop accepting, wait for runs in flight (a second signal
	// or the timeout aborts them), then close the runtimes (deferred).
	log.Info("shutting down", "timeout", opts.Shutdown)
	again := make(chan os.Signal, 1)
	signal.Notify(again, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(again)
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), opts.Shutdown)
	defer cancel()
	go func() {
		select {
		case <-again:
			log.Warn("second signal: aborting runs in flight")
			cancel()
		case <-sctx.Done():
		}
	}()
	err = hs.Shutdown(sctx)
	if err == nil {
		// Sessions are hijacked connections: wait for them apart.
		err = api.Shutdown(sctx)
	}
	if err != nil {
		// Runs still in flight: abort them (their requests get an abort
		// result), then drop the connections.
		log.Warn("runs still in flight at the shutdown deadline: aborting them", "err", err)
		actx, acancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
		if err := closeRuntimes(actx); err != nil {
			log.Error("closing runtimes", "err", err)
		}
		// Sessions' runs are aborted now; wait for their last frames.
		expired, ecancel := context.WithCancel(actx)
		ecancel()
		_ = api.Shutdown(expired)
		acancel()
		_ = hs.Close()
	}
	cctx, ccancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
	defer ccancel()
	if err := closeRuntimes(cctx); err != nil {
		return fmt.Errorf("closing the runtimes: %w", err)
	}
	if serveErr != nil {
		return serveErr
	}
	log.Info("stopped: every run finished and every container removed")
	return nil
}

// listenURL names where ln listens, as --listen takes it.
func listenURL(ln net.Listener) string {
	if a, ok := ln.Addr().(*net.UnixAddr); ok {
		return "unix://" + a.Name
	}
	return "tcp://" + ln.Addr().String()
}
