package registry

import (
	"encoding/json"
	"unicode/utf8"
)

// EventCodeDispatch is the type of the event a run_code sub-call emits.
const EventCodeDispatch = "tool/code-dispatch"

// EventCodeDispatchDropped is the type of the one event a run emits when
// it settles, if it made more sub-calls than its events could record:
// Dropped counts the sub-calls that got no event.
const EventCodeDispatchDropped = "tool/code-dispatch-dropped"

// SummaryBytes bounds Event.Summary.
const SummaryBytes = 200

// Bounds on what one run's events hold: a program decides how many calls
// it makes and with what arguments, and every event reaches the event sink
// (a report, a stream, a terminal).
const (
	// EventArgumentBytes bounds Event.Arguments. Larger arguments are
	// replaced by ArgumentsPreview, the first EventArgumentBytes bytes of
	// their JSON text as a string, with ArgumentsTruncated set.
	EventArgumentBytes = 4 << 10
	// MaxEventsPerRun bounds the sub-call events of one run.
	MaxEventsPerRun = 1000
	// MaxEventBytesPerRun bounds the JSON size of one run's sub-call
	// events together.
	MaxEventBytesPerRun = 1 << 20
)

// Event is the log-only record of one sub-call a run_code program made. It
// stays out of the model's context; persistence and UIs use it to show
// every call a program made. It encodes to JSON with camelCase keys, the
// vocabulary of the rest of the tool wire format (isError, mimeType).
type Event struct {
	// Type is EventCodeDispatch.
	Type string `json:"type"`
	// ParentCallID is the run_code call's id.
	ParentCallID string `json:"parentCallId"`
	// CallID is the sub-call's id, "<parent>:code:<Seq>".
	CallID string `json:"callId"`
	// Seq is the sub-call's number in submission order, from 1.
	Seq int `json:"seq"`
	// Tool is the called tool's name.
	Tool string `json:"tool"`
	// Arguments is the normalized arguments (see NormalizeArguments),
	// absent when they were longer than EventArgumentBytes.
	Arguments json.RawMessage `json:"arguments,omitempty"`
	// ArgumentsTruncated reports arguments too long for the event:
	// ArgumentsPreview holds the start of their JSON text and
	// ArgumentsBytes its full length.
	ArgumentsTruncated bool   `json:"argumentsTruncated,omitempty"`
	ArgumentsPreview   string `json:"argumentsPreview,omitempty"`
	ArgumentsBytes     int    `json:"argumentsBytes,omitempty"`
	IsError            bool   `json:"isError"`
	// Summary is the start of what the program got: the result text, the
	// structured value's JSON for a tool with an output schema, or the
	// error message for an error; at most SummaryBytes bytes plus "…" when
	// cut.
	Summary string `json:"summary"`
	// Decision, in an EventApproval event, is the decision: allow, deny
	// or allowForRun; Reason explains a denial.
	Decision string `json:"decision,omitempty"`
	Reason   string `json:"reason,omitempty"`
	// Dropped, in an EventCodeDispatchDropped event, counts the run's
	// sub-calls that got no event.
	Dropped int `json:"dropped,omitempty"`
}

// withArguments sets the event's arguments, cut to EventArgumentBytes.
func (e *Event) withArguments(args json.RawMessage) {
	if len(args) <= EventArgumentBytes {
		e.Arguments = args
		return
	}
	e.ArgumentsTruncated = true
	e.ArgumentsPreview = summarize(string(args), EventArgumentBytes)
	e.ArgumentsBytes = len(args)
}

// size is the length of the event's JSON encoding.
func (e *Event) size() int {
	b, err := json.Marshal(e)
	if err != nil {
		return MaxEventBytesPerRun // cannot happen: every field encodes
	}
	return len(b)
}

// summarize cuts s to at most max bytes on a rune boundary, marking a cut.
func summarize(s string, max int) string {
	if len(s) <= max {
		return s
	}
	cut := max
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}
