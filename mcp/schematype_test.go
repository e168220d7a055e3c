package mcp

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/dsh-container/dsh-container/backend"
	"github.com/dsh-container/dsh-container/internal/testenv"
	"github.com/dsh-container/dsh-container/registry"
)

// schemaTypeCases are input schemas an upstream may list, and what
// sdkTool offers for each: "type" is read exactly, as the go-sdk reads it,
// not case-insensitively as encoding/json fills a struct (issue 24 §7:
// {"Type":"object"} passed the check and the go-sdk's AddTool panicked,
// ending mcp).
var schemaTypeCases = []struct{ in, want string }{
	{`{"type":"object","properties":{}}`, `{"type":"object","properties":{}}`},
	{`{"Type":"object"}`, `{"type":"object","Type":"object"}`}, // no type: it gets one
	{`{"TYPE":"object","x":1}`, `{"type":"object","TYPE":"object","x":1}`},
	{`{"type":"Object"}`, `{"type":"object"}`},
	{`{"type":["object"]}`, `{"type":"object"}`},
	{`{"type":{"object":true}}`, `{"type":"object"}`},
	{`{"properties":{"type":{"type":"string"}}}`, `{"type":"object","properties":{"type":{"type":"string"}}}`}, // nested "type" is not the schema's
	{`{}`, `{"type":"object"}`},
	{` { } `, `{"type":"object"}`},
	{`{"type":"object","type":"string"}`, `{"type":"object"}`}, // the last of repeated keys wins, as in the go-sdk
	{`{"type":"string","type":"object"}`, `{"type":"string","type":"object"}`},
	{`{"type":"string","Type":"object"}`, `{"type":"object"}`},
	{`{"type":"object","\u0074ype":"string"}`, `{"type":"object"}`},
	{`{"\u0074ype":"object"}`, `{"\u0074ype":"object"}`},
	{`{"t\"ype":"object"}`, `{"type":"object","t\"ype":"object"}`},
	{`{"type":"obj\u0065ct"}`, `{"type":"obj\u0065ct"}`},
	{`{"a":[1,{"b":"}"}],"type":"object","c":-1.5e3,"d":null}`, `{"a":[1,{"b":"}"}],"type":"object","c":-1.5e3,"d":null}`},
	{`{"a":1}`, `{"type":"object","a":1}`},
	{`[]`, `{"type":"object"}`},
	{`"object"`, `{"type":"object"}`},
	{`{"type":"object"`, `{"type":"object"}`},
	{``, `{"type":"object"}`},
}

// What sdkTool offers, the go-sdk's AddTool takes: it never panics on it.
func TestSDKToolTypeIsExact(t *testing.T) {
	log := slog.New(slog.DiscardHandler)
	for _, c := range schemaTypeCases {
		st := sdkTool(registry.MCPTool{Name: "t", InputSchema: json.RawMessage(c.in)}, log)
		if got := string(st.InputSchema.(json.RawMessage)); got != c.want {
			t.Errorf("%s: offered as %s, want %s", c.in, got, c.want)
		}
		srv := sdk.NewServer(&sdk.Implementation{Name: "test"}, nil)
		func() {
			defer func() {
				if v := recover(); v != nil {
					t.Errorf("%s: the go-sdk's AddTool panicked: %v", c.in, v)
				}
			}()
			srv.AddTool(st, func(context.Context, *sdk.CallToolRequest) (*sdk.CallToolResult, error) { return nil, nil })
		}()
	}
}

// schemaType reads the top level of any JSON, valid or not, without
// panicking, and agrees with encoding/json on which objects have a "type".
func FuzzSchemaType(f *testing.F) {
	for _, c := range schemaTypeCases {
		f.Add([]byte(c.in))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		typ, object := schemaType(in)
		var m map[string]json.RawMessage
		err := json.Unmarshal(in, &m)
		if object != (err == nil && m != nil) {
			t.Fatalf("%q: object %v, encoding/json: %v", in, object, err)
		}
		if want, ok := m["type"]; object && (ok != (typ != nil) || ok && !bytes.Equal(typ, want)) {
			t.Fatalf("%q: type %q, encoding/json %q", in, typ, want)
		}
	})
}

// A tool the go-sdk refuses (its AddTool panics: here a schema nested
// deeper than it decodes) is left out with a log line; the server starts,
// offers the other tools and goes on taking changes. A schema whose only
// type is "Type" is offered as an object.
func TestToolTheSDKRefusesIsLeftOut(t *testing.T) {
	schema := func(in string) registry.Tool {
		tool := textTool("x", "X")
		tool.Parameters = json.RawMessage(in)
		return tool
	}
	deep := schema(`{"type":"object","properties":{"a":` + strings.Repeat("[", 1000) + strings.Repeat("]", 1000) + `}}`)
	deep.Name = "deep"
	cased := schema(`{"Type":"object"}`)
	cased.Name = "cased"
	var logs testenv.LockedBuffer
	src := &source{tools: []registry.Tool{textTool("a", "A"), deep, cased}}
	h := newHarness(t, backend.TypeScript, WithMode(registry.ModeNative), WithToolSource(src),
		WithLogger(slog.New(slog.NewTextHandler(&logs, nil))))
	if got := names(h.list(t)); got != "a cased" {
		t.Errorf("offered %q, want a and cased", got)
	}
	if got := names(toSDK(h.srv.Tools())); got != "a cased" {
		t.Errorf("Tools() = %q, want a and cased", got)
	}
	if !strings.Contains(logs.String(), "tool=deep") || !strings.Contains(logs.String(), "left out") {
		t.Errorf("no log line names the tool left out:\n%s", logs.String())
	}
	for _, tool := range h.list(t) {
		if tool.Name == "cased" {
			if in := fmt.Sprint(tool.InputSchema); !strings.Contains(in, "type:object") {
				t.Errorf("cased offered with %s", in)
			}
		}
	}
	// A tool offered before and refused after it changed is removed.
	deep.Name = "a"
	src.set(deep, textTool("b", "B"))
	if got := names(h.list(t)); got != "b" {
		t.Errorf("after a changed into a refused tool, offered %q, want b", got)
	}
}

func toSDK(tools []registry.MCPTool) []*sdk.Tool {
	out := make([]*sdk.Tool, len(tools))
	for i, t := range tools {
		out[i] = &sdk.Tool{Name: t.Name}
	}
	return out
}
