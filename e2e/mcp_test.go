package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/dsh-container/dsh-container/backend/container/containertest"
	"github.com/dsh-container/dsh-container/internal/testenv"
)

// `dsh-container mcp` end to end (issue 12): the go-sdk's own client
// spawns it over stdio (or connects over streamable HTTP); its upstreams
// are a stdio MCP server (testdata/mcpupstream, "files") and a streamable
// HTTP one in this process ("web"), both written with the go-sdk. Every
// case checks, when the client closes the session, that the process
// exited 0 and left no container, socket directory or upstream process.

// tools/list in each mode; a tool added upstream reaches the client as
// tools/list_changed.
func TestMCPToolsList(t *testing.T) {
	bin, upstream := buildCLI(t), buildUpstream(t)
	web := startWebUpstream(t)
	tools := writeManifest(t, upstream, web)

	native := startMCP(t, bin, "--mode", "native", "--tools", tools)
	list, err := native.cs.ListTools(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tool := range list.Tools {
		names = append(names, tool.Name)
		if tool.Name == "files__list_items" {
			out, _ := json.Marshal(tool.OutputSchema)
			if !strings.Contains(string(out), `"items"`) || tool.Annotations == nil || !tool.Annotations.ReadOnlyHint || tool.Description != "List the catalogue's items." {
				t.Errorf("files__list_items = %+v %s", tool, out)
			}
		}
	}
	want := "files__crash files__fail files__get_item files__list_items files__pid files__strict web__hold web__lookup"
	if strings.Join(names, " ") != want {
		t.Errorf("native tools/list = %v, want %s", names, want)
	}
	// A native call goes straight to the upstream.
	res, err := native.cs.CallTool(t.Context(), &sdk.CallToolParams{Name: "web__lookup", Arguments: map[string]any{"name": "x"}})
	if err != nil || res.IsError || resultText(res) != "web says X" {
		t.Errorf("native call: %v %+v", err, res)
	}
	// The HTTP upstream grows a tool: the client hears of it.
	web.addTool("later")
	for deadline := time.Now().Add(15 * time.Second); native.changed.Load() == 0; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("no notifications/tools/list_changed after an upstream's tools changed")
		}
	}
	if list, err = native.cs.ListTools(t.Context(), nil); err != nil || !slices.ContainsFunc(list.Tools, func(tool *sdk.Tool) bool { return tool.Name == "web__later" }) {
		t.Errorf("web__later is not listed: %v", err)
	}
	pid := upstreamPidNative(t, native.cs)
	native.stop()
	processGone(t, pid)

	for _, c := range []struct{ mode, lang, sdkText string }{
		{"code", "typescript", `"files__list_items": (args: {`},
		{"both", "python", "async def files__list_items(self, args: FilesListItemsArgs) -> FilesListItemsOutput:"},
	} {
		p := startMCP(t, bin, "--mode", c.mode, "--lang", c.lang, "--tools", tools, "--pool", "0")
		list, err := p.cs.ListTools(t.Context(), nil)
		if err != nil {
			t.Fatal(err)
		}
		var runCode *sdk.Tool
		for _, tool := range list.Tools {
			if tool.Name == "run_code" {
				runCode = tool
			}
		}
		switch {
		case runCode == nil:
			t.Fatalf("%s: no run_code in %d tools", c.mode, len(list.Tools))
		case c.mode == "code" && len(list.Tools) != 1, c.mode == "both" && len(list.Tools) != 10:
			t.Errorf("%s: %d tools", c.mode, len(list.Tools))
		}
		in, _ := json.Marshal(runCode.InputSchema)
		if !strings.Contains(runCode.Description, c.sdkText) || !strings.Contains(string(in), `"required":["code"]`) {
			t.Errorf("%s/%s: run_code = %s\n%s", c.mode, c.lang, in, runCode.Description)
		}
	}
}

