package portproto

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"regexp"
	"strings"
	"unicode/utf8"
)

// Version is the protocol version both ends must speak.
const Version = 1

// Type names a message.
type Type string

const (
	TypeHello  Type = "hello"
	TypeRun    Type = "run"
	TypeCall   Type = "call"
	TypeResult Type = "result"
	TypeLog    Type = "log"
	TypeDone   Type = "done"
	TypeOpen   Type = "open"
	TypeOpened Type = "opened"
	TypeData   Type = "data"
	TypeAck    Type = "ack"
	TypeClose  Type = "close"
)

// Message is any decoded message.
type Message interface{ MessageType() Type }

// Hello is the runner's first frame.
type Hello struct {
	Type     Type   `json:"type"`
	Version  int    `json:"version"`
	Language string `json:"language"`
	Runner   string `json:"runner"`
}

// Run hands the runner its program.
type Run struct {
	Type    Type   `json:"type"`
	Version int    `json:"version"`
	Program string `json:"program"`
	// SourceMap is an optional source map (v3 JSON) from Program back to
	// the model's original source, for TypeScript programs that were
	// type-stripped host-side. Runners rewrite stack positions with it.
	SourceMap string    `json:"sourceMap,omitempty"`
	Bindings  []Binding `json:"bindings"`
	Limits    Limits    `json:"limits"`
	// Egress, when present, turns egress on for this run: the runner
	// starts its loopback proxy and sets the proxy variables.
	Egress *RunEgress `json:"egress,omitempty"`
}

// RunEgress configures the runner's end of egress for one run.
type RunEgress struct {
	// CA is an extra PEM bundle the program's HTTPS clients trust besides
	// the system's ("" for none).
	CA string `json:"ca,omitempty"`
	// Window is the most bytes of one stream the runner may send before
	// the host acknowledges them.
	Window int `json:"window"`
}

// Open asks the host to connect a stream to host:port.
type Open struct {
	Type   Type   `json:"type"`
	Stream int64  `json:"stream"`
	Host   string `json:"host"`
	Port   int    `json:"port"`
}

// Opened answers an Open.
type Opened struct {
	Type    Type   `json:"type"`
	Stream  int64  `json:"stream"`
	OK      bool   `json:"ok"`
	Message string `json:"message,omitempty"`
}

// Data carries bytes of a stream (base64 on the wire).
type Data struct {
	Type   Type   `json:"type"`
	Stream int64  `json:"stream"`
	Data   []byte `json:"data"`
}

// Ack acknowledges bytes of the runner's data written upstream.
type Ack struct {
	Type   Type  `json:"type"`
	Stream int64 `json:"stream"`
	Bytes  int64 `json:"bytes"`
}

// Close ends a stream.
type Close struct {
	Type    Type   `json:"type"`
	Stream  int64  `json:"stream"`
	Message string `json:"message,omitempty"`
}

// Binding names the functions of one global namespace.
type Binding struct {
	Global    string   `json:"global"`
	Functions []string `json:"functions"`
}

// Limits tells the runner the host's caps so it can truncate before
// sending. The host enforces them again regardless.
type Limits struct {
	MaxLogBytes   int `json:"maxLogBytes"`
	MaxValueBytes int `json:"maxValueBytes"`
	MaxFrameBytes int `json:"maxFrameBytes"`
}

// Call is a binding invocation from the program.
type Call struct {
	Type   Type            `json:"type"`
	ID     int64           `json:"id"`
	Global string          `json:"global"`
	Name   string          `json:"name"`
	Args   json.RawMessage `json:"args"`
}

// Result settles one call.
type Result struct {
	Type    Type            `json:"type"`
	ID      int64           `json:"id"`
	OK      bool            `json:"ok"`
	Value   json.RawMessage `json:"value,omitempty"`
	Message string          `json:"message,omitempty"`
}

// Log is one captured console call or output write.
type Log struct {
	Type   Type   `json:"type"`
	Source string `json:"source"`
	Level  string `json:"level,omitempty"`
	Text   string `json:"text"`
}

