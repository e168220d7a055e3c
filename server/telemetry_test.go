package server

import (
	"context"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.opentelemetry.io/otel/trace"

	"github.com/dsh-container/dsh-container/backend"
)

func TestTraceparentJoinsTheRequest(t *testing.T) {
	for header, want := range map[string]string{
		"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01": "4bf92f3577b34da6a3ce929d0e0e4736",
		"": "", "nonsense": "", "00-00000000000000000000000000000000-00f067aa0ba902b7-01": "",
	} {
		r := httptest.NewRequest("POST", "/v1/run", nil)
		if header != "" {
			r.Header.Set("traceparent", header)
		}
		sc := trace.SpanContextFromContext(withTraceContext(r).Context())
		got := ""
		if sc.IsValid() {
			got = sc.TraceID().String()
		}
		if got != want {
			t.Errorf("traceparent %q: trace %q, want %q", header, got, want)
		}
	}
}

func TestRunObserverMetrics(t *testing.T) {
	o := NewRunObserver()
	reg := prometheus.NewRegistry()
	reg.MustRegister(o)
	ctx := context.WithValue(context.Background(), tenantKey{}, Tenant{Name: "alpha"})
	o.ObservePhase(ctx, backend.Python, "program", 30*time.Millisecond)
	o.ObservePool(ctx, backend.Python, true)
	o.ObservePool(context.Background(), backend.Python, false)
	o.ObserveFrames(ctx, backend.Python, 5, 500, 4, 300)
	want := `
# HELP dsh_container_bridge_bytes_total Payload bytes of the bridge's websocket frames, by direction: in (from the runner) or out.
# TYPE dsh_container_bridge_bytes_total counter
dsh_container_bridge_bytes_total{direction="in",language="python",tenant="alpha"} 500
dsh_container_bridge_bytes_total{direction="out",language="python",tenant="alpha"} 300
# HELP dsh_container_bridge_frames_total Websocket frames on the bridge between the host and the runners, by direction: in (from the runner) or out.
# TYPE dsh_container_bridge_frames_total counter
dsh_container_bridge_frames_total{direction="in",language="python",tenant="alpha"} 5
dsh_container_bridge_frames_total{direction="out",language="python",tenant="alpha"} 4
# HELP dsh_container_pool_acquisitions_total Sandboxes runs acquired, by result: hit (from the warm pool) or miss (created for the run).
# TYPE dsh_container_pool_acquisitions_total counter
dsh_container_pool_acquisitions_total{language="python",result="hit",tenant="alpha"} 1
dsh_container_pool_acquisitions_total{language="python",result="miss",tenant="anonymous"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), MetricBridgeBytes, MetricBridgeFrames, MetricPoolAcquire); err != nil {
		t.Error(err)
	}
	if n := testutil.CollectAndCount(o, MetricRunPhase); n != 1 {
		t.Errorf("%d phase series, want 1", n)
	}
}
