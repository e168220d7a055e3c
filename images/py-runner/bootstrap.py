#!/usr/bin/env python3
"""dsh-py-runner bootstrap: runs one Python program inside a throwaway
container and bridges its tool calls to the host.

Contract (wire protocol version 1, see portproto/portproto.go):

    python3 /opt/dsh/bootstrap.py [/run/dsh/bridge.sock]

1. Connect once to the host over the Unix socket (websockets' sync client,
   ``ws://localhost/v1``, no compression, no size limit, no keepalive pings:
   the host enforces its own limits and may hold a warm runner for a long
   time). On failure: one line on stderr, exit 70.
2. Send {"type":"hello","version":1,"language":"python",
   "runner":"dsh-py-runner/1"} and wait for the host's "run" frame.
3. Every frame from the host is validated with the same rules as
   portproto.Decode(HostToRunner, ...): only "run" (once, first) and then
   "result" frames, exact field names, no unknown fields, Go types, ids in
   1..2^53-1, a result for a call that is in flight. Any violation: one line
   on stderr, exit 71.
4. ``program`` is the model's source, verbatim. It is parsed as
   "program.py" and its module body becomes the body of
   ``async def __dsh_main__():`` (built on the AST, so line numbers and
   string literals stay exact; top-level ``await`` and ``return`` work).
   Names that nested functions declare ``global`` are declared global in the
   wrapper too, so the usual script idiom keeps working. The code runs in a
   fresh globals dict holding only ``__builtins__``, ``__name__ =
   "__main__"``, ``ToolCallError`` and the binding namespaces (a namespace
   named like one of the first three does not replace it), on a fresh
   asyncio event loop. Leading ``from __future__`` imports stay at module level,
   where they are legal. A SyntaxError (parse or compile) fails the run with
   name "SyntaxError" and a message naming the line.
5. A binding namespace supports ``tools.name(args)`` and
   ``tools["odd-name"](args)``; each function takes one argument (default
   None, sent as null) that must follow the tool-argument rule (see "Tool
   arguments" below): a value that breaks it raises TypeError
   ``tools["name"]: <path>: <reason>`` in the program and sends nothing.
   The call sends {"type":"call","id":n,"global","name","args"} (ids 1, 2,
   3...) and awaits the matching "result", in any order. A failed result
   raises ToolCallError(message) with ``tool_name`` (alias ``toolName``).
   In a traceback the program prints, a tool call is one frame,
   ``File "<tools>", in tools.name``: the runner's source never shows.
6. print / sys.stdout become "stdout" log frames (line-buffered: sent at
   each newline, on flush, and at the end), sys.stderr "stderr" frames, and
   the logging module (a handler on the root logger, whose level is set to
   DEBUG) "console" frames with levels debug, info, warn (WARNING) and
   error (ERROR, CRITICAL).
7. The last frame is "done": the value (JSON when json.dumps accepts it,
   else its repr as "inspect"), or the error {name, message, stack} of any
   exception that escaped the program. The stack is the traceback limited
   to program.py frames. SystemExit with code 0 or None is a successful run
   without a value (a script exiting 0); any other code fails the run with
   name "SystemExit" and the code as message. os._exit(n) called in the
   runner's own process (not a forked child) ends the run the same way: 0
   is a successful run without a value, anything else fails it with name
   "Exit" and message "os._exit(n)". KeyboardInterrupt, GeneratorExit and
   other BaseExceptions fail the run like exceptions. Then the socket is
   closed and the process exits 0. If the host goes away before that: exit
   0.

The program's objects never break the runner: every name, str, repr and
JSON encoding of a value the program made (its exception and the chain
behind it, its value, its SystemExit code, what it prints or logs) is taken
defensively. Class names come from the type itself (a metaclass property
cannot intercept them), str subclasses are copied to plain str before use,
and whatever raises (a __str__, a __repr__, a metaclass property, a hostile
__eq__, a recursion) is replaced by a fallback text naming what raised, e.g.
"<E str() failed: ValueError: no>" or "<unrepresentable P: RuntimeError:
no>". A log record that cannot be formatted is logged as such, never as a
traceback of the runner.

Caps: the host enforces all limits; the runner only avoids sending what the
host would drop. A log entry's text is cut so its frame fits maxFrameBytes.
Each entry costs its text's bytes plus 64 (LOG_ENTRY_OVERHEAD, what the host
charges per entry, so empty entries count), and once that total exceeds
maxLogBytes, or more than 10,000 entries (MAX_LOG_ENTRIES) were sent,
nothing more is logged (the entry that crosses either cap is sent, so the
host sees the overflow). The done value, as encoded in the frame, is at most
maxValueBytes bytes: a longer one becomes a JSON string holding the longest
prefix of its text (its JSON text, or its repr) whose encoding fits, with
"truncated":true. (The host re-wraps any value longer than maxValueBytes as
a string, so a prefix of exactly maxValueBytes bytes would arrive
double-encoded.) The JSON text is produced only up to the cap: what follows
the cut is not examined, so a value that is JSON up to the cap is sent as a
truncated JSON prefix. Text is made valid UTF-8 (unencodable characters
become "?").

Not captured: writes that bypass sys.stdout/sys.stderr (os.write(1, ...),
subprocesses); a program that kills its own process (os.kill, os.abort,
posix._exit) ends the container without a done frame (the host reports the
exit). The program runs in this process: the container is the security
boundary, this file only aims at correct, robust behaviour (the runner's
JSON encoders are bound before the program runs, but a program that
rewrites deeper parts of the standard library the runner uses can break its
own run). It uses nothing but the standard library and ``websockets``,
writes nothing to disk and opens no network connection.
"""

import ast
import asyncio
import builtins
import codecs
import io
import json
import linecache
import logging
import math
import operator
import os
import re
import sys
import threading
import traceback
import types

VERSION = 1
LANGUAGE = "python"
RUNNER = "dsh-py-runner/1"
DEFAULT_SOCKET = "/run/dsh/bridge.sock"
PROGRAM_FILE = "program.py"
EXIT_CONNECT = 70
EXIT_PROTOCOL = 71
# How long to wait for the host's close handshake after the done frame.
CLOSE_TIMEOUT = 2.0
# A stdout/stderr line longer than this is sent without waiting for its end.
MAX_PENDING_CHARS = 64 << 10
# What the host charges each log entry on top of its text, and how many
# entries it keeps: the runner stops sending log frames the host would drop.
LOG_ENTRY_OVERHEAD = 64
MAX_LOG_ENTRIES = 10_000
# The runner's own exit: the program sees a version of os._exit that ends
# the run with a done frame (see Runner.program_exit).
_real_exit = os._exit

# ---------------------------------------------------------------------------
# Protocol: a strict decoder equivalent to portproto.Decode.

