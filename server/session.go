package server

// GET /v1/sessions: one run over a websocket, with tools the client
// defines and answers, its logs and events streamed as they happen, and
// abort. The protocol is in docs/session-protocol.md.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/gorilla/websocket"

	"github.com/dsh-container/dsh-container/backend"
	"github.com/dsh-container/dsh-container/registry"
)

// Bounds and timings of a session.
const (
	// MaxSessionOutboxBytes bounds the frames (logs, events, calls)
	// waiting for a client that reads slower than its run writes; past it
	// the run is aborted. The last frame (done, error, refused) is not
	// counted.
	MaxSessionOutboxBytes = 8 << 20
	// SessionWriteTimeout bounds writing one frame to the client; a
	// client that does not read for this long is gone.
	SessionWriteTimeout = 30 * time.Second
	// SessionIdleTimeout: a client that sends nothing, not even a pong to
	// the daemon's pings, for this long is gone.
	SessionIdleTimeout = 60 * time.Second
	// sessionPingPeriod spaces the daemon's pings.
	sessionPingPeriod = 20 * time.Second
	// sessionCloseWait bounds the wait for the client's close frame once
	// the daemon has sent its own.
	sessionCloseWait = 2 * time.Second
)

// Call states of a session's client-tool sub-calls, by sequence number.
const (
	callNone      uint8 = iota // a sub-call of a server tool, or none
	callPending                // sent, waiting for its result
	callAnswered               // its result arrived
	callAbandoned              // the run settled first: a late result is ignored
)

// handleSession serves GET /v1/sessions.
func (s *Server) handleSession(w http.ResponseWriter, r *http.Request) {
	if !isWebsocketUpgrade(r) {
		writeError(w, http.StatusBadRequest, "GET /v1/sessions is a websocket: connect with a websocket client (Connection: Upgrade, Upgrade: websocket)")
		return
	}
	up := websocket.Upgrader{
		HandshakeTimeout: s.opts.bodyTimeout,
		// The gate has refused every request that carries an Origin.
		CheckOrigin: func(*http.Request) bool { return true },
		Error: func(w http.ResponseWriter, _ *http.Request, status int, reason error) {
			writeError(w, status, reason.Error())
		},
	}
	conn, err := up.Upgrade(w, r, nil)
	if err != nil {
		return // the upgrader answered
	}
	ctx, cancel := context.WithCancelCause(context.WithoutCancel(r.Context()))
	ss := &session{
		s: s, conn: conn, tenant: tenantOf(r.Context()), ctx: ctx, cancel: cancel,
		maxFrame:   s.opts.maxBody,
		wake:       make(chan struct{}, 1),
		writerDone: make(chan struct{}),
		readerDone: make(chan struct{}),
		pending:    map[string]chan *ResultFrame{},
	}
	ss.log = s.log.With("tenant", ss.tenant.Name, "remote", r.RemoteAddr)
	ss.serve(authFailure(r.Context()))
}

// session is one GET /v1/sessions connection.
type session struct {
	s        *Server
	conn     *websocket.Conn
	tenant   Tenant
	log      *slog.Logger
	maxFrame int64

	// ctx is cancelled, with the reason as its cause, when the client
	// aborts, disconnects or breaks the protocol, when the daemon shuts
	// down, and when the session ends. The run runs under it.
	ctx    context.Context
	cancel context.CancelCauseFunc

	// The outbox: frames for the writer goroutine, in order.
	omu        sync.Mutex
	out        []outFrame
	outBytes   int  // bytes of the counted frames in out
	final      bool // the last frame (refused, error, done) was queued
	closing    []byte
	writeErr   error
	wake       chan struct{}
	writerDone chan struct{}
	readerDone chan struct{}
	reading    bool
	// stopping is set once the session closes: reads no longer extend
	// the read deadline (rdMu orders the two).
	rdMu     sync.Mutex
	stopping bool

	// Call state, under cmu.
	cmu       sync.Mutex
	accepted  bool
	ended     bool // a last frame was decided: nothing more is accepted
	parent    string
	pending   map[string]chan *ResultFrame
	states    []uint8 // by sub-call sequence number
	violation *SessionError
	// approvals asked of the client (session_approval.go).
	approvals sessionApprovals
}

type outFrame struct {
	data    []byte
	counted bool
}

// errClientGone is the cause of a run whose client disconnected.
var errClientGone = errors.New("the client disconnected")

