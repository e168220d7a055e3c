"""The runner's end of egress (only for a run whose run frame carries
"egress"): a CONNECT proxy on 127.0.0.1 inside the container, whose tunnels
travel to the host as streams in the bridge connection (portproto: open /
opened / data / ack / close). The host decides every connection; this end
only moves bytes, keeping at most ``window`` bytes of a stream
unacknowledged: it reads from the program's socket only what the window
has room for (the kernel's buffer holds the rest until an ack makes room).

HTTP_PROXY / HTTPS_PROXY (and lower case) point at the proxy, which
urllib honours. With an extra CA, SSL_CERT_FILE points at a bundle in /tmp
holding the system's CAs and the extra one, so ssl.create_default_context()
(urllib's default) trusts both. Only CONNECT is proxied: plain-HTTP proxy
requests get 501.

Threads: one accepts, one per connection reads the program's socket, one
per connection writes the host's bytes to it; the bridge reader thread only
queues."""

import base64
import os
import queue
import re
import socket
import threading

from .protocol import dumps

MAX_HEAD = 8 << 10
OPEN_TIMEOUT = 60.0
SYSTEM_BUNDLE = "/etc/ssl/certs/ca-certificates.crt"
_CONNECT = re.compile(rb"^CONNECT (\S+) HTTP/1\.[01]$")


class _Stream:
    def __init__(self, sid, sock):
        self.id = sid
        self.sock = sock
        self.opened = threading.Event()
        self.ok = False
        self.message = ""
        self.out = queue.Queue()  # bytes from the host; None: close
        self.cond = threading.Condition()
        self.unacked = 0
        self.host_closed = False
        self.local_closed = False


