package server

// The session protocol's frames and their strict decoding. The protocol
// is written down in docs/session-protocol.md; testdata/session/vectors.json
// holds its JSON vectors, replayed here and by both client libraries.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/dsh-container/dsh-container/backend"
	"github.com/dsh-container/dsh-container/registry"
)

// SessionProtocol is the session protocol's version: the "protocol" of a
// start frame.
const SessionProtocol = 1

// Bounds of the session protocol that do not depend on configuration.
const (
	// MaxSessionTools bounds the tools one start frame may define.
	MaxSessionTools = 512
	// MaxCallIDBytes bounds the id of a result frame.
	MaxCallIDBytes = MaxIDBytes + 32
	// MaxMessageBytes bounds a failed result's message and an abort's
	// reason.
	MaxMessageBytes = 16 << 10
)

// Frame types. A client sends start, result and abort; the daemon sends
// accepted, refused, log, event, call, done and error. Approvals add
// approval (daemon) and approvalResult (client): session_approval.go.
const (
	FrameStart    = "start"
	FrameResult   = "result"
	FrameAbort    = "abort"
	FrameAccepted = "accepted"
	FrameRefused  = "refused"
	FrameLog      = "log"
	FrameEvent    = "event"
	FrameCall     = "call"
	FrameDone     = "done"
	FrameError    = "error"
)

// SessionDirection says which end sent a frame.
type SessionDirection string

const (
	ClientToDaemon SessionDirection = "client-to-daemon"
	DaemonToClient SessionDirection = "daemon-to-client"
)

// SessionTool is a tool a client defines in its start frame, in MCP's
// tool shape.
type SessionTool struct {
	Name         string          `json:"name"`
	Description  string          `json:"description,omitempty"`
	InputSchema  json.RawMessage `json:"inputSchema"`
	OutputSchema json.RawMessage `json:"outputSchema,omitempty"`
}

// StartFrame opens a session: the run and the client's tools.
type StartFrame struct {
	Type     string          `json:"type"`
	Protocol int             `json:"protocol"`
	Language string          `json:"language"`
	Code     string          `json:"code"`
	Tools    []SessionTool   `json:"tools"`
	Limits   json.RawMessage `json:"limits,omitempty"`
	ID       string          `json:"id,omitempty"`
	// Runtime names the OCI runtime, as RunRequest.Runtime.
	Runtime string `json:"runtime,omitempty"`
	// Egress narrows the server's egress allowlist for the run, as in
	// POST /v1/run: {"allow": ["host:port", ...]}.
	Egress json.RawMessage `json:"egress,omitempty"`
}

// ResultFrame answers one call frame: a value, or a failure message.
type ResultFrame struct {
	Type    string          `json:"type"`
	ID      string          `json:"id"`
	OK      bool            `json:"ok"`
	Value   json.RawMessage `json:"value,omitempty"`
	Message string          `json:"message,omitempty"`
}

// AbortFrame asks the daemon to abort the run.
type AbortFrame struct {
	Type   string `json:"type"`
	Reason string `json:"reason,omitempty"`
}

// AcceptedFrame says the run was admitted: from here on a client must
// never retry it.
type AcceptedFrame struct {
	Type string `json:"type"`
	ID   string `json:"id"`
}

// RefusedFrame says the session was refused before it was accepted, with
// an HTTP status: 400 bad start, 401 unauthenticated, 404 no run_code in
// this mode, 429 at capacity (retryAfterMs), 503 the daemon cannot run
// programs. The socket closes after it; retrying is safe.
type RefusedFrame struct {
	Type         string `json:"type"`
	Status       int    `json:"status"`
	Error        string `json:"error"`
	RetryAfterMs int64  `json:"retryAfterMs,omitempty"`
}

// LogFrame is one log entry of the program, as it is captured.
type LogFrame struct {
	Type string `json:"type"`
	backend.LogEntry
}

// EventFrame carries one registry event (tool/code-dispatch,
// tool/approval) as it happens.
type EventFrame struct {
	Type  string         `json:"type"`
	Event registry.Event `json:"event"`
}

// rawEventFrame is an event frame whose event is not the registry's: an
// egress connection ({"type":"egress",...}).
type rawEventFrame struct {
	Type  string          `json:"type"`
	Event json.RawMessage `json:"event"`
}

