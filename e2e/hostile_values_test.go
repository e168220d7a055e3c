package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/dsh-container/dsh-container/backend"
	"github.com/dsh-container/dsh-container/backend/container"
)

// The hostile-values suite: programs whose objects try to break the runner
// that introspects them (names, messages, str/repr, stacks, JSON, logs),
// and tool arguments that JSON would silently alter. Every program must end
// as its own exception (with a useful message) or as a value (JSON, or an
// inspect/repr rendering with a fallback text) — never as a broken runner
// (`exit`), and never with the runner's own frames in the outcome or the
// logs. (Programs that exit, hostile exit codes included, are in
// exit_test.go.) Each case logs one quotable OUTCOME line:
//
//	go test -count=1 -run 'TestHostileValues|TestLossyArguments' -v ./e2e/ | grep OUTCOME

// noRunnerTrace fails when the outcome or the logs show the runner's own
// code: its file names or a Python traceback through it.
func noRunnerTrace(t *testing.T, res backend.RunResult) {
	t.Helper()
	texts := []string{string(res.Value)}
	if res.Error != nil {
		texts = append(texts, res.Error.Message)
	}
	for _, e := range res.Logs {
		texts = append(texts, e.Text)
	}
	for _, s := range texts {
		for _, bad := range []string{"bootstrap", "/opt/dsh", "--- Logging error ---", "node:internal"} {
			if strings.Contains(s, bad) {
				t.Fatalf("the runner shows through (%q) in %q", bad, s)
			}
		}
	}
}

// wantException checks an exception whose message (the stack when there is
// one) contains each of substrs.
func wantException(substrs ...string) func(*testing.T, backend.Language, backend.RunResult) {
	return func(t *testing.T, lang backend.Language, res backend.RunResult) {
		t.Helper()
		wantFailure(t, res, backend.FailureException, substrs...)
		outcome(t, lang, res, "%q", exceptionLine(res.Error.Message))
	}
}

// exceptionLine is the line of a failure message that names the exception:
// the first of a JavaScript stack, the last of a Python traceback.
func exceptionLine(msg string) string {
	if !strings.HasPrefix(msg, "Traceback") {
		return firstLine(msg)
	}
	lines := strings.Split(strings.TrimSpace(msg), "\n")
	return firstLine(lines[len(lines)-1])
}

// wantRendering checks a value that crossed as its inspect/repr rendering.
func wantRendering(want string) func(*testing.T, backend.Language, backend.RunResult) {
	return func(t *testing.T, lang backend.Language, res backend.RunResult) {
		t.Helper()
		ok(t, res)
		var s string
		if res.ValueKind != backend.ValueInspect || json.Unmarshal(res.Value, &s) != nil {
			t.Fatalf("value %s kind %q, want the rendering %q", res.Value, res.ValueKind, want)
		}
		if s != want {
			t.Fatalf("rendering %q, want %q", s, want)
		}
		outcome(t, lang, res, "inspect %q", s)
	}
}

// wantJSON checks a value that crossed as JSON.
func wantJSON(want string) func(*testing.T, backend.Language, backend.RunResult) {
	return func(t *testing.T, lang backend.Language, res backend.RunResult) {
		t.Helper()
		wantValue(t, res, want)
		outcome(t, lang, res, "json %s", res.Value)
	}
}

func logTexts(res backend.RunResult) []string {
	var out []string
	for _, e := range res.Logs {
		out = append(out, strings.TrimRight(e.Text, "\n"))
	}
	return out
}

type valueCase struct {
	name     string
	programs map[backend.Language]string
	bindings func(t *testing.T) []backend.BindingNamespace
	check    func(t *testing.T, lang backend.Language, res backend.RunResult)
}

func failing(_ context.Context, args json.RawMessage) (json.RawMessage, error) {
	return nil, fmt.Errorf("no luck with %s", args)
}

