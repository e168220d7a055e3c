package sdkgen

import (
	"fmt"
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
// hold.
func plainText(s string) string {
	s = validUTF8(s)
	s = strings.NewReplacer("\r\n", "\n", "\r", "\n", "\u2028", "\n", "\u2029", "\n").Replace(s)
	return strings.Map(func(r rune) rune {
		switch {
		case r == '\n' || r == '\t' || printable(r):
			return r
		case unicode.IsControl(r):
			return utf8.RuneError
		}
		return ' '
	}, s)
}

// quoteTS returns s as a double-quoted TypeScript string literal. Quotes,
// backslashes and every character that is not printable (controls, line
// and paragraph separators, format characters such as bidi controls) are
// escaped, so the literal never spans lines, never hides text and keeps
// its value exactly (a tool's name must be written as it is); printable
// non-ASCII is kept.
func quoteTS(s string) string {
	var b strings.Builder
	b.Grow(len(s) + 2)
	b.WriteByte('"')
	for _, r := range validUTF8(s) {
		switch r {
		case '"':
			b.WriteString(`\"`)
		case '\\':
			b.WriteString(`\\`)
		case '\n':
			b.WriteString(`\n`)
		case '\r':
			b.WriteString(`\r`)
		case '\t':
			b.WriteString(`\t`)
		default:
			if printable(r) {
				b.WriteRune(r)
				continue
			}
			if r > 0xFFFF {
				r1, r2 := utf16.EncodeRune(r)
				fmt.Fprintf(&b, `\u%04X\u%04X`, r1, r2)
			} else {
				fmt.Fprintf(&b, `\u%04X`, r)
			}
		}
	}
	b.WriteByte('"')
	return b.String()
}

// quotePy returns s as a double-quoted Python string literal, escaped like
// quoteTS (with Python's escape forms).
func quotePy(s string) string {
	var b strings.Builder
	b.Grow(len(s) + 2)
	b.WriteByte('"')
	writePyEscaped(&b, s)
	b.WriteByte('"')
	return b.String()
}

// writePyEscaped writes s for the inside of a double-quoted (or
// triple-double-quoted) Python string.
func writePyEscaped(b *strings.Builder, s string) {
	for _, r := range validUTF8(s) {
		switch r {
		case '"':
			b.WriteString(`\"`)
		case '\\':
			b.WriteString(`\\`)
		case '\n':
			b.WriteString(`\n`)
		case '\r':
			b.WriteString(`\r`)
		case '\t':
			b.WriteString(`\t`)
		default:
			switch {
			case printable(r):
				b.WriteRune(r)
			case r < 0x100:
				fmt.Fprintf(b, `\x%02x`, r)
			case r <= 0xFFFF:
				fmt.Fprintf(b, `\u%04x`, r)
			default:
				fmt.Fprintf(b, `\U%08x`, r)
			}
		}
	}
}

// docLines turns a description into the lines of a doc comment,
// docstring or comment: its plainText, split at line breaks, with trailing
// spaces and leading or trailing blank lines dropped. An empty result
// means no doc.
func docLines(s string) []string {
	lines := strings.Split(plainText(s), "\n")
	for i, l := range lines {
		lines[i] = strings.TrimRight(l, " \t")
	}
	for len(lines) > 0 && lines[0] == "" {
		lines = lines[1:]
	}
	for len(lines) > 0 && lines[len(lines)-1] == "" {
		lines = lines[:len(lines)-1]
	}
	return lines
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
func longestBacktickRun(s string) int {
	best, run := 0, 0
	for i := 0; i < len(s); i++ {
		if s[i] == '`' {
			run++
			best = max(best, run)
		} else {
			run = 0
		}
	}
	return best
}

// fence wraps source in a Markdown code block tagged lang, with a fence
// longer than any backtick run inside it.
func fence(lang, source string) string {
	f := strings.Repeat("`", max(3, longestBacktickRun(source)+1))
	return f + lang + "\n" + source + f + "\n"
}
