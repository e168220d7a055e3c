// Package client runs programs on a dsh-container daemon over its session
// endpoint (GET /v1/sessions), with tools defined and answered in the
// calling process.
//
// A run is retried, on the next of the client's endpoints, while it is
// refused with 429 or 503 or its connection fails before the daemon
// accepted it (endpoints.go), and never once a daemon has accepted it,
// whatever follows: a run executes at most once. A run lost after
// acceptance fails with ErrNodeLost; a refusal, a second accepted or a
// frame this client cannot read after it is a *ProtocolError, as is a
// run's frame before it.
package client

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/gorilla/websocket"
)

// Client talks to one daemon or to several (a fleet). The zero value is
// not usable: set URL or Endpoints (or use New).
type Client struct {
	// URL is the daemon: http://host:port, https://host:port or
	// unix:///path/to/api.sock.
	URL string
	// Endpoints are more daemons of the same fleet, tried after URL (if
	// set) in turn when one refuses a run with 429 or 503 or cannot be
	// reached before accepting it (endpoints.go).
	Endpoints []string
	// Token is the bearer token of a tenant (serve --auth); empty sends
	// none.
	Token string
	// TLS configures https (server CAs, a client certificate for mTLS).
	TLS *tls.Config
	// MaxRetries bounds the retries of a run not accepted (refused with
	// 429 or 503, or its connection failed first): default 3, or twice
	// the number of endpoints when that is more; negative: none.
	MaxRetries int
	// MaxRetryWait caps one wait between retries (default 30s).
	MaxRetryWait time.Duration
	// RetryBackoff is the first retry's backoff, doubled each retry and
	// jittered (default 100ms); a Retry-After from the endpoint tried
	// next waits longer.
	RetryBackoff time.Duration
	// OnRetry, if set, is called before each retry with the endpoint that
	// failed the run before accepting it and why (nothing ran there).
	OnRetry func(endpoint string, err error)
	// MaxFrameBytes bounds a frame from the daemon (default 64 MiB).
	MaxFrameBytes int64
}

// Request is a run: the program and, optionally, lower limits and the
// run's call id.
type Request struct {
	Language string  `json:"language"`
	Code     string  `json:"code"`
	ID       string  `json:"id,omitempty"`
	Limits   *Limits `json:"limits,omitempty"`
	// Runtime names the OCI runtime (e.g. "runsc"), one the daemon allows
	// (serve --allow-runtimes); empty runs under the daemon's default.
	Runtime string `json:"runtime,omitempty"`
	// Egress narrows the daemon's egress allowlist for this run
	// ("host:port", "*.domain:port"), each entry within the daemon's; nil
	// keeps the daemon's. A daemon without egress refuses it (400).
	Egress []string `json:"-"`
}

// Limits lower the daemon's budgets for one run; zero keeps the daemon's.
// Raising one is refused with 400 naming it.
type Limits struct {
	WallTimeoutMs    int64   `json:"wallTimeoutMs,omitempty"`
	ComputeTimeoutMs int64   `json:"computeTimeoutMs,omitempty"`
	MemoryBytes      int64   `json:"memoryBytes,omitempty"`
	CPUs             float64 `json:"cpus,omitempty"`
	Pids             int64   `json:"pids,omitempty"`
}

// Tool is a tool the program can call; Func runs in this process for each
// call. Its value is sent as JSON; an error rejects the program's call
// with the error's text.
type Tool struct {
	Name         string
	Description  string
	InputSchema  json.RawMessage // a JSON Schema object; nil: {"type":"object"}
	OutputSchema json.RawMessage // optional
	Func         func(ctx context.Context, args json.RawMessage) (any, error)
}

// Handlers receive a run's stream. Each may be nil. They are called from
// the goroutine reading the session, in order: keep them short.
type Handlers struct {
	// Accepted is called once the daemon admitted the run.
	Accepted func(id string)
	// Log is called for each log entry as the program writes it.
	Log func(LogEntry)
	// Event is called for each tool/code-dispatch event.
	Event func(json.RawMessage)
	// Approve decides a call the server's policy asks about (approval.go);
	// nil denies every such call. It runs in its own goroutine.
	Approve func(ctx context.Context, req ApprovalRequest) (Approval, error)
}

