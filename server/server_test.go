package server_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/containerd/errdefs"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.uber.org/goleak"

	"github.com/dsh-container/dsh-container/backend"
	"github.com/dsh-container/dsh-container/backend/container"
	"github.com/dsh-container/dsh-container/registry"
	"github.com/dsh-container/dsh-container/registry/registrytest"
	"github.com/dsh-container/dsh-container/server"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

type tWriter struct{ t testing.TB }

func (w tWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

func testLogger(t testing.TB) *slog.Logger {
	return slog.New(slog.NewTextHandler(tWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// echoTool resolves with its arguments' text.
var echoTool = registry.Tool{
	Name:        "echo",
	Description: "Echo the arguments.",
	Parameters:  json.RawMessage(`{"type":"object","properties":{"x":{"type":"number"}}}`),
	Execute: func(_ context.Context, exec registry.Execution) ([]registry.Block, error) {
		return []registry.Block{registry.TextBlock("echo:" + string(exec.Arguments))}, nil
	},
}

// timedRuntime is the in-memory runtime with the stats a container runtime
// reports (startup, CPU, warm) and a warm pool of a fixed size.
type timedRuntime struct {
	*registrytest.Runtime
	idle int
}

func (r *timedRuntime) Run(ctx context.Context, req backend.RunRequest) (backend.RunResult, error) {
	res, err := r.Runtime.Run(ctx, req)
	res.Stats.Startup = 3 * time.Millisecond
	res.Stats.CPU = 20 * time.Millisecond
	res.Stats.Wall = 40 * time.Millisecond
	res.Stats.Warm = true
	return res, err
}

func (r *timedRuntime) PoolIdle() int { return r.idle }

// errRuntime fails every Run with err, as the container runtime does when
// no container could be provided.
type errRuntime struct {
	lang backend.Language
	err  error
}

func (r errRuntime) Language() backend.Language   { return r.lang }
func (r errRuntime) Isolation() backend.Isolation { return backend.IsolationInProcess }
func (r errRuntime) Close(context.Context) error  { return nil }
func (r errRuntime) Run(context.Context, backend.RunRequest) (backend.RunResult, error) {
	return backend.RunResult{}, r.err
}

type fixture struct {
	srv     *server.Server
	metrics *prometheus.Registry
	ts      *registrytest.Runtime
	py      *registrytest.Runtime
}

func newFixture(t *testing.T, opts ...server.Option) *fixture {
	t.Helper()
	f := &fixture{metrics: prometheus.NewRegistry(), ts: registrytest.New(backend.TypeScript), py: registrytest.New(backend.Python)}
	all := append([]server.Option{
		server.WithRuntime(&timedRuntime{Runtime: f.ts, idle: 2}),
		server.WithRuntime(f.py),
		server.WithTools(echoTool),
		server.WithLogger(testLogger(t)),
		server.WithMetrics(f.metrics),
	}, opts...)
	var err error
	if f.srv, err = server.New(all...); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		f.ts.Close(context.Background())
		f.py.Close(context.Background())
	})
	return f
}

func (f *fixture) do(t *testing.T, method, target, body string) *httptest.ResponseRecorder {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req := httptest.NewRequest(method, target, rd)
	rec := httptest.NewRecorder()
	f.srv.ServeHTTP(rec, req)
	return rec
}

func runBody(lang, code, id string) string {
	b, _ := json.Marshal(server.RunRequest{Language: lang, Code: code, ID: id})
	return string(b)
}

func decode[T any](t *testing.T, rec *httptest.ResponseRecorder) T {
	t.Helper()
	var v T
	if err := json.Unmarshal(rec.Body.Bytes(), &v); err != nil {
		t.Fatalf("decoding %q: %v", rec.Body.String(), err)
	}
	return v
}

func TestRunOK(t *testing.T) {
	f := newFixture(t)
	rec := f.do(t, "POST", "/v1/run", runBody("typescript", "log hello\ncall echo {\"x\":1}\nreturn {\"a\":1}", "c1"))
	if rec.Code != http.StatusOK {
		t.Fatalf("status %d: %s", rec.Code, rec.Body)
	}
	if ct := rec.Header().Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type %q", ct)
	}
	// The shape is `dsh-container run --json`'s plus id and events.
	var keys map[string]json.RawMessage
	json.Unmarshal(rec.Body.Bytes(), &keys)
	var names []string
	for k := range keys {
		names = append(names, k)
	}
	slices.Sort(names)
	want := []string{"error", "events", "id", "logs", "logsTruncated", "stats", "value", "valueKind", "valueTruncated"}
	if !slices.Equal(names, want) {
		t.Errorf("keys %v, want %v", names, want)
	}
	if string(keys["error"]) != "null" {
		t.Errorf("error = %s, want null", keys["error"])
	}
	res := decode[server.RunResponse](t, rec)
	if res.ID != "c1" || string(res.Value) != `{"a":1}` || res.ValueKind != "json" {
		t.Errorf("id %q value %s kind %q", res.ID, res.Value, res.ValueKind)
	}
	if len(res.Logs) != 2 || res.Logs[0].Text != "hello" || res.Logs[1].Text != `echo:{"x":1}` {
		t.Errorf("logs %+v", res.Logs)
	}
	if len(res.Events) != 1 {
		t.Fatalf("events %+v", res.Events)
	}
	e := res.Events[0]
	if e.Type != registry.EventCodeDispatch || e.ParentCallID != "c1" || e.CallID != "c1:code:1" || e.Tool != "echo" || e.IsError || string(e.Arguments) != `{"x":1}` {
		t.Errorf("event %+v", e)
	}
	if res.Stats.Calls != 1 || res.Stats.StartupMs != 3 || res.Stats.CPUMs != 20 || res.Stats.WallMs != 40 {
		t.Errorf("stats %+v", res.Stats)
	}
}

func TestRunDefaults(t *testing.T) {
	f := newFixture(t)
	rec := f.do(t, "POST", "/v1/run", `{"language":"python","code":"log hi"}`)
	if rec.Code != http.StatusOK {
		t.Fatalf("status %d: %s", rec.Code, rec.Body)
	}
	res := decode[server.RunResponse](t, rec)
	if !strings.HasPrefix(res.ID, "run-") || string(res.Value) != "null" || res.ValueKind != "" || res.Events == nil || len(res.Events) != 0 {
		t.Errorf("response %s", rec.Body)
	}
	if !strings.Contains(rec.Body.String(), `"events":[]`) {
		t.Errorf("events should be [] not null: %s", rec.Body)
	}
}

// A program's failure is a 200 that names the kind.
func TestRunProgramFailures(t *testing.T) {
	f := newFixture(t)
	f.py.Handle("timeout", func(context.Context, *registrytest.Env) (any, error) {
		return nil, &backend.Failure{Kind: backend.FailureTimeout, Message: "compute budget 10s exceeded"}
	})
	for code, kind := range map[string]backend.FailureKind{
		"throw boom":       backend.FailureException,
		"not a statement!": backend.FailureException,
		"timeout":          backend.FailureTimeout,
	} {
		rec := f.do(t, "POST", "/v1/run", runBody("python", code, ""))
		if rec.Code != http.StatusOK {
			t.Fatalf("%q: status %d: %s", code, rec.Code, rec.Body)
		}
		res := decode[server.RunResponse](t, rec)
		if res.Error == nil || res.Error.Kind != kind {
			t.Errorf("%q: error %+v, want kind %s", code, res.Error, kind)
		}
	}
	if n := testutil.ToFloat64(counter(t, f.metrics, server.MetricRuns, "python", "exception", server.AnonymousTenant)); n != 2 {
		t.Errorf("exception runs = %v, want 2", n)
	}
}

func TestRunBadRequests(t *testing.T) {
	f := newFixture(t, server.WithRuntime(errRuntime{lang: "ruby"}))
	long := strings.Repeat("x", server.MaxIDBytes+1)
	cases := []struct {
		name, body, want string
	}{
		{"empty", "", "empty body"},
		{"not JSON", "language=python", "invalid JSON"},
		{"array", `["python"]`, "invalid JSON"},
		{"unknown field", `{"language":"python","code":"log a","timeout":5}`, `unknown field "timeout"`},
		{"trailing data", `{"language":"python","code":"log a"} {}`, "trailing data"},
		{"wrong type", `{"language":"python","code":1}`, "invalid JSON"},
		{"no language", `{"code":"log a"}`, "language is required"},
		{"no code", `{"language":"python"}`, "code is required"},
		{"blank code", `{"language":"python","code":"  \n"}`, "code is required"},
		{"unknown language", `{"language":"ruby","code":"log a"}`, `unknown language "ruby"`},
		{"id too long", runBody("python", "log a", long), "id must be"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rec := f.do(t, "POST", "/v1/run", c.body)
			if rec.Code != http.StatusBadRequest {
				t.Fatalf("status %d, want 400: %s", rec.Code, rec.Body)
			}
			body := decode[map[string]string](t, rec)
			if !strings.Contains(body["error"], c.want) {
				t.Errorf("error %q, want it to contain %q", body["error"], c.want)
			}
		})
	}
	if n := len(f.py.Requests()); n != 0 {
		t.Errorf("%d bad request(s) reached the runtime", n)
	}
}