HOST_TO_RUNNER = "host-to-runner"
RUNNER_TO_HOST = "runner-to-host"
MAX_ID = 2**53 - 1
MAX_NAME_BYTES = 1024
MAX_RUNNER_BYTES = 128
MIN_FRAME_BYTES = 4096
_GLOBAL_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")  # used with fullmatch
_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1


class ProtocolError(Exception):
    """A protocol violation; ``code`` matches portproto's error codes."""

    def __init__(self, code, reason):
        super().__init__(f"portproto: {code}: {reason}")
        self.code = code
        self.reason = reason


# Field specs mirror the Go structs. A missing field or a JSON null decodes
# to the Go zero value, like encoding/json; "raw" (json.RawMessage) fields are
# present whenever the key is there, even with null; "pointer" objects decode
# null to absent.
_BINDING = {"global": "string", "functions": ("list", "string")}
_LIMITS = {"maxLogBytes": "int", "maxValueBytes": "int", "maxFrameBytes": "int"}
_PROGRAM_ERROR = {"name": "string", "message": "string", "stack": "string"}
_MESSAGES = {
    "hello": (RUNNER_TO_HOST, {"type": "string", "version": "int", "language": "string", "runner": "string"}),
    "run": (HOST_TO_RUNNER, {
        "type": "string", "version": "int", "program": "string", "sourceMap": "string",
        "bindings": ("list", ("object", _BINDING)), "limits": ("object", _LIMITS),
    }),
    "call": (RUNNER_TO_HOST, {"type": "string", "id": "int", "global": "string", "name": "string", "args": "raw"}),
    "result": (HOST_TO_RUNNER, {"type": "string", "id": "int", "ok": "bool", "value": "raw", "message": "string"}),
    "log": (RUNNER_TO_HOST, {"type": "string", "source": "string", "level": "string", "text": "string"}),
    "done": (RUNNER_TO_HOST, {
        "type": "string", "ok": "bool", "value": "raw", "valueKind": "string", "truncated": "bool",
        "error": ("pointer", _PROGRAM_ERROR),
    }),
}


def _reject_constant(name):
    raise ValueError(f"invalid JSON literal {name}")


def _parse_int(text):
    # int() refuses more than 4300 digits; such a literal is still valid JSON
    # (Go keeps it raw), and no int field accepts it anyway.
    return int(text) if len(text) < 4000 else float(text)


# Python's json also accepts NaN and Infinity; Go does not.
_JSON = json.JSONDecoder(parse_constant=_reject_constant, parse_int=_parse_int)


def _truncate(s):
    return s if len(s) <= 64 else s[:64] + "…"


def _kind(v):
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "bool"
    if isinstance(v, (int, float)):
        return "number"
    return {str: "string", list: "array", dict: "object"}.get(type(v), type(v).__name__)


def _decode_value(spec, value, path):
    def bad(want):
        return ProtocolError("bad-field", f"{path}: cannot decode {_kind(value)} as {want}")

    if spec == "string":
        if value is None:
            return ""
        if not isinstance(value, str):
            raise bad("string")
        return value
    if spec == "bool":
        if value is None:
            return False
        if value is not True and value is not False:
            raise bad("bool")
        return value
    if spec == "int":
        if value is None:
            return 0
        # json gives int only for integer literals ("1", not "1.0" or "1e0"),
        # exactly the literals Go decodes into an int.
        if type(value) is not int:
            raise bad("integer")
        if not _INT64_MIN <= value <= _INT64_MAX:
            raise bad("64-bit integer")
        return value
    kind, inner = spec
    if kind == "list":
        if value is None:
            return []
        if not isinstance(value, list):
            raise bad("array")
        return [_decode_value(inner, v, f"{path}[{i}]") for i, v in enumerate(value)]
    if value is None:
        return None if kind == "pointer" else _decode_object(inner, {}, path)
    if not isinstance(value, dict):
        raise bad("object")
    return _decode_object(inner, value, path)


def _decode_object(fields, obj, path):
    # portproto checks the top-level keys exactly; nested objects are held to
    # the same rule here.
    for key in obj:
        if key not in fields:
            raise ProtocolError("bad-field", f"{path}: unknown field {json.dumps(_truncate(key))}")
    out = {}
    for key, spec in fields.items():
        if spec == "raw":
            if key in obj:
                out[key] = obj[key]
            continue
        v = _decode_value(spec, obj.get(key), f"{path}.{key}" if path else key)
        if v is not None:
            out[key] = v
    return out


def _utf8_len(s):
    return len(s.encode("utf-8", "surrogatepass"))


def _check_id(i):
    if not 1 <= i <= MAX_ID:
        raise ProtocolError("bad-field", f"id {i} out of range 1..2^53-1")


def _check_name(what, s):
    if not 1 <= _utf8_len(s) <= MAX_NAME_BYTES:
        raise ProtocolError("bad-field", f"{what} must be 1..{MAX_NAME_BYTES} bytes")


def _check_global(what, g):
    if not _GLOBAL_RE.fullmatch(g) or len(g) > MAX_NAME_BYTES:
        raise ProtocolError("bad-field", f"{what} {json.dumps(_truncate(g))} is not an identifier")


def _validate(m):
    def bad(reason):
        return ProtocolError("bad-field", reason)

    t = m["type"]
    if t == "hello":
        if m["version"] != VERSION:
            raise ProtocolError("bad-version", f"runner speaks version {m['version']}, host speaks {VERSION}")
        if m["language"] not in ("typescript", "python"):
            raise bad(f"hello: unknown language {json.dumps(_truncate(m['language']))}")
        if not 1 <= _utf8_len(m["runner"]) <= MAX_RUNNER_BYTES:
            raise bad(f"hello: runner must be 1..{MAX_RUNNER_BYTES} bytes")
    elif t == "run":
        if m["version"] != VERSION:
            raise ProtocolError("bad-version", f"host speaks version {m['version']}, runner speaks {VERSION}")
        globals_ = set()
        for b in m["bindings"]:
            _check_global("run: binding global", b["global"])
            if b["global"] in globals_:
                raise bad(f"run: duplicate binding global {json.dumps(b['global'])}")
            globals_.add(b["global"])
            names = set()
            for f in b["functions"]:
                _check_name("run: function", f)
                if f in names:
                    raise bad(f"run: duplicate function {json.dumps(_truncate(f))} in {b['global']}")
                names.add(f)
        lim = m["limits"]
        if lim["maxFrameBytes"] < MIN_FRAME_BYTES or lim["maxLogBytes"] < 0 or lim["maxValueBytes"] < 0:
            raise bad("run: limits out of range")
    elif t == "call":
        _check_id(m["id"])
        _check_global("call: global", m["global"])
        _check_name("call: name", m["name"])
        if "args" not in m:
            raise bad("call: args is required (use null for none)")
    elif t == "result":
        _check_id(m["id"])
        if m["ok"] and "value" not in m:
            raise bad("result: ok result needs a value")
        if not m["ok"] and "value" in m:
            raise bad("result: a failed result carries a message, not a value")
    elif t == "log":
        if m["source"] == "console":
            if m["level"] not in ("log", "info", "warn", "error", "debug"):
                raise bad(f"log: console level {json.dumps(_truncate(m['level']))} is not one of log, info, warn, error, debug")
        elif m["source"] in ("stdout", "stderr"):
            if m["level"] != "":
                raise bad(f"log: {m['source']} entries carry no level")
        else:
            raise bad(f"log: source {json.dumps(_truncate(m['source']))} is not one of console, stdout, stderr")
    elif t == "done":
        if m["ok"]:
            if "error" in m:
                raise bad("done: ok done carries no error")
            kind = m["valueKind"]
            if kind == "":
                if "value" in m:
                    raise bad("done: value without valueKind")
            elif kind == "json":
                if "value" not in m:
                    raise bad("done: valueKind json without value")
            elif kind == "inspect":
                if not isinstance(m.get("value"), str):
                    raise bad("done: an inspect value must be a JSON string")
            else:
                raise bad(f"done: unknown valueKind {json.dumps(_truncate(kind))}")
        else:
            if "error" not in m:
                raise bad("done: failed done needs an error")
            if "value" in m or m["valueKind"] != "" or m["truncated"]:
                raise bad("done: failed done carries no value")


