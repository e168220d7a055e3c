package registry

import (
	"encoding/json"
	"unicode/utf8"
)

// EventCodeDispatch is the type of the event a run_code sub-call emits.
const EventCodeDispatch = "tool/code-dispatch"

// SummaryBytes bounds Event.Summary.
const SummaryBytes = 200

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
	// Arguments is the normalized arguments (see NormalizeArguments).
	Arguments json.RawMessage `json:"arguments"`
	IsError   bool            `json:"isError"`
	// Summary is the start of the result text (the error message for an
	// error), at most SummaryBytes bytes plus "…" when cut.
	Summary string `json:"summary"`
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
