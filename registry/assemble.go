package registry

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/dsh-container/dsh-container/sdkgen"
)

// SectionSDK names the prompt section holding the Code Mode SDK.
const SectionSDK = "tools:sdk"

// WireTool is a tool as offered to the model: a native function schema,
// with the tool's output schema and annotations when it has them.
type WireTool struct {
	Name         string          `json:"name"`
	Description  string          `json:"description"`
	Parameters   json.RawMessage `json:"parameters"`
	OutputSchema json.RawMessage `json:"outputSchema,omitempty"`
	Annotations  json.RawMessage `json:"annotations,omitempty"`
}

// PromptSection is a named block of system-prompt text.
type PromptSection struct {
	Name string `json:"name"`
	Text string `json:"text"`
}

// Assembly is the registry's contribution to one model request.
type Assembly struct {
	// Mode is the mode it was assembled in.
	Mode Mode `json:"mode"`
	// Tools is the wire tool list: the visible tools sorted by name in
	// ModeNative; only run_code in ModeCode; the visible tools then
	// run_code in ModeBoth. When the SDK section is the index (SDKIndex,
	// or SDKAuto past its threshold), describe_tools follows run_code.
	Tools []WireTool `json:"tools"`
	// Sections holds the SDK section (SectionSDK) in ModeCode and ModeBoth,
	// the full SDK or the index as WithSDK says; it is empty in ModeNative.
	Sections []PromptSection `json:"sections"`

	// runCodeSDK is run_code's description, a blank line and the SDK
	// section, rendered as one string whose end is the section's text:
	// MCPTools offers it as run_code's description without a copy of the
	// SDK (see withSDK).
	runCodeSDK string
}

// Assemble returns the wire tool list and prompt sections for scope.
//
// In ModeCode and ModeBoth it needs a runtime whose language has an SDK
// renderer, and fails loudly (errdefs.ErrFailedPrecondition, naming the
// known languages) without one; ModeNative never touches the runtime. The
// SDK section lists exactly the tools the scope can execute, sorted by
// name, never run_code, and run_code's description speaks the runtime's
// language. The output is deterministic for a given tool set.
func (r *Registry) Assemble(ctx context.Context, scope Scope) (Assembly, error) {
	if err := r.cfg.err; err != nil {
		return Assembly{}, fmt.Errorf("assemble tools: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return Assembly{}, fmt.Errorf("assemble tools: %w", err)
	}
	mode := r.cfg.mode
	visible := r.visible(scope)
	asm := Assembly{Mode: mode, Tools: []WireTool{}, Sections: []PromptSection{}}
	if mode == ModeNative || mode == ModeBoth {
		for _, t := range visible {
			asm.Tools = append(asm.Tools, WireTool{Name: t.Name, Description: t.Description, Parameters: t.Parameters,
				OutputSchema: t.OutputSchema, Annotations: t.Annotations})
		}
	}
	if mode.codeMode() {
		rt, lang, flavor, err := r.codeRuntime()
		if err != nil {
			return Assembly{}, fmt.Errorf("assemble tools: %w", err)
		}
		run := flavor.wireTool()
		text, joined, index, err := r.sdkSection(lang, sdkTools(visible), run.Description+sdkSeparator)
		if err != nil {
			return Assembly{}, fmt.Errorf("assemble tools: %w", err)
		}
		asm.Tools = append(asm.Tools, run)
		if index {
			asm.Tools = append(asm.Tools, describeWireTool(rt.Language()))
		}
		asm.Sections = append(asm.Sections, PromptSection{Name: SectionSDK, Text: text})
		asm.runCodeSDK = joined
	}
	return asm, nil
}

// sdkTools converts tools to sdkgen's view of them.
func sdkTools(tools []Tool) []sdkgen.Tool {
	out := make([]sdkgen.Tool, len(tools))
	for i, t := range tools {
		out[i] = sdkgen.Tool{Name: t.Name, Description: t.Description, InputSchema: t.Parameters, OutputSchema: t.OutputSchema, Source: t.Source}
	}
	return out
}
