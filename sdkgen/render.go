package sdkgen

import (
	"bytes"
	"fmt"
	"hash/maphash"
	"slices"
	"strings"
)

// RenderOptions adjusts RenderWith. The zero value renders as Render does.
type RenderOptions struct {
	// Prefix is text the result starts with, the rendering following it in
	// the same string: a caller that shows the SDK after text of its own
	// (an MCP run_code description) gets both without a copy of the SDK.
	Prefix string
	// Limit, when positive, is the length in bytes (Prefix not counted)
	// past which the rendering is not wanted: RenderWith stops as soon as
	// the text is certain to be longer, and reports Over instead of the
	// text. Telling that a large tool set's SDK is over the limit costs
	// about Limit bytes of rendering, not the whole SDK.
	Limit int
}

// Rendered is what RenderWith returns.
type Rendered struct {
	// Text is the Prefix followed by the rendering; empty when Over.
	Text string
	// Over reports that the rendering is longer than the Limit.
	Over bool
}

// RenderWith renders tools in lang and format like Render, into one
// string sized from the tools before it starts, after opts.Prefix, and
// within opts.Limit.
func RenderWith(lang Language, format Format, tools []Tool, opts RenderOptions) (Rendered, error) {
	if format == "" {
		format = FormatPrompt
	}
	if !slices.Contains(Formats(), format) {
		return Rendered{}, fmt.Errorf("%w %q (known: %s, %s, %s)", ErrUnknownFormat, format, FormatPrompt, FormatSource, FormatIndex)
	}
	if !lang.Supported() {
		return Rendered{}, fmt.Errorf("%w %q (known: %s, %s)", ErrUnknownLanguage, lang, Python, TypeScript)
	}
	return render(lang, format, tools, opts), nil
}

// render renders tools in a supported lang and a known format.
func render(lang Language, format Format, tools []Tool, opts RenderOptions) Rendered {
	ts := visible(tools)
	limit := 0
	if opts.Limit > 0 {
		limit = len(opts.Prefix) + opts.Limit
	}
	size := len(opts.Prefix) + len(pyInstructions) + len(tsOutputSentence) + len(pyHeader) + 64
	if format == FormatIndex {
		size += indexEstimate(ts)
	} else {
		size += estimate(ts)
	}
	r := &renderer{w: newOut(size, limit)}
	r.w.str(opts.Prefix)
	switch {
	case lang == TypeScript && format == FormatPrompt:
		r.tsPrompt(ts)
	case lang == TypeScript && format == FormatSource:
		r.tsSource(ts)
	case lang == TypeScript:
		r.index(ts, tsIndex)
	case format == FormatPrompt:
		r.pyPrompt(ts)
	case format == FormatSource:
		r.pySource(ts)
	default:
		r.index(ts, pyIndex)
	}
	if r.w.over || limit > 0 && len(r.w.b) > limit {
		return Rendered{Over: true}
	}
	return Rendered{Text: r.w.String()}
}

// renderer renders one SDK text into its buffer, parsing and mapping each
// tool's schemas in an arena that the next tool reuses.
type renderer struct {
	w    *out
	a    arena
	line []byte // the doc line docLine returned
	sum  []byte // the summary summary returned

	// spans are the places in the buffer of the alternatives a union has
	// written (to drop one equal to an earlier one) and of the types an
	// object's properties have (for its index signature): a stack, each
	// union and object using the part above where it started.
	spans []span
	seed  maphash.Seed

	pyTypes []string // the annotations of the Python classes being written

	// pieces, when not nil, collects each tool's piece of a Python stub
	// module (pythonSource).
	pieces *[]pyPiece
}

// span is a piece of the buffer, from and to positions, with its hash when
// a long union looks it up by hash.
type span struct {
	from, to int
	hash     uint64
}

// instructions writes the fixed text, with sentence added after anchor
// when a visible tool declares a structured result: a tool set without
// output schemas keeps its text byte for byte.
func (w *out) instructions(text, anchor, sentence string, tools []Tool) {
	if !anyOutput(tools) {
		w.str(text)
		return
	}
	before, after, _ := strings.Cut(text, anchor)
	w.str(before)
	w.str(anchor)
	w.str(sentence)
	w.str(after)
}

// estimate is the size to allocate for the declarations of tools: their
// own bytes (names, descriptions, schemas) and a little for each. An SDK
// is usually a little smaller than the JSON it is rendered from (the JSON
// syntax goes; comment markers and indentation come); a larger one grows
// the buffer.
func estimate(tools []Tool) int {
	n := 0
	for _, t := range tools {
		n += toolEstimate(t)
	}
	return n
}

// toolEstimate is estimate for one tool: each line of a description,
// the tool's or a property's (a "\n" in a schema), starts with
// indentation and a comment marker.
func toolEstimate(t Tool) int {
	return 2*len(t.Name) + len(t.Description) + 8*strings.Count(t.Description, "\n") +
		len(t.InputSchema) + len(t.OutputSchema) + 8*(bytes.Count(t.InputSchema, []byte(`\n`))+bytes.Count(t.OutputSchema, []byte(`\n`))) + 64
}

// indexEstimate is estimate for the index: a line per tool, whose summary
// is at most MaxIndexSummary bytes.
func indexEstimate(tools []Tool) int {
	n := 0
	for _, t := range tools {
		n += len(t.Name) + len(t.Source)/8 + min(len(t.Description), MaxIndexSummary+8) + min(len(t.InputSchema)/8, 256) + 32
	}
	return n
}
