package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"golang.org/x/sys/unix"

	"github.com/dsh-container/dsh-container/backend"
	"github.com/dsh-container/dsh-container/client"
	"github.com/dsh-container/dsh-container/policy"
	"github.com/dsh-container/dsh-container/registry"
)

// Approvals end to end (issue 14): policies, approvers, time-outs and
// aborts over the real container runtime, in both languages. Every case
// runs in its own env, whose cleanup fails the test if a container or a
// socket directory is left.

func mustPolicy(t *testing.T, src string) *policy.Policy {
	t.Helper()
	p, err := policy.Parse([]byte(src))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// recorder is a set of tools that record, in order, the calls that ran.
type recorder struct {
	mu  sync.Mutex
	ran []string
	at  []time.Time
}

func (r *recorder) tool(name string) registry.Tool {
	return textTool(name, func(a map[string]any) (string, error) {
		r.mu.Lock()
		defer r.mu.Unlock()
		v := fmt.Sprint(a["n"])
		if p, ok := a["path"]; ok {
			v = fmt.Sprint(p)
		}
		r.ran = append(r.ran, name+" "+v)
		r.at = append(r.at, time.Now())
		return name + " " + v, nil
	})
}

func (r *recorder) calls() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.ran...)
}

// settled renders each outcome of Promise.allSettled / gather as a
// string: the value, or "rejected: MESSAGE".
var settledPrograms = map[backend.Language]string{
	backend.TypeScript: `
const r = await Promise.allSettled([
  tools.read({n: 1}),
  tools.write({path: "/tmp/a"}),
  tools.read({n: 2}),
  tools.rm({path: "/x"}),
  tools.write({path: "/etc/passwd"}),
]);
return r.map(x => x.status === "fulfilled" ? x.value : "rejected: " + (x.reason as Error).message);`,
	backend.Python: `
import asyncio
r = await asyncio.gather(
    tools.read({"n": 1}),
    tools.write({"path": "/tmp/a"}),
    tools.read({"n": 2}),
    tools.rm({"path": "/x"}),
    tools.write({"path": "/etc/passwd"}),
    return_exceptions=True)
return [x if isinstance(x, str) else "rejected: " + str(x) for x in r]`,
}

// A policy file decides allow, deny and ask; the asked call pauses, and
// the calls issued after it in one Promise.all/gather wait behind it, in
// submission order.
func TestApprovalPolicyFileE2E(t *testing.T) {
	pol := mustPolicy(t, `{
	  "default": "deny",
	  "tools": {
	    "read": {"action": "allow"},
	    "write": [{"action": "ask", "when": [{"path": "path", "prefix": "/tmp/"}]}],
	    "rm": {"action": "deny"}
	  }
	}`)
	for _, lang := range langs {
		t.Run(string(lang), func(t *testing.T) {
			e := newEnv(t, lang, nil)
			rec := &recorder{}
			var decided time.Time
			var asked []string
			var mu sync.Mutex
			approver := registry.ApproverFunc(func(ctx context.Context, req registry.ApprovalRequest) (registry.Approval, error) {
				time.Sleep(300 * time.Millisecond) // the call, and those behind it, wait
				mu.Lock()
				defer mu.Unlock()
				asked = append(asked, req.Exec.Name+" "+string(req.Exec.Arguments))
				decided = time.Now()
				return registry.Approval{Decision: registry.DecisionAllow}, nil
			})
			var ev eventLog
			reg := registry.New(registry.WithMode(registry.ModeCode), registry.WithRuntime(e.rt), registry.WithEventSink(ev.sink),
				registry.WithGuard(pol.Guard()), registry.WithApprover(approver))
			for _, name := range []string{"read", "write", "rm"} {
				must(t, reg.Register(rec.tool(name)))
			}
			res := reg.Execute(context.Background(), codeCall("c", settledPrograms[lang]))
			if res.IsError || res.CodeRun == nil {
				t.Fatalf("%s (%v)", res.Text(), res.Err)
			}
			var got []string
			if err := json.Unmarshal(res.CodeRun.Value, &got); err != nil || len(got) != 5 {
				t.Fatalf("value %s", res.CodeRun.Value)
			}
			if got[0] != "read 1" || got[1] != "write /tmp/a" || got[2] != "read 2" ||
				!strings.Contains(got[3], `rejected: tool "rm" denied: denied by policy (tools.rm)`) ||
				!strings.Contains(got[4], `rejected: tool "write" denied: denied by policy (default)`) {
				t.Fatalf("outcomes %q", got)
			}
			if calls := rec.calls(); strings.Join(calls, "|") != "read 1|write /tmp/a|read 2" {
				t.Fatalf("ran %q", calls)
			}
			mu.Lock()
			defer mu.Unlock()
			if len(asked) != 1 || asked[0] != `write {"path":"/tmp/a"}` {
				t.Fatalf("asked %q", asked)
			}
			// read 2 was issued before the decision but ran after it.
			if rec.at[2].Before(decided) {
				t.Fatalf("read 2 ran %v before the approval", decided.Sub(rec.at[2]))
			}
			var kinds []string
			for _, e := range ev.snapshot() {
				kinds = append(kinds, fmt.Sprintf("%s:%d:%s", e.Type, e.Seq, e.Tool))
			}
			want := "tool/code-dispatch:1:read|tool/approval:2:write|tool/code-dispatch:2:write|tool/code-dispatch:3:read|tool/code-dispatch:4:rm|tool/code-dispatch:5:write"
			if strings.Join(kinds, "|") != want {
				t.Fatalf("events %s\nwant   %s", strings.Join(kinds, "|"), want)
			}
		})
	}
}

