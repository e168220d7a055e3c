package manifest

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/containerd/errdefs"
)

func TestParseMCPServers(t *testing.T) {
	t.Setenv("DSH_TEST_TOKEN", "s3cret")
	t.Setenv("DSH_TEST_EMPTY", "")
	on := Options{AllowMCPServers: true}
	for _, tc := range []struct {
		name, in string
		want     map[string]MCPServer
		err      string // error substring; "" = ok
	}{
		{"stdio", `{"mcpServers":{"fs":{"command":"npx","args":["-y","server-fs","/tmp"],"env":{"A":"1"}}}}`,
			map[string]MCPServer{"fs": {Type: "stdio", Command: "npx", Args: []string{"-y", "server-fs", "/tmp"}, Env: map[string]string{"A": "1"}}}, ""},
		{"http", `{"mcpServers":{"gh":{"url":"https://api.example.com/mcp","headers":{"Authorization":"Bearer ${DSH_TEST_TOKEN}"},"timeoutMs":5000}}}`,
			map[string]MCPServer{"gh": {Type: "http", URL: "https://api.example.com/mcp", Headers: map[string]string{"Authorization": "Bearer s3cret"}, TimeoutMs: 5000}}, ""},
		{"typed", `{"mcpServers":{"a":{"type":"stdio","command":"x"},"b":{"type":"streamable-http","url":"http://127.0.0.1:1/mcp"}}}`,
			map[string]MCPServer{"a": {Type: "stdio", Command: "x"}, "b": {Type: "http", URL: "http://127.0.0.1:1/mcp"}}, ""},
		{"defaults and empties", `{"mcpServers":{"a":{"command":"x","args":["${DSH_TEST_UNSET_VAR:-dflt}","${DSH_TEST_EMPTY:-e}","${DSH_TEST_EMPTY}","$HOME","a$"]}}}`,
			map[string]MCPServer{"a": {Type: "stdio", Command: "x", Args: []string{"dflt", "e", "", "$HOME", "a$"}}}, ""},
		{"with tools", `{"tools":[{"name":"t","command":["/bin/true"]}],"mcpServers":{}}`, nil, ""},

		{"not an object", `{"mcpServers":[]}`, nil, "mcpServers: must be an object"},
		{"entry not an object", `{"mcpServers":{"x":"npx"}}`, nil, `mcpServers "x": must be an object`},
		{"neither", `{"mcpServers":{"x":{}}}`, nil, `mcpServers "x": needs "command" (a stdio server) or "url"`},
		{"both", `{"mcpServers":{"x":{"command":"a","url":"https://h"}}}`, nil, `mcpServers "x": has both "command" and "url"`},
		{"unknown field", `{"mcpServers":{"x":{"command":"a","cwd":"/"}}}`, nil, `mcpServers "x": unknown field "cwd"`},
		{"command type", `{"mcpServers":{"x":{"command":["a"]}}}`, nil, `mcpServers "x": command: expected a string, got a JSON array`},
		{"args type", `{"mcpServers":{"x":{"command":"a","args":"-v"}}}`, nil, `mcpServers "x": args: expected an array of strings, got a JSON string`},
		{"env type", `{"mcpServers":{"x":{"command":"a","env":{"A":1}}}}`, nil, `mcpServers "x": env: expected a string, got a JSON number`},
		{"headers type", `{"mcpServers":{"x":{"url":"https://h","headers":["a"]}}}`, nil, `mcpServers "x": headers: expected an object of strings, got a JSON array`},
		{"timeout type", `{"mcpServers":{"x":{"command":"a","timeoutMs":"5s"}}}`, nil, `mcpServers "x": timeoutMs: expected an integer, got a JSON string`},
		{"timeout range", `{"mcpServers":{"x":{"command":"a","timeoutMs":0}}}`, nil, `mcpServers "x": timeoutMs is 0; it must be between 1 and 600000`},
		{"empty command", `{"mcpServers":{"x":{"command":" "}}}`, nil, `mcpServers "x": command: is empty`},
		{"nul", `{"mcpServers":{"x":{"command":"a","args":["b\u0000"]}}}`, nil, `mcpServers "x": args[0]: contains a NUL byte`},
		{"bad env name", `{"mcpServers":{"x":{"command":"a","env":{"A=B":"1"}}}}`, nil, `mcpServers "x": env: "A=B" is not a variable name`},
		{"unset variable", `{"mcpServers":{"x":{"url":"https://h","headers":{"Authorization":"Bearer ${DSH_TEST_UNSET_VAR}"}}}}`, nil,
			`mcpServers "x": headers.Authorization: environment variable DSH_TEST_UNSET_VAR is not set`},
		{"unclosed variable", `{"mcpServers":{"x":{"command":"${A"}}}`, nil, `mcpServers "x": command: "${A" has ${ without a closing }`},
		{"bad variable", `{"mcpServers":{"x":{"command":"${1A}"}}}`, nil, `mcpServers "x": command: ${1A}: "1A" is not a variable name`},
		{"scheme", `{"mcpServers":{"x":{"url":"ftp://h/mcp"}}}`, nil, `mcpServers "x": url: "ftp://h/mcp" must start with https:// or http://`},
		{"no host", `{"mcpServers":{"x":{"url":"https:///mcp"}}}`, nil, `mcpServers "x": url: "https:///mcp" has no host`},
		{"header name", `{"mcpServers":{"x":{"url":"https://h","headers":{"Bad Header":"1"}}}}`, nil, `mcpServers "x": headers: "Bad Header" is not a header name`},
		{"header value", `{"mcpServers":{"x":{"url":"https://h","headers":{"X":"a\r\nInjected: 1"}}}}`, nil, `mcpServers "x": headers.X: contains a line break`},
		{"reserved header", `{"mcpServers":{"x":{"url":"https://h","headers":{"mcp-session-id":"1"}}}}`, nil, `mcpServers "x": headers: "mcp-session-id" is set by the transport`},
		{"headers on stdio", `{"mcpServers":{"x":{"command":"a","headers":{"A":"1"}}}}`, nil, `mcpServers "x": headers: only a "url" server takes headers`},
		{"env on http", `{"mcpServers":{"x":{"url":"https://h","env":{"A":"1"}}}}`, nil, `mcpServers "x": args and env: only a "command" server`},
		{"sse", `{"mcpServers":{"x":{"type":"sse","url":"https://h"}}}`, nil, `mcpServers "x": type: "sse" (the deprecated HTTP+SSE transport) is not supported`},
		{"unknown type", `{"mcpServers":{"x":{"type":"ws","url":"https://h"}}}`, nil, `mcpServers "x": type: "ws" is not a transport`},
		{"type mismatch", `{"mcpServers":{"x":{"type":"http","command":"a"}}}`, nil, `mcpServers "x": type: "http" needs "url"`},
		{"empty name", `{"mcpServers":{"":{"command":"a"}}}`, nil, `mcpServers "": the server name is empty`},
		{"space in name", `{"mcpServers":{"my server":{"command":"a"}}}`, nil, `mcpServers "my server": the server name contains ' '`},
		{"long name", `{"mcpServers":{"` + strings.Repeat("n", 65) + `":{"command":"a"}}}`, nil, "the server name is longer than 64 bytes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, err := Parse([]byte(tc.in), on)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) || !errdefs.IsInvalidArgument(err) {
					t.Fatalf("got %v, want invalid argument containing %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if tc.want != nil && !reflect.DeepEqual(m.MCPServers, tc.want) {
				t.Errorf("got %+v, want %+v", m.MCPServers, tc.want)
			}
		})
	}
}

// A manifest naming MCP servers is an error for a caller that does not
// start them: their tools must not vanish silently.
func TestParseMCPServersNotAllowed(t *testing.T) {
	_, err := Parse([]byte(`{"mcpServers":{"x":{"command":"a"}}}`), Options{})
	if err == nil || !strings.Contains(err.Error(), "does not connect to MCP servers") {
		t.Fatalf("err = %v", err)
	}
	if _, err := Parse([]byte(`{"tools":[]}`), Options{}); err != nil {
		t.Fatal(err)
	}
}

// Load resolves "./" in a server's command and args against the
// manifest's folder, like command tools.
func TestLoadResolvesRelativeServerPaths(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "tools.json")
	os.WriteFile(path, []byte(`{"mcpServers":{"x":{"command":"./server.sh","args":["./data","/abs","rel"]}}}`), 0o644)
	m, err := Load(path, Options{AllowMCPServers: true})
	if err != nil {
		t.Fatal(err)
	}
	got := m.MCPServers["x"]
	if got.Command != filepath.Join(dir, "server.sh") || !reflect.DeepEqual(got.Args, []string{filepath.Join(dir, "data"), "/abs", "rel"}) {
		t.Errorf("got %+v", got)
	}
}
