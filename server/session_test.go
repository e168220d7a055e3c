package server_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/dsh-container/dsh-container/backend"
	"github.com/dsh-container/dsh-container/registry/registrytest"
	"github.com/dsh-container/dsh-container/server"
)

// TestSessionVectors replays the protocol's vectors through the decoder,
// in both directions.
func TestSessionVectors(t *testing.T) {
	data, err := os.ReadFile("testdata/session/vectors.json")
	if err != nil {
		t.Fatal(err)
	}
	var file struct {
		Protocol int `json:"protocol"`
		Vectors  []struct {
			Name      string                  `json:"name"`
			Direction server.SessionDirection `json:"direction"`
			Frame     string                  `json:"frame"`
			Valid     bool                    `json:"valid"`
			Code      string                  `json:"code"`
		} `json:"vectors"`
	}
	if err := json.Unmarshal(data, &file); err != nil {
		t.Fatal(err)
	}
	if file.Protocol != server.SessionProtocol || len(file.Vectors) < 50 {
		t.Fatalf("protocol %d, %d vectors", file.Protocol, len(file.Vectors))
	}
	for _, v := range file.Vectors {
		t.Run(string(v.Direction)+"/"+v.Name, func(t *testing.T) {
			msg, err := server.DecodeSessionFrame(v.Direction, []byte(v.Frame), 1<<20)
			if v.Valid {
				if err != nil {
					t.Fatalf("rejected a valid frame: %v", err)
				}
				// A valid frame survives a round trip through the Go types.
				again, err := json.Marshal(msg)
				if err != nil {
					t.Fatal(err)
				}
				if _, err := server.DecodeSessionFrame(v.Direction, again, 1<<20); err != nil {
					t.Fatalf("re-encoded frame %s rejected: %v", again, err)
				}
				return
			}
			var se *server.SessionError
			if !errors.As(err, &se) {
				t.Fatalf("accepted an invalid frame (got %T %v)", msg, err)
			}
			if se.Code != v.Code {
				t.Fatalf("code %q, want %q (%v)", se.Code, v.Code, err)
			}
		})
	}
	_, err = server.DecodeSessionFrame(server.ClientToDaemon, []byte("{\"type\":\"abort\",\"reason\":\"\xff\"}"), 0)
	var se *server.SessionError
	if !errors.As(err, &se) || se.Code != server.CodeNotUTF8 {
		t.Fatalf("invalid UTF-8: %v", err)
	}
	_, err = server.DecodeSessionFrame(server.ClientToDaemon, []byte(`{"type":"abort","reason":"`+strings.Repeat("x", 100)+`"}`), 64)
	if !errors.As(err, &se) || se.Code != server.CodeTooLarge {
		t.Fatalf("oversized: %v", err)
	}
}

// wallRuntime is the in-memory runtime with a wall budget, lowered per
// run like the container runtime's: a backend.RequestChecker whose "never
// raise" is backend.Limits.Within, like the container runtime's.
type wallRuntime struct {
	*registrytest.Runtime
	wall time.Duration

	mu     sync.Mutex
	limits []backend.Limits
}

func (r *wallRuntime) maxLimits() backend.Limits {
	return backend.Limits{WallTime: r.wall, ComputeTime: time.Minute, MemoryBytes: 256 << 20, NanoCPUs: 1e9, Pids: 128}
}

func (r *wallRuntime) CheckRequest(req backend.RunRequest) error {
	if err := req.Limits.Within(r.maxLimits()); err != nil {
		return err
	}
	if l := req.Limits; l.MemoryBytes != 0 && l.MemoryBytes < 32<<20 {
		return fmt.Errorf("%w: memory %d bytes: must be at least 32 MiB", backend.ErrInvalidRequest, l.MemoryBytes)
	}
	return backend.RefuseOptions(r.Language(), backend.RunRequest{Egress: req.Egress})
}

func (r *wallRuntime) Run(ctx context.Context, req backend.RunRequest) (backend.RunResult, error) {
	if err := r.CheckRequest(req); err != nil {
		return backend.RunResult{}, err
	}
	l := req.Limits
	req.Limits = backend.Limits{} // honoured here
	r.mu.Lock()
	r.limits = append(r.limits, l)
	r.mu.Unlock()
	wall := r.wall
	if l.WallTime != 0 {
		wall = l.WallTime
	}
	wctx, cancel := context.WithTimeoutCause(ctx, wall, errWall)
	defer cancel()
	res, err := r.Runtime.Run(wctx, req)
	if res.Error != nil && ctx.Err() == nil && errors.Is(context.Cause(wctx), errWall) {
		res.Error = &backend.Failure{Kind: backend.FailureTimeout, Message: fmt.Sprintf("wall-time budget of %v exceeded", wall)}
	}
	return res, err
}

var errWall = errors.New("wall budget")

type sessionFixture struct {
	srv     *server.Server
	ts      *httptest.Server
	py      *wallRuntime
	metrics *prometheus.Registry
}

