package server_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/dsh-container/dsh-container/server"
)

// requestBytes is the server's dsh_container_request_bytes.
func (sf *sessionFixture) requestBytes(t *testing.T) float64 {
	t.Helper()
	mfs, err := sf.metrics.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == server.MetricRequestBytes {
			return mf.GetMetric()[0].GetGauge().GetValue()
		}
	}
	t.Fatalf("no %s", server.MetricRequestBytes)
	return 0
}

func (sf *sessionFixture) waitRequestBytes(t *testing.T, cond func(float64) bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(sf.requestBytes(t)); time.Sleep(2 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%s stayed at %v", server.MetricRequestBytes, sf.requestBytes(t))
		}
	}
}

// rawPost sends a POST /v1/run head announcing length bytes and then
// only the first sent of them, and returns the answer.
func (sf *sessionFixture) rawPost(t *testing.T, token string, length int, sent string) (*http.Response, string) {
	t.Helper()
	c, err := net.Dial("tcp", sf.ts.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	fmt.Fprintf(c, "POST /v1/run HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", token, length, sent)
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("no answer to a body not sent: %v", err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp, string(body)
}

// The attack: one tenant with maxRuns 1, queue 0 floods the
// daemon with large requests. Its requests may hold (1 + 0 + 1) × the
// body limit: with its run going and one request being read, the next
// one is refused before a byte of it is read — a session that has sent
// nothing, a POST whose body never comes — while other tenants run.
func TestRequestsRefusedBeforeTheyAreRead(t *testing.T) {
	auth := server.NewAuth([]server.Tenant{
		{Name: "alpha", TokenSHA256: hashOf("a"), MaxRuns: 1, Queue: 0},
		{Name: "beta", TokenSHA256: hashOf("b"), MaxRuns: 1, Queue: 0},
	})
	sf := newSessionFixture(t, server.WithAuth(auth), server.WithAdmission(4, 4))
	busy := sf.dial(t, bearer("a"))
	busy.send(start("python", "call greet {}\nreturn 1", greetTool))
	busy.expect(server.FrameAccepted)
	_, call := busy.expect(server.FrameCall)
	small := sf.requestBytes(t)
	if small <= 0 || small > 1<<10 {
		t.Fatalf("a running session holds %v bytes, want its start frame's", small)
	}

	// A session that has not sent its start frame holds the body limit.
	reading := sf.dial(t, bearer("a"))
	sf.waitRequestBytes(t, func(v float64) bool { return v == small+server.DefaultMaxBodyBytes })

	// alpha's next requests are refused unread.
	p := sf.dial(t, bearer("a"))
	m, _ := p.expect(server.FrameRefused)
	if m["status"] != 429.0 || m["retryAfterMs"] != 1000.0 || !strings.Contains(m["error"].(string), `tenant "alpha" is at its quota: its requests hold`) {
		t.Fatalf("refused %v", m)
	}
	if code := p.closed(); code != websocket.CloseNormalClosure {
		t.Fatalf("close code %d", code)
	}
	resp, body := sf.rawPost(t, "a", server.DefaultMaxBodyBytes, `{"language":`)
	if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") != "1" || !resp.Close || !strings.Contains(body, `tenant \"alpha\" is at its quota`) {
		t.Fatalf("POST: %d %v %s", resp.StatusCode, resp.Header, body)
	}
	// A body announced over the limit is refused unread too.
	if resp, body := sf.rawPost(t, "b", server.DefaultMaxBodyBytes+1, ""); resp.StatusCode != http.StatusRequestEntityTooLarge || !strings.Contains(body, "exceeds") {
		t.Fatalf("an announced oversized body: %d %s", resp.StatusCode, body)
	}

	// beta is not affected.
	other := sf.dial(t, bearer("b"))
	other.send(start("python", "return 2"))
	other.expect(server.FrameAccepted)
	other.expect(server.FrameDone)
	other.closed()

	// The session being read is refused by admission (alpha's one run
	// goes on); its bytes go with it.
	reading.send(start("python", "return 1"))
	if m, _ := reading.expect(server.FrameRefused); m["status"] != 429.0 || !strings.Contains(m["error"].(string), "runs in flight") {
		t.Fatalf("refused %v", m)
	}
	reading.closed()
	sf.waitRequestBytes(t, func(v float64) bool { return v == small })
	busy.send(server.ResultFrame{Type: "result", ID: call.(*server.CallFrame).ID, OK: true, Value: json.RawMessage(`"x"`)})
	busy.until(server.FrameDone)
	busy.closed()
	waitNoSessions(t, sf.srv)
	sf.waitRequestBytes(t, func(v float64) bool { return v == 0 })
}

// Past the daemon's total a request waits, within the body timeout, then
// gets 503 with Retry-After; when bytes come back, requests are read
// again.
func TestRequestsWaitForTheTotal(t *testing.T) {
	const limit = 64 << 10
	sf := newSessionFixture(t, server.WithMaxBodyBytes(limit), server.WithMaxRequestBytes(limit), server.WithBodyTimeout(300*time.Millisecond))
	// A run whose start frame is the whole total holds it while it runs.
	st := start("python", "call greet {}\nreturn 1\n#", greetTool)
	frame, _ := json.Marshal(st)
	st.Code += strings.Repeat("x", limit-len(frame))
	holder := sf.dial(t, nil)
	holder.send(st)
	holder.expect(server.FrameAccepted)
	_, call := holder.expect(server.FrameCall)
	if v := sf.requestBytes(t); v != limit {
		t.Fatalf("the running session holds %v bytes, want %d", v, limit)
	}
	began := time.Now()
	resp, body := sf.rawPost(t, "", 20, `{"language":"python"`)
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") != "1" || !strings.Contains(body, "holds as many request bytes as it may (64KiB") {
		t.Fatalf("POST past the total: %d %v %s", resp.StatusCode, resp.Header, body)
	}
	if waited := time.Since(began); waited < 250*time.Millisecond {
		t.Fatalf("refused after %v, before the body timeout", waited)
	}
	p := sf.dial(t, nil)
	if m, _ := p.expect(server.FrameRefused); m["status"] != 503.0 || m["retryAfterMs"] != 1000.0 {
		t.Fatalf("a session past the total: %v", m)
	}
	p.closed()
	// When the run ends its bytes come back (TestIntakeTotalWaits: a
	// request waiting then is let in).
	holder.send(server.ResultFrame{Type: "result", ID: call.(*server.CallFrame).ID, OK: true, Value: json.RawMessage(`"x"`)})
	holder.until(server.FrameDone)
	holder.closed()
	sf.waitRequestBytes(t, func(v float64) bool { return v == 0 })
	if resp := sf.post(t, "/v1/run", nil, `{"language":"python","code":"return 1"}`); resp.StatusCode != http.StatusOK {
		t.Fatalf("POST after: %d", resp.StatusCode)
	}
}

// Reading, decoding and preparing a large start frame or body costs a
// few times its size, not 17 (issue 24: a program of angle brackets and
// quotes, as json.Marshal escapes it, in a 1.95 MB frame).
func TestLargeRequestsCostAFewTimesTheirSize(t *testing.T) {
	auth := server.NewAuth([]server.Tenant{{Name: "alpha", TokenSHA256: hashOf("a"), MaxRuns: 1, Queue: 0}})
	sf := newSessionFixture(t, server.WithAuth(auth), server.WithAdmission(4, 4))
	busy := sf.dial(t, bearer("a"))
	busy.send(start("python", "call greet {}\nreturn 1", greetTool))
	busy.expect(server.FrameAccepted)
	busy.expect(server.FrameCall)

	line := "const a: Array<string> = [\"x\", 'y']; // <b>&\n"
	code := strings.Repeat(line, (1180<<10)/len(line))
	frame, _ := json.Marshal(start("python", code))
	body, _ := json.Marshal(server.RunRequest{Language: "python", Code: code})
	if len(frame) < 1900e3 || len(frame) > server.DefaultMaxBodyBytes {
		t.Fatalf("frame of %d bytes", len(frame))
	}
	allocated := func(do func()) float64 {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		do()
		runtime.ReadMemStats(&after)
		return float64(after.TotalAlloc - before.TotalAlloc)
	}
	p := sf.dial(t, bearer("a"))
	session := allocated(func() {
		if err := p.conn.WriteMessage(websocket.TextMessage, frame); err != nil {
			t.Fatal(err)
		}
		if m, _ := p.expect(server.FrameRefused); m["status"] != 429.0 {
			t.Fatalf("refused %v", m)
		}
	}) / float64(len(frame))
	p.closed()
	post := allocated(func() {
		req, _ := http.NewRequest(http.MethodPost, sf.ts.URL+"/v1/run", bytes.NewReader(body))
		req.Header = bearer("a")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusTooManyRequests {
			t.Fatalf("POST: %d", resp.StatusCode)
		}
	}) / float64(len(body))
	t.Logf("a %d-byte start frame allocated %.2f× its size, a %d-byte body %.2f×", len(frame), session, len(body), post)
	if session > 5 || post > 4 {
		t.Errorf("allocated %.2f× a start frame, %.2f× a body: want at most 5× and 4×", session, post)
	}
	busy.conn.Close()
}

// A session waiting for admission holds its start frame and no more: a
// frame then may only be an abort, so one over an abort's largest is
// refused from its first 128 KiB (413, close 1009) and the session
// leaves the queue; an abort of the largest reason still aborts.
func TestSessionWaitingHoldsItsStartOnly(t *testing.T) {
	sf := newSessionFixture(t, server.WithAdmission(1, 1))
	busy := sf.dial(t, nil)
	busy.send(start("python", "call greet {}\nreturn 1", greetTool))
	busy.expect(server.FrameAccepted)
	_, call := busy.expect(server.FrameCall)

	p := sf.dial(t, nil)
	p.send(start("python", "return 1"))
	sf.waitInFlight(t, 2)
	big := []byte(`{"type":"result","id":"x:code:1","ok":true,"value":"` + strings.Repeat("v", 1<<20) + `"}`)
	go p.conn.WriteMessage(websocket.TextMessage, big) // refused from its first bytes: the write may fail
	m, _ := p.expect(server.FrameRefused)
	if m["status"] != 413.0 || !strings.Contains(m["error"].(string), "before accepted exceeds 131072 bytes: only abort may be sent then") {
		t.Fatalf("refused %v", m)
	}
	if code := p.closed(); code != websocket.CloseMessageTooBig {
		t.Fatalf("close code %d", code)
	}
	sf.waitInFlight(t, 1)

	q := sf.dial(t, nil)
	q.send(start("python", "return 1"))
	sf.waitInFlight(t, 2)
	q.send(server.AbortFrame{Type: "abort", Reason: strings.Repeat("\x01", server.MaxMessageBytes)}) // 96 KiB of JSON
	q.closed()
	sf.waitInFlight(t, 1)

	busy.send(server.ResultFrame{Type: "result", ID: call.(*server.CallFrame).ID, OK: true, Value: json.RawMessage(`"x"`)})
	busy.until(server.FrameDone)
	busy.closed()
	waitNoSessions(t, sf.srv)
}

// waitInFlight waits until n python runs are in flight or waiting.
func (sf *sessionFixture) waitInFlight(t *testing.T, n float64) {
	t.Helper()
	inFlight := func() float64 {
		mfs, err := sf.metrics.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, mf := range mfs {
			for _, m := range mf.GetMetric() {
				if mf.GetName() == server.MetricInFlight && m.GetLabel()[0].GetValue() == "python" {
					return m.GetGauge().GetValue()
				}
			}
		}
		return 0
	}
	for deadline := time.Now().Add(10 * time.Second); inFlight() != n; time.Sleep(2 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%v runs in flight, want %v", inFlight(), n)
		}
	}
}
