package manifest

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
)

// maxMessageDepth bounds the JSON nesting of any message from a server;
// deeper, the connection is closed. Messages that are not tool lists have
// the much lower MaxServerResultDepth, checked by whoever reads them.
const maxMessageDepth = 1000

// readLimits says how to read one message.
type readLimits struct {
	// limit is the size past which nothing of the message is kept (only
	// its id is); past MaxServerMessageBytes the connection is closed.
	limit int
	// split keeps the elements of result.tools apart from the rest of the
	// message, each passed through keep, which returns what to hold: a
	// copy, or an identical earlier copy. Nil keep copies.
	split bool
	keep  func(tool []byte) []byte
}

// wireMsg is one message as msgReader read it.
type wireMsg struct {
	size   int // its bytes
	depth  int // its JSON nesting
	values int // its JSON values
	// over: it passed limits.limit, so skel and tools are nil.
	over bool
	// id is the raw value of its top-level "id" member when that is a
	// string or a number of at most 256 bytes; method says it has a
	// top-level "method" member (it is a request or a notification).
	id     []byte
	method bool
	// skel is the message, except, when split found a result.tools array,
	// that array's elements, which are in tools; toolsAt is where they
	// were in skel (just past the array's "[").
	skel    []byte
	tools   [][]byte
	toolsAt int // -1: no result.tools array was split
}

// joined is the message whole again.
func (m *wireMsg) joined() []byte {
	if m.toolsAt < 0 {
		return m.skel
	}
	n := len(m.skel) + len(m.tools)
	for _, t := range m.tools {
		n += len(t)
	}
	b := make([]byte, 0, n)
	b = append(b, m.skel[:m.toolsAt]...)
	for i, t := range m.tools {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, t...)
	}
	return append(b, m.skel[m.toolsAt:]...)
}

// msgReader reads a server's messages from its standard output: one JSON
// value per line, as the MCP stdio transport frames them. It reads a
// message in one pass over its bytes, counting its size, nesting and
// values as they stream and holding at most limit bytes of it, so a
// message's cost is known before anything decodes it; with split, a tool
// list's tools are each kept on their own (unchanged ones not at all: see
// readLimits.keep).
type msgReader struct {
	br *bufio.Reader
}

func newMsgReader(r io.Reader) *msgReader {
	return &msgReader{br: bufio.NewReaderSize(r, 64<<10)}
}

// errMalformed is a message the reader cannot frame: the connection ends.
type errMalformed struct{ msg string }

func (e *errMalformed) Error() string { return e.msg }

// Where a byte of the message goes.
const (
	sinkSkel = iota
	sinkTool
	sinkNone
)

// chunks holds a message's bytes as they stream in, in pieces that are
// never copied to grow (a growing slice would allocate several times the
// bound before a message over it is known to be).
type chunks struct {
	bufs [][]byte
	n    int
}

const maxChunk = 64 << 10

func (c *chunks) add(b []byte) {
	for len(b) > 0 {
		if len(c.bufs) == 0 || len(c.bufs[len(c.bufs)-1]) == cap(c.bufs[len(c.bufs)-1]) {
			size := maxChunk
			if len(c.bufs) == 0 {
				size = max(512, min(len(b), maxChunk))
			} else if last := cap(c.bufs[len(c.bufs)-1]); last < maxChunk {
				size = min(2*last, maxChunk)
			}
			c.bufs = append(c.bufs, make([]byte, 0, size))
		}
		last := &c.bufs[len(c.bufs)-1]
		n := min(len(b), cap(*last)-len(*last))
		*last = append(*last, b[:n]...)
		b = b[n:]
		c.n += n
	}
}

// bytes is the whole, in one slice.
func (c *chunks) bytes() []byte {
	if len(c.bufs) == 1 {
		return c.bufs[0]
	}
	out := make([]byte, 0, c.n)
	for _, b := range c.bufs {
		out = append(out, b...)
	}
	return out
}

// scan is the reader's state within one message.
type scan struct {
	limFn func() readLimits // asked when the message's first byte arrives
	lim   readLimits
	m     *wireMsg
	skel  chunks

	stack []byte // the open containers, '{' or '['
	want  []bool // for each open object: a string now would be a key
	str   bool   // in a string
	esc   bool   // in a string, after a backslash
	scal  bool   // in a number or literal
	began bool   // the message's value has begun
	ended bool   // it has ended: only the newline may follow

	// The first bytes of the current keys at depths 1 and 2 (the
	// message's members, the result's members); inKey is the depth of
	// the key being read, 0 for none.
	key    [3][16]byte
	keyLen [3]int
	inKey  int

	inID     bool // reading the value of the message's "id"
	inResult bool // the object at depth 2 is the message's "result"
	inTools  bool // the array at depth 3 is result.tools (split)
	sink     int
	tool     []byte // the tool being read
}

