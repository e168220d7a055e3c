package manifest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/containerd/errdefs"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/dsh-container/dsh-container/registry"
)

// helperEnv, when set, makes this test binary an MCP server over stdio
// (TestHelperMCPServer), the way os/exec's tests run helper processes.
const helperEnv = "DSH_MANIFEST_MCP_HELPER"

// TestHelperMCPServer is not a test: run with helperEnv set, it serves
// testServer over stdin/stdout until its input ends, then exits.
func TestHelperMCPServer(t *testing.T) {
	mode := os.Getenv(helperEnv)
	if mode == "" {
		return
	}
	switch mode {
	case "fail-at-start":
		fmt.Fprintln(os.Stderr, "helper: cannot open the database: permission denied")
		os.Exit(4)
	case "silent":
		time.Sleep(time.Hour) // never answers initialize
	case "sleeper":
		// A process that leaves its group and session and ignores the
		// signals a stop sends (see TestUpstreamTreeDiesWithItsHost).
		signal.Ignore(syscall.SIGHUP, syscall.SIGTERM, syscall.SIGINT)
		time.Sleep(time.Hour)
	case "hostile":
		fmt.Fprintln(os.Stderr, "helper: serving on stdio")
		if err := hostileServer().Run(context.Background(), &mcp.StdioTransport{}); err != nil {
			fmt.Fprintln(os.Stderr, "helper:", err)
		}
		os.Exit(0)
	}
	fmt.Fprintln(os.Stderr, "helper: serving on stdio")
	if err := testServer("stdio").Run(context.Background(), &mcp.StdioTransport{}); err != nil {
		fmt.Fprintln(os.Stderr, "helper:", err)
	}
	os.Exit(0)
}

// hostPid is the pid, as the host sees it, of this process's child whose
// pid here is pid: a server runs in a PID namespace of its own, and /proc
// is the host's.
func hostPid(pid int) int {
	tasks, _ := filepath.Glob("/proc/self/task/*/children")
	for _, f := range tasks {
		b, _ := os.ReadFile(f)
		for _, c := range strings.Fields(string(b)) {
			status, _ := os.ReadFile("/proc/" + c + "/status")
			for _, line := range strings.Split(string(status), "\n") {
				if f := strings.Fields(strings.TrimPrefix(line, "NSpid:")); strings.HasPrefix(line, "NSpid:") && f[len(f)-1] == strconv.Itoa(pid) {
					n, _ := strconv.Atoi(c)
					return n
				}
			}
		}
	}
	return pid // no namespace: the same pid
}

type echoIn struct {
	Text string `json:"text" jsonschema:"the text to echo"`
}

type addIn struct {
	A int `json:"a"`
	B int `json:"b"`
}

type addOut struct {
	Sum int `json:"sum"`
}

