package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"go.uber.org/goleak"

	"github.com/dsh-container/dsh-container/backend"
	"github.com/dsh-container/dsh-container/client"
	"github.com/dsh-container/dsh-container/registry"
	"github.com/dsh-container/dsh-container/registry/registrytest"
	"github.com/dsh-container/dsh-container/server"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// newDaemon serves the in-memory runtime (the logic of the client; the
// e2e tests run it against containers).
func newDaemon(t *testing.T, opts ...server.Option) *httptest.Server { return newDaemonB(t, opts...) }

func newDaemonB(t testing.TB, opts ...server.Option) *httptest.Server {
	t.Helper()
	return newDaemonWith(t, registrytest.New(backend.Python), opts...)
}

// newDaemonWith serves py (closed at cleanup) and opts.
func newDaemonWith(t testing.TB, py backend.Runtime, opts ...server.Option) *httptest.Server {
	t.Helper()
	srv, err := server.New(append([]server.Option{server.WithRuntime(py)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv)
	t.Cleanup(func() {
		ts.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := srv.Shutdown(ctx); err != nil {
			t.Errorf("sessions left open: %v", err)
		}
		py.Close(context.Background())
	})
	return ts
}

var greet = client.Tool{
	Name:        "greet",
	Description: "Greet someone.",
	InputSchema: json.RawMessage(`{"type":"object","properties":{"name":{"type":"string"}}}`),
	Func: func(_ context.Context, args json.RawMessage) (any, error) {
		var a struct{ Name string }
		if err := json.Unmarshal(args, &a); err != nil {
			return nil, err
		}
		if a.Name == "" {
			return nil, errors.New("name is required")
		}
		return "hello " + a.Name, nil
	},
}

func TestRunWithTools(t *testing.T) {
	ts := newDaemon(t)
	c := &client.Client{URL: ts.URL}
	var (
		logs     []string
		events   int
		accepted string
	)
	rep, err := c.Run(context.Background(), client.Request{Language: "python", ID: "r1", Code: "log first\ncall greet {\"name\":\"Ada\"}\ntry greet {}\nreturn 3"}, []client.Tool{greet}, client.Handlers{
		Accepted: func(id string) { accepted = id },
		Log:      func(e client.LogEntry) { logs = append(logs, e.Text) },
		Event:    func(json.RawMessage) { events++ },
	})
	if err != nil {
		t.Fatal(err)
	}
	if accepted != "r1" || rep.ID != "r1" || rep.Error != nil || string(rep.Value) != "3" || rep.Stats.Calls != 2 {
		t.Fatalf("accepted %q, report %+v", accepted, rep)
	}
	want := []string{"first", "hello Ada", "error: name is required"}
	if fmt.Sprint(logs) != fmt.Sprint(want) || events != 2 || len(rep.Events) != 2 {
		t.Fatalf("logs %q (want %q), %d events", logs, want, events)
	}
}

// A run refused with 429 is retried after the daemon's Retry-After; with
// retries off the refusal is returned.
func TestRetry429(t *testing.T) {
	ts := newDaemon(t, server.WithAdmission(1, 0))
	release := make(chan struct{})
	entered := make(chan struct{})
	block := client.Tool{Name: "block", Func: func(ctx context.Context, _ json.RawMessage) (any, error) {
		close(entered)
		select {
		case <-release:
			return 1, nil
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}}
	first := make(chan error, 1)
	go func() {
		_, err := (&client.Client{URL: ts.URL}).Run(context.Background(), client.Request{Language: "python", Code: "call block {}\nreturn 1"}, []client.Tool{block}, client.Handlers{})
		first <- err
	}()
	<-entered
	_, err := (&client.Client{URL: ts.URL, MaxRetries: -1}).Run(context.Background(), client.Request{Language: "python", Code: "return 2"}, nil, client.Handlers{})
	var rf *client.RefusedError
	if !errors.As(err, &rf) || rf.Status != http.StatusTooManyRequests || rf.RetryAfter < time.Second {
		t.Fatalf("with the daemon full: %v", err)
	}
	time.AfterFunc(300*time.Millisecond, func() { close(release) })
	began := time.Now()
	rep, err := (&client.Client{URL: ts.URL}).Run(context.Background(), client.Request{Language: "python", Code: "return 2"}, nil, client.Handlers{})
	if err != nil || string(rep.Value) != "2" {
		t.Fatalf("retried run: %v %+v", err, rep)
	}
	if d := time.Since(began); d < time.Second {
		t.Fatalf("the retry came after %v, before the daemon's Retry-After of 1s", d)
	}
	if err := <-first; err != nil {
		t.Fatal(err)
	}
}

// A connection lost after accepted is never retried.
func TestNeverRetriedAfterAccepted(t *testing.T) {
	var dials atomic.Int32
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		dials.Add(1)
		conn, err := (&websocket.Upgrader{}).Upgrade(w, r, nil)
		if err != nil {
			return
		}
		defer conn.Close()
		conn.ReadMessage() // start
		conn.WriteMessage(websocket.TextMessage, []byte(`{"type":"accepted","id":"x"}`))
	}))
	defer ts.Close()
	_, err := (&client.Client{URL: ts.URL, MaxRetries: 5}).Run(context.Background(), client.Request{Language: "python", Code: "return 1"}, nil, client.Handlers{})
	if !errors.Is(err, client.ErrConnectionLost) || dials.Load() != 1 {
		t.Fatalf("err %v after %d dials", err, dials.Load())
	}
}

