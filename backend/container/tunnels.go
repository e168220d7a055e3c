package container

// Egress streams: the host end of the CONNECT tunnels a runner multiplexes
// in its bridge connection (portproto's open / opened / data / ack /
// close). The egress policy (package egress) decides each connection; this
// file moves its bytes, bounded:
//
//   - at most maxOpenStreams streams of a run are open at once (the
//     policy caps how many a run opens in all);
//   - the runner may have at most streamWindow bytes of a stream waiting
//     to be written upstream (it waits for acks); a stream that sends
//     more is closed. A run's buffers are thus at most
//     maxOpenStreams × streamWindow;
//   - bytes from upstream are read one chunk at a time per stream and
//     written to the runner directly, under the bridge's write timeout,
//     like binding results: a runner that stops reading holds the stream,
//     and after writeTimeout ends the run.
//
// Every goroutine here counts in sb.calls and ends when the run settles
// (callCtx cancelled closes every upstream connection).

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"

	"github.com/dsh-container/dsh-container/egress"
	"github.com/dsh-container/dsh-container/portproto"
)

const (
	// maxOpenStreams bounds a run's egress streams open at once.
	maxOpenStreams = 16
	// streamWindow bounds the runner's unacknowledged bytes per stream.
	streamWindow = 128 << 10
	// maxChunk bounds one data frame's payload (before base64).
	maxChunk = 64 << 10
)

// WithEgress sets the egress policy of every run of the runtime (nil:
// none): each run's program may reach the policy's allowlisted names
// through the runner's loopback proxy; the container keeps network
// "none". A run's RunRequest.Egress narrows it for that run. Without one,
// a run is exactly as without egress (no proxy, environment exactly PATH,
// HOME, LANG).
func WithEgress(p *egress.Policy) Option { return func(o *options) { o.egress = p } }

// tunnels are one run's egress streams.
type tunnels struct {
	sb    *sandbox
	sess  *egress.Session
	chunk int

	mu      sync.Mutex
	streams map[int64]*tunnel
	lastID  int64
}

// tunnel is one stream.
type tunnel struct {
	id   int64
	t    *tunnels
	wake chan struct{} // cap 1: the writer has work
	done chan struct{} // closed when the upstream side ended

	mu         sync.Mutex
	conn       net.Conn // set once dialled
	cancelDial context.CancelFunc
	queue      [][]byte
	queued     int
	closing    bool   // the runner closed the stream
	failed     string // why the host closes it
	doneOnce   sync.Once
}

// Each connection's event is logged on the run's logger (run_id,
// trace_id) besides going to the policy's receivers.
func newTunnels(ctx context.Context, sb *sandbox, p *egress.Policy, frameBytes int, log *slog.Logger) *tunnels {
	p = p.WithEvents(func(ev egress.Event) {
		log.InfoContext(ctx, "egress", "host", ev.Host, "port", ev.Port, "address", ev.Address, "outcome", ev.Outcome, "reason", ev.Reason,
			"bytes_up", ev.BytesUp, "bytes_down", ev.BytesDown, "duration_ms", ev.DurationMs)
	})
	t := &tunnels{sb: sb, sess: p.Session(), streams: map[int64]*tunnel{}}
	// A data frame's payload, base64-encoded with its envelope, fits the
	// frame limit.
	t.chunk = min(maxChunk, (frameBytes-128)/4*3)
	return t
}

// runEgress is the run frame's egress member.
func (t *tunnels) runEgress() *portproto.RunEgress {
	return &portproto.RunEgress{CA: t.sess.Policy().CAPEM(), Window: streamWindow}
}

// handle applies one egress frame from the runner on the run loop. It
// returns a frame to post to the runner (a refusal), a failure that ends
// the run (a protocol violation), or neither.
func (t *tunnels) handle(m portproto.Message) (reply any, fail string) {
	switch m := m.(type) {
	case *portproto.Open:
		if m.Stream <= t.lastID {
			return nil, fmt.Sprintf("runner broke protocol: stream id %d after %d (ids must increase)", m.Stream, t.lastID)
		}
		t.lastID = m.Stream
		t.mu.Lock()
		n := len(t.streams)
		t.mu.Unlock()
		if n >= maxOpenStreams {
			err := t.sess.Refuse(m.Host, m.Port, fmt.Sprintf("too many connections open at once (limit %d)", maxOpenStreams))
			return portproto.Opened{Type: portproto.TypeOpened, Stream: m.Stream, Message: err.Error()}, ""
		}
		tu := &tunnel{id: m.Stream, t: t, wake: make(chan struct{}, 1), done: make(chan struct{})}
		t.mu.Lock()
		t.streams[m.Stream] = tu
		t.mu.Unlock()
		t.sb.calls.Add(1)
		go tu.run(m.Host, m.Port)
	case *portproto.Data:
		tu := t.get(m.Stream)
		if tu == nil {
			if m.Stream > t.lastID {
				return nil, fmt.Sprintf("runner broke protocol: data for stream %d, never opened", m.Stream)
			}
			return nil, "" // the host closed it; data was in flight
		}
		tu.mu.Lock()
		if tu.closing || tu.failed != "" {
			tu.mu.Unlock()
			return nil, ""
		}
		if tu.queued+len(m.Data) > streamWindow {
			tu.failed = fmt.Sprintf("the runner sent more than the %d-byte stream window without an ack", streamWindow)
			tu.mu.Unlock()
			tu.abort()
			return nil, ""
		}
		tu.queue = append(tu.queue, m.Data)
		tu.queued += len(m.Data)
		tu.mu.Unlock()
		tu.signal()
	case *portproto.Close:
		tu := t.get(m.Stream)
		if tu == nil {
			return nil, ""
		}
		tu.mu.Lock()
		tu.closing = true
		tu.mu.Unlock()
		tu.signal()
	}
	return nil, ""
}

