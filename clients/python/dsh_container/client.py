"""Client of the dsh-container daemon's session endpoint (GET /v1/sessions).

Standard library plus ``websockets`` (10.4 or newer; tested with Debian
bookworm's 10.4 and trixie's 15.0.1). Protocol version 1, written down in
docs/session-protocol.md.
"""

import asyncio
import inspect
import json
import ssl as _ssl
import urllib.parse

import websockets

__all__ = [
    "PROTOCOL",
    "Client",
    "Tool",
    "Report",
    "LogEntry",
    "RefusedError",
    "ProtocolError",
    "ConnectionLostError",
    "FrameError",
    "decode_frame",
]

PROTOCOL = 1

# How long, after an abort, the client waits for the daemon's report.
ABORT_GRACE = 15.0
# A failed tool's message is cut to this many bytes (the daemon's bound).
MAX_MESSAGE_BYTES = 16 << 10

_WS_MAJOR = int(websockets.__version__.split(".")[0])


class RefusedError(Exception):
    """The daemon refused the run before accepting it: nothing ran.

    ``status`` has HTTP's meaning (400, 401, 404, 413, 429, 503);
    ``retry_after`` is in seconds (429 only).
    """

    def __init__(self, status, message, retry_after=0.0):
        super().__init__("dsh-container refused the run (%d): %s" % (status, message))
        self.status = status
        self.message = message
        self.retry_after = retry_after


class ProtocolError(Exception):
    """An error frame after the run was accepted (code ``not-started``: the
    program never ran), a frame this client cannot accept (``bad-frame``,
    ``binary``, ``too-large``), or a frame the peer was not allowed to send
    then (``unexpected``: a refused or a second accepted after accepted, or
    a log, event, call, approval or done before it) -- a daemon, a proxy or
    a peer posing as one that broke the protocol. The run may have started:
    a ProtocolError is never retried."""

    def __init__(self, code, message):
        super().__init__("dsh-container session: %s: %s" % (code, message))
        self.code = code
        self.message = message


class ConnectionLostError(Exception):
    """The connection broke after the run was accepted. It is never
    retried: the run executes at most once."""


class _Attempt:
    """One attempt's state: whether the daemon accepted the run."""

    __slots__ = ("url", "accepted")

    def __init__(self, url):
        self.url = url
        self.accepted = False

    def then(self):
        if self.accepted:
            return "; the run was accepted and is not retried"
        return "; the run may have started and is not retried"

    def violation(self, code, what):
        """The peer broke the session protocol: a ProtocolError saying so."""
        return ProtocolError(code, "the peer at %s %s, a protocol violation%s" % (self.url, what, self.then()))


class FrameError(ValueError):
    """A daemon frame that breaks the protocol; ``code`` is the protocol's
    error code (not-utf8, not-json, bad-type, unknown-type, bad-field)."""

    def __init__(self, code, message):
        super().__init__("%s: %s" % (code, message))
        self.code = code


class LogEntry:
    __slots__ = ("source", "level", "text")

    def __init__(self, source, level, text):
        self.source, self.level, self.text = source, level, text

    def __repr__(self):
        return "LogEntry(%r, %r, %r)" % (self.source, self.level, self.text)


class Report:
    """A run's outcome: the done frame's report (the object POST /v1/run
    returns). ``value`` is decoded JSON; ``error`` is None or a dict with
    ``kind`` (exception, timeout, abort, oom, exit) and ``message``."""

    def __init__(self, raw):
        self.raw = raw
        self.id = raw["id"]
        self.value = raw["value"]
        self.value_kind = raw.get("valueKind", "")
        self.logs = [LogEntry(e.get("source"), e.get("level", ""), e.get("text", "")) for e in raw["logs"] or []]
        self.error = raw["error"]
        self.stats = raw["stats"]
        self.events = raw["events"] or []
        self.egress_events = raw.get("egressEvents") or []

    @property
    def ok(self):
        return self.error is None

    def __repr__(self):
        return "Report(id=%r, value=%r, error=%r)" % (self.id, self.value, self.error)