// testServer is the upstream the tests talk to, over stdio (a helper
// process) or HTTP (in this process).
func testServer(name string) *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "test-" + name, Version: "1"}, nil)
	mcp.AddTool(s, &mcp.Tool{Name: "echo", Description: "Echo the text.", Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true, Title: "Echo"}},
		func(_ context.Context, _ *mcp.CallToolRequest, in echoIn) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: name + " echo: " + in.Text}}}, nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "add", Description: "Add two numbers."},
		func(_ context.Context, _ *mcp.CallToolRequest, in addIn) (*mcp.CallToolResult, addOut, error) {
			return nil, addOut{Sum: in.A + in.B}, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "fail", Description: "Always fails."},
		func(context.Context, *mcp.CallToolRequest, any) (*mcp.CallToolResult, any, error) {
			return nil, nil, errors.New("it failed on purpose")
		})
	mcp.AddTool(s, &mcp.Tool{Name: "picture", Description: "An image and a text."},
		func(context.Context, *mcp.CallToolRequest, any) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{
				&mcp.TextContent{Text: "caption"},
				&mcp.ImageContent{MIMEType: "image/png", Data: []byte("12345")},
			}}, nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "sleep", Description: "Sleep for ms milliseconds."},
		func(ctx context.Context, _ *mcp.CallToolRequest, in struct {
			Ms int `json:"ms"`
		}) (*mcp.CallToolResult, any, error) {
			select {
			case <-time.After(time.Duration(in.Ms) * time.Millisecond):
				return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "slept"}}}, nil, nil
			case <-ctx.Done():
				return nil, nil, ctx.Err()
			}
		})
	mcp.AddTool(s, &mcp.Tool{Name: "grow", Description: "Adds a tool named added."},
		func(context.Context, *mcp.CallToolRequest, any) (*mcp.CallToolResult, any, error) {
			mcp.AddTool(s, &mcp.Tool{Name: "added", Description: "Added at run time."},
				func(context.Context, *mcp.CallToolRequest, any) (*mcp.CallToolResult, any, error) {
					return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "I am new"}}}, nil, nil
				})
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "grown"}}}, nil, nil
		})
	if name == "stdio" {
		mcp.AddTool(s, &mcp.Tool{Name: "crash", Description: "Exits the server mid-call."},
			func(context.Context, *mcp.CallToolRequest, any) (*mcp.CallToolResult, any, error) {
				fmt.Fprintln(os.Stderr, "helper: crashing now")
				os.Exit(3)
				return nil, nil, nil
			})
		mcp.AddTool(s, &mcp.Tool{Name: "spawn", Description: "Starts a background process in its group and returns its pid (the host's)."},
			func(context.Context, *mcp.CallToolRequest, any) (*mcp.CallToolResult, any, error) {
				cmd := exec.Command("sleep", "307")
				if err := cmd.Start(); err != nil {
					return nil, nil, err
				}
				return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: strconv.Itoa(hostPid(cmd.Process.Pid))}}}, nil, nil
			})
		mcp.AddTool(s, &mcp.Tool{Name: "shout", Description: "Floods stderr."},
			func(_ context.Context, _ *mcp.CallToolRequest, in struct {
				Bytes int `json:"bytes"`
			}) (*mcp.CallToolResult, any, error) {
				line := strings.Repeat("x", 99) + "\n"
				for range in.Bytes / len(line) {
					os.Stderr.WriteString(line)
				}
				return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "done"}}}, nil, nil
			})
	}
	return s
}

// stdioServer is a manifest entry for the helper process in mode.
func stdioServer(mode string) MCPServer {
	return MCPServer{Type: TransportStdio, Command: os.Args[0], Args: []string{"-test.run=^TestHelperMCPServer$"}, Env: map[string]string{helperEnv: mode}}
}

// httpServer serves srv over streamable HTTP for the test.
func httpServer(t *testing.T, srv *mcp.Server) *httptest.Server {
	t.Helper()
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil)
	ts := httptest.NewServer(h)
	t.Cleanup(ts.Close)
	return ts
}

// logBuffer collects log records for assertions and sends them to t.Log.
type logBuffer struct {
	t  *testing.T
	mu sync.Mutex
	b  strings.Builder
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	l.b.Write(p)
	l.mu.Unlock()
	return len(p), nil
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func newLog(t *testing.T) (*slog.Logger, *logBuffer) {
	lb := &logBuffer{t: t}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("log:\n%s", lb.String())
		}
	})
	return slog.New(slog.NewTextHandler(lb, &slog.HandlerOptions{Level: slog.LevelDebug})), lb
}

