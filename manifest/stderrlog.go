package manifest

import (
	"bufio"
	"context"
	"errors"
	"log/slog"
	"os"
	"strings"
	"sync"
	"time"
)

// Bounds on what an MCP server's stderr costs the host.
const (
	// StderrLineBytes bounds one logged line; a longer line is logged in
	// pieces.
	StderrLineBytes = 4 << 10
	// StderrTailBytes is how much of the end of stderr an error message
	// quotes.
	StderrTailBytes = 4 << 10
	// StderrBurstBytes and StderrRateBytes bound the stderr that reaches
	// the log: a burst of StderrBurstBytes, then StderrRateBytes per
	// second. Lines past the budget are counted and dropped; the next
	// logged line says how many bytes were dropped.
	StderrBurstBytes = 64 << 10
	StderrRateBytes  = 16 << 10
)

// stderrDrainWait bounds how long stopping a server waits for its stderr
// to end after the server is gone: a process that left the server's group
// may hold it open.
const stderrDrainWait = 2 * time.Second

// stderrTailWait bounds how long an error message about a server that
// exited waits for the reader to reach the end of its stderr, so that the
// tail it quotes holds the server's last words.
const stderrTailWait = time.Second

// stderrLog turns an MCP server's stderr into log records, one per line,
// under a byte budget, and keeps its last StderrTailBytes for error
// messages.
type stderrLog struct {
	log    *slog.Logger
	server string

	mu      sync.Mutex
	tail    []byte
	tokens  float64
	last    time.Time
	dropped int64

	r    *os.File
	done chan struct{}
}

func newStderrLog(log *slog.Logger, server string) *stderrLog {
	return &stderrLog{log: log, server: server, tokens: StderrBurstBytes, done: make(chan struct{})}
}

// start reads r until it ends.
func (s *stderrLog) start(r *os.File) {
	s.r = r
	go func() {
		defer close(s.done)
		defer r.Close()
		br := bufio.NewReaderSize(r, StderrLineBytes)
		for {
			line, err := br.ReadSlice('\n')
			if len(line) > 0 {
				s.line(line)
			}
			if err != nil && !errors.Is(err, bufio.ErrBufferFull) {
				return
			}
		}
	}()
}

// wait returns when the reader is done, closing the pipe if the stream
// does not end within stderrDrainWait.
func (s *stderrLog) wait() {
	if s.r == nil {
		return
	}
	select {
	case <-s.done:
	case <-time.After(stderrDrainWait):
		s.r.SetReadDeadline(time.Now())
		<-s.done
	}
}

// drain waits up to d for the reader to reach the end of the stream,
// leaving the pipe open.
func (s *stderrLog) drain(d time.Duration) {
	if s == nil || s.r == nil {
		return
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-s.done:
	case <-t.C:
	}
}

// line records one line (or a piece of a long one).
func (s *stderrLog) line(b []byte) {
	text := strings.ToValidUTF8(strings.TrimRight(string(b), "\r\n"), "\uFFFD")
	s.mu.Lock()
	s.tail = append(s.tail, b...)
	if over := len(s.tail) - StderrTailBytes; over > 0 {
		s.tail = append(s.tail[:0], s.tail[over:]...)
	}
	now := time.Now()
	if !s.last.IsZero() {
		s.tokens = min(StderrBurstBytes, s.tokens+now.Sub(s.last).Seconds()*StderrRateBytes)
	}
	s.last = now
	n := float64(len(b))
	if s.tokens < n {
		s.dropped += int64(len(b))
		s.mu.Unlock()
		return
	}
	s.tokens -= n
	dropped := s.dropped
	s.dropped = 0
	s.mu.Unlock()
	attrs := []slog.Attr{slog.String("line", text)}
	if dropped > 0 {
		attrs = append(attrs, slog.Int64("dropped_bytes", dropped))
	}
	s.log.LogAttrs(context.Background(), slog.LevelInfo, "mcp server stderr", attrs...)
}

// Tail returns the end of stderr so far, whole lines where possible.
func (s *stderrLog) Tail() string {
	if s == nil {
		return ""
	}
	s.mu.Lock()
	t := string(s.tail)
	s.mu.Unlock()
	if full := len(t) >= StderrTailBytes; full {
		if i := strings.IndexByte(t, '\n'); i >= 0 && i < len(t)-1 {
			t = t[i+1:]
		}
	}
	return strings.TrimSpace(strings.ToValidUTF8(t, "\uFFFD"))
}
