package registry

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/containerd/errdefs"
)

// NormalizeArguments returns the canonical JSON of a call's arguments, the
// form every tool, hook, guard and event sees:
//
//   - empty input (no arguments at all) becomes {};
//   - the input must be one valid JSON value: NaN, Infinity, undefined and
//     other non-JSON tokens are rejected, as is trailing data and a number
//     too large for a float64 (1e400 would read back as Infinity);
//   - lossy input is rejected rather than repaired: invalid UTF-8, an escaped
//     lone surrogate (\ud800) and an object with a duplicate key (parsers
//     disagree on which value wins);
//   - the output is compact, object keys are sorted, strings are re-escaped
//     minimally (no HTML escaping) and numbers keep their exact text, so
//     integers beyond 2^53 survive.
//
// Errors wrap errdefs.ErrInvalidArgument.
func NormalizeArguments(raw json.RawMessage) (json.RawMessage, error) {
	if len(bytes.TrimSpace(raw)) == 0 {
		return json.RawMessage(`{}`), nil
	}
	out, err := canonicalJSON(raw)
	if err != nil {
		return nil, errorf(errdefs.ErrInvalidArgument, "arguments are not lossless JSON: %w", err)
	}
	return out, nil
}

// maxJSONDepth bounds nesting, as encoding/json's own decoder does.
const maxJSONDepth = 10000

// canonicalJSON validates raw as one lossless JSON value (see
// NormalizeArguments) and returns its canonical text.
//
// Arguments come from programs, so the work is bounded by the input: one
// pass builds a tape of the values (twelve bytes per value, no per-value
// allocation) and a second emits them, sorting each object's members by
// their tape positions. Time is O(n log n) and memory a small multiple of
// n whatever the shape — a tree of Go values costs a hundred times the
// input for a long array of small numbers.
func canonicalJSON(raw []byte) ([]byte, error) {
	p, root, err := parseTape(raw)
	if err != nil {
		return nil, err
	}
	out := make([]byte, 0, len(raw))
	return p.emit(out, root)
}

// CheckLossless reports why raw is not one lossless JSON value — the
// input NormalizeArguments accepts, with the error it gives, without its
// prefix — or nil. It builds no canonical text: it costs the tape and the
// objects' keys, so a frame that is mostly one long string costs a few
// bytes of tape, not a copy of the string.
func CheckLossless(raw []byte) error {
	p, _, err := parseTape(raw)
	if err != nil {
		return err
	}
	return p.checkKeys()
}

// parseTape validates raw's encoding and syntax and returns its tape and
// the root's index. Duplicate keys are found later (emit, checkKeys).
func parseTape(raw []byte) (*tapeParser, int, error) {
	if !utf8.Valid(raw) {
		return nil, 0, errors.New("invalid UTF-8")
	}
	if err := checkSurrogates(raw); err != nil {
		return nil, 0, err
	}
	p := &tapeParser{src: raw}
	p.tape.hint = len(raw)
	root, err := p.value(0)
	if err == nil {
		if i := skipSpace(raw, p.pos); i < len(raw) {
			err = errors.New("trailing data after the JSON value")
		}
	}
	if err != nil {
		if errors.Is(err, errSyntax) {
			return nil, 0, syntaxMessage(raw)
		}
		return nil, 0, err
	}
	return p, root, nil
}

// checkKeys finds a duplicate key in any object of the tape, with emit's
// message.
func (p *tapeParser) checkKeys() error {
	var keys []string
	for at := 0; at < p.tape.n; at++ {
		e := p.tape.at(at)
		if e.kind != '{' {
			continue
		}
		keys = keys[:0]
		for i := at + 1; i < int(e.next); i = int(p.tape.at(i + 1).next) {
			keys = append(keys, p.decodeString(i))
		}
		slices.Sort(keys)
		for j := 1; j < len(keys); j++ {
			if keys[j-1] == keys[j] {
				return fmt.Errorf("duplicate object key %s", strconv.Quote(keys[j]))
			}
		}
	}
	return nil
}

