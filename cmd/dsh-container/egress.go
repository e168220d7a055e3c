package main

import (
	"errors"

	"github.com/dsh-container/dsh-container/backend/container"
	"github.com/dsh-container/dsh-container/egress"
	"github.com/dsh-container/dsh-container/policy"
)

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
