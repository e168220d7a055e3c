package containertest

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dsh-container/dsh-container/backend"
	"github.com/dsh-container/dsh-container/backend/container"
)

// scenario is one conformance case: a program per language and a check
// that holds for both.
type scenario struct {
	name     string
	programs map[backend.Language]string
	bindings func(t *testing.T) []backend.BindingNamespace
	limits   func(*container.Limits)
	check    func(t *testing.T, lang backend.Language, res backend.RunResult)
}

var scenarios = []scenario{
	{
		name: "value and log capture",
		programs: both(`
console.log("hello", 1, {a: 2});
console.warn("careful");
console.error("bad");
process.stdout.write("raw out\n");
return {answer: 42, list: [1, "two", null]};`, `
import logging, sys
print("hello", 1)
logging.warning("careful")
logging.error("bad")
sys.stdout.write("raw out\n")
return {"answer": 42, "list": [1, "two", None]}`),
		check: func(t *testing.T, lang backend.Language, res backend.RunResult) {
			wantValue(t, res, `{"answer":42,"list":[1,"two",null]}`)
			if res.ValueKind != backend.ValueJSON {
				t.Fatalf("value kind %q", res.ValueKind)
			}
			var texts []string
			levels := map[string]backend.LogLevel{}
			for _, e := range res.Logs {
				texts = append(texts, strings.TrimRight(e.Text, "\n"))
				levels[strings.TrimRight(e.Text, "\n")] = e.Level
			}
			all := strings.Join(texts, "|")
			for _, want := range []string{"careful", "bad", "raw out"} {
				if !strings.Contains(all, want) {
					t.Fatalf("logs %q lack %q", all, want)
				}
			}
			if levels["careful"] != backend.LevelWarn || levels["bad"] != backend.LevelError {
				t.Fatalf("levels: %+v", res.Logs)
			}
		},
	},
	{
		name: "top-level await and no return value",
		programs: both(`await new Promise(r => setTimeout(r, 10)); console.log("done")`,
			"import asyncio\nawait asyncio.sleep(0.01)\nprint('done')"),
		check: func(t *testing.T, lang backend.Language, res backend.RunResult) {
			ok(t, res)
			if res.Value != nil || res.ValueKind != backend.ValueNone {
				t.Fatalf("value %s kind %q", res.Value, res.ValueKind)
			}
		},
	},
	{
		name:     "non-JSON value crosses as its rendering",
		programs: both(`return new Map([["a", 1]])`, `return {1, 2, 3}`),
		check: func(t *testing.T, lang backend.Language, res backend.RunResult) {
			ok(t, res)
			var s string
			if res.ValueKind != backend.ValueInspect || json.Unmarshal(res.Value, &s) != nil {
				t.Fatalf("value %s kind %q", res.Value, res.ValueKind)
			}
			want := map[backend.Language]string{backend.TypeScript: "Map(1) { 'a' => 1 }", backend.Python: "{1, 2, 3}"}[lang]
			if s != want {
				t.Fatalf("rendering %q, want %q", s, want)
			}
		},
	},
	{
		name: "exception names the program's own line",
		programs: both("interface A { a: number }\n\nconst x: A = { a: 1 }\nif (x.a) {\n  throw new Error('boom')\n}\n",
			"x = 1\n\nif x:\n    pass\n    raise ValueError('boom')\n"),
		check: func(t *testing.T, lang backend.Language, res backend.RunResult) {
			want := map[backend.Language]string{backend.TypeScript: "program.ts:5:", backend.Python: `"program.py", line 5`}[lang]
			wantFailure(t, res, backend.FailureException, "boom", want)
		},
	},
	{
		name:     "syntax error",
		programs: both("const a = 1\nconst b = ;\n", "a = 1\nb = (\n"),
		check: func(t *testing.T, lang backend.Language, res backend.RunResult) {
			want := map[backend.Language]string{backend.TypeScript: "program.ts:2:", backend.Python: "line 2"}[lang]
			wantFailure(t, res, backend.FailureException, "SyntaxError", want)
			if lang == backend.TypeScript && res.Stats.Startup != 0 {
				t.Fatal("a TypeScript syntax error started a container")
			}
		},
	},
	{
		name: "binding round trip with arguments and a structured value",
		programs: both(`
const r = await tools.lookup({ id: 7, tags: ["a", "b"] });
const s = await tools["odd-name"](null);
return { r, s };`, `
r = await tools.lookup({"id": 7, "tags": ["a", "b"]})
s = await tools["odd-name"](None)
return {"r": r, "s": s}`),
		bindings: func(t *testing.T) []backend.BindingNamespace {
			return tools(map[string]backend.BindingFunc{
				"lookup": func(_ context.Context, args json.RawMessage) (json.RawMessage, error) {
					var in struct {
						ID   int      `json:"id"`
						Tags []string `json:"tags"`
					}
					if err := json.Unmarshal(args, &in); err != nil {
						return nil, err
					}
					return json.Marshal(map[string]any{"id": in.ID * 2, "tags": append(in.Tags, "c"), "nested": map[string]any{"ok": true}})
				},
				"odd-name": echo,
			})
		},
		check: func(t *testing.T, lang backend.Language, res backend.RunResult) {
			wantValue(t, res, `{"r":{"id":14,"tags":["a","b","c"],"nested":{"ok":true}},"s":null}`)
			if res.Stats.Calls != 2 {
				t.Fatalf("calls %d", res.Stats.Calls)
			}
		},
	},
	{
		name: "prototype-named tools are ordinary members",
		programs: ts(`
const a = await tools["__proto__"]({ x: 1 });
const b = await tools.constructor({ y: 2 });
const c = await tools.toString({ z: 3 });
return [a, b, c, Object.getPrototypeOf(tools)];`),
		bindings: func(t *testing.T) []backend.BindingNamespace {
			return tools(map[string]backend.BindingFunc{"__proto__": echo, "constructor": echo, "toString": echo})
		},
		check: func(t *testing.T, lang backend.Language, res backend.RunResult) {
			wantValue(t, res, `[{"x":1},{"y":2},{"z":3},null]`)
		},
	},
	{
		name: "a binding rejection is caught by the program",
		programs: both(`
try { await tools.fail({}); return "not thrown" }
catch (e) { return { message: (e as Error).message, tool: (e as any).toolName } }`, `
try:
    await tools.fail({})
    return "not thrown"
except ToolCallError as e:
    return {"message": str(e), "tool": e.tool_name}`),
		bindings: func(t *testing.T) []backend.BindingNamespace {
			return tools(map[string]backend.BindingFunc{"fail": func(context.Context, json.RawMessage) (json.RawMessage, error) {
				return nil, errors.New("no such record")
			}})
		},
		check: func(t *testing.T, lang backend.Language, res backend.RunResult) {
			wantValue(t, res, `{"message":"no such record","tool":"fail"}`)
		},
	},
	{
		name: "an unknown binding name is a program-side error",
		programs: both(`
try { await (tools as any).nope({}); return "called" } catch (e) { return String(e) }`, `
try:
    await tools.nope({})
    return "called"
except Exception as e:
    return type(e).__name__`),
		bindings: func(t *testing.T) []backend.BindingNamespace { return tools(map[string]backend.BindingFunc{"a": echo}) },
		check: func(t *testing.T, lang backend.Language, res backend.RunResult) {
			ok(t, res)
			if strings.Contains(string(res.Value), "called") || res.Stats.Calls != 0 {
				t.Fatalf("unknown binding was called: %s", res.Value)
			}
		},
	},
	{
		name: "concurrent calls are served and matched by id",
		programs: both(`
const rs = await Promise.all([1, 2, 3, 4, 5].map(n => tools.slow({ n })));
return rs;`, `
import asyncio
rs = await asyncio.gather(*[tools.slow({"n": n}) for n in [1, 2, 3, 4, 5]])
return list(rs)`),
		bindings: func(t *testing.T) []backend.BindingNamespace {
			return tools(map[string]backend.BindingFunc{"slow": func(_ context.Context, args json.RawMessage) (json.RawMessage, error) {
				var in struct{ N int }
				json.Unmarshal(args, &in)
				// Later calls finish first: results arrive out of order.
				time.Sleep(time.Duration(6-in.N) * 15 * time.Millisecond)
				return json.Marshal(in.N * 10)
			}})
		},
		check: func(t *testing.T, lang backend.Language, res backend.RunResult) {
			wantValue(t, res, `[10,20,30,40,50]`)
		},
	},
	{
		name: "no network: no interface but loopback, TCP, DNS and HTTP fail",
		programs: both(`
const os = await import("node:os");
const net = await import("node:net");
const dns = await import("node:dns/promises");
const out: Record<string, string> = {};
out.ifaces = Object.keys(os.networkInterfaces()).sort().join(",");
out.tcp = await new Promise<string>(res => {
  const s = net.connect({ host: "192.0.2.1", port: 80 });
  s.on("connect", () => res("connected"));
  s.on("error", e => res("error " + (e as any).code));
  setTimeout(() => res("timeout"), 3000);
});
out.dns = await dns.lookup("dsh-probe.invalid").then(() => "resolved", e => "error " + e.code);
out.fetch = await fetch("http://192.0.2.1/").then(() => "fetched", e => "error");
return out;`, `
import socket, urllib.request
out = {}
out["ifaces"] = ",".join(sorted(name for _, name in socket.if_nameindex()))
try:
    socket.create_connection(("192.0.2.1", 80), timeout=3)
    out["tcp"] = "connected"
except OSError as e:
    out["tcp"] = "error " + type(e).__name__
try:
    socket.getaddrinfo("dsh-probe.invalid", 80)
    out["dns"] = "resolved"
except OSError as e:
    out["dns"] = "error " + type(e).__name__
try:
    urllib.request.urlopen("http://192.0.2.1/", timeout=3)
    out["fetch"] = "fetched"
except Exception as e:
    out["fetch"] = "error"
return out`),
		check: func(t *testing.T, lang backend.Language, res backend.RunResult) {
			ok(t, res)
			var out map[string]string
			json.Unmarshal(res.Value, &out)
			if out["ifaces"] != "lo" {
				t.Fatalf("interfaces %q, want only lo", out["ifaces"])
			}
			for _, k := range []string{"tcp", "dns", "fetch"} {
				if !strings.HasPrefix(out[k], "error") {
					t.Fatalf("%s: %q (all: %v)", k, out[k], out)
				}
			}
		},
	},
	{
		name: "root is read-only, /tmp is writable but not executable, uid is not 0",
		programs: both(`
const fs = await import("node:fs");
const { execFileSync } = await import("node:child_process");
const out: Record<string, unknown> = { uid: process.getuid!(), gid: process.getgid!() };
for (const p of ["/etc/x", "/x", "/opt/dsh/x", "/run/dsh/x"]) {
  try { fs.writeFileSync(p, "x"); out[p] = "written" } catch (e) { out[p] = (e as any).code }
}
fs.writeFileSync("/tmp/ok.sh", "#!/bin/sh\necho hi\n", { mode: 0o755 });
out.tmp = fs.readFileSync("/tmp/ok.sh", "utf8").length;
try { execFileSync("/tmp/ok.sh"); out.exec = "ran" } catch (e) { out.exec = (e as any).code }
return out;`, `
import os, subprocess
out = {"uid": os.getuid(), "gid": os.getgid()}
for p in ["/etc/x", "/x", "/opt/dsh/x", "/run/dsh/x"]:
    try:
        open(p, "w").write("x")
        out[p] = "written"
    except OSError as e:
        out[p] = type(e).__name__
with open("/tmp/ok.sh", "w") as f:
    f.write("#!/bin/sh\necho hi\n")
os.chmod("/tmp/ok.sh", 0o755)
out["tmp"] = len(open("/tmp/ok.sh").read())
try:
    subprocess.run(["/tmp/ok.sh"], check=True)
    out["exec"] = "ran"
except OSError as e:
    out["exec"] = type(e).__name__
return out`),
		check: func(t *testing.T, lang backend.Language, res backend.RunResult) {
			ok(t, res)
			var out map[string]any
			json.Unmarshal(res.Value, &out)
			if out["uid"] != float64(65532) || out["gid"] != float64(65532) {
				t.Fatalf("uid/gid %v/%v", out["uid"], out["gid"])
			}
			for _, p := range []string{"/etc/x", "/x", "/opt/dsh/x", "/run/dsh/x"} {
				if out[p] == "written" || out[p] == nil {
					t.Fatalf("%s: %v", p, out[p])
				}
			}
			if out["tmp"] != float64(18) {
				t.Fatalf("/tmp: %v", out["tmp"])
			}
			if out["exec"] == "ran" {
				t.Fatal("a file on /tmp could be executed (noexec missing)")
			}
		},
	},
	{
		name: "no host environment variable is visible",
		programs: both(`return Object.keys(process.env).sort()`,
			"import os\nreturn sorted(os.environ.keys())"),
		check: func(t *testing.T, lang backend.Language, res backend.RunResult) {
			ok(t, res)
			var keys []string
			json.Unmarshal(res.Value, &keys)
			allowed := map[string]bool{"PATH": true, "HOME": true, "LANG": true}
			for _, k := range keys {
				if !allowed[k] {
					t.Fatalf("unexpected variable %q in %v", k, keys)
				}
			}
			if strings.Contains(string(res.Value), secretVar) {
				t.Fatal("host variable leaked")
			}
		},
	},
	// A program that ends its process before returning has not completed,
	// whatever the status, 0 included (issue 24 §4): the runner reports the
	// exits it sees, the host the container's status for the rest.
	{
		name: ExitScenarios[0],
		programs: both(`
console.log("before");
process.exit(0);
return "unreached";`, `
import sys
print("before")
sys.exit(0)
return "unreached"`),
		check: func(t *testing.T, lang backend.Language, res backend.RunResult) {
			how := map[backend.Language]string{backend.TypeScript: "(process.exit(0))", backend.Python: "(SystemExit: 0)"}[lang]
			wantFailure(t, res, backend.FailureExit, "the program exited with status 0 before returning "+how)
			if res.Value != nil || len(res.Logs) != 1 || strings.TrimSpace(res.Logs[0].Text) != "before" {
				t.Fatalf("value %s, logs %+v: want no value and only the line before the exit", res.Value, res.Logs)
			}
			outcome(t, lang, res, "%q", firstLine(res.Error.Message))
		},
	},
	{
		name: ExitScenarios[1],
		programs: both(`setTimeout(() => process.exit(3), 5); await new Promise(r => setTimeout(r, 10000));`,
			"import os, threading, time\nthreading.Thread(target=os._exit, args=(3,)).start()\ntime.sleep(10)"),
		check: func(t *testing.T, lang backend.Language, res backend.RunResult) {
			how := map[backend.Language]string{backend.TypeScript: "(process.exit(3))", backend.Python: "(os._exit(3))"}[lang]
			wantFailure(t, res, backend.FailureExit, "the program exited with status 3 before returning "+how)
			outcome(t, lang, res, "%q", firstLine(res.Error.Message))
		},
	},
	{
		name:     ExitScenarios[2],
		programs: both(`process.kill(process.pid, "SIGKILL"); await new Promise(() => {});`, "import posix\nposix._exit(0)"),
		check: func(t *testing.T, lang backend.Language, res backend.RunResult) {
			want := map[backend.Language]string{
				backend.TypeScript: "the container exited with status 137 (128 + signal 9: killed) before the program returned",
				backend.Python:     "the container exited with status 0 before the program returned",
			}[lang]
			wantFailure(t, res, backend.FailureExit, want)
			outcome(t, lang, res, "%q", res.Error.Message)
		},
	},
	{
		name:     "wall timeout",
		programs: both(`await new Promise(() => {})`, "import asyncio\nawait asyncio.Event().wait()"),
		limits:   func(l *container.Limits) { l.WallTime = 1500 * time.Millisecond },
		check: func(t *testing.T, lang backend.Language, res backend.RunResult) {
			wantFailure(t, res, backend.FailureTimeout, "wall-clock budget")
			wantFiredOnTime(t, "wall", res.Stats.Wall, 1500*time.Millisecond)
		},
	},
	{
		name:     "compute timeout on a hot loop",
		programs: both(`for (;;) {}`, "while True:\n    pass"),
		limits: func(l *container.Limits) {
			l.ComputeTime = 500 * time.Millisecond
			l.WallTime = 15 * time.Second
		},
		check: func(t *testing.T, lang backend.Language, res backend.RunResult) {
			wantFailure(t, res, backend.FailureTimeout, "compute budget")
			wantFiredOnTime(t, "compute", res.Stats.CPU, 500*time.Millisecond)
		},
	},
}

