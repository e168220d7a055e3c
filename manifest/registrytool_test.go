package manifest

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/dsh-container/dsh-container/registry"
)

func TestRegistryTool(t *testing.T) {
	tool := Tool{
		Name:        "echo",
		Description: "Echoes its arguments",
		InputSchema: json.RawMessage(`{"type":"object"}`),
		Command:     []string{"/bin/cat"},
	}
	rt := tool.RegistryTool()
	if rt.Name != "echo" || rt.Description != "Echoes its arguments" || string(rt.Parameters) != `{"type":"object"}` {
		t.Fatalf("%+v", rt)
	}
	blocks, err := rt.Execute(context.Background(), registry.Execution{CallID: "c1", Name: "echo", Arguments: json.RawMessage(`{"x":1}`)})
	if err != nil || len(blocks) != 1 || blocks[0].Type != registry.BlockText || blocks[0].Text != `{"x":1}` {
		t.Fatalf("%+v %v", blocks, err)
	}

	// A failure rejects the call with the tool's message; limits apply.
	tool.Command = []string{"/bin/sh", "-c", "echo 'no such item' >&2; exit 2"}
	if blocks, err := tool.RegistryTool().Execute(context.Background(), registry.Execution{Arguments: json.RawMessage(`{}`)}); err == nil || err.Error() != "no such item" || blocks != nil {
		t.Fatalf("%+v %v", blocks, err)
	}
	tool.Command, tool.TimeoutMs = []string{"/bin/sleep", "30"}, 100
	if _, err := tool.RegistryTool().Execute(context.Background(), registry.Execution{}); err == nil || err.Error() != `tool "echo" timed out after 100ms` {
		t.Fatalf("%v", err)
	}
}