// RefusedError is a run the daemon refused before accepting it: nothing
// ran. Status has HTTP's meaning (400, 401, 404, 413, 429, 503).
type RefusedError struct {
	Status     int
	Message    string
	RetryAfter time.Duration
}

func (e *RefusedError) Error() string {
	return fmt.Sprintf("dsh-container refused the run (%d): %s", e.Status, e.Message)
}

// ProtocolError is an error frame from the daemon after the run was
// accepted (Code not-started: the program never ran), a frame this client
// could not accept (Code bad-frame, binary or too-large), or a frame the
// peer was not allowed to send then (Code unexpected: a refused or a
// second accepted after accepted, or a log, event, call, approval or done
// before it) — a daemon, a proxy or a peer posing as one that broke the
// protocol. The run may have started: a ProtocolError is never retried.
type ProtocolError struct {
	Code    string
	Message string
}

func (e *ProtocolError) Error() string {
	return fmt.Sprintf("dsh-container session: %s: %s", e.Code, e.Message)
}

// ErrNodeLost is a session that broke after a daemon accepted the run:
// its node or daemon died, or the connection to it did. The run was
// aborted, or may have been, or may have finished: it ran at most once,
// and it is not retried.
var ErrNodeLost = errors.New("dsh-container: node lost: the connection was lost after the run was accepted; it is not retried")

// ErrConnectionLost is ErrNodeLost's earlier name (the same error).
var ErrConnectionLost = ErrNodeLost

// abortGrace bounds the wait for the done frame after an abort.
const abortGrace = 15 * time.Second

// Run runs req on the daemon with tools answered here, streaming its logs
// and events to h, and returns its report. Cancelling ctx aborts the run:
// Run then returns the report the daemon sent (its error an abort), if it
// came in time, with ctx's error.
func (c *Client) Run(ctx context.Context, req Request, tools []Tool, h Handlers) (*Report, error) {
	if req.Language == "" || strings.TrimSpace(req.Code) == "" {
		return nil, errors.New("client: Request needs Language and Code")
	}
	byName := map[string]Tool{}
	for _, t := range tools {
		if t.Func == nil {
			return nil, fmt.Errorf("client: tool %q has no Func", t.Name)
		}
		if _, dup := byName[t.Name]; dup {
			return nil, fmt.Errorf("client: tool %q given twice", t.Name)
		}
		byName[t.Name] = t
	}
	return c.runRetrying(ctx, req, tools, byName, h)
}

func (c *Client) dial(ctx context.Context) (*websocket.Conn, *http.Response, error) {
	u, err := url.Parse(c.URL)
	if err != nil {
		return nil, nil, fmt.Errorf("client: URL %q: %v", c.URL, err)
	}
	d := websocket.Dialer{HandshakeTimeout: 30 * time.Second, TLSClientConfig: c.TLS}
	var target string
	switch u.Scheme {
	case "http":
		target = "ws://" + u.Host + "/v1/sessions"
	case "https":
		target = "wss://" + u.Host + "/v1/sessions"
	case "unix":
		path := u.Path
		d.NetDialContext = func(ctx context.Context, _, _ string) (net.Conn, error) {
			var nd net.Dialer
			return nd.DialContext(ctx, "unix", path)
		}
		target = "ws://dsh-container/v1/sessions"
	default:
		return nil, nil, fmt.Errorf("client: URL %q: the scheme must be http, https or unix", c.URL)
	}
	hdr := http.Header{}
	if c.Token != "" {
		hdr.Set("Authorization", "Bearer "+c.Token)
	}
	return d.DialContext(ctx, target, hdr)
}