func TestRunLanguageNotServed(t *testing.T) {
	ts := registrytest.New(backend.TypeScript)
	srv, err := server.New(server.WithRuntime(ts))
	if err != nil {
		t.Fatal(err)
	}
	rec := httptest.NewRecorder()
	srv.ServeHTTP(rec, httptest.NewRequest("POST", "/v1/run", strings.NewReader(runBody("python", "log a", ""))))
	if rec.Code != http.StatusBadRequest || !strings.Contains(rec.Body.String(), `not served here (served: typescript)`) {
		t.Errorf("status %d: %s", rec.Code, rec.Body)
	}
}

func TestRunBodyTooLarge(t *testing.T) {
	f := newFixture(t, server.WithMaxBodyBytes(64))
	rec := f.do(t, "POST", "/v1/run", runBody("python", strings.Repeat("log a\n", 20), ""))
	if rec.Code != http.StatusRequestEntityTooLarge || !strings.Contains(rec.Body.String(), "exceeds 64 bytes") {
		t.Errorf("status %d: %s", rec.Code, rec.Body)
	}
}

func TestMethodAndPath(t *testing.T) {
	f := newFixture(t)
	rec := f.do(t, "GET", "/v1/run", "")
	if rec.Code != http.StatusMethodNotAllowed || rec.Header().Get("Allow") != "POST" {
		t.Errorf("GET /v1/run: %d Allow=%q", rec.Code, rec.Header().Get("Allow"))
	}
	rec = f.do(t, "POST", "/metrics", "")
	if rec.Code != http.StatusMethodNotAllowed {
		t.Errorf("POST /metrics: %d", rec.Code)
	}
	rec = f.do(t, "GET", "/v2/nothing", "")
	if rec.Code != http.StatusNotFound || decode[map[string]string](t, rec)["error"] == "" {
		t.Errorf("unknown path: %d %s", rec.Code, rec.Body)
	}
}