// Done is the runner's last frame.
type Done struct {
	Type Type `json:"type"`
	OK   bool `json:"ok"`
	// Value is present when the program returned something: JSON, or (with
	// ValueKind "inspect") a JSON string holding its rendering.
	Value     json.RawMessage `json:"value,omitempty"`
	ValueKind string          `json:"valueKind,omitempty"`
	// Truncated reports the runner cut Value to Limits.MaxValueBytes.
	Truncated bool          `json:"truncated,omitempty"`
	Error     *ProgramError `json:"error,omitempty"`
	// Exit, on a failed done, reports that the program ended its own
	// process before returning; Error then says how and where.
	Exit *ProgramExit `json:"exit,omitempty"`
	// Timings are the runner's own account of the run, optional: the
	// host uses them only to report where a run's time went (bench).
	Timings *Timings `json:"timings,omitempty"`
}

// Timings are a runner's phase durations in microseconds: Compile from
// the run frame's arrival to a callable program (source map, globals,
// compilation), Evaluate from calling it to its outcome, Render turning
// the outcome into the done frame.
type Timings struct {
	Compile  int64 `json:"compileUs"`
	Evaluate int64 `json:"evaluateUs"`
	Render   int64 `json:"renderUs"`
}

// MaxTimingUs bounds each of a done frame's timings (a day).
const MaxTimingUs = 24 * 3600 * 1e6

// ProgramError describes an exception the program raised.
type ProgramError struct {
	Name    string `json:"name"`
	Message string `json:"message"`
	Stack   string `json:"stack,omitempty"`
}

// ProgramExit is a program's exit before it returned: Status is the exit
// status its process would have had (0..255; process.exit(256) is 0, as the
// kernel would have it).
type ProgramExit struct {
	Status int `json:"status"`
}

// MaxExitStatus is the largest exit status a process has.
const MaxExitStatus = 255

func (*Hello) MessageType() Type  { return TypeHello }
func (*Run) MessageType() Type    { return TypeRun }
func (*Call) MessageType() Type   { return TypeCall }
func (*Result) MessageType() Type { return TypeResult }
func (*Log) MessageType() Type    { return TypeLog }
func (*Done) MessageType() Type   { return TypeDone }
func (*Open) MessageType() Type   { return TypeOpen }
func (*Opened) MessageType() Type { return TypeOpened }
func (*Data) MessageType() Type   { return TypeData }
func (*Ack) MessageType() Type    { return TypeAck }
func (*Close) MessageType() Type  { return TypeClose }

// Protocol-wide bounds that do not depend on configuration.
const (
	// MaxID bounds call ids to integers exact in a float64 (JS numbers).
	MaxID = 1<<53 - 1
	// MaxNameBytes bounds global and function names.
	MaxNameBytes = 1024
	// MaxRunnerBytes bounds the runner identification string.
	MaxRunnerBytes = 128
	// MinFrameBytes is the smallest frame limit a host may configure.
	MinFrameBytes = 4096
	// MaxHostBytes bounds an open frame's host name.
	MaxHostBytes = 255
)

// Error is a protocol violation: the frame is malformed, disallowed, or
// out of range. Code is a stable, machine-readable reason.
type Error struct {
	Code   string
	Reason string
}

func (e *Error) Error() string { return "portproto: " + e.Code + ": " + e.Reason }

// Error codes.
const (
	CodeTooLarge   = "too-large"
	CodeNotUTF8    = "not-utf8"
	CodeNotJSON    = "not-json"
	CodeBadType    = "bad-type"
	CodeBadField   = "bad-field"
	CodeBadVersion = "bad-version"
)

func protoErr(code, format string, args ...any) error {
	return &Error{Code: code, Reason: fmt.Sprintf(format, args...)}
}

// IsProtocolError reports whether err is a protocol violation.
func IsProtocolError(err error) bool {
	var pe *Error
	return errors.As(err, &pe)
}

var globalRe = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// Direction says which end sent a frame.
type Direction string

const (
	RunnerToHost Direction = "runner-to-host"
	HostToRunner Direction = "host-to-runner"
)

