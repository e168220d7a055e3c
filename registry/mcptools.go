package registry

import (
	"encoding/json"

	"github.com/dsh-container/dsh-container/backend"
)

// MCPTool is a wire tool in MCP's tool shape, as tools/list carries it.
type MCPTool struct {
	Name         string          `json:"name"`
	Description  string          `json:"description"`
	InputSchema  json.RawMessage `json:"inputSchema"`
	OutputSchema json.RawMessage `json:"outputSchema,omitempty"`
	Annotations  json.RawMessage `json:"annotations,omitempty"`
}

// MCPTools returns the assembly's wire tools in MCP's tool shape, in the
// same order. An MCP client has no system prompt the registry could add
// its sections to, so run_code's description carries the SDK section
// after its own text, and run_code declares RunCodeOutputSchema, the
// shape of RunCodeOutput.
func (a Assembly) MCPTools() []MCPTool {
	var sdk string
	for _, s := range a.Sections {
		if s.Name == SectionSDK {
			sdk = s.Text
		}
	}
	out := make([]MCPTool, 0, len(a.Tools))
	for _, t := range a.Tools {
		m := MCPTool{Name: t.Name, Description: t.Description, InputSchema: t.Parameters, OutputSchema: t.OutputSchema, Annotations: t.Annotations}
		if t.Name == RunCode {
			if sdk != "" {
				m.Description += "\n\n" + sdk
			}
			m.OutputSchema = RunCodeOutputSchema
		}
		out = append(out, m)
	}
	return out
}

// RunCodeOutput is run_code's structured result where a caller takes one
// (MCP's structuredContent): what the program returned (JSON null when
// nothing), its log entries, and its failure or null.
type RunCodeOutput struct {
	Value json.RawMessage    `json:"value"`
	Logs  []backend.LogEntry `json:"logs"`
	Error *backend.Failure   `json:"error"`
}

// NewRunCodeOutput is the structured result of a run.
func NewRunCodeOutput(rr *backend.RunResult) RunCodeOutput {
	out := RunCodeOutput{Value: json.RawMessage("null"), Logs: rr.Logs, Error: rr.Error}
	if len(rr.Value) > 0 && json.Valid(rr.Value) {
		out.Value = rr.Value
	}
	if out.Logs == nil {
		out.Logs = []backend.LogEntry{}
	}
	return out
}

// RunCodeOutputSchema is the JSON Schema of RunCodeOutput.
var RunCodeOutputSchema = json.RawMessage(`{"type":"object","properties":{` +
	`"value":{"description":"What the program returned, as JSON (a non-JSON value as the string of its inspect/repr rendering); null when it returned nothing."},` +
	`"logs":{"type":"array","description":"What the program logged, in order.","items":{"type":"object","properties":{` +
	`"source":{"type":"string","enum":["console","stdout","stderr"]},` +
	`"level":{"type":"string","enum":["log","info","warn","error","debug"]},` +
	`"text":{"type":"string"}},"required":["source","text"]}},` +
	`"error":{"description":"How the program failed; null when it completed.","anyOf":[{"type":"null"},{"type":"object","properties":{` +
	`"kind":{"type":"string","enum":["exception","timeout","abort","oom","exit"]},` +
	`"message":{"type":"string"}},"required":["kind","message"]}]}},` +
	`"required":["value","logs","error"]}`)