class Tool:
    """A tool the program can call, answered in this process.

    ``fn(args)`` receives the decoded arguments and returns a JSON value;
    it may be a plain function (run in a thread, so it may block) or a
    coroutine function. An exception rejects the program's call with its
    text.
    """

    def __init__(self, name, fn, input_schema=None, description="", output_schema=None):
        if not callable(fn):
            raise TypeError("tool %r: fn must be callable" % (name,))
        self.name = name
        self.fn = fn
        self.input_schema = input_schema if input_schema is not None else {"type": "object"}
        self.description = description
        self.output_schema = output_schema

    def wire(self):
        t = {"name": self.name, "inputSchema": self.input_schema}
        if self.description:
            t["description"] = self.description
        if self.output_schema is not None:
            t["outputSchema"] = self.output_schema
        return t


def _tools(tools):
    if tools is None:
        return []
    if isinstance(tools, dict):
        tools = [t if isinstance(t, Tool) else Tool(name, t) for name, t in tools.items()]
    out, seen = [], set()
    for t in tools:
        if not isinstance(t, Tool):
            raise TypeError("tools must be Tool objects or a dict of name -> callable")
        if t.name in seen:
            raise ValueError("tool %r given twice" % (t.name,))
        seen.add(t.name)
        out.append(t)
    return out


_DAEMON_FIELDS = {
    "accepted": ("type", "id"),
    "refused": ("type", "status", "error", "retryAfterMs"),
    "log": ("type", "source", "level", "text"),
    "event": ("type", "event"),
    "call": ("type", "id", "name", "args"),
    "approval": ("type", "id", "tool", "args"),
    "done": ("type", "report"),
    "error": ("type", "code", "message"),
}
_CLIENT_TYPES = ("start", "result", "abort", "approvalResult")
_DECISIONS = ("allow", "deny", "allowForRun")
_LEVELS = ("log", "info", "warn", "error", "debug")


def _no_duplicates(pairs):
    d = {}
    for k, v in pairs:
        if k in d:
            raise ValueError("duplicate key %r" % (k,))
        d[k] = v
    return d


def _is_int(v):
    return isinstance(v, int) and not isinstance(v, bool)


def decode_frame(data):
    """Validate one daemon-to-client text frame; return it as a dict or
    raise FrameError."""
    if isinstance(data, bytes):
        try:
            data = data.decode("utf-8")
        except UnicodeDecodeError:
            raise FrameError("not-utf8", "the frame is not valid UTF-8")
    try:
        f = json.loads(data, object_pairs_hook=_no_duplicates)
    except ValueError as e:
        raise FrameError("not-json", "the frame is not one JSON object: %s" % e)
    if not isinstance(f, dict):
        raise FrameError("not-json", "the frame is not a JSON object")
    typ = f.get("type")
    if not isinstance(typ, str):
        raise FrameError("bad-type", 'the frame has no string "type"')
    if typ not in _DAEMON_FIELDS:
        if typ in _CLIENT_TYPES:
            raise FrameError("bad-type", "%r is not a daemon-to-client frame" % typ)
        raise FrameError("unknown-type", "unknown frame type %r" % typ)
    for k in sorted(f):
        if k not in _DAEMON_FIELDS[typ]:
            raise FrameError("bad-field", "%s: unknown field %r" % (typ, k))

    def need(cond, msg):
        if not cond:
            raise FrameError("bad-field", "%s: %s" % (typ, msg))

    def string(name, required=True):
        if name not in f:
            need(not required, "%r is required" % name)
            return
        need(isinstance(f[name], str), "%r must be a string" % name)

    if typ == "accepted":
        string("id")
        need(f["id"] != "", "id must not be empty")
    elif typ == "refused":
        need(_is_int(f.get("status")) and 400 <= f["status"] <= 599, "status must be an HTTP error status")
        string("error")
        if "retryAfterMs" in f or f["status"] == 429:
            need(_is_int(f.get("retryAfterMs")) and f["retryAfterMs"] >= 0, "retryAfterMs must be a non-negative integer (required with 429)")
    elif typ == "log":
        string("source")
        string("level", required=False)
        string("text")
        src = f["source"]
        if src == "console":
            need(f.get("level") in _LEVELS, "a console entry's level is one of " + ", ".join(_LEVELS))
        elif src in ("stdout", "stderr"):
            need("level" not in f, "%s entries carry no level" % src)
        else:
            need(False, "source %r is not one of console, stdout, stderr" % src)
    elif typ == "event":
        ev = f.get("event")
        need(isinstance(ev, dict) and isinstance(ev.get("type"), str) and ev["type"] != "", 'event must be an object with a string "type"')
    elif typ == "call":
        string("id")
        string("name")
        need("args" in f, '"args" is required')
        need(f["id"] != "" and f["name"] != "", "id and name must not be empty")
    elif typ == "approval":
        string("id")
        string("tool")
        need("args" in f, '"args" is required')
        need(f["id"] != "" and f["tool"] != "", "id and tool must not be empty")
    elif typ == "done":
        rep = f.get("report")
        need(isinstance(rep, dict), "report must be an object")
        for k in ("id", "value", "logs", "error", "stats", "events"):
            need(k in rep, "report has no %r" % k)
    elif typ == "error":
        string("code")
        string("message")
    return f