// addTool adds a tool to the HTTP upstream at run time.
func (w *webUpstream) addTool(name string) {
	sdk.AddTool(w.server, &sdk.Tool{Name: name, Description: "Added later."},
		func(context.Context, *sdk.CallToolRequest, any) (*sdk.CallToolResult, any, error) {
			return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "late"}}}, nil, nil
		})
}

func upstreamPidNative(t *testing.T, cs *sdk.ClientSession) int {
	t.Helper()
	res, err := cs.CallTool(t.Context(), &sdk.CallToolParams{Name: "files__pid"})
	if err != nil || res.IsError {
		t.Fatalf("files__pid: %v %+v", err, res)
	}
	var pid int
	fmt.Sscan(resultText(res), &pid)
	return pid
}

// A TypeScript and a Python program each loop over the stdio upstream's
// typed results and call the HTTP upstream for each; an upstream error
// and arguments an upstream's schema rejects are rejections the program
// catches, and the run goes on; logs stream as progress notifications.
func TestMCPPrograms(t *testing.T) {
	bin, upstream := buildCLI(t), buildUpstream(t)
	web := startWebUpstream(t)
	tools := writeManifest(t, upstream, web)
	programs := map[string]string{
		"typescript": `
const listing = await tools["files__list_items"]({});
const found: string[] = [];
for (const item of listing.items) {
  const said: string = await tools["web__lookup"]({ name: item.name });
  console.log(item.id + ": " + said);
  found.push(said);
}
let failure = "";
try { await tools["files__fail"]({}); } catch (e) { failure = (e as any).toolName + ": " + (e as Error).message; }
let rejected = "";
try { await tools["files__strict"]({ n: "two" }); } catch (e) { rejected = (e as Error).message; }
const doubled = await tools["files__strict"]({ n: 21 });
return { total: listing.total, found, failure, rejected, doubled };
`,
		"python": `
listing = await tools.files__list_items({})
found = []
for item in listing["items"]:
    said = await tools.web__lookup({"name": item["name"]})
    print(f"{item['id']}: {said}")
    found.append(said)
try:
    await tools.files__fail({})
    failure = ""
except ToolCallError as e:
    failure = e.tool_name + ": " + str(e)
try:
    await tools.files__strict({"n": "two"})
    rejected = ""
except ToolCallError as e:
    rejected = str(e)
doubled = await tools["files__strict"]({"n": 21})
return {"total": listing["total"], "found": found, "failure": failure, "rejected": rejected, "doubled": doubled}
`,
	}
	underEachRuntime(t, func(t *testing.T, ociRuntime string) {
		for _, lang := range []string{"typescript", "python"} {
			t.Run(lang, func(t *testing.T) {
				before := web.calls.Load()
				p := startMCP(t, bin, append([]string{"--lang", lang, "--tools", tools, "--pool", "1"}, runtimeFlag(ociRuntime)...)...)
				res, err := runCode(t.Context(), p.cs, programs[lang], "progress-"+lang)
				if err != nil {
					t.Fatal(err)
				}
				out := outputOf(t, res)
				if res.IsError || out.Error != nil {
					t.Fatalf("the program failed: %s", resultText(res))
				}
				var v struct {
					Total                      int
					Found                      []string
					Failure, Rejected, Doubled string
				}
				if err := json.Unmarshal(out.Value, &v); err != nil {
					t.Fatalf("value %s: %v", out.Value, err)
				}
				if v.Total != 3 || strings.Join(v.Found, ",") != "web says ALPHA,web says BETA,web says GAMMA" || v.Doubled != "42" {
					t.Errorf("value = %s", out.Value)
				}
				if v.Failure != "files__fail: the upstream refuses: quota exceeded" {
					t.Errorf("the upstream's error reached the program as %q", v.Failure)
				}
				if !strings.Contains(v.Rejected, "validating") || !strings.Contains(v.Rejected, "n") {
					t.Errorf("the schema's rejection reached the program as %q", v.Rejected)
				}
				if got := web.calls.Load() - before; got != 3 {
					t.Errorf("the web upstream got %d calls, want 3", got)
				}
				wantLogs := []string{"1: web says ALPHA", "2: web says BETA", "3: web says GAMMA"}
				var logs []string
				for _, l := range out.Logs {
					logs = append(logs, strings.TrimSuffix(l.Text, "\n"))
				}
				if !slices.Equal(logs, wantLogs) {
					t.Errorf("logs = %q", logs)
				}
				if text := resultText(res); !strings.HasPrefix(text, strings.Join(wantLogs, "\n")+"\n{") || !strings.Contains(text, `"total":3`) {
					t.Errorf("text content = %q", text)
				}
				for deadline := time.Now().Add(5 * time.Second); !slices.Equal(p.progressMessages(), wantLogs); time.Sleep(10 * time.Millisecond) {
					if time.Now().After(deadline) {
						t.Errorf("progress notifications = %q, want %q", p.progressMessages(), wantLogs)
						break
					}
				}
				// A program that throws: an error result with its kind.
				res, err = runCode(t.Context(), p.cs, map[string]string{"typescript": `throw new Error("no luck")`, "python": `raise ValueError("no luck")`}[lang], nil)
				if err != nil || !res.IsError || outputOf(t, res).Error == nil || outputOf(t, res).Error.Kind != "exception" || !strings.Contains(resultText(res), "no luck") {
					t.Errorf("a failing program: %v %+v", err, res)
				}
				if lang == "python" {
					// The run went where --runtime said: gVisor's Sentry
					// has a /proc/sentry-meminfo, Linux has not.
					res, err = runCode(t.Context(), p.cs, "import os\nreturn os.path.exists('/proc/sentry-meminfo')", nil)
					if err != nil || res.IsError || string(outputOf(t, res).Value) != fmt.Sprint(ociRuntime == containertest.GVisor) {
						t.Errorf("under %q, /proc/sentry-meminfo exists: %s (%v)", ociRuntime, resultText(res), err)
					}
				}
				pid := upstreamPid(t, p.cs)
				p.stop()
				processGone(t, pid)
			})
		}
	})
}

