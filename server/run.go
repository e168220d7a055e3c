package server

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/dsh-container/dsh-container/backend"
	"github.com/dsh-container/dsh-container/registry"
)

// RunRequest is the body of POST /v1/run.
type RunRequest struct {
	// Language is "typescript" or "python" (required).
	Language string `json:"language"`
	// Code is the program: the body of an async function (required).
	Code string `json:"code"`
	// ID is the run_code call id; sub-call events are "<id>:code:<n>".
	// Optional: the server makes one up.
	ID string `json:"id,omitempty"`
	// Limits lowers the server's budgets for this run:
	// {"wallTimeoutMs","computeTimeoutMs","memoryBytes","cpus","pids"},
	// each optional (see limits.go). Raising one is a 400 naming it.
	Limits json.RawMessage `json:"limits,omitempty"`
	// Runtime names the OCI runtime to run under, one of those the
	// server allows (serve --allow-runtimes). Optional: the server's
	// default runtime (serve --runtime).
	Runtime string `json:"runtime,omitempty"`
	// Egress narrows the server's egress allowlist for this run:
	// {"allow": ["host:port", "*.domain:port"]}, each entry within the
	// server's (see egress.go). Widening it is a 400 naming the entry.
	Egress json.RawMessage `json:"egress,omitempty"`
}

// RunResponse is the 200 body of POST /v1/run: the object
// `dsh-container run --json` prints, plus the call id and the run's
// tool/code-dispatch events.
type RunResponse struct {
	ID string `json:"id"`
	backend.Report
	Events []registry.Event `json:"events"`
	// EgressEvents are the run's egress connections, one event each
	// ({"type":"egress","host","port","address","bytesUp","bytesDown",
	// "outcome","reason"}), on a server with egress.
	EgressEvents []json.RawMessage `json:"egressEvents,omitempty"`
}

func newCallID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return "run-" + hex.EncodeToString(b[:])
}

// runKeys are the keys of a RunRequest, matched as encoding/json matches
// them (case folded).
var runKeys = func() []string {
	var keys []string
	for _, f := range reflect.VisibleFields(reflect.TypeFor[RunRequest]()) {
		keys = append(keys, strings.Split(f.Tag.Get("json"), ",")[0])
	}
	return keys
}()

// readBody reads r's body, by deadline and within the body limit, into a
// buffer of its size held in bytes reserved for it first (intake.go): its
// Content-Length before a byte is read, or, when it has none, exactly its
// size when it ends within its first 4 KiB, else the body limit, shrunk
// to its size once read. When it reports false it has answered: the
// tenant's share full (429) or the total past the body timeout (503), the
// body too large (413, unread when announced so), late (408) or broken.
func (s *Server) readBody(w http.ResponseWriter, r *http.Request, deadline time.Time) ([]byte, *reservation, bool) {
	if r.ContentLength > s.opts.maxBody {
		w.Header().Set("Connection", "close")
		writeError(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("request body exceeds %d bytes", s.opts.maxBody))
		return nil, nil, false
	}
	tenant := tenantOf(r.Context())
	var hold *reservation
	reserve := func(n int64) error {
		ctx, cancel := context.WithDeadline(r.Context(), deadline)
		defer cancel()
		var err error
		hold, err = s.intake.reserve(ctx, tenant, n)
		return err
	}
	// The body must arrive within the body timeout; the run that follows
	// is bounded by its own budgets. A recorder in tests cannot set
	// deadlines, which is fine.
	rc := http.NewResponseController(w)
	_ = rc.SetReadDeadline(deadline)
	body := http.MaxBytesReader(w, r.Body, s.opts.maxBody)
	var (
		data []byte
		err  error
	)
	if r.ContentLength >= 0 {
		if err = reserve(r.ContentLength); err == nil {
			data = make([]byte, r.ContentLength)
			_, err = io.ReadFull(body, data)
		}
	} else if data, err = readAtMost(body, s.opts.maxBody, reserve); err == nil {
		hold.shrink(int64(len(data)))
	}
	if err != nil {
		hold.release()
		// The connection is not reused: the rest of the body is unread.
		w.Header().Set("Connection", "close")
		var (
			rf  *refusal
			mbe *http.MaxBytesError
		)
		switch {
		case errors.As(err, &rf):
			if rf.retryAfter > 0 {
				w.Header().Set("Retry-After", strconv.FormatInt((rf.retryAfter+999)/1000, 10))
			}
			if rf.status == http.StatusUnauthorized { // its tenant left the table
				w.Header().Set("WWW-Authenticate", `Bearer realm="dsh-container"`)
			}
			s.log.Warn("request not read", "tenant", tenant.Name, "status", rf.status, "err", rf.msg)
			writeError(w, rf.status, rf.msg)
		case errors.As(err, &mbe), errors.Is(err, errOverLimit):
			writeError(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("request body exceeds %d bytes", s.opts.maxBody))
		case errors.Is(err, os.ErrDeadlineExceeded):
			writeError(w, http.StatusRequestTimeout, fmt.Sprintf("the request body did not arrive within %v", s.opts.bodyTimeout))
		default:
			writeError(w, http.StatusBadRequest, fmt.Sprintf("reading the request body: %v", err))
		}
		return nil, nil, false
	}
	_ = rc.SetReadDeadline(time.Time{})
	return data, hold, true
}