// A scripted approver: a denial with a reason is a rejection the program
// catches; allowForRun asks once for the rest of the run.
func TestApprovalScriptedApproverE2E(t *testing.T) {
	programs := map[backend.Language]string{
		backend.TypeScript: `
let denied = "";
try { await tools.fetch({n: 1}) } catch (e) { denied = (e as Error).message }
const sent = [];
for (const n of [1, 2, 3]) sent.push(await tools.mail({n}));
return {denied, sent};`,
		backend.Python: `
denied = ""
try:
    await tools.fetch({"n": 1})
except ToolCallError as e:
    denied = str(e)
sent = []
for n in [1, 2, 3]:
    sent.append(await tools.mail({"n": n}))
return {"denied": denied, "sent": sent}`,
	}
	for _, lang := range langs {
		t.Run(string(lang), func(t *testing.T) {
			e := newEnv(t, lang, nil)
			rec := &recorder{}
			var mu sync.Mutex
			var asked []string
			approver := registry.ApproverFunc(func(_ context.Context, req registry.ApprovalRequest) (registry.Approval, error) {
				mu.Lock()
				defer mu.Unlock()
				asked = append(asked, req.Exec.Name)
				if req.Exec.Name == "fetch" {
					return registry.Approval{Decision: registry.DecisionDeny, Reason: "no fetching today"}, nil
				}
				return registry.Approval{Decision: registry.DecisionAllowForRun}, nil
			})
			var ev eventLog
			reg := registry.New(registry.WithMode(registry.ModeCode), registry.WithRuntime(e.rt), registry.WithEventSink(ev.sink),
				registry.WithGuard(mustPolicy(t, `{"default":"ask"}`).Guard()), registry.WithApprover(approver))
			must(t, reg.Register(rec.tool("fetch")))
			must(t, reg.Register(rec.tool("mail")))
			res := reg.Execute(context.Background(), codeCall("c", programs[lang]))
			if res.IsError || res.CodeRun == nil {
				t.Fatalf("%s (%v)", res.Text(), res.Err)
			}
			var v struct {
				Denied string
				Sent   []string
			}
			if err := json.Unmarshal(res.CodeRun.Value, &v); err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(v.Denied, `tool "fetch" denied: no fetching today`) || strings.Join(v.Sent, ",") != "mail 1,mail 2,mail 3" {
				t.Fatalf("value %s", res.CodeRun.Value)
			}
			if calls := rec.calls(); strings.Join(calls, "|") != "mail 1|mail 2|mail 3" {
				t.Fatalf("ran %q", calls)
			}
			mu.Lock()
			defer mu.Unlock()
			if strings.Join(asked, ",") != "fetch,mail" {
				t.Fatalf("asked %q", asked)
			}
			var decisions []string
			for _, e := range ev.snapshot() {
				if e.Type == registry.EventApproval {
					decisions = append(decisions, e.Tool+":"+e.Decision+":"+e.Reason)
				}
			}
			if strings.Join(decisions, "|") != "fetch:deny:no fetching today|mail:allowForRun:" {
				t.Fatalf("decisions %q", decisions)
			}
		})
	}
}

