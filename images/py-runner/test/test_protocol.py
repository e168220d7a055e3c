"""Unit tests of the Python runner's protocol decoder, value rendering and
program compilation. Run from images/py-runner:
python3 -m unittest discover -s test -v"""

import asyncio
import collections
import datetime
import decimal
import enum
import json
import math
import os
import sys
import time
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
sys.dont_write_bytecode = True

from dsh_runner import protocol, runner, values  # noqa: E402

VECTORS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "portproto", "testdata", "vectors.json")
LIMITS = {"maxLogBytes": 1 << 20, "maxValueBytes": 1 << 20, "maxFrameBytes": 4 << 20}


def code_of(direction, frame, max_frame=1 << 20):
    try:
        protocol.decode_frame(direction, frame, max_frame)
        return None
    except protocol.ProtocolError as e:
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
        mine = [v for v in self.load() if v["direction"] == protocol.HOST_TO_RUNNER]
        self.assertTrue(mine)
        for v in mine:
            with self.subTest(v["name"]):
                for frame in (v["frame"], v["frame"].encode("utf-8")):
                    if v["valid"]:
                        msg = protocol.validate_host_frame(frame)
                        self.assertEqual(msg["type"], json.loads(v["frame"])["type"])
                    else:
                        with self.assertRaises(protocol.ProtocolError) as cm:
                            protocol.validate_host_frame(frame)
                        self.assertEqual(cm.exception.code, v["code"], str(cm.exception))

    def test_runner_to_host_vectors(self):
        # The same decoder checks, in the end-to-end tests, what the runner sends.
        for v in self.load():
            if v["direction"] == protocol.RUNNER_TO_HOST:
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
                self.assertEqual(code_of(protocol.HOST_TO_RUNNER, frame), code)

    def test_zero_values_and_raw_presence(self):
        self.assertEqual(protocol.validate_host_frame('{"type":"result","id":7,"ok":true,"value":null}'),
                         {"type": "result", "id": 7, "ok": True, "value": None, "message": ""})
        self.assertNotIn("value", protocol.validate_host_frame('{"type":"result","id":7,"ok":false}'))
        self.assertEqual(
            protocol.validate_host_frame(json.dumps({"type": "run", "version": 1, "limits": {"maxFrameBytes": 5000}})),
            {"type": "run", "version": 1, "program": "", "sourceMap": "", "bindings": [],
             "limits": {"maxLogBytes": 0, "maxValueBytes": 0, "maxFrameBytes": 5000}})

    def test_size_and_utf8(self):
        frame = '{"type":"result","id":1,"ok":true,"value":"' + "x" * 5000 + '"}'
        self.assertEqual(code_of(protocol.HOST_TO_RUNNER, frame, 4096), "too-large")
        self.assertEqual(code_of(protocol.HOST_TO_RUNNER, frame, 0), None)
        head, tail = b'{"type":"result","id":1,"ok":true,"value":"', b'"}'
        self.assertEqual(code_of(protocol.HOST_TO_RUNNER, head + b"\xff\xfe" + tail), "not-utf8")
        self.assertEqual(code_of(protocol.HOST_TO_RUNNER, head + b"\xed\xa0\x80" + tail), "not-utf8")  # an encoded surrogate
        self.assertEqual(code_of(protocol.HOST_TO_RUNNER, '{"type":"result","id":1,"ok":true,"value":"\ud800"}'), "not-utf8")
        # An escaped lone surrogate is valid JSON text (Go reads it as U+FFFD).
        self.assertEqual(code_of(protocol.HOST_TO_RUNNER, '{"type":"result","id":1,"ok":true,"value":"\\ud800"}'), None)

    def test_junk_raises_only_protocol_errors(self):
        seeds = [run_frame(), '{"type":"result","id":1,"ok":true,"value":[{"a":"}"}]}', '{"type":"result","id":1,"ok":false,"message":"m"}']
        n = 0
        for seed in seeds:
            for i in range(len(seed)):
                for patch in ("", '"', "}", "]", "1.5", "null", "\\", "{", ","):
                    code_of(protocol.HOST_TO_RUNNER, seed[:i] + patch + seed[i + 1:])
                    n += 1
        self.assertGreater(n, 1000)


