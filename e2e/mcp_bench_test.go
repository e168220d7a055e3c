package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/dsh-container/dsh-container/internal/testenv"
)

// BenchmarkMCPvsRun measures run_code of a trivial program through
// `dsh-container mcp` over stdio against the same program through serve's
// POST /v1/run, both with a warm pool, alternating so that both see the
// same machine state, and reports each p50 and their ratio (issue 12's
// target: at most 1.2).
//
//	go test -run '^$' -bench MCPvsRun -benchtime 40x ./e2e/
func BenchmarkMCPvsRun(b *testing.B) {
	bin := buildCLI(b)
	// A pool of 2 and a pause between runs keep a warm container ready for
	// every run of either server.
	const pause = 700 * time.Millisecond
	p := startMCP(b, bin, "--pool", "2")
	hc, stopServe := startServeForBench(b, bin, "--pool", "2", "--languages", "typescript")
	defer stopServe()

	runMCP := func() time.Duration {
		start := time.Now()
		res, err := runCode(context.Background(), p.cs, "return 1", nil)
		d := time.Since(start)
		if err != nil || res.IsError || string(outputOf(b, res).Value) != "1" {
			b.Fatalf("mcp run_code: %v %+v", err, res)
		}
		return d
	}
	runHTTP := func() time.Duration {
		body, _ := json.Marshal(map[string]string{"language": "typescript", "code": "return 1"})
		start := time.Now()
		resp, err := hc.Post("http://dsh/v1/run", "application/json", bytes.NewReader(body))
		if err != nil {
			b.Fatal(err)
		}
		data, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		d := time.Since(start)
		var r struct {
			Value json.RawMessage `json:"value"`
		}
		if resp.StatusCode != http.StatusOK || json.Unmarshal(data, &r) != nil || string(r.Value) != "1" {
			b.Fatalf("POST /v1/run: %d %s", resp.StatusCode, data)
		}
		return d
	}
	// Warm up both (first runs pay for lazy initialization).
	for range 3 {
		runMCP()
		runHTTP()
		time.Sleep(pause)
	}
	var viaMCP, viaHTTP []time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if i%2 == 0 {
			viaMCP = append(viaMCP, runMCP())
			time.Sleep(pause)
			viaHTTP = append(viaHTTP, runHTTP())
		} else {
			viaHTTP = append(viaHTTP, runHTTP())
			time.Sleep(pause)
			viaMCP = append(viaMCP, runMCP())
		}
		time.Sleep(pause)
	}
	b.StopTimer()
	m, h := percentile(viaMCP, 0.5), percentile(viaHTTP, 0.5)
	b.ReportMetric(float64(m.Microseconds())/1000, "mcp-p50-ms")
	b.ReportMetric(float64(h.Microseconds())/1000, "run-p50-ms")
	b.ReportMetric(float64(percentile(viaMCP, 0.9).Microseconds())/1000, "mcp-p90-ms")
	b.ReportMetric(float64(percentile(viaHTTP, 0.9).Microseconds())/1000, "run-p90-ms")
	b.ReportMetric(float64(m)/float64(h), "ratio")
}

// startServeForBench starts serve on a private Unix socket and waits until
// it is healthy; stop sends SIGTERM and waits for it.
func startServeForBench(b *testing.B, bin string, args ...string) (*http.Client, func()) {
	b.Helper()
	xdg, err := os.MkdirTemp("", "dshb")
	if err != nil {
		b.Fatal(err)
	}
	sock := filepath.Join(xdg, "api.sock")
	cmd := exec.Command(bin, append([]string{"serve", "--listen", "unix://" + sock}, args...)...)
	cmd.Env = append(os.Environ(), "XDG_RUNTIME_DIR="+xdg)
	stderr := &testenv.LockedBuffer{}
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	hc := unixHTTPClient(sock)
	stop := func() {
		cmd.Process.Signal(syscall.SIGTERM)
		cmd.Wait()
		os.RemoveAll(xdg)
	}
	for deadline := time.Now().Add(90 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		if resp, err := hc.Get("http://dsh/healthz"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return hc, stop
			}
		}
		if time.Now().After(deadline) {
			stop()
			b.Fatalf("serve never became healthy:\n%s", strings.TrimSpace(stderr.String()))
		}
	}
}