// openToolset opens a toolset for servers and closes it at the end.
func openToolset(t *testing.T, servers map[string]MCPServer, tools ...Tool) (*Toolset, *logBuffer) {
	t.Helper()
	log, lb := newLog(t)
	s, err := Open(t.Context(), &Manifest{Tools: tools, MCPServers: servers}, &OpenOptions{Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s, lb
}

func toolByName(t *testing.T, s *Toolset, name string) registry.Tool {
	t.Helper()
	for _, tool := range s.Tools() {
		if tool.Name == name {
			return tool
		}
	}
	t.Fatalf("no tool %q in %v", name, toolNames(s.Tools()))
	return registry.Tool{}
}

func toolNames(tools []registry.Tool) []string {
	var names []string
	for _, t := range tools {
		names = append(names, t.Name)
	}
	return names
}

// callTool runs one tool through a registry's pipeline, natively.
func callTool(t *testing.T, s *Toolset, name, args string) registry.Result {
	t.Helper()
	r := registry.New()
	for _, tool := range s.Tools() {
		if err := r.Register(tool); err != nil {
			t.Fatal(err)
		}
	}
	return r.Execute(t.Context(), registry.Call{ID: "c", Name: name, Arguments: json.RawMessage(args)})
}

// Both transports: the tools are imported under "<server>__<tool>" with
// their schemas, description and annotations, after the command tools;
// text, structured, image and error results convert as documented.
func TestUpstreamTools(t *testing.T) {
	ts := httpServer(t, testServer("http"))
	s, _ := openToolset(t, map[string]MCPServer{
		"local":  stdioServer("serve"),
		"remote": {Type: TransportHTTP, URL: ts.URL},
	}, Tool{Name: "cmd", Command: []string{"/bin/cat"}})
	names := toolNames(s.Tools())
	want := []string{"cmd", "local__add", "local__crash", "local__echo", "local__fail", "local__grow", "local__picture", "local__shout", "local__sleep", "local__spawn",
		"remote__add", "remote__echo", "remote__fail", "remote__grow", "remote__picture", "remote__sleep"}
	if strings.Join(names, " ") != strings.Join(want, " ") {
		t.Fatalf("tools = %v, want %v", names, want)
	}
	echo := toolByName(t, s, "remote__echo")
	if echo.Description != "Echo the text." || !strings.Contains(string(echo.Parameters), `"text":{"type":"string","description":"the text to echo"}`) ||
		echo.OutputSchema != nil || string(echo.Annotations) != `{"idempotentHint":false,"readOnlyHint":true,"title":"Echo"}` {
		t.Errorf("echo = %+v\n%s\n%s", echo, echo.Parameters, echo.Annotations)
	}
	add := toolByName(t, s, "local__add")
	if !strings.Contains(string(add.OutputSchema), `"sum":{"type":"integer"}`) {
		t.Errorf("add's output schema = %s", add.OutputSchema)
	}
	for _, server := range []string{"local", "remote"} {
		if res := callTool(t, s, server+"__echo", `{"text":"hi"}`); res.IsError || res.Text() != map[string]string{"local": "stdio", "remote": "http"}[server]+" echo: hi" {
			t.Errorf("%s echo: %+v", server, res)
		}
		res := callTool(t, s, server+"__add", `{"a":2,"b":40}`)
		if res.IsError || string(res.StructuredContent) != `{"sum":42}` || res.Text() != `{"sum":42}` {
			t.Errorf("%s add: %+v %s", server, res, res.StructuredContent)
		}
		if res := callTool(t, s, server+"__fail", `{}`); !res.IsError || res.Text() != "it failed on purpose" {
			t.Errorf("%s fail: %+v", server, res)
		}
		if res := callTool(t, s, server+"__picture", `{}`); res.IsError || res.Text() != "caption\n[image: image/png, 5 bytes]" {
			t.Errorf("%s picture: %q", server, res.Text())
		}
		// Arguments the tool's schema rejects: the server's message, as a
		// rejection; the connection stays.
		if res := callTool(t, s, server+"__add", `{"a":"two"}`); !res.IsError || !strings.Contains(res.Text(), "a") || !strings.Contains(res.Text(), "validating") {
			t.Errorf("%s add with bad arguments: %+v", server, res)
		}
		if res := callTool(t, s, server+"__echo", `{"text":"still there"}`); res.IsError {
			t.Errorf("%s after a rejected call: %+v", server, res)
		}
	}
}

// A stdio server that crashes mid-call: the call is rejected naming the
// server, its exit status and its last stderr line; the next call starts
// it again; the restarted process is a new one.
func TestUpstreamCrashThenRecover(t *testing.T) {
	s, lb := openToolset(t, map[string]MCPServer{"up": stdioServer("serve")})
	first := callTool(t, s, "up__spawn", `{}`)
	res := callTool(t, s, "up__crash", `{}`)
	if !res.IsError {
		t.Fatalf("crash: %+v", res)
	}
	for _, want := range []string{`MCP server "up" disconnected during the call to "crash" (it is restarted on the next call)`, "exit status 3", "helper: crashing now"} {
		if !strings.Contains(res.Text(), want) {
			t.Errorf("crash message lacks %q:\n%s", want, res.Text())
		}
	}
	// The crashed server's group is gone: the process it had spawned too.
	pid, _ := strconv.Atoi(first.Text())
	waitGone(t, pid)
	start := time.Now()
	if res := callTool(t, s, "up__echo", `{"text":"back"}`); res.IsError || res.Text() != "stdio echo: back" {
		t.Fatalf("after the crash: %+v", res)
	}
	t.Logf("reconnected in %v", time.Since(start))
	if !strings.Contains(lb.String(), "connecting to the MCP server again") {
		t.Error("the reconnection is not logged")
	}
}

// waitGone waits for pid to disappear.
func waitGone(t *testing.T, pid int) {
	t.Helper()
	if pid <= 1 {
		t.Fatalf("bad pid %d", pid)
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
			return
		}
		if data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid)); err == nil && strings.Contains(string(data), ") Z ") {
			return // a zombie: dead, waiting for a reaper that is not us
		}
		if time.Now().After(deadline) {
			syscall.Kill(pid, syscall.SIGKILL)
			t.Fatalf("process %d still alive", pid)
		}
	}
}