var valueCases = []valueCase{
	{
		name: "exception whose name cannot be read",
		programs: both(`
const e = new Error("boom");
Object.defineProperty(e, "name", { get() { throw new Error("no name"); } });
throw e;`, `
class Meta(type):
    @property
    def __name__(cls):
        raise RuntimeError("no name")
class E(Exception, metaclass=Meta):
    pass
raise E("boom")`),
		check: func(t *testing.T, lang backend.Language, res backend.RunResult) {
			want := map[backend.Language][]string{
				backend.TypeScript: {"Error: boom\n    at program.ts:2:11"}, // where it was made
				backend.Python:     {"E: boom", `File "program.py", line 8`},
			}[lang]
			wantException(want...)(t, lang, res)
		},
	},
	{
		name: "exception whose message cannot be rendered",
		programs: both(`
const e = new Error("x");
e.message = { [Symbol.toPrimitive]() { throw new Error("no text"); } } as any;
throw e;`, `
class E(Exception):
    def __str__(self):
        raise ValueError("no text")
raise E()`),
		check: func(t *testing.T, lang backend.Language, res backend.RunResult) {
			want := map[backend.Language]string{
				backend.TypeScript: "Error: [message unavailable: Error: no text]",
				backend.Python:     "E: <exception str() failed>",
			}[lang]
			wantException(want)(t, lang, res)
		},
	},
	{
		name: "stack formatting that throws",
		programs: both(`
Error.prepareStackTrace = () => { throw new Error("no stack"); };
throw new RangeError("r");`, `
class E(Exception):
    @property
    def __cause__(self):
        raise RuntimeError("no cause")
raise E("c")`),
		check: func(t *testing.T, lang backend.Language, res backend.RunResult) {
			want := map[backend.Language][]string{
				backend.TypeScript: {"RangeError: r"},
				backend.Python:     {"E: c", `File "program.py", line 6`},
			}[lang]
			wantException(want...)(t, lang, res)
		},
	},
	{
		name: "the runner's frames never show",
		programs: both(`
Error.prepareStackTrace = undefined;
await tools.fail({ why: 1 });`, `
import logging
try:
    await tools.fail({"why": 1})
except ToolCallError:
    logging.exception("caught")
await tools.fail({"why": 2})`),
		bindings: func(*testing.T) []backend.BindingNamespace {
			return tools(map[string]backend.BindingFunc{"fail": failing})
		},
		check: func(t *testing.T, lang backend.Language, res backend.RunResult) {
			want := map[backend.Language][]string{
				backend.TypeScript: {`no luck with {"why":1}`, "at program.ts:3:13"},
				backend.Python:     {`no luck with {"why":2}`, `File "program.py", line 7`},
			}[lang]
			wantException(want...)(t, lang, res)
		},
	},
	{
		name: "thrown values that are not errors, and BaseExceptions",
		programs: both(`
const { proxy, revoke } = Proxy.revocable({}, {});
revoke();
throw proxy;`, `raise KeyboardInterrupt("stop")`),
		check: func(t *testing.T, lang backend.Language, res backend.RunResult) {
			want := map[backend.Language]string{backend.TypeScript: "Uncaught: <Revoked Proxy>", backend.Python: "KeyboardInterrupt: stop"}[lang]
			wantException(want)(t, lang, res)
		},
	},
	{
		name: "value whose rendering throws",
		programs: both(`
class Q { q = 1; [Symbol.for("nodejs.util.inspect.custom")]() { throw new Error("no"); } }
return new Q();`, `
class Meta(type):
    @property
    def __name__(cls):
        raise RuntimeError("no name")
class P(metaclass=Meta):
    def __repr__(self):
        raise RuntimeError("no repr")
return P()`),
		check: func(t *testing.T, lang backend.Language, res backend.RunResult) {
			want := map[backend.Language]string{backend.TypeScript: "Q { q: 1 }", backend.Python: "<unrepresentable P: RuntimeError: no repr>"}[lang]
			wantRendering(want)(t, lang, res)
		},
	},
	{
		name: "value whose rendering recurses",
		programs: both(`
class R { [Symbol.for("nodejs.util.inspect.custom")](d: any, o: any, inspect: any) { return inspect(this, o); } }
return new R();`, `
class R:
    def __repr__(self):
        return repr(self)
return R()`),
		check: func(t *testing.T, lang backend.Language, res backend.RunResult) {
			want := map[backend.Language]string{backend.TypeScript: "R {}", backend.Python: "<unrepresentable R: RecursionError: maximum recursion depth exceeded>"}[lang]
			wantRendering(want)(t, lang, res)
		},
	},
	{
		name: "value with getters, proxies and hostile comparisons",
		programs: both(`
return [{ get x() { throw new Error("no"); } }, new Proxy({}, { get() { throw new Error("trap"); } })];`, `
class P:
    @property
    def __class__(self):
        raise RuntimeError("no class")
    def __eq__(self, o):
        raise RuntimeError("eq")
    def __hash__(self):
        raise RuntimeError("hash")
    def __repr__(self):
        return "P()"
return [P()]`),
		check: func(t *testing.T, lang backend.Language, res backend.RunResult) {
			want := map[backend.Language]string{backend.TypeScript: "[ { x: [Getter] }, {} ]", backend.Python: "[P()]"}[lang]
			wantRendering(want)(t, lang, res)
		},
	},
	{
		name: "value whose JSON would be huge",
		programs: both(`return new Array(2 ** 32 - 1);`, `
x = [1] * 1000
return [[x] * 1000] * 1000`),
		check: func(t *testing.T, lang backend.Language, res backend.RunResult) {
			ok(t, res)
			var s string
			if !res.ValueTruncated || json.Unmarshal(res.Value, &s) != nil {
				t.Fatalf("value %.100s (truncated %v), want a truncated prefix", res.Value, res.ValueTruncated)
			}
			prefix := map[backend.Language]string{backend.TypeScript: "[null,null,", backend.Python: "[[[1,1,"}[lang]
			if !strings.HasPrefix(s, prefix) || len(s) > 1<<20 {
				t.Fatalf("value %.100s… (%d bytes), want a prefix %q of at most 1 MiB", s, len(s), prefix)
			}
			if res.Stats.Wall > 5e9 {
				t.Fatalf("rendering took %v", res.Stats.Wall)
			}
			outcome(t, lang, res, "json prefix %.20q… of %d bytes", s, len(s))
		},
	},
	{
		name: "builtins and streams replaced by the program",
		programs: both(`
(Object.prototype as any).toJSON = () => "hijacked";
JSON.stringify = () => { throw new Error("no stringify"); };
Promise.prototype.then = function () { throw new Error("no then"); } as any;
console.log = () => { throw new Error("mine"); };
console.info("logged", { a: [1] });
process.stdout.end("ended\n");
process.stdout.write("still\n");
return await tools.echo({ a: [1, { b: 2 }] });`, `
import json, sys
json.dumps = None
json.JSONEncoder = None
class Sub(str):
    def __len__(self):
        raise RuntimeError("len")
class P:
    def __str__(self):
        return Sub("logged")
print(P())
sys.stdout.close()
print("still")
saved, sys.stdout = sys.stdout, None
print("lost")
sys.stdout = saved
return await tools.echo({"a": [1, {"b": 2}]})`),
		bindings: func(*testing.T) []backend.BindingNamespace {
			return tools(map[string]backend.BindingFunc{"echo": echo})
		},
		check: func(t *testing.T, lang backend.Language, res backend.RunResult) {
			wantJSON(`{"a":[1,{"b":2}]}`)(t, lang, res)
			want := map[backend.Language]string{backend.TypeScript: "logged { a: [ 1 ] }|ended|still", backend.Python: "logged|still"}[lang]
			if got := strings.Join(logTexts(res), "|"); got != want {
				t.Fatalf("logs %q, want %q", got, want)
			}
		},
	},
	{
		name: "log output of hostile objects",
		programs: both(`
console.log(new Proxy({}, { get() { throw new Error("trap"); } }));
try {
  console.log({ [Symbol.for("nodejs.util.inspect.custom")]() { throw new Error("no inspect"); } });
} catch (e) {
  console.log("caught " + (e as Error).message);
}
return "logged";`, `
import logging
class S:
    def __str__(self):
        raise ValueError("no str")
logging.warning(S())
logging.error("%d items", "x")
try:
    print(S())
except ValueError as e:
    print("caught", e)
return "logged"`),
		check: func(t *testing.T, lang backend.Language, res backend.RunResult) {
			wantJSON(`"logged"`)(t, lang, res)
			got := strings.Join(logTexts(res), "|")
			want := map[backend.Language][]string{
				backend.TypeScript: {"{}|caught no inspect"},
				backend.Python:     {"<log record not formatted: ValueError: no str; msg=<", "<log record not formatted: TypeError: %d format: a real number is required, not str; msg='%d items', args=('x',)>|caught no str"},
			}[lang]
			for _, w := range want {
				if !strings.Contains(got, w) {
					t.Fatalf("logs %q lack %q", got, w)
				}
			}
		},
	},
	{
		name:     "a print or console.log that throws",
		programs: both(`console.log("%d", { [Symbol.toPrimitive]() { throw new Error("no number"); } });`, "class S:\n    def __str__(self):\n        raise ValueError('no str')\nprint(S())"),
		check: func(t *testing.T, lang backend.Language, res backend.RunResult) {
			want := map[backend.Language][]string{
				backend.TypeScript: {"Error: no number", "at program.ts:1:"},
				backend.Python:     {"ValueError: no str", `File "program.py", line 4`},
			}[lang]
			wantException(want...)(t, lang, res)
		},
	},
	{
		name: "an exception from __del__ or a finalizer, and work left pending",
		programs: both(`
setInterval(() => {}, 1000);
new Promise(() => {});
return "left";`, `
import asyncio, gc
class D:
    def __del__(self):
        raise RuntimeError("from __del__")
d = D()
del d
gc.collect()
async def forever():
    await asyncio.sleep(100)
asyncio.create_task(forever())
await asyncio.sleep(0)
return "left"`),
		check: func(t *testing.T, lang backend.Language, res backend.RunResult) {
			wantJSON(`"left"`)(t, lang, res)
			if lang == backend.Python {
				got := strings.Join(logTexts(res), "\n")
				if !strings.Contains(got, "Exception ignored in") || !strings.Contains(got, "RuntimeError: from __del__") {
					t.Fatalf("logs %q lack the ignored exception", got)
				}
			}
		},
	},
	{
		name: "a million empty log entries",
		programs: both(`for (let i = 0; i < 1_000_000; i++) console.log(""); return "done";`,
			"import logging\nfor _ in range(20_000):\n    logging.info('')\nfor _ in range(1_000_000):\n    print()\nreturn 'done'"),
		check: func(t *testing.T, lang backend.Language, res backend.RunResult) {
			wantJSON(`"done"`)(t, lang, res)
			// The runner stops after the entry that crosses 10,000; the
			// host keeps at most that many.
			if n := len(res.Logs); n < 10_000 || n > 10_001 {
				t.Fatalf("%d entries, want 10,000 or 10,001", n)
			}
		},
	},
}

