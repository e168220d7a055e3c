package server

// Per-request limits: a request may lower the server's budgets for its
// run, never raise them.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/dsh-container/dsh-container/backend"
)

// Limits are budgets of one run. A zero field means the server's own.
type Limits struct {
	WallTime    time.Duration
	ComputeTime time.Duration
	MemoryBytes int64
	NanoCPUs    int64
	Pids        int64
}

// LimitedRuntime is the optional ability of a runtime to run one program
// with lower limits than its own (the daemon adapts the container
// runtime's RunWithLimits to it). A request with limits on a runtime
// without it gets 400.
type LimitedRuntime interface {
	backend.Runtime
	// MaxLimits are the runtime's own limits: what a request may lower.
	MaxLimits() Limits
	// CheckLimits reports why l cannot be applied (below a minimum), with
	// an error classed errdefs.ErrInvalidArgument, or nil.
	CheckLimits(l Limits) error
	// RunLimited is Run with l applied.
	RunLimited(ctx context.Context, req backend.RunRequest, l Limits) (backend.RunResult, error)
}

// The keys of a request's "limits" object, in the order messages list
// them.
var limitKeys = []string{"wallTimeoutMs", "computeTimeoutMs", "memoryBytes", "cpus", "pids"}

// parseLimits reads a request's "limits" object (absent or null: none)
// and checks it against rt's maxima. Every error names the limit, and
// one that raises a limit says so.
func parseLimits(raw json.RawMessage, rt backend.Runtime) (Limits, error) {
	var l Limits
	if len(bytes.TrimSpace(raw)) == 0 || string(bytes.TrimSpace(raw)) == "null" {
		return l, nil
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(raw, &fields); err != nil || fields == nil {
		return l, fmt.Errorf("limits must be an object with any of %s", strings.Join(limitKeys, ", "))
	}
	for _, k := range sortedKeys(fields) {
		if !slices.Contains(limitKeys, k) {
			return l, fmt.Errorf("limits: unknown limit %q (known: %s)", truncateName(k), strings.Join(limitKeys, ", "))
		}
	}
	lr, ok := rt.(LimitedRuntime)
	if !ok {
		return l, fmt.Errorf("limits: the %s runtime of this server cannot lower limits per request", rt.Language())
	}
	max := lr.MaxLimits()
	var errs []string
	for _, k := range limitKeys {
		v, ok := fields[k]
		if !ok {
			continue
		}
		var f float64
		if err := json.Unmarshal(v, &f); err != nil || f <= 0 || math.IsInf(f, 0) {
			errs = append(errs, fmt.Sprintf("limits.%s must be a positive number", k))
			continue
		}
		integral := f == math.Trunc(f) && f < 1<<53
		if k != "cpus" && !integral {
			errs = append(errs, fmt.Sprintf("limits.%s must be a positive integer", k))
			continue
		}
		raise := func(have, max string) {
			errs = append(errs, fmt.Sprintf("limits.%s %s exceeds the server's %s: a request may lower a limit, never raise it", k, have, max))
		}
		switch k {
		case "wallTimeoutMs":
			if l.WallTime = time.Duration(f) * time.Millisecond; l.WallTime > max.WallTime {
				raise(fmt.Sprint(f), fmt.Sprint(max.WallTime.Milliseconds()))
			}
		case "computeTimeoutMs":
			if l.ComputeTime = time.Duration(f) * time.Millisecond; l.ComputeTime > max.ComputeTime {
				raise(fmt.Sprint(f), fmt.Sprint(max.ComputeTime.Milliseconds()))
			}
		case "memoryBytes":
			if l.MemoryBytes = int64(f); l.MemoryBytes > max.MemoryBytes {
				raise(fmt.Sprint(l.MemoryBytes), fmt.Sprint(max.MemoryBytes))
			}
		case "cpus":
			if l.NanoCPUs = int64(math.Round(f * 1e9)); l.NanoCPUs > max.NanoCPUs || f > 1e6 {
				raise(fmt.Sprint(f), fmt.Sprint(float64(max.NanoCPUs)/1e9))
			}
		case "pids":
			if l.Pids = int64(f); l.Pids > max.Pids {
				raise(fmt.Sprint(l.Pids), fmt.Sprint(max.Pids))
			}
		}
	}
	if len(errs) > 0 {
		return Limits{}, fmt.Errorf("%s", strings.Join(errs, "; "))
	}
	if err := lr.CheckLimits(l); err != nil {
		return Limits{}, fmt.Errorf("limits: %v", err)
	}
	return l, nil
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// truncateName cuts a client-supplied name for a message.
func truncateName(s string) string {
	if len(s) <= 64 {
		return s
	}
	return strings.ToValidUTF8(s[:64], "") + "…"
}

// limitedView runs every program of a request with its limits.
type limitedView struct {
	LimitedRuntime
	limits Limits
}

func (v limitedView) Run(ctx context.Context, req backend.RunRequest) (backend.RunResult, error) {
	return v.RunLimited(ctx, req, v.limits)
}

// runtimeFor is rt, or a view of it applying l when l lowers anything.
func runtimeFor(rt backend.Runtime, l Limits) backend.Runtime {
	if l == (Limits{}) {
		return rt
	}
	return limitedView{LimitedRuntime: rt.(LimitedRuntime), limits: l}
}
