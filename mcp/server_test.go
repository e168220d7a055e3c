package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"go.uber.org/goleak"

	"github.com/dsh-container/dsh-container/backend"
	"github.com/dsh-container/dsh-container/registry"
	"github.com/dsh-container/dsh-container/registry/registrytest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

type tWriter struct{ t *testing.T }

func (w tWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSuffix(string(p), "\n"))
	return len(p), nil
}

func tLogger(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(tWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// source is a ToolSource whose tools a test changes.
type source struct {
	mu    sync.Mutex
	tools []registry.Tool
	subs  []func()
}

func (s *source) Tools() []registry.Tool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.tools)
}

func (s *source) Subscribe(fn func()) func() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.subs = append(s.subs, fn)
	return func() {}
}

func (s *source) set(tools ...registry.Tool) {
	s.mu.Lock()
	s.tools = tools
	subs := slices.Clone(s.subs)
	s.mu.Unlock()
	for _, fn := range subs {
		fn()
	}
}

func textTool(name, text string) registry.Tool {
	return registry.Tool{Name: name, Description: "Says " + text + ".", Parameters: json.RawMessage(`{"type":"object","properties":{"x":{"type":"string"}}}`),
		Execute: func(_ context.Context, exec registry.Execution) ([]registry.Block, error) {
			return []registry.Block{registry.TextBlock(text + " " + string(exec.Arguments))}, nil
		}}
}

func typedTool() registry.Tool {
	return registry.Tool{Name: "count", Description: "Counts.", Parameters: json.RawMessage(`{"properties":{"text":{"type":"string"}}}`),
		OutputSchema: json.RawMessage(`{"type":"object","properties":{"n":{"type":"integer"}},"required":["n"]}`),
		Annotations:  json.RawMessage(`{"readOnlyHint":true}`),
		ExecuteOutput: func(_ context.Context, exec registry.Execution) (registry.Output, error) {
			return registry.Output{Content: []registry.Block{registry.TextBlock(`{"n":3}`), registry.ImageBlock("image/png", []byte("png"))}, Structured: json.RawMessage(`{"n":3}`)}, nil
		}}
}

func failingTool() registry.Tool {
	return registry.Tool{Name: "broken", Execute: func(context.Context, registry.Execution) ([]registry.Block, error) {
		return nil, errors.New("it broke")
	}}
}

// harness is a Server with a client session over in-memory transports.
type harness struct {
	srv     *Server
	rt      *registrytest.Runtime
	cs      *sdk.ClientSession
	changed chan struct{}

	mu       sync.Mutex
	progress []string
}

func (h *harness) progressMessages() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.progress)
}

