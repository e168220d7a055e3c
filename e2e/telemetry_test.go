package e2e

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"
)

// otlpReceiver is an OTLP/HTTP trace collector: it decodes the exported
// protobuf and keeps every span.
type otlpReceiver struct {
	srv   *httptest.Server
	mu    sync.Mutex
	spans []*tracepb.Span
	// service is the service.name of the resources seen.
	service []string
}

func newOTLPReceiver(t testing.TB) *otlpReceiver {
	r := &otlpReceiver{}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.URL.Path != "/v1/traces" || req.Method != http.MethodPost {
			http.Error(w, "want POST /v1/traces", http.StatusNotFound)
			return
		}
		var body io.Reader = req.Body
		if req.Header.Get("Content-Encoding") == "gzip" {
			zr, err := gzip.NewReader(req.Body)
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			body = zr
		}
		b, err := io.ReadAll(body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		var er coltracepb.ExportTraceServiceRequest
		if err := proto.Unmarshal(b, &er); err != nil {
			t.Errorf("OTLP receiver: undecodable export (%s): %v", req.Header.Get("Content-Type"), err)
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		r.mu.Lock()
		for _, rs := range er.ResourceSpans {
			for _, a := range rs.GetResource().GetAttributes() {
				if a.Key == "service.name" {
					r.service = append(r.service, a.GetValue().GetStringValue())
				}
			}
			for _, ss := range rs.ScopeSpans {
				r.spans = append(r.spans, ss.Spans...)
			}
		}
		r.mu.Unlock()
		out, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
		w.Header().Set("Content-Type", "application/x-protobuf")
		w.Write(out)
	}))
	t.Cleanup(r.srv.Close)
	return r
}

// trace returns the spans of one trace once done reports them complete,
// or fails t after a minute.
func (r *otlpReceiver) trace(t *testing.T, traceID []byte, done func([]*tracepb.Span) bool) []*tracepb.Span {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(50 * time.Millisecond) {
		r.mu.Lock()
		var got []*tracepb.Span
		for _, s := range r.spans {
			if bytes.Equal(s.TraceId, traceID) {
				got = append(got, s)
			}
		}
		r.mu.Unlock()
		if done(got) {
			return got
		}
		if time.Now().After(deadline) {
			for _, s := range got {
				t.Logf("span %s %x parent %x", s.Name, s.SpanId, s.ParentSpanId)
			}
			t.Fatalf("trace %x incomplete after a minute: %d spans", traceID, len(got))
		}
	}
}

func spansNamed(spans []*tracepb.Span, name string) []*tracepb.Span {
	var out []*tracepb.Span
	for _, s := range spans {
		if s.Name == name {
			out = append(out, s)
		}
	}
	return out
}

func spanAttr(s *tracepb.Span, key string) *commonpb.AnyValue {
	for _, a := range s.Attributes {
		if a.Key == key {
			return a.Value
		}
	}
	return nil
}

// childrenOf names the children of parent, sorted.
func childrenOf(spans []*tracepb.Span, parent *tracepb.Span) []string {
	var names []string
	for _, s := range spans {
		if bytes.Equal(s.ParentSpanId, parent.SpanId) {
			names = append(names, s.Name)
		}
	}
	slices.Sort(names)
	return names
}

const (
	givenTraceID = "4bf92f3577b34da6a3ce929d0e0e4736"
	givenSpanID  = "00f067aa0ba902b7"
)