// Decode validates and decodes one frame sent in direction dir. maxFrame
// bounds the frame size (0 means no bound beyond the transport's).
func Decode(dir Direction, frame []byte, maxFrame int) (Message, error) {
	if maxFrame > 0 && len(frame) > maxFrame {
		return nil, protoErr(CodeTooLarge, "frame of %d bytes exceeds the %d-byte limit", len(frame), maxFrame)
	}
	if !utf8.Valid(frame) {
		return nil, protoErr(CodeNotUTF8, "frame is not valid UTF-8")
	}
	// The frame is parsed once, into its members; the message is then
	// built from them (see decodeMembers).
	var members map[string]json.RawMessage
	if err := json.Unmarshal(frame, &members); err != nil {
		return nil, protoErr(CodeNotJSON, "frame is not a JSON object: %v", err)
	}
	var typ string
	if json.Unmarshal(members["type"], &typ) != nil {
		return nil, protoErr(CodeBadType, "frame has no string \"type\"")
	}
	var msg Message
	switch Type(typ) {
	case TypeHello:
		msg = &Hello{}
	case TypeCall:
		msg = &Call{}
	case TypeLog:
		msg = &Log{}
	case TypeDone:
		msg = &Done{}
	case TypeRun:
		msg = &Run{}
	case TypeResult:
		msg = &Result{}
	case TypeOpen:
		msg = &Open{}
	case TypeOpened:
		msg = &Opened{}
	case TypeData:
		msg = &Data{}
	case TypeAck:
		msg = &Ack{}
	case TypeClose:
		msg = &Close{}
	default:
		return nil, protoErr(CodeBadType, "unknown message type %q", truncate(typ))
	}
	if sent := senderOf(msg.MessageType()); sent != "" && sent != dir {
		return nil, protoErr(CodeBadType, "%q is not a %s message", typ, dir)
	}
	if err := strictUnmarshal(members, msg); err != nil {
		return nil, err
	}
	if err := validate(msg); err != nil {
		return nil, err
	}
	return msg, nil
}

func senderOf(t Type) Direction {
	switch t {
	case TypeRun, TypeResult, TypeOpened, TypeAck:
		return HostToRunner
	case TypeData, TypeClose:
		return "" // both ways
	default:
		return RunnerToHost
	}
}

// fields lists each message's keys, matched exactly (encoding/json alone
// would also accept them in any letter case).
var fields = map[Type]map[string]bool{
	TypeHello:  set("type", "version", "language", "runner"),
	TypeRun:    set("type", "version", "program", "sourceMap", "bindings", "limits", "egress"),
	TypeCall:   set("type", "id", "global", "name", "args"),
	TypeResult: set("type", "id", "ok", "value", "message"),
	TypeLog:    set("type", "source", "level", "text"),
	TypeDone:   set("type", "ok", "value", "valueKind", "truncated", "error", "exit", "timings"),
	TypeOpen:   set("type", "stream", "host", "port"),
	TypeOpened: set("type", "stream", "ok", "message"),
	TypeData:   set("type", "stream", "data"),
	TypeAck:    set("type", "stream", "bytes"),
	TypeClose:  set("type", "stream", "message"),
}

var (
	bindingFields = set("global", "functions")
	limitFields   = set("maxLogBytes", "maxValueBytes", "maxFrameBytes")
	errorFields   = set("name", "message", "stack")
	egressFields  = set("ca", "window")
	timingFields  = set("compileUs", "evaluateUs", "renderUs")
	exitFields    = set("status")
)

func checkKeys(t Type, prefix string, keys map[string]json.RawMessage, allowed map[string]bool) error {
	for k := range keys {
		if !allowed[k] {
			return protoErr(CodeBadField, "%s: unknown field %q", t, truncate(prefix+k))
		}
	}
	return nil
}

func set(keys ...string) map[string]bool {
	m := make(map[string]bool, len(keys))
	for _, k := range keys {
		m[k] = true
	}
	return m
}

// strictUnmarshal fills msg from a frame's members, matching every key
// exactly, nested ones too (encoding/json alone would accept any letter
// case), and refusing unknown fields and wrong types.
func strictUnmarshal(members map[string]json.RawMessage, msg Message) error {
	if err := checkKeys(msg.MessageType(), "", members, fields[msg.MessageType()]); err != nil {
		return err
	}
	switch msg.MessageType() {
	case TypeRun:
		var bindings []map[string]json.RawMessage
		if json.Unmarshal(members["bindings"], &bindings) == nil {
			for _, b := range bindings {
				if err := checkKeys(TypeRun, "bindings[].", b, bindingFields); err != nil {
					return err
				}
			}
		}
		var limits map[string]json.RawMessage
		if json.Unmarshal(members["limits"], &limits) == nil {
			if err := checkKeys(TypeRun, "limits.", limits, limitFields); err != nil {
				return err
			}
		}
		var egress map[string]json.RawMessage
		if json.Unmarshal(members["egress"], &egress) == nil {
			if err := checkKeys(TypeRun, "egress.", egress, egressFields); err != nil {
				return err
			}
		}
	case TypeDone:
		var perr map[string]json.RawMessage
		if json.Unmarshal(members["error"], &perr) == nil {
			if err := checkKeys(TypeDone, "error.", perr, errorFields); err != nil {
				return err
			}
		}
		var timings map[string]json.RawMessage
		if json.Unmarshal(members["timings"], &timings) == nil {
			if err := checkKeys(TypeDone, "timings.", timings, timingFields); err != nil {
				return err
			}
		}
		var exit map[string]json.RawMessage
		if json.Unmarshal(members["exit"], &exit) == nil {
			if err := checkKeys(TypeDone, "exit.", exit, exitFields); err != nil {
				return err
			}
		}
	}
	if err := decodeMembers(members, msg); err != nil {
		return protoErr(CodeBadField, "%s: %v", msg.MessageType(), err)
	}
	return nil
}