def decode_frame(direction, frame, max_frame=0):
    """Validate and decode one frame sent in ``direction`` with the rules of
    portproto.Decode. ``frame`` is the bytes of a text frame, or a str;
    ``max_frame`` bounds its size in bytes (0: no bound). Returns the message
    as a dict with Go zero values filled in; "raw" fields (args, value) are
    present only when the frame had them. Raises ProtocolError."""
    if isinstance(frame, str):
        size = _utf8_len(frame)
        if max_frame > 0 and size > max_frame:
            raise ProtocolError("too-large", f"frame of {size} bytes exceeds the {max_frame}-byte limit")
        try:
            frame.encode("utf-8")
        except UnicodeEncodeError:
            raise ProtocolError("not-utf8", "frame is not valid UTF-8") from None
        text = frame
    else:
        frame = bytes(frame)
        if max_frame > 0 and len(frame) > max_frame:
            raise ProtocolError("too-large", f"frame of {len(frame)} bytes exceeds the {max_frame}-byte limit")
        try:
            text = frame.decode("utf-8")
        except UnicodeDecodeError:
            raise ProtocolError("not-utf8", "frame is not valid UTF-8") from None
    try:
        obj = _JSON.decode(text)
    except (ValueError, RecursionError) as e:
        raise ProtocolError("not-json", f"frame is not a JSON object: {e}") from None
    if obj is None:
        raise ProtocolError("bad-type", 'frame has no string "type"')
    if not isinstance(obj, dict):
        raise ProtocolError("not-json", f"frame is not a JSON object: {_kind(obj)}")
    # encoding/json matches a key case-insensitively when there is no exact
    # match; mirror that so the error code is the same as the Go side's.
    typ = None
    for key, value in obj.items():
        if len(key) == 4 and key.lower() == "type":
            typ = value
    if not isinstance(typ, str):
        raise ProtocolError("bad-type", 'frame has no string "type"')
    if typ not in _MESSAGES:
        raise ProtocolError("bad-type", f"unknown message type {json.dumps(_truncate(typ))}")
    sender, fields = _MESSAGES[typ]
    if sender != direction:
        raise ProtocolError("bad-type", f'"{typ}" is not a {direction} message')
    msg = _decode_object(fields, obj, typ)
    _validate(msg)
    return msg


def validate_host_frame(frame, max_frame=0):
    """decode_frame for frames the host sends to the runner."""
    return decode_frame(HOST_TO_RUNNER, frame, max_frame)


# ---------------------------------------------------------------------------
# Text and values.


# The runner's encoders, bound now: a program that replaces json.dumps,
# json.JSONEncoder or its methods later does not change the runner's frames.
_FRAME_ENCODE = json.JSONEncoder(ensure_ascii=False, allow_nan=False, separators=(",", ":")).encode
_FRAME_ENCODE_ASCII = json.JSONEncoder(ensure_ascii=True, allow_nan=False, separators=(",", ":")).encode


def _dumps(obj, ascii=False):
    return (_FRAME_ENCODE_ASCII if ascii else _FRAME_ENCODE)(obj)


def valid_text(s):
    """``s`` with anything UTF-8 cannot encode (lone surrogates) replaced."""
    try:
        str.encode(s, "utf-8")
        return s
    except UnicodeEncodeError:
        return str.encode(s, "utf-8", "replace").decode("utf-8")


def _json_len(s):
    return len(_dumps(s).encode("utf-8")) - 2


def cut_for_json(s, budget):
    """The longest prefix of the valid text ``s`` whose JSON string encoding,
    quotes excluded, fits in ``budget`` bytes."""
    if budget <= 0:
        return ""
    if len(s) * 6 <= budget or _json_len(s) <= budget:
        return s
    lo, hi = 0, min(len(s), budget)  # every character costs at least a byte
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if _json_len(s[:mid]) <= budget:
            lo = mid
        else:
            hi = mid - 1
    return s[:lo]


# Program objects are read through the type itself, never through
# attributes the program can override: type(x) cannot lie, type.__name__'s
# own descriptor ignores a metaclass property, and str.__str__ copies a str
# subclass to a plain str without calling its methods.
_TYPE_NAME = type.__dict__["__name__"].__get__
_TYPE_MRO = type.__dict__["__mro__"].__get__
_EXC_TRACEBACK = BaseException.__dict__["__traceback__"].__get__
_EXIT_CODE = SystemExit.__dict__["code"].__get__
# Fallback texts name what raised in at most this many characters.
_THROWN_CHARS = 200


def _exact_str(s):
    """``s`` (a str or an instance of a str subclass) as a plain str."""
    return s if type(s) is str else str.__str__(s)


def class_name(cls):
    """The name of the class ``cls``, whatever its metaclass says."""
    try:
        return valid_text(_exact_str(_TYPE_NAME(cls)))
    except BaseException:
        return "object"


def _cap(s, n):
    return s if len(s) <= n else s[:n - 1] + "…"


def thrown_text(e):
    """A short "Type: message" for an exception raised while reading a
    program object (its str may raise too)."""
    name = class_name(type(e))
    try:
        msg = valid_text(_exact_str(str(e))[:_THROWN_CHARS])
    except BaseException:
        msg = "<str() failed>"
    return _cap(f"{name}: {msg}" if msg else name, _THROWN_CHARS)


