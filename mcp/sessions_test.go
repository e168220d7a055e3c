package mcp

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dsh-container/dsh-container/registry"
)

// 300 initialize requests at once against a bound of 64 sessions: exactly
// 64 sessions are created and every other request gets 503 saying why. To
// make the race certain rather than likely, every request the bound lets
// through waits (testHookSessionReserved) until each of the 300 has been
// let through or refused: the go-sdk creates no session before all of
// them have passed the check. A check that only counts the live sessions
// lets all 300 through.
func TestHTTPSessionBoundIsAtomic(t *testing.T) {
	const bound, clients = 64, 300
	srv, err := New(WithMode(registry.ModeNative), WithLogger(slog.New(slog.DiscardHandler)), WithMaxSessions(bound), WithTools(textTool("hello", "hi")))
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv.Handler())
	t.Cleanup(func() {
		ts.Close()
		srv.Close()
	})
	var decided atomic.Int32
	all := make(chan struct{})
	decide := func() {
		if decided.Add(1) == clients {
			close(all)
		}
	}
	testHookSessionReserved = func() {
		decide()
		select {
		case <-all:
		case <-time.After(time.Minute):
		}
	}
	t.Cleanup(func() { testHookSessionReserved = nil })

	hc := &http.Client{Transport: &http.Transport{MaxConnsPerHost: 0, MaxIdleConnsPerHost: clients}}
	t.Cleanup(hc.CloseIdleConnections)
	var (
		mu       sync.Mutex
		sessions []string
		refused  []string
		other    []string
		start    = make(chan struct{})
		wg       sync.WaitGroup
	)
	for range clients {
		wg.Go(func() {
			<-start
			req, _ := http.NewRequest(http.MethodPost, ts.URL, strings.NewReader(
				`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Accept", "application/json, text/event-stream")
			resp, err := hc.Do(req)
			if err != nil {
				mu.Lock()
				other = append(other, err.Error())
				mu.Unlock()
				decide()
				return
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			mu.Lock()
			defer mu.Unlock()
			switch id := resp.Header.Get("Mcp-Session-Id"); {
			case resp.StatusCode == http.StatusOK && id != "":
				sessions = append(sessions, id)
			case resp.StatusCode == http.StatusServiceUnavailable:
				refused = append(refused, string(body)+" retry-after="+resp.Header.Get("Retry-After"))
				decide()
			default:
				other = append(other, resp.Status+": "+string(body))
			}
		})
	}
	close(start)
	wg.Wait()
	t.Logf("%d sessions, %d refused, %d other; the go-sdk server holds %d", len(sessions), len(refused), len(other), srv.sessions())
	if len(sessions) != bound || srv.sessions() != bound || len(refused) != clients-bound || len(other) != 0 {
		t.Errorf("%d sessions created (the server holds %d), %d refused, other: %q; want exactly %d and %d refused",
			len(sessions), srv.sessions(), len(refused), other, bound, clients-bound)
	}
	for _, r := range refused {
		if !strings.Contains(r, "too many MCP sessions (the bound is 64); retry later") || !strings.HasSuffix(r, "retry-after=1") {
			t.Errorf("a refusal says %q", r)
			break
		}
	}
	// The slots come back: end every session, and a new one fits.
	for _, id := range sessions {
		req, _ := http.NewRequestWithContext(context.Background(), http.MethodDelete, ts.URL, nil)
		req.Header.Set("Mcp-Session-Id", id)
		if resp, err := hc.Do(req); err == nil {
			resp.Body.Close()
		}
	}
	for deadline := time.Now().Add(10 * time.Second); srv.sessions() != 0; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d sessions left after deleting them all", srv.sessions())
		}
	}
	if srv.pending != 0 {
		t.Errorf("%d slots still reserved", srv.pending)
	}
}