// TestTracingThroughServe: a program making 3 tool calls (one failing),
// posted to `serve --otlp-endpoint` with a traceparent, exports one span
// tree to an OTLP/HTTP receiver: run under the caller's span, its phases
// under run (create/start/hello under acquire), the tool calls under
// program with names, sizes and outcomes, the failed one with error
// status; no payloads without --trace-payloads. /metrics, parsed with the
// Prometheus text parser, has the per-phase histograms, pool misses,
// bridge frames and bytes by tenant, RSS and goroutines; serve's JSON log
// line of the run carries its run_id and trace_id.
func TestTracingThroughServe(t *testing.T) {
	rcv := newOTLPReceiver(t)
	t.Setenv("OTEL_BSP_SCHEDULE_DELAY", "50")
	dir := t.TempDir()
	tools := filepath.Join(dir, "tools.json")
	os.WriteFile(tools, []byte(`{"tools":[
		{"name":"shout","description":"Upper-case the text.","inputSchema":{"type":"object","properties":{"text":{"type":"string"}}},"command":["/bin/sh","-c","tr a-z A-Z"]},
		{"name":"broken","description":"Always fails.","inputSchema":{"type":"object"},"command":["/bin/sh","-c","echo broken on purpose >&2; exit 3"]}]}`), 0o644)
	s := startServe(t, "--pool", "0", "--tools", tools, "--languages", "typescript", "--otlp-endpoint", rcv.srv.URL, "--verbose")

	code := `const a = await tools.shout({text: "secret-one"});
const b = await tools.shout({text: "two"});
let err = "";
try { await tools.broken({}); } catch (e) { err = e.message; }
return {a, b, err};`
	body, _ := json.Marshal(map[string]string{"language": "typescript", "code": code, "id": "tr1"})
	req, _ := http.NewRequest(http.MethodPost, "http://dsh/v1/run", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("traceparent", "00-"+givenTraceID+"-"+givenSpanID+"-01")
	resp, err := s.hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	rb, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var rr serveRunResponse
	if resp.StatusCode != http.StatusOK || json.Unmarshal(rb, &rr) != nil || rr.Error != nil || rr.Stats.Calls != 3 {
		t.Fatalf("POST /v1/run: %d %s", resp.StatusCode, rb)
	}

	tid, _ := hex.DecodeString(givenTraceID)
	sid, _ := hex.DecodeString(givenSpanID)
	spans := rcv.trace(t, tid, func(got []*tracepb.Span) bool {
		return len(spansNamed(got, "run")) == 1 && len(spansNamed(got, "teardown")) == 1 && len(spansNamed(got, "tool_call")) == 3
	})

	run := spansNamed(spans, "run")[0]
	if !bytes.Equal(run.ParentSpanId, sid) {
		t.Errorf("run's parent is %x, want the traceparent's span %s", run.ParentSpanId, givenSpanID)
	}
	for key, want := range map[string]any{
		"dsh.language": "typescript", "dsh.driver": "docker", "dsh.outcome": "ok",
		"dsh.calls": int64(3), "dsh.truncated": false, "dsh.logs_truncated": false, "dsh.value_truncated": false,
		"dsh.pool_hit": false,
	} {
		v := spanAttr(run, key)
		var got any
		switch {
		case v == nil:
		case v.GetValue() == nil:
		default:
			switch x := v.GetValue().(type) {
			case *commonpb.AnyValue_StringValue:
				got = x.StringValue
			case *commonpb.AnyValue_IntValue:
				got = x.IntValue
			case *commonpb.AnyValue_BoolValue:
				got = x.BoolValue
			}
		}
		if got != want {
			t.Errorf("run span %s = %v, want %v", key, got, want)
		}
	}
	for _, key := range []string{"dsh.oci_runtime", "dsh.run_id"} {
		if spanAttr(run, key).GetStringValue() == "" {
			t.Errorf("run span lacks %s", key)
		}
	}
	if v := spanAttr(run, "dsh.cpu_ms"); v == nil || v.GetDoubleValue() <= 0 {
		t.Errorf("run span dsh.cpu_ms = %v, want > 0", v)
	}
	if run.Status.GetCode() == tracepb.Status_STATUS_CODE_ERROR {
		t.Errorf("run span has error status: %v", run.Status)
	}
	if got, want := childrenOf(spans, run), []string{"acquire", "prepare", "program", "teardown"}; !slices.Equal(got, want) {
		t.Errorf("run's children: %v, want %v", got, want)
	}
	acquire := spansNamed(spans, "acquire")[0]
	if got, want := childrenOf(spans, acquire), []string{"create", "hello", "start"}; !slices.Equal(got, want) {
		t.Errorf("acquire's children (a pool miss): %v, want %v", got, want)
	}
	program := spansNamed(spans, "program")[0]
	calls := spansNamed(spans, "tool_call")
	slices.SortFunc(calls, func(a, b *tracepb.Span) int { return int(a.StartTimeUnixNano - b.StartTimeUnixNano) })
	for i, c := range calls {
		if !bytes.Equal(c.ParentSpanId, program.SpanId) {
			t.Errorf("tool call %d's parent is %x, want the program span %x", i+1, c.ParentSpanId, program.SpanId)
		}
		if c.StartTimeUnixNano < program.StartTimeUnixNano || c.EndTimeUnixNano > program.EndTimeUnixNano {
			t.Errorf("tool call %d is outside the program span", i+1)
		}
		wantTool, wantOutcome := "shout", "ok"
		if i == 2 {
			wantTool, wantOutcome = "broken", "error"
		}
		if got := spanAttr(c, "dsh.tool.name").GetStringValue(); got != wantTool {
			t.Errorf("tool call %d: tool %q, want %q", i+1, got, wantTool)
		}
		if got, want := spanAttr(c, "dsh.call_id").GetStringValue(), "tr1:code:"+string(rune('1'+i)); got != want {
			t.Errorf("tool call %d: call id %q, want %q", i+1, got, want)
		}
		if got := spanAttr(c, "dsh.outcome").GetStringValue(); got != wantOutcome {
			t.Errorf("tool call %d: outcome %q, want %q", i+1, got, wantOutcome)
		}
		if spanAttr(c, "dsh.arguments_bytes").GetIntValue() <= 0 || spanAttr(c, "dsh.result_bytes").GetIntValue() <= 0 {
			t.Errorf("tool call %d: argument and result bytes %v %v, want > 0", i+1, spanAttr(c, "dsh.arguments_bytes"), spanAttr(c, "dsh.result_bytes"))
		}
		if spanAttr(c, "dsh.arguments") != nil || spanAttr(c, "dsh.result") != nil {
			t.Errorf("tool call %d carries payloads without --trace-payloads", i+1)
		}
		isErr := c.Status.GetCode() == tracepb.Status_STATUS_CODE_ERROR
		if isErr != (i == 2) {
			t.Errorf("tool call %d: status %v", i+1, c.Status)
		}
	}
	if strings.Contains(string(mustMarshal(spans)), "secret-one") {
		t.Errorf("an argument's content reached the spans without --trace-payloads")
	}
	rcv.mu.Lock()
	if !slices.Contains(rcv.service, "dsh-container") {
		t.Errorf("service.name: %v, want dsh-container", rcv.service)
	}
	rcv.mu.Unlock()

	// Metrics, through the Prometheus text parser.
	code2, text := s.get("/metrics")
	if code2 != http.StatusOK {
		t.Fatalf("/metrics: %d", code2)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(strings.NewReader(text))
	if err != nil {
		t.Fatalf("parsing /metrics: %v", err)
	}
	label := func(m *dto.Metric, name string) string {
		for _, l := range m.Label {
			if l.GetName() == name {
				return l.GetValue()
			}
		}
		return ""
	}
	phases := map[string]uint64{}
	if f := fams["dsh_container_run_phase_seconds"]; f == nil || f.GetType() != dto.MetricType_HISTOGRAM {
		t.Errorf("no histogram dsh_container_run_phase_seconds")
	} else {
		for _, m := range f.Metric {
			if label(m, "tenant") != "anonymous" || label(m, "language") != "typescript" {
				t.Errorf("phase series labels: %v", m.Label)
			}
			phases[label(m, "phase")] += m.GetHistogram().GetSampleCount()
		}
	}
	for _, p := range []string{"prepare", "acquire", "create", "start", "hello", "program", "teardown"} {
		if phases[p] < 1 {
			t.Errorf("phase %s: %d observations, want ≥ 1 (%v)", p, phases[p], phases)
		}
	}
	sum := func(name string, match func(*dto.Metric) bool) float64 {
		var v float64
		if f := fams[name]; f != nil {
			for _, m := range f.Metric {
				if match(m) {
					v += m.GetCounter().GetValue() + m.GetGauge().GetValue()
				}
			}
		}
		return v
	}
	if got := sum("dsh_container_pool_acquisitions_total", func(m *dto.Metric) bool { return label(m, "result") == "miss" }); got < 1 {
		t.Errorf("pool misses: %v, want ≥ 1", got)
	}
	for _, name := range []string{"dsh_container_bridge_frames_total", "dsh_container_bridge_bytes_total"} {
		for _, dir := range []string{"in", "out"} {
			if got := sum(name, func(m *dto.Metric) bool { return label(m, "direction") == dir && label(m, "tenant") == "anonymous" }); got < 4 {
				t.Errorf("%s{direction=%q}: %v, want ≥ 4 (3 calls and the hello/run/result)", name, dir, got)
			}
		}
	}
	for _, name := range []string{"process_resident_memory_bytes", "go_goroutines"} {
		if got := sum(name, func(*dto.Metric) bool { return true }); got <= 0 {
			t.Errorf("%s: %v, want > 0", name, got)
		}
	}

	// The JSON log line of the run names its run and trace.
	runID := spanAttr(run, "dsh.run_id").GetStringValue()
	found, about := false, 0
	sc := bufio.NewScanner(strings.NewReader(s.stderr.String()))
	for sc.Scan() {
		var line map[string]any
		if err := json.Unmarshal(sc.Bytes(), &line); err != nil {
			t.Errorf("serve's log line is not JSON: %q", sc.Text())
			continue
		}
		if line["msg"] == "run" && line["call_id"] == "tr1" {
			found = true
			if line["run_id"] != runID || line["trace_id"] != givenTraceID {
				t.Errorf("run log line: run_id %v trace_id %v, want %s %s", line["run_id"], line["trace_id"], runID, givenTraceID)
			}
		}
		// Every line about the run names it and its trace: the runtime's
		// and the registry's (a tool call's) alike.
		if line["run_id"] == runID || line["call_id"] == "tr1" || strings.HasPrefix(fmt.Sprint(line["call_id"]), "tr1:") {
			about++
			if line["run_id"] != runID || line["trace_id"] != givenTraceID {
				t.Errorf("a line about the run lacks its run_id or trace_id: %s", sc.Text())
			}
		}
	}
	if !found {
		t.Errorf("no JSON log line for the run in:\n%s", s.stderr.String())
	}
	if about < 5 {
		t.Errorf("%d log lines about the run under --verbose, want ≥ 5 (tool calls, container, run):\n%s", about, s.stderr.String())
	}
}

func mustMarshal(spans []*tracepb.Span) []byte {
	var b []byte
	for _, s := range spans {
		m, _ := proto.Marshal(s)
		b = append(b, m...)
	}
	return b
}

// TestTracingCLI: `dsh-container run` joins TRACEPARENT's trace and
// flushes its spans before it exits; --trace-payloads puts the call's
// arguments and result on its span.
func TestTracingCLI(t *testing.T) {
	rcv := newOTLPReceiver(t)
	bin := buildCLI(t)
	dir := t.TempDir()
	tools := filepath.Join(dir, "tools.json")
	os.WriteFile(tools, []byte(`{"tools":[{"name":"shout","description":"Upper-case the text.","inputSchema":{"type":"object"},"command":["/bin/sh","-c","tr a-z A-Z"]}]}`), 0o644)
	prog := filepath.Join(dir, "p.ts")
	os.WriteFile(prog, []byte(`return await tools.shout({text: "payload-in"})`), 0o644)
	const traceID, spanID = "0af7651916cd43dd8448eb211c80319c", "b7ad6b7169203331"
	cmd := exec.Command(bin, "run", "--json", "--tools", tools, "--trace-payloads", prog)
	cmd.Env = append(os.Environ(), "OTEL_EXPORTER_OTLP_ENDPOINT="+rcv.srv.URL, "TRACEPARENT=00-"+traceID+"-"+spanID+"-01")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("run: %v\n%s", err, out)
	}
	tid, _ := hex.DecodeString(traceID)
	sid, _ := hex.DecodeString(spanID)
	// Already exported at exit: no waiting.
	rcv.mu.Lock()
	n := len(rcv.spans)
	rcv.mu.Unlock()
	spans := rcv.trace(t, tid, func(got []*tracepb.Span) bool { return len(got) == n && n > 0 })
	runs := spansNamed(spans, "run")
	if len(runs) != 1 || !bytes.Equal(runs[0].ParentSpanId, sid) {
		t.Fatalf("run spans %d; want one under the TRACEPARENT span", len(runs))
	}
	for _, name := range []string{"prepare", "acquire", "program", "teardown"} {
		if len(spansNamed(spans, name)) != 1 {
			t.Errorf("no %s span flushed at exit", name)
		}
	}
	calls := spansNamed(spans, "tool_call")
	if len(calls) != 1 {
		t.Fatalf("%d tool_call spans, want 1", len(calls))
	}
	if got := spanAttr(calls[0], "dsh.arguments").GetStringValue(); got != `{"text":"payload-in"}` {
		t.Errorf("dsh.arguments %q with --trace-payloads", got)
	}
	if got := spanAttr(calls[0], "dsh.result").GetStringValue(); !strings.Contains(got, "PAYLOAD-IN") {
		t.Errorf("dsh.result %q with --trace-payloads", got)
	}
}

// TestTracingMCP: `dsh-container mcp --otlp-endpoint` joins run_code to
// the trace in the request's _meta.traceparent, flushes its spans when the
// session ends, and logs JSON lines whose run line names the run and the
// trace.
func TestTracingMCP(t *testing.T) {
	rcv := newOTLPReceiver(t)
	bin := buildCLI(t)
	tools := filepath.Join(t.TempDir(), "tools.json")
	os.WriteFile(tools, []byte(`{"tools":[{"name":"shout","description":"Upper-case the text.","inputSchema":{"type":"object"},"command":["/bin/sh","-c","tr a-z A-Z"]}]}`), 0o644)
	p := startMCP(t, bin, "--otlp-endpoint", rcv.srv.URL, "--tools", tools, "--pool", "0")
	const traceID, spanID = "5bf92f3577b34da6a3ce929d0e0e4737", "10f067aa0ba902b8"
	params := &sdk.CallToolParams{Name: "run_code", Arguments: map[string]any{"code": `return await tools.shout({text: "hi"})`}}
	params.Meta = sdk.Meta{"traceparent": "00-" + traceID + "-" + spanID + "-01"}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	res, err := p.cs.CallTool(ctx, params)
	if err != nil || res.IsError {
		t.Fatalf("run_code: %v %s", err, resultText(res))
	}
	p.stop() // the process exits: its spans are flushed
	p.cs = nil
	tid, _ := hex.DecodeString(traceID)
	sid, _ := hex.DecodeString(spanID)
	spans := rcv.trace(t, tid, func(got []*tracepb.Span) bool {
		return len(spansNamed(got, "run")) == 1 && len(spansNamed(got, "tool_call")) == 1 && len(spansNamed(got, "teardown")) == 1
	})
	run := spansNamed(spans, "run")[0]
	if !bytes.Equal(run.ParentSpanId, sid) {
		t.Errorf("run's parent %x, want _meta's span %s", run.ParentSpanId, spanID)
	}
	if got := spanAttr(spansNamed(spans, "tool_call")[0], "dsh.tool.name").GetStringValue(); got != "shout" {
		t.Errorf("tool_call's tool %q", got)
	}
	found := false
	sc := bufio.NewScanner(strings.NewReader(p.stderr.String()))
	for sc.Scan() {
		var line map[string]any
		if err := json.Unmarshal(sc.Bytes(), &line); err != nil {
			t.Errorf("mcp's log line is not JSON: %q", sc.Text())
			continue
		}
		if line["msg"] == "run" {
			found = true
			if line["trace_id"] != traceID || line["run_id"] != spanAttr(run, "dsh.run_id").GetStringValue() {
				t.Errorf("run log line %v: want trace_id %s and the run span's run_id", line, traceID)
			}
		}
	}
	if !found {
		t.Errorf("no run line in mcp's log:\n%s", p.stderr.String())
	}
}

// TestTracingSession: a session opened with a traceparent header runs
// under that trace, its client-answered tool call a tool_call span under
// program.
func TestTracingSession(t *testing.T) {
	rcv := newOTLPReceiver(t)
	t.Setenv("OTEL_BSP_SCHEDULE_DELAY", "50")
	s := startServe(t, "--pool", "0", "--languages", "python", "--otlp-endpoint", rcv.srv.URL)
	const traceID, spanID = "6bf92f3577b34da6a3ce929d0e0e4738", "20f067aa0ba902b9"
	d := websocket.Dialer{NetDialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", s.sock)
	}}
	hdr := http.Header{"Traceparent": {"00-" + traceID + "-" + spanID + "-01"}}
	conn, _, err := d.Dial("ws://dsh/v1/sessions", hdr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetReadDeadline(time.Now().Add(2 * time.Minute))
	if err := conn.WriteJSON(map[string]any{"type": "start", "protocol": 1, "language": "python",
		"code": "return await tools.lookup({\"k\": 1})", "tools": []map[string]any{{"name": "lookup", "inputSchema": map[string]any{"type": "object"}}}}); err != nil {
		t.Fatal(err)
	}
	for done := false; !done; {
		var f map[string]any
		if err := conn.ReadJSON(&f); err != nil {
			t.Fatalf("session: %v", err)
		}
		switch f["type"] {
		case "call":
			conn.WriteJSON(map[string]any{"type": "result", "id": f["id"], "ok": true, "value": "v"})
		case "done":
			done = true
		case "error":
			t.Fatalf("session error frame: %v", f)
		}
	}
	tid, _ := hex.DecodeString(traceID)
	sid, _ := hex.DecodeString(spanID)
	spans := rcv.trace(t, tid, func(got []*tracepb.Span) bool {
		return len(spansNamed(got, "run")) == 1 && len(spansNamed(got, "tool_call")) == 1
	})
	run := spansNamed(spans, "run")[0]
	if !bytes.Equal(run.ParentSpanId, sid) || spanAttr(run, "dsh.language").GetStringValue() != "python" {
		t.Errorf("run span: parent %x, language %v", run.ParentSpanId, spanAttr(run, "dsh.language"))
	}
	program := spansNamed(spans, "program")
	call := spansNamed(spans, "tool_call")[0]
	if len(program) != 1 || !bytes.Equal(call.ParentSpanId, program[0].SpanId) || spanAttr(call, "dsh.tool.name").GetStringValue() != "lookup" {
		t.Errorf("tool_call span: parent %x, tool %v", call.ParentSpanId, spanAttr(call, "dsh.tool.name"))
	}
}