func newSessionFixture(t *testing.T, opts ...server.Option) *sessionFixture {
	t.Helper()
	py := &wallRuntime{Runtime: registrytest.New(backend.Python), wall: 5 * time.Second}
	ts := registrytest.New(backend.TypeScript)
	sf := &sessionFixture{py: py, metrics: prometheus.NewRegistry()}
	var err error
	sf.srv, err = server.New(append([]server.Option{
		server.WithRuntime(ts),
		server.WithRuntime(py),
		server.WithTools(echoTool),
		server.WithLogger(testLogger(t)),
		server.WithMetrics(sf.metrics),
	}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	sf.ts = httptest.NewServer(sf.srv)
	t.Cleanup(func() {
		sf.ts.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := sf.srv.Shutdown(ctx); err != nil {
			t.Errorf("sessions still open: %v", err)
		}
		py.Close(context.Background())
		ts.Close(context.Background())
	})
	return sf
}

// peer is the client end of a session, speaking raw frames.
type peer struct {
	t    *testing.T
	conn *websocket.Conn
}

func (sf *sessionFixture) dial(t *testing.T, header http.Header) *peer {
	t.Helper()
	url := "ws" + strings.TrimPrefix(sf.ts.URL, "http") + "/v1/sessions"
	conn, resp, err := websocket.DefaultDialer.Dial(url, header)
	if err != nil {
		status := 0
		if resp != nil {
			status = resp.StatusCode
		}
		t.Fatalf("dial: %v (status %d)", err, status)
	}
	t.Cleanup(func() { conn.Close() })
	conn.SetReadDeadline(time.Now().Add(20 * time.Second))
	return &peer{t: t, conn: conn}
}

func (p *peer) send(v any) {
	p.t.Helper()
	var data []byte
	if s, ok := v.(string); ok {
		data = []byte(s)
	} else {
		var err error
		if data, err = json.Marshal(v); err != nil {
			p.t.Fatal(err)
		}
	}
	if err := p.conn.WriteMessage(websocket.TextMessage, data); err != nil {
		p.t.Fatalf("send: %v", err)
	}
}

// next reads the next frame, checks it against the protocol and returns
// it as a map with its decoded form.
func (p *peer) next() (map[string]any, any) {
	p.t.Helper()
	_, data, err := p.conn.ReadMessage()
	if err != nil {
		p.t.Fatalf("read: %v", err)
	}
	msg, err := server.DecodeSessionFrame(server.DaemonToClient, data, 0)
	if err != nil {
		p.t.Fatalf("the daemon sent an invalid frame %s: %v", data, err)
	}
	var m map[string]any
	json.Unmarshal(data, &m)
	return m, msg
}

// expect reads the next frame and checks its type.
func (p *peer) expect(typ string) (map[string]any, any) {
	p.t.Helper()
	m, msg := p.next()
	if m["type"] != typ {
		p.t.Fatalf("got %v, want a %s frame", m, typ)
	}
	return m, msg
}

// until reads past log and event frames to the next frame of type typ.
func (p *peer) until(typ string) (map[string]any, any) {
	p.t.Helper()
	for {
		m, msg := p.next()
		if m["type"] == typ {
			return m, msg
		}
		if m["type"] != server.FrameLog && m["type"] != server.FrameEvent {
			p.t.Fatalf("got %v, want a %s frame", m, typ)
		}
	}
}

// closed reads until the daemon closes and returns its close code.
func (p *peer) closed() int {
	p.t.Helper()
	for {
		_, data, err := p.conn.ReadMessage()
		if err != nil {
			var ce *websocket.CloseError
			if errors.As(err, &ce) {
				return ce.Code
			}
			p.t.Fatalf("read: %v, want a close frame", err)
		}
		p.t.Fatalf("a frame after the last one: %s", data)
	}
}

func start(lang, code string, tools ...server.SessionTool) server.StartFrame {
	if tools == nil {
		tools = []server.SessionTool{}
	}
	return server.StartFrame{Type: "start", Protocol: 1, Language: lang, Code: code, Tools: tools}
}

var greetTool = server.SessionTool{Name: "greet", Description: "Greet someone.", InputSchema: json.RawMessage(`{"type":"object","properties":{"name":{"type":"string"}}}`)}

// waitNoSessions waits until the server has no session open.
func waitNoSessions(t *testing.T, srv *server.Server) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); srv.Sessions() != 0; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d sessions still open", srv.Sessions())
		}
	}
}