// member is where one key of a message goes: the struct field's index,
// and whether the field is raw JSON (taken as it is, not parsed again).
type member struct {
	index int
	raw   bool
}

// membersOf maps each message type's keys to its struct fields.
var membersOf = func() map[reflect.Type]map[string]member {
	rawType := reflect.TypeFor[json.RawMessage]()
	out := map[reflect.Type]map[string]member{}
	for _, m := range []Message{&Hello{}, &Run{}, &Call{}, &Result{}, &Log{}, &Done{}, &Open{}, &Opened{}, &Data{}, &Ack{}, &Close{}} {
		t := reflect.TypeOf(m).Elem()
		keys := map[string]member{}
		for i := range t.NumField() {
			f := t.Field(i)
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			keys[name] = member{index: i, raw: f.Type == rawType}
		}
		out[t] = keys
	}
	return out
}()

// decodeMembers sets msg's fields from the members of its frame. A raw
// field takes its member's text as it is (the frame parse already checked
// it is JSON); any other is decoded from its member's text alone, nested
// unknown fields refused.
func decodeMembers(members map[string]json.RawMessage, msg Message) error {
	v := reflect.ValueOf(msg).Elem()
	table := membersOf[v.Type()]
	for key, text := range members {
		m, ok := table[key]
		if !ok {
			return fmt.Errorf("unknown field %q", truncate(key))
		}
		f := v.Field(m.index)
		if m.raw {
			f.SetBytes(text)
			continue
		}
		var err error
		if len(text) > 0 && (text[0] == '{' || text[0] == '[') {
			dec := json.NewDecoder(bytes.NewReader(text))
			dec.DisallowUnknownFields()
			err = dec.Decode(f.Addr().Interface())
		} else {
			err = json.Unmarshal(text, f.Addr().Interface())
		}
		if err != nil {
			return fmt.Errorf("field %q: %w", key, err)
		}
	}
	return nil
}

