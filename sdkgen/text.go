package sdkgen

import (
	"bytes"
	"strings"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"
)

// printable reports whether r shows as itself, and only as itself, in an
// SDK text: ASCII from space to "~", or a non-ASCII letter, mark, number,
// punctuation or symbol (unicode.IsPrint). Every other character — a
// control, a line or paragraph separator, a space other than U+0020, a
// format character (the bidi embeddings, overrides and isolates
// U+202A–U+202E and U+2066–U+2069, the marks U+200E, U+200F and U+061C,
// zero-width spaces and joiners, the byte order mark, the soft hyphen,
// tag characters), a private-use or unassigned code point — could hide
// text from a reader or reorder what they see, and never reaches an SDK
// text as itself: string literals escape it (quoteTS, quotePy), free text
// is rewritten by plainText.
func printable(r rune) bool {
	return r < utf8.RuneSelf && r >= 0x20 && r != 0x7f || r >= utf8.RuneSelf && unicode.IsPrint(r)
}

// plainText is free text from a tool's author — a description, of the tool
// or of a schema property — as every SDK text shows it (doc comments,
// docstrings, comments and the index): invalid UTF-8 becomes U+FFFD; every
// line terminator either language knows (CR LF, CR, U+2028, U+2029)
// becomes "\n"; "\n" and tab stay; any other control character becomes
// U+FFFD, visible where the text was damaged or hostile; and every other
// character that is not printable (a bidi control, an invisible format
// character, an unusual space) becomes a space, so that neither a model
// nor a person reviewing the prompt reads hidden or reordered text, and
// words stay apart. This is the one place that decides what free text may
// hold: the renderers take free text line by line (nextLine) and each
// character of a line through plainRune, writing it as they go.
func plainText(s string) string {
	var b []byte
	for {
		line, rest, more := nextLine(s)
		b = appendPlain(b, line)
		if !more {
			return string(b)
		}
		b = append(b, '\n')
		s = rest
	}
}

// plainRune is what free text shows for r, a character of a line (see
// plainText); invalid UTF-8 comes as utf8.RuneError, which shows as
// itself.
func plainRune(r rune) rune {
	switch {
	case r == '\t' || printable(r):
		return r
	case unicode.IsControl(r):
		return utf8.RuneError
	}
	return ' '
}

// appendPlain appends line, a line of free text without its terminator,
// as plainText shows it.
func appendPlain(b []byte, line string) []byte {
	for i := 0; i < len(line); {
		c := line[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != 0x7f || c == '\t' {
				b = append(b, c)
			} else {
				b = append(b, "\uFFFD"...)
			}
			i++
			continue
		}
		r, n := utf8.DecodeRuneInString(line[i:])
		b = utf8.AppendRune(b, plainRune(r))
		i += n
	}
	return b
}

// nextLine splits free text at its first line terminator (CR LF, CR, LF,
// U+2028, U+2029): the line before it, the text after it, and whether
// there was one. A terminator is found by its bytes alone: none of them
// can be part of another character, valid or not.
func nextLine(s string) (line, rest string, more bool) {
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '\n':
			return s[:i], s[i+1:], true
		case '\r':
			if i+1 < len(s) && s[i+1] == '\n' {
				return s[:i], s[i+2:], true
			}
			return s[:i], s[i+1:], true
		case 0xE2: // U+2028 and U+2029 are E2 80 A8 and E2 80 A9
			if i+2 < len(s) && s[i+1] == 0x80 && (s[i+2] == 0xA8 || s[i+2] == 0xA9) {
				return s[:i], s[i+3:], true
			}
		}
	}
	return s, "", false
}

// blank reports whether a line of free text shows as nothing but spaces
// and tabs.
func blank(line string) bool {
	for i := 0; i < len(line); {
		c := line[i]
		if c < utf8.RuneSelf {
			if c != ' ' && c != '\t' {
				return false
			}
			i++
			continue
		}
		r, n := utf8.DecodeRuneInString(line[i:])
		if plainRune(r) != ' ' {
			return false
		}
		i += n
	}
	return true
}

// docSpan returns the part of a description that becomes the lines of a
// doc comment, docstring or comment: from its first line that is not
// blank to the end of its last one; and whether that is one line. An
// empty span means no doc.
func docSpan(desc string) (span string, oneLine bool) {
	start, end := -1, -1
	for off := 0; ; {
		line, rest, more := nextLine(desc[off:])
		if !blank(line) {
			if start < 0 {
				start = off
			}
			end = off + len(line)
		}
		if !more {
			break
		}
		off = len(desc) - len(rest)
	}
	if start < 0 {
		return "", false
	}
	span = desc[start:end]
	_, _, more := nextLine(span)
	return span, !more
}

// docLine returns line, a line of a docSpan, as a doc line: its plainText,
// without trailing spaces and tabs. The bytes are the renderer's, valid
// until its next docLine.
func (r *renderer) docLine(line string) []byte {
	b := appendPlain(r.line[:0], line)
	for len(b) > 0 && (b[len(b)-1] == ' ' || b[len(b)-1] == '\t') {
		b = b[:len(b)-1]
	}
	r.line = b
	return b
}

