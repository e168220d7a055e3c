package main

import (
	"context"
	"encoding/json"
	"errors"

	"github.com/dsh-container/dsh-container/backend"
	"github.com/dsh-container/dsh-container/backend/container"
	"github.com/dsh-container/dsh-container/egress"
	"github.com/dsh-container/dsh-container/policy"
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

func (r limitedRuntime) HasEgress() bool { return r.Egress() != nil }

func (r limitedRuntime) RunEgress(ctx context.Context, req backend.RunRequest, l server.Limits, allow []string, onEvent func(json.RawMessage)) (backend.RunResult, error) {
	p := r.Egress()
	if p == nil {
		return backend.RunResult{}, errNoEgress
	}
	n, err := p.Narrow(allow) // nil: p itself
	if err != nil {
		return backend.RunResult{}, err
	}
	if onEvent != nil {
		n = n.WithEvents(func(e egress.Event) {
			if b, err := json.Marshal(e); err == nil {
				onEvent(b)
			}
		})
	}
	return r.RunWith(ctx, req, container.RunOptions{Limits: runLimits(l), Egress: n})
}

// egressOptions is container.WithEgress of a policy's egress section (none
// without one), compiled by egress.New (which reads its caFile). Each
// connection's event goes to events (nil: none); the runtime logs it with
// its run.
func egressOptions(p *policy.Policy, events func(egress.Event)) ([]container.Option, error) {
	if p == nil || p.Egress == nil {
		return nil, nil
	}
	cfg := *p.Egress
	cfg.OnEvent = events
	ep, err := egress.New(cfg)
	var ce *egress.ConfigError
	if errors.As(err, &ce) {
		return nil, usagef("--policy: %s", ce.Describe("egress."))
	}
	if err != nil {
		return nil, usagef("--policy: %v", err)
	}
	return []container.Option{container.WithEgress(ep)}, nil
}
