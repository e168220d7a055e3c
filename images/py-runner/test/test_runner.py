"""End-to-end tests of the Python runner: a fake host serves the bridge on a
Unix socket (websockets' sync server), spawns the runner (dsh_runner) as a
child process and drives it through the protocol. Every frame the runner
sends is checked with the strict decoder (direction runner-to-host). Run
from images/py-runner: python3 -m unittest discover -s test -v"""

import base64
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import unittest
from concurrent.futures import ThreadPoolExecutor

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
sys.dont_write_bytecode = True

from dsh_runner import protocol, runner  # noqa: E402
from websockets.exceptions import ConnectionClosed  # noqa: E402
from websockets.sync.server import unix_serve  # noqa: E402

SOURCE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# The runner starts as `python3 -I -m dsh_runner <socket>`; -I keeps
# PYTHONPATH out, so this runs the package of this tree the way -m would.
LAUNCH = ("import runpy, sys; sys.dont_write_bytecode = True; sys.path.insert(0, %r); "
          "runpy.run_module('dsh_runner', run_name='__main__', alter_sys=True)" % SOURCE)
LIMITS = {"maxLogBytes": 1 << 20, "maxValueBytes": 1 << 20, "maxFrameBytes": 4 << 20}
TOOLS = ["search", "fail", "echo", "__class__", "keys", "my-tool"]


def default_on_call(call, reply):
    if call["name"] == "fail":
        reply({"ok": False, "message": f"no luck with {json.dumps(call['args'])}"})
    elif call["name"] == "search":
        reply({"ok": True, "value": {"hits": [{"id": 1, "title": "one"}, {"id": 2, "title": "twö"}], "query": call["args"]}})
    else:
        reply({"ok": True, "value": {"name": call["name"], "args": call["args"]}})


class Outcome:
    def __init__(self):
        self.frames, self.logs, self.calls, self.violations, self.after_done = [], [], [], [], []
        self.hello = self.done = self.exit_code = self.timings = None
        self.stderr = self.stdout = ""


def host(program="return 1", *, bindings=None, limits=LIMITS, on_call=None, on_hello=None, run_delay=0.0, socket_path=None, timeout=60,
         egress=None, on_egress=None):
    """Run one program under a fake host; returns an Outcome. on_hello(conn)
    takes over after hello: it sends the run frame and answers calls.
    egress is the run frame's; on_egress(msg, conn) sees the runner's open,
    data and close frames."""
    tmp = tempfile.mkdtemp(prefix="dsh-py-")
    sock = os.path.join(tmp, "bridge.sock")
    out = Outcome()

    def handler(conn):
        try:
            for data in conn:
                out.frames.append(data)
                if out.done is not None:
                    out.after_done.append(data)
                try:
                    if not isinstance(data, str):
                        raise AssertionError("binary frame")
                    msg = protocol.decode_frame(protocol.RUNNER_TO_HOST, data, limits["maxFrameBytes"])
                except (protocol.ProtocolError, AssertionError) as e:
                    out.violations.append(f"{e} in {data[:200]!r}")
                    continue
                if msg["type"] == "hello":
                    out.hello = json.loads(data)
                    if on_hello:
                        on_hello(conn)
                        continue
                    if run_delay:
                        time.sleep(run_delay)
                    conn.send(json.dumps({
                        "type": "run", "version": 1, "program": program,
                        "bindings": bindings if bindings is not None else [{"global": "tools", "functions": TOOLS}],
                        "limits": limits, **({"egress": egress} if egress is not None else {}),
                    }))
                elif msg["type"] == "call":
                    call = json.loads(data)
                    out.calls.append(call)
                    if not on_hello:
                        (on_call or default_on_call)(call, lambda r, i=call["id"]: conn.send(json.dumps({"type": "result", "id": i, **r})))
                elif msg["type"] == "log":
                    out.logs.append(json.loads(data))
                elif msg["type"] == "done":
                    out.done = json.loads(data)
                    # The runner's own timings vary run to run: kept apart.
                    out.timings = out.done.pop("timings", None)
                elif on_egress:
                    on_egress(json.loads(data), conn)
        except ConnectionClosed:
            pass

    server = unix_serve(handler, sock, compression=None, max_size=None)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        proc = subprocess.run(
            [sys.executable, "-I", "-c", LAUNCH, socket_path or sock],
            env={"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": tempfile.gettempdir(), "LANG": "C.UTF-8"},
            capture_output=True, timeout=timeout, text=True,
        )
        out.exit_code, out.stdout, out.stderr = proc.returncode, proc.stdout, proc.stderr
    finally:
        server.shutdown()
        thread.join()
        shutil.rmtree(tmp, ignore_errors=True)
    return out


