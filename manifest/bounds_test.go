package manifest

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// hostileServer is the stdio upstream of the bounds tests: it answers
// with results of any size, count of values or depth, leaves processes
// behind, and dies talking.
func hostileServer() *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "hostile", Version: "1"}, nil)
	type sizeIn struct {
		N int `json:"n"`
	}
	text := func(s string) *mcp.CallToolResult {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: s}}}
	}
	mcp.AddTool(s, &mcp.Tool{Name: "echo"}, func(_ context.Context, _ *mcp.CallToolRequest, in struct {
		Text string `json:"text"`
	}) (*mcp.CallToolResult, any, error) {
		return text(in.Text + " from " + strconv.Itoa(hostPid(os.Getpid()))), nil, nil
	})
	mcp.AddTool(s, &mcp.Tool{Name: "big", Description: "A text result of n bytes."}, func(_ context.Context, _ *mcp.CallToolRequest, in sizeIn) (*mcp.CallToolResult, any, error) {
		return text(strings.Repeat("x", in.N)), nil, nil
	})
	mcp.AddTool(s, &mcp.Tool{Name: "values", Description: "A structured result of n numbers."}, func(_ context.Context, _ *mcp.CallToolRequest, in sizeIn) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{}, StructuredContent: json.RawMessage(`{"v":[` + strings.Repeat("0,", in.N) + `0]}`)}, nil, nil
	})
	mcp.AddTool(s, &mcp.Tool{Name: "deep", Description: "A structured result nested n deep."}, func(_ context.Context, _ *mcp.CallToolRequest, in sizeIn) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{}, StructuredContent: json.RawMessage(`{"v":` + strings.Repeat("[", in.N) + strings.Repeat("]", in.N) + `}`)}, nil, nil
	})
	mcp.AddTool(s, &mcp.Tool{Name: "escape", Description: "Starts a process that leaves the group and session and ignores SIGHUP and SIGTERM; returns its pid (the host's)."},
		func(context.Context, *mcp.CallToolRequest, any) (*mcp.CallToolResult, any, error) {
			cmd := exec.Command(os.Args[0], "-test.run=^TestHelperMCPServer$")
			cmd.Env = append(os.Environ(), helperEnv+"=sleeper")
			cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
			if err := cmd.Start(); err != nil {
				return nil, nil, err
			}
			go cmd.Wait()
			return text(strconv.Itoa(hostPid(cmd.Process.Pid))), nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "lastwords", Description: "Floods stderr, says why, dies."}, func(context.Context, *mcp.CallToolRequest, any) (*mcp.CallToolResult, any, error) {
		w := bufio.NewWriter(os.Stderr)
		for i := range 2000 {
			fmt.Fprintf(w, "helper: progress line %d of the flood\n", i)
		}
		fmt.Fprintln(w, "helper: FATAL: out of cheese")
		w.Flush()
		os.Exit(7)
		return nil, nil, nil
	})
	return s
}

