"""Tests of the Python client.

Without a daemon: the protocol's daemon-to-client vectors, and the retry
rules against a scripted websocket server. With DSH_URL (and DSH_TOKEN
for a daemon with --auth): sessions against the real daemon; e2e's
TestPythonClient runs this file that way, on the host's CPython and in
the runner image.
"""

import asyncio
import json
import os
import sys
import threading
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

import websockets  # noqa: E402

from dsh_container import Client, ConnectionLostError, FrameError, ProtocolError, RefusedError, Tool, decode_frame  # noqa: E402

VECTORS = os.environ.get("DSH_VECTORS", os.path.join(HERE, "..", "..", "..", "server", "testdata", "session", "vectors.json"))
URL = os.environ.get("DSH_URL")
TOKEN = os.environ.get("DSH_TOKEN")


class Vectors(unittest.TestCase):
    def test_daemon_to_client(self):
        with open(VECTORS) as f:
            file = json.load(f)
        self.assertEqual(file["protocol"], 1)
        n = 0
        for v in file["vectors"]:
            if v["direction"] != "daemon-to-client":
                continue
            n += 1
            with self.subTest(v["name"]):
                if v["valid"]:
                    decode_frame(v["frame"])
                else:
                    with self.assertRaises(FrameError) as cm:
                        decode_frame(v["frame"])
                    self.assertEqual(cm.exception.code, v["code"])
        self.assertGreaterEqual(n, 20)


class Scripted:
    """A websocket server on loopback answering each connection with the
    next script: a list of frames to send after the start frame."""

    def __init__(self, scripts):
        self.scripts = list(scripts)
        self.connections = 0

    async def handler(self, ws, path=None):
        self.connections += 1
        await ws.recv()  # start
        for frame in self.scripts.pop(0):
            await ws.send(json.dumps(frame))

    async def __aenter__(self):
        self.server = await websockets.serve(self.handler, "127.0.0.1", 0)
        port = list(self.server.sockets)[0].getsockname()[1]
        self.url = "http://127.0.0.1:%d" % port
        return self

    async def __aexit__(self, *exc):
        self.server.close()
        await self.server.wait_closed()


REPORT = {"id": "x", "value": 1, "valueKind": "json", "logs": [], "error": None, "logsTruncated": False,
          "valueTruncated": False, "stats": {"wallMs": 1, "cpuMs": 1, "startupMs": 0, "calls": 0}, "events": []}


class Retries(unittest.TestCase):
    def test_429_retried_after_retry_after(self):
        async def go():
            busy = [{"type": "refused", "status": 429, "error": "busy", "retryAfterMs": 50}]
            async with Scripted([busy, busy, [{"type": "accepted", "id": "x"}, {"type": "done", "report": REPORT}]]) as srv:
                rep = await Client(srv.url).run_async("python", "return 1")
                return rep, srv.connections
        rep, n = asyncio.run(go())
        self.assertEqual((rep.value, n), (1, 3))

    def test_429_given_up(self):
        async def go():
            busy = [{"type": "refused", "status": 429, "error": "busy", "retryAfterMs": 10}]
            async with Scripted([busy, busy]) as srv:
                with self.assertRaises(RefusedError) as cm:
                    await Client(srv.url, max_retries=1).run_async("python", "return 1")
                return cm.exception, srv.connections
        e, n = asyncio.run(go())
        self.assertEqual((e.status, e.retry_after, n), (429, 0.01, 2))

    def test_never_retried_after_accepted(self):
        async def go():
            async with Scripted([[{"type": "accepted", "id": "x"}], [{"type": "accepted", "id": "x"}]]) as srv:
                with self.assertRaises(ConnectionLostError):
                    await Client(srv.url, max_retries=5).run_async("python", "return 1")
                return srv.connections
        self.assertEqual(asyncio.run(go()), 1)


