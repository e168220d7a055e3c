package manifest

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// repeated reads s n times over, counting the bytes it gave.
type repeated struct {
	s    string
	n    int
	at   int // into s
	gave int
}

func (r *repeated) Read(p []byte) (int, error) {
	k := 0
	for r.n > 0 && k < len(p) {
		c := copy(p[k:], r.s[r.at:])
		k += c
		if r.at += c; r.at == len(r.s) {
			r.at = 0
			r.n--
		}
	}
	if k == 0 {
		return 0, io.EOF
	}
	r.gave += k
	return k, nil
}

// readBody reads a JSON response body through boundResponse whole, as the
// go-sdk's session does (io.ReadAll), from head followed by tail.
func readBody(head string, tail io.Reader) ([]byte, error) {
	req, _ := http.NewRequest(http.MethodPost, "http://192.0.2.1/mcp", nil)
	resp := &http.Response{StatusCode: 200, Header: http.Header{"Content-Type": {"application/json"}},
		Body: io.NopCloser(io.MultiReader(strings.NewReader(head), tail))}
	return io.ReadAll(boundResponse(req, resp).Body)
}

// A JSON body carries one JSON-RPC message, as the go-sdk decodes it: the
// message and whitespace after it pass; a second message — or a stream of
// small ones past MaxServerResultBytes, each within the bounds — fails the
// body naming the bound, with at most the first message handed on and the
// rest never read; so does whitespace past its bounds, before or after the
// message (the old bound failed every body past MaxServerResultBytes).
func TestBoundedJSONBodyHoldsOneMessage(t *testing.T) {
	const reply = `{"jsonrpc":"2.0","id":1,"result":{}}`
	got, err := readBody(reply+"\r\n  \n", strings.NewReader(""))
	if err != nil || string(got) != reply {
		t.Fatalf("one message: %q, %v", got, err)
	}
	for _, c := range []struct {
		name     string
		head     string
		tail     *repeated
		err      string
		maxRead  int // bytes of the tail read at most
		handedOn string
	}{
		{"two messages", reply + "\n", &repeated{s: reply + "\n", n: 1}, "a body carries one JSON-RPC message of at most 4194304 bytes (MaxServerResultBytes)", 64 << 10, reply},
		{"small messages past MaxServerResultBytes", "", &repeated{s: reply + "\n", n: 150_000}, "more than one message", 64 << 10, reply},
		{"whitespace after the message", reply + "\n", &repeated{s: "\n", n: 1 << 20}, "more than 4096 bytes of whitespace", 64<<10 + maxJSONBodyTail, reply},
		{"whitespace past the body's bound", "", &repeated{s: strings.Repeat(" ", 1000) + "\n", n: 17_000}, "larger than 16842752 bytes", maxJSONBody, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := readBody(c.head, c.tail)
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Fatalf("%d bytes handed on, %v; want an error naming %q", len(got), err, c.err)
			}
			if string(got) != c.handedOn {
				t.Errorf("handed on %.100q (%d bytes), want %q", got, len(got), c.handedOn)
			}
			if c.tail.gave > c.maxRead {
				t.Errorf("read %d bytes of the body past its head, want at most %d", c.tail.gave, c.maxRead)
			}
		})
	}
}