// An approval that does not come in time is a denial; the program goes
// on.
func TestApprovalTimeoutE2E(t *testing.T) {
	programs := map[backend.Language]string{
		backend.TypeScript: `try { await tools.write({path: "/tmp/a"}); return "ran" } catch (e) { return "denied: " + (e as Error).message }`,
		backend.Python:     "try:\n    await tools.write({'path': '/tmp/a'})\n    return 'ran'\nexcept ToolCallError as e:\n    return 'denied: ' + str(e)",
	}
	for _, lang := range langs {
		t.Run(string(lang), func(t *testing.T) {
			e := newEnv(t, lang, nil)
			rec := &recorder{}
			silent := registry.ApproverFunc(func(ctx context.Context, _ registry.ApprovalRequest) (registry.Approval, error) {
				<-ctx.Done()
				return registry.Approval{}, ctx.Err()
			})
			reg := registry.New(registry.WithMode(registry.ModeCode), registry.WithRuntime(e.rt),
				registry.WithGuard(mustPolicy(t, `{"default":"ask"}`).Guard()), registry.WithApprover(silent),
				registry.WithApprovalTimeout(500*time.Millisecond))
			must(t, reg.Register(rec.tool("write")))
			start := time.Now()
			res := reg.Execute(context.Background(), codeCall("c", programs[lang]))
			if res.IsError || res.CodeRun == nil {
				t.Fatalf("%s (%v)", res.Text(), res.Err)
			}
			var v string
			json.Unmarshal(res.CodeRun.Value, &v)
			if !strings.Contains(v, "approval timed out after 500ms") || len(rec.calls()) != 0 {
				t.Fatalf("value %q, ran %q", v, rec.calls())
			}
			if d := time.Since(start); d < 500*time.Millisecond {
				t.Fatalf("the run took %v, less than the approval timeout", d)
			}
		})
	}
}

// Aborting the run while a call waits for approval ends it at once as an
// abort; the tool never runs and nothing is left (the env's cleanup).
func TestApprovalAbortWhileWaitingE2E(t *testing.T) {
	programs := map[backend.Language]string{
		backend.TypeScript: `await tools.write({path: "/tmp/a"}); return "ran"`,
		backend.Python:     "await tools.write({'path': '/tmp/a'})\nreturn 'ran'",
	}
	for _, lang := range langs {
		t.Run(string(lang), func(t *testing.T) {
			e := newEnv(t, lang, nil)
			rec := &recorder{}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			asked := make(chan struct{})
			approver := registry.ApproverFunc(func(actx context.Context, _ registry.ApprovalRequest) (registry.Approval, error) {
				close(asked)
				<-actx.Done()
				return registry.Approval{}, actx.Err()
			})
			go func() {
				<-asked
				time.Sleep(100 * time.Millisecond)
				cancel()
			}()
			reg := registry.New(registry.WithMode(registry.ModeCode), registry.WithRuntime(e.rt),
				registry.WithGuard(mustPolicy(t, `{"default":"ask"}`).Guard()), registry.WithApprover(approver))
			must(t, reg.Register(rec.tool("write")))
			start := time.Now()
			res := reg.Execute(ctx, codeCall("c", programs[lang]))
			var crf *registry.CodeRunFailedError
			if !res.IsError || !errors.As(res.Err, &crf) || crf.Kind != backend.FailureAbort {
				t.Fatalf("got %s (%v)", res.Text(), res.Err)
			}
			if d := time.Since(start); d > 15*time.Second {
				t.Fatalf("the abort took %v", d)
			}
			if calls := rec.calls(); len(calls) != 0 {
				t.Fatalf("ran %q", calls)
			}
		})
	}
}