// A session with a client tool: accepted, the log before the call, the
// call, its event, the result logged, done with the report; then close.
func TestSessionClientTools(t *testing.T) {
	sf := newSessionFixture(t)
	p := sf.dial(t, nil)
	st := start("python", "log before\ncall greet {\"name\":\"Ada\"}\ncall echo {\"x\":1}\nreturn 7", greetTool)
	st.ID = "s1"
	p.send(st)
	m, _ := p.expect(server.FrameAccepted)
	if m["id"] != "s1" {
		t.Fatalf("accepted %v", m)
	}
	m, _ = p.expect(server.FrameLog)
	if m["text"] != "before" || m["source"] != "console" {
		t.Fatalf("log %v", m)
	}
	_, msg := p.expect(server.FrameCall)
	call := msg.(*server.CallFrame)
	if call.ID != "s1:code:1" || call.Name != "greet" || string(call.Args) != `{"name":"Ada"}` {
		t.Fatalf("call %+v", call)
	}
	p.send(server.ResultFrame{Type: "result", ID: call.ID, OK: true, Value: json.RawMessage(`"hello Ada"`)})
	_, msg = p.expect(server.FrameEvent)
	if ev := msg.(*server.EventFrame).Event; ev.CallID != "s1:code:1" || ev.Tool != "greet" || ev.Summary != "hello Ada" || ev.IsError {
		t.Fatalf("event %+v", ev)
	}
	m, _ = p.expect(server.FrameLog)
	if m["text"] != "hello Ada" {
		t.Fatalf("the program got %v", m)
	}
	// The server's own tool runs in the daemon: no call frame.
	_, msg = p.expect(server.FrameEvent)
	if ev := msg.(*server.EventFrame).Event; ev.Tool != "echo" || ev.CallID != "s1:code:2" {
		t.Fatalf("event %+v", ev)
	}
	p.expect(server.FrameLog)
	_, msg = p.expect(server.FrameDone)
	rep := msg.(*server.DoneFrame).Report
	if rep.ID != "s1" || rep.Error != nil || string(rep.Value) != "7" || len(rep.Events) != 2 || len(rep.Logs) != 3 || rep.Stats.Calls != 2 {
		t.Fatalf("report %+v", rep)
	}
	if code := p.closed(); code != websocket.CloseNormalClosure {
		t.Fatalf("close code %d", code)
	}
	waitNoSessions(t, sf.srv)
}

// A tool with an output schema resolves to the value itself; a failed
// result rejects the call with its message.
func TestSessionStructuredAndFailedResults(t *testing.T) {
	sf := newSessionFixture(t)
	lookup := server.SessionTool{Name: "lookup", InputSchema: json.RawMessage(`{"type":"object"}`), OutputSchema: json.RawMessage(`{"type":"object","properties":{"rows":{"type":"array"}}}`)}
	p := sf.dial(t, nil)
	p.send(start("python", "call lookup {}\ntry greet {}\nreturn 1", lookup, greetTool))
	p.expect(server.FrameAccepted)
	_, msg := p.expect(server.FrameCall)
	p.send(server.ResultFrame{Type: "result", ID: msg.(*server.CallFrame).ID, OK: true, Value: json.RawMessage(`{"rows": [1, 2]}`)})
	p.expect(server.FrameEvent)
	m, _ := p.expect(server.FrameLog)
	if m["text"] != `{"rows":[1,2]}` {
		t.Fatalf("the program got %v", m)
	}
	_, msg = p.expect(server.FrameCall)
	p.send(server.ResultFrame{Type: "result", ID: msg.(*server.CallFrame).ID, OK: false, Message: "no such user"})
	_, ev := p.expect(server.FrameEvent)
	if !ev.(*server.EventFrame).Event.IsError {
		t.Fatal("a failed result's event is not an error")
	}
	m, _ = p.expect(server.FrameLog)
	if m["text"] != "error: no such user" {
		t.Fatalf("the program got %v", m)
	}
	p.expect(server.FrameDone)
	p.closed()
}

// Abort ends the run as an abort with the client's reason; a disconnect
// aborts it too; a client that never answers meets the wall budget.
func TestSessionAbortDisconnectSilence(t *testing.T) {
	t.Run("abort", func(t *testing.T) {
		sf := newSessionFixture(t)
		p := sf.dial(t, nil)
		p.send(start("python", "log started\nsleep 30s\nreturn 1"))
		p.expect(server.FrameAccepted)
		p.expect(server.FrameLog)
		p.send(server.AbortFrame{Type: "abort", Reason: "stop pressed"})
		_, msg := p.expect(server.FrameDone)
		rep := msg.(*server.DoneFrame).Report
		if rep.Error == nil || rep.Error.Kind != backend.FailureAbort || !strings.Contains(rep.Error.Message, "stop pressed") {
			t.Fatalf("report error %+v", rep.Error)
		}
		p.closed()
	})
	t.Run("disconnect", func(t *testing.T) {
		sf := newSessionFixture(t)
		p := sf.dial(t, nil)
		p.send(start("python", "call greet {}\nreturn 1", greetTool))
		p.expect(server.FrameAccepted)
		p.expect(server.FrameCall)
		p.conn.Close() // gone, mid-call
		waitNoSessions(t, sf.srv)
		if n := testutil.ToFloat64(counter(t, sf.metrics, server.MetricRuns, "python", "abort", server.AnonymousTenant)); n != 1 {
			t.Fatalf("%v aborted runs, want 1", n)
		}
	})
	t.Run("never answers", func(t *testing.T) {
		sf := newSessionFixture(t)
		p := sf.dial(t, nil)
		st := start("python", "call greet {}\nreturn 1", greetTool)
		st.Limits = json.RawMessage(`{"wallTimeoutMs": 300}`)
		p.send(st)
		p.expect(server.FrameAccepted)
		p.expect(server.FrameCall)
		began := time.Now()
		_, msg := p.until(server.FrameDone)
		rep := msg.(*server.DoneFrame).Report
		if rep.Error == nil || rep.Error.Kind != backend.FailureTimeout {
			t.Fatalf("report error %+v", rep.Error)
		}
		if el := time.Since(began); el > 3*time.Second {
			t.Fatalf("the wall budget fired after %v", el)
		}
		p.closed()
	})
}

