package manifest

import "encoding/json"

// Annotations are hints about a command tool, in MCP's ToolAnnotations
// shape. They reach the tool list (MCP's tools/list, the SDK) and
// policies: `--policy safe` asks before a tool with DestructiveHint true
// runs. They are hints, not guarantees: nothing checks that a tool keeps
// them.
type Annotations struct {
	// Title is a human-readable name of the tool.
	Title string `json:"title,omitempty"`
	// ReadOnlyHint says the tool does not change its environment.
	ReadOnlyHint *bool `json:"readOnlyHint,omitempty"`
	// DestructiveHint says the tool may destroy or overwrite data.
	DestructiveHint *bool `json:"destructiveHint,omitempty"`
	// IdempotentHint says calling it again with the same arguments has
	// no further effect.
	IdempotentHint *bool `json:"idempotentHint,omitempty"`
	// OpenWorldHint says it reaches beyond a closed domain (the web).
	OpenWorldHint *bool `json:"openWorldHint,omitempty"`
}

// raw is the annotations as the registry carries them, nil for none.
func (a *Annotations) raw() json.RawMessage {
	if a == nil {
		return nil
	}
	b, err := json.Marshal(a)
	if err != nil {
		return nil // cannot happen: strings and booleans
	}
	return b
}
