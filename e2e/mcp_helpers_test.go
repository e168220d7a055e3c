package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	dcontainer "github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/dsh-container/dsh-container/backend/container"
	"github.com/dsh-container/dsh-container/internal/testenv"
)

// buildUpstream builds the stdio MCP server of testdata/mcpupstream.
func buildUpstream(t testing.TB) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "mcpupstream")
	if out, err := exec.Command("go", "build", "-o", bin, "./testdata/mcpupstream").CombinedOutput(); err != nil {
		t.Fatalf("go build mcpupstream: %v\n%s", err, out)
	}
	return bin
}

// webUpstream is the streamable HTTP MCP server the tests give
// `dsh-container mcp` as its second upstream, in this process: lookup
// answers with text, hold waits a little while counting the calls in
// flight (so a test can see how many programs run at once).
type webUpstream struct {
	url         string
	server      *sdk.Server
	inFlight    atomic.Int32
	maxInFlight atomic.Int32
	calls       atomic.Int32
}

func startWebUpstream(t testing.TB) *webUpstream {
	t.Helper()
	w := &webUpstream{}
	s := sdk.NewServer(&sdk.Implementation{Name: "web", Version: "1"}, nil)
	w.server = s
	sdk.AddTool(s, &sdk.Tool{Name: "lookup", Description: "Look a name up on the web."},
		func(_ context.Context, _ *sdk.CallToolRequest, in struct {
			Name string `json:"name"`
		}) (*sdk.CallToolResult, any, error) {
			w.calls.Add(1)
			return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "web says " + strings.ToUpper(in.Name)}}}, nil, nil
		})
	sdk.AddTool(s, &sdk.Tool{Name: "hold", Description: "Wait ms milliseconds, counting the calls in flight."},
		func(ctx context.Context, _ *sdk.CallToolRequest, in struct {
			Ms int `json:"ms"`
		}) (*sdk.CallToolResult, any, error) {
			n := w.inFlight.Add(1)
			defer w.inFlight.Add(-1)
			for {
				m := w.maxInFlight.Load()
				if n <= m || w.maxInFlight.CompareAndSwap(m, n) {
					break
				}
			}
			select {
			case <-time.After(time.Duration(in.Ms) * time.Millisecond):
			case <-ctx.Done():
			}
			return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "held"}}}, nil, nil
		})
	ts := httptest.NewServer(sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return s }, nil))
	t.Cleanup(ts.Close)
	w.url = ts.URL
	return w
}

// writeManifest writes a tool manifest naming the stdio upstream "files"
// (the binary at upstream) and the HTTP one "web".
func writeManifest(t testing.TB, upstream string, web *webUpstream) string {
	t.Helper()
	servers := map[string]any{"files": map[string]any{"command": upstream}}
	if web != nil {
		servers["web"] = map[string]any{"url": web.url, "timeoutMs": 20000}
	}
	b, _ := json.Marshal(map[string]any{"mcpServers": servers})
	path := filepath.Join(t.TempDir(), "tools.json")
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// mcpProc is one `dsh-container mcp` process and a go-sdk client session
// with it.
type mcpProc struct {
	t      testing.TB
	cmd    *exec.Cmd
	cs     *sdk.ClientSession
	owner  string
	xdg    string
	stderr *testenv.LockedBuffer

	mu       sync.Mutex
	progress []string
	changed  atomic.Int32
}

func (p *mcpProc) progressMessages() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.progress...)
}

func (p *mcpProc) clientOptions() *sdk.ClientOptions {
	return &sdk.ClientOptions{
		ProgressNotificationHandler: func(_ context.Context, req *sdk.ProgressNotificationClientRequest) {
			p.mu.Lock()
			p.progress = append(p.progress, req.Params.Message)
			p.mu.Unlock()
		},
		ToolListChangedHandler: func(context.Context, *sdk.ToolListChangedRequest) { p.changed.Add(1) },
	}
}

// startMCP spawns `dsh-container mcp args...` over stdio with the go-sdk's
// CommandTransport and connects. Cleanup closes the session (the server
// sees its input end) and checks that the process exited 0 and left no
// container, no socket directory and no upstream process behind.
func startMCP(t testing.TB, bin string, args ...string) *mcpProc {
	t.Helper()
	return startMCPWith(t, bin, nil, nil, args...)
}

// startMCPWith is startMCP with elicit answering elicitations (nil: the
// client declares none) and the session options sess.
func startMCPWith(t testing.TB, bin string, elicit func(context.Context, *sdk.ElicitRequest) (*sdk.ElicitResult, error), sess *sdk.ClientSessionOptions, args ...string) *mcpProc {
	t.Helper()
	xdg, err := os.MkdirTemp("", "dshm")
	if err != nil {
		t.Fatal(err)
	}
	p := &mcpProc{t: t, xdg: xdg, stderr: &testenv.LockedBuffer{}}
	p.cmd = exec.Command(bin, append([]string{"mcp"}, args...)...)
	p.cmd.Env = append(os.Environ(), "XDG_RUNTIME_DIR="+xdg)
	p.cmd.Stderr = p.stderr
	opts := p.clientOptions()
	opts.ElicitationHandler = elicit
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	p.cs, err = sdk.NewClient(&sdk.Implementation{Name: "e2e", Version: "1"}, opts).Connect(ctx, &sdk.CommandTransport{Command: p.cmd}, sess)
	t.Cleanup(func() { p.stop() })
	if err != nil {
		t.Fatalf("connecting to dsh-container mcp: %v\nstderr:\n%s", err, p.stderr.String())
	}
	p.owner = container.OwnerOf(p.cmd.Process.Pid)
	return p
}

