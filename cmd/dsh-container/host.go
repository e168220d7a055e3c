package main

import (
	"context"
	"log/slog"

	"github.com/dsh-container/dsh-container/backend"
	"github.com/dsh-container/dsh-container/backend/container"
)

// readyHost does what every command that runs programs does first: reap
// what dead runs of earlier processes left, then find each language's
// runner image (missing or stale → the fix, exit 2).
func readyHost(ctx context.Context, f *factory, drv engine, log *slog.Logger, langs ...backend.Language) (map[backend.Language]string, error) {
	if rep, err := container.Reap(ctx, drv, container.ReapOptions{}); err != nil {
		log.Warn("reaper", "err", err)
	} else if n := len(rep.Containers) + len(rep.SocketDirs); n > 0 {
		log.Info("reaped leftovers of dead runs", "containers", len(rep.Containers), "socket_dirs", len(rep.SocketDirs))
	}
	tags := map[backend.Language]string{}
	for _, l := range langs {
		tag, err := f.imageFor(l)
		if err != nil {
			return nil, err
		}
		if ok, err := drv.ImageExists(ctx, tag); err != nil {
			return nil, err
		} else if !ok {
			return nil, missingImage(drv, tag)
		}
		tags[l] = tag
	}
	return tags, nil
}

// serviceRuntime is what serve and mcp give each container runtime they
// build: the run flags' limits and seccomp, the pool and admission, the
// logger, and any extra options (egress, an observer).
type serviceRuntime struct {
	limits               container.Limits
	seccomp              container.Option
	pool, maxRuns, queue int
	log                  *slog.Logger
	extra                []container.Option
}

// options are the runtime's options for lang's image under the OCI
// runtime oci ("" the engine's default).
func (s serviceRuntime) options(lang backend.Language, image, oci string) []container.Option {
	return append([]container.Option{
		container.WithLanguage(lang),
		container.WithImage(image),
		container.WithLimits(s.limits),
		container.WithOCIRuntime(oci),
		s.seccomp,
		container.WithPool(s.pool),
		container.WithAdmission(s.maxRuns, s.queue),
		container.WithLogger(s.log),
	}, s.extra...)
}