// ExitScenarios name the conformance cases of a program that exits before
// returning (for Config.Only): exit 0 from the program's body, an exit from
// a callback or thread, and a process ended beneath the runner (no done
// frame: the container's status).
var ExitScenarios = []string{
	"exit 0 before returning is an exit, not a completed run",
	"an exit from a callback states its status",
	"a process ended beneath the runner is an exit with the container's status",
}

// scenarioNames are the conformance cases by name, in order.
func scenarioNames() []string {
	names := make([]string, len(scenarios))
	for i, sc := range scenarios {
		names[i] = sc.name
	}
	return names
}

// RunConformance runs the lifecycle cases in both languages, each with a
// runtime of its own and a leak check after it: values, renderings and
// logs, exceptions and syntax errors on the program's own lines,
// bindings (round trips, rejections, unknown names, concurrency),
// isolation as a program meets it (network, filesystem, user,
// environment), the budgets' failure kinds, and cancellation. Each
// passing case logs one line, quotable with grep RUNTIME:
//
//	RUNTIME <OCI runtime> <lang> "<case>": ok (startup, wall, cpu)
func RunConformance(t *testing.T, cfg Config) {
	cfg.validate(t)
	t.Setenv(secretVar, "must-not-leak")
	cases := scenarios
	if len(cfg.Only) > 0 {
		byName := map[string]scenario{}
		for _, sc := range scenarios {
			byName[sc.name] = sc
		}
		cases = nil
		for _, name := range cfg.Only {
			sc, found := byName[name]
			if !found {
				t.Fatalf("case %q is not in the conformance suite (it has %q)", name, scenarioNames())
			}
			cases = append(cases, sc)
		}
	}
	rtName := cfg.ociRuntime()
	if rtName == "" {
		rtName = cfg.driverName()
	}
	for _, lang := range Languages {
		t.Run(string(lang), func(t *testing.T) {
			for _, sc := range cases {
				prog, found := sc.programs[lang]
				if !found {
					continue
				}
				t.Run(sc.name, func(t *testing.T) {
					e := newEnv(t, cfg, lang, sc.limits)
					var b []backend.BindingNamespace
					if sc.bindings != nil {
						b = sc.bindings(t)
					}
					res := e.run(t, prog, b...)
					sc.check(t, lang, res)
					t.Logf("RUNTIME %s %s %q: ok (startup %v, wall %v, cpu %v)", rtName, lang, sc.name, res.Stats.Startup, res.Stats.Wall, res.Stats.CPU)
				})
			}
			if len(cfg.Only) == 0 {
				t.Run("cancellation aborts the run", func(t *testing.T) { cancellation(t, cfg, lang) })
			}
		})
	}
}