// Close stops a stdio server and everything in its process group: the
// server exits by itself when its pipes close (within stopGrace, else
// Close would have sent SIGTERM and how it ended would say so). How long
// Close took says nothing on a loaded machine: it includes reaping the
// tree and draining stderr.
func TestUpstreamCloseKillsTheGroup(t *testing.T) {
	log, _ := newLog(t)
	s, err := Open(t.Context(), &Manifest{MCPServers: map[string]MCPServer{"up": stdioServer("serve")}}, &OpenOptions{Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	res := callTool(t, s, "up__spawn", `{}`)
	pid, _ := strconv.Atoi(res.Text())
	u := s.servers[0]
	u.mu.Lock()
	c := u.conn
	u.mu.Unlock()
	start := time.Now()
	s.Close()
	t.Logf("closed in %v", time.Since(start))
	waitGone(t, pid)
	// Ended by itself: exit 0 on EOF, or SIGPIPE when it was writing to
	// the output Close closed too; not by Close's SIGTERM or SIGKILL.
	if how := c.proc.describe(); how != "exit status 0" && !strings.Contains(how, "signal 13 ") {
		t.Errorf("the server ended with %q: it did not exit when its pipes closed", how)
	}
	if res := callTool(t, s, "up__echo", `{}`); !res.IsError || !strings.Contains(res.Text(), "stopped") {
		t.Errorf("a call after Close: %+v", res)
	}
}

// A server that cannot start fails Open naming it and quoting its stderr;
// a server that never answers fails it within StartTimeout (here the
// context's shorter deadline); the server that did start is stopped.
func TestUpstreamStartFailures(t *testing.T) {
	log, _ := newLog(t)
	_, err := Open(t.Context(), &Manifest{MCPServers: map[string]MCPServer{
		"good":   stdioServer("serve"),
		"broken": stdioServer("fail-at-start"),
	}}, &OpenOptions{Logger: log})
	if err == nil || !errdefs.IsUnavailable(err) {
		t.Fatalf("err = %v", err)
	}
	for _, want := range []string{`MCP server "broken"`, "exit status 4", "helper: cannot open the database: permission denied"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q:\n%v", want, err)
		}
	}
	if strings.Contains(err.Error(), `"good"`) {
		t.Errorf("error names the good server: %v", err)
	}

	ctx, cancel := context.WithTimeout(t.Context(), 500*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err = Open(ctx, &Manifest{MCPServers: map[string]MCPServer{"mute": stdioServer("silent")}}, &OpenOptions{Logger: log})
	if err == nil || !strings.Contains(err.Error(), `MCP server "mute"`) || time.Since(start) > 10*time.Second {
		t.Fatalf("silent server: %v after %v", err, time.Since(start))
	}

	_, err = Open(t.Context(), &Manifest{MCPServers: map[string]MCPServer{"nope": {Type: TransportStdio, Command: "/nonexistent/server"}}}, &OpenOptions{Logger: log})
	if err == nil || !strings.Contains(err.Error(), `MCP server "nope": cannot start /nonexistent/server`) {
		t.Fatalf("missing command: %v", err)
	}
	_, err = Open(t.Context(), &Manifest{MCPServers: map[string]MCPServer{"down": {Type: TransportHTTP, URL: "http://127.0.0.1:1/mcp"}}}, &OpenOptions{Logger: log})
	if err == nil || !strings.Contains(err.Error(), `MCP server "down": http://127.0.0.1:1/mcp`) {
		t.Fatalf("unreachable URL: %v", err)
	}
}

// Two tools that map to one name fail Open naming both.
func TestUpstreamNameCollision(t *testing.T) {
	a := mcp.NewServer(&mcp.Implementation{Name: "a"}, nil)
	mcp.AddTool(a, &mcp.Tool{Name: "b__c"}, func(context.Context, *mcp.CallToolRequest, any) (*mcp.CallToolResult, any, error) {
		return nil, nil, nil
	})
	ab := mcp.NewServer(&mcp.Implementation{Name: "ab"}, nil)
	mcp.AddTool(ab, &mcp.Tool{Name: "c"}, func(context.Context, *mcp.CallToolRequest, any) (*mcp.CallToolResult, any, error) {
		return nil, nil, nil
	})
	ta, tab := httpServer(t, a), httpServer(t, ab)
	log, _ := newLog(t)
	_, err := Open(t.Context(), &Manifest{MCPServers: map[string]MCPServer{
		"a":    {Type: TransportHTTP, URL: ta.URL},
		"a__b": {Type: TransportHTTP, URL: tab.URL},
	}}, &OpenOptions{Logger: log})
	want := `tool name "a__b__c" is given twice: by MCP server "a" (its tool "b__c") and by MCP server "a__b" (its tool "c")`
	if err == nil || !strings.Contains(err.Error(), want) || !errdefs.IsInvalidArgument(err) {
		t.Fatalf("err = %v, want %q", err, want)
	}
	_, err = Open(t.Context(), &Manifest{
		Tools:      []Tool{{Name: "a__b__c", Command: []string{"/bin/true"}}},
		MCPServers: map[string]MCPServer{"a": {Type: TransportHTTP, URL: ta.URL}},
	}, &OpenOptions{Logger: log})
	want = `tool name "a__b__c" is given twice: by the command tool "a__b__c" and by MCP server "a" (its tool "b__c")`
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("err = %v, want %q", err, want)
	}
}

// A server's tools/list_changed makes the toolset relist, update Tools and
// tell its subscribers.
func TestUpstreamToolListChanged(t *testing.T) {
	ts := httpServer(t, testServer("http"))
	s, _ := openToolset(t, map[string]MCPServer{"remote": {Type: TransportHTTP, URL: ts.URL}, "local": stdioServer("serve")})
	changed := make(chan struct{}, 10)
	defer s.Subscribe(func() { changed <- struct{}{} })()
	for _, server := range []string{"remote", "local"} {
		if res := callTool(t, s, server+"__grow", `{}`); res.IsError {
			t.Fatal(res.Text())
		}
		select {
		case <-changed:
		case <-time.After(10 * time.Second):
			t.Fatalf("%s: no change notification; tools: %v", server, toolNames(s.Tools()))
		}
		if res := callTool(t, s, server+"__added", `{}`); res.IsError || res.Text() != "I am new" {
			t.Errorf("%s: the added tool: %+v", server, res)
		}
	}
}

// The per-call timeout ends a call (the server is told to cancel) and the
// connection stays usable; the caller's cancellation ends it too.
func TestUpstreamCallTimeout(t *testing.T) {
	ts := httpServer(t, testServer("http"))
	cfg := MCPServer{Type: TransportHTTP, URL: ts.URL, TimeoutMs: 200}
	local := stdioServer("serve")
	local.TimeoutMs = 200
	s, _ := openToolset(t, map[string]MCPServer{"remote": cfg, "local": local})
	for _, server := range []string{"remote", "local"} {
		start := time.Now()
		res := callTool(t, s, server+"__sleep", `{"ms":60000}`)
		if !res.IsError || !strings.Contains(res.Text(), fmt.Sprintf(`MCP server %q: tool "sleep" timed out after 200ms`, server)) || time.Since(start) > 5*time.Second {
			t.Errorf("%s: %+v after %v", server, res, time.Since(start))
		}
		if res := callTool(t, s, server+"__echo", `{"text":"x"}`); res.IsError {
			t.Errorf("%s after a timeout: %+v", server, res)
		}
	}
}

// An HTTP server that goes away: the call fails clearly, calls fail fast
// while it is down, and it is reached again once it is back.
func TestUpstreamHTTPDownThenBack(t *testing.T) {
	srv := testServer("http")
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil)
	var down atomic.Bool
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if down.Load() && r.Method != http.MethodDelete { // ending sessions still works
			http.Error(w, "gone", http.StatusBadGateway)
			return
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(ts.Close)
	s, _ := openToolset(t, map[string]MCPServer{"remote": {Type: TransportHTTP, URL: ts.URL}})
	down.Store(true)
	res := callTool(t, s, "remote__echo", `{"text":"x"}`)
	if !res.IsError || !strings.Contains(res.Text(), `MCP server "remote"`) {
		t.Fatalf("while down: %+v", res)
	}
	t.Logf("while down: %s", res.Text())
	down.Store(false)
	for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		res = callTool(t, s, "remote__echo", `{"text":"x"}`)
		if !res.IsError {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("never back: %s", res.Text())
		}
	}
}