def hosts(*runs):
    """Run several hosts concurrently: each argument is a dict of host()'s
    keyword arguments (program included)."""
    # A few at a time: more only thrashes a small machine.
    with ThreadPoolExecutor(max(2, min(6, 2 * (os.cpu_count() or 1), len(runs)))) as pool:
        return list(pool.map(lambda kw: host(**kw), runs))


class RunnerTest(unittest.TestCase):
    maxDiff = None

    def ok(self, out):
        """A clean run: exit 0, valid frames, done last, nothing on stderr."""
        self.assertEqual(out.violations, [])
        self.assertEqual(out.exit_code, 0, out.stderr)
        self.assertIsNotNone(out.done, "no done frame")
        self.assertEqual(out.after_done, [])
        self.assertEqual(out.stderr, "")
        self.assertEqual(out.stdout, "")
        return out.done

    def test_hello_then_a_json_value(self):
        out = host('return {"a": [1, "two", True, None], "n": 1.5, "s": "é😀"}')
        self.assertEqual(out.frames[0], '{"type":"hello","version":1,"language":"python","runner":"dsh-py-runner/1"}')
        self.assertEqual(self.ok(out), {"type": "done", "ok": True, "valueKind": "json", "value": {"a": [1, "two", True, None], "n": 1.5, "s": "é😀"}})
        # The done frame carries the runner's phase durations, in µs.
        self.assertEqual(sorted(out.timings), ["compileUs", "evaluateUs", "renderUs"])
        self.assertTrue(all(isinstance(v, int) and 0 <= v < 60 * 10**6 for v in out.timings.values()), out.timings)

    def test_no_value_and_warm_pool_wait(self):
        none, null = hosts(dict(program="x = 1", run_delay=0.3), dict(program="return None"))
        self.assertEqual(self.ok(none), {"type": "done", "ok": True})
        self.assertEqual(self.ok(null), {"type": "done", "ok": True})  # None is no value

    def test_top_level_await(self):
        out = host("import asyncio\nawait asyncio.sleep(0.02)\nv = 21\nreturn v * 2")
        self.assertEqual(self.ok(out)["value"], 42)

    def test_only_the_documented_globals(self):
        # (An import at the top level binds a local of the wrapper function.)
        out = host("import json\nreturn [sorted(globals()), __name__, type(tools).__name__, ToolCallError.__mro__[1].__name__]")
        self.assertEqual(self.ok(out)["value"], [["ToolCallError", "__builtins__", "__name__", "tools"], "__main__", "Namespace", "Exception"])

    def test_logs_of_every_source_and_level(self):
        program = "\n".join([
            "import logging, sys, warnings",
            'print("hello", 1, {"a": 1})',
            'print("no newline", end="")',
            'print(" ...continued")',
            'sys.stdout.write("raw out\\n")',
            'print("to stderr", file=sys.stderr)',
            'sys.stderr.write("raw err")',
            'sys.stderr.flush()',
            'logging.debug("debug %d", 1)',
            'logging.info("info")',
            'logging.getLogger("app").warning("warn")',
            'logging.error("error")',
            'logging.critical("critical")',
            'try:',
            '    1 / 0',
            'except ZeroDivisionError:',
            '    logging.exception("caught")',
            'sys.stdout.buffer.write("bytes é\\n".encode())',
            'print("lone \\ud800 surrogate")',
            'print("tail", end="")',
        ])
        out = host(program)
        self.ok(out)
        logs = [{k: v for k, v in log.items() if k != "type"} for log in out.logs]
        exc = [log for log in logs if log["text"].startswith("caught")]
        self.assertEqual(len(exc), 1)
        self.assertEqual(exc[0]["level"], "error")
        self.assertIn('File "program.py", line 15, in __dsh_main__\n    1 / 0', exc[0]["text"])
        self.assertIn("ZeroDivisionError: division by zero", exc[0]["text"])
        self.assertEqual([log for log in logs if log not in exc], [
            {"source": "stdout", "text": "hello 1 {'a': 1}\n"},
            {"source": "stdout", "text": "no newline ...continued\n"},
            {"source": "stdout", "text": "raw out\n"},
            {"source": "stderr", "text": "to stderr\n"},
            {"source": "stderr", "text": "raw err"},
            {"source": "console", "level": "debug", "text": "debug 1"},
            {"source": "console", "level": "info", "text": "info"},
            {"source": "console", "level": "warn", "text": "warn"},
            {"source": "console", "level": "error", "text": "error"},
            {"source": "console", "level": "error", "text": "critical"},
            {"source": "stdout", "text": "bytes é\n"},
            {"source": "stdout", "text": "lone ? surrogate\n"},
            {"source": "stdout", "text": "tail"},
        ])

    def test_a_tool_call_round_trip(self):
        out = host('r = await tools.search({"q": "x", "n": [1, 2], "nested": {"ok": True}})\nreturn r')
        done = self.ok(out)
        self.assertEqual(out.calls, [{"type": "call", "id": 1, "global": "tools", "name": "search", "args": {"q": "x", "n": [1, 2], "nested": {"ok": True}}}])
        self.assertEqual(done["value"], {"hits": [{"id": 1, "title": "one"}, {"id": 2, "title": "twö"}], "query": {"q": "x", "n": [1, 2], "nested": {"ok": True}}})

    def test_item_access_odd_names_and_default_args(self):
        program = "\n".join([
            "a = await tools.echo()",
            'b = await tools["my-tool"]([3])',
            'c = await tools["__class__"]("c")',
            "d = await tools.keys(None)",
            "e = [type(tools).__name__ != '__class__', 'echo' in tools, sorted(dir(tools)), len(tools)]",
            "errs = []",
            "try:",
            "    tools.nope",
            "except AttributeError as x:",
            "    errs.append(str(x))",
            "try:",
            '    tools["no-pe"]',
            "except KeyError as x:",
            "    errs.append(x.args[0])",
            "return [a, b, c, d, e, errs, tools.echo.__name__]",
        ])
        done = self.ok(out := host(program))
        self.assertEqual([(c["id"], c["name"], c["args"]) for c in out.calls], [(1, "echo", None), (2, "my-tool", [3]), (3, "__class__", "c"), (4, "keys", None)])
        self.assertEqual(done["value"], [
            {"name": "echo", "args": None},
            {"name": "my-tool", "args": [3]},
            {"name": "__class__", "args": "c"},
            {"name": "keys", "args": None},
            [True, True, sorted(TOOLS), len(TOOLS)],
            ["tools has no tool named 'nope'", "tools has no tool named 'no-pe'"],
            "echo",
        ])

    def test_a_rejected_call_raises_tool_call_error(self):
        program = "\n".join([
            "try:",
            '    await tools.fail({"why": 1})',
            "except ToolCallError as e:",
            "    import traceback",
            "    return [str(e), e.tool_name, e.toolName, isinstance(e, Exception), traceback.format_exc().splitlines()]",
        ])
        done = self.ok(host(program))
        self.assertEqual(done["value"][:4], ['no luck with {"why": 1}', "fail", "fail", True])
        # The program's own traceback shows its line, then the tool call,
        # never the runner's source.
        self.assertEqual(done["value"][4], [
            "Traceback (most recent call last):",
            '  File "program.py", line 2, in __dsh_main__',
            '    await tools.fail({"why": 1})',
            '  File "<tools>", line 5, in tools.fail',
            'ToolCallError: no luck with {"why": 1}',
        ])

    def test_an_uncaught_rejected_call_fails_the_run(self):
        done = self.ok(host("x = 1\nawait tools.fail(None)\nreturn 1"))
        self.assertEqual(done["ok"], False)
        self.assertEqual(done["error"]["name"], "ToolCallError")
        self.assertEqual(done["error"]["message"], "no luck with null")
        self.assertEqual(done["error"]["stack"],
                         'Traceback (most recent call last):\n  File "program.py", line 2, in __dsh_main__\n    await tools.fail(None)\n'
                         "ToolCallError: no luck with null\n")

    def test_gather_with_results_in_reverse_order(self):
        held = []

        def on_call(call, reply):
            held.append((call, reply))
            if len(held) == 4:
                for c, rep in reversed(held):
                    rep({"ok": True, "value": c["args"]})

        program = 'import asyncio\nnames = ["a", "b", "c", "d"]\nr = await asyncio.gather(*(tools.echo({"n": n}) for n in names))\nreturn "".join(x["n"] for x in r)'
        out = host(program, on_call=on_call)
        done = self.ok(out)
        self.assertEqual([c["id"] for c in out.calls], [1, 2, 3, 4])
        self.assertEqual([c["args"]["n"] for c in out.calls], ["a", "b", "c", "d"])
        self.assertEqual(done["value"], "abcd")

    def test_arguments_that_are_not_json_are_rejected_in_the_program(self):
        # (value, message): the ArgsTest unit test covers the rule in full;
        # here each rejection must reach the program as TypeError and send
        # nothing.
        cases = [
            ('{"items": [1, 2, 3, float("nan")]}', 'tools["echo"]: args.items[3]: NaN is not JSON'),
            ('{"t": (1, 2)}', 'tools["echo"]: args.t: a tuple is not JSON (use a list)'),
            ('{1: "a"}', 'tools["echo"]: args: key 1 is not a string'),
            ('{"a b": {"x": {1}}}', 'tools["echo"]: args["a b"].x: a set is not JSON'),
            ('{"c": enum.IntEnum("C", "A").A}', 'tools["echo"]: args.c: an instance of C (a subclass of int) is not JSON'),
            ('{"s": "\\ud800"}', 'tools["echo"]: args.s: a string with a lone surrogate is not JSON'),
            ("cyc", 'tools["echo"]: args.self: circular reference'),
            ('"x" * 5000', 'tools["echo"]: args: too large: the call frame would exceed the 4096-byte frame limit'),
            ('{"k": float("inf")}', 'tools["my-tool"]: args.k: Infinity is not JSON'),
        ]
        program = "\n".join([
            "import enum",
            'cyc = {"a": 1}',
            'cyc["self"] = cyc',
            "out = []",
            *[f"try:\n    await tools{'[\"my-tool\"]' if 'my-tool' in want else '.echo'}({v})\n    out.append('sent')\n"
              f"except TypeError as e:\n    out.append(str(e))" for v, want in cases],
            'out.append((await tools.echo("after"))["args"])',
            "return out",
        ])
        out = host(program, limits=dict(LIMITS, maxFrameBytes=4096))
        self.assertEqual(self.ok(out)["value"], [want for _, want in cases] + ["after"])
        # Nothing was sent for the rejected calls, and no id was used.
        self.assertEqual([(c["id"], c["args"]) for c in out.calls], [(1, "after")])

    def test_hostile_programs_end_as_exceptions_or_renderings(self):
        # (name, program, expected done error (name, message) or value,
        # text the stack must contain). Each must end with a valid done
        # frame, nothing on stderr and no runner frame anywhere.
        cases = [
            ("exception class whose __name__ raises",
             "class Meta(type):\n    @property\n    def __name__(cls):\n        raise RuntimeError('no name')\n"
             "class E(Exception, metaclass=Meta):\n    pass\nraise E('boom')",
             ("E", "boom"), 'line 7, in __dsh_main__'),
            ("exception whose __str__ raises",
             "class E(Exception):\n    def __str__(self):\n        raise ValueError('bad str')\nraise E()",
             ("E", "<E str() failed: ValueError: bad str>"), "E: <exception str() failed>"),
            ("exception class whose __getattribute__ raises",
             "class Meta(type):\n    def __getattribute__(cls, n):\n        if n in ('__qualname__', '__module__', '__name__'):\n"
             "            raise RuntimeError(n)\n        return super().__getattribute__(n)\n"
             "class E(Exception, metaclass=Meta):\n    pass\nraise E('boom')",
             ("E", "boom"), 'E: boom'),
            ("exception whose __cause__ raises",
             "class E(Exception):\n    @property\n    def __cause__(self):\n        raise RuntimeError('no')\nraise E('c')",
             ("E", "c"), "E: c"),
            ("KeyboardInterrupt", "raise KeyboardInterrupt('stop')", ("KeyboardInterrupt", "stop"), "line 1"),
            ("GeneratorExit", "raise GeneratorExit('gen')", ("GeneratorExit", "gen"), "line 1"),
            ("os._exit in a forked child is real",
             "import os\npid = os.fork()\nif pid == 0:\n    os._exit(7)\n_, status = os.waitpid(pid, 0)\nreturn os.waitstatus_to_exitcode(status)",
             7, None),
            ("print whose __str__ raises",
             "class S:\n    def __str__(self):\n        raise ValueError('no str')\nprint(S())",
             ("ValueError", "no str"), 'line 4, in __dsh_main__'),
            ("recursion while printing", "def f(n):\n    print(n)\n    f(n + 1)\nf(0)", ("RecursionError", "maximum recursion depth exceeded"), "line 3, in f"),
            ("value whose __repr__ raises", "class P:\n    def __repr__(self):\n        raise RuntimeError('no repr')\nreturn P()",
             "<unrepresentable P: RuntimeError: no repr>", None),
            ("value whose __repr__ recurses", "class P:\n    def __repr__(self):\n        return repr(self)\nreturn P()",
             "<unrepresentable P: RecursionError: maximum recursion depth exceeded>", None),
            ("value whose class and metaclass name raise",
             "class Meta(type):\n    @property\n    def __name__(cls):\n        raise RuntimeError('no')\n"
             "class P(metaclass=Meta):\n    @property\n    def __class__(self):\n        raise RuntimeError('no')\n    def __repr__(self):\n        return 1/0\nreturn P()",
             "<unrepresentable P: ZeroDivisionError: division by zero>", None),
            ("value with an exception from __eq__ and __hash__",
             "class P:\n    def __eq__(self, o):\n        raise RuntimeError('eq')\n    def __hash__(self):\n        raise RuntimeError('hash')\n"
             "    def __repr__(self):\n        return 'P()'\nreturn [P()]",
             "[P()]", None),
            ("a task left pending", "import asyncio\nasync def forever():\n    await asyncio.sleep(100)\nt = asyncio.create_task(forever())\nawait asyncio.sleep(0)\nreturn 'left'",
             "left", None),
            ("the program's event loop stopped", "import asyncio\nasyncio.get_running_loop().stop()\nawait asyncio.sleep(1)",
             ("RuntimeError", "Event loop stopped before Future completed."), None),
        ]
        outs = hosts(*(dict(program=prog) for _, prog, _, _ in cases))
        for (name, _, want, in_stack), out in zip(cases, outs):
            with self.subTest(name):
                done = self.ok(out)
                texts = [log["text"] for log in out.logs] + [json.dumps(done)]
                for t in texts:
                    self.assertNotIn("dsh_runner", t)
                if want is None:
                    self.assertEqual(done, {"type": "done", "ok": True})
                elif isinstance(want, tuple):
                    self.assertFalse(done["ok"], done)
                    self.assertNotIn("exit", done, "an exception is not an exit")
                    self.assertEqual((done["error"]["name"], done["error"]["message"]), want)
                    if in_stack:
                        self.assertIn(in_stack, done["error"]["stack"])
                else:
                    self.assertTrue(done["ok"], done)
                    self.assertEqual(done["value"], want)

    def test_exits_before_returning_are_exits(self):
        # (name, program, status, error name, message, text the stack must
        # contain): whatever the status, 0 included, from the program's body,
        # a callback or a thread, the done frame is an exit, never a
        # completed run; the runner itself still exits 0 after it.
        cases = [
            ("sys.exit(0)", "import sys\nsys.exit(0)\nreturn 'unreached'", 0, "SystemExit", "SystemExit: 0", 'line 2, in __dsh_main__'),
            ("sys.exit()", "import sys\nsys.exit()", 0, "SystemExit", "SystemExit", "SystemExit\n"),
            ("raise SystemExit", "raise SystemExit", 0, "SystemExit", "SystemExit", "line 1"),
            ("exit()", "exit()\nreturn 'unreached'", 0, "SystemExit", "SystemExit", "line 1"),
            ("quit(0)", "quit(0)", 0, "SystemExit", "SystemExit: 0", "line 1"),
            ("sys.exit(3)", "import sys\nprint('before')\nsys.exit(3)\nprint('after')", 3, "SystemExit", "SystemExit: 3", "line 3"),
            ("sys.exit with a message", "import sys\nsys.exit('bye')", 1, "SystemExit", "SystemExit: bye", "SystemExit: bye"),
            ("sys.exit(256)", "import sys\nsys.exit(256)", 0, "SystemExit", "SystemExit: 256", None),
            ("SystemExit whose code's __eq__ raises",
             "import sys\nclass W:\n    def __eq__(self, o):\n        raise RuntimeError('eq')\n    def __str__(self):\n        return 'weird'\nsys.exit(W())",
             1, "SystemExit", "SystemExit: weird", "SystemExit: weird"),
            ("SystemExit whose code property raises",
             "class X(SystemExit):\n    @property\n    def code(self):\n        raise RuntimeError('code')\nraise X(4)",
             4, "SystemExit", "SystemExit: 4", "line 5"),
            ("sys.exit(0) in a callback", "import asyncio, sys\nasyncio.get_running_loop().call_soon(sys.exit, 0)\nawait asyncio.sleep(5)\nreturn 'unreached'",
             0, "SystemExit", "SystemExit: 0", None),
            ("sys.exit(0) caught by the program", "import sys\ntry:\n    sys.exit(0)\nexcept SystemExit:\n    pass\nreturn 'after'", None, None, None, None),
            ("os._exit(0)", "import os\nos._exit(0)\nprint('after')", 0, "Exit", "os._exit(0)", 'line 2, in __dsh_main__'),
            ("os._exit(3)", "import os\nprint('before')\nos._exit(3)\nprint('after')", 3, "Exit", "os._exit(3)", 'line 3, in __dsh_main__'),
            ("os._exit(-1)", "import os\nos._exit(-1)", 255, "Exit", "os._exit(-1)", "Exit: os._exit(-1)"),
            ("os._exit in a thread", "import os, threading, time\nthreading.Thread(target=os._exit, args=(0,)).start()\ntime.sleep(5)\nreturn 'unreached'",
             0, "Exit", "os._exit(0)", "Exit: os._exit(0)"),
            ("os._exit out of range", "import os\ntry:\n    os._exit(2**40)\nexcept OverflowError as e:\n    return str(e)", None, None, None, None),
            ("os.abort()", "import os\nos.abort()\nreturn 'unreached'", 134, "Exit", "os.abort()", 'line 2, in __dsh_main__'),
        ]
        outs = hosts(*(dict(program=prog) for _, prog, *_ in cases))
        for (name, _, status, err_name, message, in_stack), out in zip(cases, outs):
            with self.subTest(name):
                done = self.ok(out)
                for t in [log["text"] for log in out.logs] + [json.dumps(done)]:
                    self.assertNotIn("dsh_runner", t)
                if status is None:  # caught: the program goes on
                    self.assertTrue(done["ok"], done)
                    continue
                self.assertFalse(done["ok"], done)
                self.assertEqual(done.get("exit"), {"status": status})
                self.assertEqual((done["error"]["name"], done["error"]["message"]), (err_name, message))
                if in_stack:
                    self.assertIn(in_stack, done["error"]["stack"])
        by_name = dict(zip((c[0] for c in cases), outs))
        self.assertEqual([log["text"] for log in by_name["os._exit(3)"].logs], ["before\n"])
        self.assertEqual([log["text"] for log in by_name["sys.exit(3)"].logs], ["before\n"])
        self.assertEqual(by_name["sys.exit(0) caught by the program"].done["value"], "after")
        self.assertEqual(by_name["os._exit out of range"].done["value"], "Python int too large to convert to C int")

    def test_hostile_output(self):
        program = "\n".join([
            "import gc, logging, sys",
            "class S:",
            "    def __str__(self):",
            "        raise ValueError('no str')",
            "class Sub(str):",
            "    def __len__(self):",
            "        raise RuntimeError('len')",
            "    def __contains__(self, x):",
            "        raise RuntimeError('contains')",
            "class P:",
            "    def __str__(self):",
            "        return Sub('printed through a str subclass')",
            "print(P())",
            "logging.warning(S())",
            'logging.error("%d items", "x")',
            "class D:",
            "    def __del__(self):",
            "        raise RuntimeError('from __del__')",
            "d = D()",
            "del d",
            "gc.collect()",
            "sys.stdout.close()",
            "print('after close')",
            "sys.stdout.buffer.close()",
            "saved, sys.stdout = sys.stdout, None",
            "print('into None')",
            "sys.stdout = saved",
            "return 'survived'",
        ])
        out = host(program)
        self.assertEqual(self.ok(out)["value"], "survived")
        texts = [log["text"] for log in out.logs]
        for t in texts:
            self.assertNotIn("dsh_runner", t)
            self.assertNotIn("--- Logging error ---", t)
        self.assertEqual(texts[0], "printed through a str subclass\n")
        self.assertRegex(texts[1], r"^<log record not formatted: ValueError: no str; msg=<__main__\.__dsh_main__\.<locals>\.S object at 0x[0-9a-f]+>, args=\(\)>$")
        self.assertEqual(texts[2], "<log record not formatted: TypeError: %d format: a real number is required, not str; msg='%d items', args=('x',)>")
        unraisable = "".join(t for log, t in zip(out.logs, texts) if log["source"] == "stderr")
        self.assertIn("Exception ignored in", unraisable)
        self.assertIn("RuntimeError: from __del__", unraisable)
        self.assertIn("after close\n", texts)
        self.assertNotIn("into None\n", texts)

    def test_errors_and_syntax_errors(self):
        runtime, syntax, syntax2, exit3, interrupt, group = hosts(
            dict(program="x = 1\n\n\ndef f(d):\n    return d['missing']\n\nf({})"),
            dict(program="x = 1\ny = (\n"),
            dict(program="x = 1\n\nreturn x\nbreak"),
            dict(program="import sys\nsys.exit(3)"),
            dict(program="raise KeyboardInterrupt"),
            dict(program="import asyncio\nasync def boom():\n    raise ValueError('in a task')\nawait asyncio.gather(boom())"),
        )
        err = self.ok(runtime)["error"]
        self.assertEqual([err["name"], err["message"]], ["KeyError", "'missing'"])
        self.assertEqual(err["stack"], 'Traceback (most recent call last):\n  File "program.py", line 7, in __dsh_main__\n    f({})\n    ~^^^^\n'
                         "  File \"program.py\", line 5, in f\n    return d['missing']\n           ~^^^^^^^^^^^\nKeyError: 'missing'\n")
        err = self.ok(syntax)["error"]
        self.assertEqual(err["name"], "SyntaxError")
        self.assertEqual(err["message"], "'(' was never closed (program.py, line 2)")
        self.assertTrue(err["stack"].startswith('  File "program.py", line 2\n    y = (\n'), err["stack"])
        self.assertNotIn("dsh_runner", err["stack"])
        err = self.ok(syntax2)["error"]
        self.assertEqual([err["name"], err["message"]], ["SyntaxError", "'break' outside loop (program.py, line 4)"])
        done = self.ok(exit3)
        self.assertEqual([done["exit"], done["error"]["name"], done["error"]["message"]], [{"status": 3}, "SystemExit", "SystemExit: 3"])
        self.assertEqual(self.ok(interrupt)["error"]["name"], "KeyboardInterrupt")
        err = self.ok(group)["error"]
        self.assertEqual([err["name"], err["message"]], ["ValueError", "in a task"])
        self.assertIn('File "program.py", line 3, in boom', err["stack"])

    def test_values_that_are_not_json_cross_as_repr(self):
        outs = hosts(dict(program="return {1, 2}"), dict(program="class P:\n    def __repr__(self):\n        return 'P!'\nreturn P()"),
                     dict(program='return float("inf")'))
        self.assertEqual([self.ok(o) for o in outs], [
            {"type": "done", "ok": True, "valueKind": "inspect", "value": "{1, 2}"},
            {"type": "done", "ok": True, "valueKind": "inspect", "value": "P!"},
            {"type": "done", "ok": True, "valueKind": "inspect", "value": "inf"},
        ])

    def test_value_truncation(self):
        limits = dict(LIMITS, maxValueBytes=1000)
        big, small = hosts(dict(program='return "é" * 3000', limits=limits), dict(program='return "é" * 100', limits=limits))
        done = self.ok(big)
        self.assertEqual([done["valueKind"], done["truncated"]], ["json", True])
        self.assertEqual(done["value"], '"' + "é" * 498)
        self.assertEqual(self.ok(small), {"type": "done", "ok": True, "valueKind": "json", "value": "é" * 100})

    def test_log_cap_and_frame_cut(self):
        limits = {"maxLogBytes": 200, "maxValueBytes": 1000, "maxFrameBytes": 4096}
        capped, long = hosts(
            dict(program='for i in range(50):\n    print(f"line {i:03d}" + " " * 19)\nreturn "finished"', limits=limits),
            dict(program='import logging\nlogging.warning("y" * 10000)\nprint("\\n" * 5000, end="")', limits=dict(limits, maxLogBytes=1 << 20)),
        )
        self.assertEqual(self.ok(capped)["value"], "finished")
        # 28 bytes each plus 64 per entry: the 3rd entry crosses 200 and is the last one sent.
        self.assertEqual([log["text"][:8] for log in capped.logs], ["line 000", "line 001", "line 002"])
        self.ok(long)
        self.assertEqual(len(long.logs), 2)
        for f in long.frames:
            self.assertLessEqual(len(f.encode()), 4096)
        self.assertRegex(long.logs[0]["text"], r"^y{4000,}$")
        self.assertRegex(long.logs[1]["text"], r"^\n{1000,}$")

    def test_empty_log_entries_count(self):
        # Empty entries cost the per-entry overhead, and at most 10,000
        # entries (and the one that crosses) are sent.
        many, small = hosts(
            dict(program='import logging\nfor _ in range(50000):\n    logging.info("")\nreturn "done"'),
            dict(program='import logging\nfor _ in range(100):\n    logging.info("")\nreturn "done"', limits=dict(LIMITS, maxLogBytes=640)),
        )
        self.assertEqual(self.ok(many)["value"], "done")
        self.assertEqual(len(many.logs), runner.MAX_LOG_ENTRIES + 1)
        self.assertEqual(self.ok(small)["value"], "done")
        self.assertEqual(len(small.logs), 11)  # 11 * 64 > 640

    def test_protocol_violations_exit_71(self):
        def run(program):
            return json.dumps({"type": "run", "version": 1, "program": program, "bindings": [{"global": "tools", "functions": ["echo"]}], "limits": LIMITS})

        hang = "import asyncio\nawait tools.echo(1)\nawait asyncio.sleep(5)"

        def answer(program, make):
            def on_hello(conn):
                conn.send(run(program))
                for data in conn:
                    m = json.loads(data)
                    if m["type"] == "call":
                        for r in make(m):
                            conn.send(json.dumps(r))
            return on_hello

        cases = [
            ("a result for an id not in flight", "id 2, which is not in flight",
             answer(hang, lambda m: [{"type": "result", "id": m["id"] + 1, "ok": True, "value": 1}])),
            ("a result settled twice", "id 1, which is not in flight",
             answer(hang, lambda m: [{"type": "result", "id": m["id"], "ok": True, "value": 1}] * 2)),
            ("an ok result without a value", "ok result needs a value",
             answer(hang, lambda m: [{"type": "result", "id": m["id"], "ok": True}])),
            ("a failed result with a value", "carries a message, not a value",
             answer(hang, lambda m: [{"type": "result", "id": m["id"], "ok": False, "value": 1, "message": "m"}])),
            ("a result before the run frame", "before the run frame", lambda c: c.send('{"type":"result","id":1,"ok":true,"value":1}')),
            ("a second run frame", "a second run frame", lambda c: (c.send(run(hang)), c.send(run("")))),
            ("another version", "bad-version", lambda c: c.send(json.dumps({"type": "run", "version": 2, "program": "", "bindings": [], "limits": LIMITS}))),
            ("junk", "not-json", lambda c: c.send("not json")),
            ("a binary frame", "binary frame", lambda c: c.send(run("return 1").encode())),
            ("invalid UTF-8", "1007", lambda c: c.send(b"{\xff}", text=True)),
            ("a runner-side message", "bad-type", lambda c: c.send('{"type":"call","id":1,"global":"tools","name":"a","args":{}}')),
        ]
        outs = hosts(*(dict(on_hello=h) for _, _, h in cases))
        for (name, reason, _), out in zip(cases, outs):
            with self.subTest(name):
                self.assertEqual(out.exit_code, 71, out.stderr)
                self.assertRegex(out.stderr, r"^dsh-py-runner/1: protocol violation: .+\n$")
                self.assertIn(reason, out.stderr)
                self.assertIsNone(out.done)

    def test_egress_keeps_to_the_window(self):
        """Unacknowledged bytes never exceed the window, and the upload
        arrives whole. The host acknowledges nothing until the runner has
        the whole window unacknowledged (the first pause: exactly WINDOW
        bytes received), then only ACK bytes at a time: each time, the
        runner may send that much and no more. WINDOW is no multiple of a
        read or a frame's piece. The runner checked for room before a recv
        of up to 64 KiB, so it went up to 64 KiB past the window."""
        window, ack, n = 100000, 7777, 300000
        sink = {"bytes": 0, "unacked": 0, "first_pause": 0, "acks": 0, "over": [], "pieces": []}

        def on_egress(msg, conn):
            if msg["type"] == "open":
                conn.send(json.dumps({"type": "opened", "stream": msg["stream"], "ok": True, "message": ""}))
            elif msg["type"] == "data":
                b = base64.b64decode(msg["data"])
                sink["pieces"].append(b)
                sink["bytes"] += len(b)
                sink["unacked"] += len(b)
                if sink["unacked"] > window:
                    sink["over"].append(f"{sink['unacked']} bytes unacknowledged after {sink['bytes']} received")
                if sink["bytes"] == n:
                    digest = hashlib.sha256(b"".join(sink["pieces"])).hexdigest()
                    text = f"received {n} sha256 {digest}\n".encode()
                    conn.send(json.dumps({"type": "data", "stream": msg["stream"], "data": base64.b64encode(text).decode()}))
                    conn.send(json.dumps({"type": "close", "stream": msg["stream"]}))
                elif sink["unacked"] >= window:
                    if sink["acks"] == 0:
                        sink["first_pause"] = sink["bytes"]
                    sink["acks"] += 1
                    # Back to ACK bytes of room (exactly ACK when the
                    # runner kept to the window).
                    k = sink["unacked"] - window + ack
                    sink["unacked"] -= k
                    conn.send(json.dumps({"type": "ack", "stream": msg["stream"], "bytes": k}))

        program = "\n".join([
            "import hashlib, os, socket",
            "from urllib.parse import urlparse",
            f"payload = bytes((i * 7 + (i >> 8)) & 255 for i in range({n}))",
            "u = urlparse(os.environ['HTTPS_PROXY'])",
            "s = socket.create_connection((u.hostname, u.port))",
            # The head and the payload in one write: the proxy holds what
            # came with the head until the tunnel opens, and counts it too.
            "s.sendall(b'CONNECT upload.test:443 HTTP/1.1\\r\\n\\r\\n' + payload)",
            "got = b''",
            "while True:",
            "    b = s.recv(65536)",
            "    if not b:",
            "        break",
            "    got += b",
            "s.close()",
            "return {'got': got.decode('latin-1'), 'sha256': hashlib.sha256(payload).hexdigest()}",
        ])
        out = host(program, egress={"window": window}, on_egress=on_egress)
        done = self.ok(out)
        self.assertEqual(sink["over"], [], f"the runner exceeded the {window}-byte window")
        self.assertEqual(sink["first_pause"], window, "bytes received before the runner paused")
        self.assertGreaterEqual(sink["acks"], (n - window) // ack)
        self.assertEqual(done["value"]["got"], f"HTTP/1.1 200 Connection Established\r\n\r\nreceived {n} sha256 {done['value']['sha256']}\n")

    def test_host_going_away_and_no_socket(self):
        def close_later(conn):
            conn.send(json.dumps({"type": "run", "version": 1, "program": "import asyncio\nawait asyncio.sleep(5)", "bindings": [], "limits": LIMITS}))
            time.sleep(0.2)
            conn.close()

        gone, early, missing = hosts(dict(on_hello=close_later), dict(on_hello=lambda c: c.close()),
                                     dict(socket_path=os.path.join(tempfile.gettempdir(), "does-not-exist", "bridge.sock")))
        for out in (gone, early):
            self.assertEqual(out.exit_code, 0, out.stderr)
            self.assertEqual(out.stderr, "")
            self.assertIsNone(out.done)
        self.assertEqual(missing.exit_code, 70)
        self.assertRegex(missing.stderr, r"^dsh-py-runner/1: cannot connect to .*does-not-exist/bridge\.sock: .+\n$")


if __name__ == "__main__":
    unittest.main()