func validate(m Message) error {
	switch m := m.(type) {
	case *Hello:
		if m.Version != Version {
			return protoErr(CodeBadVersion, "runner speaks version %d, host speaks %d", m.Version, Version)
		}
		if m.Language != "typescript" && m.Language != "python" {
			return protoErr(CodeBadField, "hello: unknown language %q", truncate(m.Language))
		}
		if m.Runner == "" || len(m.Runner) > MaxRunnerBytes {
			return protoErr(CodeBadField, "hello: runner must be 1..%d bytes", MaxRunnerBytes)
		}
	case *Run:
		if m.Version != Version {
			return protoErr(CodeBadVersion, "host speaks version %d, runner speaks %d", m.Version, Version)
		}
		seen := map[string]bool{}
		for _, b := range m.Bindings {
			if !globalRe.MatchString(b.Global) || len(b.Global) > MaxNameBytes {
				return protoErr(CodeBadField, "run: binding global %q is not an identifier", truncate(b.Global))
			}
			if seen[b.Global] {
				return protoErr(CodeBadField, "run: duplicate binding global %q", b.Global)
			}
			seen[b.Global] = true
			names := map[string]bool{}
			for _, f := range b.Functions {
				if err := checkName("run: function", f); err != nil {
					return err
				}
				if names[f] {
					return protoErr(CodeBadField, "run: duplicate function %q in %s", truncate(f), b.Global)
				}
				names[f] = true
			}
		}
		if m.Limits.MaxFrameBytes < MinFrameBytes || m.Limits.MaxLogBytes < 0 || m.Limits.MaxValueBytes < 0 {
			return protoErr(CodeBadField, "run: limits out of range")
		}
		if m.Egress != nil && m.Egress.Window < 1 {
			return protoErr(CodeBadField, "run: egress window must be positive")
		}
	case *Open:
		if err := checkID(m.Stream); err != nil {
			return err
		}
		if m.Host == "" || len(m.Host) > MaxHostBytes {
			return protoErr(CodeBadField, "open: host must be 1..%d bytes", MaxHostBytes)
		}
		if m.Port < 1 || m.Port > 65535 {
			return protoErr(CodeBadField, "open: port %d out of range 1..65535", m.Port)
		}
	case *Opened:
		if err := checkID(m.Stream); err != nil {
			return err
		}
	case *Data:
		if err := checkID(m.Stream); err != nil {
			return err
		}
		if len(m.Data) == 0 {
			return protoErr(CodeBadField, "data: carries at least one byte")
		}
	case *Ack:
		if err := checkID(m.Stream); err != nil {
			return err
		}
		if m.Bytes < 1 {
			return protoErr(CodeBadField, "ack: bytes must be positive")
		}
	case *Close:
		if err := checkID(m.Stream); err != nil {
			return err
		}
	case *Call:
		if err := checkID(m.ID); err != nil {
			return err
		}
		if !globalRe.MatchString(m.Global) || len(m.Global) > MaxNameBytes {
			return protoErr(CodeBadField, "call: global %q is not an identifier", truncate(m.Global))
		}
		if err := checkName("call: name", m.Name); err != nil {
			return err
		}
		if len(m.Args) == 0 {
			return protoErr(CodeBadField, "call: args is required (use null for none)")
		}
	case *Result:
		if err := checkID(m.ID); err != nil {
			return err
		}
		if m.OK && len(m.Value) == 0 {
			return protoErr(CodeBadField, "result: ok result needs a value")
		}
		if !m.OK && len(m.Value) != 0 {
			return protoErr(CodeBadField, "result: a failed result carries a message, not a value")
		}
	case *Log:
		switch m.Source {
		case "console":
			switch m.Level {
			case "log", "info", "warn", "error", "debug":
			default:
				return protoErr(CodeBadField, "log: console level %q is not one of log, info, warn, error, debug", truncate(m.Level))
			}
		case "stdout", "stderr":
			if m.Level != "" {
				return protoErr(CodeBadField, "log: %s entries carry no level", m.Source)
			}
		default:
			return protoErr(CodeBadField, "log: source %q is not one of console, stdout, stderr", truncate(m.Source))
		}
	case *Done:
		if t := m.Timings; t != nil {
			for _, v := range []int64{t.Compile, t.Evaluate, t.Render} {
				if v < 0 || v > MaxTimingUs {
					return protoErr(CodeBadField, "done: timings: %d µs is out of range [0, %d]", v, int64(MaxTimingUs))
				}
			}
		}
		if m.Exit != nil {
			if m.OK {
				return protoErr(CodeBadField, "done: an exit is a failed done (ok false, with an error)")
			}
			if m.Exit.Status < 0 || m.Exit.Status > MaxExitStatus {
				return protoErr(CodeBadField, "done: exit status %d is out of range [0, %d]", m.Exit.Status, MaxExitStatus)
			}
		}
		if m.OK {
			if m.Error != nil {
				return protoErr(CodeBadField, "done: ok done carries no error")
			}
			switch m.ValueKind {
			case "":
				if len(m.Value) != 0 {
					return protoErr(CodeBadField, "done: value without valueKind")
				}
			case "json":
				if len(m.Value) == 0 {
					return protoErr(CodeBadField, "done: valueKind json without value")
				}
			case "inspect":
				var s string
				if json.Unmarshal(m.Value, &s) != nil {
					return protoErr(CodeBadField, "done: an inspect value must be a JSON string")
				}
			default:
				return protoErr(CodeBadField, "done: unknown valueKind %q", truncate(m.ValueKind))
			}
		} else {
			if m.Error == nil {
				return protoErr(CodeBadField, "done: failed done needs an error")
			}
			if len(m.Value) != 0 || m.ValueKind != "" || m.Truncated {
				return protoErr(CodeBadField, "done: failed done carries no value")
			}
		}
	}
	return nil
}

func checkID(id int64) error {
	if id < 1 || id > MaxID {
		return protoErr(CodeBadField, "id %d out of range 1..2^53-1", id)
	}
	return nil
}

func checkName(what, s string) error {
	if s == "" || len(s) > MaxNameBytes {
		return protoErr(CodeBadField, "%s must be 1..%d bytes", what, MaxNameBytes)
	}
	return nil
}

func truncate(s string) string {
	const max = 64
	if len(s) <= max {
		return s
	}
	return s[:max] + "…"
}
