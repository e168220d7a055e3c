package main

import (
	"context"
	"encoding/json"
	"time"

	"github.com/spf13/cobra"

	"github.com/dsh-container/dsh-container/backend"
	"github.com/dsh-container/dsh-container/bench"
)

func newBenchCmd(f *factory) *cobra.Command {
	var o bench.Options
	var asJSON bool
	var langs []string
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Measure cold, warm-pool and binding latency against docker run and worker_threads, side by side (per driver)",
		Long: `Measure, in one invocation so the figures are comparable ratios on the same
machine: cold runs (alternated with "docker run --rm" of the same image),
warm-pool runs, the binding round trip per language, sustained runs per
second with N clients against the daemon's own container churn rate with the
same clients, a fresh-per-run Node worker_threads baseline (when node is on
the host), and this process's memory. --soak N adds N consecutive runs and
checks nothing is left behind. --driver docker,containerd measures both
engines in one invocation, in turns, and prints containerd's figures over
Docker's.`,
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
			return runBench(cmd.Context(), f, o, asJSON)
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
	fl.Lookup("driver").Usage = "container engines to measure, side by side: docker, containerd or docker,containerd (default: docker when its socket answers, else containerd)"
	return cmd
}

func runBench(ctx context.Context, f *factory, o bench.Options, asJSON bool) error {
	names, err := f.drv.check(true)
	if err != nil {
		return err
	}
	var drivers []bench.Driver
	for _, name := range names {
		f.drv.name = name
		drv, err := f.connect(ctx)
		if err != nil {
			return err
		}
		defer drv.Close()
		drivers = append(drivers, drv)
	}
	rep, err := bench.Run(ctx, drivers, o)
	if err != nil {
		return err
	}
	if asJSON {
		enc := json.NewEncoder(f.stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(rep)
	}
	rep.Text(f.stdout)
	return nil
}