// Every bad input gets a precise refusal or error frame, the socket
// closes, and no session is left.
func TestSessionBadInput(t *testing.T) {
	huge := `{"type":"start","protocol":1,"language":"python","code":"` + strings.Repeat("x", 3<<20) + `"}`
	cases := []struct {
		name string
		// before runs before start; after, with the first call frame in
		// hand, once the run was accepted.
		before    string
		tools     []server.SessionTool
		after     func(p *peer, callID string)
		wantType  string
		wantCode  string // error frames
		wantIn    string
		wantClose int
	}{
		// A start the protocol refuses closes with 1008 (1009 when too
		// large); one the server refuses (a bad schema, a clash) with
		// 1000, as docs/session-protocol.md says.
		{name: "malformed start", before: `{"type":"start",`, wantType: "refused", wantIn: "not-json", wantClose: websocket.ClosePolicyViolation},
		{name: "unknown type first", before: `{"type":"hello"}`, wantType: "refused", wantIn: "unknown-type", wantClose: websocket.ClosePolicyViolation},
		{name: "result first", before: `{"type":"result","id":"x","ok":true,"value":1}`, wantType: "refused", wantIn: "the first frame must be start", wantClose: websocket.ClosePolicyViolation},
		{name: "oversized start", before: huge, wantType: "refused", wantIn: "too-large", wantClose: websocket.CloseMessageTooBig},
		{name: "schema not JSON Schema", tools: []server.SessionTool{{Name: "bad", InputSchema: json.RawMessage(`{"type":"object","properties":{"q":{"type":"strin"}}}`)}}, wantType: "refused", wantIn: `tools[0] "bad": inputSchema is not JSON Schema: properties.q.type: "strin" is not a JSON Schema type`, wantClose: websocket.CloseNormalClosure},
		{name: "output schema not JSON Schema", tools: []server.SessionTool{{Name: "bad", InputSchema: json.RawMessage(`{}`), OutputSchema: json.RawMessage(`{"required":"rows"}`)}}, wantType: "refused", wantIn: `outputSchema is not JSON Schema: required: must be an array`, wantClose: websocket.CloseNormalClosure},
		{name: "input schema a boolean", tools: []server.SessionTool{{Name: "bad", InputSchema: json.RawMessage(`true`)}}, wantType: "refused", wantIn: "must be a JSON Schema object", wantClose: websocket.CloseNormalClosure},
		{name: "name clash", tools: []server.SessionTool{{Name: "echo", InputSchema: json.RawMessage(`{}`)}}, wantType: "refused", wantIn: `tool "echo" is defined by the server`, wantClose: websocket.CloseNormalClosure},
		{name: "name twice", tools: []server.SessionTool{greetTool, greetTool}, wantType: "refused", wantIn: `tools[1]: tool "greet" is defined twice`, wantClose: websocket.CloseNormalClosure},
		{name: "run_code", tools: []server.SessionTool{{Name: "run_code", InputSchema: json.RawMessage(`{}`)}}, wantType: "refused", wantIn: "reserved", wantClose: websocket.CloseNormalClosure},
		{name: "malformed frame", after: func(p *peer, _ string) { p.send(`{"type":"result"`) }, wantType: "error", wantCode: server.CodeNotJSON, wantClose: websocket.ClosePolicyViolation},
		{name: "unknown frame type", after: func(p *peer, _ string) { p.send(`{"type":"approve","id":"x"}`) }, wantType: "error", wantCode: server.CodeUnknownType, wantClose: websocket.ClosePolicyViolation},
		{name: "result for an unknown call", after: func(p *peer, _ string) {
			p.send(server.ResultFrame{Type: "result", ID: "s:code:99", OK: true, Value: json.RawMessage(`1`)})
		}, wantType: "error", wantCode: server.CodeUnknownCall, wantIn: `no call "s:code:99"`, wantClose: websocket.ClosePolicyViolation},
		{name: "duplicate result", after: func(p *peer, id string) {
			p.send(server.ResultFrame{Type: "result", ID: id, OK: true, Value: json.RawMessage(`1`)})
			p.expect(server.FrameEvent)
			p.expect(server.FrameLog)
			p.send(server.ResultFrame{Type: "result", ID: id, OK: true, Value: json.RawMessage(`2`)})
		}, wantType: "error", wantCode: server.CodeDuplicateResult, wantIn: `"s:code:1" was already answered`, wantClose: websocket.ClosePolicyViolation},
		{name: "oversized frame", after: func(p *peer, id string) {
			// The daemon refuses the frame from its header and closes
			// while the rest is still on the wire, so the write may fail
			// (reset): write in the background and read its answer now.
			frame := []byte(`{"type":"result","id":"` + id + `","ok":true,"value":"` + strings.Repeat("x", 3<<20) + `"}`)
			go p.conn.WriteMessage(websocket.TextMessage, frame)
		}, wantType: "error", wantCode: server.CodeTooLarge, wantClose: websocket.CloseMessageTooBig},
		{name: "binary frame", after: func(p *peer, _ string) { p.conn.WriteMessage(websocket.BinaryMessage, []byte(`{}`)) }, wantType: "error", wantCode: server.CodeBinary, wantClose: websocket.ClosePolicyViolation},
		{name: "second start", after: func(p *peer, _ string) { p.send(start("python", "return 1")) }, wantType: "error", wantCode: server.CodeUnexpected, wantClose: websocket.ClosePolicyViolation},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			sf := newSessionFixture(t)
			p := sf.dial(t, nil)
			var m map[string]any
			if c.before != "" {
				p.send(c.before)
				m, _ = p.next()
			} else {
				tools := c.tools
				if tools == nil {
					tools = []server.SessionTool{greetTool}
				}
				st := start("python", "call greet {}\nsleep 30s\nreturn 1", tools...)
				st.ID = "s"
				p.send(st)
				m, _ = p.next()
				if c.after != nil {
					if m["type"] != "accepted" {
						t.Fatalf("got %v, want accepted", m)
					}
					_, msg := p.expect(server.FrameCall)
					c.after(p, msg.(*server.CallFrame).ID)
					m, _ = p.next()
				}
			}
			if m["type"] != c.wantType {
				t.Fatalf("got %v, want a %s frame", m, c.wantType)
			}
			text, _ := m["error"].(string)
			if c.wantType == "error" {
				text, _ = m["message"].(string)
				if m["code"] != c.wantCode {
					t.Fatalf("code %v, want %s (%v)", m["code"], c.wantCode, m)
				}
			}
			if !strings.Contains(text, c.wantIn) {
				t.Fatalf("%q does not say %q", text, c.wantIn)
			}
			if code := p.closed(); code != c.wantClose {
				t.Fatalf("close code %d, want %d", code, c.wantClose)
			}
			waitNoSessions(t, sf.srv)
			// The run, when there was one, was aborted; none started
			// before the refusals.
			runs := testutil.ToFloat64(counter(t, sf.metrics, server.MetricRuns, "python", "abort", server.AnonymousTenant))
			if want := map[bool]float64{true: 1, false: 0}[c.after != nil]; runs != want || len(sf.py.Requests()) != int(want) {
				t.Fatalf("%v aborted runs of %d, want %v", runs, len(sf.py.Requests()), want)
			}
		})
	}
}

