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
//
// A value parsed for rendering lives only while its tool renders: its
// nodes come from the renderer's arena, reused for the next tool, and a
// string without escapes is the schema's own bytes, not a copy (see
// bytesString). Nothing a renderer keeps may point into it; text the
// output needs is copied into the output.
type jvalue struct {
	kind jkind
	b    bool      // jBool
	s    string    // jString: the value; jNumber: the literal text
	arr  []*jvalue // jArray
	keys []string  // jObject, in document order
	vals []*jvalue // jObject, parallel to keys
}

var invalidValue = &jvalue{kind: jInvalid}

// get returns the member key of an object, or nil. The renderers ask a
// schema object for a few keywords each, so looking through its keys
// keeps rendering linear in the schema's size.
func (v *jvalue) get(key string) *jvalue {
	if v == nil || v.kind != jObject {
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

// parseJSON parses data as one JSON value in an arena of its own. It never
// fails: anything that is not JSON yields a jInvalid value.
func parseJSON(data []byte) *jvalue { return new(arena).parse(data) }

// parse parses data as one JSON value, its nodes in a.
func (a *arena) parse(data []byte) *jvalue {
	p := &jparser{data: data, a: a}
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
	a    *arena
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
		return p.node(jString, s), true
	case c == 't':
		v := p.node(jBool, "")
		v.b = true
		return v, p.literal("true")
	case c == 'f':
		return p.node(jBool, ""), p.literal("false")
	case c == 'n':
		return p.node(jNull, ""), p.literal("null")
	case c == '-' || ('0' <= c && c <= '9'):
		s, ok := p.number()
		if !ok {
			return nil, false
		}
		return p.node(jNumber, s), true
	}
	return nil, false
}

// node returns a new value from the arena.
func (p *jparser) node(k jkind, s string) *jvalue {
	v := p.a.vals.one()
	v.kind, v.s = k, s
	return v
}

func (p *jparser) object(depth int) (*jvalue, bool) {
	p.pos++ // {
	a := p.a
	kmark, vmark := len(a.keyStack), len(a.valStack)
	defer func() { a.keyStack, a.valStack = a.keyStack[:kmark], a.valStack[:vmark] }()
	p.ws()
	if p.pos < len(p.data) && p.data[p.pos] == '}' {
		p.pos++
		return p.node(jObject, ""), true
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
		a.keyStack = append(a.keyStack, key)
		a.valStack = append(a.valStack, val)
		p.ws()
		if p.pos >= len(p.data) {
			return nil, false
		}
		switch p.data[p.pos] {
		case ',':
			p.pos++
		case '}':
			p.pos++
			v := p.node(jObject, "")
			v.keys, v.vals = a.members(a.keyStack[kmark:], a.valStack[vmark:])
			return v, true
		default:
			return nil, false
		}
	}
}

// members returns an object's members, gathered on the stacks, as its keys
// and values, each key once: a repeated key keeps its first position and
// its last value.
func (a *arena) members(keys []string, vals []*jvalue) ([]string, []*jvalue) {
	if !a.repeats(keys) { // the common case
		ks, vs := a.strs.take(len(keys)), a.ptrs.take(len(keys))
		copy(ks, keys)
		copy(vs, vals)
		return ks, vs
	}
	var ks []string
	var vs []*jvalue
	pos := make(map[string]int, len(keys))
	for i, k := range keys {
		if at, ok := pos[k]; ok {
			vs[at] = vals[i]
			continue
		}
		pos[k] = len(ks)
		ks = append(ks, k)
		vs = append(vs, vals[i])
	}
	return ks, vs
}

// repeats reports whether a key appears twice among keys.
func (a *arena) repeats(keys []string) bool {
	if len(keys) <= 8 {
		for i := 1; i < len(keys); i++ {
			for _, k := range keys[:i] {
				if k == keys[i] {
					return true
				}
			}
		}
		return false
	}
	seen := a.set()
	defer a.putSet(seen)
	for _, k := range keys {
		if seen[k] {
			return true
		}
		seen[k] = true
	}
	return false
}

func (p *jparser) array(depth int) (*jvalue, bool) {
	p.pos++ // [
	a := p.a
	mark := len(a.valStack)
	defer func() { a.valStack = a.valStack[:mark] }()
	p.ws()
	if p.pos < len(p.data) && p.data[p.pos] == ']' {
		p.pos++
		return p.node(jArray, ""), true
	}
	for {
		p.ws()
		val, ok := p.value(depth + 1)
		if !ok {
			return nil, false
		}
		a.valStack = append(a.valStack, val)
		p.ws()
		if p.pos >= len(p.data) {
			return nil, false
		}
		switch p.data[p.pos] {
		case ',':
			p.pos++
		case ']':
			p.pos++
			v := p.node(jArray, "")
			v.arr = a.ptrs.take(len(a.valStack) - mark)
			copy(v.arr, a.valStack[mark:])
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
	return bytesString(p.data[start:p.pos]), true
}

// string reads a JSON string starting at the opening quote.
func (p *jparser) string() (string, bool) {
	p.pos++ // "
	start := p.pos
	// Fast path: no escapes.
	for p.pos < len(p.data) {
		c := p.data[p.pos]
		if c == '"' {
			s := bytesString(p.data[start:p.pos])
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
	// With escapes: unescaped into the arena's scratch, then copied once.
	b := append(p.a.unescaped[:0], p.data[start:p.pos]...)
	defer func() { p.a.unescaped = b[:0] }()
	for p.pos < len(p.data) {
		c := p.data[p.pos]
		switch {
		case c == '"':
			p.pos++
			return validUTF8(string(b)), true
		case c < 0x20:
			return "", false
		case c != '\\':
			b = append(b, c)
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
			b = append(b, e)
		case 'b':
			b = append(b, '\b')
		case 'f':
			b = append(b, '\f')
		case 'n':
			b = append(b, '\n')
		case 'r':
			b = append(b, '\r')
		case 't':
			b = append(b, '\t')
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
			b = utf8.AppendRune(b, r)
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