func (t *tunnels) get(id int64) *tunnel {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.streams[id]
}

func (tu *tunnel) signal() {
	select {
	case tu.wake <- struct{}{}:
	default:
	}
}

// abort closes the upstream connection (if any); the stream's goroutines
// then end.
func (tu *tunnel) abort() {
	tu.doneOnce.Do(func() { close(tu.done) })
	tu.mu.Lock()
	c, cancel := tu.conn, tu.cancelDial
	tu.mu.Unlock()
	if cancel != nil {
		cancel()
	}
	if c != nil {
		c.Close()
	}
}

// run dials, answers the open, then copies upstream bytes to the runner
// until the connection ends, while its writer copies the runner's bytes
// upstream.
func (tu *tunnel) run(host string, port int) {
	t, sb := tu.t, tu.t.sb
	defer sb.calls.Done()
	defer func() {
		t.mu.Lock()
		delete(t.streams, tu.id)
		t.mu.Unlock()
	}()
	// Settlement, or a stream aborted while dialling, stops the dial.
	ctx, cancel := context.WithCancel(sb.callCtx)
	defer cancel()
	tu.mu.Lock()
	tu.cancelDial = cancel
	tu.mu.Unlock()
	stop := context.AfterFunc(ctx, tu.abort)
	defer stop()
	_, endSpan := StartEgressSpan(ctx, host, port)
	c, err := t.sess.Dial(ctx, host, port)
	if err != nil {
		var refused *egress.RefusedError
		if errors.As(err, &refused) {
			endSpan(false, 0, 0, nil)
		} else {
			endSpan(true, 0, 0, err)
		}
		tu.abort()
		msg := err.Error()
		var re *egress.RefusedError
		if !errors.As(err, &re) {
			msg = "egress failed: " + msg
		}
		sb.sendDirect(portproto.Opened{Type: portproto.TypeOpened, Stream: tu.id, Message: cutMessage(msg)})
		return
	}
	defer func() {
		up, down, problem := c.Result()
		var err error
		if problem != "" {
			err = errors.New(problem)
		}
		endSpan(true, down, up, err)
	}()
	tu.mu.Lock()
	tu.conn = c
	tu.mu.Unlock()
	select {
	case <-tu.done: // aborted while dialling
		c.Close()
		return
	default:
	}
	if !sb.sendDirect(portproto.Opened{Type: portproto.TypeOpened, Stream: tu.id, OK: true}) {
		c.Close()
		return
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		tu.writeUpstream(c)
	}()
	buf := make([]byte, t.chunk)
	var readErr error
	for {
		n, err := c.Read(buf)
		if n > 0 {
			data := append([]byte(nil), buf[:n]...)
			if !sb.sendDirect(portproto.Data{Type: portproto.TypeData, Stream: tu.id, Data: data}) {
				readErr = errors.New("settled")
				break
			}
		}
		if err != nil {
			readErr = err
			break
		}
	}
	tu.abort()
	c.Close()
	wg.Wait()
	tu.mu.Lock()
	closing, failed := tu.closing, tu.failed
	tu.mu.Unlock()
	if closing {
		return // the runner closed it: it needs no close frame
	}
	msg := failed
	if msg == "" && errors.Is(readErr, egress.ErrByteCap) {
		msg = fmt.Sprintf("egress cut: the run's byte cap (%d) is reached", t.sess.Policy().MaxBytes())
	}
	sb.sendDirect(portproto.Close{Type: portproto.TypeClose, Stream: tu.id, Message: msg})
}

// writeUpstream writes the runner's queued bytes to c, acknowledging each
// chunk, until the runner closes the stream or the stream ends.
func (tu *tunnel) writeUpstream(c net.Conn) {
	sb := tu.t.sb
	for {
		tu.mu.Lock()
		var chunk []byte
		if len(tu.queue) > 0 {
			chunk = tu.queue[0]
			tu.queue[0] = nil
			tu.queue = tu.queue[1:]
		}
		closing := tu.closing
		tu.mu.Unlock()
		if chunk == nil {
			if closing {
				tu.abort()
				return
			}
			select {
			case <-tu.wake:
				continue
			case <-tu.done:
				return
			}
		}
		_, err := c.Write(chunk)
		tu.mu.Lock()
		tu.queued -= len(chunk)
		if err != nil && tu.failed == "" && !tu.closing {
			if errors.Is(err, egress.ErrByteCap) {
				tu.failed = fmt.Sprintf("egress cut: the run's byte cap (%d) is reached", tu.t.sess.Policy().MaxBytes())
			} else {
				tu.failed = "egress connection failed: " + err.Error()
			}
		}
		tu.mu.Unlock()
		if err != nil {
			tu.abort()
			return
		}
		sb.sendDirect(portproto.Ack{Type: portproto.TypeAck, Stream: tu.id, Bytes: int64(len(chunk))})
	}
}

// sendDirect writes a frame to the runner from a stream's goroutine (a
// write that waits is backpressure, like a binding's result). Nothing is
// written after the run settled; a failed write is reported to the run
// loop. It reports whether the frame was written.
func (sb *sandbox) sendDirect(f any) bool {
	if sb.isSettled() {
		return false
	}
	if err := sb.peer.send(f); err != nil {
		select {
		case sb.writeFailed <- err:
		default:
		}
		return false
	}
	return true
}

// Egress reports the runtime's own egress policy (nil: none; see
// WithEgress).
func (r *Runtime) Egress() *egress.Policy { return r.opts.egress }