// hashOf is a token's SHA-256 in hex, as the auth file holds it.
func hashOf(token string) [32]byte { return sha256.Sum256([]byte(token)) }

func bearer(token string) http.Header {
	return http.Header{"Authorization": {"Bearer " + token}}
}

func TestSessionAuthAndOrigin(t *testing.T) {
	auth := server.NewAuth([]server.Tenant{
		{Name: "alpha", TokenSHA256: hashOf("alpha-token"), MaxRuns: 4, Queue: 4},
		{Name: "ops", TokenSHA256: hashOf("ops-token"), Metrics: true},
	})
	sf := newSessionFixture(t, server.WithAuth(auth))
	for name, h := range map[string]http.Header{
		"no token":     nil,
		"wrong token":  bearer("beta-token"),
		"other scheme": {"Authorization": {"Basic YWxwaGE6eA=="}},
		"two headers":  {"Authorization": {"Bearer alpha-token", "Bearer alpha-token"}},
		"empty":        bearer(""),
	} {
		t.Run(name, func(t *testing.T) {
			p := sf.dial(t, h)
			p.send(start("python", "return 1"))
			m, _ := p.expect(server.FrameRefused)
			if m["status"] != 401.0 || !strings.HasPrefix(m["error"].(string), "unauthorized") {
				t.Fatalf("refused %v", m)
			}
			p.closed()
			resp := sf.post(t, "/v1/run", h, `{"language":"python","code":"return 1"}`)
			if resp.StatusCode != http.StatusUnauthorized || resp.Header.Get("WWW-Authenticate") == "" {
				t.Fatalf("POST /v1/run: %d %v", resp.StatusCode, resp.Header)
			}
		})
	}
	p := sf.dial(t, bearer("alpha-token"))
	p.send(start("python", "return 1"))
	p.expect(server.FrameAccepted)
	p.expect(server.FrameDone)
	p.closed()

	if resp := sf.get(t, "/healthz", nil); resp.StatusCode != 200 {
		t.Fatalf("/healthz needs no token: %d", resp.StatusCode)
	}
	if resp := sf.get(t, "/metrics", bearer("alpha-token")); resp.StatusCode != http.StatusForbidden {
		t.Fatalf("/metrics for alpha: %d", resp.StatusCode)
	}
	if resp := sf.get(t, "/metrics", bearer("ops-token")); resp.StatusCode != 200 {
		t.Fatalf("/metrics for ops: %d", resp.StatusCode)
	}
	h := bearer("alpha-token")
	h.Set("Origin", "http://evil.example")
	if resp := sf.post(t, "/v1/run", h, `{"language":"python","code":"return 1"}`); resp.StatusCode != http.StatusForbidden {
		t.Fatalf("a browser's POST /v1/run: %d", resp.StatusCode)
	}
	url := "ws" + strings.TrimPrefix(sf.ts.URL, "http") + "/v1/sessions"
	if _, resp, err := websocket.DefaultDialer.Dial(url, h); err == nil || resp == nil || resp.StatusCode != http.StatusForbidden {
		t.Fatalf("a browser's session: %v", err)
	}
}