// A server's stderr reaches the log under a byte budget: a flood is
// mostly dropped, and the next line logged says how much.
func TestUpstreamStderrIsBounded(t *testing.T) {
	s, lb := openToolset(t, map[string]MCPServer{"up": stdioServer("serve")})
	if res := callTool(t, s, "up__shout", `{"bytes":4000000}`); res.IsError {
		t.Fatal(res.Text())
	}
	callTool(t, s, "up__shout", `{"bytes":1000}`)
	// Stderr is read asynchronously: wait until the flood is through.
	for deadline := time.Now().Add(10 * time.Second); !strings.Contains(lb.String(), "dropped_bytes="); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("no dropped_bytes in the log")
		}
	}
	logged := strings.Count(lb.String(), "line="+strings.Repeat("x", 99))
	if max := (StderrBurstBytes+20*StderrRateBytes)/100 + 10; logged > max {
		t.Errorf("%d stderr lines logged of 40000; the budget allows about %d", logged, max)
	}
	t.Logf("%d of 40000 lines logged", logged)
}

// The stderr log keeps whole lines of the tail and cuts long lines.
func TestStderrTail(t *testing.T) {
	log, _ := newLog(t)
	sl := newStderrLog(log, "x")
	for i := range 100 {
		sl.line([]byte(fmt.Sprintf("line %d %s\n", i, strings.Repeat("y", 100))))
	}
	tail := sl.Tail()
	if len(tail) > StderrTailBytes || !strings.HasPrefix(tail, "line ") || !strings.HasSuffix(tail, "line 99 "+strings.Repeat("y", 100)) {
		t.Errorf("tail = %q", tail)
	}
}