def _sessions_uri(url):
    u = urllib.parse.urlsplit(url)
    if u.scheme == "http":
        return "ws://%s/v1/sessions" % u.netloc, None
    if u.scheme == "https":
        return "wss://%s/v1/sessions" % u.netloc, None
    if u.scheme == "unix":
        return "ws://dsh-container/v1/sessions", u.path
    raise ValueError("url %r: the scheme must be http, https or unix" % (url,))


class Client:
    """A dsh-container daemon.

    ``url`` is http://host:port, https://host:port or unix:///path.sock;
    ``token`` a tenant's bearer token (serve --auth); ``ssl`` an
    ``ssl.SSLContext`` for https (server CAs, a client certificate for
    mTLS), or ``ca_file`` the PEM CA that signed the daemon's certificate.
    A run refused with 429 is retried up to ``max_retries`` times after the
    daemon's Retry-After; a run is never retried once accepted, whatever
    follows (a lost connection is ConnectionLostError; a refusal or a frame
    out of order, a ProtocolError).
    """

    def __init__(self, url, token=None, ssl=None, ca_file=None, max_retries=3, max_retry_wait=30.0, max_frame_bytes=64 << 20):
        self.uri, self.unix_path = _sessions_uri(url)
        if ca_file is not None:
            if ssl is not None:
                raise ValueError("give ssl or ca_file, not both")
            ssl = _ssl.create_default_context(cafile=ca_file)
        self.url = url
        self.token = token
        self.ssl = ssl
        self.max_retries = max_retries
        self.max_retry_wait = max_retry_wait
        self.max_frame_bytes = max_frame_bytes

    # -- sync ---------------------------------------------------------

    def run(self, language, code, tools=None, on_log=None, on_event=None, on_accepted=None, limits=None, id=None, timeout=None, on_approval=None, runtime=None, egress=None):
        """Run ``code`` and return its Report (see run_async). ``timeout``
        (seconds) aborts the run when it passes: the Report then says
        abort. Call it where no event loop runs."""
        return asyncio.run(self._run_sync(language, code, tools, on_log, on_event, on_accepted, limits, id, timeout, on_approval, runtime, egress))

    async def _run_sync(self, language, code, tools, on_log, on_event, on_accepted, limits, id, timeout, on_approval=None, runtime=None, egress=None):
        holder = {}
        task = asyncio.ensure_future(self.run_async(language, code, tools, on_log, on_event, on_accepted, limits, id, _abort_holder=holder, on_approval=on_approval, runtime=runtime, egress=egress))
        if timeout is None:
            return await task
        done, _ = await asyncio.wait({task}, timeout=timeout)
        if done:
            return task.result()
        task.cancel()
        try:
            await task
        except asyncio.CancelledError:
            pass
        if "report" in holder:
            return holder["report"]
        raise TimeoutError("the run did not end within %ss and no report came after the abort" % timeout)

    # -- async --------------------------------------------------------

    async def run_async(self, language, code, tools=None, on_log=None, on_event=None, on_accepted=None, limits=None, id=None, _abort_holder=None, on_approval=None, runtime=None, egress=None):
        """Run ``code`` (a ``language`` program: "python" or "typescript")
        with ``tools`` (Tool objects, or a dict of name -> function)
        answered here; ``on_log(LogEntry)`` and ``on_event(dict)`` get the
        stream as it happens. ``limits`` lowers the daemon's budgets
        ({"wallTimeoutMs","computeTimeoutMs","memoryBytes","cpus","pids"}).
        ``runtime`` names the OCI runtime (e.g. "runsc"), one the daemon
        allows (serve --allow-runtimes); None runs under its default.
        ``egress`` (a list of "host:port" or "*.domain:port") narrows the
        daemon's egress allowlist for this run; None keeps the daemon's.
        Each connection is an ``{"type": "egress", ...}`` event, and the
        Report's ``egress_events`` lists them.

        ``on_approval({"id", "tool", "args"})`` decides a call the server's
        policy asks about: it returns "allow", "deny", "allowForRun", or
        {"decision": ..., "reason": ...} (sync or async). Without it, an
        exception, or any other answer, the call is denied.

        Cancelling the task aborts the run: the daemon's abort report is
        awaited (up to ABORT_GRACE seconds) and CancelledError re-raised.
        """
        tools = _tools(tools)
        if not language or not isinstance(code, str) or not code.strip():
            raise ValueError("language and code are required")
        attempt = 0
        while True:
            state = _Attempt(self.url)
            try:
                return await self._once(language, code, tools, on_log, on_event, on_accepted, limits, id, _abort_holder, on_approval, runtime, egress, state)
            except RefusedError as e:
                # A run the daemon accepted is its own, whatever followed.
                if state.accepted or e.status != 429 or attempt >= self.max_retries:
                    raise
                attempt += 1
                await asyncio.sleep(min(max(e.retry_after, 0.1), self.max_retry_wait))

    async def _connect(self):
        headers = {}
        if self.token:
            headers["Authorization"] = "Bearer " + self.token
        kw = {"max_size": self.max_frame_bytes, "open_timeout": 30, "ping_interval": 20, "ping_timeout": 60}
        if _WS_MAJOR >= 14:
            kw["additional_headers"] = headers
        else:
            kw["extra_headers"] = headers
        if self.ssl is not None:
            kw["ssl"] = self.ssl
        elif self.uri.startswith("wss:"):
            kw["ssl"] = _ssl.create_default_context()
        try:
            if self.unix_path is not None:
                return await websockets.unix_connect(self.unix_path, self.uri, **kw)
            return await websockets.connect(self.uri, **kw)
        except Exception as e:
            status = _handshake_status(e)
            if status is not None:
                raise RefusedError(status, str(e)) from None
            raise ConnectionError("dsh-container: connecting to %s: %s" % (self.url, e)) from e

    async def _once(self, language, code, tools, on_log, on_event, on_accepted, limits, id, holder, on_approval=None, runtime=None, egress=None, state=None):
        by_name = {t.name: t for t in tools}
        if state is None:
            state = _Attempt(self.url)
        ws = await self._connect()
        calls = set()
        try:
            start = {"type": "start", "protocol": PROTOCOL, "language": language, "code": code, "tools": [t.wire() for t in tools]}
            if limits:
                start["limits"] = limits
            if id:
                start["id"] = id
            if runtime:
                start["runtime"] = runtime
            if egress is not None:
                start["egress"] = {"allow": [egress] if isinstance(egress, str) else list(egress)}
            try:
                await ws.send(json.dumps(start))
            except websockets.ConnectionClosed:
                pass  # a refusal sent at once (401) is still to be read
            while True:
                try:
                    data = await ws.recv()
                except asyncio.CancelledError:
                    raise
                except Exception as e:
                    if _too_large(e):
                        # A frame came, and may have been accepted.
                        raise state.violation("too-large", "sent a frame larger than %d bytes (max_frame_bytes)" % self.max_frame_bytes) from None
                    if state.accepted:
                        raise ConnectionLostError("the connection was lost after the run was accepted (%s); it is not retried" % e) from None
                    raise ConnectionError("the session closed before the run was accepted: %s" % e) from None
                if not isinstance(data, str):
                    raise state.violation("binary", "sent a binary frame")
                try:
                    f = decode_frame(data)
                except FrameError as e:
                    raise ProtocolError("bad-frame", str(e) + state.then()) from None
                t = f["type"]
                if not state.accepted and t not in ("accepted", "refused", "error"):
                    # A frame of a running program: the run may have started.
                    raise state.violation("unexpected", "sent %s before accepted" % t)
                if t == "refused":
                    if state.accepted:
                        raise state.violation("unexpected", "refused the run (%d: %s) after accepting it" % (f["status"], f["error"]))
                    raise RefusedError(f["status"], f["error"], f.get("retryAfterMs", 0) / 1000.0)
                if t == "accepted":
                    if state.accepted:
                        raise state.violation("unexpected", "sent accepted twice")
                    state.accepted = True
                    if on_accepted:
                        on_accepted(f["id"])
                elif t == "log":
                    if on_log:
                        on_log(LogEntry(f["source"], f.get("level", ""), f["text"]))
                elif t == "event":
                    if on_event:
                        on_event(f["event"])
                elif t == "call":
                    task = asyncio.ensure_future(_answer(ws, by_name, f))
                    calls.add(task)
                    task.add_done_callback(calls.discard)
                elif t == "approval":
                    task = asyncio.ensure_future(_approve(ws, on_approval, f))
                    calls.add(task)
                    task.add_done_callback(calls.discard)
                elif t == "done":
                    return Report(f["report"])
                elif t == "error":
                    raise ProtocolError(f["code"], f["message"])
        except asyncio.CancelledError:
            if state.accepted:
                rep = await _abort(ws)
                if rep is not None and holder is not None:
                    holder["report"] = rep
            raise
        finally:
            for task in list(calls):
                task.cancel()
            if calls:
                await asyncio.gather(*calls, return_exceptions=True)
            await ws.close()