// When no container could be provided, the status says why.
func TestRunNotStarted(t *testing.T) {
	closed := registrytest.New(backend.Python)
	closed.Close(context.Background())
	cases := []struct {
		name   string
		rt     backend.Runtime
		status int
		want   string
	}{
		{"overloaded", errRuntime{backend.Python, container.ErrOverloaded}, http.StatusTooManyRequests, "admission queue is full"},
		{"image missing", errRuntime{backend.Python, fmt.Errorf("%w: runner image x is missing; build it with `dsh-container images build`", errdefs.ErrNotFound)}, http.StatusServiceUnavailable, "images build"},
		{"daemon unreachable", errRuntime{backend.Python, fmt.Errorf("%w: cannot reach the Docker daemon", errdefs.ErrUnavailable)}, http.StatusServiceUnavailable, "cannot reach"},
		{"closed", closed, http.StatusServiceUnavailable, "closed"},
		{"internal", errRuntime{backend.Python, errors.New("something odd")}, http.StatusInternalServerError, "something odd"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			reg := prometheus.NewRegistry()
			srv, err := server.New(server.WithRuntime(c.rt), server.WithMetrics(reg), server.WithLogger(testLogger(t)))
			if err != nil {
				t.Fatal(err)
			}
			rec := httptest.NewRecorder()
			srv.ServeHTTP(rec, httptest.NewRequest("POST", "/v1/run", strings.NewReader(runBody("python", "log a", ""))))
			if rec.Code != c.status {
				t.Fatalf("status %d, want %d: %s", rec.Code, c.status, rec.Body)
			}
			if msg := decode[map[string]string](t, rec)["error"]; !strings.Contains(msg, c.want) {
				t.Errorf("error %q, want %q in it", msg, c.want)
			}
			if ra := rec.Header().Get("Retry-After"); (c.status == http.StatusTooManyRequests) != (ra == "1") {
				t.Errorf("Retry-After %q", ra)
			}
			if n := testutil.ToFloat64(counter(t, reg, server.MetricRuns, "python", server.OutcomeRejected, server.AnonymousTenant)); n != 1 {
				t.Errorf("rejected runs = %v, want 1", n)
			}
		})
	}
}

