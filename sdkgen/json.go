package sdkgen

import (
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// This file holds a small JSON reader. encoding/json is not used for the
// schemas because it forgets object key order (properties would come out
// sorted instead of as the tool author wrote them) and refuses documents
// nested deeper than 10,000 levels; the renderer must be total over any
// input, so this reader never fails on depth: values nested deeper than
// maxParseDepth are checked for bracket balance without recursion and kept
// only as an opaque marker, which renders as unknown.

// maxParseDepth bounds the recursion of the reader. It is well above the
// JSON depth the renderer ever inspects (about 2*MaxDepth+4), so nothing
// the renderer could use is lost.
const maxParseDepth = 256

type jkind uint8

const (
	jInvalid jkind = iota // not JSON, or nested deeper than maxParseDepth
	jNull
	jBool
	jNumber
	jString
	jArray
	jObject
)

// jvalue is a parsed JSON value. Strings are valid UTF-8 (invalid bytes
// and lone surrogate escapes become U+FFFD, as in encoding/json). Object
// keys are unique: a repeated key keeps its first position and its last
// value, as JavaScript's JSON.parse does.
type jvalue struct {
	kind  jkind
	b     bool      // jBool
	s     string    // jString: the value; jNumber: the literal text
	arr   []*jvalue // jArray
	keys  []string  // jObject, in document order
	vals  []*jvalue // jObject, parallel to keys
	index map[string]int
}

var invalidValue = &jvalue{kind: jInvalid}

// get returns the member key of an object, or nil.
func (v *jvalue) get(key string) *jvalue {
	if v == nil || v.kind != jObject {
		return nil
	}
	if v.index != nil {
		if i, ok := v.index[key]; ok {
			return v.vals[i]
		}
		return nil
	}
	for i, k := range v.keys {
		if k == key {
			return v.vals[i]
		}
	}
	return nil
}

// str returns the string value of v and whether v is a string.
func (v *jvalue) str() (string, bool) {
	if v == nil || v.kind != jString {
		return "", false
	}
	return v.s, true
}

// parseJSON parses data as one JSON value. It never fails: anything that is
// not JSON yields a jInvalid value.
func parseJSON(data []byte) *jvalue {
	p := &jparser{data: data}
	p.ws()
	v, ok := p.value(0)
	if !ok {
		return invalidValue
	}
	p.ws()
	if p.pos != len(p.data) {
		return invalidValue
	}
	return v
}

type jparser struct {
	data []byte
	pos  int
}

func (p *jparser) ws() {
	for p.pos < len(p.data) {
		switch p.data[p.pos] {
		case ' ', '\t', '\n', '\r':
			p.pos++
		default:
			return
		}
	}
}

func (p *jparser) literal(word string) bool {
	if strings.HasPrefix(string(p.data[p.pos:min(len(p.data), p.pos+len(word))]), word) {
		p.pos += len(word)
		return true
	}
	return false
}

func (p *jparser) value(depth int) (*jvalue, bool) {
	if p.pos >= len(p.data) {
		return nil, false
	}
	switch c := p.data[p.pos]; {
	case c == '{' || c == '[':
		if depth >= maxParseDepth {
			if !p.skipNested() {
				return nil, false
			}
			return invalidValue, true
		}
		if c == '{' {
			return p.object(depth)
		}
		return p.array(depth)
	case c == '"':
		s, ok := p.string()
		if !ok {
			return nil, false
		}
		return &jvalue{kind: jString, s: s}, true
	case c == 't':
		return &jvalue{kind: jBool, b: true}, p.literal("true")
	case c == 'f':
		return &jvalue{kind: jBool}, p.literal("false")
	case c == 'n':
		return &jvalue{kind: jNull}, p.literal("null")
	case c == '-' || ('0' <= c && c <= '9'):
		s, ok := p.number()
		if !ok {
			return nil, false
		}
		return &jvalue{kind: jNumber, s: s}, true
	}
	return nil, false
}

func (p *jparser) object(depth int) (*jvalue, bool) {
	p.pos++ // {
	v := &jvalue{kind: jObject}
	p.ws()
	if p.pos < len(p.data) && p.data[p.pos] == '}' {
		p.pos++
		return v, true
	}
	for {
		p.ws()
		if p.pos >= len(p.data) || p.data[p.pos] != '"' {
			return nil, false
		}
		key, ok := p.string()
		if !ok {
			return nil, false
		}
		p.ws()
		if p.pos >= len(p.data) || p.data[p.pos] != ':' {
			return nil, false
		}
		p.pos++
		p.ws()
		val, ok := p.value(depth + 1)
		if !ok {
			return nil, false
		}
		v.set(key, val)
		p.ws()
		if p.pos >= len(p.data) {
			return nil, false
		}
		switch p.data[p.pos] {
		case ',':
			p.pos++
		case '}':
			p.pos++
			return v, true
		default:
			return nil, false
		}
	}
}

// set adds or replaces a member, keeping the first position of a key.
func (v *jvalue) set(key string, val *jvalue) {
	if v.index == nil && len(v.keys) >= 8 {
		v.index = make(map[string]int, 2*len(v.keys))
		for i, k := range v.keys {
			v.index[k] = i
		}
	}
	if v.index != nil {
		if i, ok := v.index[key]; ok {
			v.vals[i] = val
			return
		}
		v.index[key] = len(v.keys)
	} else {
		for i, k := range v.keys {
			if k == key {
				v.vals[i] = val
				return
			}
		}
	}
	v.keys = append(v.keys, key)
	v.vals = append(v.vals, val)
}

func (p *jparser) array(depth int) (*jvalue, bool) {
	p.pos++ // [
	v := &jvalue{kind: jArray}
	p.ws()
	if p.pos < len(p.data) && p.data[p.pos] == ']' {
		p.pos++
		return v, true
	}
	for {
		p.ws()
		val, ok := p.value(depth + 1)
		if !ok {
			return nil, false
		}
		v.arr = append(v.arr, val)
		p.ws()
		if p.pos >= len(p.data) {
			return nil, false
		}
		switch p.data[p.pos] {
		case ',':
			p.pos++
		case ']':
			p.pos++
			return v, true
		default:
			return nil, false
		}
	}
}

// skipNested skips an object or array without recursion, checking that
// brackets match and strings are well formed; other tokens are checked
// only loosely (their characters), which is enough to find the end.
func (p *jparser) skipNested() bool {
	var stack []byte
	for p.pos < len(p.data) {
		switch c := p.data[p.pos]; c {
		case '{', '[':
			stack = append(stack, c)
			p.pos++
		case '}', ']':
			open := byte('{')
			if c == ']' {
				open = '['
			}
			if len(stack) == 0 || stack[len(stack)-1] != open {
				return false
			}
			stack = stack[:len(stack)-1]
			p.pos++
			if len(stack) == 0 {
				return true
			}
		case '"':
			if _, ok := p.string(); !ok {
				return false
			}
		default:
			if !strings.ContainsRune(" \t\r\n,:-+.eEtrufalsn0123456789", rune(c)) {
				return false
			}
			p.pos++
		}
	}
	return false
}

func (p *jparser) number() (string, bool) {
	start := p.pos
	digits := func() int {
		n := 0
		for p.pos < len(p.data) && '0' <= p.data[p.pos] && p.data[p.pos] <= '9' {
			p.pos++
			n++
		}
		return n
	}
	if p.data[p.pos] == '-' {
		p.pos++
	}
	if p.pos < len(p.data) && p.data[p.pos] == '0' {
		p.pos++
	} else if digits() == 0 {
		return "", false
	}
	if p.pos < len(p.data) && p.data[p.pos] == '.' {
		p.pos++
		if digits() == 0 {
			return "", false
		}
	}
	if p.pos < len(p.data) && (p.data[p.pos] == 'e' || p.data[p.pos] == 'E') {
		p.pos++
		if p.pos < len(p.data) && (p.data[p.pos] == '+' || p.data[p.pos] == '-') {
			p.pos++
		}
		if digits() == 0 {
			return "", false
		}
	}
	return string(p.data[start:p.pos]), true
}

// string reads a JSON string starting at the opening quote.
func (p *jparser) string() (string, bool) {
	p.pos++ // "
	start := p.pos
	// Fast path: no escapes.
	for p.pos < len(p.data) {
		c := p.data[p.pos]
		if c == '"' {
			s := string(p.data[start:p.pos])
			p.pos++
			return validUTF8(s), true
		}
		if c == '\\' {
			break
		}
		if c < 0x20 {
			return "", false
		}
		p.pos++
	}
	var b strings.Builder
	b.Write(p.data[start:p.pos])
	for p.pos < len(p.data) {
		c := p.data[p.pos]
		switch {
		case c == '"':
			p.pos++
			return validUTF8(b.String()), true
		case c < 0x20:
			return "", false
		case c != '\\':
			b.WriteByte(c)
			p.pos++
			continue
		}
		p.pos++ // backslash
		if p.pos >= len(p.data) {
			return "", false
		}
		e := p.data[p.pos]
		p.pos++
		switch e {
		case '"', '\\', '/':
			b.WriteByte(e)
		case 'b':
			b.WriteByte('\b')
		case 'f':
			b.WriteByte('\f')
		case 'n':
			b.WriteByte('\n')
		case 'r':
			b.WriteByte('\r')
		case 't':
			b.WriteByte('\t')
		case 'u':
			r, ok := p.hex4()
			if !ok {
				return "", false
			}
			if utf16.IsSurrogate(r) {
				r2 := rune(-1)
				save := p.pos
				if p.pos+1 < len(p.data) && p.data[p.pos] == '\\' && p.data[p.pos+1] == 'u' {
					p.pos += 2
					if r2, ok = p.hex4(); !ok {
						return "", false
					}
				}
				if d := utf16.DecodeRune(r, r2); d != utf8.RuneError {
					r = d
				} else {
					r = utf8.RuneError
					p.pos = save // the second escape stands on its own
				}
			}
			b.WriteRune(r)
		default:
			return "", false
		}
	}
	return "", false
}

func (p *jparser) hex4() (rune, bool) {
	if p.pos+4 > len(p.data) {
		return 0, false
	}
	var r rune
	for _, c := range p.data[p.pos : p.pos+4] {
		switch {
		case '0' <= c && c <= '9':
			r = r<<4 | rune(c-'0')
		case 'a' <= c && c <= 'f':
			r = r<<4 | rune(c-'a'+10)
		case 'A' <= c && c <= 'F':
			r = r<<4 | rune(c-'A'+10)
		default:
			return 0, false
		}
	}
	p.pos += 4
	return r, true
}

// validUTF8 replaces each invalid byte sequence with U+FFFD.
func validUTF8(s string) string {
	if utf8.ValidString(s) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		b.WriteRune(r) // RuneError for invalid bytes
		i += n
	}
	return b.String()
}