// decodeRun decodes a RunRequest strictly: one JSON object, no unknown
// fields, nothing after it. It decodes in place: its program is copied
// once, into the string.
func (s *Server) decodeRun(data []byte) (RunRequest, error) {
	var req RunRequest
	if len(bytes.TrimSpace(data)) == 0 {
		return req, errors.New(`empty body; send {"language": "typescript"|"python", "code": "..."}`)
	}
	// The keys first, without copying their values: a strict decoder
	// (json.Decoder) would copy the whole body into its own buffer.
	var keys map[string]rawRef
	if err := json.Unmarshal(data, &keys); err != nil {
		var se *json.SyntaxError
		if errors.As(err, &se) && strings.Contains(se.Error(), "after top-level value") {
			return req, errors.New("invalid JSON body: trailing data after the object")
		}
		if !errors.As(err, &se) {
			err = errors.New("the body must be a JSON object")
		}
		return req, fmt.Errorf("invalid JSON body: %v", err)
	}
	for _, k := range sortedKeys(keys) {
		if !slices.ContainsFunc(runKeys, func(known string) bool { return strings.EqualFold(k, known) }) {
			return req, fmt.Errorf("invalid JSON body: unknown field %q", truncateName(k))
		}
	}
	// The fields, the program left in place and then copied once.
	var fields struct {
		RunRequest
		Code rawRef `json:"code"`
	}
	if err := json.Unmarshal(data, &fields); err != nil {
		return req, fmt.Errorf("invalid JSON body: %v", err)
	}
	req = fields.RunRequest
	if code := fields.Code; len(code) > 0 && string(code) != "null" {
		var ok bool
		if req.Code, ok = unquote(code); !ok {
			return req, errors.New("invalid JSON body: code must be a string")
		}
	}
	switch {
	case req.Language == "":
		return req, fmt.Errorf("language is required (served: %s)", strings.Join(s.langs, ", "))
	case strings.TrimSpace(req.Code) == "":
		return req, errors.New("code is required and must not be blank")
	case len(req.ID) > MaxIDBytes || !utf8.ValidString(req.ID):
		return req, fmt.Errorf("id must be valid UTF-8 of at most %d bytes", MaxIDBytes)
	}
	return req, nil
}

func (s *Server) handleRun(w http.ResponseWriter, r *http.Request) {
	if s.opts.mode == registry.ModeNative {
		writeError(w, http.StatusNotFound, fmt.Sprintf("%s is not offered in mode %q: this server offers its tools natively only (serve --mode code or both runs programs)", registry.RunCode, registry.ModeNative))
		return
	}
	data, hold, ok := s.readBody(w, r, time.Now().Add(s.opts.bodyTimeout))
	if !ok {
		return
	}
	defer hold.release()
	req, err := s.decodeRun(data)
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	lang, err := backend.ParseLanguage(req.Language)
	if err != nil {
		writeError(w, http.StatusBadRequest, fmt.Sprintf("%v; this server runs: %s", err, strings.Join(s.langs, ", ")))
		return
	}
	rt, err := s.runtimeFor(lang, req.Runtime)
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	var (
		mu           sync.Mutex
		events       = []registry.Event{}
		egressEvents []json.RawMessage
	)
	base, err := checkOptions(req.Limits, req.Egress, rt, func(e json.RawMessage) {
		mu.Lock()
		egressEvents = append(egressEvents, e)
		mu.Unlock()
	})
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	id := req.ID
	if id == "" {
		id = newCallID()
	}
	tenant := tenantOf(r.Context())

	reg := registry.New(append(append([]registry.Option{}, s.opts.regOpts...),
		registry.WithMode(s.opts.mode),
		registry.WithRuntime(rt),
		registry.WithRunRequest(base),
		registry.WithLogger(s.log),
		registry.WithEventSink(func(e registry.Event) {
			mu.Lock()
			events = append(events, e)
			mu.Unlock()
		}),
	)...)
	for _, t := range s.tools() {
		if err := reg.Register(t); err != nil { // validated by New and the source
			writeError(w, http.StatusInternalServerError, err.Error())
			return
		}
	}
	args := registry.RunCodeArguments(req.Code)
	req.Code = "" // the arguments hold the program now

	inFlight := s.metrics.inFlight.WithLabelValues(string(lang), tenant.Name)
	inFlight.Inc()
	release, err := s.admit.acquire(r.Context(), tenant, lang)
	if err != nil {
		inFlight.Dec()
		s.refuseRun(w, lang, tenant, id, err)
		return
	}
	res := reg.Execute(r.Context(), registry.Call{ID: id, Name: registry.RunCode, Arguments: args})
	release()
	inFlight.Dec()

	if res.CodeRun == nil {
		s.metrics.observeRejected(lang, tenant.Name)
		err := res.Err
		if err == nil {
			err = errors.New(res.Text())
		}
		status := statusFor(err)
		if status == http.StatusTooManyRequests {
			w.Header().Set("Retry-After", strconv.Itoa(int(max(s.opts.retryAfter, time.Second)/time.Second)))
		}
		s.log.WarnContext(r.Context(), "run not started", "call_id", id, "language", string(lang), "tenant", tenant.Name, "status", status, "err", err)
		writeError(w, status, err.Error())
		return
	}
	cr := res.CodeRun
	s.metrics.observeRun(lang, tenant.Name, cr)
	mu.Lock()
	out := RunResponse{ID: id, Report: backend.NewReport(cr), Events: events, EgressEvents: egressEvents}
	mu.Unlock()
	s.log.Info("run", "run_id", cr.Stats.RunID, "trace_id", cr.Stats.TraceID, "call_id", id, "language", string(lang), "tenant", tenant.Name, "outcome", outcome(cr),
		"wall_ms", out.Stats.WallMs, "startup_ms", out.Stats.StartupMs, "calls", cr.Stats.Calls, "warm", cr.Stats.Warm)
	writeJSON(w, http.StatusOK, out)
}

// outcome is a run's outcome label: ok or the failure kind.
func outcome(r *backend.RunResult) string {
	if r.Error == nil {
		return "ok"
	}
	return string(r.Error.Kind)
}