// A client that goes away cancels its run: the runtime sees the context
// end and reports an abort; nothing keeps running.
func TestDisconnectCancelsRun(t *testing.T) {
	f := newFixture(t)
	started := make(chan struct{})
	finished := make(chan error, 1)
	f.py.Handle("block", func(ctx context.Context, env *registrytest.Env) (any, error) {
		close(started)
		<-ctx.Done()
		finished <- ctx.Err()
		return nil, ctx.Err()
	})
	hs := httptest.NewServer(f.srv)
	defer hs.Close()

	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() {
		req, _ := http.NewRequestWithContext(ctx, "POST", hs.URL+"/v1/run", strings.NewReader(runBody("python", "block", "")))
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			resp.Body.Close()
		}
		errc <- err
	}()
	select {
	case <-started:
	case <-time.After(10 * time.Second):
		t.Fatal("the program never started")
	}
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Errorf("client: %v", err)
	}
	select {
	case err := <-finished:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("program context: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the run was not cancelled when the client disconnected")
	}
	abort := counter(t, f.metrics, server.MetricRuns, "python", string(backend.FailureAbort), server.AnonymousTenant)
	for deadline := time.Now().Add(10 * time.Second); testutil.ToFloat64(abort) != 1; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("no abort counted")
		}
	}
	hs.CloseClientConnections()
}

// Concurrent runs each get their own events, under their own ids.
func TestConcurrentRunsKeepTheirEvents(t *testing.T) {
	f := newFixture(t)
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			id := fmt.Sprintf("c%d", i)
			rec := f.do(t, "POST", "/v1/run", runBody("typescript", strings.Repeat("call echo\n", i+1), id))
			res := decode[server.RunResponse](t, rec)
			if len(res.Events) != i+1 {
				t.Errorf("%s: %d events, want %d", id, len(res.Events), i+1)
			}
			for n, e := range res.Events {
				if e.ParentCallID != id || e.CallID != fmt.Sprintf("%s:code:%d", id, n+1) {
					t.Errorf("%s: event %+v", id, e)
				}
			}
		}()
	}
	wg.Wait()
}