// runOnce is one attempt: a *RefusedError before acceptance means nothing
// ran. accepted reports that the daemon accepted the run: whatever the
// error, such an attempt is never repeated.
func (c *Client) runOnce(ctx context.Context, req Request, tools []Tool, byName map[string]Tool, h Handlers) (rep *Report, accepted bool, err error) {
	conn, resp, err := c.dial(ctx)
	if err != nil {
		if resp != nil {
			// The daemon answered the upgrade with an HTTP error.
			var body struct {
				Error string `json:"error"`
			}
			_ = json.NewDecoder(http.MaxBytesReader(nil, resp.Body, 1<<16)).Decode(&body)
			resp.Body.Close()
			rf := &RefusedError{Status: resp.StatusCode, Message: body.Error, RetryAfter: parseRetryAfter(resp.Header.Get("Retry-After"), time.Now())}
			if rf.Message == "" {
				rf.Message = resp.Status
			}
			return nil, false, rf
		}
		return nil, false, notAccepted{fmt.Errorf("dsh-container: connecting to %s: %w", c.URL, err)}
	}
	maxFrame := c.MaxFrameBytes
	if maxFrame <= 0 {
		maxFrame = 64 << 20
	}
	conn.SetReadLimit(maxFrame)
	s := &clientSession{conn: conn, url: c.URL, h: h, byName: byName}
	defer s.close()

	start := map[string]any{"type": "start", "protocol": Protocol, "language": req.Language, "code": req.Code, "tools": wireTools(tools)}
	if req.ID != "" {
		start["id"] = req.ID
	}
	if req.Limits != nil {
		start["limits"] = req.Limits
	}
	if req.Runtime != "" {
		start["runtime"] = req.Runtime
	}
	if req.Egress != nil {
		start["egress"] = map[string][]string{"allow": req.Egress}
	}
	// A daemon that refuses at once (401) may have closed before the start
	// frame arrives: its refused frame is still to be read.
	startErr := s.write(start)

	// Abort on ctx: an abort frame once accepted; before it, closing the
	// connection is enough (nothing ran).
	stop := context.AfterFunc(ctx, func() {
		if s.isAccepted() {
			_ = s.write(map[string]any{"type": "abort", "reason": context.Cause(ctx).Error()})
			_ = conn.SetReadDeadline(time.Now().Add(abortGrace))
			return
		}
		_ = conn.Close()
	})
	defer stop()

	for {
		mt, data, err := conn.ReadMessage()
		accepted := s.isAccepted()
		if err != nil {
			switch {
			case ctx.Err() != nil:
				return nil, accepted, ctx.Err()
			case errors.Is(err, websocket.ErrReadLimit):
				// A frame came, and may have been accepted: not a lost
				// connection, never retried.
				return nil, accepted, s.violation("too-large", "sent a frame larger than %d bytes (MaxFrameBytes)", maxFrame)
			case accepted:
				return nil, true, fmt.Errorf("%w (%s): %v", ErrNodeLost, c.URL, err)
			case startErr != nil:
				return nil, false, notAccepted{fmt.Errorf("dsh-container: sending the start frame: %w", startErr)}
			}
			return nil, false, notAccepted{fmt.Errorf("dsh-container: the session closed before the run was accepted: %w", err)}
		}
		if mt != websocket.TextMessage {
			return nil, accepted, s.violation("binary", "sent a binary frame")
		}
		f, err := decodeFrame(data)
		if err != nil {
			return nil, accepted, &ProtocolError{Code: "bad-frame", Message: err.Error() + s.then()}
		}
		if !accepted && f.Type != "accepted" && f.Type != "refused" && f.Type != "error" {
			// A frame of a running program: the run may have started.
			return nil, false, s.violation("unexpected", "sent %s before accepted", f.Type)
		}
		switch f.Type {
		case "refused":
			if accepted {
				return nil, true, s.violation("unexpected", "refused the run (%d: %s) after accepting it", f.Status, f.Error)
			}
			return nil, false, &RefusedError{Status: f.Status, Message: f.Error, RetryAfter: time.Duration(f.RetryAfterMs) * time.Millisecond}
		case "accepted":
			if accepted {
				return nil, true, s.violation("unexpected", "sent accepted twice")
			}
			s.mu.Lock()
			s.accepted = true
			s.mu.Unlock()
			if h.Accepted != nil {
				h.Accepted(f.ID)
			}
		case "log":
			if h.Log != nil {
				h.Log(f.Log)
			}
		case "event":
			if h.Event != nil {
				h.Event(f.Event)
			}
		case "call":
			s.call(ctx, f)
		case "approval":
			s.approve(ctx, f)
		case "done":
			return f.Report, true, ctx.Err()
		case "error":
			return nil, accepted, &ProtocolError{Code: f.Code, Message: f.Message}
		}
	}
}

