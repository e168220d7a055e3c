package main

import (
	"context"
	"log/slog"

	"github.com/dsh-container/dsh-container/backend"
	"github.com/dsh-container/dsh-container/backend/container"
	"github.com/dsh-container/dsh-container/backend/container/docker"
	"github.com/dsh-container/dsh-container/images"
	"github.com/dsh-container/dsh-container/manifest"
	"github.com/dsh-container/dsh-container/registry"
)

// readyHost does what every command that runs programs does first: reap
// what dead runs of earlier processes left, then find each language's
// runner image (missing or stale → the fix, exit 2).
func readyHost(ctx context.Context, f *factory, drv *docker.Driver, log *slog.Logger, langs ...backend.Language) (map[backend.Language]string, error) {
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
			return nil, images.ErrMissing(tag)
		}
		tags[l] = tag
	}
	return tags, nil
}

// loadTools reads a manifest of command tools ("" = none).
func loadTools(path string) ([]registry.Tool, error) {
	if path == "" {
		return nil, nil
	}
	m, err := manifest.Load(path, manifest.Options{RequireCommand: true})
	if err != nil {
		return nil, err
	}
	tools := make([]registry.Tool, 0, len(m.Tools))
	for _, t := range m.Tools {
		tools = append(tools, t.RegistryTool())
	}
	return tools, nil
}
