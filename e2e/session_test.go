package e2e

// The daemon as a multi-tenant service (issue 13), against `dsh-container
// serve` and the real runner images: sessions with client-supplied tools
// through the Go client in both languages, logs before done, abort,
// disconnect, a client that never answers, bad input, 401, tenants at
// their quota, SIGHUP, TLS and mTLS, per-request limits, and 100
// concurrent sessions leaving nothing behind.

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	dcontainer "github.com/docker/docker/api/types/container"
	"github.com/gorilla/websocket"

	"github.com/dsh-container/dsh-container/backend/container"
	"github.com/dsh-container/dsh-container/client"
	"github.com/dsh-container/dsh-container/internal/testenv"
)

// service is one `dsh-container serve` on a loopback TCP port.
type service struct {
	cmd    *exec.Cmd
	url    string // http(s)://127.0.0.1:port
	prefix string // owner prefix of its containers
	stderr *testenv.LockedBuffer
	exited chan error
	hc     *http.Client
	tls    *tls.Config // the client's TLS (CA; no client certificate)
}

// startService starts serve on a free loopback port with args and waits
// until /healthz answers 200. tlsConf (nil: plain http) is what the test
// uses to reach it. Cleanup kills it and removes its containers.
func startService(t *testing.T, tlsConf *tls.Config, args ...string) *service {
	t.Helper()
	testenv.UsesDaemon(t)
	bin := buildCLI(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	xdg, err := os.MkdirTemp("", "dshs")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(xdg) })
	scheme := "http"
	if tlsConf != nil {
		scheme = "https"
	}
	s := &service{url: scheme + "://" + addr, stderr: &testenv.LockedBuffer{}, exited: make(chan error, 1), tls: tlsConf}
	s.cmd = exec.Command(bin, append([]string{"serve", "--listen", "tcp://" + addr}, args...)...)
	s.cmd.Env = append(os.Environ(), "XDG_RUNTIME_DIR="+xdg)
	s.cmd.Stderr = s.stderr
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	s.prefix = container.OwnerOf(s.cmd.Process.Pid)
	go func() { s.exited <- s.cmd.Wait() }()
	tr := &http.Transport{TLSClientConfig: tlsConf}
	s.hc = &http.Client{Transport: tr, Timeout: 2 * time.Minute}
	t.Cleanup(func() {
		tr.CloseIdleConnections()
		s.cmd.Process.Kill()
		<-s.exited
		for _, c := range containersByOwnerPrefix(t, s.prefix) {
			cli.ContainerRemove(context.Background(), c.ID, dcontainer.RemoveOptions{Force: true})
		}
		if t.Failed() {
			t.Logf("serve's log:\n%s", s.stderr.String())
		}
	})
	for deadline := time.Now().Add(90 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		select {
		case err := <-s.exited:
			t.Fatalf("serve exited: %v\n%s", err, s.stderr.String())
		default:
		}
		if code, _ := s.request(t, "GET", "/healthz", "", nil); code == http.StatusOK {
			return s
		}
		if time.Now().After(deadline) {
			t.Fatalf("serve never became healthy; stderr:\n%s", s.stderr.String())
		}
	}
}

// request sends one HTTP request; token "" sends no Authorization.
func (s *service) request(t *testing.T, method, path, token string, body any) (int, string) {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, _ := http.NewRequest(method, s.url+path, rd)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := s.hc.Do(req)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func (s *service) client(token string) *client.Client {
	return &client.Client{URL: s.url, Token: token, TLS: s.tls}
}

// metric returns the value of one series in /metrics text ("" if absent).
func (s *service) metric(t *testing.T, token, series string) string {
	t.Helper()
	_, body := s.request(t, "GET", "/metrics", token, nil)
	for _, line := range strings.Split(body, "\n") {
		if v, ok := strings.CutPrefix(line, series+" "); ok {
			return v
		}
	}
	return ""
}

// stop sends SIGTERM and checks serve exits 0 leaving no container.
func (s *service) stop(t *testing.T) {
	t.Helper()
	s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-s.exited:
		s.exited <- err // for Cleanup
		if err != nil {
			t.Errorf("serve exited with %v", err)
		}
	case <-time.After(2 * time.Minute):
		t.Fatal("serve did not exit after SIGTERM")
	}
	if left := containersByOwnerPrefix(t, s.prefix); len(left) != 0 {
		t.Errorf("serve left %d container(s)", len(left))
	}
}