func TestMetricsAfterRun(t *testing.T) {
	f := newFixture(t)
	for range 2 {
		if rec := f.do(t, "POST", "/v1/run", runBody("typescript", "call echo\ncall echo\nreturn 1", "")); rec.Code != 200 {
			t.Fatalf("run: %d %s", rec.Code, rec.Body)
		}
	}
	f.do(t, "POST", "/v1/run", runBody("typescript", "throw no", ""))

	expected := `
# HELP dsh_container_runs_total Runs by language, tenant and outcome: ok, exception, timeout, abort, oom, exit, or rejected (never started).
# TYPE dsh_container_runs_total counter
dsh_container_runs_total{language="typescript",outcome="exception",tenant="anonymous"} 1
dsh_container_runs_total{language="typescript",outcome="ok",tenant="anonymous"} 2
# HELP dsh_container_binding_calls_total Binding (tool) calls programs made.
# TYPE dsh_container_binding_calls_total counter
dsh_container_binding_calls_total{language="python"} 0
dsh_container_binding_calls_total{language="typescript"} 4
# HELP dsh_container_runs_in_flight Runs in flight, including runs waiting for admission, by language and tenant.
# TYPE dsh_container_runs_in_flight gauge
dsh_container_runs_in_flight{language="python",tenant="anonymous"} 0
dsh_container_runs_in_flight{language="typescript",tenant="anonymous"} 0
# HELP dsh_container_pool_idle_sandboxes Pre-started sandboxes ready in the warm pool.
# TYPE dsh_container_pool_idle_sandboxes gauge
dsh_container_pool_idle_sandboxes{language="typescript"} 2
`
	if err := testutil.GatherAndCompare(f.metrics, strings.NewReader(expected),
		server.MetricRuns, server.MetricBindingCalls, server.MetricInFlight, server.MetricPoolIdle); err != nil {
		t.Error(err)
	}
	// Histograms: 3 observations each, with the runtime's numbers.
	for name, sum := range map[string]float64{server.MetricRunWall: 0.12, server.MetricRunCPU: 0.06, server.MetricRunStartup: 0.009} {
		h := histogram(t, f.metrics, name)
		if h.GetSampleCount() != 3 || fmt.Sprintf("%.4f", h.GetSampleSum()) != fmt.Sprintf("%.4f", sum) {
			t.Errorf("%s: count %d sum %v, want 3 and %v", name, h.GetSampleCount(), h.GetSampleSum(), sum)
		}
	}

	// The text exposition over HTTP.
	rec := f.do(t, "GET", "/metrics", "")
	if rec.Code != 200 {
		t.Fatalf("/metrics: %d", rec.Code)
	}
	text := rec.Body.String()
	for _, want := range []string{
		`dsh_container_runs_total{language="typescript",outcome="ok",tenant="anonymous"} 2`,
		`dsh_container_run_startup_seconds_count{language="typescript",warm="true"} 3`,
		`dsh_container_run_wall_seconds_bucket{language="typescript",le="+Inf"} 3`,
		`dsh_container_http_requests_total{code="200",handler="run",method="post"} 3`,
		`go_goroutines`,
	} {
		if !strings.Contains(text, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
}

func TestSDK(t *testing.T) {
	f := newFixture(t)
	for _, c := range []struct{ query, want string }{
		{"", "declare const tools"},
		{"?language=typescript&format=source", `"echo"`},
		{"?language=python", "```python"},
		{"?language=python&format=source", "def echo"},
	} {
		rec := f.do(t, "GET", "/v1/sdk"+c.query, "")
		if rec.Code != 200 || !strings.Contains(rec.Body.String(), c.want) || !strings.HasPrefix(rec.Header().Get("Content-Type"), "text/plain") {
			t.Errorf("%q: %d %q\n%s", c.query, rec.Code, rec.Header().Get("Content-Type"), rec.Body)
		}
	}
	for _, q := range []string{"?language=ruby", "?format=html", "?lang=python"} {
		if rec := f.do(t, "GET", "/v1/sdk"+q, ""); rec.Code != 400 || decode[map[string]string](t, rec)["error"] == "" {
			t.Errorf("%q: %d %s", q, rec.Code, rec.Body)
		}
	}
}

func TestHealthz(t *testing.T) {
	f := newFixture(t)
	rec := f.do(t, "GET", "/healthz", "")
	if rec.Code != 200 || !strings.Contains(rec.Body.String(), `"status":"ok"`) {
		t.Errorf("%d %s", rec.Code, rec.Body)
	}
	var healthy = true
	f = newFixture(t, server.WithHealthCheck(func(ctx context.Context) error {
		if healthy {
			return nil
		}
		return errors.New("runner image dsh-container/py-runner:abc is missing; build it with `dsh-container images build`")
	}))
	if rec := f.do(t, "GET", "/healthz", ""); rec.Code != 200 {
		t.Errorf("healthy: %d %s", rec.Code, rec.Body)
	}
	healthy = false
	time.Sleep(server.HealthCacheTTL) // the answer is reused that long
	rec = f.do(t, "GET", "/healthz", "")
	body := decode[map[string]any](t, rec)
	if rec.Code != http.StatusServiceUnavailable || body["status"] != "unavailable" || !strings.Contains(body["error"].(string), "images build") {
		t.Errorf("unhealthy: %d %s", rec.Code, rec.Body)
	}
}

// GET /healthz needs no token, so a flood of it must not flood the
// engine: concurrent requests share one check, its answer serves for
// HealthCacheTTL, and a requester that leaves does not cancel the check
// for the others.
func TestHealthzCoalesces(t *testing.T) {
	var calls atomic.Int32
	release := make(chan struct{})
	f := newFixture(t, server.WithHealthCheck(func(ctx context.Context) error {
		calls.Add(1)
		select {
		case <-release:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}))
	// One requester gives up while the check runs.
	gone, cancel := context.WithCancel(context.Background())
	left := make(chan int)
	go func() {
		rec := httptest.NewRecorder()
		f.srv.ServeHTTP(rec, httptest.NewRequest("GET", "/healthz", nil).WithContext(gone))
		left <- rec.Code
	}()
	for calls.Load() == 0 {
		time.Sleep(time.Millisecond)
	}
	cancel()
	if code := <-left; code != http.StatusServiceUnavailable {
		t.Errorf("the requester that left got %d", code)
	}
	var wg sync.WaitGroup
	codes := make(chan int, 50)
	for range 50 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			codes <- f.do(t, "GET", "/healthz", "").Code
		}()
	}
	time.Sleep(50 * time.Millisecond)
	close(release)
	wg.Wait()
	close(codes)
	for code := range codes {
		if code != 200 {
			t.Fatalf("a waiting request got %d", code)
		}
	}
	for range 50 {
		f.do(t, "GET", "/healthz", "")
	}
	if n := calls.Load(); n != 1 {
		t.Fatalf("%d health checks for 101 requests within %v, want 1", n, server.HealthCacheTTL)
	}
}

func TestNewRejects(t *testing.T) {
	ts := registrytest.New(backend.TypeScript)
	for name, opts := range map[string][]server.Option{
		"no runtime":     nil,
		"nil runtime":    {server.WithRuntime(nil)},
		"duplicate":      {server.WithRuntime(ts), server.WithRuntime(registrytest.New(backend.TypeScript))},
		"reserved tool":  {server.WithRuntime(ts), server.WithTools(registry.Tool{Name: "run_code", Execute: echoTool.Execute})},
		"duplicate tool": {server.WithRuntime(ts), server.WithTools(echoTool, echoTool)},
		"bad max body":   {server.WithRuntime(ts), server.WithMaxBodyBytes(-1)},
	} {
		if _, err := server.New(opts...); err == nil {
			t.Errorf("%s: New succeeded", name)
		}
	}
	// One metrics registry cannot hold two servers' collectors.
	reg := prometheus.NewRegistry()
	if _, err := server.New(server.WithRuntime(ts), server.WithMetrics(reg)); err != nil {
		t.Fatal(err)
	}
	if _, err := server.New(server.WithRuntime(ts), server.WithMetrics(reg)); err == nil {
		t.Error("second server on one metrics registry: New succeeded")
	}
}

// counter finds the counter series name{language, outcome} in reg.
func counter(t *testing.T, reg *prometheus.Registry, name string, labels ...string) prometheus.Collector {
	t.Helper()
	return gatheredCounter{t: t, reg: reg, name: name, labels: labels}
}

type gatheredCounter struct {
	t      *testing.T
	reg    *prometheus.Registry
	name   string
	labels []string
}

func (g gatheredCounter) Describe(ch chan<- *prometheus.Desc) {
	ch <- prometheus.NewDesc(g.name, "copy", nil, nil)
}

func (g gatheredCounter) Collect(ch chan<- prometheus.Metric) {
	mfs, err := g.reg.Gather()
	if err != nil {
		g.t.Error(err)
	}
	v := 0.0
	for _, mf := range mfs {
		if mf.GetName() != g.name {
			continue
		}
	series:
		for _, m := range mf.GetMetric() {
			for i, lp := range m.GetLabel() {
				if i >= len(g.labels) || lp.GetValue() != g.labels[i] {
					continue series
				}
			}
			v = m.GetCounter().GetValue()
		}
	}
	ch <- prometheus.MustNewConstMetric(prometheus.NewDesc(g.name, "copy", nil, nil), prometheus.CounterValue, v)
}

func histogram(t *testing.T, reg *prometheus.Registry, name string) interface {
	GetSampleCount() uint64
	GetSampleSum() float64
} {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name && len(mf.GetMetric()) == 1 {
			return mf.GetMetric()[0].GetHistogram()
		}
	}
	t.Fatalf("no single %s series", name)
	return nil
}

// A request whose body stalls after its headers gets 408 within the body
// timeout, and its connection is closed (issue 10, class 12).
func TestStalledBodyTimesOut(t *testing.T) {
	f := newFixture(t, server.WithBodyTimeout(300*time.Millisecond))
	hs := httptest.NewServer(f.srv)
	defer hs.Close()
	c, err := net.Dial("tcp", hs.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	start := time.Now()
	fmt.Fprintf(c, "POST /v1/run HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{\"language\":")
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("no response to a stalled body: %v", err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusRequestTimeout || !strings.Contains(string(body), "did not arrive within 300ms") {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("answered after %v", d)
	}
}
