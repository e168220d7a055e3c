package manifest

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Over streamable HTTP, a result is checked on its bytes before anything
// decodes it, as over stdio (wireMsg.overBound, one check for both): nested
// past MaxServerResultDepth or made of more values than
// MaxServerResultValues, in a JSON body or in an event, the call is
// rejected naming the bound and the connection stays. The hostile server
// is the stdio bounds test's, served over HTTP both ways.
func TestUpstreamHTTPResultShapeBounds(t *testing.T) {
	srv := hostileServer()
	for _, jsonBody := range []bool{true, false} {
		name := "event stream"
		if jsonBody {
			name = "JSON body"
		}
		t.Run(name, func(t *testing.T) {
			ts := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, &mcp.StreamableHTTPOptions{JSONResponse: jsonBody}))
			t.Cleanup(ts.Close)
			s, lb := openToolset(t, map[string]MCPServer{"h": {Type: TransportHTTP, URL: ts.URL}})
			for _, c := range []struct{ tool, args, want string }{
				{"deep", `{"n":200}`, `MCP server "h": tool "deep": the server's reply is nested deeper than 128 levels (MaxServerResultDepth)`},
				{"values", `{"n":150000}`, `MCP server "h": tool "values": the server's reply is made of more than 100000 JSON values (MaxServerResultValues)`},
				{"big", `{"n":5242880}`, `MCP server "h": tool "big": the server's reply is larger than 4194304 bytes (MaxServerResultBytes)`},
			} {
				if res := callTool(t, s, "h__"+c.tool, c.args); !res.IsError || res.Text() != c.want {
					t.Errorf("%s: %.300q, want %q", c.tool, res.Text(), c.want)
				}
			}
			// Within the bounds, the same tools answer.
			if res := callTool(t, s, "h__deep", `{"n":100}`); res.IsError {
				t.Errorf("deep 100: %.300q", res.Text())
			}
			if res := callTool(t, s, "h__values", `{"n":1000}`); res.IsError {
				t.Errorf("values 1000: %.300q", res.Text())
			}
			if res := callTool(t, s, "h__echo", `{"text":"hi"}`); res.IsError || !strings.HasPrefix(res.Text(), "hi from ") {
				t.Errorf("echo after the refusals: %.300q", res.Text())
			}
			if strings.Contains(lb.String(), "connecting to the MCP server again") {
				t.Errorf("a refused reply ended the connection:\n%s", lb.String())
			}
		})
	}
}

// The event stream reader hands the session each event's fields and one
// message: data lines joined, CRLF or LF, comments and unknown fields
// dropped, an empty priming event kept without data, a message over a
// bound replaced by the error for its call; a field line past
// maxEventField fails the stream.
func TestBoundedEventStream(t *testing.T) {
	deep := strings.Repeat("[", 200) + strings.Repeat("]", 200)
	for _, c := range []struct{ name, in, want, err string }{
		{"one event", "event: message\nid: 1_0\ndata: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\n\n",
			"id: 1_0\nevent: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\n\n", ""},
		{"data lines joined, CRLF, comments", ": hi\r\nid: 2\r\ndata: {\"jsonrpc\":\"2.0\",\r\ndata: \"id\":2,\"result\":{}}\r\nx-other: y\r\n\r\n",
			"id: 2\ndata: {\"jsonrpc\":\"2.0\", \"id\":2,\"result\":{}}\n\n", ""},
		{"priming event", "id: 0\ndata: \n\nid: 1\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"n\"}\n\n",
			"id: 0\n\nid: 1\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"n\"}\n\n", ""},
		{"too deep, a reply", "data: {\"jsonrpc\":\"2.0\",\"result\":{\"v\":" + deep + "},\"id\":7}\n\n",
			"data: {\"jsonrpc\":\"2.0\",\"id\":7,\"error\":{\"code\":-32099,\"message\":\"the server's reply is nested deeper than 128 levels (MaxServerResultDepth)\"}}\n\n", ""},
		{"too deep, a notification", "data: {\"jsonrpc\":\"2.0\",\"method\":\"n\",\"params\":" + deep + "}\n\n", "\n", ""},
		{"a long id", "id: " + strings.Repeat("x", maxEventField) + "\ndata: {}\n\n", "", "longer than 4096 bytes"},
		{"two messages", "data: {}\ndata: {}\n\n", "", "more than one message"},
		{"two values on a line", "data: {} {}\n\n", "", "data after a message"},
	} {
		t.Run(c.name, func(t *testing.T) { checkBoundedEventStream(t, c.in, c.want, c.err) })
	}
}

// checkBoundedEventStream reads in as an upstream's event stream through
// boundResponse: it must come out as want, or fail naming errWant.
func checkBoundedEventStream(t *testing.T, in, want, errWant string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, "http://192.0.2.1/mcp", nil)
	resp := &http.Response{Header: http.Header{"Content-Type": {"text/event-stream"}}, Body: io.NopCloser(strings.NewReader(in))}
	got, err := io.ReadAll(boundResponse(req, resp).Body)
	if errWant != "" {
		if err == nil || !strings.Contains(err.Error(), errWant) {
			t.Fatalf("%q, %v; want an error naming %q", got, err, errWant)
		}
		return
	}
	if err != nil || string(got) != want {
		t.Fatalf("%q, %v\nwant %q", got, err, want)
	}
}