// Cancelling ctx aborts the run: the daemon's report says abort.
func TestAbortThroughContext(t *testing.T) {
	ts := newDaemon(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	wait := client.Tool{Name: "wait", Func: func(tctx context.Context, _ json.RawMessage) (any, error) {
		cancel()
		<-tctx.Done()
		return nil, tctx.Err()
	}}
	rep, err := (&client.Client{URL: ts.URL}).Run(ctx, client.Request{Language: "python", Code: "call wait {}\nreturn 1"}, []client.Tool{wait}, client.Handlers{})
	if !errors.Is(err, context.Canceled) || rep == nil || rep.Error == nil || rep.Error.Kind != string(backend.FailureAbort) {
		t.Fatalf("err %v, report %+v", err, rep)
	}
}

// Refusals come back as *RefusedError with the daemon's status.
func TestRefused(t *testing.T) {
	ts := newDaemon(t, server.WithTools(registrytestEcho()))
	c := &client.Client{URL: ts.URL}
	for _, tc := range []struct {
		req    client.Request
		tools  []client.Tool
		status int
		want   string
	}{
		{client.Request{Language: "cobol", Code: "return 1"}, nil, 400, "cobol"},
		{client.Request{Language: "python", Code: "return 1", Limits: &client.Limits{Pids: 1 << 40}}, nil, 400, "limits"},
		{client.Request{Language: "python", Code: "return 1"}, []client.Tool{{Name: "echo", Func: greet.Func}}, 400, `"echo"`},
		{client.Request{Language: "python", Code: "return 1"}, []client.Tool{{Name: "bad", InputSchema: json.RawMessage(`{"type":"thing"}`), Func: greet.Func}}, 400, "inputSchema"},
	} {
		_, err := c.Run(context.Background(), tc.req, tc.tools, client.Handlers{})
		var rf *client.RefusedError
		if !errors.As(err, &rf) || rf.Status != tc.status || !strings.Contains(rf.Message, tc.want) {
			t.Errorf("%+v: %v", tc.req, err)
		}
	}
	tok := newDaemon(t, server.WithAuth(server.NewAuth(nil)))
	_, err := (&client.Client{URL: tok.URL, Token: "nope"}).Run(context.Background(), client.Request{Language: "python", Code: "return 1"}, nil, client.Handlers{})
	var rf *client.RefusedError
	if !errors.As(err, &rf) || rf.Status != http.StatusUnauthorized {
		t.Fatalf("wrong token: %v", err)
	}
}

func registrytestEcho() registry.Tool {
	return registry.Tool{
		Name:       "echo",
		Parameters: json.RawMessage(`{"type":"object"}`),
		Execute: func(_ context.Context, exec registry.Execution) ([]registry.Block, error) {
			return []registry.Block{registry.TextBlock(string(exec.Arguments))}, nil
		},
	}
}

// TestVectors replays the daemon-to-client vectors of the protocol.
func TestVectors(t *testing.T) {
	data, err := os.ReadFile("../server/testdata/session/vectors.json")
	if err != nil {
		t.Fatal(err)
	}
	var file struct {
		Protocol int `json:"protocol"`
		Vectors  []struct {
			Name, Direction, Frame, Code string
			Valid                        bool
		} `json:"vectors"`
	}
	if err := json.Unmarshal(data, &file); err != nil {
		t.Fatal(err)
	}
	if file.Protocol != client.Protocol {
		t.Fatalf("vectors of protocol %d, client speaks %d", file.Protocol, client.Protocol)
	}
	n := 0
	for _, v := range file.Vectors {
		if v.Direction != "daemon-to-client" {
			continue
		}
		n++
		err := client.DecodeFrameForTest([]byte(v.Frame))
		var fe *client.FrameError
		switch {
		case v.Valid && err != nil:
			t.Errorf("%s: rejected: %v", v.Name, err)
		case !v.Valid && !errors.As(err, &fe):
			t.Errorf("%s: accepted an invalid frame", v.Name)
		case !v.Valid && fe.Code != v.Code:
			t.Errorf("%s: code %q, want %q", v.Name, fe.Code, v.Code)
		}
	}
	if n < 20 {
		t.Fatalf("only %d daemon-to-client vectors", n)
	}
}