func (s *scan) keyIs(depth int, k string) bool {
	return s.keyLen[depth] == len(k) && string(s.key[depth][:s.keyLen[depth]]) == k
}

// put adds b to where the current bytes go.
func (s *scan) put(b []byte) {
	if s.m.over {
		return
	}
	switch s.sink {
	case sinkSkel:
		s.skel.add(b)
	case sinkTool:
		s.tool = append(s.tool, b...)
	}
}

// putKey adds b to the key being read.
func (s *scan) putKey(b []byte) {
	if d := s.inKey; d > 0 {
		n := copy(s.key[d][min(s.keyLen[d], len(s.key[d])):], b)
		s.keyLen[d] += max(n, len(b)) // past the array: never matches
	}
}

// count adds n bytes to the message's size and enforces the limits.
func (s *scan) count(n int) error {
	s.m.size += n
	if s.m.size > MaxServerMessageBytes {
		return &errMalformed{fmt.Sprintf("it sent a message larger than %d bytes (MaxServerMessageBytes)", MaxServerMessageBytes)}
	}
	if s.m.size > s.lim.limit && !s.m.over {
		s.m.over = true
		s.skel, s.m.tools, s.tool = chunks{}, nil, nil
	}
	return nil
}

// begin notes that a value starts with c at depth len(s.stack).
func (s *scan) begin(c byte) {
	d := len(s.stack)
	s.m.values++
	s.began = true
	switch {
	case d == 1 && s.stack[0] == '{' && s.keyIs(1, "id") && c != '{' && c != '[':
		s.inID = true
	case d == 1 && s.stack[0] == '{' && s.keyIs(1, "result") && c == '{':
		s.inResult = true
	case d == 2 && s.inResult && s.lim.split && s.keyIs(2, "tools") && c == '[' && !s.m.over && s.m.toolsAt < 0:
		s.inTools = true
	case d == 3 && s.inTools:
		s.sink = sinkTool
		s.tool = s.tool[:0]
	}
	if d == 1 && s.stack[0] == '{' && s.keyIs(1, "method") {
		s.m.method = true
	}
}

// end notes that a value ended, leaving depth len(s.stack).
func (s *scan) end() {
	switch d := len(s.stack); {
	case d == 0:
		s.ended = true
	case d == 1:
		s.inID = false
		if s.inResult && s.stack[0] == '{' {
			s.inResult = false
		}
	case d == 3 && s.inTools && s.sink == sinkTool:
		if !s.m.over {
			keep := s.lim.keep
			if keep == nil {
				keep = cloneBytes
			}
			s.m.tools = append(s.m.tools, keep(s.tool))
		}
		s.sink = sinkNone // separators between tools are not kept
	}
}

func cloneBytes(b []byte) []byte { return append(make([]byte, 0, len(b)), b...) }

// read reads the next message, with the limits lim returns when its first
// byte arrives (what to expect can change while the reader waits). An io
// error, or a message it cannot frame (*errMalformed: malformed, nested
// deeper than maxMessageDepth, larger than MaxServerMessageBytes, trailing
// data on its line), is an error after which the connection is done.
func (r *msgReader) read(lim func() readLimits) (*wireMsg, error) {
	s := &scan{limFn: lim, m: &wireMsg{toolsAt: -1}}
	for {
		if _, err := r.br.Peek(1); err != nil {
			if errors.Is(err, io.EOF) && (s.began || s.ended) {
				if s.ended {
					return s.done(), nil
				}
				if s.scal && len(s.stack) == 0 { // a last number without its newline
					s.end()
					return s.done(), nil
				}
				err = io.ErrUnexpectedEOF
			}
			return nil, err
		}
		buf, _ := r.br.Peek(r.br.Buffered())
		n, done, err := s.feed(buf)
		r.br.Discard(n)
		if err != nil {
			return nil, err
		}
		if done {
			return s.done(), nil
		}
	}
}

// done is the message read.
func (s *scan) done() *wireMsg {
	if !s.m.over {
		s.m.skel = s.skel.bytes()
	}
	return s.m
}

