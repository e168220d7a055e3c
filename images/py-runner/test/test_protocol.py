"""Unit tests of the Python runner's protocol decoder, value rendering and
program compilation. Run from images/py-runner:
python3 -m unittest discover -s test -v"""

import json
import os
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
sys.dont_write_bytecode = True

import bootstrap as boot  # noqa: E402

VECTORS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "portproto", "testdata", "vectors.json")
LIMITS = {"maxLogBytes": 1 << 20, "maxValueBytes": 1 << 20, "maxFrameBytes": 4 << 20}


def code_of(direction, frame, max_frame=1 << 20):
    try:
        boot.decode_frame(direction, frame, max_frame)
        return None
    except boot.ProtocolError as e:
        return e.code


def run_frame(**over):
    frame = {"type": "run", "version": 1, "program": "x", "bindings": [{"global": "tools", "functions": ["a"]}], "limits": LIMITS}
    frame.update(over)
    return json.dumps(frame)


class VectorTest(unittest.TestCase):
    def load(self):
        with open(VECTORS, encoding="utf-8") as f:
            vectors = json.load(f)["vectors"]
        self.assertTrue(vectors)
        return vectors

    def test_host_to_runner_vectors(self):
        mine = [v for v in self.load() if v["direction"] == boot.HOST_TO_RUNNER]
        self.assertTrue(mine)
        for v in mine:
            with self.subTest(v["name"]):
                for frame in (v["frame"], v["frame"].encode("utf-8")):
                    if v["valid"]:
                        msg = boot.validate_host_frame(frame)
                        self.assertEqual(msg["type"], json.loads(v["frame"])["type"])
                    else:
                        with self.assertRaises(boot.ProtocolError) as cm:
                            boot.validate_host_frame(frame)
                        self.assertEqual(cm.exception.code, v["code"], str(cm.exception))

    def test_runner_to_host_vectors(self):
        # The same decoder checks, in the end-to-end tests, what the runner sends.
        for v in self.load():
            if v["direction"] == boot.RUNNER_TO_HOST:
                with self.subTest(v["name"]):
                    self.assertEqual(code_of(v["direction"], v["frame"]), None if v["valid"] else v["code"])