// waitNoRunContainers waits until serve has no container but its pool's
// (pool 0: none at all).
func (s *service) waitContainers(t *testing.T, max int) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		n := len(containersByOwnerPrefix(t, s.prefix))
		if n <= max {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d containers of serve remain, want at most %d", n, max)
		}
	}
}

func token(name string) (tok, sum string) {
	tok = "tok-" + name + "-" + fmt.Sprint(time.Now().UnixNano())
	h := sha256.Sum256([]byte(tok))
	return tok, hex.EncodeToString(h[:])
}

func writeAuth(t *testing.T, path string, tenants ...map[string]any) {
	t.Helper()
	b, _ := json.Marshal(map[string]any{"tenants": tenants})
	if err := os.WriteFile(path+".tmp", b, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(path+".tmp", path); err != nil {
		t.Fatal(err)
	}
}

var greetTool = client.Tool{
	Name:        "greet",
	Description: "Greet someone by name.",
	InputSchema: json.RawMessage(`{"type":"object","properties":{"name":{"type":"string"}},"required":["name"]}`),
	Func: func(_ context.Context, args json.RawMessage) (any, error) {
		var a struct{ Name string }
		if err := json.Unmarshal(args, &a); err != nil {
			return nil, err
		}
		return "hello " + a.Name, nil
	},
}

var sessionPrograms = map[string]string{
	"typescript": `console.log("before");
const seen = await tools.seen({});
const g = await tools.greet({name: "Ada"});
let err = "";
try { await tools.fail({}); } catch (e) { err = String(e.message ?? e); }
const rows = await tools.lookup({q: "x"});
return {seen, g, err, rows: rows.rows};`,
	"python": `print("before")
seen = await tools.seen({})
g = await tools["greet"]({"name": "Ada"})
err = ""
try:
    await tools.fail({})
except Exception as e:
    err = str(e)
rows = await tools.lookup({"q": "x"})
return {"seen": seen, "g": g, "err": err, "rows": rows["rows"]}`,
}

// A session with client-supplied tools in both languages: plain and
// structured values, a rejection, the log of the program seen by the
// client before the program's next call returns (so before done), events
// streamed, the report as POST /v1/run gives it.
func TestSessionClientToolsE2E(t *testing.T) {
	underEachRuntime(t, func(t *testing.T, ociRuntime string) {
		s := startService(t, nil, append([]string{"--pool", "1", "--wall-timeout", "30s"}, runtimeFlag(ociRuntime)...)...)
		for lang, code := range sessionPrograms {
			t.Run(lang, func(t *testing.T) {
				var mu sync.Mutex
				var logs []string
				var events int
				seen := client.Tool{Name: "seen", Func: func(context.Context, json.RawMessage) (any, error) {
					mu.Lock()
					defer mu.Unlock()
					return len(logs) > 0 && strings.HasPrefix(logs[0], "before"), nil
				}}
				fail := client.Tool{Name: "fail", Func: func(context.Context, json.RawMessage) (any, error) {
					return nil, errors.New("no such row")
				}}
				lookup := client.Tool{Name: "lookup", InputSchema: json.RawMessage(`{"type":"object","properties":{"q":{"type":"string"}}}`),
					OutputSchema: json.RawMessage(`{"type":"object","properties":{"rows":{"type":"array","items":{"type":"integer"}}}}`),
					Func:         func(context.Context, json.RawMessage) (any, error) { return map[string]any{"rows": []int{1, 2}}, nil }}
				rep, err := s.client("").Run(context.Background(), client.Request{Language: lang, Code: code, ID: "s-" + lang},
					[]client.Tool{seen, greetTool, fail, lookup}, client.Handlers{
						Log: func(e client.LogEntry) {
							mu.Lock()
							logs = append(logs, e.Text)
							mu.Unlock()
						},
						Event: func(json.RawMessage) { events++ },
					})
				if err != nil {
					t.Fatal(err)
				}
				// Without an output schema a tool's value reaches the
				// program as text (JSON text unless it is a string).
				var v struct {
					Seen string
					G    string
					Err  string
					Rows []int
				}
				if rep.Error != nil || json.Unmarshal(rep.Value, &v) != nil {
					t.Fatalf("report %+v %s", rep.Error, rep.Value)
				}
				if v.Seen != "true" || v.G != "hello Ada" || !strings.Contains(v.Err, "no such row") || fmt.Sprint(v.Rows) != "[1 2]" {
					t.Fatalf("value %s", rep.Value)
				}
				if events != 4 || len(rep.Events) != 4 || rep.Stats.Calls != 4 || rep.ID != "s-"+lang {
					t.Fatalf("%d events streamed, report %+v", events, rep)
				}
			})
		}
		s.stop(t)
	})
}

// Abort through ctx, a disconnect mid-call, and a client that never
// answers (the wall budget): each run ends and its container goes.
func TestSessionAbortDisconnectSilenceE2E(t *testing.T) {
	underEachRuntime(t, func(t *testing.T, ociRuntime string) {
		s := startService(t, nil, append([]string{"--pool", "0", "--wall-timeout", "4s", "--languages", "python"}, runtimeFlag(ociRuntime)...)...)
		prog := "return await tools.wait({})"
		called := make(chan struct{}, 1)

		// Abort: cancel while the tool waits.
		ctx, cancel := context.WithCancel(context.Background())
		wait := client.Tool{Name: "wait", Func: func(tctx context.Context, _ json.RawMessage) (any, error) {
			cancel()
			<-tctx.Done()
			return nil, tctx.Err()
		}}
		rep, err := s.client("").Run(ctx, client.Request{Language: "python", Code: prog}, []client.Tool{wait}, client.Handlers{})
		if !errors.Is(err, context.Canceled) || rep == nil || rep.Error == nil || rep.Error.Kind != "abort" {
			t.Fatalf("abort: %v %+v", err, rep)
		}
		s.waitContainers(t, 0)

		// Disconnect: drop the socket when the call arrives.
		conn, _, err := websocket.DefaultDialer.Dial(strings.Replace(s.url, "http", "ws", 1)+"/v1/sessions", nil)
		if err != nil {
			t.Fatal(err)
		}
		conn.WriteJSON(map[string]any{"type": "start", "protocol": 1, "language": "python", "code": prog,
			"tools": []map[string]any{{"name": "wait", "inputSchema": map[string]any{"type": "object"}}}})
		for {
			var f map[string]any
			if err := conn.ReadJSON(&f); err != nil {
				t.Fatal(err)
			}
			if f["type"] == "call" {
				break
			}
		}
		conn.Close()
		for deadline := time.Now().Add(20 * time.Second); s.metric(t, "", `dsh_container_runs_total{language="python",outcome="abort",tenant="anonymous"}`) != "2"; time.Sleep(100 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatal("the disconnect did not abort the run")
			}
		}
		s.waitContainers(t, 0)

		// Silence: the wall budget ends it.
		never := client.Tool{Name: "wait", Func: func(tctx context.Context, _ json.RawMessage) (any, error) {
			called <- struct{}{}
			<-tctx.Done()
			return nil, tctx.Err()
		}}
		began := time.Now()
		rep, err = s.client("").Run(context.Background(), client.Request{Language: "python", Code: prog}, []client.Tool{never}, client.Handlers{})
		if err != nil || rep.Error == nil || rep.Error.Kind != "timeout" || time.Since(began) > 20*time.Second {
			t.Fatalf("silent client: %v %+v after %v", err, rep, time.Since(began))
		}
		<-called
		s.waitContainers(t, 0)
		if v := s.metric(t, "", "dsh_container_sessions{tenant=\"anonymous\"}"); v != "0" {
			t.Errorf("sessions gauge %q after every session ended", v)
		}
		s.stop(t)
	})
}

