package server

// Per-request limits and egress: a request may lower the runtime's budgets
// for its run, never raise them, and narrow its egress, never widen it.
// The server reads the JSON; the runtime decides (backend.CheckRequest).

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/dsh-container/dsh-container/backend"
)

// The keys of a request's "limits" object, in the order messages list
// them.
var limitKeys = []string{"wallTimeoutMs", "computeTimeoutMs", "memoryBytes", "cpus", "pids"}

// parseLimits reads a request's "limits" object (absent or null: none):
// its keys, and each value a positive number (an integer but for cpus).
// Whether the runtime can lower them to these values is the runtime's to
// say (backend.CheckRequest, checkOptions). Every error names the limit.
func parseLimits(raw json.RawMessage) (backend.Limits, error) {
	var l backend.Limits
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
		// Bounds of what the fields can hold, not of what the runtime
		// allows: that is the runtime's check.
		if k == "cpus" && f > maxCPUs || (k == "wallTimeoutMs" || k == "computeTimeoutMs") && f > maxTimeoutMs {
			errs = append(errs, fmt.Sprintf("limits.%s %g is out of range", k, f))
			continue
		}
		switch k {
		case "wallTimeoutMs":
			l.WallTime = time.Duration(f) * time.Millisecond
		case "computeTimeoutMs":
			l.ComputeTime = time.Duration(f) * time.Millisecond
		case "memoryBytes":
			l.MemoryBytes = int64(f)
		case "cpus":
			// A zero field means the runtime's own: a positive value that
			// rounds to no nanoCPU would raise the quota, not lower it.
			if l.NanoCPUs = int64(math.Round(f * 1e9)); l.NanoCPUs == 0 {
				errs = append(errs, fmt.Sprintf("limits.cpus %g is below 1e-9", f))
			}
		case "pids":
			l.Pids = int64(f)
		}
	}
	if len(errs) > 0 {
		return backend.Limits{}, fmt.Errorf("%s", strings.Join(errs, "; "))
	}
	return l, nil
}

// Ranges of limits a request can express at all (the runtime's own are
// far lower).
const (
	maxCPUs      = 1e6
	maxTimeoutMs = math.MaxInt64 / 1_000_000 // in a time.Duration
)

// checkOptions parses a request's "limits" and "egress" and asks rt
// whether it can honour them (backend.CheckRequest: a raised limit, an
// entry outside the allowlist, an option the runtime does not offer),
// before the run is admitted. It returns the RunRequest every program of
// the run starts from (registry.WithRunRequest), with events as its sink.
// Every error is the request's fault: a 400.
func checkOptions(rawLimits, rawEgress json.RawMessage, rt backend.Runtime, events func(json.RawMessage)) (backend.RunRequest, error) {
	limits, err := parseLimits(rawLimits)
	if err != nil {
		return backend.RunRequest{}, err
	}
	eg, err := parseEgress(rawEgress)
	if err != nil {
		return backend.RunRequest{}, err
	}
	req := backend.RunRequest{Limits: limits, Egress: eg, Events: events}
	if err := backend.CheckRequest(rt, req); err != nil {
		return backend.RunRequest{}, err
	}
	return req, nil
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
