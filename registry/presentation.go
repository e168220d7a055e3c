package registry

// CardGeneric is the generic card type; KindExecute the render kind of a
// program.
const (
	CardGeneric = "generic"
	KindExecute = "execute"
)

// Card is a tool call's or result's render intent for a client UI. run_code
// is presented as a generic card of kind execute whose title is the program
// text — clients reliably render an execute card's title, while some omit
// its body — and whose raw input is the program too. Its result card's
// content is the captured output. It is not a terminal card: a program is
// not a shell command in a working directory.
type Card struct {
	Type     string `json:"type"`
	Kind     string `json:"kind,omitempty"`
	Title    string `json:"title,omitempty"`
	RawInput string `json:"rawInput,omitempty"`
	Content  string `json:"content,omitempty"`
}

// PresentCall returns the call card for call, or nil when the tool has no
// render intent of its own (every registered tool: clients use their
// default) or the arguments hold no program.
func (r *Registry) PresentCall(call Call) *Card {
	if call.Name != RunCode {
		return nil
	}
	args, err := NormalizeArguments(call.Arguments)
	if err != nil {
		return nil
	}
	program, err := parseRunCodeArgs(args)
	if err != nil {
		return nil
	}
	return &Card{Type: CardGeneric, Kind: KindExecute, Title: program, RawInput: program}
}