func newHarness(t *testing.T, lang backend.Language, opts ...Option) *harness {
	t.Helper()
	h := &harness{rt: registrytest.New(lang), changed: make(chan struct{}, 16)}
	srv, err := New(append([]Option{WithRuntime(h.rt), WithLogger(tLogger(t))}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	h.srv = srv
	st, ct := sdk.NewInMemoryTransports()
	ss, err := srv.MCPServer().Connect(t.Context(), st, nil)
	if err != nil {
		t.Fatal(err)
	}
	client := sdk.NewClient(&sdk.Implementation{Name: "test"}, &sdk.ClientOptions{
		ProgressNotificationHandler: func(_ context.Context, req *sdk.ProgressNotificationClientRequest) {
			h.mu.Lock()
			h.progress = append(h.progress, req.Params.Message)
			h.mu.Unlock()
		},
		ToolListChangedHandler: func(context.Context, *sdk.ToolListChangedRequest) { h.changed <- struct{}{} },
	})
	cs, err := client.Connect(t.Context(), ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	h.cs = cs
	t.Cleanup(func() {
		cs.Close()
		ss.Wait()
		srv.Close()
		h.rt.Close(context.Background())
	})
	return h
}

func (h *harness) list(t *testing.T) []*sdk.Tool {
	t.Helper()
	res, err := h.cs.ListTools(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	return res.Tools
}

func names(tools []*sdk.Tool) string {
	var n []string
	for _, t := range tools {
		n = append(n, t.Name)
	}
	return strings.Join(n, " ")
}

func runCode(t *testing.T, cs *sdk.ClientSession, ctx context.Context, code string, token any) (*sdk.CallToolResult, error) {
	t.Helper()
	p := &sdk.CallToolParams{Name: "run_code", Arguments: map[string]any{"code": code}}
	if token != nil {
		p.SetProgressToken(token)
	}
	return cs.CallTool(ctx, p)
}

func text(res *sdk.CallToolResult) string {
	var parts []string
	for _, c := range res.Content {
		if tc, ok := c.(*sdk.TextContent); ok {
			parts = append(parts, tc.Text)
		} else {
			parts = append(parts, fmt.Sprintf("<%T>", c))
		}
	}
	return strings.Join(parts, "|")
}

func structured(t *testing.T, res *sdk.CallToolResult) string {
	t.Helper()
	b, err := json.Marshal(res.StructuredContent)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// tools/list in each mode: run_code (input {code: string}, the SDK of the
// chosen language in its description, its output schema), the tools
// natively with their schemas and annotations, or both.
func TestToolsListModes(t *testing.T) {
	tools := []Option{WithTools(textTool("hello", "hi"), typedTool())}
	for _, c := range []struct {
		mode registry.Mode
		lang backend.Language
		want string
	}{
		{registry.ModeCode, backend.TypeScript, "run_code"},
		{registry.ModeCode, backend.Python, "run_code"},
		{registry.ModeBoth, backend.Python, "count hello run_code"},
		{registry.ModeNative, backend.TypeScript, "count hello"},
	} {
		h := newHarness(t, c.lang, append(tools, WithMode(c.mode))...)
		list := h.list(t)
		if got := names(list); got != c.want {
			t.Errorf("%s: tools/list = %s, want %s", c.mode, got, c.want)
		}
		for _, tool := range list {
			switch tool.Name {
			case "run_code":
				in, _ := json.Marshal(tool.InputSchema)
				if !strings.Contains(string(in), `"code":{"description"`) || !strings.Contains(string(in), `"required":["code"]`) {
					t.Errorf("run_code input schema = %s", in)
				}
				sdkText := map[backend.Language]string{backend.TypeScript: "\"count\": (args: {", backend.Python: "async def count(self, args: CountArgs) -> CountOutput:"}[c.lang]
				if !strings.Contains(tool.Description, sdkText) || !strings.Contains(tool.Description, "Run a "+map[backend.Language]string{backend.TypeScript: "TypeScript", backend.Python: "Python"}[c.lang]+" program") {
					t.Errorf("%s/%s: run_code description lacks the SDK:\n%s", c.mode, c.lang, tool.Description)
				}
				if tool.OutputSchema == nil {
					t.Error("run_code declares no output schema")
				}
			case "count":
				in, _ := json.Marshal(tool.InputSchema)
				out, _ := json.Marshal(tool.OutputSchema)
				if string(in) != `{"properties":{"text":{"type":"string"}},"type":"object"}` || !strings.Contains(string(out), `"required":["n"]`) || tool.Annotations == nil || !tool.Annotations.ReadOnlyHint {
					t.Errorf("count = %s %s %+v", in, out, tool.Annotations)
				}
			}
		}
	}
}

// A program's result: the text the registry renders (logs, then the
// value) and structuredContent {value, logs, error}; sub-calls go through
// the registry to the tools, structured results included.
func TestRunCodeResult(t *testing.T) {
	h := newHarness(t, backend.TypeScript, WithTools(textTool("hello", "hi"), typedTool()))
	h.rt.Handle("ok", func(ctx context.Context, env *registrytest.Env) (any, error) {
		greeting, err := env.CallText("hello", `{"x":"1"}`)
		if err != nil {
			return nil, err
		}
		env.Log(greeting)
		n, err := env.Call("count", nil)
		if err != nil {
			return nil, err
		}
		return map[string]json.RawMessage{"n": n}, nil
	})
	res, err := runCode(t, h.cs, t.Context(), "ok", nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.IsError || text(res) != "hi {\"x\":\"1\"}\n{\"n\":{\"n\":3}}" {
		t.Errorf("result = %v %q", res.IsError, text(res))
	}
	if got := structured(t, res); got != `{"error":null,"logs":[{"level":"log","source":"console","text":"hi {\"x\":\"1\"}"}],"value":{"n":{"n":3}}}` {
		t.Errorf("structuredContent = %s", got)
	}

	h.rt.Handle("throws", func(ctx context.Context, env *registrytest.Env) (any, error) {
		env.Log("before")
		return nil, errors.New("boom")
	})
	res, err = runCode(t, h.cs, t.Context(), "throws", nil)
	if err != nil {
		t.Fatal(err)
	}
	if !res.IsError || text(res) != "before\ncode run failed (exception): boom" {
		t.Errorf("failed program = %v %q", res.IsError, text(res))
	}
	if got := structured(t, res); got != `{"error":{"kind":"exception","message":"boom"},"logs":[{"level":"log","source":"console","text":"before"}],"value":null}` {
		t.Errorf("structuredContent = %s", got)
	}

	// A run that cannot start: an error result with the reason.
	h.rt.Close(context.Background())
	res, err = runCode(t, h.cs, t.Context(), "ok", nil)
	if err != nil || !res.IsError || !strings.Contains(text(res), "runtime is closed") || res.StructuredContent != nil {
		t.Errorf("closed runtime: %v %+v", err, res)
	}
}

// Native calls return the tool's content, structured content and errors.
func TestNativeCalls(t *testing.T) {
	h := newHarness(t, backend.TypeScript, WithMode(registry.ModeBoth), WithTools(textTool("hello", "hi"), typedTool(), failingTool()))
	res, err := h.cs.CallTool(t.Context(), &sdk.CallToolParams{Name: "count", Arguments: map[string]any{"text": "a b c"}})
	if err != nil {
		t.Fatal(err)
	}
	if res.IsError || text(res) != `{"n":3}|<*mcp.ImageContent>` || structured(t, res) != `{"n":3}` {
		t.Errorf("count = %v %q %s", res.IsError, text(res), structured(t, res))
	}
	res, err = h.cs.CallTool(t.Context(), &sdk.CallToolParams{Name: "broken"})
	if err != nil || !res.IsError || text(res) != "it broke" {
		t.Errorf("broken = %v %+v", err, res)
	}
}

// With a progress token, the program's log entries arrive as progress
// notifications, in order, before the result; without one, none do.
func TestRunCodeProgress(t *testing.T) {
	h := newHarness(t, backend.Python)
	h.rt.Handle("logs", func(ctx context.Context, env *registrytest.Env) (any, error) {
		for i := range 5 {
			env.Log(fmt.Sprintf("line %d\n", i))
		}
		return nil, nil
	})
	res, err := runCode(t, h.cs, t.Context(), "logs", "tok-1")
	if err != nil || res.IsError {
		t.Fatalf("%v %+v", err, res)
	}
	// Notifications and the result travel in order on one stream, but the
	// client hands notifications to its handler asynchronously.
	want := []string{"line 0", "line 1", "line 2", "line 3", "line 4"}
	for deadline := time.Now().Add(5 * time.Second); !slices.Equal(h.progressMessages(), want); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("progress = %q, want %q", h.progressMessages(), want)
		}
	}
	if _, err := runCode(t, h.cs, t.Context(), "logs", nil); err != nil {
		t.Fatal(err)
	}
	time.Sleep(50 * time.Millisecond)
	if got := h.progressMessages(); len(got) != len(want) {
		t.Errorf("a call without a progress token streamed: %q", got[len(want):])
	}
}

// A flood of log entries never waits for the client: past the queue the
// stream drops entries and says so once; the result has them all.
func TestRunCodeProgressIsBounded(t *testing.T) {
	h := newHarness(t, backend.TypeScript)
	const n = 20000
	h.rt.Handle("flood", func(ctx context.Context, env *registrytest.Env) (any, error) {
		for i := range n {
			env.Log(fmt.Sprintf("entry %d", i))
		}
		return "done", nil
	})
	start := time.Now()
	res, err := runCode(t, h.cs, t.Context(), "flood", 7)
	if err != nil || res.IsError {
		t.Fatalf("%v %+v", err, res)
	}
	var out registry.RunCodeOutput
	b, _ := json.Marshal(res.StructuredContent)
	json.Unmarshal(b, &out)
	if len(out.Logs) != n {
		t.Errorf("the result has %d log entries, want %d", len(out.Logs), n)
	}
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		msgs := h.progressMessages()
		if len(msgs) > 0 && strings.Contains(msgs[len(msgs)-1], "log entries not streamed") {
			t.Logf("%d notifications for %d entries in %v; last: %s", len(msgs), n, time.Since(start), msgs[len(msgs)-1])
			if len(msgs) > n || msgs[0] != "entry 0" {
				t.Errorf("notifications: %d, first %q", len(msgs), msgs[0])
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no drop notice; %d notifications", len(msgs))
		}
	}
}

// Cancelling the call cancels the run: the program sees its context end
// and the run ends as an abort.
func TestRunCodeCancellation(t *testing.T) {
	h := newHarness(t, backend.TypeScript)
	started, ended := make(chan struct{}), make(chan error, 1)
	h.rt.Handle("hang", func(ctx context.Context, env *registrytest.Env) (any, error) {
		close(started)
		<-ctx.Done()
		ended <- context.Cause(ctx)
		return nil, ctx.Err()
	})
	ctx, cancel := context.WithCancel(t.Context())
	errc := make(chan error, 1)
	go func() {
		_, err := runCode(t, h.cs, ctx, "hang", nil)
		errc <- err
	}()
	<-started
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Errorf("call error = %v", err)
	}
	select {
	case cause := <-ended:
		t.Logf("the run ended: %v", cause)
	case <-time.After(5 * time.Second):
		t.Fatal("the run did not end after the call was cancelled")
	}
}

// Close aborts calls in flight.
func TestCloseAbortsRuns(t *testing.T) {
	h := newHarness(t, backend.TypeScript)
	started := make(chan struct{})
	h.rt.Handle("hang", func(ctx context.Context, env *registrytest.Env) (any, error) {
		close(started)
		<-ctx.Done()
		return nil, ctx.Err()
	})
	resc := make(chan *sdk.CallToolResult, 1)
	go func() {
		res, _ := runCode(t, h.cs, t.Context(), "hang", nil)
		resc <- res
	}()
	<-started
	h.srv.Close()
	select {
	case res := <-resc:
		if res == nil || !res.IsError || !strings.Contains(text(res), "code run failed (abort)") {
			t.Errorf("result = %+v", res)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Close did not abort the run")
	}
}

// When the tool source changes, clients get tools/list_changed and the
// new list: run_code's SDK in code mode, the tools themselves in both.
func TestToolListChanged(t *testing.T) {
	for _, mode := range []registry.Mode{registry.ModeCode, registry.ModeBoth} {
		src := &source{tools: []registry.Tool{textTool("a", "A")}}
		h := newHarness(t, backend.TypeScript, WithMode(mode), WithToolSource(src))
		h.list(t)
		src.set(textTool("a", "A"), textTool("b", "B"))
		select {
		case <-h.changed:
		case <-time.After(5 * time.Second):
			t.Fatalf("%s: no tools/list_changed", mode)
		}
		list := h.list(t)
		var desc string
		for _, tool := range list {
			if tool.Name == "run_code" {
				desc = tool.Description
			}
		}
		if !strings.Contains(desc, `"b": (args:`) {
			t.Errorf("%s: run_code's SDK lacks the new tool", mode)
		}
		if mode == registry.ModeBoth && names(list) != "a b run_code" {
			t.Errorf("both: %s", names(list))
		}
		// A tool that goes is removed.
		src.set(textTool("b", "B"))
		select {
		case <-h.changed:
		case <-time.After(5 * time.Second):
			t.Fatalf("%s: no tools/list_changed after a removal", mode)
		}
		if mode == registry.ModeBoth && names(h.list(t)) != "b run_code" {
			t.Errorf("both after removal: %s", names(h.list(t)))
		}
	}
}

// New refuses code mode without a runtime, an unknown mode and a bad tool;
// native mode needs no runtime.
func TestNewErrors(t *testing.T) {
	if _, err := New(); err == nil || !strings.Contains(err.Error(), "needs a code runtime") {
		t.Errorf("no runtime: %v", err)
	}
	if _, err := New(WithMode("fancy"), WithRuntime(registrytest.New(backend.TypeScript))); err == nil {
		t.Error("unknown mode accepted")
	}
	if _, err := New(WithMode(registry.ModeNative), WithTools(registry.Tool{Name: "run_code"})); err == nil {
		t.Error("a tool named run_code accepted")
	}
	s, err := New(WithMode(registry.ModeNative), WithTools(textTool("a", "A")))
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
}

// Over streamable HTTP: tools/list, a run with progress, cancellation by
// the client, and the session bound.
func TestHTTP(t *testing.T) {
	rt := registrytest.New(backend.Python)
	srv, err := New(WithRuntime(rt), WithLogger(tLogger(t)), WithMaxSessions(1), WithTools(textTool("hello", "hi")))
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv.Handler())
	t.Cleanup(func() {
		ts.Close()
		srv.Close()
		rt.Close(context.Background())
	})
	var progress atomic.Int32
	client := sdk.NewClient(&sdk.Implementation{Name: "test"}, &sdk.ClientOptions{
		ProgressNotificationHandler: func(context.Context, *sdk.ProgressNotificationClientRequest) { progress.Add(1) },
	})
	// The legacy protocol keeps a session open, which the bound counts.
	cs, err := client.Connect(t.Context(), &sdk.StreamableClientTransport{Endpoint: ts.URL, MaxRetries: -1}, &sdk.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	rt.Handle("hello", func(ctx context.Context, env *registrytest.Env) (any, error) {
		v, err := env.CallText("hello", `{}`)
		env.Log(v)
		return v, err
	})
	res, err := runCode(t, cs, t.Context(), "hello", "p")
	if err != nil || res.IsError || text(res) != "hi {}\nhi {}" {
		t.Fatalf("%v %+v", err, res)
	}
	for deadline := time.Now().Add(5 * time.Second); progress.Load() != 1; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("progress notifications: %d", progress.Load())
		}
	}
	// One session is the bound: a second client is refused.
	_, err = sdk.NewClient(&sdk.Implementation{Name: "second"}, nil).Connect(t.Context(), &sdk.StreamableClientTransport{Endpoint: ts.URL, MaxRetries: -1}, &sdk.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err == nil || !strings.Contains(err.Error(), "Service Unavailable") {
		t.Errorf("a second session: %v", err)
	}
	cs.Close()
	// The server ends the session when its DELETE has been handled and
	// the session's stream has closed, after Close returns.
	for deadline := time.Now().Add(5 * time.Second); srv.sessions() != 0; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d sessions left after Close", srv.sessions())
		}
	}

	// The current protocol, stateless over HTTP: a run, and the client
	// going away cancels its run. Each stateless request holds a session
	// while in flight, and the client's requests may overlap (a
	// notification beside a call), so this part gets a server of its own
	// without the bound of one.
	srv2, err := New(WithRuntime(rt), WithLogger(tLogger(t)), WithTools(textTool("hello", "hi")))
	if err != nil {
		t.Fatal(err)
	}
	ts2 := httptest.NewServer(srv2.Handler())
	t.Cleanup(func() {
		ts2.Close()
		srv2.Close()
	})
	cs, err = client.Connect(t.Context(), &sdk.StreamableClientTransport{Endpoint: ts2.URL, MaxRetries: -1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	t.Logf("protocol %s", cs.InitializeResult().ProtocolVersion)
	if res, err := runCode(t, cs, t.Context(), "hello", nil); err != nil || res.IsError || text(res) != "hi {}\nhi {}" {
		t.Fatalf("%v %+v", err, res)
	}
	started, ended := make(chan struct{}), make(chan struct{})
	rt.Handle("hang", func(ctx context.Context, env *registrytest.Env) (any, error) {
		close(started)
		<-ctx.Done()
		close(ended)
		return nil, ctx.Err()
	})
	ctx, cancel := context.WithCancel(t.Context())
	go func() {
		<-started
		cancel()
	}()
	if _, err := runCode(t, cs, ctx, "hang", nil); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled call: %v", err)
	}
	select {
	case <-ended:
	case <-time.After(5 * time.Second):
		t.Fatal("the run did not end when the client cancelled")
	}
	// A body past MaxRequestBytes is refused, as a request the SDK would
	// otherwise read (the headers a client sends).
	req, err := http.NewRequest(http.MethodPost, ts2.URL, strings.NewReader(strings.Repeat(" ", MaxRequestBytes+1)))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	if err == nil {
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusRequestEntityTooLarge {
			t.Errorf("oversize body: %s %s", resp.Status, body)
		}
	} else {
		t.Errorf("oversize body: %v", err)
	}
}

// With the index, tools/list offers run_code (the index in its
// description) and describe_tools, which returns the declarations of the
// tools named, exactly as the full SDK declares them; auto picks the index
// past its threshold; a program still sees only the tools.
func TestSDKIndexAndDescribeTools(t *testing.T) {
	tools := WithTools(textTool("hello", "hi"), typedTool())
	for _, lang := range []backend.Language{backend.TypeScript, backend.Python} {
		for _, c := range []struct {
			opts  []Option
			index bool
			want  string
		}{
			{[]Option{WithSDK(registry.SDKIndex)}, true, "describe_tools run_code"},
			{[]Option{WithSDK(registry.SDKIndex), WithMode(registry.ModeBoth)}, true, "count describe_tools hello run_code"},
			{[]Option{WithSDK(registry.SDKAuto)}, false, "run_code"},
			{[]Option{WithSDK(registry.SDKAuto), WithSDKAutoThreshold(100)}, true, "describe_tools run_code"},
			{nil, false, "run_code"},
		} {
			h := newHarness(t, lang, append([]Option{tools}, c.opts...)...)
			list := h.list(t)
			if got := names(list); got != c.want {
				t.Fatalf("%s: tools/list = %s, want %s", lang, got, c.want)
			}
			for _, tool := range list {
				if tool.Name == "run_code" && strings.Contains(tool.Description, `tools["count"]({text?}) — Counts.`) != c.index {
					t.Errorf("%s %v: run_code description (index %v):\n%s", lang, c.opts, c.index, tool.Description)
				}
				if tool.Name == "count" && !strings.Contains(fmt.Sprint(tool.InputSchema), "text") {
					t.Errorf("both mode: count lost its schema: %v", tool.InputSchema)
				}
			}
			if !c.index {
				continue
			}
			res, err := h.cs.CallTool(t.Context(), &sdk.CallToolParams{Name: "describe_tools", Arguments: map[string]any{"names": []string{"count"}}})
			if err != nil || res.IsError {
				t.Fatalf("describe_tools: %v %s", err, text(res))
			}
			want := map[backend.Language]string{
				backend.TypeScript: "declare const tools: {\n  /** Counts. */\n  \"count\": (args: {\n    text?: string;\n  }) => Promise<{\n    n: number;\n  }>;\n};\n",
				backend.Python:     "class CountArgs(TypedDict):\n    text: NotRequired[str]\n\nclass CountOutput(TypedDict):\n    n: int\n\nclass Tools:\n    async def count(self, args: CountArgs) -> CountOutput:\n        \"\"\"Counts.\"\"\"\n        ...\n\ntools: Tools\n",
			}[lang]
			if got := text(res); !strings.HasSuffix(got, want) {
				t.Errorf("%s: describe_tools returned:\n%s", lang, got)
			}
			res, err = h.cs.CallTool(t.Context(), &sdk.CallToolParams{Name: "describe_tools", Arguments: map[string]any{"names": []string{"nope"}}})
			if err != nil || !res.IsError || !strings.Contains(text(res), `no tool named "nope"`) {
				t.Errorf("describe_tools(nope): %v %s", err, text(res))
			}
		}
	}
	if _, err := New(WithRuntime(registrytest.New(backend.TypeScript)), WithSDK("most")); err == nil || !strings.Contains(err.Error(), "full, index, auto") {
		t.Errorf("New(WithSDK(most)) = %v", err)
	}
}