class ValueTest(unittest.TestCase):
    def frame(self, v, limits=LIMITS):
        return json.loads(values.done_value_frame(v, limits))

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

        self.assertEqual(self.frame(Broken())["value"], "<unrepresentable Broken: RuntimeError: no>")
        # A lone surrogate in a JSON value is escaped, so the frame stays UTF-8.
        frame = values.done_value_frame("a\ud800", LIMITS)
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
        frame = values.done_value_frame('"' * 100000, tight)
        self.assertLessEqual(len(frame.encode()), 4096)
        self.assertTrue(json.loads(frame)["truncated"])
        protocol.decode_frame(protocol.RUNNER_TO_HOST, frame, 4096)

    def test_error_frames(self):
        tight = {"maxLogBytes": 0, "maxValueBytes": 0, "maxFrameBytes": 4096}
        frame = values.error_frame("Error", "m" * 3000, "s" * 10000, tight)
        self.assertLessEqual(len(frame.encode()), 4096)
        done = protocol.decode_frame(protocol.RUNNER_TO_HOST, frame, 4096)
        self.assertEqual(done["error"]["message"], "m" * 3000)
        self.assertTrue(done["error"]["stack"].startswith("sss"))
        # An exit is never a completed run, 0 included; the status is the
        # interpreter's, the message how it exited.
        def exit_of(exc):
            frame = values.done_exit_frame(exc, LIMITS)
            protocol.decode_frame(protocol.RUNNER_TO_HOST, frame)
            done = json.loads(frame)
            self.assertFalse(done["ok"])
            return done["exit"]["status"], done["error"]["name"], done["error"]["message"]

        self.assertEqual(exit_of(SystemExit(0)), (0, "SystemExit", "SystemExit: 0"))
        self.assertEqual(exit_of(SystemExit()), (0, "SystemExit", "SystemExit"))
        self.assertEqual(exit_of(SystemExit(None)), (0, "SystemExit", "SystemExit"))
        self.assertEqual(exit_of(SystemExit(False)), (0, "SystemExit", "SystemExit: False"))
        self.assertEqual(exit_of(SystemExit(True)), (1, "SystemExit", "SystemExit: True"))
        self.assertEqual(exit_of(SystemExit(3)), (3, "SystemExit", "SystemExit: 3"))
        self.assertEqual(json.loads(values.done_exit_frame(SystemExit(3), LIMITS))["error"]["stack"], "SystemExit: 3\n")
        self.assertEqual(exit_of(SystemExit(256)), (0, "SystemExit", "SystemExit: 256"))
        self.assertEqual(exit_of(SystemExit(-1)), (255, "SystemExit", "SystemExit: -1"))
        self.assertEqual(exit_of(SystemExit(2**40)), (0, "SystemExit", "SystemExit: 1099511627776"))
        self.assertEqual(exit_of(SystemExit(2**70)), (255, "SystemExit", f"SystemExit: {2**70}"))
        self.assertEqual(exit_of(SystemExit("bye")), (1, "SystemExit", "SystemExit: bye"))
        self.assertEqual(exit_of(SystemExit(0.0)), (1, "SystemExit", "SystemExit: 0.0"))  # as the interpreter: not an int

    def test_cut_for_json(self):
        self.assertEqual(values.cut_for_json("abc", 2), "ab")
        self.assertEqual(values.cut_for_json('a"b', 2), "a")
        self.assertEqual(values.cut_for_json('a"b', 3), 'a"')
        self.assertEqual(values.cut_for_json("\x01x", 6), "\x01")
        self.assertEqual(values.cut_for_json("😀😀", 7), "😀")
        for s in ('x"\\\n\t\x01é€😀\u2028\x7f', "plain"):
            for b in range(40):
                cut = values.cut_for_json(s, b)
                self.assertLessEqual(len(json.dumps(cut, ensure_ascii=False).encode()) - 2, b)
                self.assertTrue(s.startswith(cut))