class Egress:
    def __init__(self, send, cfg, max_frame_bytes):
        self._send = send  # (str) -> None: one frame to the host
        self.window = cfg["window"]
        self.chunk = min(64 << 10, (max_frame_bytes - 128) // 4 * 3)
        self._lock = threading.Lock()
        self._next = 1
        self._streams = {}
        self._srv = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._srv.bind(("127.0.0.1", 0))
        self._srv.listen(64)
        url = f"http://127.0.0.1:{self._srv.getsockname()[1]}"
        for k in ("HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy"):
            os.environ[k] = url
        ca = cfg.get("ca", "")
        if ca:
            os.makedirs("/tmp/.dsh-egress", mode=0o700, exist_ok=True)
            path = "/tmp/.dsh-egress/ca-bundle.pem"
            system = ""
            try:
                with open(SYSTEM_BUNDLE, encoding="ascii", errors="replace") as f:
                    system = f.read()
            except OSError:
                pass
            with open(path, "w", encoding="ascii", errors="replace") as f:
                f.write(system + "\n" + ca + "\n")
            os.environ["SSL_CERT_FILE"] = path
        threading.Thread(target=self._accept, name="dsh-egress-accept", daemon=True).start()

    def send(self, obj):
        self._send(dumps(obj))

    def _accept(self):
        while True:
            try:
                sock, _ = self._srv.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(sock,), name="dsh-egress-conn", daemon=True).start()

    def _serve(self, sock):
        try:
            head = b""
            while b"\r\n\r\n" not in head:
                b = sock.recv(4096)
                if not b:
                    sock.close()
                    return
                head += b
                if len(head) > MAX_HEAD and b"\r\n\r\n" not in head:
                    return _reply(sock, 431, "request head too large")
            end = head.index(b"\r\n\r\n")
            line = head[: head.index(b"\r\n")]
            rest = head[end + 4:]
            m = _CONNECT.match(line)
            if not m:
                return _reply(sock, 501, "only CONNECT (HTTPS) goes through the egress proxy")
            target = m.group(1).decode("latin-1")
            host, _, port_text = target.rpartition(":")
            if host.startswith("[") and host.endswith("]"):
                host = host[1:-1]
            if not host or not port_text.isdigit() or not 1 <= int(port_text) <= 65535 or len(host.encode()) > 255:
                return _reply(sock, 400, f"bad CONNECT target {target[:300]!r}")
            with self._lock:
                sid = self._next
                self._next += 1
                st = _Stream(sid, sock)
                self._streams[sid] = st
            self.send({"type": "open", "stream": sid, "host": host, "port": int(port_text)})
            if not st.opened.wait(OPEN_TIMEOUT):
                self._local_close(st)
                return _reply(sock, 504, "egress: the host did not answer")
            if not st.ok:
                return _reply(sock, 403, st.message or "egress refused")
            sock.sendall(b"HTTP/1.1 200 Connection Established\r\n\r\n")
            threading.Thread(target=self._write_local, args=(st,), name="dsh-egress-write", daemon=True).start()
            # What came with the head goes first, under the window like
            # the rest.
            while rest:
                room = self._room(st)
                if not room:
                    break
                self._send_data(st, rest[:room])
                rest = rest[room:]
            while True:
                room = self._room(st)
                if not room:
                    break
                b = sock.recv(min(room, self.chunk))
                if not b:
                    break
                self._send_data(st, b)
        except OSError:
            pass
        self._local_close(st if "st" in locals() else None)

    def _room(self, st):
        """Waits until the stream's window has room; returns how much (0:
        the host closed the stream). Only this connection's thread adds to
        unacked, so the room lasts until it sends."""
        with st.cond:
            while st.unacked >= self.window and not st.host_closed:
                st.cond.wait()
            return 0 if st.host_closed else self.window - st.unacked

    def _send_data(self, st, b):
        for off in range(0, len(b), self.chunk):
            piece = b[off:off + self.chunk]
            with st.cond:
                st.unacked += len(piece)
            self.send({"type": "data", "stream": st.id, "data": base64.b64encode(piece).decode("ascii")})

    def _write_local(self, st):
        while True:
            b = st.out.get()
            if b is None:
                break
            try:
                st.sock.sendall(b)
            except OSError:
                break
        try:
            st.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass

    def _local_close(self, st):
        if st is None:
            return
        with self._lock:
            if st.local_closed:
                return
            st.local_closed = True
            self._streams.pop(st.id, None)
            tell = not st.host_closed
        if tell:
            self.send({"type": "close", "stream": st.id})
        st.out.put(None)
        try:
            st.sock.close()
        except OSError:
            pass

    def on_frame(self, msg):
        """An egress frame from the host (on the bridge reader thread)."""
        with self._lock:
            st = self._streams.get(msg["stream"])
        if st is None:
            return  # closed here already; the host's frame was in flight
        t = msg["type"]
        if t == "opened":
            st.ok = msg["ok"]
            st.message = msg["message"]
            if not st.ok:
                with self._lock:
                    st.host_closed = True
                    self._streams.pop(st.id, None)
            st.opened.set()
        elif t == "data":
            try:
                st.out.put(base64.b64decode(msg["data"], validate=True))
            except ValueError:
                pass
        elif t == "ack":
            with st.cond:
                st.unacked = max(0, st.unacked - msg["bytes"])
                st.cond.notify_all()
        elif t == "close":
            with self._lock:
                st.host_closed = True
                self._streams.pop(st.id, None)
            with st.cond:
                st.cond.notify_all()
            st.out.put(None)


def _reply(sock, status, text):
    """Answer the program's proxy request with an error; the reason phrase
    carries the text too (urllib shows only that)."""
    reason = re.sub(r"[^\x20-\x7e]", " ", str(text))[:300]
    body = (str(text) + "\n").encode("utf-8", "replace")
    try:
        sock.sendall(
            f"HTTP/1.1 {status} {reason}\r\nContent-Type: text/plain; charset=utf-8\r\n"
            f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n".encode("latin-1", "replace") + body
        )
    except OSError:
        pass
    try:
        sock.close()
    except OSError:
        pass
