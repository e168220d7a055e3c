package registry

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/containerd/errdefs"

	"github.com/dsh-container/dsh-container/backend"
)

// Tool is a capability the model can call, natively or from a program.
type Tool struct {
	// Name identifies the tool: any non-empty UTF-8 string of at most
	// backend.MaxFunctionNameBytes bytes except "run_code". Programs reach
	// it as tools["name"].
	Name        string
	Description string
	// Parameters is the JSON Schema (a JSON object) of the arguments. Nil
	// means {"type":"object"}. The registry does not validate arguments
	// against it: that is the tool's job.
	Parameters json.RawMessage
	// OutputSchema, when set, is the JSON Schema (a JSON object or
	// boolean) of the tool's structured result, MCP's outputSchema: the SDK
	// declares it as the call's result type, and a program's call resolves
	// to the result's Structured value instead of its text. Nil means the
	// tool's result is its text.
	OutputSchema json.RawMessage
	// Annotations, when set, is a JSON object of hints about the tool in
	// MCP's shape (title, readOnlyHint, destructiveHint, idempotentHint,
	// openWorldHint). The registry carries it to the wire tool list and
	// never acts on it.
	Annotations json.RawMessage
	// Source names where the tool comes from: the upstream MCP server it
	// was imported from, empty for the host's own tools. The SDK index
	// groups tools by it; nothing else depends on it.
	Source string
	// Execute runs the tool. A returned error makes the call an error
	// result whose text is err.Error(); from a program, it rejects the
	// binding with that message. ctx is cancelled when the caller gives up
	// (for a sub-call: when the run_code run settles).
	Execute func(ctx context.Context, exec Execution) ([]Block, error)
	// ExecuteOutput runs a tool whose result may carry a structured value
	// besides its content. Set Execute or ExecuteOutput, not both; errors
	// are as for Execute.
	ExecuteOutput func(ctx context.Context, exec Execution) (Output, error)
}

// Output is a tool's result: content for the model and, optionally, a
// structured value (MCP's structuredContent), one JSON value.
type Output struct {
	Content    []Block
	Structured json.RawMessage
}

// Execution is the immutable identity and input of one call, as hooks,
// guards, observers and the tool itself see it.
type Execution struct {
	// CallID is the call's id: the caller's for a native call,
	// "<parent>:code:<n>" for the n-th sub-call of a run_code program.
	CallID string
	// Name is the tool's name.
	Name string
	// Arguments is the canonical JSON of the arguments (see Execute).
	Arguments json.RawMessage
	// Parent is the run_code call id for a sub-call, "" for a native call.
	Parent string
	// Scope is the visibility scope of the call (inherited by sub-calls).
	Scope Scope
	// Annotations is the called tool's Annotations (nil for run_code and
	// tools without), for guards that decide by them.
	Annotations json.RawMessage
}

// BlockType names the kind of a content Block.
type BlockType string

const (
	BlockText  BlockType = "text"
	BlockImage BlockType = "image"
)

// Block is one piece of a tool's result content. Text blocks carry Text;
// other types (image, or any other type name such as "audio" or
// "resource") carry MimeType and Data. Data is base64 in JSON.
type Block struct {
	Type     BlockType `json:"type"`
	Text     string    `json:"text,omitempty"`
	MimeType string    `json:"mimeType,omitempty"`
	Data     []byte    `json:"data,omitempty"`
}

// TextBlock returns a text block.
func TextBlock(s string) Block { return Block{Type: BlockText, Text: s} }

// ImageBlock returns an image block.
func ImageBlock(mimeType string, data []byte) Block {
	return Block{Type: BlockImage, MimeType: mimeType, Data: data}
}

// String renders the block as a program sees it: the text of a text block,
// a placeholder such as "[image: image/png, 1234 bytes]" for anything else.
func (b Block) String() string {
	if b.Type == BlockText {
		return b.Text
	}
	typ := string(b.Type)
	if typ == "" {
		typ = "unknown"
	}
	var parts []string
	if b.MimeType != "" {
		parts = append(parts, b.MimeType)
	}
	if len(b.Data) > 0 || b.MimeType != "" {
		parts = append(parts, fmt.Sprintf("%d bytes", len(b.Data)))
	}
	if len(parts) == 0 {
		return "[" + typ + "]"
	}
	return "[" + typ + ": " + strings.Join(parts, ", ") + "]"
}

// joinBlocks renders blocks as one string, one block per line.
func joinBlocks(blocks []Block) string {
	parts := make([]string, len(blocks))
	for i, b := range blocks {
		parts[i] = b.String()
	}
	return strings.Join(parts, "\n")
}

func cloneBlocks(blocks []Block) []Block {
	if blocks == nil {
		return nil
	}
	out := make([]Block, len(blocks))
	for i, b := range blocks {
		if b.Data != nil {
			b.Data = append([]byte(nil), b.Data...)
		}
		out[i] = b
	}
	return out
}

