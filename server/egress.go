package server

// Per-request egress: a request may narrow the server's egress allowlist
// for its run, never widen it.

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/dsh-container/dsh-container/backend"
)

// MaxEgressAllow bounds a request's allowlist.
const MaxEgressAllow = 256

// requestEgress is a request's "egress" object.
type requestEgress struct {
	// Allow is the run's allowlist: each entry must be within the
	// server's ("host:port", "*.domain:port").
	Allow []string `json:"allow"`
}

// parseEgress reads a request's "egress" object (absent or null: the
// runtime's egress as it is, nil). Whether the runtime has egress and the
// entries are within its allowlist is the runtime's to say
// (backend.CheckRequest, checkOptions).
func parseEgress(raw json.RawMessage) (*backend.Egress, error) {
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
	return &backend.Egress{Allow: e.Allow}, nil
}
