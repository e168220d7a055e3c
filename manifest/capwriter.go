package manifest

import "unicode/utf8"

// capWriter keeps the first max bytes written to it and counts them all.
//
// Its only method is Write: it embeds no buffer and has no ReadFrom, so
// io.Copy — and with it the goroutine exec.Cmd copies a pipe with — cannot
// bypass the cap. Past the cap Write still accepts everything, so the
// writer keeps draining (a tool never blocks on a full pipe), but it
// discards: the writer never holds more than max bytes, capacity included.
//
// A capWriter is not safe for concurrent use; exec.Cmd gives each of
// Stdout and Stderr its own goroutine, and Wait returns after both end.
type capWriter struct {
	max   int
	buf   []byte // len(buf) <= cap(buf) <= max
	total int64  // bytes written, kept or not
}

func newCapWriter(max int) *capWriter { return &capWriter{max: max} }

func (w *capWriter) Write(p []byte) (int, error) {
	w.total += int64(len(p))
	keep := min(len(p), w.max-len(w.buf))
	if keep <= 0 {
		return len(p), nil
	}
	if need := len(w.buf) + keep; need > cap(w.buf) {
		// Grow as append would, but never past max.
		nb := make([]byte, len(w.buf), min(w.max, max(need, 2*cap(w.buf), 512)))
		copy(nb, w.buf)
		w.buf = nb
	}
	w.buf = append(w.buf, p[:keep]...)
	return len(p), nil
}

// truncated reports whether bytes were discarded.
func (w *capWriter) truncated() bool { return w.total > int64(len(w.buf)) }

// wholeRunes drops an incomplete UTF-8 sequence the cap cut off the end
// of b, so a cut never leaves half a character behind.
func wholeRunes(b []byte) []byte {
	for i := 1; i <= utf8.UTFMax-1 && i <= len(b); i++ {
		if tail := b[len(b)-i:]; utf8.RuneStart(tail[0]) {
			if !utf8.FullRune(tail) {
				return b[:len(b)-i]
			}
			return b
		}
	}
	return b
}