// feed processes buf, returning how many bytes it consumed and whether
// the message is complete.
func (s *scan) feed(buf []byte) (int, bool, error) {
	i := 0
	for i < len(buf) {
		c := buf[i]
		if s.ended {
			switch c {
			case '\n':
				return i + 1, true, nil
			case ' ', '\t', '\r':
				i++
				continue
			}
			return i, false, &errMalformed{"it sent data after a message on the same line"}
		}
		if s.str {
			// The bulk of a message is string contents: take runs at once.
			j := i
			if !s.esc {
				for j < len(buf) && buf[j] != '"' && buf[j] != '\\' {
					j++
				}
			}
			if j == i {
				j++ // a quote, a backslash, or the byte after a backslash
			}
			if err := s.count(j - i); err != nil {
				return j, false, err
			}
			closing := !s.esc && c == '"' && j == i+1
			switch {
			case s.esc:
				s.esc = false
			case c == '\\' && j == i+1:
				s.esc = true
			}
			s.putID(buf[i:j])
			s.put(buf[i:j])
			if !closing {
				s.putKey(buf[i:j])
			}
			i = j
			if closing {
				s.str = false
				if s.inKey > 0 {
					s.inKey = 0
				} else {
					s.end()
				}
			}
			continue
		}
		if s.scal {
			switch c {
			case ',', '}', ']', ' ', '\t', '\n', '\r', ':':
				s.scal = false
				s.end()
				continue // c again, as structure
			}
			if err := s.count(1); err != nil {
				return i, false, err
			}
			s.putID(buf[i : i+1])
			s.put(buf[i : i+1])
			i++
			continue
		}
		switch c {
		case ' ', '\t', '\n', '\r':
			if s.began {
				if err := s.count(1); err != nil {
					return i, false, err
				}
				s.put(buf[i : i+1])
			}
			i++
			continue
		}
		if !s.began {
			s.lim = s.limFn()
		}
		if err := s.count(1); err != nil {
			return i, false, err
		}
		d := len(s.stack)
		inObj := d > 0 && s.stack[d-1] == '{'
		switch c {
		case '{', '[':
			if inObj && s.want[d-1] {
				return i, false, &errMalformed{"it sent malformed JSON (a key that is not a string)"}
			}
			s.begin(c)
			if d+1 > maxMessageDepth {
				return i, false, &errMalformed{fmt.Sprintf("it sent a message nested deeper than %d levels", maxMessageDepth)}
			}
			s.stack = append(s.stack, c)
			s.want = append(s.want, c == '{')
			s.m.depth = max(s.m.depth, len(s.stack))
			s.put(buf[i : i+1])
			if s.inTools && d == 2 {
				s.m.toolsAt = s.skel.n
				s.sink = sinkNone
			}
		case '}', ']':
			if d == 0 || (c == '}') != inObj {
				return i, false, &errMalformed{"it sent malformed JSON (unbalanced brackets)"}
			}
			if s.inTools && d == 3 {
				// The end of result.tools: back to the skeleton.
				s.inTools = false
				s.sink = sinkSkel
			}
			s.put(buf[i : i+1])
			s.stack, s.want = s.stack[:d-1], s.want[:d-1]
			s.end()
		case ',':
			if inObj {
				s.want[d-1] = true
			}
			s.put(buf[i : i+1])
		case ':':
			s.put(buf[i : i+1])
		case '"':
			s.str = true
			if inObj && s.want[d-1] {
				s.want[d-1] = false
				if d < len(s.key) {
					s.inKey, s.keyLen[d] = d, 0
				}
				s.put(buf[i : i+1])
				break
			}
			s.begin(c)
			s.put(buf[i : i+1])
			s.putID(buf[i : i+1])
		default:
			if inObj && s.want[d-1] {
				return i, false, &errMalformed{"it sent malformed JSON (a key that is not a string)"}
			}
			s.begin(c)
			s.put(buf[i : i+1])
			s.putID(buf[i : i+1])
			s.scal = true
		}
		i++
	}
	return i, false, nil
}

// putID keeps the bytes of the message's id.
func (s *scan) putID(b []byte) {
	if s.inID && len(s.m.id)+len(b) <= 256 {
		s.m.id = append(s.m.id, b...)
	}
}

// maxEventField bounds an event stream's line that is not data (an id,
// an event name, a retry, a comment).
const maxEventField = 4 << 10

// eventReader reads a text/event-stream one event at a time, the way the
// go-sdk's client reads it: next moves to the next event, keeping its id,
// name and retry fields (trimmed, as the go-sdk trims them); Read then
// yields its data — the contents of its data lines joined by newlines — as
// it streams, never holding it, and io.EOF at the event's end. Fields may
// stand anywhere in an event: those after its first data line are known
// once Read has reached its end. Other fields and comments are skipped; a
// line that is not data is at most maxEventField bytes.
type eventReader struct {
	br *bufio.Reader
	// The current event's fields.
	id, name, retry []byte
	hasData         bool
	inData          bool // within a data line: Read yields its rest
	nl              bool // a newline to yield before the next data line
	end             bool // the event's data is over
	err             error
}

func newEventReader(r io.Reader) *eventReader {
	return &eventReader{br: bufio.NewReaderSize(r, 64<<10)}
}

