package main

import (
	"strings"
	"unicode/utf8"
)

// neutralize makes program text safe to print on a terminal: a program
// must not be able to retitle the window, clear the screen, move the
// cursor, redraw a line with a carriage return, or reorder what follows
// with a bidirectional override. Line feeds and tabs pass; "\r\n" becomes
// "\n"; every other C0 control, DEL and the C1 controls are written as Go
// escapes (\x1b, \u009b), as are the Unicode bidi and direction marks.
// Invalid UTF-8 becomes U+FFFD. --json output is never neutralized: JSON
// escapes these itself and must stay exact.
func neutralize(s string) string {
	clean := true
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 && c != '\n' && c != '\t' || c == 0x7f || c >= 0x80 {
			clean = false
			break
		}
	}
	if clean {
		return s
	}
	var b strings.Builder
	b.Grow(len(s))
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == '\r' && i+1 < len(s) && s[i+1] == '\n':
			// a CRLF line ending: the \n follows
		case r == utf8.RuneError && size == 1:
			b.WriteRune(utf8.RuneError)
		case r < 0x20 && r != '\n' && r != '\t' || r == 0x7f:
			b.WriteString(`\x`)
			b.WriteByte("0123456789abcdef"[r>>4])
			b.WriteByte("0123456789abcdef"[r&15])
		case r >= 0x80 && r <= 0x9f || isDirectionMark(r):
			b.WriteString(`\u`)
			for shift := 12; shift >= 0; shift -= 4 {
				b.WriteByte("0123456789abcdef"[(r>>shift)&15])
			}
		default:
			b.WriteString(s[i : i+size])
		}
		i += size
	}
	return b.String()
}

// isDirectionMark reports the Unicode characters that change the display
// order of the text around them (Trojan Source, CVE-2021-42574).
func isDirectionMark(r rune) bool {
	switch {
	case r == 0x061c, r == 0x200e, r == 0x200f:
		return true
	case r >= 0x202a && r <= 0x202e:
		return true
	case r >= 0x2066 && r <= 0x2069:
		return true
	}
	return false
}
