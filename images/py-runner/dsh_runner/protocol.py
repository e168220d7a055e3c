"""The Python runner's wire protocol (version 1, see portproto/portproto.go):
its identity in the hello frame, a strict decoder equivalent to
portproto.Decode, which checks every frame the host sends (and, in the tests,
every frame the runner sends), and the encoder of the frames it sends."""

import json
import re

VERSION = 1
LANGUAGE = "python"
RUNNER = "dsh-py-runner/1"

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
_EGRESS = {"ca": "string", "window": "int"}
BOTH_WAYS = "both"
_TIMINGS = {"compileUs": "int", "evaluateUs": "int", "renderUs": "int"}
MAX_TIMING_US = 24 * 3600 * 10**6
_PROGRAM_EXIT = {"status": "int"}
MAX_EXIT_STATUS = 255
_MESSAGES = {
    "hello": (RUNNER_TO_HOST, {"type": "string", "version": "int", "language": "string", "runner": "string"}),
    "run": (HOST_TO_RUNNER, {
        "type": "string", "version": "int", "program": "string", "sourceMap": "string",
        "bindings": ("list", ("object", _BINDING)), "limits": ("object", _LIMITS),
        "egress": ("pointer", _EGRESS),
    }),
    "call": (RUNNER_TO_HOST, {"type": "string", "id": "int", "global": "string", "name": "string", "args": "raw"}),
    "result": (HOST_TO_RUNNER, {"type": "string", "id": "int", "ok": "bool", "value": "raw", "message": "string"}),
    "log": (RUNNER_TO_HOST, {"type": "string", "source": "string", "level": "string", "text": "string"}),
    "done": (RUNNER_TO_HOST, {
        "type": "string", "ok": "bool", "value": "raw", "valueKind": "string", "truncated": "bool",
        "error": ("pointer", _PROGRAM_ERROR), "exit": ("pointer", _PROGRAM_EXIT), "timings": ("pointer", _TIMINGS),
    }),
    # Egress streams (portproto.go): data is base64 text here, decoded by
    # the egress module.
    "open": (RUNNER_TO_HOST, {"type": "string", "stream": "int", "host": "string", "port": "int"}),
    "opened": (HOST_TO_RUNNER, {"type": "string", "stream": "int", "ok": "bool", "message": "string"}),
    "data": (BOTH_WAYS, {"type": "string", "stream": "int", "data": "string"}),
    "ack": (HOST_TO_RUNNER, {"type": "string", "stream": "int", "bytes": "int"}),
    "close": (BOTH_WAYS, {"type": "string", "stream": "int", "message": "string"}),
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
        if "egress" in m and m["egress"]["window"] < 1:
            raise bad("run: egress window must be positive")
    elif t in ("open", "opened", "data", "ack", "close"):
        _check_id(m["stream"])
        if t == "data" and m["data"] == "":
            raise bad("data: carries at least one byte")
        if t == "open":
            if not 1 <= _utf8_len(m["host"]) <= 255:
                raise bad("open: host must be 1..255 bytes")
            if not 1 <= m["port"] <= 65535:
                raise bad(f"open: port {m['port']} out of range 1..65535")
        if t == "ack" and m["bytes"] < 1:
            raise bad("ack: bytes must be positive")
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
        for v in (m.get("timings") or {}).values():
            if not 0 <= v <= MAX_TIMING_US:
                raise bad(f"done: timings: {v} µs is out of range [0, {MAX_TIMING_US}]")
        if "exit" in m:
            if m["ok"]:
                raise bad("done: an exit is a failed done (ok false, with an error)")
            if not 0 <= m["exit"]["status"] <= MAX_EXIT_STATUS:
                raise bad(f"done: exit status {m['exit']['status']} is out of range [0, {MAX_EXIT_STATUS}]")
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
    if sender != direction and sender != BOTH_WAYS:
        raise ProtocolError("bad-type", f'"{typ}" is not a {direction} message')
    msg = _decode_object(fields, obj, typ)
    _validate(msg)
    return msg


def validate_host_frame(frame, max_frame=0):
    """decode_frame for frames the host sends to the runner."""
    return decode_frame(HOST_TO_RUNNER, frame, max_frame)


# ---------------------------------------------------------------------------
# Encoding.

# The runner's encoders, bound now: a program that replaces json.dumps,
# json.JSONEncoder or its methods later does not change the runner's frames.
_FRAME_ENCODE = json.JSONEncoder(ensure_ascii=False, allow_nan=False, separators=(",", ":")).encode
_FRAME_ENCODE_ASCII = json.JSONEncoder(ensure_ascii=True, allow_nan=False, separators=(",", ":")).encode


def dumps(obj, ascii=False):
    """``obj`` as the compact JSON of a frame; ``ascii`` escapes non-ASCII."""
    return (_FRAME_ENCODE_ASCII if ascii else _FRAME_ENCODE)(obj)