// next moves to the next event, skipping what is left of the current
// one; false at the stream's end.
func (e *eventReader) next() (bool, error) {
	for !e.end && e.err == nil && e.started() {
		if _, err := e.Read(make([]byte, 4<<10)); err != nil && err != io.EOF {
			return false, err
		}
	}
	if e.err != nil {
		return false, e.err
	}
	e.id, e.name, e.retry = e.id[:0], e.name[:0], e.retry[:0]
	e.hasData, e.inData, e.nl, e.end = false, false, false, false
	for {
		e.end = false
		done, err := e.fields()
		switch {
		case err != nil:
			if errors.Is(err, io.EOF) && (e.hasData || len(e.id) > 0 || len(e.name) > 0) {
				e.end = true
				return true, nil
			}
			e.err = err
			if errors.Is(err, io.EOF) {
				return false, nil
			}
			return false, err
		case done && !e.hasData && len(e.id) == 0 && len(e.name) == 0 && len(e.retry) == 0:
			continue // a blank line between events, or an event of comments
		default: // its end, or its first data line
			return true, nil
		}
	}
}

// started reports whether an event is in progress.
func (e *eventReader) started() bool { return e.hasData || len(e.id) > 0 || len(e.name) > 0 }

// fields reads the lines that are not data, up to the event's first data
// line (done false: Read yields it) or its end (done true).
func (e *eventReader) fields() (done bool, err error) {
	for {
		if e.dataLine() {
			e.br.Discard(5)
			if b, _ := e.br.Peek(1); len(b) == 1 && b[0] == ' ' {
				e.br.Discard(1)
			}
			e.nl = e.hasData
			e.hasData, e.inData = true, true
			return false, nil
		}
		line, err := e.br.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) || len(line) > maxEventField {
			return false, &errMalformed{fmt.Sprintf("it sent an event stream line longer than %d bytes that is not data", maxEventField)}
		}
		if err != nil && (len(line) == 0 || !errors.Is(err, io.EOF)) {
			return false, err
		}
		text := trimEOL(line)
		if len(text) == 0 {
			e.end = true
			return true, nil
		}
		// A field's value is trimmed as the go-sdk trims it (all the
		// space around it, not only the one space after the colon the
		// event stream format strips): "event: message " is a message.
		name, value, _ := bytesCut(text, ':')
		value = bytes.TrimSpace(value)
		switch string(name) {
		case "id":
			e.id = append(e.id[:0], value...)
		case "event":
			e.name = append(e.name[:0], value...)
		case "retry":
			e.retry = append(e.retry[:0], value...)
		}
		if err != nil { // the stream's last line, without its newline
			return false, err
		}
	}
}

// dataLine reports whether the next line is a data line, waiting for no
// byte past the line's end (a live stream may send nothing more for a
// while).
func (e *eventReader) dataLine() bool {
	const prefix = "data:"
	for k := 1; k <= len(prefix); k++ {
		b, err := e.br.Peek(k)
		if err != nil || b[k-1] != prefix[k-1] {
			return false
		}
	}
	return true
}

// Read yields the current event's data.
func (e *eventReader) Read(p []byte) (int, error) {
	for !e.inData {
		if e.end || e.err != nil {
			return 0, io.EOF
		}
		if _, err := e.fields(); err != nil {
			if errors.Is(err, io.EOF) {
				e.end = true
				return 0, io.EOF
			}
			e.err = err
			return 0, err
		}
	}
	if len(p) == 0 {
		return 0, nil
	}
	if e.nl {
		e.nl = false
		p[0] = '\n'
		return 1, nil
	}
	if _, err := e.br.Peek(1); err != nil {
		if errors.Is(err, io.EOF) {
			e.inData, e.end = false, true
			return 0, io.EOF
		}
		e.err = err
		return 0, err
	}
	buf, _ := e.br.Peek(min(len(p), max(e.br.Buffered(), 1)))
	n := len(buf)
	if i := indexEOL(buf); i >= 0 {
		n = i
		e.inData = false
	}
	copy(p, buf[:n])
	e.br.Discard(n)
	if !e.inData {
		// The line's end: its CR, if any, and LF.
		if b, _ := e.br.Peek(1); len(b) == 1 && b[0] == '\r' {
			e.br.Discard(1)
		}
		if b, _ := e.br.Peek(1); len(b) == 1 && b[0] == '\n' {
			e.br.Discard(1)
		}
	}
	return n, nil
}

func indexEOL(b []byte) int {
	for i, c := range b {
		if c == '\n' || c == '\r' {
			return i
		}
	}
	return -1
}

func trimEOL(b []byte) []byte {
	for len(b) > 0 && (b[len(b)-1] == '\n' || b[len(b)-1] == '\r') {
		b = b[:len(b)-1]
	}
	return b
}

func bytesCut(b []byte, sep byte) (before, after []byte, found bool) {
	for i, c := range b {
		if c == sep {
			return b[:i], b[i+1:], true
		}
	}
	return b, nil, false
}
