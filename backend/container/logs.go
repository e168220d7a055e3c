package container

// Captured output: log entries under the byte and entry caps.

import (
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/dsh-container/dsh-container/backend"
)

// Every log entry is charged LogEntryOverhead bytes on top of its text
// against Limits.LogBytes, and a run keeps at most MaxLogEntries entries:
// empty entries are not free (each costs the host a struct and a JSON
// object in every report).
const (
	LogEntryOverhead = 64
	MaxLogEntries    = 10000
)

// logSink collects log entries under the byte and entry caps, in arrival
// order.
type logSink struct {
	mu        sync.Mutex
	max       int
	used      int
	entries   []backend.LogEntry
	truncated bool
	onEntry   func(backend.LogEntry)
}

func (s *logSink) add(e backend.LogEntry) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.truncated {
		return
	}
	if len(s.entries) >= MaxLogEntries || s.used+LogEntryOverhead > s.max {
		s.truncated = true
		return
	}
	if s.used+LogEntryOverhead+len(e.Text) > s.max {
		s.truncated = true
		cut := s.max - s.used - LogEntryOverhead
		for cut > 0 && !utf8.RuneStart(e.Text[cut]) {
			cut--
		}
		if cut <= 0 {
			return
		}
		e.Text = e.Text[:cut]
	}
	s.used += LogEntryOverhead + len(e.Text)
	s.entries = append(s.entries, e)
	if s.onEntry != nil {
		s.onEntry(e)
	}
}

func (s *logSink) snapshot() ([]backend.LogEntry, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]backend.LogEntry(nil), s.entries...), s.truncated
}

// tail renders the last captured output for an error message.
func (s *logSink) tail() string {
	entries, _ := s.snapshot()
	var b strings.Builder
	for _, e := range entries {
		b.WriteString(e.Text)
	}
	t := strings.TrimSpace(b.String())
	if t == "" {
		return ""
	}
	if len(t) > 512 {
		t = "…" + t[len(t)-512:]
	}
	return "; it printed: " + t
}