def safe_repr(v, cap=1 << 20):
    """repr(v) (at most ``cap`` characters), or a fallback naming what
    raised."""
    try:
        return valid_text(_exact_str(repr(v))[:cap])
    except BaseException as e:  # a broken __repr__, a recursion, a huge int
        return f"<unrepresentable {class_name(type(v))}: {thrown_text(e)}>"


def safe_str(v, cap=1 << 20):
    """str(v) (at most ``cap`` characters), or a fallback naming what
    raised."""
    try:
        return valid_text(_exact_str(str(v))[:cap])
    except BaseException as e:
        return f"<{class_name(type(v))} str() failed: {thrown_text(e)}>"


_VALUE_ITERENCODE = json.JSONEncoder(ensure_ascii=False, allow_nan=False, separators=(",", ":")).iterencode
_VALUE_ITERENCODE_ASCII = json.JSONEncoder(ensure_ascii=True, allow_nan=False, separators=(",", ":")).iterencode


def _value_json(value, cap):
    """The JSON text json.dumps would give for ``value`` and whether it is
    longer than ``cap`` characters; then only (a bit more than) ``cap``
    characters of it are produced. Raises what the encoder raises."""
    for iterencode in (_VALUE_ITERENCODE, _VALUE_ITERENCODE_ASCII):
        parts, n, over = [], 0, False
        for chunk in iterencode(value):
            parts.append(chunk)
            n += len(chunk)
            if n > cap:
                over = True
                break
        text = "".join(parts)
        if over:
            text = text[:cap + 1]
        try:
            str.encode(text, "utf-8")
            return text, over
        except UnicodeEncodeError:  # lone surrogates in strings: escape them
            continue
    raise ValueError("unencodable value")


def done_value_frame(value, limits):
    """The done frame of a program that returned ``value``."""
    if value is None:
        return '{"type":"done","ok":true}'
    cap = limits["maxValueBytes"]
    kind, over = "json", False
    try:
        text, over = _value_json(value, cap)
    except BaseException:
        kind, text = "inspect", safe_repr(value, cap + 1)
    # The value as it appears in the frame is what the host measures
    # against maxValueBytes.
    raw = text if kind == "json" else _dumps(text)
    truncated = over or len(raw.encode("utf-8")) > cap
    if truncated:
        raw = _dumps(cut_for_json(text, cap - 2))

    def render():
        return '{"type":"done","ok":true,"valueKind":"%s","value":%s%s}' % (kind, raw, ',"truncated":true' if truncated else "")

    frame = render()
    if len(frame.encode("utf-8")) > limits["maxFrameBytes"]:
        truncated = True
        overhead = len(('{"type":"done","ok":true,"valueKind":"%s","value":"","truncated":true}' % kind).encode())
        raw = _dumps(cut_for_json(text, limits["maxFrameBytes"] - overhead))
        frame = render()
    return frame


def _filter_traceback(te):
    # Iterative: a program can chain thousands of exceptions.
    seen, todo = set(), [te]
    while todo:
        te = todo.pop()
        if id(te) in seen:
            continue
        seen.add(id(te))
        te.stack = traceback.StackSummary.from_list([f for f in te.stack if f.filename == PROGRAM_FILE])
        todo.extend(c for c in (te.__cause__, te.__context__) if c is not None)
        todo.extend(getattr(te, "exceptions", None) or ())


def _frames_text(tb):
    """The program.py frames of the traceback ``tb``, formatted."""
    frames = [f for f in traceback.extract_tb(tb) if f.filename == PROGRAM_FILE]
    return "Traceback (most recent call last):\n" + "".join(traceback.format_list(frames)) if frames else ""


def program_traceback(exc, cap=1 << 20, last_line=None):
    """The traceback of ``exc`` (and its chain) limited to program.py frames.
    When the exception's class or chain cannot be formatted (a metaclass
    property that raises, a hostile __cause__), its own frames and
    ``last_line`` are used instead."""
    try:
        te = traceback.TracebackException(type(exc), exc, _EXC_TRACEBACK(exc))
        _filter_traceback(te)
        text = "".join(te.format())
    except BaseException:
        try:
            text = _frames_text(_EXC_TRACEBACK(exc))
        except BaseException:
            text = ""
        if last_line is not None:
            text += last_line + "\n"
    return valid_text(_exact_str(text)[:cap])


def done_error_frame(exc, limits):
    """The done frame of a program that raised ``exc``."""
    cap = limits["maxFrameBytes"]
    name = cut_for_json(class_name(type(exc)), MAX_NAME_BYTES)
    message = safe_str(exc, cap)
    stack = program_traceback(exc, cap, f"{name}: {message}" if message else name)
    return _error_frame(name, message, stack, limits)


def _exit_status_is_zero(code):
    # As the interpreter reads SystemExit: None and an int equal to 0 (bool
    # and int subclasses included) exit 0; anything else exits 1.
    if code is None:
        return True
    try:
        return issubclass(type(code), int) and int.__eq__(code, 0) is True
    except BaseException:
        return False


def done_exit_frame(exc, limits):
    """SystemExit: code 0 or None is a successful run without a value (a
    script exiting 0); any other code fails the run with name "SystemExit"
    and the code (or the message passed to sys.exit) as message."""
    try:
        code = _EXIT_CODE(exc)
    except BaseException:
        code = 1
    if _exit_status_is_zero(code):
        return '{"type":"done","ok":true}'
    cap = limits["maxFrameBytes"]
    message = safe_str(code, cap)
    return _error_frame("SystemExit", message, program_traceback(exc, cap, f"SystemExit: {message}"), limits)


def fallback_frame(what, e, limits):
    """The done frame when rendering the outcome itself failed."""
    return _error_frame("Error", f"runner: cannot render the {what}: {thrown_text(e)}", "", limits)


def _error_frame(name, message, stack, limits):
    def render():
        error = {"name": name, "message": message}
        if stack:
            error["stack"] = stack
        return _dumps({"type": "done", "ok": False, "error": error})

    frame = render()
    if len(frame.encode("utf-8")) > limits["maxFrameBytes"]:
        budget = limits["maxFrameBytes"] - len(_dumps({"type": "done", "ok": False, "error": {"name": name, "message": "", "stack": ""}}).encode())
        message = cut_for_json(message, budget)
        stack = cut_for_json(stack, budget - _json_len(message))
        frame = render()
    return frame


