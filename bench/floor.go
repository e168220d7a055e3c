package bench

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"time"

	"github.com/gorilla/websocket"

	"github.com/dsh-container/dsh-container/backend"
	"github.com/dsh-container/dsh-container/backend/container"
)

// The floors under the binding round trip, measured from the runner image
// in a sandbox made like a run's (container.Runtime.RunCommand), over the
// same kind of read-only bind-mounted Unix socket, timed inside the
// container around each exchange like the round-trip program:
//
//   - the raw socket floor: a length-prefixed ping-pong between the
//     runner's language, with no websocket library, and Go on the host;
//   - the library floor: the runner's websocket library (node ws, Python
//     websockets' sync client, with the runner's options) against a
//     minimal gorilla echo.
//
// Each exchange carries floorPayload bytes each way, about a no-op call
// frame. The client ends with one message of its own: a JSON array of its
// timings in nanoseconds (the only message starting with "[").

// floorPayload is the bytes per exchange: a no-op call frame's size.
const floorPayload = 64

// maxFloorFrame bounds what the host reads of one raw frame.
const maxFloorFrame = 16 << 20

const nodeRawFloor = `
const net = require('node:net');
const [n, size, sock] = [Number(process.argv.at(-3)), Number(process.argv.at(-2)), process.argv.at(-1)];
const frame = Buffer.alloc(4 + size, 'x');
frame.writeUInt32BE(size, 0);
const out = [];
let t = 0n;
let buf = Buffer.alloc(0);
const c = net.connect(sock);
const ping = () => { t = process.hrtime.bigint(); c.write(frame); };
c.on('connect', ping);
c.on('data', (d) => {
  buf = buf.length ? Buffer.concat([buf, d]) : d;
  while (buf.length >= 4) {
    const len = buf.readUInt32BE(0);
    if (buf.length < 4 + len) return;
    buf = buf.subarray(4 + len);
    out.push(Number(process.hrtime.bigint() - t));
    if (out.length < n) { ping(); continue; }
    const r = Buffer.from(JSON.stringify(out));
    const h = Buffer.alloc(4);
    h.writeUInt32BE(r.length, 0);
    c.end(Buffer.concat([h, r]));
  }
});
c.on('error', (e) => { console.error(e.message); process.exit(1); });
`

const nodeLibraryFloor = `
const WebSocket = require('ws');
const [n, size, sock] = [Number(process.argv.at(-3)), Number(process.argv.at(-2)), process.argv.at(-1)];
const ws = new WebSocket('ws+unix:' + sock + ':/v1', { perMessageDeflate: false, maxPayload: 0, skipUTF8Validation: true });
const msg = 'x'.repeat(size);
const out = [];
let t = 0n;
const ping = () => { t = process.hrtime.bigint(); ws.send(msg); };
ws.on('open', ping);
ws.on('message', () => {
  out.push(Number(process.hrtime.bigint() - t));
  if (out.length < n) return ping();
  ws.send(JSON.stringify(out));
  ws.close();
});
ws.on('error', (e) => { console.error(e.message); process.exit(1); });
`

const pyRawFloor = `
import json, socket, struct, sys, time
n, size, sock = int(sys.argv[-3]), int(sys.argv[-2]), sys.argv[-1]
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.connect(sock)
frame = struct.pack(">I", size) + b"x" * size
def recvn(k):
    b = bytearray()
    while len(b) < k:
        c = s.recv(k - len(b))
        if not c:
            raise SystemExit("closed")
        b += c
    return b
out = []
for _ in range(n):
    t = time.perf_counter_ns()
    s.sendall(frame)
    recvn(struct.unpack(">I", recvn(4))[0])
    out.append(time.perf_counter_ns() - t)
r = json.dumps(out).encode()
s.sendall(struct.pack(">I", len(r)) + r)
s.close()
`

const pyLibraryFloor = `
import json, logging, sys, time
from websockets.sync.client import unix_connect
n, size, sock = int(sys.argv[-3]), int(sys.argv[-2]), sys.argv[-1]
quiet = logging.Logger("floor", logging.CRITICAL + 1)
ws = unix_connect(sock, uri="ws://localhost/v1", compression=None, max_size=None, ping_interval=None, close_timeout=2.0, proxy=None, logger=quiet)
msg = "x" * size
out = []
for _ in range(n):
    t = time.perf_counter_ns()
    ws.send(msg)
    ws.recv()
    out.append(time.perf_counter_ns() - t)
ws.send(json.dumps(out))
ws.close()
`