// An event's fields are read as the go-sdk reads them: their values
// trimmed ("event: message " names a message), wherever they stand in the
// event (an id or a name after the data is the event's), the last of a
// field winning; an event named other than "message" is handed on without
// its data, whatever that data is, while data that is not one message
// fails an event for the client.
func TestEventFieldsAsTheSDKReadsThem(t *testing.T) {
	const msg = `{"jsonrpc":"2.0","id":1,"result":{}}`
	for _, c := range []struct{ name, in, want, err string }{
		{"a name with a trailing space", "event: message \ndata: " + msg + "\n\n",
			"event: message\ndata: " + msg + "\n\n", ""},
		{"values padded", "id:\t 7 \nretry:  100 \nevent:message\t\ndata:" + msg + "\n\n",
			"id: 7\nretry: 100\nevent: message\ndata: " + msg + "\n\n", ""},
		{"an id after the data", "data: " + msg + "\nid: 5\n\n",
			"id: 5\ndata: " + msg + "\n\n", ""},
		{"an id between data lines, the last id winning", "id: 1\ndata: {\"jsonrpc\":\"2.0\",\nid: 2\ndata: \"id\":1,\"result\":{}}\nid: 3\n\n",
			"id: 3\ndata: {\"jsonrpc\":\"2.0\", \"id\":1,\"result\":{}}\n\n", ""},
		{"a name after the data", "data: " + msg + "\nevent: other\nid: 9\n\n",
			"id: 9\nevent: other\n\n", ""},
		{"renamed a message after the data", "event: other\ndata: " + msg + "\nevent: message\n\n",
			"event: message\ndata: " + msg + "\n\n", ""},
		{"another event's data that is no message", "event: ping\ndata: hello, not JSON\ndata: {\n\ndata: " + msg + "\n\n",
			"event: ping\n\ndata: " + msg + "\n\n", ""},
		{"another event named after its data", "data: {} {}\nevent: ping\n\n",
			"event: ping\n\n", ""},
		{"a message's data that is no message", "data: ]\n\n", "", "it sent"},
		{"a message's data cut short", "event: message\ndata: {\"a\":\n\n", "", "unexpected EOF"},
		{"a long field after the data", "data: " + msg + "\nid: " + strings.Repeat("x", maxEventField) + "\n\n", "", "longer than 4096 bytes"},
	} {
		t.Run(c.name, func(t *testing.T) { checkBoundedEventStream(t, c.in, c.want, c.err) })
	}
}

// eventRewriter moves each event's id after its data and pads its name
// with a trailing space, as a server may write them: the go-sdk's writer
// writes one event a Write.
type eventRewriter struct {
	http.ResponseWriter
	events int
}

func (w *eventRewriter) Write(b []byte) (int, error) {
	s := string(b)
	if !strings.HasPrefix(w.Header().Get("Content-Type"), "text/event-stream") || !strings.HasSuffix(s, "\n\n") {
		return w.ResponseWriter.Write(b)
	}
	var fields, data []string
	for _, line := range strings.Split(strings.TrimSuffix(s, "\n\n"), "\n") {
		switch {
		case strings.HasPrefix(line, "event: "):
			fields = append([]string{line + " "}, fields...)
		case strings.HasPrefix(line, "data:"):
			data = append(data, line)
		default:
			fields = append(fields, line)
		}
	}
	if len(data) > 0 {
		w.events++
	}
	out := strings.Join(fields[:min(1, len(fields))], "\n")
	if out != "" {
		out += "\n"
	}
	out += strings.Join(append(data, fields[min(1, len(fields)):]...), "\n") + "\n\n"
	if _, err := w.ResponseWriter.Write([]byte(out)); err != nil {
		return 0, err
	}
	return len(b), nil
}

func (w *eventRewriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// A streamable HTTP server writing "event: message " and ids after the
// data, which the go-sdk reads as messages with their ids, is listed and
// answers calls.
func TestUpstreamHTTPEventFieldsAnywhere(t *testing.T) {
	srv := testServer("http")
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil)
	var events atomic.Int64
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rw := &eventRewriter{ResponseWriter: w}
		h.ServeHTTP(rw, r)
		events.Add(int64(rw.events))
	}))
	t.Cleanup(ts.Close)
	s, _ := openToolset(t, map[string]MCPServer{"h": {Type: TransportHTTP, URL: ts.URL}})
	if res := callTool(t, s, "h__echo", `{"text":"hi"}`); res.IsError || res.Text() != "http echo: hi" {
		t.Fatalf("%+v", res)
	}
	if events.Load() < 2 {
		t.Fatalf("%d events rewritten, want the listing's and the call's at least", events.Load())
	}
}