// A result is measured while it streams and refused before anything
// decodes it: over MaxServerResultBytes (5 MiB; 15 MiB costing the host
// no more than a read buffer), MaxServerResultValues or
// MaxServerResultDepth, the call is rejected naming the bound and the
// connection stays; a message over MaxServerMessageBytes (a 17 MiB line)
// closes the connection, naming the bound, and the next call starts the
// server again.
//
// The server's calls get MaxTimeout: producing a 17 MiB reply (this test
// binary, encoding it under -race) took a loaded machine 60 s, and a call
// that times out first says so instead of what this test is about.
func TestUpstreamResultBounds(t *testing.T) {
	h := stdioServer("hostile")
	h.TimeoutMs = int(MaxTimeout.Milliseconds())
	s, lb := openToolset(t, map[string]MCPServer{"h": h})
	first := callTool(t, s, "h__echo", `{"text":"hi"}`)
	if first.IsError {
		t.Fatal(first.Text())
	}
	for _, c := range []struct{ tool, args, want string }{
		{"big", `{"n":5242880}`, `MCP server "h": tool "big": the server's reply is larger than 4194304 bytes (MaxServerResultBytes)`},
		{"values", `{"n":150000}`, `MCP server "h": tool "values": the server's reply is made of more than 100000 JSON values (MaxServerResultValues)`},
		{"deep", `{"n":200}`, `MCP server "h": tool "deep": the server's reply is nested deeper than 128 levels (MaxServerResultDepth)`},
	} {
		if res := callTool(t, s, "h__"+c.tool, c.args); !res.IsError || res.Text() != c.want {
			t.Errorf("%s: %.300q, want %q", c.tool, res.Text(), c.want)
		}
	}
	// What a 15 MiB result costs the host: the bound's worth of bytes
	// (held while it might still fit), never the whole, never decoded.
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	res := callTool(t, s, "h__big", `{"n":15728640}`)
	runtime.ReadMemStats(&after)
	allocated := after.TotalAlloc - before.TotalAlloc
	t.Logf("a refused 15 MiB result: %d KiB allocated by the host", allocated>>10)
	if !res.IsError || allocated > MaxServerResultBytes+1<<20 {
		t.Errorf("a 15 MiB result: %.300q, %d bytes allocated (the bound is checked before decoding: want at most MaxServerResultBytes + 1 MiB)", res.Text(), allocated)
	}
	if again := callTool(t, s, "h__echo", `{"text":"hi"}`); again.Text() != first.Text() {
		t.Errorf("after refused replies the connection changed: %.100q then %.100q", first.Text(), again.Text())
	}
	// A line over MaxServerMessageBytes ends the connection.
	res = callTool(t, s, "h__big", `{"n":17825792}`)
	want := `it sent a message larger than 16777216 bytes (MaxServerMessageBytes)`
	if !res.IsError || !strings.Contains(res.Text(), want) || !strings.Contains(res.Text(), `MCP server "h" disconnected during the call to "big"`) {
		t.Errorf("a 17 MiB line: %.300q, want %q", res.Text(), want)
	}
	// The call dropped the connection: the next one starts the server
	// again, at once.
	if res = callTool(t, s, "h__echo", `{"text":"back"}`); res.IsError || !strings.HasPrefix(res.Text(), "back from ") {
		t.Fatalf("the call after the connection was closed: %.300q", res.Text())
	}
	if !strings.Contains(lb.String(), "connecting to the MCP server again") {
		t.Error("no reconnection after the connection was closed")
	}
}

// Over HTTP, a JSON body over MaxServerResultBytes fails the call naming
// the bound before anything decodes it.
func TestUpstreamHTTPResultBound(t *testing.T) {
	srv := mcp.NewServer(&mcp.Implementation{Name: "big"}, nil)
	mcp.AddTool(srv, &mcp.Tool{Name: "big"}, func(context.Context, *mcp.CallToolRequest, any) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: strings.Repeat("x", 5<<20)}}}, nil, nil
	})
	for _, jsonBody := range []bool{true, false} {
		h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, &mcp.StreamableHTTPOptions{JSONResponse: jsonBody})
		ts := httptest.NewServer(h)
		t.Cleanup(ts.Close)
		s, _ := openToolset(t, map[string]MCPServer{"web": {Type: TransportHTTP, URL: ts.URL}})
		res := callTool(t, s, "web__big", `{}`)
		want := `MCP server "web": tool "big": the server's reply is larger than 4194304 bytes (MaxServerResultBytes)`
		if !res.IsError || res.Text() != want {
			t.Errorf("json body %v: %.300q, want %q", jsonBody, res.Text(), want)
		}
	}
}

