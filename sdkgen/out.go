package sdkgen

import (
	"bytes"
	"unicode/utf8"
	"unsafe"
)

// Every SDK text is rendered into one buffer, sized before the rendering
// starts from the tools' bytes (estimate), written once and handed out as
// a string without a copy: a 15 MiB SDK costs about 15 MiB, not the
// intermediate string of every type, comment and tool it used to be built
// from (issue 24 §7: fifteen times its size). Where the text depends on
// what follows (a union drops a member equal to an earlier one; an index
// signature becomes unknown unless every property has its type; a fence
// must be longer than any backtick run inside it), the renderer writes,
// then compares, cuts or inserts in place.

// out is the buffer an SDK text is rendered into.
type out struct {
	b []byte
	// limit, when positive, is the length past which the text is not
	// wanted (RenderOptions.Limit, the prefix included): once the text
	// that will certainly stay passes it, over is set and the renderers
	// stop (see full).
	limit int
	over  bool
	// tentative counts the union members being written that may still be
	// cut as duplicates: while there is one, the end of the buffer is not
	// yet text that stays.
	tentative int
	// rest is how many bytes the renderer expects still to write (the
	// estimate of the tools not written yet), and grows counts the times
	// the buffer grew: an estimate too small is corrected by what is left
	// of it, twice, before the buffer doubles instead.
	rest, grows int
}

// newOut returns a buffer of capacity size.
func newOut(size, limit int) *out {
	if limit > 0 {
		size = min(size, limit+1)
	}
	return &out{b: make([]byte, 0, max(size, 64)), limit: limit}
}

// grow makes room for n more bytes: for what the renderer still expects,
// or by doubling, so that an estimate too small costs a copy or two, never
// one per write.
func (w *out) grow(n int) {
	if len(w.b)+n <= cap(w.b) {
		return
	}
	size := max(2*cap(w.b), len(w.b)+n)
	if w.grows < 4 && w.rest > 0 {
		size = len(w.b) + max(n, w.rest+w.rest/8+1024)
		if w.limit > 0 { // not more than the limit asks for
			size = min(size, max(len(w.b)+n, w.limit+w.limit/8+1024))
		}
	}
	w.grows++
	nb := make([]byte, len(w.b), size)
	copy(nb, w.b)
	w.b = nb
}

func (w *out) str(s string) {
	w.grow(len(s))
	w.b = append(w.b, s...)
}

func (w *out) byte(c byte) {
	w.grow(1)
	w.b = append(w.b, c)
}

func (w *out) bytes(p []byte) {
	w.grow(len(p))
	w.b = append(w.b, p...)
}

func (w *out) rune(r rune) {
	w.grow(4)
	w.b = utf8.AppendRune(w.b, r)
}

// spaces writes n spaces.
func (w *out) spaces(n int) {
	const s = "                                                                "
	for n > 0 {
		k := min(n, len(s))
		w.str(s[:k])
		n -= k
	}
}

// since returns the text written from position at.
func (w *out) since(at int) []byte { return w.b[at:] }

// cut drops the text written from position at.
func (w *out) cut(at int) { w.b = w.b[:at] }

// insert writes s at position at, moving what follows.
func (w *out) insert(at int, s string) {
	w.grow(len(s))
	w.b = w.b[:len(w.b)+len(s)]
	copy(w.b[at+len(s):], w.b[at:len(w.b)-len(s)])
	copy(w.b[at:], s)
}

// full reports whether the text that will stay is already longer than
// the limit, and then marks the buffer over: a renderer asks between
// pieces (tools, properties, union members, comment lines) and stops.
// Text a union may still cut does not count, so over is exact: it is set
// only when the finished text would be longer than the limit.
func (w *out) full() bool {
	if w.over {
		return true
	}
	if w.limit > 0 && w.tentative == 0 && len(w.b) > w.limit {
		w.over = true
	}
	return w.over
}

// String returns the text, sharing the buffer: nothing may be written to
// the buffer after. A buffer much larger than its text (an estimate far
// too large, or the last doubling) is copied to the text's size first, so
// that a long-lived SDK does not keep the slack alive.
func (w *out) String() string {
	b := w.b
	if cap(b)-len(b) > len(b)/4+4096 {
		b = bytes.Clone(b)
	}
	w.b = nil
	if len(b) == 0 {
		return ""
	}
	// The same as strings.Builder.String: b is never written again.
	return unsafe.String(unsafe.SliceData(b), len(b))
}

// bytesString is b as a string without a copy, for text that lives only
// while one tool renders and whose bytes do not change meanwhile (a
// tool's schema is read, never written, by the renderers).
func bytesString(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	return unsafe.String(unsafe.SliceData(b), len(b))
}