// A session's approval round trip: serve --policy asks, the Go client's
// Approve answers, the program sees allow and deny.
func TestSessionApprovalE2E(t *testing.T) {
	pol := filepath.Join(t.TempDir(), "policy.json")
	if err := os.WriteFile(pol, []byte(`{"tools":{"greet":{"action":"ask"}}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	s := startService(t, nil, "--pool", "0", "--wall-timeout", "30s", "--policy", pol)
	programs := map[string]string{
		"typescript": `
const a = await tools.greet({name: "Ada"});
let b = "";
try { await tools.greet({name: "Bob"}) } catch (e) { b = (e as Error).message }
return [a, b];`,
		"python": `
a = await tools.greet({"name": "Ada"})
b = ""
try:
    await tools.greet({"name": "Bob"})
except ToolCallError as e:
    b = str(e)
return [a, b]`,
	}
	for lang, code := range programs {
		t.Run(lang, func(t *testing.T) {
			var mu sync.Mutex
			var asked []string
			var decisions int
			rep, err := s.client("").Run(context.Background(), client.Request{Language: lang, Code: code, ID: "ap-" + lang},
				[]client.Tool{greetTool}, client.Handlers{
					Approve: func(_ context.Context, req client.ApprovalRequest) (client.Approval, error) {
						mu.Lock()
						defer mu.Unlock()
						asked = append(asked, req.ID+" "+req.Tool+" "+string(req.Args))
						if strings.Contains(string(req.Args), "Ada") {
							return client.Approval{Decision: client.DecisionAllow}, nil
						}
						return client.Approval{Decision: client.DecisionDeny, Reason: "not Bob"}, nil
					},
					Event: func(raw json.RawMessage) {
						var e registry.Event
						if json.Unmarshal(raw, &e) == nil && e.Type == registry.EventApproval {
							mu.Lock()
							decisions++
							mu.Unlock()
						}
					},
				})
			if err != nil {
				t.Fatal(err)
			}
			var v []string
			if rep.Error != nil || json.Unmarshal(rep.Value, &v) != nil || len(v) != 2 {
				t.Fatalf("report %+v %s", rep.Error, rep.Value)
			}
			if v[0] != "hello Ada" || !strings.Contains(v[1], `tool "greet" denied: not Bob`) {
				t.Fatalf("value %q", v)
			}
			mu.Lock()
			defer mu.Unlock()
			want := fmt.Sprintf(`ap-%s:code:1 greet {"name":"Ada"}|ap-%s:code:2 greet {"name":"Bob"}`, lang, lang)
			if strings.Join(asked, "|") != want || decisions != 2 {
				t.Fatalf("asked %q, %d decision events", asked, decisions)
			}
		})
	}
	s.stop(t)
}

// The CLI: run --policy denies and allows a manifest tool by its
// arguments; an ask without --approve is a denial; --approve without a
// terminal is a usage error.
func TestRunPolicyE2E(t *testing.T) {
	bin := buildCLI(t)
	dir := t.TempDir()
	manifest := filepath.Join(dir, "tools.json")
	os.WriteFile(manifest, []byte(`{"tools":[{"name":"show","inputSchema":{"type":"object"},"command":["/bin/cat"]},{"name":"wipe","inputSchema":{"type":"object"},"command":["/bin/cat"],"annotations":{"destructiveHint":true}}]}`), 0o644)
	pol := filepath.Join(dir, "policy.json")
	os.WriteFile(pol, []byte(`{"default":"allow","tools":{"show":{"action":"deny","when":[{"path":"file","regex":".*secret.*"}]}}}`), 0o644)
	programs := map[string]string{
		"prog.ts": `
const out: string[] = [];
for (const f of ["notes", "my-secret-key"]) {
  try { out.push(await tools.show({file: f})) } catch (e) { out.push("denied: " + (e as Error).message) }
}
try { await tools.wipe({}) } catch (e) { out.push("wipe: " + (e as Error).message) }
return out;`,
		"prog.py": `
out = []
for f in ["notes", "my-secret-key"]:
    try:
        out.append(await tools.show({"file": f}))
    except ToolCallError as e:
        out.append("denied: " + str(e))
try:
    await tools.wipe({})
except ToolCallError as e:
    out.append("wipe: " + str(e))
return out`,
	}
	for name, code := range programs {
		t.Run(name, func(t *testing.T) {
			prog := filepath.Join(dir, name)
			os.WriteFile(prog, []byte(code), 0o644)
			for _, p := range []string{pol, "safe"} {
				out, err := exec.Command(bin, "run", "--json", "--tools", manifest, "--policy", p, prog).Output()
				if err != nil {
					t.Fatalf("--policy %s: %v\n%s", p, err, out)
				}
				var rep struct {
					Value []string
				}
				if err := json.Unmarshal(out, &rep); err != nil {
					t.Fatalf("%v: %s", err, out)
				}
				got := strings.Join(rep.Value, "|")
				if p == pol {
					if !strings.HasPrefix(got, `{"file":"notes"}|denied: tool "show" denied: denied by policy (tools.show)`) || strings.Contains(got, "wipe:") {
						t.Fatalf("--policy file: %q", got)
					}
				} else if !strings.Contains(got, `my-secret-key"}|wipe: tool "wipe" denied: approval required, but no approver is configured`) {
					t.Fatalf("--policy safe: %q", got)
				}
			}
		})
	}
	cmd := exec.Command(bin, "run", "--approve", filepath.Join(dir, "prog.ts"))
	cmd.SysProcAttr = noTTY()
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 2 || !strings.Contains(string(out), "--approve prompts on a terminal") {
		t.Fatalf("--approve without a terminal: %v %s", err, out)
	}
}