// CallFrame asks the client to run one of its tools.
type CallFrame struct {
	Type string          `json:"type"`
	ID   string          `json:"id"`
	Name string          `json:"name"`
	Args json.RawMessage `json:"args"`
}

// DoneFrame ends the run: the report POST /v1/run returns.
type DoneFrame struct {
	Type   string      `json:"type"`
	Report RunResponse `json:"report"`
}

// ErrorFrame reports a protocol violation after the run was accepted; the
// run is aborted and the socket closes.
type ErrorFrame struct {
	Type    string `json:"type"`
	Code    string `json:"code"`
	Message string `json:"message"`
}

// SessionError is a protocol violation: Code is stable and
// machine-readable, Message says what was wrong.
type SessionError struct {
	Code    string
	Message string
}

func (e *SessionError) Error() string { return "session: " + e.Code + ": " + e.Message }

// Error codes of error frames (and of decoding).
const (
	CodeTooLarge        = "too-large"        // a frame over the limit
	CodeNotUTF8         = "not-utf8"         // a frame that is not UTF-8
	CodeNotJSON         = "not-json"         // not one lossless JSON object (duplicate keys included)
	CodeBadType         = "bad-type"         // no string "type", or a frame this end does not send
	CodeUnknownType     = "unknown-type"     // a type no end sends
	CodeBadField        = "bad-field"        // a field missing, unknown, of the wrong type or out of range
	CodeBadProtocol     = "bad-protocol"     // a protocol version this daemon does not speak
	CodeBinary          = "binary"           // a binary frame
	CodeUnexpected      = "unexpected"       // a frame not allowed now (a second start, a result before accepted)
	CodeUnknownCall     = "unknown-call"     // a result for an id the daemon never sent
	CodeDuplicateResult = "duplicate-result" // a second result for one call
)

func sessionErr(code, format string, args ...any) error {
	return &SessionError{Code: code, Message: fmt.Sprintf(format, args...)}
}

// frameFields lists each frame's keys, matched exactly.
var frameFields = map[string][]string{
	FrameStart:    {"type", "protocol", "language", "code", "tools", "limits", "id", "runtime", "egress"},
	FrameResult:   {"type", "id", "ok", "value", "message"},
	FrameAbort:    {"type", "reason"},
	FrameAccepted: {"type", "id"},
	FrameRefused:  {"type", "status", "error", "retryAfterMs"},
	FrameLog:      {"type", "source", "level", "text"},
	FrameEvent:    {"type", "event"},
	FrameCall:     {"type", "id", "name", "args"},
	FrameDone:     {"type", "report"},
	FrameError:    {"type", "code", "message"},
}

var toolFields = []string{"name", "description", "inputSchema", "outputSchema"}

func senderOf(typ string) SessionDirection {
	switch typ {
	case FrameStart, FrameResult, FrameAbort, FrameApprovalResult:
		return ClientToDaemon
	}
	return DaemonToClient
}