class DecoderTest(unittest.TestCase):
    def test_go_corner_cases(self):
        cases = [
            ("result ok", '{"type":"result","id":1,"ok":true,"value":{"a":[1,2]}}', None),
            ("failed result without message (Go omits an empty message)", '{"type":"result","id":1,"ok":false}', None),
            ("failed result with null message", '{"type":"result","id":1,"ok":false,"message":null}', None),
            ("null ok is false", '{"type":"result","id":1,"ok":null,"message":"m"}', None),
            ("failed result with null value", '{"type":"result","id":1,"ok":false,"value":null}', "bad-field"),
            ("id 1.0 is not an int literal", '{"type":"result","id":1.0,"ok":true,"value":1}', "bad-field"),
            ("id 1e0 is not an int literal", '{"type":"result","id":1e0,"ok":true,"value":1}', "bad-field"),
            ("id max", '{"type":"result","id":%d,"ok":true,"value":1}' % (2**53 - 1), None),
            ("id 2^53", '{"type":"result","id":9007199254740992,"ok":true,"value":1}', "bad-field"),
            ("id beyond int64", '{"type":"result","id":99999999999999999999,"ok":true,"value":1}', "bad-field"),
            ("id with 5000 digits", '{"type":"result","id":%s,"ok":true,"value":1}' % ("9" * 5000), "bad-field"),
            ("id true", '{"type":"result","id":true,"ok":true,"value":1}', "bad-field"),
            ("id null", '{"type":"result","id":null,"ok":true,"value":1}', "bad-field"),
            ("ok as string", '{"type":"result","id":1,"ok":"true","value":1}', "bad-field"),
            ("ok as 1", '{"type":"result","id":1,"ok":1,"value":1}', "bad-field"),
            ("message as number", '{"type":"result","id":1,"ok":false,"message":3}', "bad-field"),
            ("unknown field", '{"type":"result","id":1,"ok":true,"value":1,"extra":0}', "bad-field"),
            ("field in another case", '{"type":"result","ID":1,"ok":true,"value":1}', "bad-field"),
            ("type in another case", '{"Type":"result","id":1,"ok":true,"value":1}', "bad-field"),
            ("no type", '{"id":1}', "bad-type"),
            ("numeric type", '{"type":1}', "bad-type"),
            ("unknown type", '{"type":"nope"}', "bad-type"),
            ("runner frame toward the runner", '{"type":"done","ok":true}', "bad-type"),
            ("null frame", "null", "bad-type"),
            ("array frame", "[1]", "not-json"),
            ("string frame", '"x"', "not-json"),
            ("trailing garbage", '{"type":"result"} x', "not-json"),
            ("NaN literal", '{"type":"result","id":1,"ok":true,"value":NaN}', "not-json"),
            ("Infinity literal", '{"type":"result","id":1,"ok":true,"value":-Infinity}', "not-json"),
            ("BOM", '\ufeff{"type":"result","id":1,"ok":true,"value":1}', "not-json"),
            ("control character in a string", '{"type":"result","id":1,"ok":true,"value":"a\nb"}', "not-json"),
            ("deep nesting", '{"type":"result","id":1,"ok":true,"value":' + "[" * 100000 + "]" * 100000 + "}", "not-json"),
            ("run", run_frame(), None),
            ("run without bindings and program", json.dumps({"type": "run", "version": 1, "limits": LIMITS}), None),
            ("run null bindings", run_frame(bindings=None), None),
            ("run null functions", run_frame(bindings=[{"global": "t", "functions": None}]), None),
            ("run version 1.0", run_frame().replace('"version": 1', '"version": 1.0'), "bad-field"),
            ("run version missing", json.dumps({"type": "run", "program": "", "bindings": [], "limits": LIMITS}), "bad-version"),
            ("run limits missing", json.dumps({"type": "run", "version": 1, "program": "", "bindings": []}), "bad-field"),
            ("run limits only frame bytes", json.dumps({"type": "run", "version": 1, "limits": {"maxFrameBytes": 4096}}), None),
            ("run negative log bytes", run_frame(limits=dict(LIMITS, maxLogBytes=-1)), "bad-field"),
            ("run fractional limit", run_frame(limits=dict(LIMITS, maxLogBytes=1.5)), "bad-field"),
            ("run exponent limit", run_frame().replace('"maxLogBytes": 1048576', '"maxLogBytes": 1e6'), "bad-field"),
            ("run unknown limits field", run_frame(limits=dict(LIMITS, extra=1)), "bad-field"),
            ("run unknown binding field", run_frame(bindings=[{"global": "t", "functions": [], "x": 1}]), "bad-field"),
            ("run binding as array", run_frame(bindings=[["t"]]), "bad-field"),
            ("run null binding", run_frame(bindings=[None]), "bad-field"),
            ("run empty function name", run_frame(bindings=[{"global": "t", "functions": [""]}]), "bad-field"),
            ("run null function name", run_frame(bindings=[{"global": "t", "functions": [None]}]), "bad-field"),
            ("run numeric function name", run_frame(bindings=[{"global": "t", "functions": [1]}]), "bad-field"),
            ("run long function name", run_frame(bindings=[{"global": "t", "functions": ["é" * 513]}]), "bad-field"),
            ("run 1024-byte function name", run_frame(bindings=[{"global": "t", "functions": ["é" * 512]}]), None),
            ("run global with trailing newline", run_frame(bindings=[{"global": "tools\n", "functions": []}]), "bad-field"),
            ("run non-ASCII global", run_frame(bindings=[{"global": "tööls", "functions": []}]), "bad-field"),
            ("run odd names", run_frame(bindings=[{"global": "_T1", "functions": ["__proto__", "constructor", "my-tool", "a b", "☃"]}]), None),
            ("run sourceMap number", run_frame(sourceMap=1), "bad-field"),
            ("run program null", run_frame(program=None), None),
            ("duplicate keys: the last wins", '{"type":"result","id":0,"id":2,"ok":true,"value":1}', None),
        ]
        for name, frame, code in cases:
            with self.subTest(name):
                self.assertEqual(code_of(boot.HOST_TO_RUNNER, frame), code)

    def test_zero_values_and_raw_presence(self):
        self.assertEqual(boot.validate_host_frame('{"type":"result","id":7,"ok":true,"value":null}'),
                         {"type": "result", "id": 7, "ok": True, "value": None, "message": ""})
        self.assertNotIn("value", boot.validate_host_frame('{"type":"result","id":7,"ok":false}'))
        self.assertEqual(
            boot.validate_host_frame(json.dumps({"type": "run", "version": 1, "limits": {"maxFrameBytes": 5000}})),
            {"type": "run", "version": 1, "program": "", "sourceMap": "", "bindings": [],
             "limits": {"maxLogBytes": 0, "maxValueBytes": 0, "maxFrameBytes": 5000}})

    def test_size_and_utf8(self):
        frame = '{"type":"result","id":1,"ok":true,"value":"' + "x" * 5000 + '"}'
        self.assertEqual(code_of(boot.HOST_TO_RUNNER, frame, 4096), "too-large")
        self.assertEqual(code_of(boot.HOST_TO_RUNNER, frame, 0), None)
        head, tail = b'{"type":"result","id":1,"ok":true,"value":"', b'"}'
        self.assertEqual(code_of(boot.HOST_TO_RUNNER, head + b"\xff\xfe" + tail), "not-utf8")
        self.assertEqual(code_of(boot.HOST_TO_RUNNER, head + b"\xed\xa0\x80" + tail), "not-utf8")  # an encoded surrogate
        self.assertEqual(code_of(boot.HOST_TO_RUNNER, '{"type":"result","id":1,"ok":true,"value":"\ud800"}'), "not-utf8")
        # An escaped lone surrogate is valid JSON text (Go reads it as U+FFFD).
        self.assertEqual(code_of(boot.HOST_TO_RUNNER, '{"type":"result","id":1,"ok":true,"value":"\\ud800"}'), None)

    def test_junk_raises_only_protocol_errors(self):
        seeds = [run_frame(), '{"type":"result","id":1,"ok":true,"value":[{"a":"}"}]}', '{"type":"result","id":1,"ok":false,"message":"m"}']
        n = 0
        for seed in seeds:
            for i in range(len(seed)):
                for patch in ("", '"', "}", "]", "1.5", "null", "\\", "{", ","):
                    code_of(boot.HOST_TO_RUNNER, seed[:i] + patch + seed[i + 1:])
                    n += 1
        self.assertGreater(n, 1000)