// serve runs the session to its end; nothing of it survives the return.
func (ss *session) serve(authFail *refusal) {
	go ss.writeLoop()
	defer ss.finish()
	if !ss.s.sessions.add(ss) {
		ss.refuse(&refusal{status: http.StatusServiceUnavailable, msg: "the daemon is shutting down; retry elsewhere"})
		return
	}
	ss.s.metrics.sessions.WithLabelValues(ss.tenant.Name).Inc()
	defer ss.s.metrics.sessions.WithLabelValues(ss.tenant.Name).Dec()
	if authFail != nil {
		ss.refuse(authFail)
		return
	}
	// The start frame is read into bytes reserved for it once it
	// arrives, within the body timeout whether it waits for the frame or
	// for them; the reservation lasts as long as the session.
	start, hold, rf := ss.readStart(time.Now().Add(ss.s.opts.bodyTimeout))
	defer hold.release()
	if rf != nil {
		ss.refuse(rf)
		return
	}
	if start == nil {
		return // the client left, or broke the protocol (violate answered)
	}
	run, rf := ss.prepare(start)
	if rf != nil {
		ss.refuse(rf)
		return
	}
	ss.conn.SetReadDeadline(time.Now().Add(SessionIdleTimeout))
	ss.conn.SetPongHandler(func(string) error {
		ss.extendRead()
		return nil
	})
	ss.reading = true
	go ss.readLoop()

	inFlight := ss.s.metrics.inFlight.WithLabelValues(string(run.lang), ss.tenant.Name)
	inFlight.Inc()
	defer inFlight.Dec()
	release, err := ss.s.admit.acquire(ss.ctx, ss.tenant, run.lang)
	if err != nil {
		var r *refusal
		if errors.As(err, &r) {
			ss.s.metrics.observeRejected(run.lang, ss.tenant.Name)
			ss.refuse(r)
		}
		return // the client aborted, left or broke the protocol while it waited
	}
	defer release()
	if !ss.accept(run.id) {
		return
	}
	res := run.reg.Execute(ss.ctx, registry.Call{ID: run.id, Name: registry.RunCode, Arguments: run.args})
	ss.end(run, res)
}

// sessionRun is a validated start frame, ready to run.
type sessionRun struct {
	lang backend.Language
	id   string
	args json.RawMessage
	reg  *registry.Registry

	mu     sync.Mutex
	events []registry.Event
	egress []json.RawMessage // the run's egress events
}

// readStart reads the first frame by deadline and decodes it. The frame
// is read into bytes reserved for it as it arrives (readAtMost: exactly
// its size when it ends within its first 4 KiB, else the frame limit,
// shrunk to its size once read), which the session holds until it ends:
// the tenant's share full refuses it (429), as the total past the
// deadline does (503). A frame that breaks the protocol ends the session
// as a violation (1008, 1009 for one too large) and readStart returns a
// nil frame and refusal, as it does when the client left.
func (ss *session) readStart(deadline time.Time) (*StartFrame, *reservation, *refusal) {
	ss.conn.SetReadDeadline(deadline)
	ctx, cancel := context.WithDeadline(ss.ctx, deadline)
	defer cancel()
	// The first read's bytes are reserved at the upgrade, so the
	// tenant's share bounds its sessions that have not sent their start
	// frame yet: at most share / 4 KiB of them.
	hold, err := ss.s.intake.reserve(ctx, ss.tenant, min(smallRequest, ss.s.opts.maxBody))
	if err != nil {
		var rf *refusal
		if errors.As(err, &rf) && ss.ctx.Err() == nil {
			return nil, nil, rf
		}
		return nil, nil, nil
	}
	reserve := func(n int64) error { return hold.grow(ctx, ss.tenant, n) }
	data, err := ss.readFrame(false, reserve)
	if err != nil {
		hold.release()
		var (
			se *SessionError
			rf *refusal
		)
		switch {
		case errors.As(err, &rf):
			if ss.ctx.Err() == nil { // else the client left or the daemon stops
				return nil, nil, rf
			}
		case errors.As(err, &se):
			ss.violate(se)
		case isTimeout(err):
			return nil, nil, &refusal{status: http.StatusRequestTimeout, msg: fmt.Sprintf("no start frame within %v of the upgrade", ss.s.opts.bodyTimeout)}
		}
		return nil, nil, nil
	}
	hold.shrink(int64(len(data)))
	msg, err := DecodeSessionFrame(ClientToDaemon, data, 0)
	if err != nil {
		var se *SessionError
		errors.As(err, &se)
		ss.violate(se)
		return nil, hold, nil
	}
	start, ok := msg.(*StartFrame)
	if !ok {
		ss.violate(&SessionError{Code: CodeUnexpected, Message: fmt.Sprintf("the first frame must be start, not %s", msg.(interface{ frameType() string }).frameType())})
		return nil, hold, nil
	}
	return start, hold, nil
}