// An HTTP server's headers reach it; a JSON response body over
// MaxServerMessageBytes fails the call instead of growing the host.
func TestUpstreamHTTPHeadersAndBodyCap(t *testing.T) {
	srv := testServer("http")
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, &mcp.StreamableHTTPOptions{JSONResponse: true})
	var sawAuth atomic.Bool
	var huge atomic.Bool
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") == "Bearer t0ken" {
			sawAuth.Store(true)
		}
		if huge.Load() && r.Method == http.MethodPost {
			w.Header().Set("Content-Type", "application/json")
			chunk := []byte(strings.Repeat(" ", 1<<20))
			for range MaxServerMessageBytes/len(chunk) + 2 {
				if _, err := w.Write(chunk); err != nil {
					return
				}
			}
			return
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(ts.Close)
	s, _ := openToolset(t, map[string]MCPServer{"remote": {Type: TransportHTTP, URL: ts.URL, Headers: map[string]string{"Authorization": "Bearer t0ken"}}})
	if !sawAuth.Load() {
		t.Error("the Authorization header did not reach the server")
	}
	huge.Store(true)
	res := callTool(t, s, "remote__echo", `{"text":"x"}`)
	if !res.IsError {
		t.Fatalf("a huge body: %+v", res)
	}
	t.Logf("huge body: %.300s", res.Text())
}

// Check reports each server: reachable with its tool count, or not with
// the reason.
func TestCheck(t *testing.T) {
	ts := httpServer(t, testServer("http"))
	log, _ := newLog(t)
	got := Check(t.Context(), &Manifest{MCPServers: map[string]MCPServer{
		"a": stdioServer("serve"),
		"b": stdioServer("fail-at-start"),
		"c": {Type: TransportHTTP, URL: ts.URL},
	}}, &OpenOptions{Logger: log})
	if len(got) != 3 || got[0].Name != "a" || got[0].Err != nil || got[0].Tools != 9 ||
		got[1].Err == nil || !strings.Contains(got[1].Err.Error(), "permission denied") ||
		got[2].Err != nil || got[2].Tools != 6 || got[2].Transport != TransportHTTP || got[2].Where != ts.URL {
		t.Errorf("Check = %+v", got)
	}
}