// errSyntax marks malformed JSON: syntaxMessage then asks encoding/json
// for its message.
var errSyntax = errors.New("syntax error")

// syntaxMessage returns encoding/json's account of raw's first error.
func syntaxMessage(raw []byte) error {
	err := json.NewDecoder(bytes.NewReader(raw)).Decode(new(struct{}))
	switch {
	case err == nil:
		return errors.New("malformed JSON")
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return errors.New("unexpected end of JSON input")
	}
	return err
}

// tapeEntry is one value: its kind (the first byte of its text: { [ " t f
// n or a digit/minus), where its text starts, and the index of the entry
// after it (after its last member, for a container).
type tapeEntry struct {
	kind  byte
	start uint32
	next  uint32
}

type tapeParser struct {
	src  []byte
	pos  int
	tape tape
}

// tape is a growable array in fixed chunks: growing never copies.
type tape struct {
	chunks [][]tapeEntry
	n      int
	// hint bounds the entries: every value starts at a byte of its own
	// (a scalar's text, a container's opening bracket), so a tape of an
	// n-byte input holds at most n entries. The first chunk starts at a
	// sixty-fourth of it (and a few): a small argument object costs a few
	// hundred bytes of tape, not 196 KiB, and a schema of long
	// descriptions, a few entries for hundreds of bytes, no longer costs
	// twelve bytes of tape a byte (a 15 MiB tool list, rebuilt into a new
	// registry on every change, allocated 190 MiB of tape). Denser input
	// grows the first chunk once, to the bound; no pointer from at is held
	// across an add.
	hint int
}

const tapeChunk = 1 << 14

func (t *tape) add(e tapeEntry) int {
	if t.n%tapeChunk == 0 {
		size := tapeChunk
		if t.n == 0 && t.hint > 0 {
			size = min(t.hint, 64+t.hint/64, tapeChunk)
		}
		t.chunks = append(t.chunks, make([]tapeEntry, 0, size))
	}
	c := &t.chunks[len(t.chunks)-1]
	if len(*c) == cap(*c) { // the first chunk, started small: to its bound at once
		*c = append(make([]tapeEntry, 0, min(t.hint, tapeChunk)), *c...)
	}
	*c = append(*c, e)
	t.n++
	return t.n - 1
}

func (t *tape) at(i int) *tapeEntry { return &t.chunks[i/tapeChunk][i%tapeChunk] }

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// value parses one value at p.pos and returns its tape index. An object's
// members are its tape children in pairs: key, value.
func (p *tapeParser) value(depth int) (int, error) {
	if depth > maxJSONDepth {
		return 0, fmt.Errorf("exceeded max depth of %d", maxJSONDepth)
	}
	if len(p.src) > math.MaxUint32 {
		return 0, errors.New("arguments too long")
	}
	p.pos = skipSpace(p.src, p.pos)
	if p.pos >= len(p.src) {
		return 0, errSyntax
	}
	c := p.src[p.pos]
	at := p.tape.add(tapeEntry{kind: c, start: uint32(p.pos)})
	switch {
	case c == '{' || c == '[':
		p.pos++
		closing := byte('}')
		if c == '[' {
			closing = ']'
		}
		p.pos = skipSpace(p.src, p.pos)
		if p.pos < len(p.src) && p.src[p.pos] == closing {
			p.pos++
			break
		}
		for {
			if c == '{' {
				p.pos = skipSpace(p.src, p.pos)
				if p.pos >= len(p.src) || p.src[p.pos] != '"' {
					return 0, errSyntax
				}
				if _, err := p.value(depth + 1); err != nil {
					return 0, err
				}
				p.pos = skipSpace(p.src, p.pos)
				if p.pos >= len(p.src) || p.src[p.pos] != ':' {
					return 0, errSyntax
				}
				p.pos++
			}
			if _, err := p.value(depth + 1); err != nil {
				return 0, err
			}
			p.pos = skipSpace(p.src, p.pos)
			if p.pos >= len(p.src) {
				return 0, errSyntax
			}
			if p.src[p.pos] == ',' {
				p.pos++
				continue
			}
			if p.src[p.pos] != closing {
				return 0, errSyntax
			}
			p.pos++
			break
		}
	case c == '"':
		end, ok := scanString(p.src, p.pos)
		if !ok {
			return 0, errSyntax
		}
		p.pos = end
	case c == 't' || c == 'f' || c == 'n':
		word := map[byte]string{'t': "true", 'f': "false", 'n': "null"}[c]
		if !bytes.HasPrefix(p.src[p.pos:], []byte(word)) {
			return 0, errSyntax
		}
		p.pos += len(word)
	case c == '-' || c >= '0' && c <= '9':
		end, ok := scanNumber(p.src, p.pos)
		if !ok {
			return 0, errSyntax
		}
		num := p.src[p.pos:end]
		if f, err := strconv.ParseFloat(string(num), 64); err != nil && math.IsInf(f, 0) {
			return 0, fmt.Errorf("number %s overflows a float64 (Infinity)", num)
		}
		p.pos = end
	default:
		return 0, errSyntax
	}
	p.tape.at(at).next = uint32(p.tape.n)
	return at, nil
}

