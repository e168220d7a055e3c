package client

// The daemon-to-client frames of the session protocol (version 1, see
// docs/session-protocol.md) and their strict decoding. The vectors in
// server/testdata/session/vectors.json are replayed against it.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"unicode/utf8"
)

// Protocol is the session protocol version this client speaks.
const Protocol = 1

// LogEntry is one log entry of the program, as the daemon captured it.
type LogEntry struct {
	// Source is console, stdout or stderr.
	Source string `json:"source"`
	// Level is log, info, warn, error or debug (console entries only).
	Level string `json:"level,omitempty"`
	Text  string `json:"text"`
}

// Failure is why a program failed: Kind is exception, timeout, abort, oom
// or exit.
type Failure struct {
	Kind    string `json:"kind"`
	Message string `json:"message"`
}

// Stats are a run's measurements in milliseconds.
type Stats struct {
	WallMs    float64 `json:"wallMs"`
	CPUMs     float64 `json:"cpuMs"`
	StartupMs float64 `json:"startupMs"`
	Calls     int     `json:"calls"`
}

// Report is a run's outcome: the done frame's report, the same object
// POST /v1/run returns.
type Report struct {
	ID             string            `json:"id"`
	Value          json.RawMessage   `json:"value"`
	ValueKind      string            `json:"valueKind,omitempty"`
	Logs           []LogEntry        `json:"logs"`
	Error          *Failure          `json:"error"`
	LogsTruncated  bool              `json:"logsTruncated"`
	ValueTruncated bool              `json:"valueTruncated"`
	Stats          Stats             `json:"stats"`
	Events         []json.RawMessage `json:"events"`
	// EgressEvents are the run's egress connections, one
	// {"type":"egress",...} each; each also came as an event.
	EgressEvents []json.RawMessage `json:"egressEvents,omitempty"`
}

// frame is one decoded daemon-to-client frame.
type frame struct {
	Type string
	// accepted, call
	ID string
	// refused
	Status       int
	Error        string
	RetryAfterMs int64
	// log
	Log LogEntry
	// event
	Event json.RawMessage
	// call, approval
	Name string
	Args json.RawMessage
	// approval
	Tool string
	// done
	Report *Report
	// error
	Code    string
	Message string
}

// FrameError is a daemon frame this client cannot accept; Code is the
// protocol's error code (not-json, bad-type, unknown-type, bad-field).
type FrameError struct {
	Code    string
	Message string
}

func (e *FrameError) Error() string { return "session frame: " + e.Code + ": " + e.Message }

var daemonFields = map[string][]string{
	"accepted": {"type", "id"},
	"refused":  {"type", "status", "error", "retryAfterMs"},
	"log":      {"type", "source", "level", "text"},
	"event":    {"type", "event"},
	"call":     {"type", "id", "name", "args"},
	"approval": {"type", "id", "tool", "args"},
	"done":     {"type", "report"},
	"error":    {"type", "code", "message"},
}

var clientTypes = []string{"start", "result", "abort", "approvalResult"}

// decodeFrame validates one daemon-to-client text frame.
func decodeFrame(data []byte) (*frame, error) {
	bad := func(code, format string, args ...any) (*frame, error) {
		return nil, &FrameError{Code: code, Message: fmt.Sprintf(format, args...)}
	}
	if !utf8.Valid(data) {
		return bad("not-utf8", "the frame is not valid UTF-8")
	}
	var keys map[string]json.RawMessage
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&keys); err != nil || keys == nil || dec.More() {
		return bad("not-json", "the frame is not one JSON object")
	}
	var typ string
	if raw, ok := keys["type"]; !ok || json.Unmarshal(raw, &typ) != nil {
		return bad("bad-type", `the frame has no string "type"`)
	}
	allowed, known := daemonFields[typ]
	if !known {
		if slices.Contains(clientTypes, typ) {
			return bad("bad-type", "%q is not a daemon-to-client frame", typ)
		}
		return bad("unknown-type", "unknown frame type %q", typ)
	}
	names := make([]string, 0, len(keys))
	for k := range keys {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		if !slices.Contains(allowed, k) {
			return bad("bad-field", "%s: unknown field %q", typ, k)
		}
	}
	f := &frame{Type: typ}
	var err error
	field := func(name string, dst any, required bool) {
		raw, ok := keys[name]
		if err != nil || !ok {
			if err == nil && required {
				err = &FrameError{Code: "bad-field", Message: fmt.Sprintf("%s: %q is required", typ, name)}
			}
			return
		}
		if e := json.Unmarshal(raw, dst); e != nil || string(raw) == "null" && name != "args" {
			err = &FrameError{Code: "bad-field", Message: fmt.Sprintf("%s: %q has the wrong type", typ, name)}
		}
	}
	check := func(ok bool, format string, args ...any) {
		if err == nil && !ok {
			err = &FrameError{Code: "bad-field", Message: typ + ": " + fmt.Sprintf(format, args...)}
		}
	}
	switch typ {
	case "accepted":
		field("id", &f.ID, true)
		check(f.ID != "", "id must not be empty")
	case "refused":
		field("status", &f.Status, true)
		field("error", &f.Error, true)
		field("retryAfterMs", &f.RetryAfterMs, f.Status == 429)
		check(f.Status >= 400 && f.Status <= 599 && f.RetryAfterMs >= 0, "status must be 4xx or 5xx and retryAfterMs not negative")
	case "log":
		field("source", &f.Log.Source, true)
		field("level", &f.Log.Level, false)
		field("text", &f.Log.Text, true)
		_, hasLevel := keys["level"]
		switch f.Log.Source {
		case "console":
			check(slices.Contains([]string{"log", "info", "warn", "error", "debug"}, f.Log.Level), "a console entry's level is one of log, info, warn, error, debug")
		case "stdout", "stderr":
			check(!hasLevel, "%s entries carry no level", f.Log.Source)
		default:
			check(false, "source %q is not one of console, stdout, stderr", f.Log.Source)
		}
	case "event":
		var ev map[string]json.RawMessage
		field("event", &ev, true)
		var et string
		check(ev != nil && json.Unmarshal(ev["type"], &et) == nil && et != "", `event must be an object with a string "type"`)
		f.Event = keys["event"]
	case "call":
		field("id", &f.ID, true)
		field("name", &f.Name, true)
		_, hasArgs := keys["args"]
		check(hasArgs, `"args" is required`)
		f.Args = keys["args"]
		check(f.ID != "" && f.Name != "", "id and name must not be empty")
	case "approval":
		field("id", &f.ID, true)
		field("tool", &f.Tool, true)
		_, hasArgs := keys["args"]
		check(hasArgs, `"args" is required`)
		f.Args = keys["args"]
		check(f.ID != "" && f.Tool != "", "id and tool must not be empty")
	case "done":
		var rep map[string]json.RawMessage
		field("report", &rep, true)
		if err == nil {
			for _, k := range []string{"id", "value", "logs", "error", "stats", "events"} {
				_, ok := rep[k]
				check(ok, "report has no %q", k)
			}
		}
		if err == nil {
			f.Report = &Report{}
			field("report", f.Report, true)
		}
	case "error":
		field("code", &f.Code, true)
		field("message", &f.Message, true)
	}
	if err != nil {
		return nil, err
	}
	return f, nil
}