// A server's tool list is bounded: too many tools, or a name with control
// characters, fail the start naming the server.
func TestUpstreamListBounds(t *testing.T) {
	many := mcp.NewServer(&mcp.Implementation{Name: "many"}, nil)
	for i := range MaxServerTools + 1 {
		mcp.AddTool(many, &mcp.Tool{Name: fmt.Sprintf("t%d", i)}, func(context.Context, *mcp.CallToolRequest, any) (*mcp.CallToolResult, any, error) {
			return nil, nil, nil
		})
	}
	odd := mcp.NewServer(&mcp.Implementation{Name: "odd"}, nil)
	mcp.AddTool(odd, &mcp.Tool{Name: "bad\x1b[2Jname"}, func(context.Context, *mcp.CallToolRequest, any) (*mcp.CallToolResult, any, error) {
		return nil, nil, nil
	})
	log, _ := newLog(t)
	for srv, want := range map[*mcp.Server]string{many: "more than 1000 tools", odd: "with control characters"} {
		ts := httpServer(t, srv)
		_, err := Open(t.Context(), &Manifest{MCPServers: map[string]MCPServer{"x": {Type: TransportHTTP, URL: ts.URL}}}, &OpenOptions{Logger: log})
		if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), `MCP server "x"`) {
			t.Errorf("err = %v, want %q", err, want)
		}
	}
}

// Connection attempts to a server that is down are spaced and back off:
// a program calling it in a loop does not make the host hammer it.
func TestUpstreamReconnectIsSpaced(t *testing.T) {
	srv := testServer("http")
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil)
	var down atomic.Bool
	var requests atomic.Int32
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if down.Load() && r.Method != http.MethodDelete { // ending sessions still works
			requests.Add(1)
			http.Error(w, "down", http.StatusInternalServerError)
			return
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(ts.Close)
	s, _ := openToolset(t, map[string]MCPServer{"remote": {Type: TransportHTTP, URL: ts.URL}})
	down.Store(true)
	start := time.Now()
	fast := 0
	for time.Since(start) < 3*time.Second {
		res := callTool(t, s, "remote__echo", `{"text":"x"}`)
		if !res.IsError {
			t.Fatal("a call succeeded while the server is down")
		}
		if strings.Contains(res.Text(), "the next attempt is in") {
			fast++
		}
	}
	// One failed call, then attempts at about 1 s and 3 s (backoff 1 s,
	// 2 s): a handful of requests, never one per call.
	t.Logf("%d requests to the server in 3 s; %d calls failed at once", requests.Load(), fast)
	if n := requests.Load(); n > 8 {
		t.Errorf("%d requests to a server that is down in 3 s", n)
	}
	if fast < 10 {
		t.Errorf("only %d calls failed at once during the backoff", fast)
	}
}

// tools/list_changed notifications, however many, relist at most once a
// second (minRelistInterval), and the last change is listed. The flood is
// counted, not timed: each tool added waits for its notification to be
// sent, so there are exactly floodTools of them however slow the machine,
// and the bound on the listings is the time the flood and the last
// listing took, measured: every relisting starts at least a second after
// the previous one, all of them after the flood began and before the last
// tool was seen in the toolset.
func TestUpstreamRelistIsSpaced(t *testing.T) {
	const floodTools = 100
	srv := testServer("http")
	var lists atomic.Int32
	srv.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			if method == "tools/list" {
				lists.Add(1)
			}
			return next(ctx, method, req)
		}
	})
	notified := make(chan struct{}, floodTools)
	srv.AddSendingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			res, err := next(ctx, method, req)
			if method == "notifications/tools/list_changed" {
				notified <- struct{}{}
			}
			return res, err
		}
	})
	ts := httpServer(t, srv)
	s, _ := openToolset(t, map[string]MCPServer{"remote": {Type: TransportHTTP, URL: ts.URL}})
	changed := make(chan struct{}, 1)
	defer s.Subscribe(func() {
		select {
		case changed <- struct{}{}:
		default:
		}
	})()
	hasAll := func() bool {
		n := 0
		for _, tool := range s.Tools() {
			if strings.HasPrefix(tool.Name, "remote__flood") {
				n++
			}
		}
		return n == floodTools
	}
	// Liveness only: the last relisting is due about a second after the
	// flood; a toolset that never lists the last change fails here.
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	before := lists.Load()
	start := time.Now()
	for i := range floodTools {
		mcp.AddTool(srv, &mcp.Tool{Name: fmt.Sprintf("flood%d", i)}, func(context.Context, *mcp.CallToolRequest, any) (*mcp.CallToolResult, any, error) {
			return nil, nil, nil
		})
		select { // the go-sdk's 10 ms debounce sends it, then the next change
		case <-notified:
		case <-ctx.Done():
			t.Fatalf("notification %d of %d was never sent", i+1, floodTools)
		}
	}
	flood := time.Since(start)
	for !hasAll() {
		select {
		case <-changed:
		case <-ctx.Done():
			t.Fatalf("the toolset has %d tools, not the flood's last change, after %v", len(s.Tools()), time.Since(start))
		}
	}
	n := int(lists.Load() - before) // each of them began before took ends
	took := time.Since(start)
	bound := int(took/minRelistInterval) + 1
	t.Logf("%d listings for %d notifications in %v; all tools listed after %v (at most %d listings spaced by %v)", n, floodTools, flood, took, bound, minRelistInterval)
	if n < 1 || n > bound {
		t.Errorf("%d listings in %v: want 1 to %d, one per %v at most", n, took, bound, minRelistInterval)
	}
}

