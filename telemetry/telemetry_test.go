package telemetry

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/trace"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/dsh-container/dsh-container/backend"
)

func env(m map[string]string) (func(string) string, func() []string) {
	return func(k string) string { return m[k] }, func() []string {
		var out []string
		for k, v := range m {
			out = append(out, k+"="+v)
		}
		return out
	}
}

func TestEnabled(t *testing.T) {
	for _, c := range []struct {
		name     string
		endpoint string
		env      map[string]string
		want     bool
	}{
		{"nothing", "", nil, false},
		{"flag", "http://localhost:4318", nil, true},
		{"endpoint env", "", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318"}, true},
		{"traces endpoint env", "", map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://c:4318/v1/traces"}, true},
		{"headers env", "", map[string]string{"OTEL_EXPORTER_OTLP_HEADERS": "a=b"}, true},
		{"service name", "", map[string]string{"OTEL_SERVICE_NAME": "agent"}, true},
		{"empty value", "", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": ""}, false},
		{"other OTEL var", "", map[string]string{"OTEL_BSP_SCHEDULE_DELAY": "10"}, false},
		{"sdk disabled", "http://c:4318", map[string]string{"OTEL_SDK_DISABLED": "true"}, false},
		{"exporter none", "", map[string]string{"OTEL_SERVICE_NAME": "a", "OTEL_TRACES_EXPORTER": "none"}, false},
	} {
		g, e := env(c.env)
		if got := Enabled(c.endpoint, g, e); got != c.want {
			t.Errorf("%s: Enabled = %v, want %v", c.name, got, c.want)
		}
	}
}

func TestTracesURL(t *testing.T) {
	for in, want := range map[string]string{
		"http://localhost:4318":            "http://localhost:4318/v1/traces",
		"http://localhost:4318/":           "http://localhost:4318/v1/traces",
		"localhost:4318":                   "http://localhost:4318/v1/traces",
		"https://otel.example/base":        "https://otel.example/base/v1/traces",
		"https://otel.example/x/v1/traces": "https://otel.example/x/v1/traces",
	} {
		if got, err := TracesURL(in); err != nil || got != want {
			t.Errorf("TracesURL(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, bad := range []string{"ftp://c:21", "http://", "http://u:p@c:4318", "http://c:4318?x=1", "http://c:4318/#f", "http://[::1"} {
		if got, err := TracesURL(bad); err == nil || !strings.Contains(err.Error(), "--otlp-endpoint") {
			t.Errorf("TracesURL(%q) = %q, %v; want an error naming --otlp-endpoint", bad, got, err)
		}
	}
}

func TestWithTraceparent(t *testing.T) {
	ctx, ok := WithTraceparent(context.Background(), "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", "k=v")
	sc := trace.SpanContextFromContext(ctx)
	if !ok || sc.TraceID().String() != "4bf92f3577b34da6a3ce929d0e0e4736" || sc.SpanID().String() != "00f067aa0ba902b7" || !sc.IsSampled() || !sc.IsRemote() || sc.TraceState().Get("k") != "v" {
		t.Errorf("valid traceparent: ok %v, span context %+v", ok, sc)
	}
	for _, bad := range []string{"", "garbage", "00-00000000000000000000000000000000-00f067aa0ba902b7-01", "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01", "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"} {
		ctx, ok := WithTraceparent(context.Background(), bad, "")
		if ok || trace.SpanContextFromContext(ctx).IsValid() {
			t.Errorf("traceparent %q was accepted", bad)
		}
	}
}

func TestJSONLoggerAddsTraceID(t *testing.T) {
	var buf bytes.Buffer
	log := NewJSONLogger(&buf, nil)
	ctx, _ := WithTraceparent(context.Background(), "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", "")
	log.With("run_id", "r1").InfoContext(ctx, "run")
	log.Info("no context")
	log.InfoContext(ctx, "own", "trace_id", "mine")
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 3 {
		t.Fatalf("lines: %q", lines)
	}
	var l0, l1, l2 map[string]any
	for i, p := range []*map[string]any{&l0, &l1, &l2} {
		if err := json.Unmarshal([]byte(lines[i]), p); err != nil {
			t.Fatalf("line %d is not JSON: %v", i, err)
		}
	}
	if l0["trace_id"] != "4bf92f3577b34da6a3ce929d0e0e4736" || l0["run_id"] != "r1" || l0["span_id"] != "00f067aa0ba902b7" {
		t.Errorf("line with a span context: %v", l0)
	}
	if _, ok := l1["trace_id"]; ok {
		t.Errorf("line without a context has a trace_id: %v", l1)
	}
	if l2["trace_id"] != "mine" || strings.Count(lines[2], "trace_id") != 1 {
		t.Errorf("a line's own trace_id was replaced or doubled: %s", lines[2])
	}
}

// Off: the no-op provider stays, or with IDsWhenOff a provider that
// records nothing but numbers every trace.
func TestSetupOff(t *testing.T) {
	g, e := env(nil)
	prev := otel.GetTracerProvider()
	p, err := Setup(context.Background(), Options{Getenv: g, Environ: e})
	if err != nil || p.Enabled || otel.GetTracerProvider() != prev {
		t.Fatalf("off: %+v %v; provider replaced", p, err)
	}
	p.Shutdown(context.Background())
	p, err = Setup(context.Background(), Options{Getenv: g, Environ: e, IDsWhenOff: true})
	if err != nil || p.Enabled {
		t.Fatal(p, err)
	}
	_, span := otel.Tracer("t").Start(context.Background(), "x")
	if span.IsRecording() || !span.SpanContext().HasTraceID() || span.SpanContext().IsSampled() {
		t.Errorf("IDsWhenOff span: recording %v, context %+v", span.IsRecording(), span.SpanContext())
	}
	span.End()
	if err := p.Shutdown(context.Background()); err != nil || otel.GetTracerProvider() != prev {
		t.Errorf("shutdown: %v; provider not restored", err)
	}
}

// On: spans reach the endpoint by Shutdown at the latest.
func TestSetupExportsAndFlushes(t *testing.T) {
	var posts, bytesIn atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != TracesPath || r.Header.Get("Content-Type") != "application/x-protobuf" {
			t.Errorf("export to %s (%s)", r.URL.Path, r.Header.Get("Content-Type"))
		}
		b, _ := io.ReadAll(r.Body)
		posts.Add(1)
		bytesIn.Add(int64(len(b)))
	}))
	defer srv.Close()
	g, e := env(nil)
	p, err := Setup(context.Background(), Options{Endpoint: srv.URL, Getenv: g, Environ: e, Version: "test"})
	if err != nil || !p.Enabled || p.Endpoint != srv.URL+TracesPath {
		t.Fatalf("on: %+v %v", p, err)
	}
	_, span := otel.Tracer("t").Start(context.Background(), "x")
	if !span.IsRecording() {
		t.Error("span not recording with tracing on")
	}
	span.End()
	if err := p.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if posts.Load() == 0 || bytesIn.Load() == 0 {
		t.Errorf("Shutdown did not flush: %d posts", posts.Load())
	}
	if err := p.Shutdown(context.Background()); err != nil {
		t.Errorf("second Shutdown: %v", err)
	}
}

func TestSetupRefusesGRPC(t *testing.T) {
	g, e := env(map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4317", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"})
	if _, err := Setup(context.Background(), Options{Getenv: g, Environ: e}); err == nil || !strings.Contains(err.Error(), "http/protobuf") {
		t.Errorf("grpc protocol: %v, want an error naming http/protobuf", err)
	}
}

func TestJSONLoggerAddsRunID(t *testing.T) {
	var buf bytes.Buffer
	log := NewJSONLogger(&buf, nil)
	ctx := backend.ContextWithRunID(context.Background(), "run-7")
	log.InfoContext(ctx, "tool call")
	log.InfoContext(ctx, "own", "run_id", "x")
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 2 || !strings.Contains(lines[0], `"run_id":"run-7"`) || strings.Contains(lines[0], "trace_id") ||
		strings.Count(lines[1], "run_id") != 1 || !strings.Contains(lines[1], `"run_id":"x"`) {
		t.Errorf("lines: %q", lines)
	}
}

// OTEL_SERVICE_NAME alone turns tracing on and names the service; without
// it the service is dsh-container.
func TestServiceName(t *testing.T) {
	for _, name := range []string{"", "agent-platform"} {
		got := make(chan string, 4)
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			b, _ := io.ReadAll(r.Body)
			var req coltracepb.ExportTraceServiceRequest
			if err := proto.Unmarshal(b, &req); err != nil {
				t.Errorf("undecodable export: %v", err)
				return
			}
			for _, rs := range req.ResourceSpans {
				for _, a := range rs.GetResource().GetAttributes() {
					if a.Key == "service.name" {
						got <- a.GetValue().GetStringValue()
					}
				}
			}
		}))
		t.Setenv("OTEL_SERVICE_NAME", name)
		t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", srv.URL)
		p, err := Setup(context.Background(), Options{})
		if err != nil || !p.Enabled {
			t.Fatalf("%q: %+v %v", name, p, err)
		}
		_, span := otel.Tracer("t").Start(context.Background(), "x")
		span.End()
		p.Shutdown(context.Background())
		srv.Close()
		want := name
		if want == "" {
			want = ServiceName
		}
		select {
		case g := <-got:
			if g != want {
				t.Errorf("service.name %q, want %q", g, want)
			}
		default:
			t.Errorf("%q: nothing exported", name)
		}
	}
}