// isTimeout reports a read deadline that passed (gorilla/websocket hides
// the net error's identity, not its Timeout).
func isTimeout(err error) bool {
	var ne net.Error
	return errors.Is(err, os.ErrDeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout())
}

func violationRefusal(se *SessionError) *refusal {
	status := http.StatusBadRequest
	if se.Code == CodeTooLarge {
		status = http.StatusRequestEntityTooLarge
	}
	return &refusal{status: status, msg: se.Code + ": " + se.Message}
}

func (*ResultFrame) frameType() string { return FrameResult }
func (*AbortFrame) frameType() string  { return FrameAbort }
func (*StartFrame) frameType() string  { return FrameStart }

// prepare checks a start frame against the server (mode, language,
// limits, the tools' names and schemas) and builds the run's registry.
func (ss *session) prepare(start *StartFrame) (*sessionRun, *refusal) {
	s := ss.s
	bad := func(format string, args ...any) (*sessionRun, *refusal) {
		return nil, &refusal{status: http.StatusBadRequest, msg: fmt.Sprintf(format, args...)}
	}
	if s.opts.mode == registry.ModeNative {
		return nil, &refusal{status: http.StatusNotFound, msg: fmt.Sprintf("%s is not offered in mode %q: this server offers its tools natively only", registry.RunCode, registry.ModeNative)}
	}
	lang, err := backend.ParseLanguage(start.Language)
	if err != nil {
		return bad("%v; this server runs: %s", err, strings.Join(s.langs, ", "))
	}
	rt, err := s.runtimeFor(lang, start.Runtime)
	if err != nil {
		return bad("%v", err)
	}
	if strings.TrimSpace(start.Code) == "" {
		return bad("code is required and must not be blank")
	}
	run := &sessionRun{lang: lang, id: start.ID, events: []registry.Event{}}
	base, err := checkOptions(start.Limits, start.Egress, rt, func(e json.RawMessage) {
		// At most maxConnections+1 per run (the egress policy's bound).
		run.mu.Lock()
		run.egress = append(run.egress, e)
		run.mu.Unlock()
		ss.send(rawEventFrame{Type: FrameEvent, Event: e}, false)
	})
	if err != nil {
		return bad("%v", err)
	}
	if run.id == "" {
		run.id = newCallID()
	}
	ss.parent = run.id
	run.reg = registry.New(append(append([]registry.Option{}, s.opts.regOpts...),
		registry.WithMode(s.opts.mode),
		registry.WithRuntime(rt),
		registry.WithRunRequest(base),
		registry.WithLogger(s.log),
		registry.WithEventSink(func(e registry.Event) {
			run.mu.Lock()
			run.events = append(run.events, e)
			run.mu.Unlock()
			ss.send(EventFrame{Type: FrameEvent, Event: e}, false)
		}),
		registry.WithLogSink(func(_ string, e backend.LogEntry) {
			ss.send(LogFrame{Type: FrameLog, LogEntry: e}, false)
		}),
		registry.WithApprover(ss),
	)...)
	server := map[string]bool{}
	for _, t := range s.tools() {
		if err := run.reg.Register(t); err != nil {
			return nil, &refusal{status: http.StatusInternalServerError, msg: err.Error()}
		}
		server[t.Name] = true
	}
	mine := map[string]bool{}
	for i, t := range start.Tools {
		name := truncateName(t.Name)
		switch {
		case server[t.Name]:
			return bad("tools[%d]: tool %q is defined by the server; tools from the server and the client share one namespace, so name it differently", i, name)
		case mine[t.Name]:
			return bad("tools[%d]: tool %q is defined twice", i, name)
		case t.Name == registry.RunCode:
			return bad("tools[%d]: %q is reserved for the Code Mode transport", i, registry.RunCode)
		case t.Name == "" || len(t.Name) > backend.MaxFunctionNameBytes:
			return bad("tools[%d]: a tool name is 1 to %d bytes", i, backend.MaxFunctionNameBytes)
		}
		mine[t.Name] = true
		if err := checkSchema(t.InputSchema, true); err != nil {
			return bad("tools[%d] %q: inputSchema is not JSON Schema: %v", i, name, err)
		}
		if len(t.OutputSchema) > 0 {
			if err := checkSchema(t.OutputSchema, false); err != nil {
				return bad("tools[%d] %q: outputSchema is not JSON Schema: %v", i, name, err)
			}
		}
		if err := run.reg.Register(ss.clientTool(t)); err != nil {
			return bad("tools[%d] %q: %v", i, name, err)
		}
	}
	run.args = registry.RunCodeArguments(start.Code)
	return run, nil
}