class Peer:
    """A websocket server on loopback, in a thread of its own (so that the
    sync client, which runs its own event loop, can reach it too), that
    answers every session's start frame with the same script: a list of
    frames (dicts sent as JSON text, str as raw text, bytes as a binary
    frame) and, last, how it ends: ("close", code, reason) or "drop" (no
    close frame: a node that died). It counts the start frames it read."""

    def __init__(self, script, end=("close", 1000, "")):
        self.script, self.end = script, end
        self.starts = 0

    async def handler(self, ws, path=None):
        await ws.recv()  # start
        self.starts += 1
        for frame in self.script:
            await ws.send(json.dumps(frame) if isinstance(frame, dict) else frame)
        if self.end == "drop":
            ws.transport.close()
            return
        _, code, reason = self.end
        await ws.close(code, reason)

    async def _serve(self, ready):
        self.loop = asyncio.get_running_loop()
        self.stop = asyncio.Event()
        server = await websockets.serve(self.handler, "127.0.0.1", 0)
        self.url = "http://127.0.0.1:%d" % list(server.sockets)[0].getsockname()[1]
        ready.set()
        await self.stop.wait()
        server.close()
        await server.wait_closed()

    def __enter__(self):
        ready = threading.Event()
        self.thread = threading.Thread(target=lambda: asyncio.run(self._serve(ready)), daemon=True)
        self.thread.start()
        if not ready.wait(30):
            raise RuntimeError("the peer did not start")
        return self

    def __exit__(self, *exc):
        self.loop.call_soon_threadsafe(self.stop.set)
        self.thread.join(30)


ACCEPTED = {"type": "accepted", "id": "r"}
SIDE_CALL = {"type": "call", "id": "r:code:1", "name": "side", "args": {}}
HUGE = {"type": "log", "source": "stdout", "text": "x" * 4096}

# What a peer may do after accepted (or, for a running program's frame,
# before it), and what the client must make of it: (name, frames, end,
# exception, protocol error code, text the error must contain).
MISBEHAVIOURS = [
    ("refused 503 after accepted", [ACCEPTED, {"type": "refused", "status": 503, "error": "shutting down"}], None,
     ProtocolError, "unexpected", "refused the run (503: shutting down) after accepting it, a protocol violation; the run was accepted and is not retried"),
    ("refused 429 after accepted", [ACCEPTED, {"type": "refused", "status": 429, "error": "busy", "retryAfterMs": 1}], None,
     ProtocolError, "unexpected", "refused the run (429: busy) after accepting it"),
    ("connection dropped after accepted", [ACCEPTED], "drop", ConnectionLostError, None, "it is not retried"),
    ("normal close after accepted", [ACCEPTED], None, ConnectionLostError, None, "1000"),
    ("close 1011 after accepted", [ACCEPTED], ("close", 1011, "crashed"), ConnectionLostError, None, "1011"),
    ("error frame after accepted", [ACCEPTED, {"type": "error", "code": "not-started", "message": "no runner"}], None,
     ProtocolError, "not-started", "no runner"),
    ("malformed frame after accepted", [ACCEPTED, '{"type":"refused",'], None,
     ProtocolError, "bad-frame", "the run was accepted and is not retried"),
    ("unknown frame after accepted", [ACCEPTED, {"type": "retry"}], None, ProtocolError, "bad-frame", "unknown-type"),
    ("binary frame after accepted", [ACCEPTED, json.dumps({"type": "done", "report": REPORT}).encode()], None,
     ProtocolError, "binary", "sent a binary frame, a protocol violation; the run was accepted"),
    ("oversized frame after accepted", [ACCEPTED, HUGE], None, ProtocolError, "too-large", "larger than 1024 bytes"),
    ("accepted twice", [ACCEPTED, ACCEPTED], None, ProtocolError, "unexpected", "sent accepted twice"),
    ("call before accepted, then refused 429", [SIDE_CALL, {"type": "refused", "status": 429, "error": "busy", "retryAfterMs": 1}], None,
     ProtocolError, "unexpected", "sent call before accepted, a protocol violation; the run may have started and is not retried"),
    ("log before accepted", [{"type": "log", "source": "stdout", "text": "hi"}], None, ProtocolError, "unexpected", "sent log before accepted"),
    ("done before accepted", [{"type": "done", "report": REPORT}], None, ProtocolError, "unexpected", "sent done before accepted"),
    ("oversized frame before accepted", [HUGE], None, ProtocolError, "too-large", "may have started"),
    ("binary frame before accepted", [json.dumps(ACCEPTED).encode()], None, ProtocolError, "binary", "binary"),
]