// noTTY starts a command in a session of its own: it has no controlling
// terminal, so /dev/tty cannot be opened.
func noTTY() *syscall.SysProcAttr { return &syscall.SysProcAttr{Setsid: true} }

// startMCPEliciting is startMCP with a client that answers elicitations,
// on a protocol version that lets a server elicit during a tool call.
func startMCPEliciting(t *testing.T, bin string, elicit func(context.Context, *sdk.ElicitRequest) (*sdk.ElicitResult, error), args ...string) *mcpProc {
	t.Helper()
	return startMCPWith(t, bin, elicit, &sdk.ClientSessionOptions{ProtocolVersion: "2025-11-25"}, args...)
}

// mcp --policy safe: a destructive command tool asks; a client with
// elicitation decides, a client without it gets a denial saying why.
func TestMCPApprovalE2E(t *testing.T) {
	bin := buildCLI(t)
	manifest := filepath.Join(t.TempDir(), "tools.json")
	os.WriteFile(manifest, []byte(`{"tools":[{"name":"wipe","inputSchema":{"type":"object"},"command":["/bin/cat"],"annotations":{"destructiveHint":true}},{"name":"show","inputSchema":{"type":"object"},"command":["/bin/cat"]}]}`), 0o644)
	const code = `
const out: string[] = [await tools.show({n: 0})];
for (const n of [1, 2]) {
  try { out.push(await tools.wipe({n})) } catch (e) { out.push("denied: " + (e as Error).message) }
}
return out;`
	t.Run("elicitation", func(t *testing.T) {
		var mu sync.Mutex
		var messages []string
		p := startMCPEliciting(t, bin, func(_ context.Context, req *sdk.ElicitRequest) (*sdk.ElicitResult, error) {
			mu.Lock()
			defer mu.Unlock()
			messages = append(messages, req.Params.Message)
			if strings.Contains(req.Params.Message, `{"n":1}`) {
				return &sdk.ElicitResult{Action: "accept", Content: map[string]any{"decision": "allow"}}, nil
			}
			return &sdk.ElicitResult{Action: "accept", Content: map[string]any{"decision": "deny", "reason": "keep 2"}}, nil
		}, "--tools", manifest, "--policy", "safe", "--pool", "0")
		res, out := mustRun(t, p.cs, code)
		if res.IsError {
			t.Fatalf("%s", resultText(res))
		}
		var v []string
		json.Unmarshal(out.Value, &v)
		if len(v) != 3 || v[0] != `{"n":0}` || v[1] != `{"n":1}` || !strings.Contains(v[2], `tool "wipe" denied: keep 2`) {
			t.Fatalf("value %s", out.Value)
		}
		mu.Lock()
		defer mu.Unlock()
		if len(messages) != 2 || !strings.Contains(messages[0], `tool "wipe"`) {
			t.Fatalf("elicitations %q", messages)
		}
	})
	t.Run("no elicitation", func(t *testing.T) {
		p := startMCP(t, bin, "--tools", manifest, "--policy", "safe", "--pool", "0")
		res, out := mustRun(t, p.cs, code)
		if res.IsError {
			t.Fatalf("%s", resultText(res))
		}
		var v []string
		json.Unmarshal(out.Value, &v)
		if len(v) != 3 || v[0] != `{"n":0}` || !strings.Contains(v[1], "the MCP client does not support elicitation") {
			t.Fatalf("value %s", out.Value)
		}
	})
}

