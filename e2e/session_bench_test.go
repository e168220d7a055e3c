package e2e

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dsh-container/dsh-container/backend"
	"github.com/dsh-container/dsh-container/backend/container"
	"github.com/dsh-container/dsh-container/client"
	"github.com/dsh-container/dsh-container/internal/testenv"
	"github.com/dsh-container/dsh-container/server"
)

// BenchmarkSession measures issue 13's two targets in one invocation, on
// one Python container runtime with a warm pool, served by the daemon's
// handler in this process:
//
//   - callback_p50_ratio: the p50 of a client-callback round trip
//     (program → daemon → Go client over the session → back), over the
//     p50 of a host-binding round trip (program → host Go function →
//     back), each timed inside the program around one await (target ≤ 3);
//
//   - session_setup_ms: the p50 of a whole session running `return 1`
//     (dial, start, accepted, done, close) minus the p50 of the same
//     program run directly on the runtime, both on a warm container
//     (target ≤ 5 ms); post_run_p50_ms is the same program through
//     POST /v1/run on the same handler, which separates the registry's
//     share from the session's.
//
//     go test -run '^$' -bench BenchmarkSession -benchtime 20x ./e2e/
func BenchmarkSession(b *testing.B) {
	testenv.UsesDaemon(b)
	e := newEnv(b, backend.Python, nil, container.WithPool(1))
	srv, err := server.New(server.WithRuntime(e.rt))
	if err != nil {
		b.Fatal(err)
	}
	ts := httptest.NewServer(srv)
	defer func() {
		ts.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		srv.Shutdown(ctx)
	}()
	c := &client.Client{URL: ts.URL}
	const calls = 50
	loop := `import time
ts = []
for i in range(50):
    t0 = time.perf_counter()
    await tools.echo({"i": i})
    ts.append((time.perf_counter() - t0) * 1e6)
return ts`
	warm := func() {
		for deadline := time.Now().Add(time.Minute); e.rt.PoolIdle() < 1; time.Sleep(5 * time.Millisecond) {
			if time.Now().After(deadline) {
				b.Fatal("the pool never refilled")
			}
		}
	}
	var binding, callback []float64
	var direct, session, post []time.Duration
	echoTool := client.Tool{Name: "echo", Func: func(_ context.Context, args json.RawMessage) (any, error) { return args, nil }}
	b.ResetTimer()
	for range b.N {
		// Host binding round trips.
		warm()
		res, err := e.rt.Run(context.Background(), backend.RunRequest{Program: loop, Bindings: tools(map[string]backend.BindingFunc{"echo": echo})})
		if err != nil || res.Error != nil {
			b.Fatalf("binding run: %v %+v", err, res.Error)
		}
		var us []float64
		json.Unmarshal(res.Value, &us)
		binding = append(binding, us...)
		// Client callback round trips.
		warm()
		rep, err := c.Run(context.Background(), client.Request{Language: "python", Code: loop}, []client.Tool{echoTool}, client.Handlers{})
		if err != nil || rep.Error != nil {
			b.Fatalf("session run: %v %+v", err, rep)
		}
		us = nil
		json.Unmarshal(rep.Value, &us)
		callback = append(callback, us...)
		// The warm run itself, then the same program as a session.
		warm()
		began := time.Now()
		if res, err := e.rt.Run(context.Background(), backend.RunRequest{Program: "return 1"}); err != nil || res.Error != nil || !res.Stats.Warm {
			b.Fatalf("direct run: %v %+v warm=%v", err, res.Error, res.Stats.Warm)
		}
		direct = append(direct, time.Since(began))
		warm()
		began = time.Now()
		if rep, err := c.Run(context.Background(), client.Request{Language: "python", Code: "return 1"}, nil, client.Handlers{}); err != nil || rep.Error != nil {
			b.Fatalf("session: %v %+v", err, rep)
		}
		session = append(session, time.Since(began))
		// The same program through POST /v1/run on the same handler.
		warm()
		began = time.Now()
		resp, err := http.Post(ts.URL+"/v1/run", "application/json", strings.NewReader(`{"language":"python","code":"return 1"}`))
		if err != nil || resp.StatusCode != http.StatusOK {
			b.Fatalf("POST /v1/run: %v", err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		post = append(post, time.Since(began))
	}
	b.StopTimer()
	if len(binding) != b.N*calls || len(callback) != b.N*calls {
		b.Fatalf("%d binding and %d callback samples", len(binding), len(callback))
	}
	p50 := func(v []float64) float64 { s := slices.Clone(v); slices.Sort(s); return s[len(s)/2] }
	bp, cp := p50(binding), p50(callback)
	dp, sp, pp := percentile(direct, 0.5), percentile(session, 0.5), percentile(post, 0.5)
	b.ReportMetric(bp, "binding_p50_us")
	b.ReportMetric(cp, "callback_p50_us")
	b.ReportMetric(cp/bp, "callback_p50_ratio")
	b.ReportMetric(float64(dp.Microseconds())/1000, "warm_run_p50_ms")
	b.ReportMetric(float64(sp.Microseconds())/1000, "session_p50_ms")
	b.ReportMetric(float64((sp-dp).Microseconds())/1000, "session_setup_ms")
	b.ReportMetric(float64(pp.Microseconds())/1000, "post_run_p50_ms")
	b.Logf("binding p50 %.0fµs, callback p50 %.0fµs (ratio %.2f, target ≤ 3); warm run p50 %v, session p50 %v (setup %v, target ≤ 5ms), POST /v1/run p50 %v",
		bp, cp, cp/bp, dp, sp, sp-dp, pp)
}