class ValueTest(unittest.TestCase):
    def frame(self, v, limits=LIMITS):
        return json.loads(boot.done_value_frame(v, limits))

    def test_json_and_repr(self):
        self.assertEqual(self.frame(None), {"type": "done", "ok": True})
        self.assertEqual(self.frame({"a": [1, "two", True, None, {"b": -0.5}], "t": (1, 2)}),
                         {"type": "done", "ok": True, "valueKind": "json", "value": {"a": [1, "two", True, None, {"b": -0.5}], "t": [1, 2]}})
        self.assertEqual(self.frame(0), {"type": "done", "ok": True, "valueKind": "json", "value": 0})
        self.assertEqual(self.frame("é😀"), {"type": "done", "ok": True, "valueKind": "json", "value": "é😀"})
        for v, want in [({1, 2}, "{1, 2}"), (float("nan"), "nan"), (b"x", "b'x'"), (ValueError("v"), "ValueError('v')")]:
            self.assertEqual(self.frame(v), {"type": "done", "ok": True, "valueKind": "inspect", "value": want})
        cyc = []
        cyc.append(cyc)
        self.assertEqual(self.frame(cyc), {"type": "done", "ok": True, "valueKind": "inspect", "value": "[[...]]"})

        class Broken:
            def __repr__(self):
                raise RuntimeError("no")

        self.assertEqual(self.frame(Broken())["value"], "<unrepresentable Broken: RuntimeError>")
        # A lone surrogate in a JSON value is escaped, so the frame stays UTF-8.
        frame = boot.done_value_frame("a\ud800", LIMITS)
        frame.encode("utf-8")
        self.assertEqual(json.loads(frame)["value"], "a\ud800")

    def test_truncation_keeps_the_encoded_value_within_max_value_bytes(self):
        limits = dict(LIMITS, maxValueBytes=10)
        self.assertEqual(self.frame("abcdefgh", limits), {"type": "done", "ok": True, "valueKind": "json", "value": "abcdefgh"})
        self.assertEqual(self.frame("abcdefghi", limits), {"type": "done", "ok": True, "valueKind": "json", "value": '"abcdef', "truncated": True})
        self.assertEqual(self.frame("ééééé", limits), {"type": "done", "ok": True, "valueKind": "json", "value": '"ééé', "truncated": True})
        self.assertEqual(self.frame([1, 2, 3, 4, 5, 6], limits), {"type": "done", "ok": True, "valueKind": "json", "value": "[1,2,3,4", "truncated": True})
        self.assertEqual(self.frame({1, 2, 3, 4}, limits), {"type": "done", "ok": True, "valueKind": "inspect", "value": "{1, 2, 3", "truncated": True})
        self.assertEqual(self.frame({1, 2}, limits), {"type": "done", "ok": True, "valueKind": "inspect", "value": "{1, 2}"})
        for v in ("abcdefghi", "ééééé", "😀😀😀", [1, 2, 3, 4, 5, 6], {1, 2, 3, 4}):
            self.assertLessEqual(len(json.dumps(self.frame(v, limits)["value"], ensure_ascii=False).encode()), 10)
        self.assertEqual(self.frame("abc", dict(LIMITS, maxValueBytes=0)), {"type": "done", "ok": True, "valueKind": "json", "value": "", "truncated": True})
        tight = {"maxLogBytes": 0, "maxValueBytes": 1 << 20, "maxFrameBytes": 4096}
        frame = boot.done_value_frame('"' * 100000, tight)
        self.assertLessEqual(len(frame.encode()), 4096)
        self.assertTrue(json.loads(frame)["truncated"])
        boot.decode_frame(boot.RUNNER_TO_HOST, frame, 4096)

    def test_error_frames(self):
        tight = {"maxLogBytes": 0, "maxValueBytes": 0, "maxFrameBytes": 4096}
        frame = boot._error_frame("Error", "m" * 3000, "s" * 10000, tight)
        self.assertLessEqual(len(frame.encode()), 4096)
        done = boot.decode_frame(boot.RUNNER_TO_HOST, frame, 4096)
        self.assertEqual(done["error"]["message"], "m" * 3000)
        self.assertTrue(done["error"]["stack"].startswith("sss"))
        self.assertEqual(json.loads(boot.done_exit_frame(SystemExit(0), LIMITS)), {"type": "done", "ok": True})
        self.assertEqual(json.loads(boot.done_exit_frame(SystemExit(), LIMITS)), {"type": "done", "ok": True})
        self.assertEqual(json.loads(boot.done_exit_frame(SystemExit(3), LIMITS))["error"], {"name": "SystemExit", "message": "3", "stack": "SystemExit: 3\n"})
        self.assertEqual(json.loads(boot.done_exit_frame(SystemExit("bye"), LIMITS))["error"]["message"], "bye")

    def test_cut_for_json(self):
        self.assertEqual(boot.cut_for_json("abc", 2), "ab")
        self.assertEqual(boot.cut_for_json('a"b', 2), "a")
        self.assertEqual(boot.cut_for_json('a"b', 3), 'a"')
        self.assertEqual(boot.cut_for_json("\x01x", 6), "\x01")
        self.assertEqual(boot.cut_for_json("😀😀", 7), "😀")
        for s in ('x"\\\n\t\x01é€😀\u2028\x7f', "plain"):
            for b in range(40):
                cut = boot.cut_for_json(s, b)
                self.assertLessEqual(len(json.dumps(cut, ensure_ascii=False).encode()) - 2, b)
                self.assertTrue(s.startswith(cut))