// clientTool is a tool the client answers: each sub-call becomes a call
// frame, and the run waits for its result frame.
func (ss *session) clientTool(t SessionTool) registry.Tool {
	tool := registry.Tool{Name: t.Name, Description: t.Description, Parameters: t.InputSchema, OutputSchema: t.OutputSchema}
	if len(t.OutputSchema) > 0 {
		tool.ExecuteOutput = func(ctx context.Context, exec registry.Execution) (registry.Output, error) {
			v, err := ss.callClient(ctx, t.Name, exec)
			if err != nil {
				return registry.Output{}, err
			}
			return registry.Output{Content: []registry.Block{registry.TextBlock(string(v))}, Structured: v}, nil
		}
		return tool
	}
	tool.Execute = func(ctx context.Context, exec registry.Execution) ([]registry.Block, error) {
		v, err := ss.callClient(ctx, t.Name, exec)
		if err != nil {
			return nil, err
		}
		// Without an output schema a tool's result is text: a string
		// value is that text, any other value its JSON.
		var text string
		if len(v) == 0 || v[0] != '"' || json.Unmarshal(v, &text) != nil {
			text = string(v)
		}
		return []registry.Block{registry.TextBlock(text)}, nil
	}
	return tool
}

// callClient sends a call frame and waits for its result, or for the run
// to settle.
func (ss *session) callClient(ctx context.Context, name string, exec registry.Execution) (json.RawMessage, error) {
	seq, ok := ss.seqOf(exec.CallID)
	if !ok {
		return nil, fmt.Errorf("internal error: sub-call id %q", exec.CallID)
	}
	ch := make(chan *ResultFrame, 1)
	ss.cmu.Lock()
	ss.pending[exec.CallID] = ch
	ss.setState(seq, callPending)
	ss.cmu.Unlock()
	ss.send(CallFrame{Type: FrameCall, ID: exec.CallID, Name: name, Args: exec.Arguments}, false)
	select {
	case res := <-ch:
		if !res.OK {
			return nil, errors.New(res.Message)
		}
		return res.Value, nil
	case <-ctx.Done():
		ss.cmu.Lock()
		if _, still := ss.pending[exec.CallID]; still {
			delete(ss.pending, exec.CallID)
			ss.setState(seq, callAbandoned)
		}
		ss.cmu.Unlock()
		return nil, context.Cause(ctx)
	}
}

// seqOf is the sequence number of one of this run's sub-call ids,
// "<parent>:code:<n>".
func (ss *session) seqOf(id string) (int, bool) {
	rest, ok := strings.CutPrefix(id, ss.parent+":code:")
	if !ok {
		return 0, false
	}
	n, err := strconv.Atoi(rest)
	if err != nil || n < 1 || n > 1<<30 || strconv.Itoa(n) != rest {
		return 0, false
	}
	return n, true
}

// setState records a call's state; cmu is held.
func (ss *session) setState(seq int, st uint8) {
	for len(ss.states) <= seq {
		ss.states = append(ss.states, callNone)
	}
	ss.states[seq] = st
}

// deliver hands a result frame to the call waiting for it.
func (ss *session) deliver(m *ResultFrame) error {
	ss.cmu.Lock()
	defer ss.cmu.Unlock()
	if !ss.accepted {
		return sessionErr(CodeUnexpected, "a result before the run was accepted: no call has been sent")
	}
	if ch, ok := ss.pending[m.ID]; ok {
		delete(ss.pending, m.ID)
		seq, _ := ss.seqOf(m.ID)
		ss.setState(seq, callAnswered)
		ch <- m
		return nil
	}
	if seq, ok := ss.seqOf(m.ID); ok && seq < len(ss.states) {
		switch ss.states[seq] {
		case callAnswered:
			return sessionErr(CodeDuplicateResult, "call %q was already answered", truncateName(m.ID))
		case callAbandoned:
			return nil // the run settled before it arrived
		}
	}
	return sessionErr(CodeUnknownCall, "no call %q was sent to this client", truncateName(m.ID))
}