func (sf *sessionFixture) do(t *testing.T, method, path string, h http.Header, body string) *http.Response {
	t.Helper()
	req, err := http.NewRequest(method, sf.ts.URL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range h {
		req.Header[k] = v
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp
}

func (sf *sessionFixture) post(t *testing.T, path string, h http.Header, body string) *http.Response {
	return sf.do(t, http.MethodPost, path, h, body)
}

func (sf *sessionFixture) get(t *testing.T, path string, h http.Header) *http.Response {
	return sf.do(t, http.MethodGet, path, h, "")
}

// One tenant at its quota gets 429 (a refused frame with retryAfterMs,
// and Retry-After on POST /v1/run) while another tenant still runs.
func TestTenantQuota(t *testing.T) {
	auth := server.NewAuth([]server.Tenant{
		{Name: "alpha", TokenSHA256: hashOf("a"), MaxRuns: 1, Queue: 0},
		{Name: "beta", TokenSHA256: hashOf("b"), MaxRuns: 1, Queue: 0},
	})
	sf := newSessionFixture(t, server.WithAuth(auth), server.WithAdmission(4, 4))
	busy := sf.dial(t, bearer("a"))
	busy.send(start("python", "call greet {}\nreturn 1", greetTool))
	busy.expect(server.FrameAccepted)
	_, msg := busy.expect(server.FrameCall) // alpha's one slot is held

	p := sf.dial(t, bearer("a"))
	p.send(start("python", "return 1"))
	m, _ := p.expect(server.FrameRefused)
	if m["status"] != 429.0 || m["retryAfterMs"] != 1000.0 || !strings.Contains(m["error"].(string), `tenant "alpha" is at its quota`) {
		t.Fatalf("refused %v", m)
	}
	p.closed()
	resp := sf.post(t, "/v1/run", bearer("a"), `{"language":"python","code":"return 1"}`)
	if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") != "1" {
		t.Fatalf("POST /v1/run for alpha: %d, Retry-After %q", resp.StatusCode, resp.Header.Get("Retry-After"))
	}

	other := sf.dial(t, bearer("b"))
	other.send(start("python", "return 2"))
	other.expect(server.FrameAccepted)
	_, done := other.expect(server.FrameDone)
	if v := string(done.(*server.DoneFrame).Report.Value); v != "2" {
		t.Fatalf("beta's value %s", v)
	}
	other.closed()

	busy.send(server.ResultFrame{Type: "result", ID: msg.(*server.CallFrame).ID, OK: true, Value: json.RawMessage(`"x"`)})
	busy.expect(server.FrameEvent)
	busy.expect(server.FrameLog)
	busy.expect(server.FrameDone)
	busy.closed()
	// alpha's slot is free again.
	p = sf.dial(t, bearer("a"))
	p.send(start("python", "return 3"))
	p.expect(server.FrameAccepted)
	p.expect(server.FrameDone)
	p.closed()
}

// A result sent while the session waits for admission breaks the
// protocol before the run was accepted: a refusal, and the waiting
// session leaves the queue.
func TestSessionResultBeforeAccepted(t *testing.T) {
	sf := newSessionFixture(t, server.WithAdmission(1, 1))
	busy := sf.dial(t, nil)
	busy.send(start("python", "call greet {}\nreturn 1", greetTool))
	busy.expect(server.FrameAccepted)
	busy.expect(server.FrameCall)

	p := sf.dial(t, nil)
	p.send(start("python", "return 1"))
	p.send(server.ResultFrame{Type: "result", ID: "x:code:1", OK: true, Value: json.RawMessage(`1`)})
	m, _ := p.expect(server.FrameRefused)
	if m["status"] != 400.0 || !strings.Contains(m["error"].(string), "unexpected") {
		t.Fatalf("refused %v", m)
	}
	p.closed()
	busy.conn.Close()
	waitNoSessions(t, sf.srv)
}

// Per-request limits: raising one is a 400 naming it, lowering reaches
// the runtime, and the same keys work on POST /v1/run.
func TestRequestLimits(t *testing.T) {
	sf := newSessionFixture(t)
	for _, c := range []struct{ limits, want string }{
		{`{"memoryBytes": 1073741824}`, "invalid run request: limits.memoryBytes 1073741824 exceeds the runtime's 268435456: a request may lower a limit, never raise it"},
		{`{"wallTimeoutMs": 60000, "pids": 4096}`, "limits.wallTimeoutMs 60000 exceeds the runtime's 5000: a request may lower a limit, never raise it; limits.pids 4096 exceeds the runtime's 128"},
		{`{"cpus": 2}`, "limits.cpus 2 exceeds the runtime's 1: a request"},
		{`{"cpus": 1e300}`, "limits.cpus 1e+300 is out of range"},
		{`{"cpus": 1e-10}`, "limits.cpus 1e-10 is below 1e-9"},
		{`{"wallTimeoutMs": 1e15}`, "limits.wallTimeoutMs 1e+15 is out of range"},
		{`{"timeoutMs": 5}`, `unknown limit "timeoutMs"`},
		{`{"pids": 1.5}`, "limits.pids must be a positive integer"},
		{`{"pids": -1}`, "limits.pids must be a positive number"},
		{`{"memoryBytes": 1024}`, "memory 1024 bytes: must be at least 32 MiB"},
		{`[1]`, "limits must be an object"},
	} {
		p := sf.dial(t, nil)
		st := start("python", "return 1")
		st.Limits = json.RawMessage(c.limits)
		p.send(st)
		m, _ := p.expect(server.FrameRefused)
		if m["status"] != 400.0 || !strings.Contains(m["error"].(string), c.want) {
			t.Errorf("%s: refused %v, want %q", c.limits, m, c.want)
		}
		p.closed()
		resp := sf.post(t, "/v1/run", nil, `{"language":"python","code":"return 1","limits":`+c.limits+`}`)
		if resp.StatusCode != http.StatusBadRequest {
			t.Errorf("POST %s: %d", c.limits, resp.StatusCode)
		}
	}
	resp := sf.post(t, "/v1/run", nil, `{"language":"python","code":"return 1","limits":{"wallTimeoutMs":2000,"cpus":0.5,"memoryBytes":67108864,"pids":32,"computeTimeoutMs":1000}}`)
	if resp.StatusCode != 200 {
		t.Fatalf("POST with lower limits: %d", resp.StatusCode)
	}
	sf.py.mu.Lock()
	got := sf.py.limits
	sf.py.mu.Unlock()
	want := backend.Limits{WallTime: 2 * time.Second, ComputeTime: time.Second, MemoryBytes: 64 << 20, NanoCPUs: 5e8, Pids: 32}
	if len(got) != 1 || got[0] != want {
		t.Fatalf("the runtime got %+v, want [%+v]", got, want)
	}
	// A runtime that cannot lower limits (no backend.RequestChecker)
	// refuses them before the run, naming the option.
	rec := httptest.NewRecorder()
	sf.srv.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/v1/run", strings.NewReader(`{"language":"typescript","code":"return 1","limits":{"pids":8}}`)))
	var body struct{ Error string }
	_ = json.Unmarshal(rec.Body.Bytes(), &body)
	if rec.Code != http.StatusBadRequest || body.Error != "not implemented: limits: the typescript runtime of this server cannot lower limits per request" {
		t.Fatalf("limits on a runtime without them: %d %q", rec.Code, body.Error)
	}
	p := sf.dial(t, nil)
	st := start("typescript", "return 1")
	st.Limits = json.RawMessage(`{"pids":8}`)
	p.send(st)
	if m, _ := p.expect(server.FrameRefused); m["status"] != 400.0 || !strings.Contains(m["error"].(string), "limits: the typescript runtime of this server cannot lower limits per request") {
		t.Fatalf("session: refused %v", m)
	}
	p.closed()
}

// Replacing the tenants lets runs in flight finish and refuses a removed
// tenant's next request.
func TestAuthReloadKeepsRunsInFlight(t *testing.T) {
	auth := server.NewAuth([]server.Tenant{{Name: "alpha", TokenSHA256: hashOf("a")}})
	sf := newSessionFixture(t, server.WithAuth(auth))
	p := sf.dial(t, bearer("a"))
	p.send(start("python", "call greet {}\nreturn 1", greetTool))
	p.expect(server.FrameAccepted)
	_, msg := p.expect(server.FrameCall)

	auth.Set([]server.Tenant{{Name: "beta", TokenSHA256: hashOf("b")}})
	q := sf.dial(t, bearer("a"))
	q.send(start("python", "return 1"))
	if m, _ := q.expect(server.FrameRefused); m["status"] != 401.0 {
		t.Fatalf("refused %v", m)
	}
	q.closed()

	p.send(server.ResultFrame{Type: "result", ID: msg.(*server.CallFrame).ID, OK: true, Value: json.RawMessage(`"x"`)})
	p.expect(server.FrameEvent)
	p.expect(server.FrameLog)
	_, done := p.expect(server.FrameDone)
	if rep := done.(*server.DoneFrame).Report; rep.Error != nil {
		t.Fatalf("the run in flight failed: %+v", rep.Error)
	}
	p.closed()
}

// Shutdown waits for open sessions, refuses new ones, and aborts those
// left when its context ends.
func TestSessionShutdown(t *testing.T) {
	sf := newSessionFixture(t)
	p := sf.dial(t, nil)
	p.send(start("python", "call greet {}\nreturn 1", greetTool))
	p.expect(server.FrameAccepted)
	p.expect(server.FrameCall)
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- sf.srv.Shutdown(ctx) }()
	time.Sleep(50 * time.Millisecond)
	q := sf.dial(t, nil)
	m, _ := q.expect(server.FrameRefused)
	if m["status"] != 503.0 {
		t.Fatalf("a session during shutdown: %v", m)
	}
	if err := <-done; !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Shutdown: %v", err)
	}
	_, msg := p.until(server.FrameDone)
	if rep := msg.(*server.DoneFrame).Report; rep.Error == nil || rep.Error.Kind != backend.FailureAbort || !strings.Contains(rep.Error.Message, "shutting down") {
		t.Fatalf("report %+v", rep.Error)
	}
	if sf.srv.Sessions() != 0 {
		t.Fatal("sessions left after Shutdown")
	}
}

