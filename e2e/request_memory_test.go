package e2e

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/dsh-container/dsh-container/server"
)

// MaxServeGrowthMiB bounds how far serve's resident memory may grow
// while one tenant with maxRuns 1, queue 0 sends 60 requests of 1.95 MB
// at once, and then 300 (issue 24; SECURITY.md's host-bounds table). The
// tenant's requests hold at most two of them however many it sends; each
// connection refused before its request was read costs its goroutine and
// buffers, some KiB, so the bound holds for 300 too.
const MaxServeGrowthMiB = 64

// The red team's finding (issue 24, §7): one tenant with maxRuns 1,
// queue 0 opens 60 sessions, or sends 60 POST /v1/run, each with 1.95 MB
// of program, all at once; the daemon read and decoded them all before
// admission refused 58 (34 → 550 MiB). Now its requests may hold (1 + 0
// + 1) × 2 MiB: the rest are refused before a byte of them is read, and
// what is read is decoded at a few times its size. serve's peak RSS
// (VmHWM), from a fresh daemon's, grows by at most 64 MiB over a wave of
// 60 and then one of 300, of sessions and of POSTs.
//
//	go test -count=1 -run TestServeMemoryBeforeAdmission -v ./e2e/ | grep BOUND
func TestServeMemoryBeforeAdmission(t *testing.T) {
	auth := filepath.Join(t.TempDir(), "auth.json")
	alpha, alphaSum := token("alpha")
	writeAuth(t, auth, map[string]any{"name": "alpha", "tokenSha256": alphaSum, "maxRuns": 1, "queue": 0, "metrics": true})
	header := http.Header{"Authorization": {"Bearer " + alpha}}

	// A program of angle brackets, quotes and newlines, which JSON
	// escapes (json.Marshal's \u003c makes a < six bytes): 1.95 MB of
	// frame and of body.
	line := "const a: Array<string> = [\"x\", 'y']; // <b>&\n"
	code := strings.Repeat(line, (1180<<10)/len(line))
	frame, _ := json.Marshal(map[string]any{"type": "start", "protocol": 1, "language": "typescript", "code": code})
	body, _ := json.Marshal(map[string]any{"language": "typescript", "code": code})
	// A start frame of as many tools as one may hold, their schemas of
	// small properties (Go values of such a schema cost thirty times its
	// text): 1.95 MB too.
	var tools []map[string]any
	for i := range server.MaxSessionTools {
		props := map[string]any{}
		for j := range 155 {
			props[fmt.Sprintf("p%d", j)] = map[string]string{"type": "string"}
		}
		tools = append(tools, map[string]any{"name": fmt.Sprintf("t%d", i), "inputSchema": map[string]any{"type": "object", "properties": props}})
	}
	toolFrame, _ := json.Marshal(map[string]any{"type": "start", "protocol": 1, "language": "typescript", "code": "return 1", "tools": tools})
	for _, n := range []int{len(frame), len(body), len(toolFrame)} {
		if n < 1900e3 || n > server.DefaultMaxBodyBytes {
			t.Fatalf("a frame or body of %d bytes", n)
		}
	}
	// session sends the frame and reads the first answer: refused (with
	// its status) or accepted then done; "cut" when the daemon closed
	// the connection before answering.
	session := func(s *service, frame []byte) string {
		d := websocket.Dialer{HandshakeTimeout: time.Minute}
		conn, _, err := d.Dial("ws"+strings.TrimPrefix(s.url, "http")+"/v1/sessions", header)
		if err != nil {
			return "dial failed"
		}
		defer conn.Close()
		conn.SetReadDeadline(time.Now().Add(2 * time.Minute))
		go conn.WriteMessage(websocket.TextMessage, frame) // the daemon may answer first
		_, data, err := conn.ReadMessage()
		if err != nil {
			return "cut"
		}
		var m struct {
			Type   string
			Status int
			Error  string
		}
		json.Unmarshal(data, &m)
		if m.Type == "accepted" {
			for m.Type != "done" && m.Type != "error" {
				if _, data, err = conn.ReadMessage(); err != nil {
					return "accepted, then cut"
				}
				json.Unmarshal(data, &m)
			}
			return "accepted, " + m.Type
		}
		return fmt.Sprintf("%s %d: %s", m.Type, m.Status, refusalKind(m.Error))
	}
	hc := &http.Client{Transport: &http.Transport{MaxConnsPerHost: 0, DisableKeepAlives: true}, Timeout: 2 * time.Minute}
	post := func(s *service) string {
		req, _ := http.NewRequest(http.MethodPost, s.url+"/v1/run", bytes.NewReader(body))
		req.Header = header.Clone()
		req.Header.Set("Content-Type", "application/json")
		resp, err := hc.Do(req)
		if err != nil {
			return "cut"
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		var e struct{ Error json.RawMessage }
		json.Unmarshal(b, &e)
		var msg string
		json.Unmarshal(e.Error, &msg)
		return fmt.Sprintf("%d: %s", resp.StatusCode, refusalKind(msg))
	}

	for _, kind := range []struct {
		name string
		size int
		do   func(*service) string
	}{
		{"sessions", len(frame), func(s *service) string { return session(s, frame) }},
		{"posts", len(body), post},
		{"sessions with tools", len(toolFrame), func(s *service) string { return session(s, toolFrame) }},
	} {
		t.Run(kind.name, func(t *testing.T) {
			s := startService(t, nil, "--pool", "0", "--languages", "typescript", "--auth", auth, "--max-runs", "4", "--queue", "4")
			pid := s.cmd.Process.Pid
			base := procStatusKiB(pid, "VmRSS")
			// The peak (VmHWM) starts at the RSS now (clear_refs 5).
			if err := os.WriteFile(fmt.Sprintf("/proc/%d/clear_refs", pid), []byte("5"), 0); err != nil {
				t.Fatalf("resetting serve's VmHWM: %v", err)
			}
			for _, n := range []int{60, 300} {
				outcomes := map[string]int{}
				var mu sync.Mutex
				var wg sync.WaitGroup
				gate := make(chan struct{})
				for range n {
					wg.Add(1)
					go func() {
						defer wg.Done()
						<-gate
						o := kind.do(s)
						mu.Lock()
						outcomes[o]++
						mu.Unlock()
					}()
				}
				began := time.Now()
				close(gate)
				wg.Wait()
				peak := procStatusKiB(pid, "VmHWM")
				grew := (peak - base) >> 10
				bound(t, "%d %s of %d bytes at once from one tenant (maxRuns 1, queue 0) in %v: serve's RSS %d MiB fresh, peak %d MiB so far (+%d MiB; bound +%d MiB); outcomes %v",
					n, kind.name, kind.size, time.Since(began).Round(time.Millisecond), base>>10, peak>>10, grew, MaxServeGrowthMiB, outcomes)
				if base < 0 || peak < 0 || grew > MaxServeGrowthMiB {
					t.Errorf("serve grew by %d MiB, over the %d MiB bound", grew, MaxServeGrowthMiB)
				}
				// Every request got an answer that says what happened: a
				// refusal for the tenant's quota, or a run (its program
				// too large for the runtime: an exception); the daemon
				// may cut a connection it refused before reading what it
				// still sends.
				for o, k := range outcomes {
					switch {
					case strings.Contains(o, "quota"), strings.Contains(o, "accepted, done"), strings.HasPrefix(o, "200"), o == "cut":
					default:
						t.Errorf("%d × %q", k, o)
					}
				}
				if outcomes["cut"] == n {
					t.Errorf("every connection was cut: %v", outcomes)
				}
			}
			// Nothing is held once the waves are over, and serve still
			// serves.
			deadline := time.Now().Add(30 * time.Second)
			sessions := server.MetricSessions + `{tenant="alpha"}`
			open := func() bool { v := s.metric(t, alpha, sessions); return v != "0" && v != "" } // "": no session ever
			for s.metric(t, alpha, server.MetricRequestBytes) != "0" || open() {
				if time.Now().After(deadline) {
					t.Fatalf("request bytes %s, sessions %s after the waves", s.metric(t, alpha, server.MetricRequestBytes), s.metric(t, alpha, sessions))
				}
				time.Sleep(100 * time.Millisecond)
			}
			if code, out := s.request(t, "POST", "/v1/run", alpha, map[string]any{"language": "typescript", "code": "return 1"}); code != http.StatusOK || !strings.Contains(out, `"value":1`) {
				t.Fatalf("after the waves: %d %s", code, out)
			}
		})
	}
}

// refusalKind shortens a refusal's message to what decided it.
func refusalKind(msg string) string {
	switch {
	case strings.Contains(msg, "its requests hold"):
		return "over its quota of request bytes"
	case strings.Contains(msg, "runs in flight"):
		return "at its quota of runs"
	case msg == "":
		return ""
	}
	return firstLine(msg)
}

// The close codes docs/session-protocol.md promises, from the daemon: a
// start the protocol refuses closes with 1008, an oversized one with
// 1009, one the server refuses (a bad schema) or admits with 1000.
func TestSessionCloseCodesE2E(t *testing.T) {
	s := startService(t, nil, "--pool", "0", "--languages", "python")
	huge := []byte(`{"type":"start","protocol":1,"language":"python","code":"` + strings.Repeat("x", 3<<20) + `"}`)
	for _, c := range []struct {
		name   string
		frame  []byte
		status int
		code   int
	}{
		{"malformed", []byte(`{"type":"start",`), 400, websocket.ClosePolicyViolation},
		{"not start", []byte(`{"type":"abort"}`), 400, websocket.ClosePolicyViolation},
		{"oversized", huge, 413, websocket.CloseMessageTooBig},
		{"bad schema", []byte(`{"type":"start","protocol":1,"language":"python","code":"return 1","tools":[{"name":"x","inputSchema":{"type":"strin"}}]}`), 400, websocket.CloseNormalClosure},
	} {
		t.Run(c.name, func(t *testing.T) {
			conn, _, err := websocket.DefaultDialer.Dial("ws"+strings.TrimPrefix(s.url, "http")+"/v1/sessions", nil)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			conn.SetReadDeadline(time.Now().Add(time.Minute))
			go conn.WriteMessage(websocket.TextMessage, c.frame) // the daemon may refuse before it has all
			_, data, err := conn.ReadMessage()
			if err != nil {
				t.Fatalf("no refusal: %v", err)
			}
			var m struct {
				Type   string
				Status int
			}
			if json.Unmarshal(data, &m); m.Type != "refused" || m.Status != c.status {
				t.Fatalf("got %s", data)
			}
			_, _, err = conn.ReadMessage()
			var ce *websocket.CloseError
			if !errors.As(err, &ce) || ce.Code != c.code {
				t.Fatalf("closed with %v, want code %d", err, c.code)
			}
		})
	}
}