// readLoop reads the client's frames once the start frame is in: results,
// aborts; anything else breaks the protocol. A read error is a
// disconnect.
func (ss *session) readLoop() {
	defer close(ss.readerDone)
	for {
		data, err := ss.readFrame(true, nil)
		if err != nil {
			var se *SessionError
			if errors.As(err, &se) {
				ss.violate(se)
			} else {
				ss.cancel(errClientGone)
			}
			return
		}
		ss.extendRead()
		msg, err := DecodeSessionFrame(ClientToDaemon, data, 0)
		if err != nil {
			var se *SessionError
			errors.As(err, &se)
			ss.violate(se)
			return
		}
		switch m := msg.(type) {
		case *StartFrame:
			ss.violate(&SessionError{Code: CodeUnexpected, Message: "a session has one start frame"})
			return
		case *AbortFrame:
			reason := "the client aborted the run"
			if m.Reason != "" {
				reason += ": " + m.Reason
			}
			ss.cancel(errors.New(reason))
		case *ApprovalResultFrame:
			if err := ss.deliverApproval(m); err != nil {
				var se *SessionError
				errors.As(err, &se)
				ss.violate(se)
				return
			}
		case *ResultFrame:
			if err := ss.deliver(m); err != nil {
				var se *SessionError
				errors.As(err, &se)
				ss.violate(se)
				return
			}
		}
	}
}

// extendRead gives an active client SessionIdleTimeout more.
func (ss *session) extendRead() {
	ss.rdMu.Lock()
	defer ss.rdMu.Unlock()
	if !ss.stopping {
		ss.conn.SetReadDeadline(time.Now().Add(SessionIdleTimeout))
	}
}

// maxEarlyFrame bounds a frame that arrives after start and before the
// run was accepted: the only one allowed then is abort, whose reason is
// at most MaxMessageBytes (six bytes of JSON text each, escaped). A
// waiting session holds no more than this beyond its start frame.
const maxEarlyFrame = 8 * MaxMessageBytes

// readFrame reads one text frame of at most maxFrame bytes — of at most
// maxEarlyFrame after start until the run was accepted — without
// buffering more than that; a larger or binary frame is a *SessionError.
// reserve, when not nil, is readAtMost's.
func (ss *session) readFrame(afterStart bool, reserve func(int64) error) ([]byte, error) {
	typ, r, err := ss.conn.NextReader()
	if err != nil {
		return nil, err
	}
	if typ != websocket.TextMessage {
		return nil, sessionErr(CodeBinary, "binary frames are not part of the protocol: send JSON text frames")
	}
	limit := ss.maxFrame
	if afterStart {
		// A client sends a result only after a call, which follows
		// accepted: the frame began after accepted was set.
		ss.cmu.Lock()
		if !ss.accepted {
			limit = min(limit, maxEarlyFrame)
		}
		ss.cmu.Unlock()
	}
	data, err := readAtMost(r, limit, reserve)
	if errors.Is(err, errOverLimit) {
		if limit < ss.maxFrame {
			return nil, sessionErr(CodeTooLarge, "a frame before accepted exceeds %d bytes: only abort may be sent then", limit)
		}
		return nil, sessionErr(CodeTooLarge, "a frame exceeds the %d-byte limit", limit)
	}
	return data, err
}

// violate ends the session for a protocol violation: a refused frame
// before the run was accepted, an error frame after it, then the run is
// aborted.
func (ss *session) violate(se *SessionError) {
	ss.cmu.Lock()
	if ss.ended {
		ss.cmu.Unlock()
		return
	}
	ss.ended, ss.violation = true, se
	accepted := ss.accepted
	ss.cmu.Unlock()
	if accepted {
		ss.send(ErrorFrame{Type: FrameError, Code: se.Code, Message: se.Message}, true)
	} else {
		rf := violationRefusal(se)
		ss.send(RefusedFrame{Type: FrameRefused, Status: rf.status, Error: rf.msg}, true)
	}
	ss.log.Warn("session protocol violation", "code", se.Code, "err", se.Message)
	ss.cancel(fmt.Errorf("protocol violation by the client: %s: %s", se.Code, se.Message))
}