class CompileTest(unittest.TestCase):
    def compile(self, src):
        g = {"__builtins__": __builtins__, "__name__": "__main__"}
        fn = boot.compile_program(src, g)
        self.assertNotIn("__dsh_main__", g)
        return fn, g

    def test_lines_and_strings_stay_exact(self):
        import asyncio

        src = 'x = """a\n  b"""\n\n\ndef f():\n    raise KeyError(x)\nf()\n'
        fn, _ = self.compile(src)
        try:
            asyncio.run(fn())
            self.fail("no exception")
        except KeyError as e:  # (assertRaises drops the traceback)
            tb = boot.program_traceback(e)
        self.assertIn('File "program.py", line 7, in __dsh_main__', tb)
        self.assertIn('File "program.py", line 6, in f', tb)
        self.assertIn("KeyError: 'a\\n  b'", tb)
        self.assertNotIn("bootstrap", tb)

    def test_await_return_and_globals(self):
        import asyncio

        fn, g = self.compile("import asyncio\nawait asyncio.sleep(0)\nn = 0\ndef inc():\n    global n\n    n += 1\ninc(); inc()\nreturn n")
        self.assertEqual(asyncio.run(fn()), 2)
        self.assertEqual(g["n"], 2)
        fn, _ = self.compile("")
        self.assertIsNone(asyncio.run(fn()))
        fn, _ = self.compile('"""a docstring only"""')
        self.assertIsNone(asyncio.run(fn()))

    def test_future_imports_stay_at_module_level(self):
        import asyncio

        src = '"""doc"""\nfrom __future__ import annotations\ndef f(x: Undefined) -> int:\n    return 1\nreturn f(0)'
        fn, g = self.compile(src)
        self.assertEqual(asyncio.run(fn()), 1)
        self.assertEqual(sorted(g), ["__builtins__", "__name__"])
        with self.assertRaises(SyntaxError) as cm:
            self.compile("x = 1\nfrom __future__ import annotations")
        self.assertEqual(cm.exception.lineno, 2)

    def test_syntax_errors_name_the_line(self):
        for src, line in [("x = 1\n\nif x\n    pass", 3), ("x = 1\nbreak\n", 2), ("def f():\n    yield 1\n    await g()\n", 3)]:
            with self.subTest(src):
                with self.assertRaises(SyntaxError) as cm:
                    self.compile(src)
                self.assertEqual(cm.exception.filename, "program.py")
                self.assertEqual(cm.exception.lineno, line)
                self.assertIn(f"(program.py, line {line})", str(cm.exception))


if __name__ == "__main__":
    unittest.main()