// cancellation: cancelling the caller's context while the program waits
// forever aborts the run (abort, not timeout); the leak check proves the
// container went with it.
func cancellation(t *testing.T, cfg Config, lang backend.Language) {
	e := newEnv(t, cfg, lang, nil)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	called := make(chan struct{})
	var once sync.Once
	b := tools(map[string]backend.BindingFunc{"started": func(context.Context, json.RawMessage) (json.RawMessage, error) {
		once.Do(func() { close(called) })
		return json.RawMessage("1"), nil
	}})
	go func() {
		select {
		case <-called:
			time.Sleep(100 * time.Millisecond)
		case <-ctx.Done():
		}
		cancel()
	}()
	prog := map[backend.Language]string{
		backend.TypeScript: `await tools.started({}); await new Promise(() => {})`,
		backend.Python:     "import asyncio\nawait tools.started({})\nawait asyncio.Event().wait()",
	}[lang]
	res, err := e.rt.Run(ctx, backend.RunRequest{Program: prog, Bindings: b})
	if err != nil {
		t.Fatal(err)
	}
	wantFailure(t, res, backend.FailureAbort)
	t.Logf("OUTCOME %s %s: %s (wall %v) %s", lang, t.Name(), res.Error.Kind, res.Stats.Wall.Round(time.Millisecond), res.Error.Message)
}