// Each schema bound fails the listing, naming the server, the tool and the
// bound; so does a list over MaxServerListBytes across pages.
func TestUpstreamSchemaBounds(t *testing.T) {
	deep := strings.Repeat(`{"type":"object","properties":{"a":`, 70) + `{}` + strings.Repeat(`}}`, 70)
	values := `{"type":"object","properties":{"a":{"default":[` + strings.Repeat("0,", MaxSchemaValues) + `0]}}}`
	enum := `{"type":"object","properties":{"a":{"enum":[` + strings.Repeat("0,", MaxSchemaEnum) + `0]}}}`
	union := `{"type":"object","properties":{"a":{"anyOf":[` + strings.Repeat("{},", MaxSchemaUnion) + `{}]}}}`
	log, _ := newLog(t)
	for schema, want := range map[string]string{
		deep:   "it is nested deeper than 128 levels (MaxSchemaDepth)",
		values: "it has more than 100000 JSON values (MaxSchemaValues)",
		enum:   "an enum has more than 10000 values (MaxSchemaEnum)",
		union:  `a "anyOf" has more than 1000 members (MaxSchemaUnion)`,
	} {
		srv := mcp.NewServer(&mcp.Implementation{Name: "bomb"}, nil)
		srv.AddTool(&mcp.Tool{Name: "ok", InputSchema: json.RawMessage(`{"type":"object"}`)}, nil)
		srv.AddTool(&mcp.Tool{Name: "bomb", InputSchema: json.RawMessage(schema)}, nil)
		ts := httpServer(t, srv)
		_, err := Open(t.Context(), &Manifest{MCPServers: map[string]MCPServer{"x": {Type: TransportHTTP, URL: ts.URL}}}, &OpenOptions{Logger: log})
		full := `MCP server "x": listing its tools: tool "bomb": its inputSchema is over a bound: ` + want
		if err == nil || !strings.Contains(err.Error(), full) {
			t.Errorf("err = %.500v, want %q", err, full)
		}
	}
	// Two pages of 9 MiB: each fits a message, not the list.
	srv := mcp.NewServer(&mcp.Implementation{Name: "wordy"}, &mcp.ServerOptions{PageSize: 1})
	for i := range 2 {
		srv.AddTool(&mcp.Tool{Name: fmt.Sprintf("t%d", i), Description: strings.Repeat("w", 9<<20), InputSchema: json.RawMessage(`{"type":"object"}`)}, nil)
	}
	ts := httpServer(t, srv)
	_, err := Open(t.Context(), &Manifest{MCPServers: map[string]MCPServer{"x": {Type: TransportHTTP, URL: ts.URL}}}, &OpenOptions{Logger: log})
	if want := "its tool list is larger than 16777216 bytes (MaxServerListBytes)"; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("two 9 MiB pages: %.500v, want %q", err, want)
	}
}

// A relisting keeps what did not change: a tool listed again byte for
// byte is the same tool (neither copied nor imported again), and a tool
// whose description changed keeps its schemas' bytes.
func TestUpstreamRelistKeepsWhatDidNotChange(t *testing.T) {
	srv := mcp.NewServer(&mcp.Implementation{Name: "grower"}, nil)
	add := func(name, desc string) {
		srv.AddTool(&mcp.Tool{Name: name, Description: desc, InputSchema: json.RawMessage(`{"type":"object","properties":{"q":{"type":"string","description":"what"}}}`)},
			func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				return &mcp.CallToolResult{}, nil
			})
	}
	add("a", "A.")
	add("b", "B.")
	ts := httpServer(t, srv)
	s, _ := openToolset(t, map[string]MCPServer{"x": {Type: TransportHTTP, URL: ts.URL}})
	changed := make(chan struct{}, 10)
	defer s.Subscribe(func() { changed <- struct{}{} })()
	before := map[string]*upstreamTool{}
	for _, tl := range s.lists[s.servers[0]] {
		before[tl.name] = tl
	}
	add("b", "B, said again.")
	add("c", "C.")
	select {
	case <-changed:
	case <-time.After(15 * time.Second):
		t.Fatal("no change")
	}
	s.mu.Lock()
	after := map[string]*upstreamTool{}
	for _, tl := range s.lists[s.servers[0]] {
		after[tl.name] = tl
	}
	s.mu.Unlock()
	if len(after) != 3 || after["a"] != before["a"] {
		t.Errorf("a, unchanged, was imported again: %p then %p (%d tools)", before["a"], after["a"], len(after))
	}
	if b0, b1 := before["b"], after["b"]; b1 == b0 || b1.rt.Description != "B, said again." || &b1.rt.Parameters[0] != &b0.rt.Parameters[0] {
		t.Errorf("b: its description changed; its schema should be the same bytes: %p %p", &b0.rt.Parameters[0], &b1.rt.Parameters[0])
	}
}

// After 2,000 lines of stderr and a last one saying why, a server that
// dies mid-call is reported with that last line: the message waits for
// the stderr reader to reach the end of the pipe.
func TestUpstreamCrashQuotesLastWords(t *testing.T) {
	for i := range 12 {
		s, _ := openToolset(t, map[string]MCPServer{"h": stdioServer("hostile")})
		res := callTool(t, s, "h__lastwords", `{}`)
		if !res.IsError || !strings.Contains(res.Text(), "helper: FATAL: out of cheese") || !strings.Contains(res.Text(), "exit status 7") {
			t.Fatalf("attempt %d: the crash is reported as %.2000q", i, res.Text())
		}
		s.Close()
	}
}