class NeverAfterAccepted(unittest.TestCase):
    """Nothing after accepted is retried, whatever the peer does next, and
    a running program's frame before accepted is a violation: one start
    frame per run, the tool of a call before accepted never run; sync and
    async alike."""

    def check(self, run):
        for name, frames, end, exc, code, text in MISBEHAVIOURS:
            with self.subTest(name):
                calls = []
                with Peer(frames, end or ("close", 1000, "")) as peer:
                    client = Client(peer.url, max_retries=5, max_frame_bytes=1024)
                    with self.assertRaises(exc) as cm:
                        run(client, {"side": lambda args: calls.append(args) or "done"})
                    starts = peer.starts
                if code is not None:
                    self.assertEqual(cm.exception.code, code)
                self.assertIn(text, str(cm.exception))
                self.assertEqual(starts, 1, "the run was started %d times" % starts)
                self.assertEqual(calls, [], "the tool of a call sent before accepted ran")

    def test_async(self):
        self.check(lambda client, tools: asyncio.run(client.run_async("python", "return 1", tools=tools)))

    def test_sync(self):
        self.check(lambda client, tools: client.run("python", "return 1", tools=tools))

    def test_refused_before_accepted_is_retried(self):
        busy = {"type": "refused", "status": 429, "error": "busy", "retryAfterMs": 1}
        with Peer([busy]) as peer:
            with self.assertRaises(RefusedError) as cm:
                Client(peer.url, max_retries=2).run("python", "return 1")
            self.assertEqual((cm.exception.status, peer.starts), (429, 3))


class Approvals(unittest.TestCase):
    """The answer to an approval frame, from on_approval."""

    class WS:
        def __init__(self):
            self.sent = []

        async def send(self, text):
            self.sent.append(json.loads(text))

    def answer(self, on_approval):
        from dsh_container.client import _approve

        ws = self.WS()
        frame = {"type": "approval", "id": "r:code:1", "tool": "rm", "args": {"path": "/x"}}
        asyncio.run(_approve(ws, on_approval, frame))
        self.assertEqual(len(ws.sent), 1)
        return ws.sent[0]

    def test_decisions(self):
        seen = []

        def allow(req):
            seen.append(req)
            return "allow"

        self.assertEqual(self.answer(allow), {"type": "approvalResult", "id": "r:code:1", "decision": "allow"})
        self.assertEqual(seen, [{"id": "r:code:1", "tool": "rm", "args": {"path": "/x"}}])

        async def deny(req):
            return {"decision": "deny", "reason": "no"}

        self.assertEqual(self.answer(deny), {"type": "approvalResult", "id": "r:code:1", "decision": "deny", "reason": "no"})
        self.assertEqual(self.answer(lambda req: "allowForRun")["decision"], "allowForRun")

    def test_denials(self):
        self.assertEqual(self.answer(None)["reason"], "this client has no approval handler")
        self.assertEqual(self.answer(lambda req: "maybe")["decision"], "deny")

        def boom(req):
            raise RuntimeError("kaput")

        self.assertEqual(self.answer(boom), {"type": "approvalResult", "id": "r:code:1", "decision": "deny", "reason": "kaput"})