// Bad input gets a precise refusal or error frame, and leaves no session
// and no container.
func TestSessionBadInputE2E(t *testing.T) {
	dir := t.TempDir()
	tools := filepath.Join(dir, "tools.json")
	os.WriteFile(tools, []byte(`{"tools":[{"name":"shout","description":"Upper-case.","inputSchema":{"type":"object"},"command":["/bin/cat"]}]}`), 0o644)
	s := startService(t, nil, "--pool", "0", "--languages", "python", "--tools", tools)
	wsURL := strings.Replace(s.url, "http", "ws", 1) + "/v1/sessions"
	obj := map[string]any{"type": "object"}
	startWith := func(tools ...map[string]any) map[string]any {
		return map[string]any{"type": "start", "protocol": 1, "language": "python", "code": "await tools.ask({})\nreturn await tools.ask({})", "tools": tools}
	}
	ask := map[string]any{"name": "ask", "inputSchema": obj}
	for _, c := range []struct {
		name   string
		frames []any // strings are sent raw; "CALL" answers nothing and waits for the call
		want   string
		code   string // refused status or error code
	}{
		{"malformed", []any{`{"type":"start",`}, "not-json", "400"},
		{"unknown type", []any{`{"type":"hello"}`}, "unknown-type", "400"},
		{"oversized", []any{`{"type":"start","protocol":1,"language":"python","code":"` + strings.Repeat("x", 3<<20) + `"}`}, "too-large", "413"},
		{"schema", []any{startWith(map[string]any{"name": "bad", "inputSchema": map[string]any{"type": "thing"}})}, "inputSchema is not JSON Schema", "400"},
		{"name clash", []any{startWith(map[string]any{"name": "shout", "inputSchema": obj})}, `"shout"`, "400"},
		{"unknown call id", []any{startWith(ask), "CALL", map[string]any{"type": "result", "id": "nope", "ok": true, "value": 1}}, "no call \"nope\"", "unknown-call"},
		{"duplicate result", []any{startWith(ask), "CALL", "RESULT", "RESULT"}, "already answered", "duplicate-result"},
	} {
		t.Run(c.name, func(t *testing.T) {
			conn, _, err := websocket.DefaultDialer.Dial(wsURL, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			conn.SetReadDeadline(time.Now().Add(60 * time.Second))
			var callID string
			for _, f := range c.frames {
				switch f {
				case "CALL":
					for callID == "" {
						var m map[string]any
						if err := conn.ReadJSON(&m); err != nil {
							t.Fatal(err)
						}
						if m["type"] == "call" {
							callID = m["id"].(string)
						}
					}
					continue
				case "RESULT":
					f = map[string]any{"type": "result", "id": callID, "ok": true, "value": 1}
				}
				if raw, ok := f.(string); ok {
					conn.WriteMessage(websocket.TextMessage, []byte(raw))
				} else {
					conn.WriteJSON(f)
				}
			}
			var last map[string]any
			for {
				var m map[string]any
				if err := conn.ReadJSON(&m); err != nil {
					break
				}
				last = m
			}
			got := fmt.Sprint(last["status"], last["code"], last["error"], last["message"])
			if last == nil || !strings.Contains(got, c.code) || !strings.Contains(got, c.want) {
				t.Fatalf("last frame %v, want %s naming %q", last, c.code, c.want)
			}
			s.waitContainers(t, 0)
		})
	}
	if v := s.metric(t, "", "dsh_container_sessions{tenant=\"anonymous\"}"); v != "0" {
		t.Errorf("sessions gauge %q", v)
	}
	s.stop(t)
}

// Tenants: 401 (one body for a missing and a wrong token, on both
// endpoints), one tenant at its quota gets 429 while another runs, the
// tenant label on metrics, SIGHUP adds a tenant without touching a run
// in flight; per-request limits lower, never raise.
func TestTenantsE2E(t *testing.T) {
	auth := filepath.Join(t.TempDir(), "auth.json")
	alpha, alphaSum := token("alpha")
	beta, betaSum := token("beta")
	gamma, gammaSum := token("gamma")
	writeAuth(t, auth,
		map[string]any{"name": "alpha", "tokenSha256": alphaSum, "maxRuns": 1, "queue": 0, "metrics": true},
		map[string]any{"name": "beta", "tokenSha256": betaSum})
	s := startService(t, nil, "--pool", "1", "--languages", "python", "--auth", auth, "--max-runs", "4", "--queue", "4", "--wall-timeout", "180s")

	// 401, the same body whatever failed.
	_, missing := s.request(t, "POST", "/v1/run", "", map[string]any{"language": "python", "code": "return 1"})
	code, wrong := s.request(t, "POST", "/v1/run", "not-a-token", map[string]any{"language": "python", "code": "return 1"})
	if code != http.StatusUnauthorized || missing != wrong || strings.Contains(wrong, "token is wrong") {
		t.Fatalf("401: %d %q vs %q", code, missing, wrong)
	}
	_, err := s.client("not-a-token").Run(context.Background(), client.Request{Language: "python", Code: "return 1"}, nil, client.Handlers{})
	var rf *client.RefusedError
	if !errors.As(err, &rf) || rf.Status != 401 || !strings.Contains(wrong, rf.Message) {
		t.Fatalf("session 401: %v", err)
	}

	// alpha holds its one slot in a tool ...
	release := make(chan struct{})
	entered := make(chan struct{})
	hold := client.Tool{Name: "hold", Func: func(ctx context.Context, _ json.RawMessage) (any, error) {
		close(entered)
		select {
		case <-release:
			return "released", nil
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}}
	held := make(chan error, 1)
	go func() {
		rep, err := s.client(alpha).Run(context.Background(), client.Request{Language: "python", Code: "return await tools.hold({})"}, []client.Tool{hold}, client.Handlers{})
		if err == nil && (rep.Error != nil || string(rep.Value) != `"released"`) {
			err = fmt.Errorf("held run: %+v %s", rep.Error, rep.Value)
		}
		held <- err
	}()
	<-entered
	// ... so alpha gets 429, on both endpoints ...
	_, err = (&client.Client{URL: s.url, Token: alpha, MaxRetries: -1}).Run(context.Background(), client.Request{Language: "python", Code: "return 1"}, nil, client.Handlers{})
	if !errors.As(err, &rf) || rf.Status != 429 || rf.RetryAfter <= 0 || !strings.Contains(rf.Message, `"alpha"`) {
		t.Fatalf("alpha at its quota: %v", err)
	}
	if code, body := s.request(t, "POST", "/v1/run", alpha, map[string]any{"language": "python", "code": "return 1"}); code != 429 {
		t.Fatalf("alpha POST at its quota: %d %s", code, body)
	}
	// ... while beta runs, with lowered limits; raising one is a 400.
	rep, err := s.client(beta).Run(context.Background(), client.Request{Language: "python", Code: "return 2", Limits: &client.Limits{WallTimeoutMs: 10000, Pids: 64}}, nil, client.Handlers{})
	if err != nil || string(rep.Value) != "2" {
		t.Fatalf("beta while alpha is at its quota: %v %+v", err, rep)
	}
	code, body := s.request(t, "POST", "/v1/run", beta, map[string]any{"language": "python", "code": "return 1", "limits": map[string]any{"memoryBytes": 1 << 40}})
	if code != 400 || !strings.Contains(body, "memoryBytes") {
		t.Fatalf("raised limit: %d %s", code, body)
	}
	code, body = s.request(t, "POST", "/v1/run", beta, map[string]any{"language": "python", "code": "while True: pass", "limits": map[string]any{"wallTimeoutMs": 1500, "computeTimeoutMs": 1000}})
	if code != 200 || !strings.Contains(body, `"kind":"timeout"`) {
		t.Fatalf("lowered compute budget: %d %s", code, body)
	}

	// SIGHUP with gamma added and beta removed; alpha's run goes on.
	writeAuth(t, auth,
		map[string]any{"name": "alpha", "tokenSha256": alphaSum, "maxRuns": 1, "queue": 0, "metrics": true},
		map[string]any{"name": "gamma", "tokenSha256": gammaSum})
	s.cmd.Process.Signal(syscall.SIGHUP)
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if code, _ := s.request(t, "POST", "/v1/run", gamma, map[string]any{"language": "python", "code": "return 3"}); code == 200 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("gamma never admitted after SIGHUP")
		}
	}
	if code, _ := s.request(t, "POST", "/v1/run", beta, map[string]any{"language": "python", "code": "return 3"}); code != 401 {
		t.Fatalf("beta after its removal: %d", code)
	}
	close(release)
	if err := <-held; err != nil {
		t.Fatalf("the run in flight across SIGHUP: %v", err)
	}

	// Metrics carry the tenant; only a tenant with "metrics" reads them.
	for _, want := range []string{
		`dsh_container_runs_total{language="python",outcome="ok",tenant="alpha"}`,
		`dsh_container_runs_total{language="python",outcome="ok",tenant="beta"}`,
		`dsh_container_runs_total{language="python",outcome="rejected",tenant="alpha"}`,
	} {
		if s.metric(t, alpha, want) == "" {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	if code, _ := s.request(t, "GET", "/metrics", gamma, nil); code != 403 {
		t.Errorf("gamma read /metrics: %d", code)
	}
	s.stop(t)
}

// serve refuses a non-loopback address without authentication.
func TestServeRefusesOpenListener(t *testing.T) {
	testenv.UsesDaemon(t)
	out, err := exec.Command(buildCLI(t), "serve", "--listen", "tcp://0.0.0.0:0").CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 2 || !strings.Contains(string(out), "--insecure-no-auth") {
		t.Fatalf("serve on 0.0.0.0 without auth: %v %s", err, out)
	}
}

// SIGHUP, the signal operators send to reload, never kills the daemon:
// without --auth there is nothing to reload and it is ignored.
func TestServeSurvivesSIGHUPWithoutAuth(t *testing.T) {
	s := startService(t, nil, "--pool", "0")
	if err := s.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); !strings.Contains(s.stderr.String(), "SIGHUP"); time.Sleep(50 * time.Millisecond) {
		select {
		case err := <-s.exited:
			t.Fatalf("serve died of SIGHUP: %v\n%s", err, s.stderr.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("serve never logged the SIGHUP:\n%s", s.stderr.String())
		}
	}
	if code, body := s.request(t, "GET", "/healthz", "", nil); code != http.StatusOK {
		t.Fatalf("after SIGHUP: /healthz %d %s", code, body)
	}
}

// TLS and mTLS with certificates made here: no client certificate is
// 401, a certificate of another CA fails the handshake, the right one
// runs a session; /healthz needs none.
func TestTLSAndMTLSE2E(t *testing.T) {
	dir := t.TempDir()
	ca, caKey := newCA(t, "dsh test CA")
	other, otherKey := newCA(t, "someone else")
	serverCert := leaf(t, ca, caKey, "127.0.0.1", true)
	clientCert := leaf(t, ca, caKey, "client", false)
	strangerCert := leaf(t, other, otherKey, "stranger", false)
	write := func(name string, blocks ...*pem.Block) string {
		p := filepath.Join(dir, name)
		var b []byte
		for _, bl := range blocks {
			b = append(b, pem.EncodeToMemory(bl)...)
		}
		os.WriteFile(p, b, 0o600)
		return p
	}
	certFile := write("server.pem", &pem.Block{Type: "CERTIFICATE", Bytes: serverCert.Certificate[0]})
	keyDER, _ := x509.MarshalECPrivateKey(serverCert.PrivateKey.(*ecdsa.PrivateKey))
	keyFile := write("server.key", &pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER})
	caFile := write("ca.pem", &pem.Block{Type: "CERTIFICATE", Bytes: ca.Raw})
	roots := x509.NewCertPool()
	roots.AddCert(ca)

	s := startService(t, &tls.Config{RootCAs: roots}, "--pool", "0", "--languages", "python", "--tls-cert", certFile, "--tls-key", keyFile, "--client-ca", caFile)
	// Without a client certificate: 401 on the API.
	if code, _ := s.request(t, "POST", "/v1/run", "", map[string]any{"language": "python", "code": "return 1"}); code != 401 {
		t.Fatalf("no client certificate: %d", code)
	}
	_, err := s.client("").Run(context.Background(), client.Request{Language: "python", Code: "return 1"}, nil, client.Handlers{})
	var rf *client.RefusedError
	if !errors.As(err, &rf) || rf.Status != 401 {
		t.Fatalf("session without a client certificate: %v", err)
	}
	// A certificate of another CA, sent although the server asks for its
	// own CA's, fails the handshake.
	stranger := &client.Client{URL: s.url, TLS: &tls.Config{RootCAs: roots, GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
		return &strangerCert, nil
	}}}
	if _, err := stranger.Run(context.Background(), client.Request{Language: "python", Code: "return 1"}, nil, client.Handlers{}); err == nil || errors.As(err, &rf) {
		t.Fatalf("a stranger's certificate: %v", err)
	}
	// Plain HTTP to the TLS port does not run anything.
	if resp, err := http.Post(strings.Replace(s.url, "https", "http", 1)+"/v1/run", "application/json", strings.NewReader(`{"language":"python","code":"return 1"}`)); err == nil {
		resp.Body.Close()
		if resp.StatusCode == 200 {
			t.Fatal("plain HTTP ran a program")
		}
	}
	// The right certificate runs a session over TLS.
	good := &client.Client{URL: s.url, TLS: &tls.Config{RootCAs: roots, Certificates: []tls.Certificate{clientCert}}}
	rep, err := good.Run(context.Background(), client.Request{Language: "python", Code: `return await tools.greet({"name": "TLS"})`}, []client.Tool{greetTool}, client.Handlers{})
	if err != nil || string(rep.Value) != `"hello TLS"` {
		t.Fatalf("mTLS session: %v %+v", err, rep)
	}

	// SIGHUP reloads a rotated certificate: new handshakes present it,
	// and the mTLS client still runs. A broken file keeps the one before.
	served := func() *big.Int {
		t.Helper()
		conn, err := tls.Dial("tcp", strings.TrimPrefix(s.url, "https://"), &tls.Config{RootCAs: roots, Certificates: []tls.Certificate{clientCert}})
		if err != nil {
			t.Fatalf("handshake: %v", err)
		}
		defer conn.Close()
		return conn.ConnectionState().PeerCertificates[0].SerialNumber
	}
	hup := func(want string) {
		t.Helper()
		n := strings.Count(s.stderr.String(), want)
		s.cmd.Process.Signal(syscall.SIGHUP)
		for deadline := time.Now().Add(10 * time.Second); strings.Count(s.stderr.String(), want) == n; time.Sleep(20 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("no %q after SIGHUP:\n%s", want, s.stderr.String())
			}
		}
	}
	first := served()
	rotated := leaf(t, ca, caKey, "127.0.0.1", true)
	write("server.pem", &pem.Block{Type: "CERTIFICATE", Bytes: rotated.Certificate[0]})
	keyDER, _ = x509.MarshalECPrivateKey(rotated.PrivateKey.(*ecdsa.PrivateKey))
	write("server.key", &pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER})
	hup("TLS certificate reloaded")
	parsed, _ := x509.ParseCertificate(rotated.Certificate[0])
	if got := served(); got.Cmp(parsed.SerialNumber) != 0 || got.Cmp(first) == 0 {
		t.Fatalf("after rotation the server presents serial %v, want %v", got, parsed.SerialNumber)
	}
	if _, err := good.Run(context.Background(), client.Request{Language: "python", Code: "return 1"}, nil, client.Handlers{}); err != nil {
		t.Fatalf("mTLS session after rotation: %v", err)
	}
	os.WriteFile(keyFile, []byte("not a key"), 0o600)
	hup("TLS certificate not reloaded")
	if got := served(); got.Cmp(parsed.SerialNumber) != 0 {
		t.Fatalf("a broken key file replaced the certificate: serial %v", got)
	}
	s.stop(t)
}