// scanString returns the index after the string literal at i.
func scanString(b []byte, i int) (int, bool) {
	for i++; i < len(b); i++ {
		switch c := b[i]; {
		case c == '"':
			return i + 1, true
		case c < 0x20:
			return 0, false
		case c == '\\':
			i++
			if i >= len(b) {
				return 0, false
			}
			switch b[i] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			case 'u':
				if i+4 >= len(b) {
					return 0, false
				}
				for _, h := range b[i+1 : i+5] {
					if !('0' <= h && h <= '9' || 'a' <= h && h <= 'f' || 'A' <= h && h <= 'F') {
						return 0, false
					}
				}
				i += 4
			default:
				return 0, false
			}
		}
	}
	return 0, false
}

// scanNumber returns the index after the JSON number at i.
func scanNumber(b []byte, i int) (int, bool) {
	digits := func() bool {
		start := i
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
		}
		return i > start
	}
	if b[i] == '-' {
		i++
	}
	if i < len(b) && b[i] == '0' {
		i++
	} else if !digits() {
		return 0, false
	}
	if i < len(b) && b[i] == '.' {
		i++
		if !digits() {
			return 0, false
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		if !digits() {
			return 0, false
		}
	}
	return i, true
}

// emit appends the canonical text of the value at tape index at.
func (p *tapeParser) emit(out []byte, at int) ([]byte, error) {
	e := *p.tape.at(at)
	switch e.kind {
	case '{':
		type member struct {
			key string
			at  int // the key's tape index; the value follows it
		}
		n := 0
		for i := at + 1; i < int(e.next); i = int(p.tape.at(i + 1).next) {
			n++
		}
		members := make([]member, 0, n)
		for i := at + 1; i < int(e.next); i = int(p.tape.at(i + 1).next) {
			members = append(members, member{key: p.decodeString(i), at: i})
		}
		slices.SortFunc(members, func(a, b member) int { return strings.Compare(a.key, b.key) })
		out = append(out, '{')
		for j, m := range members {
			if j > 0 {
				if members[j-1].key == m.key {
					return nil, fmt.Errorf("duplicate object key %s", strconv.Quote(m.key))
				}
				out = append(out, ',')
			}
			out = appendJSONString(out, m.key)
			out = append(out, ':')
			var err error
			if out, err = p.emit(out, m.at+1); err != nil {
				return nil, err
			}
		}
		return append(out, '}'), nil
	case '[':
		out = append(out, '[')
		for i := at + 1; i < int(e.next); i = int(p.tape.at(i).next) {
			if i > at+1 {
				out = append(out, ',')
			}
			var err error
			if out, err = p.emit(out, i); err != nil {
				return nil, err
			}
		}
		return append(out, ']'), nil
	case '"':
		return appendJSONString(out, p.decodeString(at)), nil
	case 't':
		return append(out, "true"...), nil
	case 'f':
		return append(out, "false"...), nil
	case 'n':
		return append(out, "null"...), nil
	}
	end, _ := scanNumber(p.src, int(e.start))
	return append(out, p.src[e.start:end]...), nil
}