# ---------------------------------------------------------------------------
# Tool arguments.
#
# The rule (the same in both runners): tool arguments must be JSON values
# exactly. Objects (TypeScript: plain objects whose prototype is
# Object.prototype or null, own enumerable string keys; Python: dict with
# str keys), arrays (TypeScript: real Arrays without holes; Python: list),
# strings without lone surrogates, finite numbers (Python: int, float; an
# int beyond the float64 range is not finite for JSON readers), booleans
# and null (Python: None), nested at most 512 arrays/objects deep, without
# cycles, in a call frame of at most maxFrameBytes. A call with no argument
# sends null. Nothing is converted: anything else (TypeScript: NaN,
# Infinity, undefined, Date, Map, Set, BigInt, Symbol, functions, class
# instances, typed arrays, boxed primitives, sparse-array holes; Python:
# NaN, inf, tuples, sets, bytes, non-str keys, custom objects, subclasses of
# the JSON types such as an IntEnum or a str subclass) is rejected before
# any frame is sent: no call frame, no call id consumed. The call raises
# (Python) or rejects with (TypeScript) a TypeError
#
#     tools["NAME"]: <path>: <reason>
#
# naming the first offending value in document order: <path> is "args",
# then ".key" for keys like [A-Za-z_$][A-Za-z0-9_$]*, '["key"]' (JSON-quoted)
# for other keys and "[i]" for indices, cut to 200 characters, e.g.
# 'tools["search"]: args.items[3]: NaN is not JSON' or
# 'tools["search"]: args: key 1 is not a string'. Reading the arguments
# runs getters and proxy traps once (TypeScript); one that throws rejects
# the call with what it threw. Python reads only exact dict/list/str/int/
# float/bool/None objects, so no program code runs.

MAX_ARGS_DEPTH = 512
MAX_PATH_CHARS = 200
_IDENTIFIER_RE = re.compile(r"[A-Za-z_$][A-Za-z0-9_$]*")  # used with fullmatch
_SURROGATE_RE = re.compile("[\ud800-\udfff]")
_FUNCTION_TYPES = (types.FunctionType, types.BuiltinFunctionType, types.MethodType, types.MethodWrapperType,
                   types.WrapperDescriptorType, types.MethodDescriptorType, types.ClassMethodDescriptorType)


class _ArgsRejection(Exception):
    def __init__(self, segments, reason):
        super().__init__(reason)
        self.segments = tuple(segments)
        self.reason = reason


def js_quote(s):
    """``s`` as JSON.stringify quotes it: non-ASCII kept, lone surrogates
    escaped as \\udxxx."""
    return _SURROGATE_RE.sub(lambda m: "\\u%04x" % ord(m.group()), _dumps(s))


def args_path(segments):
    """The path text of a value inside the arguments: args, .key, ["key"],
    [i], at most MAX_PATH_CHARS characters."""
    out = "args"
    for seg in segments:
        if len(out) > MAX_PATH_CHARS:
            break
        if type(seg) is int:
            out += f"[{seg}]"
        else:
            seg = seg[:MAX_PATH_CHARS]
            out += "." + seg if _IDENTIFIER_RE.fullmatch(seg) else "[" + js_quote(seg) + "]"
    return _cap(out, MAX_PATH_CHARS)


def _not_json(v):
    """Why ``v`` (not an exact JSON type) is not JSON."""
    t = type(v)
    if t is tuple:
        return "a tuple is not JSON (use a list)"
    if t is set or t is frozenset:
        return f"a {t.__name__} is not JSON"
    if t is bytes:
        return "a bytes object is not JSON"
    if t is bytearray or t is memoryview:
        return f"a {t.__name__} is not JSON"
    if t in _FUNCTION_TYPES:
        return "a function is not JSON"
    if t is types.CoroutineType:
        return "a coroutine is not JSON (await it first)"
    mro = _TYPE_MRO(t)
    if any(c is type for c in mro):
        return "a class is not JSON"
    dt = sys.modules.get("datetime")
    for kind in ("datetime", "date", "time"):
        cls = getattr(dt, kind, None) if dt is not None else None
        if cls is not None and any(c is cls for c in mro):
            return f"a {kind} is not JSON (use .isoformat())"
    if any(c is asyncio.Future for c in mro):
        return "a Future is not JSON (await it first)"
    name = class_name(t)
    for base in (int, float, str, list, dict, tuple):
        if any(c is base for c in mro):
            hint = " (use a list)" if base is tuple else " (use dict(...))" if base is dict else ""
            return f"an instance of {name} (a subclass of {base.__name__}) is not JSON{hint}"
    return f"an instance of {name} is not JSON"


def _leaf_bytes(v, segments):
    """The least number of bytes the JSON of the non-container ``v`` takes,
    or _ArgsRejection."""
    if v is None:
        return 4
    t = type(v)
    if t is bool:
        return 4 if v else 5
    if t is int:
        try:
            float(v)
        except OverflowError:
            raise _ArgsRejection(segments, "an integer beyond the float64 range is not JSON") from None
        return 1
    if t is float:
        if math.isnan(v):
            raise _ArgsRejection(segments, "NaN is not JSON")
        if math.isinf(v):
            raise _ArgsRejection(segments, "Infinity is not JSON" if v > 0 else "-Infinity is not JSON")
        return 1
    if t is str:
        try:
            return len(str.encode(v, "utf-8")) + 2
        except UnicodeEncodeError:
            raise _ArgsRejection(segments, "a string with a lone surrogate is not JSON") from None
    raise _ArgsRejection(segments, _not_json(v))


def tool_args_json(args, max_bytes):
    """The JSON text of a tool call's arguments under the rule above; raises
    _ArgsRejection naming the first value that breaks it. The walk is
    iterative (no recursion limit applies) and stops as soon as the JSON
    text certainly exceeds ``max_bytes``."""
    too_large = f"too large: the call frame would exceed the {max_bytes}-byte frame limit"
    size = 0
    segments = []  # the path of `value`
    chain = []  # per open container: [container, iterator, children seen]
    open_ids = set()
    value = args
    while True:
        t = type(value)
        if t is dict or t is list:
            if id(value) in open_ids:
                raise _ArgsRejection(segments, "circular reference")
            if len(chain) >= MAX_ARGS_DEPTH:
                raise _ArgsRejection(segments, f"nested deeper than {MAX_ARGS_DEPTH} levels")
            open_ids.add(id(value))
            chain.append([value, iter(dict.items(value)) if t is dict else enumerate(value), 0])
            segments.append(None)
            size += 2
        else:
            size += _leaf_bytes(value, segments)
        if size > max_bytes:
            raise _ArgsRejection((), too_large)
        while chain:  # on to the next value in document order
            top = chain[-1]
            try:
                item = next(top[1], None)
            except RuntimeError as e:  # another thread changed a dict
                raise _ArgsRejection(segments[:-1], f"it changed while being read ({thrown_text(e)})") from None
            if item is None:
                chain.pop()
                segments.pop()
                open_ids.discard(id(top[0]))
                continue
            key, value = item
            size += 1 if top[2] else 0
            top[2] += 1
            if type(top[0]) is dict:
                if type(key) is not str:
                    raise _ArgsRejection(segments[:-1], f"key {safe_repr(key, 60)} is not a string")
                if _SURROGATE_RE.search(key):
                    raise _ArgsRejection(segments[:-1], f"key {js_quote(key[:60])} has a lone surrogate")
                size += len(key) + 3
            segments[-1] = key
            break
        else:
            break
    try:
        return _dumps(args)
    except (TypeError, ValueError, RecursionError, RuntimeError) as e:  # changed by another thread since
        raise _ArgsRejection((), f"it changed while being read ({thrown_text(e)})") from None