// floorArgv is the command of one floor in language l's runner image.
func floorArgv(l backend.Language, library bool, calls int) []string {
	var argv []string
	switch {
	case l == backend.Python && library:
		argv = []string{"python3", "-I", "-c", pyLibraryFloor}
	case l == backend.Python:
		argv = []string{"python3", "-I", "-c", pyRawFloor}
	case library:
		argv = []string{"node", "-e", nodeLibraryFloor}
	default:
		argv = []string{"node", "-e", nodeRawFloor}
	}
	return append(argv, strconv.Itoa(calls), strconv.Itoa(floorPayload))
}

// Floor runs one floor of language l on rt (a runtime of l): the library
// floor when library is set, else the raw socket floor; calls exchanges.
// It returns their durations as timed in the sandbox, the first tenth
// dropped as warm-up like the round trip's.
func Floor(ctx context.Context, rt *container.Runtime, l backend.Language, library bool, calls int) ([]time.Duration, error) {
	var ns []int64
	serve := serveRawFloor
	if library {
		serve = serveLibraryFloor
	}
	err := rt.RunCommand(ctx, floorArgv(l, library, calls), func(ctx context.Context, ln net.Listener) error {
		r, err := serve(ctx, ln)
		if err != nil {
			return err
		}
		if err := json.Unmarshal(r, &ns); err != nil {
			return fmt.Errorf("the floor client's timings: %w", err)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if len(ns) != calls {
		return nil, fmt.Errorf("the floor client sent %d timings for %d exchanges", len(ns), calls)
	}
	var out []time.Duration
	for _, n := range ns[len(ns)/10:] {
		out = append(out, time.Duration(n))
	}
	return out, nil
}

// serveRawFloor accepts one connection and echoes its length-prefixed
// frames until the client's timings arrive, which it returns.
func serveRawFloor(ctx context.Context, ln net.Listener) ([]byte, error) {
	c, err := accept(ctx, ln)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	stop := context.AfterFunc(ctx, func() { c.Close() })
	defer stop()
	var hdr [4]byte
	buf := make([]byte, 0, 4+floorPayload)
	for {
		if _, err := io.ReadFull(c, hdr[:]); err != nil {
			return nil, fmt.Errorf("raw floor: %w", err)
		}
		n := binary.BigEndian.Uint32(hdr[:])
		if n == 0 || n > maxFloorFrame {
			return nil, fmt.Errorf("raw floor: a frame of %d bytes", n)
		}
		if cap(buf) < 4+int(n) {
			buf = make([]byte, 4+int(n))
		}
		buf = buf[:4+int(n)]
		copy(buf, hdr[:])
		if _, err := io.ReadFull(c, buf[4:]); err != nil {
			return nil, fmt.Errorf("raw floor: %w", err)
		}
		if buf[4] == '[' {
			return buf[4:], nil
		}
		if _, err := c.Write(buf); err != nil {
			return nil, fmt.Errorf("raw floor: %w", err)
		}
	}
}

// serveLibraryFloor serves one websocket connection with a minimal gorilla
// echo until the client's timings arrive, which it returns.
func serveLibraryFloor(ctx context.Context, ln net.Listener) ([]byte, error) {
	type result struct {
		b   []byte
		err error
	}
	done := make(chan result, 1)
	// The first connection's outcome is the answer; any other is dropped
	// rather than left blocked.
	report := func(r result) {
		select {
		case done <- r:
		default:
		}
	}
	up := websocket.Upgrader{ReadBufferSize: 4096, WriteBufferSize: 4096}
	srv := &http.Server{ReadHeaderTimeout: 10 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, err := up.Upgrade(w, r, nil)
		if err != nil {
			report(result{err: err})
			return
		}
		defer c.Close()
		c.SetReadLimit(maxFloorFrame)
		for {
			mt, b, err := c.ReadMessage()
			if err != nil {
				report(result{err: fmt.Errorf("library floor: %w", err)})
				return
			}
			if len(b) > 0 && b[0] == '[' {
				report(result{b: b})
				return
			}
			if err := c.WriteMessage(mt, b); err != nil {
				report(result{err: fmt.Errorf("library floor: %w", err)})
				return
			}
		}
	})}
	go srv.Serve(ln)
	defer srv.Close()
	select {
	case r := <-done:
		return r.b, r.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func accept(ctx context.Context, ln net.Listener) (net.Conn, error) {
	stop := context.AfterFunc(ctx, func() { ln.Close() })
	defer stop()
	c, err := ln.Accept()
	if err != nil && ctx.Err() != nil {
		return nil, errors.Join(ctx.Err(), err)
	}
	return c, err
}

// FloorRatios set a language's binding round trip against its floors
// (issue 17's targets: p50 ≤ 2× the raw socket floor, p99 ≤ 4× its own
// p50).
type FloorRatios struct {
	RoundTripOverRaw     float64 `json:"roundTripP50OverRawSocketFloorP50"`
	RoundTripOverLibrary float64 `json:"roundTripP50OverLibraryFloorP50"`
	RoundTripP99OverP50  float64 `json:"roundTripP99OverP50"`
}

// floors measures language l's raw socket and library floors on the
// target, each from a fresh sandbox of the runner image, and its idle
// pooled runner's memory.
func (t *target) floors(ctx context.Context, l backend.Language, o Options) error {
	lr := t.rep.Languages[string(l)]
	rt, err := t.newRT(ctx, l)
	if err != nil {
		return err
	}
	raw, err := Floor(ctx, rt, l, false, o.Calls)
	if err == nil {
		var lib []time.Duration
		lib, err = Floor(ctx, rt, l, true, o.Calls)
		lr.LibraryFloor = dist(lib)
	}
	lr.RawFloor = dist(raw)
	closeRT(ctx, rt)
	if err != nil {
		return fmt.Errorf("%s floor: %w", l, err)
	}
	lr.FloorRatios = FloorRatios{
		RoundTripOverRaw:     ratio(lr.RoundTrip.P50, lr.RawFloor.P50),
		RoundTripOverLibrary: ratio(lr.RoundTrip.P50, lr.LibraryFloor.P50),
		RoundTripP99OverP50:  ratio(lr.RoundTrip.P99, lr.RoundTrip.P50),
	}
	fmt.Fprintf(t.progress, "%s floors: raw socket p50 %.3fms p99 %.3fms; library p50 %.3fms p99 %.3fms; round trip / raw %.2f, / library %.2f\n",
		l, lr.RawFloor.P50, lr.RawFloor.P99, lr.LibraryFloor.P50, lr.LibraryFloor.P99, lr.FloorRatios.RoundTripOverRaw, lr.FloorRatios.RoundTripOverLibrary)
	t.rep.Languages[string(l)] = lr
	return nil
}

// issue17Ratios prints, per target, the binding round trip against its
// floors and warm TypeScript against warm Python, with issue 17's targets.
func issue17Ratios(w io.Writer, r *Report) {
	for _, d := range r.Drivers {
		for _, l := range backend.Languages() {
			lr, ok := d.Languages[string(l)]
			if !ok || lr.RawFloor.N == 0 {
				continue
			}
			f := lr.FloorRatios
			fmt.Fprintf(w, "%s %s round trip: p50 / raw socket floor %.2f (target ≤ 2: %s); p50 / library floor %.2f; p99 / p50 %.2f (target ≤ 4: %s)\n",
				d.Name, l, f.RoundTripOverRaw, verdict(f.RoundTripOverRaw <= 2), f.RoundTripOverLibrary, f.RoundTripP99OverP50, verdict(f.RoundTripP99OverP50 <= 4))
		}
		if d.Ratios.WarmTSOverWarmPy > 0 {
			fmt.Fprintf(w, "%s warm TS / warm Python %.2f (target ≤ 1.5: %s); warm TS / worker_threads %.2f (target ≤ 0.15: %s)\n",
				d.Name, d.Ratios.WarmTSOverWarmPy, verdict(d.Ratios.WarmTSOverWarmPy <= 1.5), d.Ratios.WarmTSOverWorker, verdict(d.Ratios.WarmTSOverWorker > 0 && d.Ratios.WarmTSOverWorker <= 0.15))
		}
	}
}