// refuse ends the session before its run was accepted.
func (ss *session) refuse(rf *refusal) {
	ss.cmu.Lock()
	if ss.ended {
		ss.cmu.Unlock()
		return
	}
	ss.ended = true
	ss.cmu.Unlock()
	ss.log.Info("session refused", "status", rf.status, "err", rf.msg)
	ss.send(RefusedFrame{Type: FrameRefused, Status: rf.status, Error: rf.msg, RetryAfterMs: rf.retryAfter}, true)
}

// accept sends the accepted frame, unless the session already ended.
func (ss *session) accept(id string) bool {
	ss.cmu.Lock()
	defer ss.cmu.Unlock()
	if ss.ended || ss.ctx.Err() != nil {
		return false
	}
	ss.accepted = true
	return ss.send(AcceptedFrame{Type: FrameAccepted, ID: id}, false)
}

// end sends the run's report, or why it never started.
func (ss *session) end(run *sessionRun, res registry.Result) {
	ss.cmu.Lock()
	ended := ss.ended
	ss.ended = true
	ss.cmu.Unlock()
	if res.CodeRun == nil {
		ss.s.metrics.observeRejected(run.lang, ss.tenant.Name)
		err := res.Err
		if err == nil {
			err = errors.New(res.Text())
		}
		ss.log.WarnContext(ss.ctx, "session run not started", "call_id", run.id, "language", string(run.lang), "err", err)
		if !ended {
			ss.send(ErrorFrame{Type: FrameError, Code: CodeNotStarted, Message: err.Error()}, true)
		}
		return
	}
	cr := res.CodeRun
	ss.s.metrics.observeRun(run.lang, ss.tenant.Name, cr)
	run.mu.Lock()
	out := RunResponse{ID: run.id, Report: backend.NewReport(cr), Events: run.events, EgressEvents: run.egress}
	run.mu.Unlock()
	ss.log.Info("session run", "run_id", cr.Stats.RunID, "trace_id", cr.Stats.TraceID, "call_id", run.id, "language", string(run.lang), "outcome", outcome(cr),
		"wall_ms", out.Stats.WallMs, "startup_ms", out.Stats.StartupMs, "calls", cr.Stats.Calls, "warm", cr.Stats.Warm)
	if !ended {
		ss.send(DoneFrame{Type: FrameDone, Report: out}, true)
	}
}

// CodeNotStarted is the code of the error frame a session ends with when
// its run was accepted but the daemon could not start the program (its
// runtime is closed, its image missing, the container engine
// unreachable): nothing of the program ran.
const CodeNotStarted = "not-started"

// send queues a frame for the writer. A frame that is not the last one
// counts against MaxSessionOutboxBytes: a client that lets more pile up
// has its run aborted. Nothing is queued after the last frame or a failed
// write. It reports whether the frame was queued.
func (ss *session) send(v any, last bool) bool {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		ss.log.Error("encoding a session frame", "err", err)
		return false
	}
	data := bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
	ss.omu.Lock()
	if ss.final || ss.writeErr != nil || ss.closing != nil {
		ss.omu.Unlock()
		return false
	}
	if !last && ss.outBytes+len(data) > MaxSessionOutboxBytes {
		ss.omu.Unlock()
		ss.cancel(fmt.Errorf("the client does not read its frames: more than %d bytes are waiting for it", MaxSessionOutboxBytes))
		return false
	}
	ss.out = append(ss.out, outFrame{data: data, counted: !last})
	if last {
		ss.final = true
	} else {
		ss.outBytes += len(data)
	}
	ss.omu.Unlock()
	ss.signal()
	return true
}

func (ss *session) signal() {
	select {
	case ss.wake <- struct{}{}:
	default:
	}
}