// docLines turns a description into the lines of a doc comment, docstring
// or comment (see docSpan and docLine). An empty result means no doc.
func docLines(s string) []string {
	var r renderer
	var lines []string
	span, _ := docSpan(s)
	for span != "" {
		line, rest, more := nextLine(span)
		lines = append(lines, string(r.docLine(line)))
		if !more {
			break
		}
		span = rest
	}
	return lines
}

// quoteTS writes s as a double-quoted TypeScript string literal. Quotes,
// backslashes and every character that is not printable (controls, line
// and paragraph separators, format characters such as bidi controls) are
// escaped, so the literal never spans lines, never hides text and keeps
// its value exactly (a tool's name must be written as it is); printable
// non-ASCII is kept.
func (w *out) quoteTS(s string) {
	w.grow(len(s) + 2)
	w.byte('"')
	for i := 0; i < len(s); {
		r, n := rune(s[i]), 1
		if r >= utf8.RuneSelf {
			r, n = utf8.DecodeRuneInString(s[i:]) // RuneError for invalid bytes
		}
		i += n
		switch r {
		case '"':
			w.str(`\"`)
		case '\\':
			w.str(`\\`)
		case '\n':
			w.str(`\n`)
		case '\r':
			w.str(`\r`)
		case '\t':
			w.str(`\t`)
		default:
			if printable(r) {
				w.rune(r)
				continue
			}
			if r > 0xFFFF {
				r1, r2 := utf16.EncodeRune(r)
				w.hex(`\u`, r1, 4)
				w.hex(`\u`, r2, 4)
			} else {
				w.hex(`\u`, r, 4)
			}
		}
	}
	w.byte('"')
}

// hex writes prefix and r in digits upper-case hexadecimal digits.
func (w *out) hex(prefix string, r rune, digits int) {
	w.str(prefix)
	for i := digits - 1; i >= 0; i-- {
		w.byte("0123456789ABCDEF"[r>>(4*i)&0xF])
	}
}

// quotePy returns s as a double-quoted Python string literal, escaped like
// quoteTS (with Python's escape forms).
func quotePy(s string) string {
	w := out{b: make([]byte, 0, len(s)+2)}
	w.quotePy(s)
	return string(w.b)
}

// quotePy writes s as quotePy returns it.
func (w *out) quotePy(s string) {
	w.byte('"')
	w.pyEscaped(s)
	w.byte('"')
}

// pyEscaped writes s for the inside of a double-quoted (or
// triple-double-quoted) Python string.
func (w *out) pyEscaped(s string) {
	for i := 0; i < len(s); {
		r, n := rune(s[i]), 1
		if r >= utf8.RuneSelf {
			r, n = utf8.DecodeRuneInString(s[i:])
		}
		i += n
		switch r {
		case '"':
			w.str(`\"`)
		case '\\':
			w.str(`\\`)
		case '\n':
			w.str(`\n`)
		case '\r':
			w.str(`\r`)
		case '\t':
			w.str(`\t`)
		default:
			switch {
			case printable(r):
				w.rune(r)
			case r < 0x100:
				w.lowerHex(`\x`, r, 2)
			case r <= 0xFFFF:
				w.lowerHex(`\u`, r, 4)
			default:
				w.lowerHex(`\U`, r, 8)
			}
		}
	}
}

// lowerHex writes prefix and r in digits lower-case hexadecimal digits.
func (w *out) lowerHex(prefix string, r rune, digits int) {
	w.str(prefix)
	for i := digits - 1; i >= 0; i-- {
		w.byte("0123456789abcdef"[r>>(4*i)&0xF])
	}
}

// isASCIIIdent reports whether s is a non-empty ASCII identifier whose
// first character is a letter or one of firstExtra and whose others are
// letters, digits or one of firstExtra.
func isASCIIIdent(s, extra string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z':
		case '0' <= c && c <= '9' && i > 0:
		case strings.IndexByte(extra, c) >= 0:
		default:
			return false
		}
	}
	return true
}

// camel converts s to an ASCII PascalCase word: every character that is
// not an ASCII letter or digit separates words (and is dropped), the first
// letter of each word is upper-cased, the rest is kept as written.
func camel(s string) string {
	var b strings.Builder
	up := true
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case 'a' <= c && c <= 'z':
			if up {
				c -= 'a' - 'A'
			}
			b.WriteByte(c)
			up = false
		case 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
			b.WriteByte(c)
			up = false
		default:
			up = true
		}
	}
	return b.String()
}

// longestBacktickRun returns the length of the longest run of backticks
// in s, for choosing a Markdown fence that s cannot close.
func longestBacktickRun(s []byte) int {
	best := 0
	for {
		i := bytes.IndexByte(s, '`')
		if i < 0 {
			return best
		}
		s = s[i:]
		run := 0
		for run < len(s) && s[run] == '`' {
			run++
		}
		best = max(best, run)
		s = s[run:]
	}
}

// fenced writes what body writes in a Markdown code block tagged lang, with
// a fence longer than any backtick run inside it.
func (w *out) fenced(lang string, body func()) {
	at := len(w.b)
	w.str("```")
	w.str(lang)
	w.byte('\n')
	from := len(w.b)
	body()
	if w.over {
		return
	}
	w.rest = 64
	n := max(3, longestBacktickRun(w.since(from))+1)
	if n > 3 {
		w.insert(at, strings.Repeat("`", n-3))
	}
	w.grow(n + 1)
	for range n {
		w.byte('`')
	}
	w.byte('\n')
}