@unittest.skipUnless(URL, "DSH_URL is not set: no daemon")
class Daemon(unittest.TestCase):
    def client(self, **kw):
        return Client(URL, token=TOKEN, **kw)

    def test_sync_tools_both_kinds(self):
        logs = []
        calls = []

        def greet(args):  # a plain function, run in a thread
            calls.append(threading.current_thread().name)
            return "hello " + args["name"]

        async def seen(args):  # a coroutine
            return any(e.text.startswith("before") for e in logs)

        def fail(args):
            raise ValueError("no such row")

        for lang, code in {
            "python": 'print("before")\ns = await tools.seen({})\ng = await tools.greet({"name": "Ada"})\ntry:\n    await tools.fail({})\nexcept Exception as e:\n    g += " / " + str(e)\nreturn {"seen": s, "g": g}',
            "typescript": 'console.log("before"); const s = await tools.seen({}); let g = await tools.greet({name: "Ada"});\ntry { await tools.fail({}); } catch (e) { g += " / " + e.message; }\nreturn {seen: s, g};',
        }.items():
            with self.subTest(lang):
                logs.clear()
                events = []
                rep = self.client().run(lang, code, tools=[
                    Tool("greet", greet, {"type": "object", "properties": {"name": {"type": "string"}}}, "Greet someone."),
                    Tool("seen", seen, output_schema={"type": "boolean"}),
                    Tool("fail", fail),
                ], on_log=logs.append, on_event=events.append)
                self.assertTrue(rep.ok, rep.error)
                self.assertEqual(rep.value["seen"], True)
                self.assertTrue(rep.value["g"].startswith("hello Ada / "), rep.value)
                self.assertIn("no such row", rep.value["g"])
                self.assertEqual(len(events), 3)
                self.assertEqual(rep.stats["calls"], 3)
        self.assertTrue(all(name != threading.main_thread().name for name in calls))

    def test_async_cancel_aborts(self):
        async def go():
            started = asyncio.Event()

            async def wait(args):
                started.set()
                await asyncio.sleep(3600)

            task = asyncio.ensure_future(self.client().run_async("python", "return await tools.wait({})", tools={"wait": wait}))
            await asyncio.wait_for(started.wait(), 60)
            task.cancel()
            with self.assertRaises(asyncio.CancelledError):
                await task
        asyncio.run(go())

    def test_sync_timeout_aborts(self):
        rep = self.client().run("python", "return await tools.wait({})", tools={"wait": lambda a: __import__("time").sleep(3)}, timeout=1)
        self.assertEqual(rep.error["kind"], "abort")

    @unittest.skipUnless(os.environ.get("DSH_POLICY_ASKS") == "guarded", "the daemon's policy does not ask about 'guarded'")
    def test_approval(self):
        asked = []

        def on_approval(req):
            asked.append(req)
            if req["args"].get("n") == 1:
                return "allow"
            return {"decision": "deny", "reason": "not %s" % req["args"].get("n")}

        for lang, code in {
            "python": 'a = await tools.guarded({"n": 1})\ntry:\n    await tools.guarded({"n": 2})\n    b = "ran"\nexcept Exception as e:\n    b = str(e)\nreturn [a, b]',
            "typescript": 'const a = await tools.guarded({n: 1}); let b = "ran";\ntry { await tools.guarded({n: 2}); } catch (e) { b = e.message; }\nreturn [a, b];',
        }.items():
            with self.subTest(lang):
                asked.clear()
                events = []
                rep = self.client().run(lang, code, tools={"guarded": lambda a: "ok %s" % a["n"]}, on_event=events.append, on_approval=on_approval)
                self.assertTrue(rep.ok, rep.error)
                self.assertEqual(rep.value[0], "ok 1")
                self.assertIn('tool "guarded" denied: not 2', rep.value[1])
                self.assertEqual([r["tool"] for r in asked], ["guarded", "guarded"])
                self.assertEqual([e["decision"] for e in events if e["type"] == "tool/approval"], ["allow", "deny"])
        # Without a handler the client denies.
        rep = self.client().run("python", 'try:\n    await tools.guarded({"n": 1})\n    return "ran"\nexcept Exception as e:\n    return str(e)', tools={"guarded": lambda a: "x"})
        self.assertIn("this client has no approval handler", rep.value)

    def test_refusals(self):
        with self.assertRaises(RefusedError) as cm:
            self.client().run("cobol", "return 1")
        self.assertEqual(cm.exception.status, 400)
        with self.assertRaises(RefusedError) as cm:
            self.client().run("python", "return 1", limits={"pids": 1 << 40})
        self.assertEqual(cm.exception.status, 400)
        self.assertIn("pids", cm.exception.message)
        # egress= reaches the daemon as start's "egress"; this one has none.
        with self.assertRaises(RefusedError) as cm:
            self.client().run("python", "return 1", egress=["api.github.com:443"])
        self.assertEqual(cm.exception.status, 400)
        self.assertIn("offers no egress", cm.exception.message)
        if TOKEN:
            with self.assertRaises(RefusedError) as cm:
                Client(URL, token="wrong").run("python", "return 1")
            self.assertEqual(cm.exception.status, 401)


if __name__ == "__main__":
    unittest.main()
