package main

import (
	"context"
	"errors"
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
The same reaping runs at the start of every "run". Without --driver it
reaps every engine that answers: the Docker daemon and containerd (in
--containerd-namespace, touching only what carries our labels).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runGC(cmd.Context(), f, container.ReapOptions{Grace: grace, SocketDir: dir})
		},
	}
	cmd.Flags().DurationVar(&grace, "grace", 0, "spare resources younger than this")
	cmd.Flags().StringVar(&dir, "socket-dir", container.DefaultSocketDir(), "directory of per-run socket directories")
	addDriverFlags(cmd, f)
	return cmd
}

func runGC(ctx context.Context, f *factory, opts container.ReapOptions) error {
	var engines []engine
	if f.drv.name == "" && f.connectAll != nil {
		var err error
		if engines, err = f.connectAll(ctx); err != nil {
			return err
		}
	} else {
		drv, err := f.connect(ctx)
		if err != nil {
			return err
		}
		engines = []engine{drv}
	}
	var errs []error
	for _, drv := range engines {
		defer drv.Close()
		rep, err := container.Reap(ctx, drv, opts)
		for _, id := range rep.Containers {
			fmt.Fprintf(f.stdout, "removed %s container %.12s\n", driverName(drv), id)
		}
		for _, d := range rep.SocketDirs {
			fmt.Fprintf(f.stdout, "removed socket directory %s\n", d)
		}
		fmt.Fprintf(f.stdout, "gc (%s): %d container(s), %d socket director(ies) removed\n", driverName(drv), len(rep.Containers), len(rep.SocketDirs))
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", driverName(drv), err))
		}
	}
	return errors.Join(errs...)
}
