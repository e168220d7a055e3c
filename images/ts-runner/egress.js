'use strict';
// The runner's end of egress (only for a run whose run frame carries
// "egress"): a CONNECT proxy on 127.0.0.1 inside the container, whose
// tunnels travel to the host as streams in the bridge connection
// (portproto: open / opened / data / ack / close). The host decides every
// connection; this end only moves bytes, keeping at most `window` bytes of
// a stream unacknowledged: it reads from the program's socket only what
// the window has room for (the socket's buffer, then the kernel's, holds
// the rest until an ack makes room).
//
// HTTP_PROXY / HTTPS_PROXY (and lower case) point at the proxy, and, since
// Node 20's fetch ignores them, undici's ProxyAgent (Debian's node-undici)
// becomes the global dispatcher, trusting the system's CAs plus the run's
// extra CA when there is one. Only CONNECT is proxied: plain-HTTP proxy
// requests get 501.

const net = require('node:net');
const tls = require('node:tls');

const MAX_HEAD = 8 << 10;

class Egress {
  constructor(send, warn, cfg, maxFrameBytes) {
    this.send = send; // (object) => void: one frame to the host
    this.warn = warn; // (text) => void: a console.warn entry
    this.window = cfg.window;
    this.ca = cfg.ca || '';
    this.chunk = Math.min(64 << 10, Math.floor((maxFrameBytes - 128) / 4) * 3);
    this.nextStream = 1;
    this.streams = new Map();
  }

  // listen starts the proxy, sets the environment and the dispatcher, and
  // calls ready(err) once done.
  listen(ready) {
    this.server = net.createServer((sock) => this.accept(sock));
    this.server.on('error', (err) => ready(err));
    this.server.listen(0, '127.0.0.1', () => {
      const url = `http://127.0.0.1:${this.server.address().port}`;
      for (const k of ['HTTP_PROXY', 'HTTPS_PROXY', 'http_proxy', 'https_proxy']) process.env[k] = url;
      try {
        const undici = require('undici');
        const opts = { uri: url };
        if (this.ca !== '') opts.requestTls = { ca: [...tls.rootCertificates, this.ca] };
        undici.setGlobalDispatcher(new undici.ProxyAgent(opts));
      } catch (err) {
        return ready(err);
      }
      ready(null);
    });
  }

  accept(sock) {
    let head = Buffer.alloc(0);
    const onData = (chunk) => {
      head = Buffer.concat([head, chunk]);
      const end = head.indexOf('\r\n\r\n');
      if (end < 0) {
        if (head.length > MAX_HEAD) reply(sock, 431, 'request head too large');
        return;
      }
      sock.removeListener('data', onData);
      sock.pause();
      const line = head.subarray(0, head.indexOf('\r\n')).toString('latin1');
      const rest = head.subarray(end + 4);
      const m = /^CONNECT (\S+) HTTP\/1\.[01]$/.exec(line);
      if (!m) return reply(sock, 501, 'only CONNECT (HTTPS) goes through the egress proxy');
      const target = m[1];
      const colon = target.lastIndexOf(':');
      const port = Number(target.slice(colon + 1));
      let host = colon > 0 ? target.slice(0, colon) : '';
      if (host.startsWith('[') && host.endsWith(']')) host = host.slice(1, -1);
      if (host === '' || !Number.isInteger(port) || port < 1 || port > 65535 || Buffer.byteLength(host) > 255) {
        return reply(sock, 400, `bad CONNECT target ${JSON.stringify(target.slice(0, 300))}`);
      }
      this.open(sock, host, port, rest);
    };
    sock.on('data', onData);
    sock.on('error', () => {});
  }

  open(sock, host, port, rest) {
    const id = this.nextStream++;
    const st = { id, sock, rest, opened: false, unacked: 0, hostClosed: false, localClosed: false };
    this.streams.set(id, st);
    sock.on('close', () => this.localClose(st));
    this.send({ type: 'open', stream: id, host, port });
  }

  localClose(st) {
    if (st.localClosed) return;
    st.localClosed = true;
    if (this.streams.get(st.id) === st) this.streams.delete(st.id);
    if (!st.hostClosed) this.send({ type: 'close', stream: st.id });
  }

  // pump sends what the program wrote, as much as the window has room
  // for, and leaves the rest in the socket: the socket is in paused mode
  // ('readable'), so nothing is read that is not sent. Called on
  // 'readable' and on each ack.
  pump(st) {
    while (!st.localClosed && !st.hostClosed) {
      const room = this.window - st.unacked;
      if (room <= 0) return;
      let buf = st.sock.read();
      if (buf === null) return; // drained: 'readable' comes with more
      if (buf.length > room) {
        st.sock.unshift(buf.subarray(room));
        buf = buf.subarray(0, room);
      }
      for (let off = 0; off < buf.length; off += this.chunk) {
        const piece = buf.subarray(off, off + this.chunk);
        st.unacked += piece.length;
        this.send({ type: 'data', stream: st.id, data: piece.toString('base64') });
      }
    }
  }

  // onFrame handles an egress frame from the host.
  onFrame(msg) {
    const st = this.streams.get(msg.stream);
    if (!st) return; // closed here already; the host's frame was in flight
    switch (msg.type) {
      case 'opened':
        if (st.opened) return;
        st.opened = true;
        if (!msg.ok) {
          st.hostClosed = true;
          this.streams.delete(st.id);
          // undici reports a refused tunnel as "Request was cancelled":
          // the reason goes to the program's log too.
          this.warn(`egress refused: ${msg.message}`);
          return reply(st.sock, 403, msg.message || 'egress refused');
        }
        st.sock.write('HTTP/1.1 200 Connection Established\r\n\r\n');
        // What came with the head goes first, under the window like the rest.
        if (st.rest.length > 0) st.sock.unshift(st.rest);
        st.rest = null;
        st.sock.on('readable', () => this.pump(st));
        st.sock.on('end', () => st.sock.end());
        this.pump(st);
        return;
      case 'data':
        st.sock.write(Buffer.from(msg.data, 'base64'));
        return;
      case 'ack':
        st.unacked = Math.max(0, st.unacked - msg.bytes);
        this.pump(st);
        return;
      case 'close':
        st.hostClosed = true;
        this.streams.delete(st.id);
        st.sock.end();
        return;
      default:
    }
  }
}

// reply answers the program's proxy request with an error; the reason
// phrase carries the text too (Python's urllib shows only that).
function reply(sock, status, text) {
  const body = Buffer.from(`${text}\n`);
  const reason = String(text).replace(/[^\x20-\x7e]/g, ' ').slice(0, 300);
  sock.end(`HTTP/1.1 ${status} ${reason}\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: ${body.length}\r\nConnection: close\r\n\r\n${body}`);
}

module.exports = { Egress };
