package sdkgen

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// This file holds cheap structural checks of generated source, for the
// golden tests and the fuzzers. They do not replace the real compilers
// (TestGoldenCompile) but catch the ways text generation usually breaks:
// a string or comment that does not end where it should, unbalanced
// brackets, stray characters in code, a block without a body.

// checkPython checks a PythonSource output.
func checkPython(src string) error {
	if !utf8.ValidString(src) {
		return fmt.Errorf("invalid UTF-8")
	}
	if strings.ContainsAny(src, "\x00\r\f\v") {
		return fmt.Errorf("NUL, CR, FF or VT in output")
	}
	if !strings.HasPrefix(src, pyHeader) || !strings.HasSuffix(src, "\n\ntools: Tools\n") {
		return fmt.Errorf("missing header or trailer")
	}
	type logical struct {
		line   int
		indent int
		code   string // the line's code with string contents and comments removed
	}
	var lines []logical
	var stack []byte
	var code strings.Builder
	line, start, indent := 1, 1, 0
	atStart := true // at the start of a logical line, counting indentation
	for i := 0; i < len(src); {
		c := src[i]
		if atStart {
			switch c {
			case ' ':
				indent++
				i++
				continue
			case '\n':
				line++
				indent = 0
				i++
				continue
			case '#':
				j := strings.IndexByte(src[i:], '\n')
				if j < 0 {
					return fmt.Errorf("line %d: unterminated last line", line)
				}
				i += j
				continue
			case '\t':
				return fmt.Errorf("line %d: tab in indentation", line)
			}
			atStart, start = false, line
			code.Reset()
		}
		switch {
		case c == '\n':
			line++
			i++
			if len(stack) == 0 {
				lines = append(lines, logical{start, indent, strings.TrimSpace(code.String())})
				atStart, indent = true, 0
			} else {
				code.WriteByte(' ')
			}
		case c == '#':
			j := strings.IndexByte(src[i:], '\n')
			if j < 0 {
				return fmt.Errorf("line %d: unterminated last line", line)
			}
			i += j
		case strings.HasPrefix(src[i:], `"""`):
			i += 3
			for {
				if i >= len(src) {
					return fmt.Errorf("line %d: unterminated triple-quoted string", start)
				}
				if src[i] == '\\' {
					if i+1 < len(src) && src[i+1] == '\n' {
						return fmt.Errorf("line %d: backslash-newline in string", line)
					}
					i += 2
					continue
				}
				if strings.HasPrefix(src[i:], `"""`) {
					i += 3
					break
				}
				if src[i] == '\n' {
					line++
				} else if src[i] == '\t' {
					return fmt.Errorf("line %d: raw tab in string", line)
				}
				i++
			}
			code.WriteString(`"""S"""`)
		case c == '"':
			i++
			for {
				if i >= len(src) || src[i] == '\n' {
					return fmt.Errorf("line %d: raw newline in string literal", line)
				}
				if src[i] == '\\' {
					i += 2
					continue
				}
				if src[i] == '"' {
					i++
					break
				}
				if src[i] == '\t' {
					return fmt.Errorf("line %d: raw tab in string", line)
				}
				i++
			}
			code.WriteString(`"S"`)
		case c == '(' || c == '[' || c == '{':
			stack = append(stack, c)
			if len(stack) >= 200 {
				return fmt.Errorf("line %d: %d open brackets", line, len(stack))
			}
			code.WriteByte(c)
			i++
		case c == ')' || c == ']' || c == '}':
			open := map[byte]byte{')': '(', ']': '[', '}': '{'}[c]
			if len(stack) == 0 || stack[len(stack)-1] != open {
				return fmt.Errorf("line %d: unbalanced %q", line, c)
			}
			stack = stack[:len(stack)-1]
			code.WriteByte(c)
			i++
		case c >= 0x20 && c < 0x7f:
			code.WriteByte(c)
			i++
		default:
			return fmt.Errorf("line %d: byte %#x in code", line, c)
		}
	}
	if len(stack) != 0 || !atStart {
		return fmt.Errorf("unterminated logical line at end")
	}
	for k, l := range lines {
		if l.indent%4 != 0 {
			return fmt.Errorf("line %d: indentation %d", l.line, l.indent)
		}
		opens := strings.HasSuffix(l.code, ":")
		var next *logical
		if k+1 < len(lines) {
			next = &lines[k+1]
		}
		switch {
		case opens && (next == nil || next.indent != l.indent+4):
			return fmt.Errorf("line %d: block without a body", l.line)
		case !opens && next != nil && next.indent > l.indent:
			return fmt.Errorf("line %d: unexpected indent", next.line)
		}
		if strings.HasPrefix(l.code, "async def ") && next != nil &&
			next.code != `"""S"""` && next.code != "..." {
			return fmt.Errorf("line %d: method body does not start with its docstring", next.line)
		}
	}
	return nil
}

// checkTS checks a TypeScriptSource output.
func checkTS(src string) error {
	if !utf8.ValidString(src) {
		return fmt.Errorf("invalid UTF-8")
	}
	if strings.ContainsAny(src, "\x00\r\u2028\u2029") {
		return fmt.Errorf("NUL, CR or a line separator in output")
	}
	if !strings.HasPrefix(src, "declare const tools: {") || !strings.HasSuffix(src, "};\n") {
		return fmt.Errorf("missing header or trailer")
	}
	var stack []byte
	line := 1
	for i := 0; i < len(src); {
		c := src[i]
		switch {
		case c == '\n':
			line++
			i++
		case strings.HasPrefix(src[i:], "/**"):
			j := strings.Index(src[i:], "*/")
			if j < 0 {
				return fmt.Errorf("line %d: unterminated comment", line)
			}
			body := src[i+3 : i+j]
			if i+j+2 >= len(src) || src[i+j+2] != '\n' {
				return fmt.Errorf("line %d: comment closed early", line)
			}
			for _, l := range strings.Split(body, "\n") {
				l = strings.TrimLeft(l, " ")
				l = strings.TrimPrefix(l, "*")
				if strings.HasPrefix(strings.TrimLeft(l, " \t"), "@") {
					return fmt.Errorf("line %d: comment line starts with @", line)
				}
			}
			line += strings.Count(body, "\n")
			i += j + 2
		case c == '/':
			return fmt.Errorf("line %d: stray /", line)
		case c == '"':
			i++
			for {
				if i >= len(src) || src[i] == '\n' {
					return fmt.Errorf("line %d: raw newline in string literal", line)
				}
				if src[i] == '\\' {
					i += 2
					continue
				}
				if src[i] == '"' {
					i++
					break
				}
				if src[i] < 0x20 {
					return fmt.Errorf("line %d: control character in string", line)
				}
				i++
			}
		case c == '(' || c == '[' || c == '{':
			stack = append(stack, c)
			i++
		case c == ')' || c == ']' || c == '}':
			open := map[byte]byte{')': '(', ']': '[', '}': '{'}[c]
			if len(stack) == 0 || stack[len(stack)-1] != open {
				return fmt.Errorf("line %d: unbalanced %q", line, c)
			}
			stack = stack[:len(stack)-1]
			i++
		case c >= 0x20 && c < 0x7f:
			i++
		default:
			return fmt.Errorf("line %d: byte %#x in code", line, c)
		}
	}
	if len(stack) != 0 {
		return fmt.Errorf("unbalanced brackets at end")
	}
	return nil
}
