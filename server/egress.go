package server

// Per-request egress: a request may narrow the server's egress allowlist
// for its run, never widen it.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/dsh-container/dsh-container/backend"
)

// EgressRuntime is the optional ability of a runtime to run one program
// with its egress allowlist narrowed (the daemon adapts the container
// runtime's RunWith and its egress policy to it). A request with
// "egress" on a runtime without it gets 400.
type EgressRuntime interface {
	backend.Runtime
	// HasEgress reports whether the runtime's runs have egress at all.
	HasEgress() bool
	// CheckEgress reports why allow cannot be applied: the runtime has no
	// egress, or an entry is malformed or not within its allowlist. The
	// message names the entry.
	CheckEgress(allow []string) error
	// RunEgress is Run with limits l and the allowlist narrowed to allow
	// (nil: the runtime's own). Each egress connection of the run is
	// passed to onEvent as its JSON event ({"type":"egress", ...}); a run
	// has at most the policy's maxConnections+1 of them.
	RunEgress(ctx context.Context, req backend.RunRequest, l Limits, allow []string, onEvent func(json.RawMessage)) (backend.RunResult, error)
}

// MaxEgressAllow bounds a request's allowlist.
const MaxEgressAllow = 256

// requestEgress is a request's "egress" object.
type requestEgress struct {
	// Allow is the run's allowlist: each entry must be within the
	// server's ("host:port", "*.domain:port").
	Allow []string `json:"allow"`
}

// parseEgress reads a request's "egress" object (absent or null: the
// server's egress as it is) and checks it against rt. It returns nil when
// the request narrows nothing.
func parseEgress(raw json.RawMessage, rt backend.Runtime) ([]string, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	var e requestEgress
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&e); err != nil {
		return nil, fmt.Errorf(`egress must be an object {"allow": ["host:port", ...]}: %v`, err)
	}
	if len(e.Allow) == 0 {
		return nil, errors.New(`egress.allow must list at least one "host:port" (leave egress out for the server's own)`)
	}
	if len(e.Allow) > MaxEgressAllow {
		return nil, fmt.Errorf("egress.allow has %d entries, at most %d", len(e.Allow), MaxEgressAllow)
	}
	er, ok := rt.(EgressRuntime)
	if !ok || !er.HasEgress() {
		return nil, fmt.Errorf("egress: the %s runtime of this server offers no egress", rt.Language())
	}
	if err := er.CheckEgress(e.Allow); err != nil {
		return nil, fmt.Errorf("egress: %v", err)
	}
	return e.Allow, nil
}

// egressView runs every program of a request with its limits and its
// narrowed allowlist.
type egressView struct {
	EgressRuntime
	limits  Limits
	allow   []string
	onEvent func(json.RawMessage)
}

func (v egressView) Run(ctx context.Context, req backend.RunRequest) (backend.RunResult, error) {
	return v.RunEgress(ctx, req, v.limits, v.allow, v.onEvent)
}

// runtimeWith is runtimeFor(rt, l) for a runtime without egress; with
// egress, a view that narrows it to allow (when set) and hands the run's
// egress events to onEvent.
func runtimeWith(rt backend.Runtime, l Limits, allow []string, onEvent func(json.RawMessage)) backend.Runtime {
	er, ok := rt.(EgressRuntime)
	if !ok || !er.HasEgress() {
		return runtimeFor(rt, l)
	}
	if onEvent == nil {
		onEvent = func(json.RawMessage) {}
	}
	return egressView{EgressRuntime: er, limits: l, allow: allow, onEvent: onEvent}
}