// DecodeSessionFrame validates and decodes one text frame sent in
// direction dir: *StartFrame, *ResultFrame, *AbortFrame or
// *ApprovalResultFrame from a client; *AcceptedFrame, *RefusedFrame,
// *LogFrame, *EventFrame, *CallFrame, *ApprovalFrame, *DoneFrame or
// *ErrorFrame from the daemon. maxFrame bounds its size (0:
// no bound). Every failure is a *SessionError. A start frame's tool
// schemas and limits are checked by the session, which knows the server's
// tools and maxima.
//
// Decoding costs about the frame's size once more, whatever its shape:
// the frame is checked in place, a long string is copied once, and a
// result's value is not copied at all — it shares frame's memory, so
// frame must not be modified afterwards.
func DecodeSessionFrame(dir SessionDirection, frame []byte, maxFrame int) (any, error) {
	if maxFrame > 0 && len(frame) > maxFrame {
		return nil, sessionErr(CodeTooLarge, "a frame of %d bytes exceeds the %d-byte limit", len(frame), maxFrame)
	}
	if !utf8.Valid(frame) {
		return nil, sessionErr(CodeNotUTF8, "the frame is not valid UTF-8")
	}
	// One lossless JSON value: no duplicate keys, no lone surrogates,
	// nothing after it.
	if len(bytes.TrimSpace(frame)) == 0 {
		return nil, sessionErr(CodeNotJSON, "the frame is not one lossless JSON object: empty frame")
	}
	if err := registry.CheckLossless(frame); err != nil {
		return nil, sessionErr(CodeNotJSON, "the frame is not one lossless JSON object: %v", err)
	}
	var keys map[string]rawRef
	if err := json.Unmarshal(frame, &keys); err != nil || keys == nil {
		return nil, sessionErr(CodeNotJSON, "the frame is not a JSON object")
	}
	var typ string
	if err := json.Unmarshal(keys["type"], &typ); err != nil || keys["type"] == nil {
		return nil, sessionErr(CodeBadType, `the frame has no string "type"`)
	}
	allowed, known := frameFields[typ]
	if !known {
		return nil, sessionErr(CodeUnknownType, "unknown frame type %q", truncateName(typ))
	}
	if senderOf(typ) != dir {
		return nil, sessionErr(CodeBadType, "%q is not a %s frame", typ, dir)
	}
	for _, k := range sortedKeys(keys) {
		if !slices.Contains(allowed, k) {
			return nil, sessionErr(CodeBadField, "%s: unknown field %q", typ, truncateName(k))
		}
	}
	f := &fieldReader{typ: typ, keys: keys}
	var out any
	switch typ {
	case FrameStart:
		m := &StartFrame{Type: typ}
		f.int("protocol", &m.Protocol, true)
		f.str("language", &m.Language, true)
		f.str("code", &m.Code, true)
		f.raw("limits", &m.Limits, false)
		f.raw("egress", &m.Egress, false)
		f.str("id", &m.ID, false)
		f.str("runtime", &m.Runtime, false)
		if raw, ok := keys["tools"]; ok {
			var tools []map[string]rawRef
			if err := json.Unmarshal(raw, &tools); err != nil {
				f.fail("tools must be an array of {name, description, inputSchema, outputSchema?}")
			}
			if len(tools) > MaxSessionTools {
				f.fail("%d tools: at most %d", len(tools), MaxSessionTools)
			}
			for i, tk := range tools {
				if f.err != nil {
					break
				}
				if tk == nil {
					f.fail("tools[%d] must be an object", i)
					break
				}
				for _, k := range sortedKeys(tk) {
					if !slices.Contains(toolFields, k) {
						f.fail("tools[%d]: unknown field %q", i, truncateName(k))
						break
					}
				}
				tf := &fieldReader{typ: fmt.Sprintf("start: tools[%d]", i), keys: tk, err: f.err}
				var t SessionTool
				tf.str("name", &t.Name, true)
				tf.str("description", &t.Description, false)
				tf.raw("inputSchema", &t.InputSchema, true)
				tf.raw("outputSchema", &t.OutputSchema, false)
				f.err = tf.err
				m.Tools = append(m.Tools, t)
			}
		}
		if m.Tools == nil {
			m.Tools = []SessionTool{}
		}
		if f.err == nil {
			switch {
			case m.Protocol != SessionProtocol:
				f.err = sessionErr(CodeBadProtocol, "start: protocol %d is not spoken here; this daemon speaks %d", m.Protocol, SessionProtocol)
			case len(m.ID) > MaxIDBytes:
				f.fail("id must be at most %d bytes", MaxIDBytes)
			}
		}
		out = m
	case FrameResult:
		m := &ResultFrame{Type: typ}
		f.str("id", &m.ID, true)
		f.bool("ok", &m.OK, true)
		_, hasValue := keys["value"]
		_, hasMessage := keys["message"]
		f.shared("value", &m.Value, false)
		f.str("message", &m.Message, false)
		switch {
		case f.err != nil:
		case m.ID == "" || len(m.ID) > MaxCallIDBytes:
			f.fail("id must be 1 to %d bytes", MaxCallIDBytes)
		case m.OK && (!hasValue || hasMessage):
			f.fail(`an ok result carries "value" (null is a value) and no "message"`)
		case !m.OK && (hasValue || !hasMessage):
			f.fail(`a failed result carries "message" and no "value"`)
		case len(m.Message) > MaxMessageBytes:
			f.fail("message exceeds %d bytes", MaxMessageBytes)
		}
		out = m
	case FrameAbort:
		m := &AbortFrame{Type: typ}
		f.str("reason", &m.Reason, false)
		if f.err == nil && len(m.Reason) > MaxMessageBytes {
			f.fail("reason exceeds %d bytes", MaxMessageBytes)
		}
		out = m
	case FrameAccepted:
		m := &AcceptedFrame{Type: typ}
		f.str("id", &m.ID, true)
		if f.err == nil && m.ID == "" {
			f.fail("id must not be empty")
		}
		out = m
	case FrameRefused:
		m := &RefusedFrame{Type: typ}
		f.int("status", &m.Status, true)
		f.str("error", &m.Error, true)
		var ms int
		f.int("retryAfterMs", &ms, m.Status == 429)
		m.RetryAfterMs = int64(ms)
		if f.err == nil && (m.Status < 400 || m.Status > 599 || ms < 0) {
			f.fail("status must be an HTTP error status (4xx, 5xx) and retryAfterMs not negative")
		}
		out = m
	case FrameLog:
		m := &LogFrame{Type: typ}
		var src, level string
		f.str("source", &src, true)
		f.str("level", &level, false)
		f.str("text", &m.Text, true)
		m.Source, m.Level = backend.LogSource(src), backend.LogLevel(level)
		if f.err == nil {
			switch src {
			case "console":
				if !slices.Contains([]string{"log", "info", "warn", "error", "debug"}, level) {
					f.fail("a console entry's level is one of log, info, warn, error, debug")
				}
			case "stdout", "stderr":
				if _, ok := keys["level"]; ok {
					f.fail("%s entries carry no level", src)
				}
			default:
				f.fail("source %q is not one of console, stdout, stderr", truncateName(src))
			}
		}
		out = m
	case FrameEvent:
		m := &EventFrame{Type: typ}
		var ev map[string]rawRef
		if raw, ok := keys["event"]; !ok || json.Unmarshal(raw, &ev) != nil || ev == nil {
			f.fail("event must be an object")
		} else {
			var et string
			if json.Unmarshal(ev["type"], &et) != nil || et == "" {
				f.fail(`event must have a string "type"`)
			} else if err := json.Unmarshal(raw, &m.Event); err != nil {
				f.fail("event: %v", err)
			}
		}
		out = m
	case FrameCall:
		m := &CallFrame{Type: typ}
		f.str("id", &m.ID, true)
		f.str("name", &m.Name, true)
		f.raw("args", &m.Args, true)
		if f.err == nil && (m.ID == "" || m.Name == "") {
			f.fail("id and name must not be empty")
		}
		out = m
	case FrameDone:
		m := &DoneFrame{Type: typ}
		var rep map[string]rawRef
		if raw, ok := keys["report"]; !ok || json.Unmarshal(raw, &rep) != nil || rep == nil {
			f.fail("report must be an object")
		} else {
			for _, k := range []string{"id", "value", "logs", "error", "stats", "events"} {
				if _, ok := rep[k]; !ok {
					f.fail("report has no %q", k)
					break
				}
			}
			if f.err == nil {
				if err := json.Unmarshal(raw, &m.Report); err != nil {
					f.fail("report: %v", err)
				}
			}
		}
		out = m
	case FrameApproval, FrameApprovalResult:
		out = decodeApprovalFrames(typ, f)
	case FrameError:
		m := &ErrorFrame{Type: typ}
		f.str("code", &m.Code, true)
		f.str("message", &m.Message, true)
		out = m
	}
	if f.err != nil {
		return nil, f.err
	}
	return out, nil
}

