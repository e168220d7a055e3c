package manifest

import (
	"bytes"
	"io"
	"os/exec"
	"strings"
	"testing"
)

// pattern is an endless reader of a known byte sequence. It has no
// WriteTo, so io.Copy moves it through a buffer and the destination's
// ReadFrom, if the destination has one.
type pattern struct{ off int64 }

func (p *pattern) Read(b []byte) (int, error) {
	for i := range b {
		b[i] = byte((p.off + int64(i)) % 251)
	}
	p.off += int64(len(b))
	return len(b), nil
}

func patternBytes(n int) []byte {
	b := make([]byte, n)
	(&pattern{}).Read(b)
	return b
}

func TestCapWriterHasOnlyWrite(t *testing.T) {
	// The bug this replaces: a writer embedding bytes.Buffer has ReadFrom,
	// and io.Copy (so exec.Cmd) used it, bypassing the capped Write.
	var w any = newCapWriter(10)
	if _, ok := w.(io.ReaderFrom); ok {
		t.Fatal("capWriter has ReadFrom: io.Copy would bypass Write")
	}
	if _, ok := w.(interface{ Len() int }); ok {
		t.Fatal("capWriter looks like it embeds a buffer")
	}
}

func TestCapWriterIOCopy(t *testing.T) {
	const max = 1 << 20
	for _, tc := range []struct {
		name  string
		total int64
		src   func(n int64) io.Reader
	}{
		// Through io.Copy's buffer (the reader has no WriteTo).
		{"buffered", 100_000_000, func(n int64) io.Reader { return io.LimitReader(&pattern{}, n) }},
		// Through the reader's WriteTo: one Write of everything.
		{"WriteTo", 10_000_000, func(n int64) io.Reader { return bytes.NewReader(patternBytes(int(n))) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newCapWriter(max)
			n, err := io.Copy(w, tc.src(tc.total))
			if err != nil || n != tc.total {
				t.Fatalf("copied %d: %v", n, err)
			}
			if w.total != tc.total || !w.truncated() {
				t.Fatalf("counted %d, truncated %v", w.total, w.truncated())
			}
			if len(w.buf) != max || cap(w.buf) > max {
				t.Fatalf("holds len %d cap %d, cap is %d", len(w.buf), cap(w.buf), max)
			}
			if !bytes.Equal(w.buf, patternBytes(max)) {
				t.Fatal("kept bytes are not the first bytes written")
			}
		})
	}
}

func TestCapWriterExecCmd(t *testing.T) {
	// exec.Cmd copies a child's pipe with io.Copy: 100 MB from a real
	// process are counted, drained (the child exits) and not held.
	stdout, stderr := newCapWriter(1<<20), newCapWriter(16<<10)
	cmd := exec.Command("/bin/sh", "-c", "head -c 100000000 /dev/zero; head -c 1000000 /dev/zero >&2")
	cmd.Stdout, cmd.Stderr = stdout, stderr
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		w          *capWriter
		total, max int
	}{{stdout, 100_000_000, 1 << 20}, {stderr, 1_000_000, 16 << 10}} {
		if c.w.total != int64(c.total) || len(c.w.buf) != c.max || cap(c.w.buf) > c.max {
			t.Errorf("counted %d of %d; holds len %d cap %d, cap is %d", c.w.total, c.total, len(c.w.buf), cap(c.w.buf), c.max)
		}
	}
}

func TestCapWriterWrites(t *testing.T) {
	// Writes of every size around the cap: Write always takes everything,
	// keeps exactly the prefix, and never allocates past the cap.
	const max = 1000
	for _, size := range []int{1, 7, 511, 512, 999, 1000, 1001, 4096} {
		w := newCapWriter(max)
		src := patternBytes(3000)
		for off := 0; off < len(src); off += size {
			p := src[off:min(off+size, len(src))]
			if n, err := w.Write(p); n != len(p) || err != nil {
				t.Fatalf("size %d: Write = %d, %v", size, n, err)
			}
			if cap(w.buf) > max || !bytes.Equal(w.buf, src[:min(off+len(p), max)]) {
				t.Fatalf("size %d at %d: len %d cap %d", size, off, len(w.buf), cap(w.buf))
			}
		}
		if w.total != 3000 || !w.truncated() {
			t.Fatalf("size %d: total %d", size, w.total)
		}
	}
	w := newCapWriter(5)
	w.Write([]byte("12345"))
	if w.truncated() || w.result() != "12345" || w.message() != "12345" {
		t.Fatalf("at the cap: %q", w.result())
	}
	w.Write(nil)
	if w.truncated() {
		t.Fatal("an empty write truncated")
	}
}

func TestWholeRunes(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"", ""},
		{"abc", "abc"},
		{"ab\xc3", "ab"},                 // é cut after its first byte
		{"ab\xc3\xa9", "ab\xc3\xa9"},     // é whole
		{"a\xe2\x82", "a"},               // € cut after two bytes
		{"a\xf0\x9f\x98", "a"},           // 😀 cut after three bytes
		{"a\xf0\x9f\x98\x80", "a😀"},      // 😀 whole
		{"a\xff", "a\xff"},               // invalid, not cut: ToValidUTF8 handles it
		{"\x80\x80\x80", "\x80\x80\x80"}, // stray continuation bytes
		{strings.Repeat("é", 3), "ééé"},
	} {
		if got := string(wholeRunes([]byte(tc.in))); got != tc.want {
			t.Errorf("wholeRunes(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestMessage(t *testing.T) {
	w := newCapWriter(8)
	w.Write([]byte("  error: é\xff and more\n"))
	// Kept: "  error:" (8 bytes); 14 more bytes followed.
	if got, want := w.message(), "error:… (14 more bytes cut)"; got != want {
		t.Fatalf("%q, want %q", got, want)
	}
	w = newCapWriter(10)
	w.Write([]byte("  error: é and more\n"))
	// The cap falls inside é: it is cut whole and counted as cut.
	if got, want := w.message(), "error:… (12 more bytes cut)"; got != want {
		t.Fatalf("%q, want %q", got, want)
	}
	w = newCapWriter(100)
	w.Write([]byte("\n  bad \xff input \n"))
	if got, want := w.message(), "bad \uFFFD input"; got != want {
		t.Fatalf("%q, want %q", got, want)
	}
}
