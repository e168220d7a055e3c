// Package sdkgen renders the Code Mode SDK — the only view of the tools a
// model gets in Code Mode — from the tools' JSON Schemas, as TypeScript
// declarations or Python stubs, plus the usage instructions around them.
//
// Rendering is pure, total and deterministic: any JSON value is accepted as
// a schema (unsupported constructs degrade to unknown / Any), tools are
// ordered lexicographically whatever the input order, and the same tool set
// always yields byte-identical text, so the prompt prefix stays cacheable.
package sdkgen

import "encoding/json"

// ReservedTool is the Code Mode transport; it is never part of an SDK.
const ReservedTool = "run_code"

// Tool is one tool as the SDK presents it.
type Tool struct {
	Name        string
	Description string
	// InputSchema is the JSON Schema of the tool's arguments (any JSON).
	InputSchema json.RawMessage
}

// TypeScriptSource renders the declaration block: a standalone TypeScript
// file declaring `tools`.
func TypeScriptSource(tools []Tool) string { return "" }

// TypeScriptPrompt renders the whole TypeScript SDK prompt section: usage
// instructions followed by the declaration block.
func TypeScriptPrompt(tools []Tool) string { return "" }

// PythonSource renders the Python stub block: a standalone module that
// CPython compiles.
func PythonSource(tools []Tool) string { return "" }

// PythonPrompt renders the whole Python SDK prompt section.
func PythonPrompt(tools []Tool) string { return "" }