# --- hostile program objects: the renderers never raise and say what broke


class NameRaises(type):
    @property
    def __name__(cls):
        raise RuntimeError("no name for you")


class QualnameRaises(type):
    def __getattribute__(cls, name):
        if name in ("__qualname__", "__module__", "__name__"):
            raise RuntimeError(f"no {name} for you")
        return super().__getattribute__(name)


class HostileStr(str):
    def __len__(self):
        raise RuntimeError("len")

    def encode(self, *a, **k):
        raise RuntimeError("encode")

    def __getitem__(self, i):
        raise RuntimeError("getitem")


class Raises:
    def __init__(self, what="no"):
        self.what = what

    def __repr__(self):
        raise RuntimeError(self.what)

    def __str__(self):
        raise ValueError(self.what)

    def __eq__(self, other):
        raise RuntimeError("eq")

    __hash__ = None


def raised(exc):
    """exc with a traceback, as the runner receives it."""
    try:
        raise exc
    except BaseException as e:
        return e


class HostileObjectTest(unittest.TestCase):
    maxDiff = None

    def error(self, exc):
        frame = values.done_error_frame(exc, LIMITS)
        done = protocol.decode_frame(protocol.RUNNER_TO_HOST, frame, LIMITS["maxFrameBytes"])
        return done["error"]

    def test_exceptions(self):
        class E1(Exception, metaclass=NameRaises):
            pass

        class E2(Exception, metaclass=QualnameRaises):
            pass

        class E3(Exception):
            def __str__(self):
                raise ValueError("bad str")

        class E4(Exception):
            def __str__(self):
                return HostileStr("hostile but printable")

        class E5(Exception):
            @property
            def __cause__(self):
                raise RuntimeError("no cause")

        class E6(Exception):
            @property
            def __traceback__(self):
                raise RuntimeError("no traceback")

        class E7(Exception):
            @property
            def __notes__(self):
                raise RuntimeError("no notes")

        cases = [
            # (exception, name, message, text the stack must contain)
            (raised(E1("boom")), "E1", "boom", "E1: boom"),
            (raised(E2("boom")), "E2", "boom", "E2: boom"),
            (raised(E3()), "E3", "<E3 str() failed: ValueError: bad str>", "E3: <exception str() failed>"),
            (raised(E4()), "E4", "hostile but printable", "E4: hostile but printable"),
            (raised(E5("c")), "E5", "c", "E5: c"),
            (raised(E6("t")), "E6", "t", "E6: t"),
            (raised(E7("n")), "E7", "n", "E7: n"),
            (raised(ValueError(Raises("inner"))), "ValueError", "<ValueError str() failed: ValueError: inner>", "ValueError"),
            (raised(KeyboardInterrupt()), "KeyboardInterrupt", "", "KeyboardInterrupt"),
            (raised(GeneratorExit("g")), "GeneratorExit", "g", "GeneratorExit: g"),
            (raised(RecursionError("deep")), "RecursionError", "deep", "RecursionError: deep"),
        ]
        for exc, name, message, in_stack in cases:
            with self.subTest(name):
                err = self.error(exc)
                self.assertEqual((err["name"], err["message"]), (name, message))
                self.assertIn(in_stack, err.get("stack", ""))
                self.assertNotIn("dsh_runner", err.get("stack", ""))

    def test_a_long_exception_chain(self):
        e = None
        for i in range(3000):
            try:
                raise ValueError(i) from e
            except ValueError as x:
                e = x
        err = self.error(e)
        self.assertEqual((err["name"], err["message"]), ("ValueError", "2999"))
        self.assertIn("The above exception was the direct cause", err["stack"])

    def test_system_exit_codes(self):
        class CodeRaises(SystemExit):
            @property
            def code(self):
                raise RuntimeError("no code")

        class Zero(enum.IntEnum):
            ZERO = 0

        class HostileInt(int):
            def __index__(self):
                raise RuntimeError("index")

            def __and__(self, other):
                raise RuntimeError("and")

        cases = [
            (SystemExit(Raises("weird")), 1, "SystemExit: <Raises str() failed: ValueError: weird>"),  # its __eq__ raises
            (CodeRaises(5), 5, "SystemExit: 5"),  # the real code, not the property
            (SystemExit(Zero.ZERO), 0, "SystemExit: 0"),  # IntEnum.__str__ is int.__str__
            (SystemExit(HostileInt(258)), 2, "SystemExit: 258"),
            (SystemExit(HostileStr("bye")), 1, "SystemExit: bye"),
            (SystemExit([1, 2]), 1, "SystemExit: [1, 2]"),
        ]
        for exc, status, message in cases:
            with self.subTest(repr(type(exc.args[0]) if exc.args else exc)):
                frame = values.done_exit_frame(raised(exc), LIMITS)
                protocol.decode_frame(protocol.RUNNER_TO_HOST, frame)
                done = json.loads(frame)
                self.assertEqual((done["ok"], done["exit"], done["error"]["name"], done["error"]["message"]), (False, {"status": status}, "SystemExit", message))

    def test_values(self):
        class DictItemsRaise(dict):
            def items(self):
                raise RuntimeError("items")

        class Recursive:
            def __repr__(self):
                return repr(self)

        class Huge:
            def __repr__(self):
                return "x" * (3 << 20)

        class ClassRaises:
            @property
            def __class__(self):
                raise RuntimeError("class")

            def __repr__(self):
                return "ClassRaises()"

        P = NameRaises("P", (), {"__repr__": lambda self: 1 / 0})
        cases = [
            (Raises(), "<unrepresentable Raises: RuntimeError: no>"),
            (P(), "<unrepresentable P: ZeroDivisionError: division by zero>"),
            (DictItemsRaise(a=1), "{'a': 1}"),
            (Recursive(), "<unrepresentable Recursive: RecursionError: maximum recursion depth exceeded>"),
            (ClassRaises(), "ClassRaises()"),
            ({"k": Raises()}, "<unrepresentable dict: RuntimeError: no>"),
            (HostileStr("a str subclass"), "a str subclass"),
        ]
        for v, want in cases:
            with self.subTest(want):
                done = json.loads(values.done_value_frame(v, LIMITS))
                self.assertEqual(done["value"], want)
        # A huge repr is cut, and the frame is valid.
        done = json.loads(values.done_value_frame(Huge(), LIMITS))
        self.assertEqual((done["valueKind"], done["truncated"]), ("inspect", True))
        # A JSON value whose text would be huge (shared lists) is produced
        # only up to the cap.
        x = [1] * 1000
        bomb = [[x] * 1000] * 1000
        start = time.monotonic()
        done = json.loads(values.done_value_frame(bomb, LIMITS))
        self.assertLess(time.monotonic() - start, 5)
        self.assertEqual((done["valueKind"], done["truncated"]), ("json", True))
        self.assertTrue(done["value"].startswith("[[[1,1,"))

    def test_class_names(self):
        A = NameRaises("A", (), {})
        B = type("B", (), {})
        B.__name__ = HostileStr("Bee")
        self.assertEqual(values.class_name(A), "A")
        self.assertEqual(values.class_name(B), "Bee")
        self.assertIs(type(values.class_name(B)), str)

    def test_log_records_that_cannot_be_formatted(self):
        import logging

        sent = []

        class FakeRunner:
            def emit_log(self, source, level, text):
                sent.append((source, level, text))

        h = runner._LogHandler(FakeRunner())
        mk = logging.LogRecord
        h.emit(mk("x", logging.WARNING, "p.py", 1, Raises("msg"), None, None))
        h.emit(mk("x", logging.ERROR, "p.py", 1, "%d", ("x",), None))
        rec = mk("x", logging.INFO, "p.py", 1, "fine", None, None)
        rec.levelno = Raises()
        h.emit(rec)
        self.assertEqual(sent, [
            ("console", "warn", "<log record not formatted: ValueError: msg; msg=<unrepresentable Raises: RuntimeError: msg>, args=None>"),
            ("console", "error", "<log record not formatted: TypeError: %d format: a real number is required, not str; msg='%d', args=('x',)>"),
            ("console", "log", "fine"),
        ])


