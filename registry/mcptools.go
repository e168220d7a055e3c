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
			m.Description = a.withSDK(m.Description, sdk)
			m.OutputSchema = RunCodeOutputSchema
		}
		out = append(out, m)
	}
	return out
}

// sdkSeparator separates run_code's description from the SDK section it
// carries over MCP.
const sdkSeparator = "\n\n"

// withSDK is desc, run_code's description, followed by sdkSeparator and
// sdk, the SDK section; desc alone without one. When Assemble rendered
// them as one string (runCodeSDK) and the assembly still holds what it
// rendered, it is that string: the SDK, which can be megabytes, is not
// copied. Telling costs a comparison of lengths and pointers (two strings
// sharing their bytes compare equal without reading them); an assembly
// changed since it was assembled gets a copy with its own text.
func (a Assembly) withSDK(desc, sdk string) string {
	if sdk == "" {
		return desc
	}
	if j := a.runCodeSDK; len(j) == len(desc)+len(sdkSeparator)+len(sdk) && j[len(j)-len(sdk):] == sdk &&
		j[:len(desc)] == desc && j[len(desc):len(desc)+len(sdkSeparator)] == sdkSeparator {
		return j
	}
	return desc + sdkSeparator + sdk
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