// An upstream that crashes in the middle of a program: the call in flight
// is rejected with a clear message, and the next call reaches a new
// process of the same server, within the same run.
func TestMCPUpstreamCrashThenRecover(t *testing.T) {
	bin, upstream := buildCLI(t), buildUpstream(t)
	p := startMCP(t, bin, "--tools", writeManifest(t, upstream, nil), "--pool", "1")
	first := upstreamPid(t, p.cs)
	_, out := mustRun(t, p.cs, `
const before = await tools["files__pid"]({});
let crash = "";
try { await tools["files__crash"]({}); } catch (e) { crash = (e as Error).message; }
const after = await tools["files__pid"]({});
const listing = await tools["files__list_items"]({ prefix: "g" });
return { before, crash, after, names: listing.items.map((i: any) => i.name) };
`)
	var v struct {
		Before, Crash, After string
		Names                []string
	}
	json.Unmarshal(out.Value, &v)
	for _, want := range []string{`MCP server "files" disconnected during the call to "crash" (it is restarted on the next call)`, "exit status 139", "segmentation fault (simulated)"} {
		if !strings.Contains(v.Crash, want) {
			t.Errorf("the crash reached the program as %q, without %q", v.Crash, want)
		}
	}
	if v.Before != fmt.Sprint(first) || v.After == v.Before || v.After == "" || strings.Join(v.Names, ",") != "gamma" {
		t.Errorf("value = %s (first pid %d)", out.Value, first)
	}
	processGone(t, first)
	var second int
	fmt.Sscan(v.After, &second)
	p.stop()
	processGone(t, second)
}