# ---------------------------------------------------------------------------
# What the program sees.


class ToolCallError(Exception):
    """A tool call the host rejected. ``tool_name`` (alias ``toolName``)
    names the tool; str(error) is the host's message."""

    def __init__(self, message="", tool_name=None):
        super().__init__(message)
        self.tool_name = tool_name

    @property
    def toolName(self):  # noqa: N802 - the name the SDK prompt also documents
        return self.tool_name

    @property
    def message(self):
        return str(self.args[0]) if self.args else ""


class _Rejected:
    """A call the runner refused to send: the binding raises ``error``."""

    __slots__ = ("error",)

    def __init__(self, error):
        self.error = error


# The code of every binding (see Runner.make_binding), compiled as "<tools>".
# Its globals hold exactly these names: nothing the program can rebind.
_BINDING_CODE = next(c for c in compile(
    "async def binding(args=None):\n"
    "    call = submit(args)\n"
    "    if type(call) is Rejected:\n"
    "        raise call.error\n"
    "    return await call\n",
    "<tools>", "exec").co_consts if isinstance(c, types.CodeType))


class Namespace:
    """A binding namespace: ``tools.name(args)`` and ``tools["odd-name"](args)``.
    Names that collide with Python attributes (``__class__``...) are
    reachable with []."""

    __slots__ = ("__global", "__functions")

    def __init__(self, global_name, functions):
        self.__global = global_name
        self.__functions = functions

    def __getattr__(self, name):
        try:
            return self.__functions[name]
        except KeyError:
            raise AttributeError(f"{self.__global} has no tool named {name!r}", name=name, obj=self) from None

    def __getitem__(self, name):
        try:
            return self.__functions[name]
        except (KeyError, TypeError):
            raise KeyError(f"{self.__global} has no tool named {name!r}") from None

    def __contains__(self, name):
        return name in self.__functions

    def __iter__(self):
        return iter(self.__functions)

    def __len__(self):
        return len(self.__functions)

    def __dir__(self):
        return list(self.__functions)

    def __repr__(self):
        return f"<{self.__global}: {', '.join(self.__functions)}>"


def _global_names(tree):
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Global):
            names.update(node.names)
    return sorted(names)


def compile_program(source, globals_):
    """Compile the program's module body as ``async def __dsh_main__()`` and
    return that function, defined in ``globals_`` (which it leaves as it was).
    Raises SyntaxError (and whatever compile raises) with program.py
    positions."""
    tree = ast.parse(source, PROGRAM_FILE)
    body = list(tree.body)
    # `from __future__ import ...` is only legal at the top of a module: keep
    # the leading ones (after an optional docstring) out of the wrapper.
    first = 1 if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) and isinstance(body[0].value.value, str) else 0
    end = first
    while end < len(body) and isinstance(body[end], ast.ImportFrom) and body[end].module == "__future__":
        end += 1
    futures, body = body[first:end], body[:first] + body[end:]
    at_top = {"lineno": 1, "col_offset": 0, "end_lineno": 1, "end_col_offset": 0}
    hoisted = _global_names(tree)
    if hoisted:
        # A nested function's `global x` means the script-level x: keep it
        # a global rather than a local of the wrapper.
        body.insert(0, ast.Global(names=hoisted, **at_top))
    if not body:
        body = [ast.Pass(**at_top)]
    last = tree.body[-1] if tree.body else None
    fields = {
        "name": "__dsh_main__",
        "args": ast.arguments(posonlyargs=[], args=[], vararg=None, kwonlyargs=[], kw_defaults=[], kwarg=None, defaults=[]),
        "body": body,
        "decorator_list": [],
        "returns": None,
        "type_comment": None,
        "lineno": 1,
        "col_offset": 0,
        "end_lineno": getattr(last, "end_lineno", 1) or 1,
        "end_col_offset": getattr(last, "end_col_offset", 0) or 0,
    }
    if "type_params" in ast.AsyncFunctionDef._fields:
        fields["type_params"] = []
    module = ast.Module(body=futures + [ast.AsyncFunctionDef(**fields)], type_ignores=[])
    ast.fix_missing_locations(module)
    code = compile(module, PROGRAM_FILE, "exec", dont_inherit=True)
    before = set(globals_)
    exec(code, globals_)
    fn = globals_.pop("__dsh_main__")
    for name in set(globals_) - before:  # what the __future__ imports bound
        del globals_[name]
    return fn


# ---------------------------------------------------------------------------
# Output capture.


class _BinaryCapture:
    """sys.stdout.buffer: bytes decoded as UTF-8 (errors replaced)."""

    def __init__(self, text):
        self._text = text
        self._decoder = codecs.getincrementaldecoder("utf-8")("replace")

    def write(self, b):
        b = bytes(b)
        s = self._decoder.decode(b)
        if s:
            self._text.write(s)
        return len(b)

    def flush(self):
        self._text.flush()

    def close(self):
        self._text.flush()

    def writable(self):
        return True

    def isatty(self):
        return False


class _Capture(io.TextIOBase):
    """sys.stdout / sys.stderr: line-buffered text sent as log frames."""

    def __init__(self, runner, source):
        super().__init__()
        self._runner = runner
        self._source = source
        self._pending = []
        self._pending_chars = 0
        self._lock = threading.RLock()
        self._buffer = _BinaryCapture(self)

    @property
    def encoding(self):
        return "utf-8"

    @property
    def errors(self):
        return "replace"

    @property
    def buffer(self):
        return self._buffer

    def writable(self):
        return True

    def isatty(self):
        return False

    def fileno(self):
        raise io.UnsupportedOperation("fileno")

    def write(self, s):
        t = type(s)
        if t is not str:
            if not issubclass(t, str):
                raise TypeError(f"write() argument must be str, not {class_name(t)}")
            s = str.__str__(s)  # a plain copy: a subclass's __len__ or __contains__ never runs here
        with self._lock:
            self._pending.append(s)
            self._pending_chars += len(s)
            if "\n" in s:
                text = "".join(self._pending)
                cut = text.rfind("\n") + 1
                rest = text[cut:]
                self._pending = [rest] if rest else []
                self._pending_chars = len(rest)
                self._runner.emit_log(self._source, None, text[:cut])
            elif self._pending_chars > MAX_PENDING_CHARS:
                self.flush()
        return len(s)

    def flush(self):
        with self._lock:
            if self._pending:
                text = "".join(self._pending)
                self._pending = []
                self._pending_chars = 0
                if text:
                    self._runner.emit_log(self._source, None, text)

    def close(self):
        # The program may close sys.stdout; keep accepting output.
        self.flush()