// hostHelperEnv, when set to an isolation, makes this test binary a host
// (TestHelperHost) whose stdio servers are held that way.
const hostHelperEnv = "DSH_MANIFEST_HOST_HELPER"

// TestHelperHost is not a test: run with hostHelperEnv set, it opens a
// toolset with the hostile server, has it start an escaping process,
// prints that process's pid and waits to be killed.
func TestHelperHost(t *testing.T) {
	iso := os.Getenv(hostHelperEnv)
	if iso == "" {
		return
	}
	isolations = func() []string { return []string{iso} }
	s, err := Open(context.Background(), &Manifest{MCPServers: map[string]MCPServer{"h": stdioServer("hostile")}}, nil)
	if err != nil {
		fmt.Printf("error %v\n", err)
		os.Exit(1)
	}
	res := callTool(t, s, "h__escape", `{}`)
	fmt.Printf("pid %s\n", res.Text())
	time.Sleep(time.Hour)
}

// A stdio server's whole tree dies with its host, even killed outright:
// a process the server started that left its group and session and
// ignores SIGHUP and SIGTERM is gone once the host is SIGKILLed — under
// each way of holding the tree (a PID namespace, a user and PID namespace,
// a subreaper).
func TestUpstreamTreeDiesWithItsHost(t *testing.T) {
	for _, iso := range []string{isoPIDNamespace, isoUserNamespace, isoSubreaper} {
		t.Run(strings.ReplaceAll(iso, " ", "_"), func(t *testing.T) {
			if iso == isoPIDNamespace && os.Geteuid() != 0 {
				t.Skip("a PID namespace without a user namespace needs root")
			}
			host := exec.Command(os.Args[0], "-test.run=^TestHelperHost$")
			host.Env = append(os.Environ(), hostHelperEnv+"="+iso)
			out, err := host.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			host.Stderr = os.Stderr
			if err := host.Start(); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() {
				host.Process.Kill()
				host.Wait()
			})
			line, err := bufio.NewReader(out).ReadString('\n')
			if err != nil {
				t.Fatalf("the host said nothing: %v", err)
			}
			if strings.HasPrefix(line, "error") && strings.Contains(line, "cannot start its init") && iso == isoUserNamespace {
				t.Skipf("no user namespaces here: %s", line)
			}
			pid, err := strconv.Atoi(strings.TrimSpace(strings.TrimPrefix(line, "pid ")))
			if err != nil || pid <= 1 {
				t.Fatalf("the host said %q", line)
			}
			if err := syscall.Kill(pid, 0); err != nil {
				t.Fatalf("the escaping process %d is not running: %v", pid, err)
			}
			host.Process.Signal(syscall.SIGKILL)
			start := time.Now()
			waitGone(t, pid)
			t.Logf("the escaping process was gone %v after its host was killed", time.Since(start).Round(time.Millisecond))
			if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
				t.Logf("(a zombie until its reaper reaps it: %v)", err)
			}
		})
	}
}

// The pacer holds a relisting back while a rebuild runs and for
// relistCostFactor times what the work took, and collects garbage after a
// large rebuild.
func TestPacer(t *testing.T) {
	p := &pacer{}
	start := time.Now()
	p.charge(50 * time.Millisecond)
	if err := p.wait(t.Context()); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d < relistCostFactor*50*time.Millisecond {
		t.Errorf("waited %v after 50 ms of work", d)
	}
	p.hold(collectAfterBytes)
	released := make(chan struct{})
	done := make(chan struct{})
	go func() {
		p.wait(context.Background())
		select {
		case <-released:
		default:
			t.Error("wait returned while a rebuild was held")
		}
		close(done)
	}()
	time.Sleep(20 * time.Millisecond)
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	close(released)
	p.release(0)
	<-done
	runtime.ReadMemStats(&after)
	if after.NumForcedGC == before.NumForcedGC {
		t.Error("no collection after a rebuild of collectAfterBytes")
	}
	ctx, cancel := context.WithCancel(t.Context())
	p.hold(0)
	cancel()
	if err := p.wait(ctx); !errors.Is(err, context.Canceled) {
		t.Errorf("wait with a cancelled context: %v", err)
	}
	p.release(0)
}