// writeLoop writes queued frames in order, pings the client, and, once
// the session closes, sends the close frame after everything queued.
func (ss *session) writeLoop() {
	defer close(ss.writerDone)
	ping := time.NewTicker(sessionPingPeriod)
	defer ping.Stop()
	for {
		ss.omu.Lock()
		var f outFrame
		closing := ss.closing
		if len(ss.out) > 0 {
			f = ss.out[0]
			ss.out[0] = outFrame{}
			ss.out = ss.out[1:]
			if f.counted {
				ss.outBytes -= len(f.data)
			}
			closing = nil
		}
		ss.omu.Unlock()
		switch {
		case f.data != nil:
			ss.conn.SetWriteDeadline(time.Now().Add(SessionWriteTimeout))
			if err := ss.conn.WriteMessage(websocket.TextMessage, f.data); err != nil {
				ss.writeFailed(err)
				return
			}
		case closing != nil:
			_ = ss.conn.WriteControl(websocket.CloseMessage, closing, time.Now().Add(time.Second))
			return
		default:
			select {
			case <-ss.wake:
			case <-ping.C:
				if err := ss.conn.WriteControl(websocket.PingMessage, nil, time.Now().Add(SessionWriteTimeout)); err != nil {
					ss.writeFailed(err)
					return
				}
			}
		}
	}
}

func (ss *session) writeFailed(err error) {
	ss.omu.Lock()
	ss.writeErr = err
	ss.out = nil
	ss.omu.Unlock()
	ss.cancel(fmt.Errorf("%w: writing to it failed: %v", errClientGone, err))
}

// finish closes the session: the close frame after every queued frame,
// a short wait for the client's, then the connection. It returns once
// the reader and writer goroutines have exited.
func (ss *session) finish() {
	ss.cancel(errors.New("the session ended"))
	code, reason := websocket.CloseNormalClosure, ""
	ss.cmu.Lock()
	if v := ss.violation; v != nil {
		code, reason = websocket.ClosePolicyViolation, v.Code
		if v.Code == CodeTooLarge {
			code = websocket.CloseMessageTooBig
		}
	}
	ss.cmu.Unlock()
	ss.omu.Lock()
	ss.closing = websocket.FormatCloseMessage(code, reason)
	ss.omu.Unlock()
	ss.signal()
	<-ss.writerDone
	// Wait briefly for the client's close frame, so it reads every frame
	// before the connection goes.
	ss.rdMu.Lock()
	ss.stopping = true
	ss.conn.SetReadDeadline(time.Now().Add(sessionCloseWait))
	ss.rdMu.Unlock()
	if ss.reading {
		<-ss.readerDone
	} else {
		for {
			if _, _, err := ss.conn.NextReader(); err != nil {
				break
			}
		}
	}
	ss.conn.Close()
	ss.s.sessions.remove(ss)
}

// sessionSet tracks open sessions, so the daemon can wait for them at
// shutdown (a hijacked connection is not the HTTP server's any more).
type sessionSet struct {
	mu       sync.Mutex
	live     map[*session]struct{}
	draining bool
	changed  chan struct{} // closed and replaced whenever a session ends
}

func (set *sessionSet) add(ss *session) bool {
	set.mu.Lock()
	defer set.mu.Unlock()
	if set.draining {
		return false
	}
	if set.live == nil {
		set.live = map[*session]struct{}{}
		set.changed = make(chan struct{})
	}
	set.live[ss] = struct{}{}
	return true
}

func (set *sessionSet) remove(ss *session) {
	set.mu.Lock()
	defer set.mu.Unlock()
	if _, ok := set.live[ss]; !ok {
		return
	}
	delete(set.live, ss)
	close(set.changed)
	set.changed = make(chan struct{})
}

// Sessions reports how many sessions are open.
func (s *Server) Sessions() int {
	s.sessions.mu.Lock()
	defer s.sessions.mu.Unlock()
	return len(s.sessions.live)
}

// Shutdown refuses new sessions (503) and waits for the open ones to end.
// When ctx ends first it aborts them, waits for their runs to settle and
// returns ctx's error. Call it after the HTTP server's own Shutdown: it
// does not wait for hijacked connections.
func (s *Server) Shutdown(ctx context.Context) error {
	set := &s.sessions
	set.mu.Lock()
	set.draining = true
	set.mu.Unlock()
	aborted := false
	for {
		set.mu.Lock()
		n, changed := len(set.live), set.changed
		if aborted || ctx.Err() != nil {
			for ss := range set.live {
				ss.cancel(errors.New("the daemon is shutting down"))
			}
		}
		set.mu.Unlock()
		if n == 0 {
			if aborted {
				return ctx.Err()
			}
			return nil
		}
		if aborted {
			<-changed
			continue
		}
		select {
		case <-changed:
		case <-ctx.Done():
			aborted = true
		}
	}
}