func wireTools(tools []Tool) []map[string]any {
	out := make([]map[string]any, 0, len(tools))
	for _, t := range tools {
		in := t.InputSchema
		if len(in) == 0 {
			in = json.RawMessage(`{"type":"object"}`)
		}
		m := map[string]any{"name": t.Name, "inputSchema": in}
		if t.Description != "" {
			m["description"] = t.Description
		}
		if len(t.OutputSchema) > 0 {
			m["outputSchema"] = t.OutputSchema
		}
		out = append(out, m)
	}
	return out
}

// clientSession is one connection's state.
type clientSession struct {
	conn   *websocket.Conn
	url    string
	h      Handlers
	byName map[string]Tool

	wmu      sync.Mutex // one writer at a time
	mu       sync.Mutex
	accepted bool
	calls    sync.WaitGroup
	cancel   []context.CancelFunc
}

func (s *clientSession) isAccepted() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.accepted
}

// then says what a failure means for the run at this point of the
// session.
func (s *clientSession) then() string {
	if s.isAccepted() {
		return "; the run was accepted and is not retried"
	}
	return "; the run may have started and is not retried"
}

// violation is the peer at s.url (a daemon, or whatever answers there)
// breaking the session protocol, as format says.
func (s *clientSession) violation(code, format string, args ...any) *ProtocolError {
	return &ProtocolError{Code: code, Message: "the peer at " + s.url + " " + fmt.Sprintf(format, args...) + ", a protocol violation" + s.then()}
}

func (s *clientSession) write(v any) error {
	data, err := json.Marshal(v)
	if err != nil {
		return err
	}
	s.wmu.Lock()
	defer s.wmu.Unlock()
	_ = s.conn.SetWriteDeadline(time.Now().Add(30 * time.Second))
	return s.conn.WriteMessage(websocket.TextMessage, data)
}

// spawn runs fn in its own goroutine with a context the session cancels
// when it ends, counted in s.calls.
func (s *clientSession) spawn(ctx context.Context, fn func(context.Context)) {
	cctx, cancel := context.WithCancel(ctx)
	s.mu.Lock()
	s.cancel = append(s.cancel, cancel)
	s.mu.Unlock()
	s.calls.Add(1)
	go func() {
		defer s.calls.Done()
		defer cancel()
		fn(cctx)
	}()
}

// call runs one tool call in its own goroutine and sends its result.
func (s *clientSession) call(ctx context.Context, f *frame) {
	t, ok := s.byName[f.Name]
	s.spawn(ctx, func(cctx context.Context) {
		res := map[string]any{"type": "result", "id": f.ID}
		value, err := func() (v any, err error) {
			defer func() {
				if p := recover(); p != nil {
					err = fmt.Errorf("tool %q panicked: %v", f.Name, p)
				}
			}()
			if !ok {
				return nil, fmt.Errorf("tool %q is not defined by this client", f.Name)
			}
			return t.Func(cctx, f.Args)
		}()
		if err == nil {
			var raw []byte
			raw, err = json.Marshal(value)
			if err == nil {
				res["ok"], res["value"] = true, json.RawMessage(raw)
			} else {
				err = fmt.Errorf("tool %q returned a value that is not JSON: %v", f.Name, err)
			}
		}
		if err != nil {
			msg := err.Error()
			if len(msg) > 16<<10 {
				msg = strings.ToValidUTF8(msg[:16<<10], "")
			}
			res["ok"], res["message"] = false, msg
			delete(res, "value")
		}
		if ctx.Err() != nil {
			// Run's ctx is done: the abort frame ends the run, and a
			// result sent first (the tool's own "context canceled")
			// could end it as the program's exception instead.
			return
		}
		_ = s.write(res)
	})
}

// close cancels tool calls still running, waits for them, and closes the
// connection.
func (s *clientSession) close() {
	s.mu.Lock()
	for _, c := range s.cancel {
		c()
	}
	s.mu.Unlock()
	s.calls.Wait()
	s.wmu.Lock()
	_ = s.conn.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseNormalClosure, ""), time.Now().Add(time.Second))
	s.wmu.Unlock()
	_ = s.conn.Close()
}