func newCA(t *testing.T, name string) (*x509.Certificate, *ecdsa.PrivateKey) {
	t.Helper()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name}, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	c, _ := x509.ParseCertificate(der)
	return c, key
}

func leaf(t *testing.T, ca *x509.Certificate, caKey *ecdsa.PrivateKey, name string, server bool) tls.Certificate {
	t.Helper()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	serial, _ := rand.Int(rand.Reader, big.NewInt(1<<62))
	tmpl := &x509.Certificate{SerialNumber: serial, Subject: pkix.Name{CommonName: name}, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature}
	if server {
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
		tmpl.IPAddresses = []net.IP{net.ParseIP(name)}
	} else {
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

// 100 concurrent sessions with callbacks on a warm pool: every one ends
// with its own value, and afterwards the daemon has no session, no run in
// flight, no container but its pool's, and about the descriptors it
// started with; the client side is back to its goroutines.
func TestConcurrentSessionsE2E(t *testing.T) {
	const n = 100
	s := startService(t, nil, "--pool", "4", "--languages", "python", "--max-runs", "4", "--queue", "200", "--wall-timeout", "300s")
	fds := func() int {
		ents, _ := os.ReadDir(fmt.Sprintf("/proc/%d/fd", s.cmd.Process.Pid))
		return len(ents)
	}
	// One run first so lazily opened descriptors are there.
	if _, err := s.client("").Run(context.Background(), client.Request{Language: "python", Code: "return 0"}, nil, client.Handlers{}); err != nil {
		t.Fatal(err)
	}
	baseFDs, baseG := fds(), runtime.NumGoroutine()
	var calls atomic.Int64
	double := client.Tool{Name: "double", OutputSchema: json.RawMessage(`{"type":"object","properties":{"n":{"type":"integer"}}}`),
		Func: func(_ context.Context, args json.RawMessage) (any, error) {
			calls.Add(1)
			var a struct{ N int }
			if err := json.Unmarshal(args, &a); err != nil {
				return nil, err
			}
			return map[string]int{"n": a.N * 2}, nil
		}}
	var wg sync.WaitGroup
	errs := make(chan error, n)
	began := time.Now()
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			code := fmt.Sprintf("a = await tools.double({\"n\": %d})\nb = await tools.double({\"n\": a[\"n\"]})\nreturn b[\"n\"]", i)
			rep, err := s.client("").Run(context.Background(), client.Request{Language: "python", Code: code}, []client.Tool{double}, client.Handlers{})
			switch {
			case err != nil:
				errs <- fmt.Errorf("session %d: %v", i, err)
			case rep.Error != nil || string(rep.Value) != fmt.Sprint(4*i):
				errs <- fmt.Errorf("session %d: %+v %s", i, rep.Error, rep.Value)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	t.Logf("%d sessions with 2 callbacks each in %v", n, time.Since(began))
	if calls.Load() != 2*n {
		t.Errorf("%d callbacks, want %d", calls.Load(), 2*n)
	}
	s.waitContainers(t, 4)
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		sess := s.metric(t, "", `dsh_container_sessions{tenant="anonymous"}`)
		inflight := s.metric(t, "", `dsh_container_runs_in_flight{language="python",tenant="anonymous"}`)
		f := fds()
		if sess == "0" && inflight == "0" && f <= baseFDs+16 && runtime.NumGoroutine() <= baseG+2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after the sessions: sessions %s, in flight %s, fds %d (before %d), client goroutines %d (before %d)", sess, inflight, f, baseFDs, runtime.NumGoroutine(), baseG)
		}
	}
	s.stop(t)
}

// --max-connections caps the daemon's open connections, authenticated or
// not: past it a new connection waits in the kernel's backlog, and is
// served once one closes. (A connection that sends nothing is closed
// after the 10 s header timeout, so the test stays within it.)
func TestServeMaxConnections(t *testing.T) {
	s := startService(t, nil, "--pool", "0", "--languages", "python", "--max-connections", "2")
	s.hc.CloseIdleConnections()
	addr := strings.TrimPrefix(s.url, "http://")
	var idle []net.Conn
	for range 2 {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		idle = append(idle, c)
	}
	time.Sleep(200 * time.Millisecond) // both accepted
	fresh := func(timeout time.Duration) (int, error) {
		hc := &http.Client{Timeout: timeout, Transport: &http.Transport{DisableKeepAlives: true}}
		resp, err := hc.Get(s.url + "/healthz")
		if err != nil {
			return 0, err
		}
		resp.Body.Close()
		return resp.StatusCode, nil
	}
	if code, err := fresh(time.Second); err == nil {
		t.Fatalf("a third connection was served (%d) with two open and --max-connections 2", code)
	}
	idle[0].Close()
	if code, err := fresh(5 * time.Second); err != nil || code != http.StatusOK {
		t.Fatalf("after one closed: %d %v", code, err)
	}
	s.stop(t)
}
