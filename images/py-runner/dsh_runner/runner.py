"""The Python runner's run: one program, from the host's run frame to the done
frame. Runner gives the program its globals (the binding namespaces and
ToolCallError), sends a call frame for each tool call and settles it from
the host's result on a reader thread, captures print, sys.stdout/stderr and
logging as log frames under the caps, makes os._exit and os.abort end the
run as an exit, compiles the program as the body of an async function and
sends the done frame of its outcome."""

import ast
import asyncio
import builtins
import codecs
import io
import linecache
import logging
import operator
import os
import sys
import threading
import time
import traceback
import types

from .protocol import RUNNER, ProtocolError, dumps, validate_host_frame
from .values import (
    PROGRAM_FILE,
    ArgsRejection,
    args_path,
    class_name,
    cut_for_json,
    done_error_frame,
    done_exit_frame,
    done_value_frame,
    error_frame,
    fallback_frame,
    js_quote,
    safe_repr,
    thrown_text,
    tool_args_json,
    valid_text,
)

# Captured before the program runs, which may replace time's functions.
_perf_ns = time.perf_counter_ns

EXIT_PROTOCOL = 71
# A stdout/stderr line longer than this is sent without waiting for its end.
MAX_PENDING_CHARS = 64 << 10
# What the host charges each log entry on top of its text, and how many
# entries it keeps: the runner stops sending log frames the host would drop.
LOG_ENTRY_OVERHEAD = 64
MAX_LOG_ENTRIES = 10_000
# The runner's own exit and abort: the program sees versions of os._exit
# and os.abort that end the run with an exit done frame (see
# Runner.program_exit).
_real_exit = os._exit
_real_abort = os.abort
# The status a process killed by SIGABRT leaves through the container's
# init (128+6): what os.abort() would have ended the container with.
SIGABRT_STATUS = 134

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
        self.egress = None  # an Egress for a run with egress

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
            if msg["type"] != "result":
                if self.egress is None:
                    self.violation(f"a {msg['type']} frame in a run without egress")
                self.egress.on_frame(msg)
                continue
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
            except ArgsRejection as r:
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
                        call_id, dumps(global_name, ascii=True), dumps(name, ascii=True), args_text)
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
                budget = self.limits["maxFrameBytes"] - len(dumps(entry).encode("utf-8"))
                entry["text"] = text = cut_for_json(valid_text(text[:self.limits["maxFrameBytes"]]), budget)
                # The host charges each entry LOG_ENTRY_OVERHEAD bytes on top
                # of its text and keeps MAX_LOG_ENTRIES entries: stop sending
                # what it would drop (the entry that crosses is sent).
                self._log_entries += 1
                self._log_bytes += len(text.encode("utf-8")) + LOG_ENTRY_OVERHEAD
                self.send(dumps(entry))
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
        self._t_received = _perf_ns()
        self.limits = run["limits"]
        if "egress" in run:
            from .egress import Egress

            try:
                self.egress = Egress(self.send, run["egress"], self.limits["maxFrameBytes"])
            except Exception as e:
                self.state = "running"
                self.finish(fallback_frame("egress proxy", e, self.limits))
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
        os.abort = self.program_abort
        try:
            fn = compile_program(program, globals_)
            self._t_compiled = _perf_ns()
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
            self._t_ended = _perf_ns()
            frame = self._render(done_exit_frame, e)
        except BaseException as e:
            self._t_ended = _perf_ns()
            frame = self._render(done_error_frame, e)
        else:
            self._t_ended = _perf_ns()
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
        ends the run as an exit, whatever the status, 0 included: name
        "Exit", message "os._exit(n)", status n's low byte (os._exit(256)
        exits 0). A forked child (or a call made while this thread sends a
        frame) exits for real."""
        if os.getpid() != self._pid or getattr(self._tls, "busy", False):
            _real_exit(status)
        status = operator.index(status)  # os._exit's own TypeError for a non-integer
        if not -(2**31) <= status < 2**31:
            raise OverflowError("Python int too large to convert to C int")
        self._program_exit(f"os._exit({status})", status & 0xFF)

    def program_abort(self):
        """os.abort as the program sees it: in the runner's own process, the
        run ends as an exit with SIGABRT's status (134); a forked child
        aborts for real."""
        if os.getpid() != self._pid or getattr(self._tls, "busy", False):
            _real_abort()
        self._program_exit("os.abort()", SIGABRT_STATUS)

    def _program_exit(self, how, status):
        try:
            frames = [f for f in traceback.extract_stack(sys._getframe(2)) if f.filename == PROGRAM_FILE]
            stack = "Traceback (most recent call last):\n" + "".join(traceback.format_list(frames)) if frames else ""
        except BaseException:
            stack = ""
        self.finish(error_frame("Exit", how, stack + f"Exit: {how}\n", self.limits, status))

    def _with_timings(self, frame):
        """The done frame with the runner's own phase durations (the host
        reports where a run's time went): compile from the run frame to a
        callable program, evaluate from calling it to its outcome, render
        the outcome's frame. Left out when they would push the frame over
        its limit."""
        head = '{"type":"done",'
        received = getattr(self, "_t_received", None)
        if received is None or not frame.startswith(head):
            return frame
        now = _perf_ns()
        ended = getattr(self, "_t_ended", None) or now
        compiled = getattr(self, "_t_compiled", None) or ended
        us = lambda a, b: max(0, (b - a) // 1000)  # noqa: E731
        extra = f'"timings":{{"compileUs":{us(received, compiled)},"evaluateUs":{us(compiled, ended)},"renderUs":{us(ended, now)}}},'
        limit = (self.limits or {}).get("maxFrameBytes") or 0
        if limit and len(frame) * 4 + len(extra) > limit and len(frame.encode("utf-8", "surrogatepass")) + len(extra) > limit:
            return frame
        return head + extra + frame[len(head):]

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
            try:
                frame = self._with_timings(frame)
            except Exception:
                pass  # the timings are a measurement aid: the frame goes as it is
            self.send(frame)
            try:
                self.ws.close()
            except Exception:
                pass
            _real_exit(0)


# The program runs as __main__ (its globals' __name__), as the runner did
# when it was one script: the classes the program meets — its globals,
# sys.stdout and sys.stderr, the root logger's handler, os._exit — say so
# too, so a traceback ends "ToolCallError: ..." like one of the program's
# own exceptions, not "dsh_runner.runner.ToolCallError: ...".
for _cls in (ToolCallError, Namespace, _Capture, _BinaryCapture, _LogHandler, Runner):
    _cls.__module__ = "__main__"
del _cls
