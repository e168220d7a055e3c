package main

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/dsh-container/dsh-container/backend/container"
)

func newGCCmd(f *factory) *cobra.Command {
	var grace time.Duration
	var dir string
	cmd := &cobra.Command{
		Use:   "gc",
		Short: "Remove containers and socket directories left by dead runs",
		Long: `Remove every labelled container and socket directory whose owner process is
gone (e.g. a host process that was SIGKILLed mid-run). Resources of live
processes, and of processes on other hosts sharing the daemon, are left alone.
The same reaping runs at the start of every "run".`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runGC(cmd.Context(), f, container.ReapOptions{Grace: grace, SocketDir: dir})
		},
	}
	cmd.Flags().DurationVar(&grace, "grace", 0, "spare resources younger than this")
	cmd.Flags().StringVar(&dir, "socket-dir", container.DefaultSocketDir(), "directory of per-run socket directories")
	return cmd
}

func runGC(ctx context.Context, f *factory, opts container.ReapOptions) error {
	drv, err := f.connect(ctx)
	if err != nil {
		return err
	}
	defer drv.Close()
	rep, err := container.Reap(ctx, drv, opts)
	for _, id := range rep.Containers {
		fmt.Fprintf(f.stdout, "removed container %.12s\n", id)
	}
	for _, d := range rep.SocketDirs {
		fmt.Fprintf(f.stdout, "removed socket directory %s\n", d)
	}
	fmt.Fprintf(f.stdout, "gc: %d container(s), %d socket director(ies) removed\n", len(rep.Containers), len(rep.SocketDirs))
	return err
}