// Client cancellation (notifications/cancelled) aborts the run and its
// container is removed; the session goes on.
func TestMCPCancel(t *testing.T) {
	bin := buildCLI(t)
	p := startMCP(t, bin, "--pool", "0", "--wall-timeout", "2m")
	ctx, cancel := context.WithCancel(t.Context())
	errc := make(chan error, 1)
	go func() {
		_, err := runCode(ctx, p.cs, `await new Promise(r => setTimeout(r, 110000)); return "too late"`, nil)
		errc <- err
	}()
	for deadline := time.Now().Add(time.Minute); len(ownedContainers(t, p.owner)) == 0; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the program's container never appeared")
		}
	}
	start := time.Now()
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Errorf("the cancelled call returned %v", err)
	}
	for deadline := time.Now().Add(30 * time.Second); len(ownedContainers(t, p.owner)) != 0; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the container is still there 30 s after the call was cancelled")
		}
	}
	t.Logf("container gone %v after the cancellation", time.Since(start))
	if _, out := mustRun(t, p.cs, `return 40 + 2`); string(out.Value) != "42" {
		t.Errorf("after the cancellation: %s", out.Value)
	}
}

// 20 run_code calls at once on one session, with admission at 3: all
// complete, at most 3 programs run (and call the upstream) at once.
func TestMCPConcurrentRuns(t *testing.T) {
	bin, upstream := buildCLI(t), buildUpstream(t)
	web := startWebUpstream(t)
	p := startMCP(t, bin, "--tools", writeManifest(t, upstream, web), "--pool", "1", "--max-runs", "3", "--queue", "32", "--wall-timeout", "2m")
	const n = 20
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() {
			res, err := runCode(t.Context(), p.cs, fmt.Sprintf(`await tools["web__hold"]({ ms: 300 }); return %d`, i), nil)
			switch {
			case err != nil:
				errs[i] = err
			case res.IsError:
				errs[i] = errors.New(resultText(res))
			case string(outputOf(t, res).Value) != fmt.Sprint(i):
				errs[i] = fmt.Errorf("value %s", outputOf(t, res).Value)
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	if m := web.maxInFlight.Load(); m < 1 || m > 3 {
		t.Errorf("%d programs called the upstream at once; admission allows 3", m)
	}
	t.Logf("at most %d programs at once", web.maxInFlight.Load())
}

// Over streamable HTTP on a Unix socket: tools/list and a program; SIGTERM
// stops the server, which removes its socket and containers.
func TestMCPStreamableHTTP(t *testing.T) {
	bin, upstream := buildCLI(t), buildUpstream(t)
	xdg, err := os.MkdirTemp("", "dshh")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(xdg) })
	sock := filepath.Join(xdg, "mcp.sock")
	stderr := &testenv.LockedBuffer{}
	cmd := exec.Command(bin, "mcp", "--listen", "unix://"+sock, "--lang", "python", "--tools", writeManifest(t, upstream, nil))
	cmd.Env = append(os.Environ(), "XDG_RUNTIME_DIR="+xdg)
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	owner := ""
	t.Cleanup(func() {
		cmd.Process.Kill()
		if t.Failed() {
			t.Logf("log:\n%s", stderr.String())
		}
	})
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(50 * time.Millisecond) {
		if _, err := os.Stat(sock); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no socket; log:\n%s", stderr.String())
		}
	}
	owner = containerOwner(cmd.Process.Pid)
	hc := unixHTTPClient(sock)
	client := sdk.NewClient(&sdk.Implementation{Name: "e2e-http"}, nil)
	cs, err := client.Connect(t.Context(), &sdk.StreamableClientTransport{Endpoint: "http://localhost/mcp", HTTPClient: hc}, nil)
	if err != nil {
		t.Fatal(err)
	}
	list, err := cs.ListTools(t.Context(), nil)
	if err != nil || len(list.Tools) != 1 || !strings.Contains(list.Tools[0].Description, "class FilesListItemsOutput(TypedDict):") {
		t.Fatalf("tools/list over HTTP: %v %+v", err, list)
	}
	_, out := mustRun(t, cs, "items = (await tools.files__list_items({}))['items']\nreturn [i['name'] for i in items]")
	if string(out.Value) != `["alpha","beta","gamma"]` {
		t.Errorf("value = %s", out.Value)
	}
	pid := upstreamPid(t, cs)
	cs.Close()
	cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-exited:
		if err != nil {
			t.Errorf("exited with %v", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("no exit after SIGTERM")
	}
	processGone(t, pid)
	if left := ownedContainers(t, owner); len(left) != 0 {
		t.Errorf("left %d containers", len(left))
	}
	if _, err := os.Stat(sock); !os.IsNotExist(err) {
		t.Errorf("the socket is still there: %v", err)
	}
	if dirs, _ := os.ReadDir(filepath.Join(xdg, "dsh-container")); len(dirs) != 0 {
		t.Errorf("socket directories left: %v", dirs)
	}
}