// TestHostileValues runs programs whose objects are hostile to the runner
// that reads them, in both languages, through the real runtime.
func TestHostileValues(t *testing.T) {
	for _, lang := range langs {
		t.Run(string(lang), func(t *testing.T) {
			// One warm container at a time: each run still gets a fresh one.
			e := newEnv(t, lang, nil, container.WithPool(1))
			for _, vc := range valueCases {
				prog, ok := vc.programs[lang]
				if !ok {
					continue
				}
				t.Run(vc.name, func(t *testing.T) {
					var b []backend.BindingNamespace
					if vc.bindings != nil {
						b = vc.bindings(t)
					}
					res := e.run(t, prog, b...)
					if res.Error != nil && res.Error.Kind == backend.FailureExit {
						t.Fatalf("the runner broke: %s", res.Error.Message)
					}
					noRunnerTrace(t, res)
					vc.check(t, lang, res)
				})
			}
			wantValue(t, e.run(t, "return 1"), "1")
		})
	}
}

// argCase is one lossy argument: the expression per language (a missing
// language skips the case) and the rejection the program must see.
type argCase struct {
	ts, py string
	want   string
}

var argCases = []argCase{
	// One rule: the same value gives the same message in both languages.
	{`{ items: [1, 2, 3, NaN] }`, `{"items": [1, 2, 3, float("nan")]}`, `args.items[3]: NaN is not JSON`},
	{`Infinity`, `float("inf")`, `args: Infinity is not JSON`},
	{`{ x: [-Infinity] }`, `{"x": [float("-inf")]}`, `args.x[0]: -Infinity is not JSON`},
	{`cyc`, `cyc`, `args.self: circular reference`},
	{`{ s: "a\ud800" }`, `{"s": "a\ud800"}`, `args.s: a string with a lone surrogate is not JSON`},
	{`{ "a b": { "é": { $ref: NaN } } }`, `{"a b": {"é": {"$ref": float("nan")}}}`, `args["a b"]["é"].$ref: NaN is not JSON`},
	{`{ ["k".repeat(5000)]: NaN }`, `{"k" * 5000: float("nan")}`, "args." + strings.Repeat("k", 194) + "…: NaN is not JSON"},
	{`"x".repeat(5 << 20)`, `"x" * (5 << 20)`, `args: too large: the call frame would exceed the 4194304-byte frame limit`},
	// TypeScript values JSON.stringify would alter or drop.
	{ts: `{ when: new Date(0) }`, want: `args.when: a Date is not JSON (use .toISOString())`},
	{ts: `{ opts: undefined }`, want: `args.opts: undefined is not JSON`},
	{ts: `{ "a b": { x: new Map() } }`, want: `args["a b"].x: a Map is not JSON`},
	{ts: `{ tags: new Set(["a"]) }`, want: `args.tags: a Set is not JSON`},
	{ts: `{ fn: () => 1 }`, want: `args.fn: a function is not JSON`},
	{ts: `{ n: 10n }`, want: `args.n: a BigInt is not JSON`},
	{ts: `{ s: Symbol("s") }`, want: `args.s: a Symbol is not JSON`},
	{ts: `{ p: new (class Point { x = 1 })() }`, want: `args.p: an instance of Point is not JSON`},
	{ts: `{ bytes: new Uint8Array(2) }`, want: `args.bytes: a Uint8Array is not JSON`},
	{ts: `[1, , 3]`, want: `args[1]: a hole in a sparse array is not JSON`},
	{ts: `{ n: new Number(1) }`, want: `args.n: a Number object is not JSON (use a number)`},
	{ts: `{ get x() { throw new Error("boom"); } }`, want: `args.x: reading it threw Error: boom`},
	{ts: `new Proxy({}, { ownKeys() { throw new Error("keys"); } })`, want: `args: listing its keys threw Error: keys`},
	// Python values json.dumps would alter.
	{py: `{"t": (1, 2)}`, want: `args.t: a tuple is not JSON (use a list)`},
	{py: `{1: "a"}`, want: `args: key 1 is not a string`},
	{py: `{"a b": {"x": {1, 2}}}`, want: `args["a b"].x: a set is not JSON`},
	{py: `{"b": b"x"}`, want: `args.b: a bytes object is not JSON`},
	{py: `{"fn": len}`, want: `args.fn: a function is not JSON`},
	{py: `{"c": Color.RED}`, want: `args.c: an instance of Color (a subclass of int) is not JSON`},
	{py: `{"s": Name("x")}`, want: `args.s: an instance of Name (a subclass of str) is not JSON`},
	{py: `{"o": object()}`, want: `args.o: an instance of object is not JSON`},
	{py: `{"when": datetime.datetime(2020, 1, 1)}`, want: `args.when: a datetime is not JSON (use .isoformat())`},
	{py: `{"n": 10 ** 400}`, want: `args.n: an integer beyond the float64 range is not JSON`},
}