func TestParseAuthFile(t *testing.T) {
	h := hex.EncodeToString(make([]byte, 32))
	h2 := strings.Repeat("ab", 32)
	ok := `{"tenants":[{"name":"alpha","tokenSha256":"` + h + `","maxRuns":2},{"name":"beta.2","tokenSha256":"` + h2 + `","queue":0,"metrics":true}]}`
	ts, err := server.ParseAuthFile([]byte(ok), 8, 64)
	if err != nil {
		t.Fatal(err)
	}
	if len(ts) != 2 || ts[0].MaxRuns != 2 || ts[0].Queue != 64 || ts[1].MaxRuns != 8 || ts[1].Queue != 0 || !ts[1].Metrics || ts[1].TokenSHA256[0] != 0xab {
		t.Fatalf("%+v", ts)
	}
	for _, c := range []struct{ file, want string }{
		{`{}`, "no tenants"},
		{`{"tenants":[{"name":"a","tokenSha256":"` + h + `","token":"x"}]}`, `unknown field "token"`},
		{`{"tenants":[{"name":"a b","tokenSha256":"` + h + `"}]}`, `name "a b" must be`},
		{`{"tenants":[{"name":"a","tokenSha256":"` + h[:62] + `"}]}`, "64 hexadecimal digits"},
		{`{"tenants":[{"name":"a","tokenSha256":"` + h + `"},{"name":"a","tokenSha256":"` + h2 + `"}]}`, `tenant "a" is listed twice`},
		{`{"tenants":[{"name":"a","tokenSha256":"` + h + `"},{"name":"b","tokenSha256":"` + h + `"}]}`, `tenants "a" and "b" have the same token`},
		{`{"tenants":[{"name":"a","tokenSha256":"` + h + `","maxRuns":-1}]}`, "maxRuns must not be negative"},
		{ok + `x`, "trailing data"},
	} {
		_, err := server.ParseAuthFile([]byte(c.file), 1, 1)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: got %v, want %q", c.file, err, c.want)
		}
		if err != nil && (strings.Contains(err.Error(), h) || strings.Contains(err.Error(), h2)) {
			t.Errorf("the error shows a token hash: %v", err)
		}
	}
}

func TestAuthenticate(t *testing.T) {
	a := server.NewAuth([]server.Tenant{{Name: "a", TokenSHA256: hashOf("ta")}, {Name: "b", TokenSHA256: hashOf("tb")}})
	for token, want := range map[string]string{"ta": "a", "tb": "b", "tc": "", "": "", strings.Repeat("t", server.MaxTokenBytes+1): ""} {
		got, ok := a.Authenticate(token)
		if ok != (want != "") || got.Name != want {
			t.Errorf("Authenticate(%.10q) = %q, %v; want %q", token, got.Name, ok, want)
		}
	}
}

// A client that upgrades and never sends start is refused with 408 once
// the body timeout passes, and nothing stays open.
func TestSessionStartTimeout(t *testing.T) {
	sf := newSessionFixture(t, server.WithBodyTimeout(200*time.Millisecond))
	p := sf.dial(t, nil)
	m, _ := p.expect(server.FrameRefused)
	if m["status"] != float64(http.StatusRequestTimeout) || !strings.Contains(m["error"].(string), "no start frame") {
		t.Fatalf("refused %v", m)
	}
	p.closed()
	waitNoSessions(t, sf.srv)
}
