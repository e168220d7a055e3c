package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/dsh-container/dsh-container/backend"
	"github.com/dsh-container/dsh-container/bench"
)

func newBenchCmd(f *factory) *cobra.Command {
	var o bench.Options
	var asJSON bool
	var langs, runtimes []string
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Measure cold, warm-pool and binding latency against docker run and worker_threads, side by side (per driver)",
		Long: `Measure, in one invocation so the figures are comparable ratios on the same
machine: cold runs (alternated with "docker run --rm" of the same image),
warm-pool runs, the binding round trip per language, sustained runs per
second with N clients against the daemon's own container churn rate with the
same clients, a fresh-per-run Node worker_threads baseline (when node is on
the host), and this process's memory. Per language it also measures the
round trip's floors over the same kind of bind-mounted socket from the
runner image (a raw length-prefixed ping-pong, and the runner's websocket
library against a minimal gorilla echo), where a warm run's time goes
(type-strip, acquire, send, compile, evaluate, render, return, settle) and
an idle pooled runner's cgroup memory. --soak N adds N consecutive runs and
checks nothing is left behind: any failure or leftover makes bench exit 1.

--driver docker,containerd and --runtime runc,runsc measure every
combination in one invocation: the cold runs alternate between them, the
other phases take turns, and the report sets containerd's figures over
Docker's and each runtime's over the first one's. A runtime the engine
lacks (runsc not registered with the Docker daemon) is skipped and named.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			for _, l := range langs {
				lang, err := backend.ParseLanguage(l)
				if err != nil {
					return usagef("--lang: %v", err)
				}
				o.Languages = append(o.Languages, lang)
			}
			if !asJSON {
				o.Progress = f.stderr
			}
			for _, r := range runtimes {
				if strings.TrimSpace(r) == "" {
					return usagef("--runtime %q: an empty name in the list", strings.Join(runtimes, ","))
				}
			}
			return runBench(cmd.Context(), f, o, runtimes, asJSON)
		},
	}
	fl := cmd.Flags()
	fl.BoolVar(&asJSON, "json", false, "print the report as JSON")
	fl.IntVar(&o.Runs, "runs", 30, "runs per latency phase")
	fl.IntVar(&o.Calls, "calls", 500, "binding calls in the round-trip program")
	fl.IntVar(&o.Clients, "clients", 4, "concurrent clients in the sustained phases")
	fl.DurationVar(&o.Sustain, "sustain", 10*time.Second, "duration of each sustained phase")
	fl.IntVar(&o.Soak, "soak", 0, "also run N consecutive warm runs and check nothing is left")
	fl.StringSliceVar(&langs, "lang", nil, "languages to measure (default: typescript,python)")
	addDriverFlags(cmd, f)
	fl.StringSliceVar(&runtimes, "runtime", nil, "OCI runtimes to measure, side by side, e.g. runc,runsc (default: each engine's default)")
	fl.Lookup("driver").Usage = "container engines to measure, side by side: docker, containerd or docker,containerd (default: docker when its socket answers, else containerd)"
	return cmd
}

func runBench(ctx context.Context, f *factory, o bench.Options, runtimes []string, asJSON bool) error {
	names, err := f.drv.check(true)
	if err != nil {
		return err
	}
	if len(runtimes) == 0 {
		runtimes = []string{""}
	}
	var targets []bench.Target
	for _, name := range names {
		f.drv.name = name
		drv, err := f.connect(ctx)
		if err != nil {
			return err
		}
		defer drv.Close()
		for _, r := range runtimes {
			targets = append(targets, bench.Target{Driver: drv, Runtime: strings.TrimSpace(r)})
		}
	}
	rep, err := bench.Run(ctx, targets, o)
	if err != nil {
		return err
	}
	if asJSON {
		enc := json.NewEncoder(f.stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(rep); err != nil {
			return err
		}
	} else {
		rep.Text(f.stdout)
	}
	if err := rep.SoakErr(); err != nil {
		fmt.Fprintf(f.stderr, "dsh-container: %v\n", err)
		return errProgramFailed // exit 1: the measurement ran, and found a fault
	}
	return nil
}