// decodeString decodes the (valid) string literal at tape index at.
func (p *tapeParser) decodeString(at int) string {
	start := int(p.tape.at(at).start)
	end, _ := scanString(p.src, start)
	lit := p.src[start:end]
	if bytes.IndexByte(lit, '\\') < 0 {
		return string(lit[1 : len(lit)-1])
	}
	var s string
	_ = json.Unmarshal(lit, &s) // valid, surrogates checked
	return s
}

// jsonStringLen is the length of appendJSONString's output for s.
func jsonStringLen(s string) int {
	n := 2
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			switch {
			case c >= 0x20 && c != '"' && c != '\\':
				n++
			case c == '"', c == '\\', c == '\b', c == '\f', c == '\n', c == '\r', c == '\t':
				n += 2
			default:
				n += 6
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == '\u2028' || r == '\u2029' {
			n += 6
		} else {
			n += size
		}
		i += size
	}
	return n
}

// appendJSONString appends s as encoding/json does without HTML escaping.
func appendJSONString(out []byte, s string) []byte {
	const hex = "0123456789abcdef"
	out = append(out, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			out = append(out, s[start:i]...)
			switch c {
			case '"', '\\':
				out = append(out, '\\', c)
			case '\b':
				out = append(out, '\\', 'b')
			case '\f':
				out = append(out, '\\', 'f')
			case '\n':
				out = append(out, '\\', 'n')
			case '\r':
				out = append(out, '\\', 'r')
			case '\t':
				out = append(out, '\\', 't')
			default:
				out = append(out, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == '\u2028' || r == '\u2029' {
			out = append(out, s[start:i]...)
			out = append(out, '\\', 'u', '2', '0', '2', hex[r&0xF])
			i += size
			start = i
			continue
		}
		i += size
	}
	out = append(out, s[start:]...)
	return append(out, '"')
}

// checkSurrogates rejects \uXXXX escapes that encode a lone UTF-16
// surrogate, which decoders silently turn into U+FFFD. raw is valid UTF-8;
// invalid JSON is left for the decoder to report.
func checkSurrogates[T string | []byte](s T) error {
	inString := false
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !inString {
			if c == '"' {
				inString = true
			}
			continue
		}
		switch c {
		case '"':
			inString = false
		case '\\':
			if i+1 >= len(s) {
				return nil
			}
			if s[i+1] != 'u' {
				i++
				continue
			}
			r, ok := hex4(s, i+2)
			if !ok {
				return nil // the decoder reports it
			}
			i += 5
			switch {
			case utf16.IsSurrogate(r) && r < 0xDC00: // high: a low must follow
				if !(i+2 < len(s) && s[i+1] == '\\' && s[i+2] == 'u') {
					return errors.New(`lone UTF-16 surrogate escape \u` + string(s[i-3:i+1]))
				}
				lo, ok := hex4(s, i+3)
				if !ok || !(lo >= 0xDC00 && lo <= 0xDFFF) {
					return errors.New(`lone UTF-16 surrogate escape \u` + string(s[i-3:i+1]))
				}
				i += 6
			case utf16.IsSurrogate(r):
				return errors.New(`lone UTF-16 surrogate escape \u` + string(s[i-3:i+1]))
			}
		}
	}
	return nil
}

func hex4[T string | []byte](s T, at int) (rune, bool) {
	if at+4 > len(s) {
		return 0, false
	}
	n, err := strconv.ParseUint(string(s[at:at+4]), 16, 32)
	if err != nil {
		return 0, false
	}
	return rune(n), true
}

// encodeCanonical encodes a decodeCanonical value compactly, keys sorted,
// without HTML escaping.
func encodeCanonical(v any) (json.RawMessage, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, errorf(errdefs.ErrInvalidArgument, "encode JSON: %w", err)
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}
