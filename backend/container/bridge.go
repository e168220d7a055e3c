package container

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gorilla/websocket"

	"github.com/dsh-container/dsh-container/portproto"
)

// bridge is the host end of one run's websocket bridge: a websocket
// server on the driver's endpoint (see Endpoint) that accepts exactly one
// connection.
//
// The first connection is the runner's: it connects while the container
// starts, before any program exists. Every later connection comes from the
// program, and is closed as soon as it is accepted, before a byte of it is
// read (see oneConnListener): the host buffers nothing for it. The one
// connection's handshake is held to maxHandshakeBytes of request head and
// handshakeTimeout; after it, frames are held to maxFrame each.
type bridge struct {
	ep       *Endpoint
	ln       *oneConnListener
	srv      *http.Server
	maxFrame int

	accepted atomic.Bool
	connCh   chan *peer // receives the one accepted connection
	served   chan struct{}

	// mu orders a late handler against close: a connection upgraded after
	// close began is closed, never handed over.
	mu     sync.Mutex
	closed bool
}

const (
	writeTimeout     = 10 * time.Second
	handshakeTimeout = 10 * time.Second
	// maxHandshakeBytes bounds the runner's request head (net/http allows
	// 4 KiB of slack on top); a websocket upgrade needs a few hundred.
	maxHandshakeBytes = 4 << 10
)

// newBridge serves the websocket bridge on ep's listener. close stops it
// and closes the endpoint.
func newBridge(ep *Endpoint, maxFrame int) *bridge {
	ln := &oneConnListener{Listener: ep.Listener}
	b := &bridge{
		ep:       ep,
		ln:       ln,
		maxFrame: maxFrame,
		connCh:   make(chan *peer, 1),
		served:   make(chan struct{}),
	}
	b.srv = &http.Server{
		Handler:           http.HandlerFunc(b.serveHTTP),
		ReadHeaderTimeout: handshakeTimeout,
		MaxHeaderBytes:    maxHandshakeBytes,
		ErrorLog:          discardLog,
	}
	go func() {
		defer close(b.served)
		_ = b.srv.Serve(ln)
	}()
	return b
}

// oneConnListener hands out the first connection it accepts and closes
// every later one at once, unread, until it is closed.
type oneConnListener struct {
	net.Listener
	handed  atomic.Bool
	refused atomic.Int64
}

func (l *oneConnListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if l.handed.CompareAndSwap(false, true) {
			return c, nil
		}
		l.refused.Add(1)
		c.Close()
	}
}

var discardLog = log.New(io.Discard, "", 0)

var upgrader = websocket.Upgrader{
	HandshakeTimeout: handshakeTimeout,
	ReadBufferSize:   32 << 10,
	WriteBufferSize:  32 << 10,
	// The peer is on a private Unix socket; there is no browser origin.
	CheckOrigin: func(*http.Request) bool { return true },
}

func (b *bridge) serveHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/v1" {
		http.Error(w, "unknown path", http.StatusNotFound)
		return
	}
	if !b.accepted.CompareAndSwap(false, true) {
		http.Error(w, "bridge already connected", http.StatusConflict)
		return
	}
	c, err := upgrader.Upgrade(w, r, nil)
	if err != nil {
		return
	}
	c.SetReadLimit(int64(b.maxFrame))
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		c.Close()
		return
	}
	b.connCh <- newPeer(c, b.maxFrame) // buffered; only one is accepted
}

// close stops serving, closes the socket and removes the directory.
func (b *bridge) close(ctx context.Context) error {
	err := b.srv.Shutdown(ctx)
	if errors.Is(err, http.ErrServerClosed) {
		err = nil
	}
	if err != nil {
		b.srv.Close()
	}
	<-b.served
	// A connection that was accepted but never consumed is closed here.
	b.mu.Lock()
	b.closed = true
	b.mu.Unlock()
	select {
	case p := <-b.connCh:
		p.close()
	default:
	}
	return errors.Join(err, b.ep.Close())
}

// frame is one decoded message from the runner, or the error that ended
// the connection.
type frame struct {
	msg portproto.Message
	err error
}

// peer is an accepted connection. A reader goroutine decodes frames into
// frames until the connection fails; writes are serialized.
type peer struct {
	meter  frameMeter // telemetry.go
	c      *websocket.Conn
	frames chan frame
	stop   chan struct{}
	done   chan struct{}
	wmu    sync.Mutex
	once   sync.Once
}

func newPeer(c *websocket.Conn, maxFrame int) *peer {
	p := &peer{c: c, frames: make(chan frame), stop: make(chan struct{}), done: make(chan struct{})}
	go p.readLoop(maxFrame)
	return p
}

func (p *peer) readLoop(maxFrame int) {
	defer close(p.done)
	for {
		typ, data, err := p.c.ReadMessage()
		var f frame
		switch {
		case errors.Is(err, websocket.ErrReadLimit):
			f.err = &portproto.Error{Code: portproto.CodeTooLarge, Reason: fmt.Sprintf("frame exceeds the %d-byte limit", maxFrame)}
		case err != nil:
			f.err = err
		case typ != websocket.TextMessage:
			f.err = &portproto.Error{Code: portproto.CodeBadType, Reason: "binary frames are not part of the protocol"}
		default:
			p.meter.in(len(data))
			f.msg, f.err = portproto.Decode(portproto.RunnerToHost, data, maxFrame)
		}
		select {
		case p.frames <- f:
		case <-p.stop:
			return
		}
		if f.err != nil {
			return
		}
	}
}

func (p *peer) send(v any) error {
	p.wmu.Lock()
	defer p.wmu.Unlock()
	data, err := json.Marshal(v)
	if err != nil {
		return err
	}
	_ = p.c.SetWriteDeadline(time.Now().Add(writeTimeout))
	p.meter.out(len(data))
	return p.c.WriteMessage(websocket.TextMessage, data)
}

// close ends the connection and waits for the reader to stop.
func (p *peer) close() {
	p.once.Do(func() {
		close(p.stop)
		p.c.Close()
	})
	<-p.done
}
