package server_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/dsh-container/dsh-container/backend"
	"github.com/dsh-container/dsh-container/registry"
	"github.com/dsh-container/dsh-container/registry/registrytest"
	"github.com/dsh-container/dsh-container/server"
)

// typedTool has an output schema and annotations.
var typedTool = registry.Tool{
	Name:         "count",
	Description:  "Count.",
	Parameters:   json.RawMessage(`{"type":"object"}`),
	OutputSchema: json.RawMessage(`{"type":"object","properties":{"n":{"type":"integer"}}}`),
	Annotations:  json.RawMessage(`{"readOnlyHint":true}`),
	ExecuteOutput: func(context.Context, registry.Execution) (registry.Output, error) {
		return registry.Output{Structured: json.RawMessage(`{"n":1}`)}, nil
	},
}

// GET /v1/tools lists what the mode offers in MCP's tool shape, run_code
// with its schema and the SDK of the requested language.
func TestTools(t *testing.T) {
	for _, c := range []struct {
		mode  registry.Mode
		query string
		lang  string
		names string
	}{
		{"", "", "typescript", "run_code"},
		{registry.ModeCode, "?language=python", "python", "run_code"},
		{registry.ModeBoth, "?language=typescript", "typescript", "count echo run_code"},
		{registry.ModeNative, "", "", "count echo"},
	} {
		opts := []server.Option{server.WithTools(typedTool)}
		if c.mode != "" {
			opts = append(opts, server.WithMode(c.mode))
		}
		f := newFixture(t, opts...)
		rec := f.do(t, "GET", "/v1/tools"+c.query, "")
		if rec.Code != http.StatusOK {
			t.Fatalf("%s%s: %d %s", c.mode, c.query, rec.Code, rec.Body)
		}
		var got server.ToolsResponse
		if err := json.Unmarshal(rec.Body.Bytes(), &got); err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, tool := range got.Tools {
			names = append(names, tool.Name)
			switch tool.Name {
			case registry.RunCode:
				fence := map[string]string{"typescript": "```ts", "python": "```python"}[c.lang]
				if !strings.Contains(tool.Description, fence) || !strings.Contains(string(tool.InputSchema), `"code"`) || string(tool.OutputSchema) != string(registry.RunCodeOutputSchema) {
					t.Errorf("%s%s: run_code = %+v", c.mode, c.query, tool)
				}
			case "count":
				if string(tool.OutputSchema) == "" || string(tool.Annotations) != `{"readOnlyHint":true}` {
					t.Errorf("count = %+v", tool)
				}
			}
		}
		if strings.Join(names, " ") != c.names || got.Language != c.lang || (c.mode != "" && got.Mode != c.mode) {
			t.Errorf("%s%s: %s %q %q", c.mode, c.query, names, got.Language, got.Mode)
		}
		if !strings.Contains(rec.Body.String(), `"inputSchema":`) {
			t.Errorf("not MCP's shape: %s", rec.Body)
		}
	}
	f := newFixture(t)
	for _, q := range []string{"?language=ruby", "?lang=python"} {
		if rec := f.do(t, "GET", "/v1/tools"+q, ""); rec.Code != http.StatusBadRequest {
			t.Errorf("%s: %d %s", q, rec.Code, rec.Body)
		}
	}
	// A language not served.
	py := registrytest.New(backend.Python)
	defer py.Close(context.Background())
	srv, err := server.New(server.WithRuntime(py))
	if err != nil {
		t.Fatal(err)
	}
	f = &fixture{srv: srv}
	if rec := f.do(t, "GET", "/v1/tools?language=typescript", ""); rec.Code != http.StatusBadRequest || !strings.Contains(rec.Body.String(), "not served") {
		t.Errorf("unserved language: %d %s", rec.Code, rec.Body)
	}
	if rec := f.do(t, "GET", "/v1/tools", ""); rec.Code != http.StatusOK || !strings.Contains(rec.Body.String(), `"language":"python"`) {
		t.Errorf("the default language when only Python is served: %d %s", rec.Code, rec.Body)
	}
}

// In native mode there is no program to run.
func TestRunNativeMode(t *testing.T) {
	f := newFixture(t, server.WithMode(registry.ModeNative))
	rec := f.do(t, "POST", "/v1/run", runBody("typescript", "return 1", ""))
	if rec.Code != http.StatusNotFound || !strings.Contains(rec.Body.String(), `not offered in mode \"native\"`) {
		t.Errorf("%d %s", rec.Code, rec.Body)
	}
	if _, err := server.New(server.WithRuntime(registrytest.New(backend.TypeScript)), server.WithMode("fancy")); err == nil {
		t.Error("an unknown mode was accepted")
	}
}

// changingTools is a ToolSource a test changes.
type changingTools struct {
	mu    sync.Mutex
	tools []registry.Tool
}

func (c *changingTools) Tools() []registry.Tool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]registry.Tool(nil), c.tools...)
}

// A tool source's current tools reach runs, the SDK and the tool list.
func TestToolSource(t *testing.T) {
	src := &changingTools{}
	f := newFixture(t, server.WithToolSource(src), server.WithMode(registry.ModeBoth))
	if rec := f.do(t, "GET", "/v1/sdk?format=source", ""); strings.Contains(rec.Body.String(), `"count"`) {
		t.Fatalf("count before it exists: %s", rec.Body)
	}
	src.mu.Lock()
	src.tools = []registry.Tool{typedTool}
	src.mu.Unlock()
	if rec := f.do(t, "GET", "/v1/sdk?format=source", ""); !strings.Contains(rec.Body.String(), `"count": (args: { [key: string]: unknown }) => Promise<{`) {
		t.Errorf("SDK: %s", rec.Body)
	}
	if rec := f.do(t, "GET", "/v1/tools", ""); !strings.Contains(rec.Body.String(), `"name":"count"`) {
		t.Errorf("tools: %s", rec.Body)
	}
	f.ts.Handle("count", func(ctx context.Context, env *registrytest.Env) (any, error) {
		return env.Call("count", nil)
	})
	rec := f.do(t, "POST", "/v1/run", runBody("typescript", "count", ""))
	if rec.Code != http.StatusOK || !strings.Contains(rec.Body.String(), `"value":{"n":1}`) {
		t.Errorf("run: %d %s", rec.Code, rec.Body)
	}
}