class _LogHandler(logging.Handler):
    """The root logger's handler: records become console log frames. A
    record that cannot be formatted (a msg whose __str__ raises, arguments
    that do not match, a hostile record) is logged as a line saying so."""

    def __init__(self, runner):
        super().__init__(logging.NOTSET)
        self._runner = runner
        self.setFormatter(logging.Formatter("%(message)s"))

    def emit(self, record):
        try:
            text = self.format(record)
        except Exception as e:
            text = _unformattable(record, e)
        self._runner.emit_log("console", _console_level(record), text)

    def handleError(self, record):
        # logging's default prints a traceback (the runner's frames among
        # them) to sys.stderr; emit never calls this, and nothing else may.
        pass


def _unformattable(record, e):
    try:
        msg, args = record.msg, record.args
    except BaseException:
        msg, args = "?", "?"
    return f"<log record not formatted: {thrown_text(e)}; msg={safe_repr(msg, 200)}, args={safe_repr(args, 200)}>"


def _console_level(record):
    try:
        n = record.levelno
    except BaseException:
        return "log"
    if type(n) is not int:
        return "log"
    return "error" if n >= logging.ERROR else "warn" if n >= logging.WARNING else "info" if n >= logging.INFO else "debug"


# ---------------------------------------------------------------------------
# The runner.


def diag(text):
    """One line on the real stderr (not captured)."""
    try:
        os.write(2, f"{RUNNER}: {text}".replace("\n", " ").encode("utf-8", "replace") + b"\n")
    except OSError:
        pass