// TestLossyArguments checks the tool-argument rule end to end: each lossy
// argument is rejected in the program with a TypeError naming its path,
// the binding is never invoked for it, and no call id is consumed.
func TestLossyArguments(t *testing.T) {
	const valid = `{"ok":[1,"x",null,true,2.5]}`
	for _, lang := range langs {
		t.Run(string(lang), func(t *testing.T) {
			e := newEnv(t, lang, nil)
			var mu sync.Mutex
			var seen []string
			b := tools(map[string]backend.BindingFunc{"probe": func(_ context.Context, args json.RawMessage) (json.RawMessage, error) {
				mu.Lock()
				defer mu.Unlock()
				seen = append(seen, string(args))
				return json.RawMessage(`"called"`), nil
			}})
			var want []string
			var prog strings.Builder
			if lang == backend.TypeScript {
				prog.WriteString("const cyc: any = { a: 1 }; cyc.self = cyc;\nconst out: string[] = [];\n")
			} else {
				prog.WriteString("import datetime, enum\nclass Color(enum.IntEnum):\n    RED = 1\nclass Name(str):\n    pass\ncyc = {\"a\": 1}\ncyc[\"self\"] = cyc\nout = []\n")
			}
			for _, c := range argCases {
				expr := map[backend.Language]string{backend.TypeScript: c.ts, backend.Python: c.py}[lang]
				if expr == "" {
					continue
				}
				want = append(want, `TypeError: tools["probe"]: `+c.want)
				if lang == backend.TypeScript {
					fmt.Fprintf(&prog, "try { await tools.probe(%s); out.push(\"sent\"); } catch (e) { out.push((e as Error).constructor.name + \": \" + (e as Error).message); }\n", expr)
				} else {
					fmt.Fprintf(&prog, "try:\n    await tools.probe(%s)\n    out.append(\"sent\")\nexcept Exception as e:\n    out.append(type(e).__name__ + \": \" + str(e))\n", expr)
				}
			}
			if lang == backend.TypeScript {
				prog.WriteString(`out.push(await tools.probe({ ok: [1, "x", null, true, 2.5] }));` + "\nreturn out;")
			} else {
				prog.WriteString(`out.append(await tools.probe({"ok": [1, "x", None, True, 2.5]}))` + "\nreturn out")
			}
			want = append(want, "called")
			res := e.run(t, prog.String(), b...)
			ok(t, res)
			var got []string
			if err := json.Unmarshal(res.Value, &got); err != nil {
				t.Fatalf("value %.300s: %v", res.Value, err)
			}
			for i := range max(len(got), len(want)) {
				var g, w string
				if i < len(got) {
					g = got[i]
				}
				if i < len(want) {
					w = want[i]
				}
				if g != w {
					t.Errorf("case %d: the program saw %q, want %q", i, g, w)
				}
			}
			mu.Lock()
			defer mu.Unlock()
			if len(seen) != 1 || seen[0] != valid {
				t.Fatalf("the binding saw %q, want only %s", seen, valid)
			}
			if res.Stats.Calls != 1 {
				t.Fatalf("%d calls reached the host, want 1", res.Stats.Calls)
			}
			outcome(t, lang, res, "%d lossy arguments rejected in the program, the binding called once with %s", len(want)-1, seen[0])
		})
	}
}