// rawRef is the text of one JSON value inside the frame being decoded.
// Decoding one (json.Unmarshal of the whole frame) does not copy it, as
// decoding a json.RawMessage does: it is a slice of the frame, valid as
// long as the frame is not modified.
type rawRef []byte

func (r *rawRef) UnmarshalJSON(b []byte) error {
	*r = b
	return nil
}

// fieldReader decodes one frame's fields, keeping the first error.
type fieldReader struct {
	typ  string
	keys map[string]rawRef
	err  error
}

func (f *fieldReader) fail(format string, args ...any) {
	if f.err == nil {
		f.err = sessionErr(CodeBadField, "%s: %s", f.typ, fmt.Sprintf(format, args...))
	}
}

func (f *fieldReader) get(name string, required bool) (rawRef, bool) {
	if f.err != nil {
		return nil, false
	}
	raw, ok := f.keys[name]
	if !ok && required {
		f.fail("%q is required", name)
	}
	return raw, ok
}

func (f *fieldReader) str(name string, dst *string, required bool) {
	if raw, ok := f.get(name, required); ok {
		s, ok := unquote(raw)
		if !ok {
			f.fail("%q must be a string", name)
			return
		}
		*dst = s
	}
}

func (f *fieldReader) bool(name string, dst *bool, required bool) {
	if raw, ok := f.get(name, required); ok {
		if json.Unmarshal(raw, dst) != nil || (string(raw) != "true" && string(raw) != "false") {
			f.fail("%q must be true or false", name)
		}
	}
}

