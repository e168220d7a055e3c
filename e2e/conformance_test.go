package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
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

func ts(p string) map[backend.Language]string {
	return map[backend.Language]string{backend.TypeScript: p}
}

func both(tsProg, pyProg string) map[backend.Language]string {
	return map[backend.Language]string{backend.TypeScript: tsProg, backend.Python: pyProg}
}

func tools(fns map[string]backend.BindingFunc) []backend.BindingNamespace {
	return []backend.BindingNamespace{{Global: "tools", Functions: fns}}
}

func ok(t *testing.T, res backend.RunResult) {
	t.Helper()
	if res.Error != nil {
		t.Fatalf("program failed: %s: %s\nlogs: %+v", res.Error.Kind, res.Error.Message, res.Logs)
	}
}

func wantValue(t *testing.T, res backend.RunResult, want string) {
	t.Helper()
	ok(t, res)
	var got, exp any
	if err := json.Unmarshal(res.Value, &got); err != nil {
		t.Fatalf("value %q: %v", res.Value, err)
	}
	if err := json.Unmarshal([]byte(want), &exp); err != nil {
		t.Fatal(err)
	}
	g, _ := json.Marshal(got)
	w, _ := json.Marshal(exp)
	if string(g) != string(w) {
		t.Fatalf("value %s, want %s", g, w)
	}
}

func wantFailure(t *testing.T, res backend.RunResult, kind backend.FailureKind, substrs ...string) {
	t.Helper()
	if res.Error == nil {
		t.Fatalf("program succeeded with %s, want %s", res.Value, kind)
	}
	if res.Error.Kind != kind {
		t.Fatalf("failure %s: %s, want %s", res.Error.Kind, res.Error.Message, kind)
	}
	for _, s := range substrs {
		if !strings.Contains(res.Error.Message, s) {
			t.Fatalf("failure message %q lacks %q", res.Error.Message, s)
		}
	}
}

// budgetTolerance is how late a budget may fire: generous for a loaded
// 2-core machine, far below what a broken timer would show (a timer at
// twice its setting already fails it).
func budgetTolerance(limit time.Duration) time.Duration {
	return max(time.Second, limit/2)
}

// wantFiredOnTime checks that a budget fired at its setting: got is the
// measure the budget is about (CPU for compute, wall for wall), never
// below the limit and at most budgetTolerance above it.
func wantFiredOnTime(t *testing.T, what string, got, limit time.Duration) {
	t.Helper()
	if got < limit || got > limit+budgetTolerance(limit) {
		t.Fatalf("%s budget %v fired at %v: want within [%v, %v]", what, limit, got, limit, limit+budgetTolerance(limit))
	}
}

func echo(_ context.Context, args json.RawMessage) (json.RawMessage, error) { return args, nil }

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
out.dns = await dns.lookup("example.com").then(() => "resolved", e => "error " + e.code);
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
    socket.getaddrinfo("example.com", 80)
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
			if strings.Contains(string(res.Value), "DSH_E2E_SECRET") {
				t.Fatal("host variable leaked")
			}
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

func TestConformance(t *testing.T) {
	os.Setenv("DSH_E2E_SECRET", "must-not-leak")
	for _, lang := range langs {
		t.Run(string(lang), func(t *testing.T) {
			for _, sc := range scenarios {
				prog, found := sc.programs[lang]
				if !found {
					continue
				}
				t.Run(sc.name, func(t *testing.T) {
					e := newEnv(t, lang, sc.limits)
					var b []backend.BindingNamespace
					if sc.bindings != nil {
						b = sc.bindings(t)
					}
					sc.check(t, lang, e.run(t, prog, b...))
				})
			}
		})
	}
}

// Cancelling the caller's context aborts the run and removes the container.
func TestCancellation(t *testing.T) {
	for _, lang := range langs {
		t.Run(string(lang), func(t *testing.T) {
			e := newEnv(t, lang, nil)
			ctx, cancel := context.WithCancel(context.Background())
			called := make(chan struct{})
			var once sync.Once
			b := tools(map[string]backend.BindingFunc{"started": func(context.Context, json.RawMessage) (json.RawMessage, error) {
				once.Do(func() { close(called) })
				return json.RawMessage("1"), nil
			}})
			go func() { <-called; time.Sleep(100 * time.Millisecond); cancel() }()
			prog := map[backend.Language]string{
				backend.TypeScript: `await tools.started({}); await new Promise(() => {})`,
				backend.Python:     "import asyncio\nawait tools.started({})\nawait asyncio.Event().wait()",
			}[lang]
			res, err := e.rt.Run(ctx, backend.RunRequest{Program: prog, Bindings: b})
			if err != nil {
				t.Fatal(err)
			}
			wantFailure(t, res, backend.FailureAbort)
		})
	}
}

// The hardening preset, asserted field by field on the live container.
func TestHardeningPreset(t *testing.T) {
	for _, lang := range langs {
		t.Run(string(lang), func(t *testing.T) {
			e := newEnv(t, lang, func(l *container.Limits) {
				l.MemoryBytes = 200 << 20
				l.TmpfsBytes = 50 << 20
				l.NanoCPUs = 5e8
				l.Pids = 64
			})
			var inspectErr error
			b := tools(map[string]backend.BindingFunc{"inspect": func(ctx context.Context, _ json.RawMessage) (json.RawMessage, error) {
				list := e.containers(t)
				if len(list) != 1 {
					return nil, fmt.Errorf("%d containers", len(list))
				}
				info, err := cli.ContainerInspect(ctx, list[0].ID)
				if err != nil {
					return nil, err
				}
				inspectErr = checkPreset(info, e)
				return json.RawMessage(`"inspected"`), nil
			}})
			prog := map[backend.Language]string{backend.TypeScript: `return await tools.inspect({})`, backend.Python: `return await tools.inspect({})`}[lang]
			wantValue(t, e.run(t, prog, b...), `"inspected"`)
			if inspectErr != nil {
				t.Fatal(inspectErr)
			}
		})
	}
}