func (t *Tool) validate() error {
	switch {
	case t.Name == "":
		return errorf(errdefs.ErrInvalidArgument, "empty tool name")
	case t.Name == RunCode:
		return errorf(errdefs.ErrInvalidArgument, "%q is reserved for the Code Mode transport", RunCode)
	case t.Name == DescribeTools:
		return errorf(errdefs.ErrInvalidArgument, "%q is reserved for Code Mode's declarations on demand", DescribeTools)
	case !utf8.ValidString(t.Name):
		return errorf(errdefs.ErrInvalidArgument, "tool name is not valid UTF-8")
	case len(t.Name) > backend.MaxFunctionNameBytes:
		return errorf(errdefs.ErrInvalidArgument, "tool name is longer than %d bytes", backend.MaxFunctionNameBytes)
	case t.Execute == nil && t.ExecuteOutput == nil:
		return errorf(errdefs.ErrInvalidArgument, "tool has no Execute function")
	case t.Execute != nil && t.ExecuteOutput != nil:
		return errorf(errdefs.ErrInvalidArgument, "tool sets both Execute and ExecuteOutput")
	}
	return nil
}

// hasOutput reports whether the tool declares a structured result.
func (t *Tool) hasOutput() bool { return len(t.OutputSchema) > 0 }

var defaultSchema = json.RawMessage(`{"type":"object"}`)

// normalizeOutputSchema checks an output schema: absent (nil), or a JSON
// object or boolean without duplicate keys, returned compacted.
func normalizeOutputSchema(raw json.RawMessage) (json.RawMessage, error) {
	if len(bytes.TrimSpace(raw)) == 0 {
		return nil, nil
	}
	kind, err := checkJSON(raw)
	if err != nil {
		return nil, errorf(errdefs.ErrInvalidArgument, "output schema: %w", err)
	}
	if kind != '{' && kind != 't' && kind != 'f' {
		return nil, errorf(errdefs.ErrInvalidArgument, "output schema must be a JSON object or boolean")
	}
	return compact(raw)
}

// normalizeAnnotations checks annotations: absent (nil), or a JSON object
// without duplicate keys, returned compacted.
func normalizeAnnotations(raw json.RawMessage) (json.RawMessage, error) {
	if len(bytes.TrimSpace(raw)) == 0 {
		return nil, nil
	}
	kind, err := checkJSON(raw)
	if err != nil {
		return nil, errorf(errdefs.ErrInvalidArgument, "annotations: %w", err)
	}
	if kind != '{' {
		return nil, errorf(errdefs.ErrInvalidArgument, "annotations must be a JSON object")
	}
	return compact(raw)
}

// checkJSON checks that raw is one lossless JSON value without duplicate
// keys and returns the first byte of its text, which tells its kind. It
// builds no canonical form (CheckLossless): a schema of long descriptions
// costs its tape, not copies of its text — a tool source's list is
// checked again by every registry it is rebuilt into, on every change
// (issue 24 §7).
func checkJSON(raw json.RawMessage) (byte, error) {
	if err := CheckLossless(raw); err != nil {
		return 0, err
	}
	return raw[skipSpace(raw, 0)], nil
}

// compact returns raw compacted: raw itself when it already is (JSON a
// tool source hands over is kept once, not once more per registry, and
// telling costs a scan, not a compacted copy to compare).
func compact(raw json.RawMessage) (json.RawMessage, error) {
	if isCompact(raw) {
		return raw, nil
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, raw); err != nil {
		return nil, errorf(errdefs.ErrInvalidArgument, "%w", err)
	}
	if bytes.Equal(buf.Bytes(), raw) {
		return raw, nil
	}
	return buf.Bytes(), nil
}

// normalizeSchema checks that a parameters schema is a JSON object without
// duplicate keys and returns it compacted. Key order is kept: renderers may
// present properties in the order the tool wrote them.
func normalizeSchema(raw json.RawMessage) (json.RawMessage, error) {
	if len(bytes.TrimSpace(raw)) == 0 { // bytes.TrimSpace: string(raw) would be a copy
		return defaultSchema, nil
	}
	kind, err := checkJSON(raw)
	if err != nil {
		return nil, errorf(errdefs.ErrInvalidArgument, "parameters schema: %w", err)
	}
	if kind != '{' {
		return nil, errorf(errdefs.ErrInvalidArgument, "parameters schema must be a JSON object")
	}
	return compact(raw)
}

// isCompact reports whether valid JSON raw has no space between its
// tokens, so that json.Compact, which only takes such space out, would
// return it unchanged.
func isCompact(raw []byte) bool {
	inString := false
	for i := 0; i < len(raw); i++ {
		c := raw[i]
		switch {
		case inString && c == '\\':
			i++
		case c == '"':
			inString = !inString
		case !inString && (c == ' ' || c == '\t' || c == '\n' || c == '\r'):
			return false
		}
	}
	return true
}