// openPTY opens a pseudo-terminal pair: the test holds the master, the
// command gets the slave as its controlling terminal.
func openPTY(t *testing.T) (master, slave *os.File) {
	t.Helper()
	m, err := os.OpenFile("/dev/ptmx", os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Skipf("no pseudo-terminals here: %v", err)
	}
	if err := unix.IoctlSetPointerInt(int(m.Fd()), unix.TIOCSPTLCK, 0); err != nil {
		m.Close()
		t.Fatal(err)
	}
	n, err := unix.IoctlGetInt(int(m.Fd()), unix.TIOCGPTN)
	if err != nil {
		m.Close()
		t.Fatal(err)
	}
	s, err := os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		m.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close(); s.Close() })
	return m, s
}

// run --approve on a real terminal: the prompt shows the tool and its
// arguments neutralised; "y" allows, "n" denies, "a" allows the tool for
// the rest of the run.
func TestRunApproveTTYE2E(t *testing.T) {
	bin := buildCLI(t)
	dir := t.TempDir()
	manifest := filepath.Join(dir, "tools.json")
	os.WriteFile(manifest, []byte(`{"tools":[{"name":"show","inputSchema":{"type":"object"},"command":["/bin/cat"]},{"name":"note","inputSchema":{"type":"object"},"command":["/bin/cat"]}]}`), 0o644)
	prog := filepath.Join(dir, "prog.ts")
	os.WriteFile(prog, []byte(`
const out: string[] = [];
for (const f of ["\u001b]0;pwned\u0007a", "b"]) {
  try { out.push(await tools.show({file: f})) } catch (e) { out.push("denied: " + (e as Error).message) }
}
for (const n of [1, 2, 3]) out.push(await tools.note({n}));
return out;`), 0o644)
	master, slave := openPTY(t)
	cmd := exec.Command(bin, "run", "--json", "--approve", "--tools", manifest, prog)
	var stdout, stderr strings.Builder
	cmd.Stdin, cmd.Stdout, cmd.Stderr = slave, &stdout, &stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	slave.Close()
	var screen strings.Builder
	answers := []string{"y\n", "n\n", "a\n"}
	done := make(chan struct{})
	go func() {
		defer close(done)
		buf := make([]byte, 4096)
		asked := 0
		for {
			n, err := master.Read(buf)
			screen.Write(buf[:n])
			for asked < len(answers) && strings.Count(screen.String(), "allow? ") > asked {
				master.WriteString(answers[asked])
				asked++
			}
			if err != nil {
				return
			}
		}
	}()
	err := cmd.Wait()
	master.Close()
	<-done
	if err != nil {
		t.Fatalf("run: %v\nstderr: %s\nterminal: %q", err, stderr.String(), screen.String())
	}
	var rep struct{ Value []string }
	if err := json.Unmarshal([]byte(stdout.String()), &rep); err != nil {
		t.Fatalf("%v: %s", err, stdout.String())
	}
	got := strings.Join(rep.Value, "|")
	want := `{"file":"\u001b]0;pwned\u0007a"}|denied: tool "show" denied: denied at the terminal|{"n":1}|{"n":2}|{"n":3}`
	if got != want {
		t.Fatalf("value %q\nwant  %q", got, want)
	}
	term := screen.String()
	if strings.Count(term, "allow? ") != 3 {
		t.Fatalf("%d prompts (note asked once, then allowed for the run): %q", strings.Count(term, "allow? "), term)
	}
	if strings.Contains(term, "\x1b]0;") || strings.Contains(term, "\x07") {
		t.Fatalf("the program's control characters reached the terminal: %q", term)
	}
	if !strings.Contains(term, `the program calls tool show`) || !strings.Contains(term, `arguments: {"file":"\u001b]0;pwned\u0007a"}`) {
		t.Fatalf("prompt: %q", term)
	}
}
