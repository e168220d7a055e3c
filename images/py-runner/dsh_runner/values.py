"""How the Python runner turns the program's values into text and frames: the
done frame of a value, of an exception or of SystemExit (JSON when json.dumps
accepts the value, else its repr; only program.py frames in a traceback; cut
to the caps), fallback texts for objects that raise when read, and the
tool-argument rule (tool_args_json).

The program's objects never break the runner: every name, str, repr and JSON
encoding of a value the program made is taken defensively (see the package's
docstring)."""

import asyncio
import json
import math
import re
import sys
import traceback
import types

from .protocol import MAX_NAME_BYTES, dumps

# The file name the program's frames carry; every other frame is the
# runner's or the standard library's.
PROGRAM_FILE = "program.py"

# ---------------------------------------------------------------------------
# Text and values.


def valid_text(s):
    """``s`` with anything UTF-8 cannot encode (lone surrogates) replaced."""
    try:
        str.encode(s, "utf-8")
        return s
    except UnicodeEncodeError:
        return str.encode(s, "utf-8", "replace").decode("utf-8")


def _json_len(s):
    return len(dumps(s).encode("utf-8")) - 2


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
    raw = text if kind == "json" else dumps(text)
    truncated = over or len(raw.encode("utf-8")) > cap
    if truncated:
        raw = dumps(cut_for_json(text, cap - 2))

    def render():
        return '{"type":"done","ok":true,"valueKind":"%s","value":%s%s}' % (kind, raw, ',"truncated":true' if truncated else "")

    frame = render()
    if len(frame.encode("utf-8")) > limits["maxFrameBytes"]:
        truncated = True
        overhead = len(('{"type":"done","ok":true,"valueKind":"%s","value":"","truncated":true}' % kind).encode())
        raw = dumps(cut_for_json(text, limits["maxFrameBytes"] - overhead))
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
    return error_frame(name, message, stack, limits)


def exit_status(code):
    """The status SystemExit(code) ends the interpreter with, as CPython
    reads it: None is 0; an int (bool and int subclasses included) its low
    byte (sys.exit(256) is 0, sys.exit(-1) 255), 255 beyond 64 bits;
    anything else 1 (the interpreter prints it)."""
    if code is None:
        return 0
    try:
        if not issubclass(type(code), int):
            return 1
        n = int.__index__(code)  # the int itself, not a subclass's override
    except BaseException:
        return 1
    return n & 0xFF if -(2**63) <= n < 2**63 else 255


def _exit_how(code, cap):
    # SystemExit as Python's own traceback ends: "SystemExit" for no code,
    # else "SystemExit: " and its str.
    if code is None:
        return "SystemExit"
    return "SystemExit: " + safe_str(code, cap)


def done_exit_frame(exc, limits):
    """SystemExit (sys.exit, exit(), quit(), raise SystemExit), whatever its
    code, 0 and None included: the program ended before it returned. An exit
    done frame with the status the interpreter would have exited with, error
    name "SystemExit", message "SystemExit: <code>" (the code's str; just
    "SystemExit" for none) and the program's traceback."""
    try:
        code = _EXIT_CODE(exc)
    except BaseException:
        code = 1
    cap = limits["maxFrameBytes"]
    how = _exit_how(code, cap)
    return error_frame("SystemExit", how, program_traceback(exc, cap, how), limits, exit_status(code))


def fallback_frame(what, e, limits):
    """The done frame when rendering the outcome itself failed."""
    return error_frame("Error", f"runner: cannot render the {what}: {thrown_text(e)}", "", limits)


def error_frame(name, message, stack, limits, exit_status=None):
    """A failed done frame, cut to fit maxFrameBytes; with exit_status (an
    int 0..255) it is an exit's ("exit": {"status": n})."""
    head = {"type": "done", "ok": False}
    if exit_status is not None:
        head["exit"] = {"status": exit_status}

    def render():
        error = {"name": name, "message": message}
        if stack:
            error["stack"] = stack
        return dumps({**head, "error": error})

    frame = render()
    if len(frame.encode("utf-8")) > limits["maxFrameBytes"]:
        budget = limits["maxFrameBytes"] - len(dumps({**head, "error": {"name": name, "message": "", "stack": ""}}).encode())
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


class ArgsRejection(Exception):
    def __init__(self, segments, reason):
        super().__init__(reason)
        self.segments = tuple(segments)
        self.reason = reason


def js_quote(s):
    """``s`` as JSON.stringify quotes it: non-ASCII kept, lone surrogates
    escaped as \\udxxx."""
    return _SURROGATE_RE.sub(lambda m: "\\u%04x" % ord(m.group()), dumps(s))


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
    or ArgsRejection."""
    if v is None:
        return 4
    t = type(v)
    if t is bool:
        return 4 if v else 5
    if t is int:
        try:
            float(v)
        except OverflowError:
            raise ArgsRejection(segments, "an integer beyond the float64 range is not JSON") from None
        return 1
    if t is float:
        if math.isnan(v):
            raise ArgsRejection(segments, "NaN is not JSON")
        if math.isinf(v):
            raise ArgsRejection(segments, "Infinity is not JSON" if v > 0 else "-Infinity is not JSON")
        return 1
    if t is str:
        try:
            return len(str.encode(v, "utf-8")) + 2
        except UnicodeEncodeError:
            raise ArgsRejection(segments, "a string with a lone surrogate is not JSON") from None
    raise ArgsRejection(segments, _not_json(v))


def tool_args_json(args, max_bytes):
    """The JSON text of a tool call's arguments under the rule above; raises
    ArgsRejection naming the first value that breaks it. The walk is
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
                raise ArgsRejection(segments, "circular reference")
            if len(chain) >= MAX_ARGS_DEPTH:
                raise ArgsRejection(segments, f"nested deeper than {MAX_ARGS_DEPTH} levels")
            open_ids.add(id(value))
            chain.append([value, iter(dict.items(value)) if t is dict else enumerate(value), 0])
            segments.append(None)
            size += 2
        else:
            size += _leaf_bytes(value, segments)
        if size > max_bytes:
            raise ArgsRejection((), too_large)
        while chain:  # on to the next value in document order
            top = chain[-1]
            try:
                item = next(top[1], None)
            except RuntimeError as e:  # another thread changed a dict
                raise ArgsRejection(segments[:-1], f"it changed while being read ({thrown_text(e)})") from None
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
                    raise ArgsRejection(segments[:-1], f"key {safe_repr(key, 60)} is not a string")
                if _SURROGATE_RE.search(key):
                    raise ArgsRejection(segments[:-1], f"key {js_quote(key[:60])} has a lone surrogate")
                size += len(key) + 3
            segments[-1] = key
            break
        else:
            break
    try:
        return dumps(args)
    except (TypeError, ValueError, RecursionError, RuntimeError) as e:  # changed by another thread since
        raise ArgsRejection((), f"it changed while being read ({thrown_text(e)})") from None
