package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/docker/go-units"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/dsh-container/dsh-container/backend"
	"github.com/dsh-container/dsh-container/backend/container"
	"github.com/dsh-container/dsh-container/backend/container/seccomp"
	"github.com/dsh-container/dsh-container/egress"
	"github.com/dsh-container/dsh-container/registry"
)

type runOptions struct {
	File    string
	Lang    string
	Tools   string
	Mode    string
	JSON    bool
	Events  bool
	Wall    time.Duration
	Compute time.Duration
	Memory  string
	CPUs    float64
	Pids    int64
	Runtime string
	Seccomp string
	// Policy is --policy; Approve is --approve (approve.go).
	Policy          string
	Approve         bool
	ApprovalTimeout time.Duration
	// trace: --otlp-endpoint, --trace-payloads (telemetry.go)
	trace traceOptions

	changed func(flag string) bool
}

func newRunCmd(f *factory, runF func(context.Context, *runOptions) error) *cobra.Command {
	opts := &runOptions{}
	d := container.DefaultLimits()
	cmd := &cobra.Command{
		Use:   "run [flags] FILE|-",
		Short: "Run one program in a fresh hardened container",
		Long: `Run one program in a fresh hardened container and print what it logged and
returned. The program is the body of an async function: top-level await and
return work. Host tools from --tools are reachable as await tools["name"](args).

The language comes from the file extension (.ts .mts .js → typescript,
.py → python) unless --lang is given; a program read from stdin ("-") is
TypeScript unless --lang says otherwise.

Budgets: --compute-timeout is the CPU time the container may use after the
program starts, metered from its cgroup (a hot loop dies at it even while a
tool call is pending); --wall-timeout bounds elapsed time, including time
spent awaiting tools.

Exit status: 0 the program completed, 1 the program failed (exception,
timeout, abort, oom, exit), 2 usage or environment error.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.File = args[0]
			opts.changed = func(name string) bool { return cmd.Flags().Changed(name) }
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return runRun(cmd.Context(), f, opts)
		},
	}
	fl := cmd.Flags()
	addTraceFlags(fl, &opts.trace)
	fl.StringVar(&opts.Lang, "lang", "", "program language: typescript|python (default: from the extension)")
	fl.StringVar(&opts.Tools, "tools", "", "tool manifest FILE (JSON: {\"tools\":[{name, description, inputSchema, command}]})")
	fl.StringVar(&opts.Mode, "mode", string(registry.ModeCode), "tool presentation: code or both (native offers tools without running anything: serve and mcp take it)")
	fl.BoolVar(&opts.JSON, "json", false, "print one JSON object {value, valueKind, logs, error, ...}")
	fl.BoolVar(&opts.Events, "events", false, "print each tool/code-dispatch, tool/approval and egress event as one JSON line on stderr")
	fl.DurationVar(&opts.Wall, "wall-timeout", d.WallTime, "wall-clock budget of the program")
	fl.DurationVar(&opts.Compute, "compute-timeout", d.ComputeTime, "CPU-time budget of the program (metered from the container's cgroup)")
	fl.StringVar(&opts.Memory, "memory", units.BytesSize(float64(d.MemoryBytes)), "memory limit (e.g. 256MiB, 1g); swap is disabled")
	fl.Float64Var(&opts.CPUs, "cpus", float64(d.NanoCPUs)/1e9, "CPU rate limit in CPUs")
	fl.Int64Var(&opts.Pids, "pids", d.Pids, "limit on processes and threads")
	fl.StringVar(&opts.Runtime, "runtime", "", "OCI runtime registered with the daemon: runc|crun|runsc (default: the daemon's default)")
	addSeccompFlag(fl, &opts.Seccomp)
	addPolicyFlags(fl, &opts.Policy, &opts.ApprovalTimeout)
	fl.BoolVar(&opts.Approve, "approve", false, "ask on the terminal before each tool call the policy asks about (every call without --policy): allow, deny, or allow the tool for the rest of the run")
	addDriverFlags(cmd, f)
	return cmd
}

// languageFor picks the language from --lang or the file extension.
func languageFor(opts *runOptions) (backend.Language, error) {
	if opts.Lang != "" {
		l, err := backend.ParseLanguage(opts.Lang)
		if err != nil {
			return "", usagef("--lang: %v", err)
		}
		return l, nil
	}
	if opts.File == "-" {
		return backend.TypeScript, nil
	}
	switch strings.ToLower(filepath.Ext(opts.File)) {
	case ".ts", ".mts", ".cts", ".js", ".mjs", ".cjs":
		return backend.TypeScript, nil
	case ".py":
		return backend.Python, nil
	}
	return "", usagef("cannot tell the language of %q from its extension; pass --lang typescript|python", opts.File)
}

// limitsFor applies the flags to the default limits.
func limitsFor(opts *runOptions) (container.Limits, error) {
	l := container.DefaultLimits()
	changed := opts.changed
	if changed == nil {
		changed = func(string) bool { return true }
	}
	if changed("wall-timeout") {
		l.WallTime = opts.Wall
	}
	if changed("compute-timeout") {
		l.ComputeTime = opts.Compute
	}
	if changed("memory") {
		b, err := units.RAMInBytes(opts.Memory)
		if err != nil {
			return l, usagef("--memory %q: %v (use e.g. 256m or 1g)", opts.Memory, err)
		}
		l.MemoryBytes = b
		// /tmp is memory-backed; keep it within half the limit.
		if l.TmpfsBytes > b/2 {
			l.TmpfsBytes = b / 4
		}
	}
	if changed("cpus") {
		l.NanoCPUs = int64(opts.CPUs * 1e9)
	}
	if changed("pids") {
		l.Pids = opts.Pids
	}
	if err := l.Validate(); err != nil {
		return l, usageError{err}
	}
	return l, nil
}

func readProgram(file string, stdin io.Reader) (string, error) {
	var data []byte
	var err error
	if file == "-" {
		data, err = io.ReadAll(stdin)
	} else {
		data, err = os.ReadFile(file)
	}
	if err != nil {
		return "", usagef("cannot read the program: %v", err)
	}
	return string(data), nil
}

func runRun(ctx context.Context, f *factory, opts *runOptions) error {
	mode, err := parseMode(opts.Mode, false)
	if err != nil {
		return err
	}
	lang, err := languageFor(opts)
	if err != nil {
		return err
	}
	limits, err := limitsFor(opts)
	if err != nil {
		return err
	}
	sc, err := seccompOption(opts.Seccomp)
	if err != nil {
		return err
	}
	program, err := readProgram(opts.File, f.stdin)
	if err != nil {
		return err
	}
	pol, approvalOpts, closeApprover, err := runApprovalOptions(opts)
	if err != nil {
		return err
	}
	defer closeApprover()
	toolset, err := openTools(ctx, opts.Tools, f.logger())
	if err != nil {
		return err
	}
	defer toolset.Close()
	tools := toolset.Tools()

	log := f.logger()
	warnUnknownPolicyTools(log, pol, tools, false)
	tp, err := setupTracing(ctx, &opts.trace, log, false)
	if err != nil {
		return err
	}
	defer shutdownTracing(ctx, tp, log)
	ctx = withEnvTraceparent(ctx)

	drv, err := f.connect(ctx)
	if err != nil {
		return err
	}
	defer drv.Close()
	// Start-up reaping: remove what dead runs of earlier processes left.
	tags, err := readyHost(ctx, f, drv, log, lang)
	if err != nil {
		return err
	}
	tag := tags[lang]

	// --events: registry events and egress connections, one JSON line
	// each on stderr; they come from different goroutines.
	var printEvent func(any)
	if opts.Events {
		var mu sync.Mutex
		enc := json.NewEncoder(f.stderr)
		printEvent = func(v any) {
			mu.Lock()
			defer mu.Unlock()
			_ = enc.Encode(v)
		}
	}
	var egressEvents func(egress.Event)
	if printEvent != nil {
		egressEvents = func(e egress.Event) { printEvent(e) }
	}
	eg, err := egressOptions(pol, egressEvents)
	if err != nil {
		return err
	}
	rt, err := container.New(drv, append([]container.Option{
		container.WithLanguage(lang),
		container.WithImage(tag),
		container.WithLimits(limits),
		container.WithOCIRuntime(opts.Runtime),
		sc,
		container.WithLogger(log),
	}, eg...)...)
	if err != nil {
		return err
	}
	defer rt.Close(context.WithoutCancel(ctx))

	regOpts := append([]registry.Option{
		registry.WithMode(mode),
		registry.WithRuntime(rt),
		registry.WithLogger(log),
	}, opts.trace.registryOptions()...)
	regOpts = append(regOpts, approvalOpts...)
	if printEvent != nil {
		regOpts = append(regOpts, registry.WithEventSink(func(e registry.Event) { printEvent(e) }))
	}
	if !opts.JSON {
		// Human output streams the program's logs as they happen.
		regOpts = append(regOpts, registry.WithLogSink(func(_ string, e backend.LogEntry) { printLog(f, e) }))
	}
	reg := registry.New(regOpts...)
	for _, t := range tools {
		if err := reg.Register(t); err != nil {
			return usagef("tool manifest %s: %v", opts.Tools, err)
		}
	}
	args, _ := json.Marshal(map[string]string{"code": program})
	res := reg.Execute(ctx, registry.Call{ID: "cli", Name: registry.RunCode, Arguments: args})
	if res.CodeRun == nil {
		if res.Err != nil {
			return res.Err
		}
		return fmt.Errorf("run_code failed: %s", res.Text())
	}
	return report(f, opts.JSON, res.CodeRun)
}

func report(f *factory, asJSON bool, r *backend.RunResult) error {
	if asJSON {
		out := backend.NewReport(r)
		enc := json.NewEncoder(f.stdout)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(out); err != nil {
			return err
		}
	} else {
		printHuman(f, r)
	}
	if r.Error != nil {
		return errProgramFailed
	}
	return nil
}

// printLog prints one log entry for people: console entries as lines
// (levels other than log/info tagged), raw output as written, control
// characters neutralized.
func printLog(f *factory, e backend.LogEntry) {
	switch e.Source {
	case backend.SourceConsole:
		prefix := ""
		if e.Level != backend.LevelLog && e.Level != backend.LevelInfo {
			prefix = "[" + neutralize(string(e.Level)) + "] "
		}
		fmt.Fprintln(f.stdout, prefix+neutralize(strings.TrimSuffix(e.Text, "\n")))
	case backend.SourceStderr:
		io.WriteString(f.stderr, neutralize(e.Text))
	default:
		io.WriteString(f.stdout, neutralize(e.Text))
	}
}

// printHuman prints the end of a run for people; the logs were streamed.
func printHuman(f *factory, r *backend.RunResult) {
	if r.LogsTruncated {
		fmt.Fprintln(f.stderr, "dsh-container: log output truncated at the cap")
	}
	switch {
	case r.Error != nil:
		fmt.Fprintf(f.stderr, "error (%s): %s\n", r.Error.Kind, neutralize(r.Error.Message))
	case r.ValueKind == backend.ValueInspect:
		var s string
		_ = json.Unmarshal(r.Value, &s)
		fmt.Fprintln(f.stdout, neutralize(s))
	case r.ValueKind == backend.ValueJSON:
		var s string
		if json.Unmarshal(r.Value, &s) == nil {
			fmt.Fprintln(f.stdout, neutralize(s))
		} else {
			// Indented JSON escapes control characters in strings itself.
			var b bytes.Buffer
			if json.Indent(&b, r.Value, "", "  ") == nil {
				fmt.Fprintln(f.stdout, neutralize(b.String()))
			} else {
				fmt.Fprintln(f.stdout, neutralize(string(r.Value)))
			}
		}
	}
	if r.ValueTruncated {
		fmt.Fprintln(f.stderr, "dsh-container: value truncated at the cap")
	}
}

// addSeccompFlag registers --seccomp.
func addSeccompFlag(fl *pflag.FlagSet, v *string) {
	fl.StringVar(v, "seccomp", "dsh", fmt.Sprintf("seccomp profile: dsh (ours: Docker's default minus what the runners never need, %d syscalls against %d) or default (the engine's own)",
		seccomp.Count(seccomp.Profile()), seccomp.Count(seccomp.Default())))
}

// seccompOption maps --seccomp onto the runtime option.
func seccompOption(v string) (container.Option, error) {
	switch v {
	case "dsh", "":
		return container.WithSeccomp(seccomp.Profile()), nil
	case "default":
		return container.WithSeccomp(nil), nil
	}
	return nil, usagef("--seccomp %q: use dsh (our profile) or default (the engine's)", v)
}
