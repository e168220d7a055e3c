package sdkgen

import (
	"bytes"
	"encoding/json"
	"errors"
	"slices"
	"strings"
)

// ReservedTool is the Code Mode transport; it is never part of an SDK.
const ReservedTool = "run_code"

// Tool is one tool as the SDK presents it.
type Tool struct {
	Name        string
	Description string
	// InputSchema is the JSON Schema of the tool's arguments (any JSON).
	InputSchema json.RawMessage
	// OutputSchema, when not empty, is the JSON Schema of the tool's
	// structured result (MCP's outputSchema): the value a call resolves
	// to. Empty means the call resolves to the tool's text output.
	OutputSchema json.RawMessage
	// Source names where the tool comes from: the upstream MCP server it
	// was imported from, or empty for the host's own tools (a manifest's
	// command tools, tools a Go host registers). Only the index
	// (FormatIndex) shows it, as the group the tool is listed in.
	Source string
}

// hasOutput reports whether the tool declares a structured result.
func (t Tool) hasOutput() bool { return len(bytes.TrimSpace(t.OutputSchema)) > 0 }

// anyOutput reports whether any of tools declares a structured result.
func anyOutput(tools []Tool) bool {
	for _, t := range tools {
		if t.hasOutput() {
			return true
		}
	}
	return false
}

// Language is a program language an SDK can be rendered for; it matches a
// code runtime's language descriptor.
type Language string

// The languages with a renderer.
const (
	TypeScript Language = "typescript"
	Python     Language = "python"
)

// Languages returns the languages with a renderer, sorted.
func Languages() []Language { return []Language{Python, TypeScript} }

// Supported reports whether l has a renderer.
func (l Language) Supported() bool { return l == TypeScript || l == Python }

// Format selects what Render produces.
type Format string

const (
	// FormatPrompt is the whole SDK prompt section: usage instructions and
	// the declarations in a Markdown code block.
	FormatPrompt Format = "prompt"
	// FormatSource is the declarations alone, as a standalone source file.
	FormatSource Format = "source"
	// FormatIndex is the SDK index: the usage instructions, one line per
	// tool (tools["name"], its argument names with ? for optional ones,
	// the first sentence of its description) grouped by Source, and the
	// instruction to get full declarations from DescribeTool, which
	// returns FormatSource for the tools named.
	FormatIndex Format = "index"
)

// Formats returns the formats Render knows.
func Formats() []Format { return []Format{FormatPrompt, FormatSource, FormatIndex} }

// Errors returned by Render.
var (
	ErrUnknownLanguage = errors.New("sdkgen: unknown language")
	ErrUnknownFormat   = errors.New("sdkgen: unknown format")
)

// Render renders tools in lang and format. It fails only for a language or
// format it does not know (the error wraps ErrUnknownLanguage or
// ErrUnknownFormat and names the known values); the empty format means
// FormatPrompt.
func Render(lang Language, format Format, tools []Tool) (string, error) {
	r, err := RenderWith(lang, format, tools, RenderOptions{})
	return r.Text, err
}

// visible returns the tools an SDK shows, in SDK order: names (and
// descriptions) with invalid UTF-8 repaired, ReservedTool dropped, sorted
// by name byte-wise, and of several tools sharing a name only the first
// by (name, description, input and output schema bytes, source) kept. The input is not modified.
func visible(tools []Tool) []Tool {
	out := make([]Tool, 0, len(tools))
	for _, t := range tools {
		t.Name = validUTF8(t.Name)
		t.Description = validUTF8(t.Description)
		if t.Name == ReservedTool {
			continue
		}
		out = append(out, t)
	}
	slices.SortStableFunc(out, func(a, b Tool) int {
		if c := strings.Compare(a.Name, b.Name); c != 0 {
			return c
		}
		if c := strings.Compare(a.Description, b.Description); c != 0 {
			return c
		}
		if c := bytes.Compare(a.InputSchema, b.InputSchema); c != 0 {
			return c
		}
		if c := bytes.Compare(a.OutputSchema, b.OutputSchema); c != 0 {
			return c
		}
		return strings.Compare(a.Source, b.Source)
	})
	return slices.CompactFunc(out, func(a, b Tool) bool { return a.Name == b.Name })
}
