package mcp

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/dsh-container/dsh-container/backend"
)

// Bounds on the progress notifications one run_code call streams. The
// runtime already bounds a run's logs (entries and bytes); these bound
// what waits for a client that reads slowly, so the program's log capture
// never blocks on the client.
const (
	// ProgressQueue bounds the log entries waiting to be sent; entries
	// past it are dropped from the stream (the result still has them all)
	// and counted in one last notification.
	ProgressQueue = 256
	// ProgressQueueBytes bounds the text waiting to be sent.
	ProgressQueueBytes = 256 << 10
	// ProgressMessageBytes bounds one notification's message; a longer
	// entry is cut, marked with "…".
	ProgressMessageBytes = 16 << 10
	// progressDrain bounds how long the end of a run waits for the queued
	// notifications to go out before the result is returned.
	progressDrain = 5 * time.Second
)

// progress streams one run's log entries to the client as
// notifications/progress with the call's token, from its own goroutine.
type progress struct {
	ctx   context.Context
	sess  *sdk.ServerSession
	token any
	log   *slog.Logger

	mu      sync.Mutex
	queue   []string
	bytes   int
	dropped int
	closed  bool
	wake    chan struct{} // capacity 1
	done    chan struct{} // closed when the sender exits
	sent    float64
}

func newProgress(ctx context.Context, sess *sdk.ServerSession, token any, log *slog.Logger) *progress {
	p := &progress{ctx: ctx, sess: sess, token: token, log: log, wake: make(chan struct{}, 1), done: make(chan struct{})}
	go p.send()
	return p
}

// message renders a log entry as a notification message: its text
// without the final newline, console levels other than log and info
// tagged, stderr tagged, cut at ProgressMessageBytes.
func message(e backend.LogEntry) string {
	text := strings.TrimSuffix(e.Text, "\n")
	switch {
	case e.Source == backend.SourceStderr:
		text = "[stderr] " + text
	case e.Source == backend.SourceConsole && e.Level != "" && e.Level != backend.LevelLog && e.Level != backend.LevelInfo:
		text = "[" + string(e.Level) + "] " + text
	}
	if len(text) > ProgressMessageBytes {
		cut := ProgressMessageBytes
		for cut > 0 && !utf8.RuneStart(text[cut]) {
			cut--
		}
		text = text[:cut] + "…"
	}
	return text
}

// push queues an entry; it never blocks.
func (p *progress) push(e backend.LogEntry) {
	m := message(e)
	p.mu.Lock()
	switch {
	case p.closed:
	case len(p.queue) >= ProgressQueue || p.bytes+len(m) > ProgressQueueBytes:
		p.dropped++
	default:
		p.queue = append(p.queue, m)
		p.bytes += len(m)
	}
	p.mu.Unlock()
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// send delivers the queue in order until finish and the queue is empty.
func (p *progress) send() {
	defer close(p.done)
	for {
		p.mu.Lock()
		if len(p.queue) == 0 {
			closed, dropped := p.closed, p.dropped
			p.dropped = 0
			p.mu.Unlock()
			if dropped > 0 {
				p.notify(fmt.Sprintf("[dsh-container: %d log entries not streamed (the stream's queue was full); the result has them all]", dropped))
				continue
			}
			if closed {
				return
			}
			select {
			case <-p.wake:
			case <-p.ctx.Done():
				return
			}
			continue
		}
		m := p.queue[0]
		p.queue = p.queue[1:]
		p.bytes -= len(m)
		p.mu.Unlock()
		if !p.notify(m) {
			return
		}
	}
}

// notify sends one notification; false when the call or session is gone.
func (p *progress) notify(m string) bool {
	p.sent++
	err := p.sess.NotifyProgress(p.ctx, &sdk.ProgressNotificationParams{ProgressToken: p.token, Progress: p.sent, Message: m})
	if err != nil {
		p.log.Debug("progress notification not sent", "err", err)
		return p.ctx.Err() == nil
	}
	return true
}

// finish stops taking entries and waits, at most progressDrain, for the
// queued ones to go out, so that they reach the client before the result.
func (p *progress) finish() {
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
	select {
	case p.wake <- struct{}{}:
	default:
	}
	t := time.NewTimer(progressDrain)
	defer t.Stop()
	select {
	case <-p.done:
	case <-t.C:
		// A client that does not read: give up on the stream; the sender
		// ends when the call's context does.
		p.mu.Lock()
		p.queue, p.bytes = nil, 0
		p.mu.Unlock()
	}
}