func (f *fieldReader) int(name string, dst *int, required bool) {
	if raw, ok := f.get(name, required); ok {
		var n float64
		if json.Unmarshal(raw, &n) != nil || n != float64(int64(n)) || n < -(1<<53) || n > 1<<53 {
			f.fail("%q must be an integer", name)
			return
		}
		*dst = int(n)
	}
}

// raw copies a field's JSON text: the frame it came from is not kept
// alive by a small part of it (a tool's schema, for the whole run).
func (f *fieldReader) raw(name string, dst *json.RawMessage, required bool) {
	if raw, ok := f.get(name, required); ok {
		*dst = bytes.Clone(raw)
	}
}

// shared is raw without the copy, for a field that is most of its frame.
func (f *fieldReader) shared(name string, dst *json.RawMessage, required bool) {
	if raw, ok := f.get(name, required); ok {
		*dst = json.RawMessage(raw)
	}
}

// unquote decodes a JSON string literal of a frame that decoded as JSON,
// as json.Unmarshal does, in one allocation of at most the literal's
// length (json.Unmarshal makes two of a literal with escapes: the
// unescaped bytes, then the string). It reports false for anything but a
// string.
func unquote(lit []byte) (string, bool) {
	if len(lit) < 2 || lit[0] != '"' || lit[len(lit)-1] != '"' {
		return "", false
	}
	body := lit[1 : len(lit)-1]
	if !utf8.Valid(body) { // not from a frame: let encoding/json repair it
		var s string
		return s, json.Unmarshal(lit, &s) == nil
	}
	i := bytes.IndexByte(body, '\\')
	if i < 0 {
		return string(body), true
	}
	var b strings.Builder
	b.Grow(len(body))
	for i >= 0 {
		b.Write(body[:i])
		if len(body) < i+2 {
			return "", false
		}
		c := body[i+1]
		body = body[i+2:]
		switch c {
		case '"', '\\', '/':
			b.WriteByte(c)
		case 'b':
			b.WriteByte('\b')
		case 'f':
			b.WriteByte('\f')
		case 'n':
			b.WriteByte('\n')
		case 'r':
			b.WriteByte('\r')
		case 't':
			b.WriteByte('\t')
		case 'u':
			r, ok := hex4(body)
			if !ok {
				return "", false
			}
			body = body[4:]
			if utf16.IsSurrogate(r) {
				// A pair is one rune; anything else is U+FFFD, as
				// encoding/json decodes it.
				r2, ok := rune(-1), len(body) >= 6 && body[0] == '\\' && body[1] == 'u'
				if ok {
					r2, ok = hex4(body[2:])
				}
				if dec := utf16.DecodeRune(r, r2); ok && dec != utf8.RuneError {
					r = dec
					body = body[6:]
				} else {
					r = utf8.RuneError
				}
			}
			b.WriteRune(r)
		default:
			return "", false
		}
		i = bytes.IndexByte(body, '\\')
	}
	b.Write(body)
	return b.String(), true
}

func hex4(b []byte) (rune, bool) {
	if len(b) < 4 {
		return 0, false
	}
	var r rune
	for _, c := range b[:4] {
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c -= 'a' - 10
		case 'A' <= c && c <= 'F':
			c -= 'A' - 10
		default:
			return 0, false
		}
		r = r<<4 | rune(c)
	}
	return r, true
}
