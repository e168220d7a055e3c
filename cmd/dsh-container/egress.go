package main

import (
	"context"
	"errors"

	"github.com/dsh-container/dsh-container/backend"
	"github.com/dsh-container/dsh-container/backend/container"
	"github.com/dsh-container/dsh-container/server"
)

// limitedRuntime adapts the container runtime's egress to
// server.EgressRuntime: a request may narrow the runtime's allowlist
// (container.WithEgress) for its run.
var _ server.EgressRuntime = limitedRuntime{}

var errNoEgress = errors.New("this server allows no egress (its policy has no egress section)")

func (r limitedRuntime) CheckEgress(allow []string) error {
	p := r.Egress()
	if p == nil {
		return errNoEgress
	}
	_, err := p.Narrow(allow)
	return err
}

func (r limitedRuntime) RunEgress(ctx context.Context, req backend.RunRequest, l server.Limits, allow []string) (backend.RunResult, error) {
	p := r.Egress()
	if p == nil {
		return backend.RunResult{}, errNoEgress
	}
	n, err := p.Narrow(allow)
	if err != nil {
		return backend.RunResult{}, err
	}
	return r.RunWith(ctx, req, container.RunOptions{Limits: runLimits(l), Egress: n})
}