async def _answer(ws, by_name, f):
    tool = by_name.get(f["name"])
    res = {"type": "result", "id": f["id"]}
    try:
        if tool is None:
            raise LookupError("tool %r is not defined by this client" % f["name"])
        fn = tool.fn
        if inspect.iscoroutinefunction(fn):
            value = await fn(f["args"])
        else:
            loop = asyncio.get_running_loop()
            value = await loop.run_in_executor(None, fn, f["args"])
            if inspect.isawaitable(value):
                value = await value
        res["ok"] = True
        res["value"] = value
        text = json.dumps(res, allow_nan=False)
    except asyncio.CancelledError:
        raise
    except Exception as e:
        msg = str(e) or type(e).__name__
        msg = msg.encode("utf-8")[:MAX_MESSAGE_BYTES].decode("utf-8", "ignore")
        text = json.dumps({"type": "result", "id": f["id"], "ok": False, "message": msg})
    try:
        await ws.send(text)
    except Exception:
        pass  # the session is over; the run settles without this result


async def _approve(ws, on_approval, f):
    """Answer one approval frame from on_approval; anything but a valid
    decision is a denial."""
    req = {"id": f["id"], "tool": f["tool"], "args": f["args"]}
    try:
        if on_approval is None:
            ans = {"decision": "deny", "reason": "this client has no approval handler"}
        elif inspect.iscoroutinefunction(on_approval):
            ans = await on_approval(req)
        else:
            loop = asyncio.get_running_loop()
            ans = await loop.run_in_executor(None, on_approval, req)
            if inspect.isawaitable(ans):
                ans = await ans
        if isinstance(ans, str):
            ans = {"decision": ans}
        if not isinstance(ans, dict) or ans.get("decision") not in _DECISIONS:
            ans = {"decision": "deny", "reason": "the approval handler answered %r" % (ans,)}
    except asyncio.CancelledError:
        raise
    except Exception as e:
        ans = {"decision": "deny", "reason": str(e) or type(e).__name__}
    res = {"type": "approvalResult", "id": f["id"], "decision": ans["decision"]}
    reason = ans.get("reason")
    if isinstance(reason, str) and reason:
        res["reason"] = reason.encode("utf-8")[:MAX_MESSAGE_BYTES].decode("utf-8", "ignore")
    try:
        await ws.send(json.dumps(res))
    except Exception:
        pass  # the session is over


async def _abort(ws):
    """Send abort and wait for the report."""
    try:
        await ws.send(json.dumps({"type": "abort", "reason": "the client cancelled the run"}))
        loop = asyncio.get_running_loop()
        deadline = loop.time() + ABORT_GRACE
        while True:
            data = await asyncio.wait_for(ws.recv(), max(0.0, deadline - loop.time()))
            f = decode_frame(data)
            if f["type"] == "done":
                return Report(f["report"])
            if f["type"] in ("error", "refused"):
                return None
    except Exception:
        return None


def _too_large(e):
    """Whether e is the connection this client closed with 1009 for a frame
    over max_size (websockets 10 to 15: ConnectionClosed.sent)."""
    sent = getattr(e, "sent", None)
    return isinstance(e, websockets.ConnectionClosed) and getattr(sent, "code", None) == 1009


def _handshake_status(e):
    # websockets >= 14: InvalidStatus(response); 10-13: InvalidStatusCode(status_code).
    resp = getattr(e, "response", None)
    if resp is not None and hasattr(resp, "status_code"):
        return resp.status_code
    code = getattr(e, "status_code", None)
    if isinstance(code, int):
        return code
    return None