class Runner:
    def __init__(self, ws, connection_closed):
        self.ws = ws
        self._closed_exc = connection_closed
        self.state = "await-run"  # then "running", then "done"
        self.limits = None
        self._send_lock = threading.Lock()
        self._log_lock = threading.RLock()
        self._calls_lock = threading.Lock()
        self._order_lock = threading.Lock()
        self._finish_lock = threading.Lock()
        self._tls = threading.local()
        self._next_id = 1
        self._outstanding = {}  # id -> (future, tool name): calls sent and not yet answered
        self._log_bytes = 0
        self._log_entries = 0
        self._logs_closed = False
        self._captures = []
        self._pid = os.getpid()

    # -- transport

    def send(self, text):
        # While a frame is being sent, program code the interpreter runs on
        # this thread (a __del__ during a collection) must not log: that
        # would send from inside a send (emit_log checks "busy").
        tls = self._tls
        busy = getattr(tls, "busy", False)
        tls.busy = True
        try:
            with self._send_lock:
                try:
                    self.ws.send(text)
                except Exception:
                    pass  # the host went away: the reader notices and exits
        finally:
            tls.busy = busy

    def violation(self, reason):
        diag(f"protocol violation: {reason}")
        _real_exit(EXIT_PROTOCOL)

    def receive(self):
        """The next decoded host frame; exits the process when the host goes
        away (0) or breaks the protocol (71)."""
        try:
            data = self.ws.recv()
        except self._closed_exc as e:
            sent = getattr(e, "sent", None)
            # 1002/1007: this end failed the connection over a framing or
            # UTF-8 violation by the host.
            if sent is not None and sent.code in (1002, 1007) and self.state != "done":
                self.violation(f"websocket: {sent.code} {sent.reason}")
            _real_exit(0)
        except Exception as e:
            if self.state != "done":
                diag(f"the bridge failed: {type(e).__name__}: {e}")
            _real_exit(0)
        if not isinstance(data, str):
            self.violation("binary frame (the protocol uses text frames only)")
        try:
            return validate_host_frame(data)
        except ProtocolError as e:
            self.violation(str(e))

    def _read_results(self):
        # Program code the interpreter runs on this thread (a __del__) must
        # not log: this thread never sends.
        self._tls.busy = True
        while True:
            msg = self.receive()
            if self.state == "done":
                continue
            if msg["type"] == "run":
                self.violation("a second run frame")
            with self._calls_lock:
                entry = self._outstanding.pop(msg["id"], None)
            if entry is None:
                self.violation(f"a result for id {msg['id']}, which is not in flight")
            fut, name = entry
            try:
                fut.get_loop().call_soon_threadsafe(self._settle, fut, name, msg)
            except RuntimeError:
                pass  # the program's loop is gone

    @staticmethod
    def _settle(fut, name, msg):
        if fut.done():  # the program cancelled the await
            return
        if msg["ok"]:
            fut.set_result(msg["value"])
            return
        try:
            err = ToolCallError(msg["message"], name)
        except BaseException:  # the program rewrote ToolCallError
            err = RuntimeError(msg["message"])
        fut.set_exception(err)

    # -- tool calls

    def make_binding(self, global_name, name):
        """The program's async function for one tool. Its code lives in
        "<tools>", and it awaits the call's future itself (a C future adds
        no frame): a traceback the program prints through a tool call (a
        caught ToolCallError, a TypeError for its arguments) shows
        ``File "<tools>", in tools.name``, never the runner's source."""
        runner = self

        def submit(args):
            return runner.submit(global_name, name, args)

        qualname = f"{global_name}.{name}"
        code = _BINDING_CODE.replace(co_name=qualname, co_qualname=qualname)
        scope = {"__builtins__": {}, "submit": submit, "type": type, "Rejected": _Rejected}
        return types.FunctionType(code, scope, name, (None,))

    def submit(self, global_name, name, args):
        """Check a call's arguments and send its frame; the future of its
        result, or _Rejected(TypeError) when the arguments break the rule.
        Once the run is settled nothing more goes out and the future never
        settles."""
        where = f"{global_name}[{js_quote(name)}]"
        if args is None:
            args_text = "null"
        else:
            try:
                args_text = tool_args_json(args, self.limits["maxFrameBytes"])
            except _ArgsRejection as r:
                return _Rejected(TypeError(f"{where}: {args_path(r.segments)}: {r.reason}"))
        fut = asyncio.get_running_loop().create_future()
        # The host requires increasing ids, even when a program calls tools
        # from several threads: assigning an id and sending its frame happen
        # together under _order_lock. The reader thread never takes it (it
        # only needs _calls_lock briefly), so it keeps reading replies while
        # a send waits on a host that is slowing us down.
        with self._order_lock:
            with self._calls_lock:
                settled = self.state != "running"
                if not settled:
                    call_id = self._next_id
                    frame = '{"type":"call","id":%d,"global":%s,"name":%s,"args":%s}' % (
                        call_id, _dumps(global_name, ascii=True), _dumps(name, ascii=True), args_text)
                    size = len(frame.encode("utf-8"))
                    if size > self.limits["maxFrameBytes"]:
                        return _Rejected(TypeError(f"{where}: args: too large: the call frame would exceed the {self.limits['maxFrameBytes']}-byte frame limit"))
                    self._next_id += 1
                    self._outstanding[call_id] = (fut, name)
            if not settled:
                self.send(frame)
        return fut

    # -- logs

    def emit_log(self, source, level, text):
        if getattr(self._tls, "busy", False):
            return  # output produced while sending output: drop it
        self._tls.busy = True
        try:
            with self._log_lock:
                if self.state != "running" or self._logs_closed:
                    return
                entry = {"type": "log", "source": source}
                if level is not None:
                    entry["level"] = level
                entry["text"] = ""
                budget = self.limits["maxFrameBytes"] - len(_dumps(entry).encode("utf-8"))
                entry["text"] = text = cut_for_json(valid_text(text[:self.limits["maxFrameBytes"]]), budget)
                # The host charges each entry LOG_ENTRY_OVERHEAD bytes on top
                # of its text and keeps MAX_LOG_ENTRIES entries: stop sending
                # what it would drop (the entry that crosses is sent).
                self._log_entries += 1
                self._log_bytes += len(text.encode("utf-8")) + LOG_ENTRY_OVERHEAD
                self.send(_dumps(entry))
                if self._log_bytes > self.limits["maxLogBytes"] or self._log_entries > MAX_LOG_ENTRIES:
                    self._logs_closed = True
        finally:
            self._tls.busy = False

    def _capture_output(self):
        out, err = _Capture(self, "stdout"), _Capture(self, "stderr")
        self._captures = [out, err]
        sys.stdout = out
        sys.stderr = err
        root = logging.getLogger()
        root.setLevel(logging.DEBUG)
        root.addHandler(_LogHandler(self))

    # -- the run

    def run(self, run):
        """Run the program of the run frame, send done and exit."""
        self.limits = run["limits"]
        program = run["program"]
        lines = program.splitlines(True)
        if lines and not lines[-1].endswith("\n"):
            lines[-1] += "\n"
        linecache.cache[PROGRAM_FILE] = (len(program), None, lines, PROGRAM_FILE)
        # The runner's own names win over a binding that would shadow them.
        globals_ = {}
        for b in run["bindings"]:
            globals_[b["global"]] = Namespace(b["global"], {f: self.make_binding(b["global"], f) for f in b["functions"]})
        globals_.update({"__builtins__": builtins, "__name__": "__main__", "ToolCallError": ToolCallError})
        # Made before logging goes to DEBUG, so asyncio's "Using selector"
        # debug line stays out of the program's logs.
        loop = asyncio.new_event_loop()
        sys.argv = [PROGRAM_FILE]
        self.state = "running"
        self._capture_output()
        os._exit = self.program_exit
        try:
            fn = compile_program(program, globals_)
        except BaseException as e:
            self.finish(self._render(done_error_frame, e))
        threading.Thread(target=self._read_results, name="dsh-bridge-reader", daemon=True).start()
        # Not asyncio.run: its teardown would cancel the program's task when
        # the program stops the loop, hiding why; finish() exits anyway.
        asyncio.set_event_loop(loop)
        try:
            loop.run_until_complete(self._main(fn))
        except SystemExit as e:  # raised in a task the program started
            self.finish(self._render(done_exit_frame, e))
        except BaseException as e:
            self.finish(self._render(done_error_frame, e))
        self.finish(done_error_frame(RuntimeError("the program's event loop stopped before the program finished"), self.limits))

    async def _main(self, fn):
        try:
            value = await fn()
        except SystemExit as e:
            frame = self._render(done_exit_frame, e)
        except BaseException as e:
            frame = self._render(done_error_frame, e)
        else:
            frame = self._render(done_value_frame, value)
        self.finish(frame)

    def _render(self, render, outcome):
        """render(outcome, limits), or a plain error frame if even that
        fails (each renderer already falls back on its own)."""
        try:
            return render(outcome, self.limits)
        except BaseException as e:
            return fallback_frame("outcome", e, self.limits)

    def program_exit(self, status):
        """os._exit as the program sees it. In the runner's own process it
        ends the run like sys.exit: 0 is a successful run without a value,
        anything else fails it with name "Exit". A forked child (or a call
        made while this thread sends a frame) exits for real."""
        if os.getpid() != self._pid or getattr(self._tls, "busy", False):
            _real_exit(status)
        status = operator.index(status)  # os._exit's own TypeError for a non-integer
        if status == 0:
            self.finish('{"type":"done","ok":true}')
        message = f"os._exit({status})"
        try:
            frames = [f for f in traceback.extract_stack(sys._getframe(1)) if f.filename == PROGRAM_FILE]
            stack = "Traceback (most recent call last):\n" + "".join(traceback.format_list(frames)) if frames else ""
        except BaseException:
            stack = ""
        self.finish(_error_frame("Exit", message, stack + f"Exit: {message}\n", self.limits))

    def finish(self, frame):
        """Send the done frame (once), close the socket and exit 0."""
        with self._finish_lock:
            for c in self._captures:
                try:
                    c.flush()
                except Exception:
                    pass
            with self._log_lock, self._calls_lock:
                self.state = "done"
            self.send(frame)
            try:
                self.ws.close()
            except Exception:
                pass
            _real_exit(0)


def main(argv):
    sock = argv[1] if len(argv) > 1 else DEFAULT_SOCKET
    # The program's environment is exactly the host's fixed set (PATH,
    # HOME, LANG); Docker always adds HOSTNAME, so drop it.
    os.environ.pop("HOSTNAME", None)
    try:
        from websockets.exceptions import ConnectionClosed
        from websockets.sync.client import unix_connect

        # A logger outside the logging tree: websockets' own debug output
        # must never reach the program's captured logs.
        quiet = logging.Logger("dsh-runner-websockets", logging.CRITICAL + 1)
        quiet.propagate = False
        ws = unix_connect(
            sock,
            uri="ws://localhost/v1",
            compression=None,
            max_size=None,
            ping_interval=None,
            close_timeout=CLOSE_TIMEOUT,
            proxy=None,
            logger=quiet,
        )
    except Exception as e:
        diag(f"cannot connect to {sock}: {type(e).__name__}: {e}")
        return EXIT_CONNECT
    runner = Runner(ws, ConnectionClosed)
    runner.send(_dumps({"type": "hello", "version": VERSION, "language": LANGUAGE, "runner": RUNNER}))
    msg = runner.receive()
    if msg["type"] != "run":
        runner.violation("a result frame before the run frame")
    runner.run(msg)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