# --- the tool-argument rule


class Color(enum.IntEnum):
    RED = 1


class Name(str):
    pass


class ArgsTest(unittest.TestCase):
    maxDiff = None

    def reject(self, args, max_bytes=1 << 20):
        try:
            text = values.tool_args_json(args, max_bytes)
        except values.ArgsRejection as r:
            return f"{values.args_path(r.segments)}: {r.reason}"
        self.fail(f"accepted: {text}")

    def test_json_values_cross_exactly(self):
        for args, want in [
            ({"a": [1, 2.5, "x", True, False, None, {"b": []}], "big": 2**64, "neg0": -0.0, "é": "😀"},
             '{"a":[1,2.5,"x",true,false,null,{"b":[]}],"big":18446744073709551616,"neg0":-0.0,"é":"😀"}'),
            ([], "[]"),
            ("s", '"s"'),
            (0, "0"),
            (1e300, "1e+300"),
            (2**1023, str(2**1023)),
        ]:
            with self.subTest(want):
                self.assertEqual(values.tool_args_json(args, 1 << 20), want)
        # Shared (not circular) values are fine.
        shared = {"s": 1}
        self.assertEqual(values.tool_args_json([shared, shared], 100), '[{"s":1},{"s":1}]')
        # 512 levels are fine, 513 are not.
        deep = []
        for _ in range(511):
            deep = [deep]
        self.assertEqual(values.tool_args_json(deep, 1 << 20), "[" * 512 + "]" * 512)

    def test_lossy_values_are_rejected_with_a_path(self):
        cyc = {"a": 1}
        cyc["self"] = cyc
        deep = []
        for _ in range(600):
            deep = [deep]

        async def coro():
            pass

        c = coro()
        self.addCleanup(c.close)
        loop = asyncio.new_event_loop()
        self.addCleanup(loop.close)
        K = NameRaises("K", (), {})
        cases = [
            ({"items": [1, 2, 3, float("nan")]}, "args.items[3]: NaN is not JSON"),
            ({"x": math.inf}, "args.x: Infinity is not JSON"),
            ([-math.inf], "args[0]: -Infinity is not JSON"),
            ({"t": (1, 2)}, "args.t: a tuple is not JSON (use a list)"),
            ({1: "a"}, "args: key 1 is not a string"),
            ({"a": {(1, 2): 0}}, "args.a: key (1, 2) is not a string"),
            ({"a": {Raises(): 0}} if False else {"a": {None: 0}}, "args.a: key None is not a string"),
            ({"a b": {"x": {1, 2}}}, 'args["a b"].x: a set is not JSON'),
            ({"f": frozenset()}, "args.f: a frozenset is not JSON"),
            ({"b": b"x"}, "args.b: a bytes object is not JSON"),
            ({"b": bytearray(b"x")}, "args.b: a bytearray is not JSON"),
            ({"fn": len}, "args.fn: a function is not JSON"),
            ({"fn": lambda: 1}, "args.fn: a function is not JSON"),
            ({"fn": "".join}, "args.fn: a function is not JSON"),
            ({"fn": ArgsTest.reject}, "args.fn: a function is not JSON"),
            ({"c": Color.RED}, "args.c: an instance of Color (a subclass of int) is not JSON"),
            ({"n": Name("x")}, "args.n: an instance of Name (a subclass of str) is not JSON"),
            ({"o": collections.OrderedDict()}, "args.o: an instance of OrderedDict (a subclass of dict) is not JSON (use dict(...))"),
            ({"p": collections.namedtuple("P", "x")(1)}, "args.p: an instance of P (a subclass of tuple) is not JSON (use a list)"),
            ({"d": decimal.Decimal("1.5")}, "args.d: an instance of Decimal is not JSON"),
            ({"when": datetime.datetime(2020, 1, 1)}, "args.when: a datetime is not JSON (use .isoformat())"),
            ({"day": datetime.date(2020, 1, 1)}, "args.day: a date is not JSON (use .isoformat())"),
            ({"o": object()}, "args.o: an instance of object is not JSON"),
            ({"k": K()}, "args.k: an instance of K is not JSON"),
            ({"cls": dict}, "args.cls: a class is not JSON"),
            ({"c": c}, "args.c: a coroutine is not JSON (await it first)"),
            ({"f": loop.create_future()}, "args.f: a Future is not JSON (await it first)"),
            ({"n": 10**400}, "args.n: an integer beyond the float64 range is not JSON"),
            ({"s": "ok \ud800"}, "args.s: a string with a lone surrogate is not JSON"),
            ({"\udc00": 1}, 'args: key "\\udc00" has a lone surrogate'),
            (cyc, "args.self: circular reference"),
            ([[1], [2, [cyc]]], "args[1][1][0].self: circular reference"),
            ({"$ref": [1, {"é": None, "ok": float("nan")}]}, "args.$ref[1].ok: NaN is not JSON"),
            ({"x": {"é": math.nan}}, 'args.x["é"]: NaN is not JSON'),
            ({"": 1.5, "q\"": math.nan}, 'args["q\\""]: NaN is not JSON'),
            (float("nan"), "args: NaN is not JSON"),
        ]
        for args, want in cases:
            with self.subTest(want):
                self.assertEqual(self.reject(args), want)
        # Too deep: the path is cut.
        got = self.reject(deep)
        self.assertTrue(got.startswith("args[0][0][0]"), got)
        self.assertTrue(got.endswith("…: nested deeper than 512 levels"), got)
        self.assertEqual(len(got.split(": ")[0]), values.MAX_PATH_CHARS)
        # A long key is cut in the path too.
        got = self.reject({"k" * 5000: {"x": math.nan}})
        self.assertEqual(got, "args." + "k" * 194 + "…: NaN is not JSON")
        got = self.reject({"k-" * 5000: math.nan})
        self.assertEqual(len(got.split(": ")[0]), values.MAX_PATH_CHARS)

    def test_size_is_bounded_before_it_is_read_in_full(self):
        self.assertEqual(self.reject({"s": "x" * 5000}, 4096), "args: too large: the call frame would exceed the 4096-byte frame limit")
        x = [1] * 1000
        bomb = [[x] * 1000] * 1000  # 10^9 numbers, 3 lists
        start = time.monotonic()
        self.assertEqual(self.reject(bomb, 1 << 20), "args: too large: the call frame would exceed the 1048576-byte frame limit")
        self.assertLess(time.monotonic() - start, 5)
        # The walk's estimate is a lower bound of the text's bytes (exact here: 30),
        # so it never rejects what fits; the call checks the exact frame.
        v = ["é" * 10, [1, 2]]
        self.assertEqual(values.tool_args_json(v, 30), '["éééééééééé",[1,2]]')
        self.assertEqual(self.reject(v, 29), "args: too large: the call frame would exceed the 29-byte frame limit")

    def test_quoting_matches_json_stringify(self):
        for s, want in [("a", '"a"'), ('q"\\', '"q\\"\\\\"'), ("\n\x01\x7f", '"\\n\\u0001\x7f"'), ("é😀", '"é😀"'), ("\ud800x", '"\\ud800x"')]:
            with self.subTest(s):
                self.assertEqual(values.js_quote(s), want)


class CompileTest(unittest.TestCase):
    def compile(self, src):
        g = {"__builtins__": __builtins__, "__name__": "__main__"}
        fn = runner.compile_program(src, g)
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
            tb = values.program_traceback(e)
        self.assertIn('File "program.py", line 7, in __dsh_main__', tb)
        self.assertIn('File "program.py", line 6, in f', tb)
        self.assertIn("KeyError: 'a\\n  b'", tb)
        self.assertNotIn("dsh_runner", tb)

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