// stop ends the session and checks what the process left.
func (p *mcpProc) stop() {
	t := p.t
	t.Helper()
	if p.cs != nil {
		p.cs.Close() // closes stdin and waits for the process (SIGTERM after 5 s)
	}
	if p.cmd.ProcessState == nil {
		p.cmd.Process.Kill()
		p.cmd.Wait()
	}
	if st := p.cmd.ProcessState; st != nil && !st.Success() {
		t.Errorf("dsh-container mcp exited with %v; stderr:\n%s", st, p.stderr.String())
	}
	if p.owner != "" {
		if left := ownedContainers(t, p.owner); len(left) != 0 {
			t.Errorf("dsh-container mcp left %d container(s)", len(left))
			for _, c := range left {
				cli.ContainerRemove(context.Background(), c.ID, dcontainer.RemoveOptions{Force: true})
			}
		}
	}
	if dirs, _ := os.ReadDir(filepath.Join(p.xdg, "dsh-container")); len(dirs) != 0 {
		t.Errorf("dsh-container mcp left socket directories: %v", dirs)
	}
	if t.Failed() {
		t.Logf("dsh-container mcp's log:\n%s", p.stderr.String())
	}
	os.RemoveAll(p.xdg)
}

// runCode calls run_code, with a progress token when token is not nil.
func runCode(ctx context.Context, cs *sdk.ClientSession, code string, token any) (*sdk.CallToolResult, error) {
	params := &sdk.CallToolParams{Name: "run_code", Arguments: map[string]any{"code": code}}
	if token != nil {
		params.SetProgressToken(token)
	}
	return cs.CallTool(ctx, params)
}

// runOutput is run_code's structuredContent.
type runOutput struct {
	Value json.RawMessage `json:"value"`
	Logs  []struct {
		Source, Level, Text string
	} `json:"logs"`
	Error *struct {
		Kind, Message string
	} `json:"error"`
}

func resultText(res *sdk.CallToolResult) string {
	var parts []string
	for _, c := range res.Content {
		if tc, ok := c.(*sdk.TextContent); ok {
			parts = append(parts, tc.Text)
		}
	}
	return strings.Join(parts, "\n")
}

func outputOf(t testing.TB, res *sdk.CallToolResult) runOutput {
	t.Helper()
	b, err := json.Marshal(res.StructuredContent)
	if err != nil {
		t.Fatal(err)
	}
	var out runOutput
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatalf("structuredContent %s: %v", b, err)
	}
	return out
}

// mustRun runs a program that must complete and returns its output.
func mustRun(t testing.TB, cs *sdk.ClientSession, code string) (*sdk.CallToolResult, runOutput) {
	t.Helper()
	res, err := runCode(context.Background(), cs, code, nil)
	if err != nil {
		t.Fatalf("run_code: %v", err)
	}
	out := outputOf(t, res)
	if res.IsError || out.Error != nil {
		t.Fatalf("the program failed: %s", resultText(res))
	}
	return res, out
}

// processGone waits for pid to exit (a zombie counts: it no longer runs).
func processGone(t testing.TB, pid int) {
	t.Helper()
	for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
			return
		}
		if data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid)); err == nil && strings.Contains(string(data), ") Z ") {
			return
		}
		if time.Now().After(deadline) {
			syscall.Kill(pid, syscall.SIGKILL)
			t.Fatalf("process %d is still running", pid)
		}
	}
}

// upstreamPid asks the "files" upstream for its pid through a program.
func upstreamPid(t testing.TB, cs *sdk.ClientSession) int {
	t.Helper()
	_, out := mustRun(t, cs, `return await tools["files__pid"]({})`)
	var s string
	json.Unmarshal(out.Value, &s)
	pid, err := strconv.Atoi(s)
	if err != nil {
		t.Fatalf("pid %s: %v", out.Value, err)
	}
	return pid
}

// ownedContainers lists the managed containers whose owner label starts
// with prefix.
func ownedContainers(t testing.TB, prefix string) []dcontainer.Summary {
	t.Helper()
	list, err := cli.ContainerList(context.Background(), dcontainer.ListOptions{All: true, Filters: filters.NewArgs(filters.Arg("label", container.LabelManaged+"=true"))})
	if err != nil {
		t.Fatal(err)
	}
	var out []dcontainer.Summary
	for _, c := range list {
		if strings.HasPrefix(c.Labels[container.LabelOwner], prefix) {
			out = append(out, c)
		}
	}
	return out
}

// containerOwner is the owner label of process pid's containers.
func containerOwner(pid int) string { return container.OwnerOf(pid) }

// unixHTTPClient is an HTTP client that dials the Unix socket sock.
func unixHTTPClient(sock string) *http.Client {
	return &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", sock)
	}}}
}