// Bad input: a malformed mcpServers entry and an upstream that cannot
// start are exit 2 naming the server (the field, the stderr tail); doctor
// --tools lists each upstream as reachable or not; a non-loopback --listen
// is refused.
func TestMCPBadInput(t *testing.T) {
	bin, upstream := buildCLI(t), buildUpstream(t)
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		os.WriteFile(p, []byte(content), 0o644)
		return p
	}
	run := func(args ...string) (int, string) {
		cmd := exec.Command(bin, args...)
		cmd.Env = append(os.Environ(), "XDG_RUNTIME_DIR="+dir)
		out, _ := cmd.CombinedOutput()
		return cmd.ProcessState.ExitCode(), string(out)
	}
	for _, c := range []struct {
		name, manifest string
		want           []string
	}{
		{"command type", `{"mcpServers":{"files":{"command":["npx","server"]}}}`, []string{`mcpServers "files": command: expected a string, got a JSON array`}},
		{"unknown field", `{"mcpServers":{"web":{"url":"https://h/mcp","header":{}}}}`, []string{`mcpServers "web": unknown field "header"`}},
		{"neither", `{"mcpServers":{"x":{"args":["a"]}}}`, []string{`mcpServers "x": needs "command" (a stdio server) or "url"`}},
		{"does not start", fmt.Sprintf(`{"mcpServers":{"files":{"command":%q,"args":["fail-at-start"]}}}`, upstream),
			[]string{`MCP server "files"`, "exit status 2", "cannot read /etc/catalogue.db: permission denied"}},
	} {
		for _, cmd := range [][]string{{"mcp", "--mode", "native"}, {"run", "--lang", "python", "-"}, {"serve", "--listen", "unix://" + filepath.Join(dir, "s.sock")}} {
			code, out := run(append(cmd, "--tools", write("m.json", c.manifest))...)
			if code != 2 {
				t.Errorf("%s, %s: exit %d, want 2:\n%s", c.name, cmd[0], code, out)
			}
			for _, w := range c.want {
				if !strings.Contains(out, w) {
					t.Errorf("%s, %s: output lacks %q:\n%s", c.name, cmd[0], w, out)
				}
			}
		}
	}
	code, out := run("doctor", "--tools", write("d.json", fmt.Sprintf(`{"mcpServers":{"good":{"command":%q},"bad":{"command":%q,"args":["fail-at-start"]},"gone":{"url":"http://127.0.0.1:1/mcp"}}}`, upstream, upstream)))
	for _, want := range []string{
		`ok    MCP server "good" (stdio ` + upstream + `) reachable, 6 tools`,
		`FAIL  MCP server "bad" (stdio ` + upstream + `) is not reachable`,
		"permission denied",
		`FAIL  MCP server "gone" (http http://127.0.0.1:1/mcp) is not reachable`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("doctor output lacks %q:\n%s", want, out)
		}
	}
	if code == 0 {
		t.Errorf("doctor exited 0 with an unreachable server:\n%s", out)
	}
	if code, out := run("mcp", "--listen", "tcp://0.0.0.0:0", "--mode", "native"); code != 2 || !strings.Contains(out, "loopback") {
		t.Errorf("a non-loopback --listen: %d %s", code, out)
	}
	if code, out := run("run", "--mode", "native", "-"); code != 2 || !strings.Contains(out, "nothing to run") {
		t.Errorf("run --mode native: %d %s", code, out)
	}
}