// A server gets nothing of the host: no roots, no sampling, no
// elicitation (no capability is advertised); an error message it sends is
// cut at MaxMessageBytes.
func TestUpstreamCannotAskTheHost(t *testing.T) {
	srv := mcp.NewServer(&mcp.Implementation{Name: "curious"}, nil)
	mcp.AddTool(srv, &mcp.Tool{Name: "ask"}, func(ctx context.Context, req *mcp.CallToolRequest, _ any) (*mcp.CallToolResult, any, error) {
		//lint:ignore SA1019 a hostile server may still ask, deprecated or not
		roots, rerr := req.Session.ListRoots(ctx, nil)
		n := -1
		if rerr == nil {
			n = len(roots.Roots)
		}
		//lint:ignore SA1019 a hostile server may still ask, deprecated or not
		_, serr := req.Session.CreateMessage(ctx, &mcp.CreateMessageParams{MaxTokens: 1, Messages: []*mcp.SamplingMessage{{Role: "user", Content: &mcp.TextContent{Text: "hi"}}}})
		_, eerr := req.Session.Elicit(ctx, &mcp.ElicitParams{Message: "your password?"})
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprintf("roots=%d sampling=%v elicitation=%v", n, serr != nil, eerr != nil)}}}, nil, nil
	})
	mcp.AddTool(srv, &mcp.Tool{Name: "verbose"}, func(context.Context, *mcp.CallToolRequest, any) (*mcp.CallToolResult, any, error) {
		return nil, nil, errors.New(strings.Repeat("e", 100<<10))
	})
	ts := httpServer(t, srv)
	s, _ := openToolset(t, map[string]MCPServer{"x": {Type: TransportHTTP, URL: ts.URL}})
	if res := callTool(t, s, "x__ask", `{}`); res.IsError || res.Text() != "roots=0 sampling=true elicitation=true" {
		t.Errorf("what the server got of the host: %+v", res)
	}
	res := callTool(t, s, "x__verbose", `{}`)
	if !res.IsError || len(res.Text()) > MaxMessageBytes+64 || !strings.Contains(res.Text(), "more bytes cut") {
		t.Errorf("a 100 KiB error message became %d bytes: %.100s…", len(res.Text()), res.Text())
	}
}

// Redirects are followed on the same scheme and host only: headers never
// go to another host.
func TestUpstreamRedirects(t *testing.T) {
	var leaked atomic.Bool
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-Secret") != "" {
			leaked.Store(true)
		}
		http.Error(w, "no", http.StatusNotFound)
	}))
	t.Cleanup(other.Close)
	redirect := httptest.NewServer(http.RedirectHandler(other.URL+"/mcp", http.StatusTemporaryRedirect))
	t.Cleanup(redirect.Close)
	log, _ := newLog(t)
	_, err := Open(t.Context(), &Manifest{MCPServers: map[string]MCPServer{"r": {Type: TransportHTTP, URL: redirect.URL, Headers: map[string]string{"X-Secret": "s"}}}}, &OpenOptions{Logger: log})
	if err == nil {
		t.Fatal("a redirect to another host was followed")
	}
	if leaked.Load() {
		t.Error("the header reached the other host")
	}
}
