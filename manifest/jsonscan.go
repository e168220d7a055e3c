package manifest

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// Scanners over raw JSON that build no Go values: what an MCP server sends
// is measured and split with these before anything is decoded, so a
// message's cost to the host is known (and refused) while it is still
// bytes. Every function here except jsonValid expects JSON that json.Valid
// accepts (or bytes the stream reader has already matched up), and walks
// it without recursion, or with recursion bounded by a depth it checks
// first.

// Bounds on one schema a server lists (an input or output schema, or
// annotations), checked on its bytes before anything is built from it: a
// schema past one fails the listing naming the server, the tool and the
// bound.
const (
	// MaxSchemaDepth bounds the JSON nesting of one schema (objects and
	// arrays, the schema's own braces included). The SDK renderers read
	// no deeper than about 70 levels.
	MaxSchemaDepth = 128
	// MaxSchemaValues bounds the JSON values (objects, arrays, strings,
	// numbers, literals) of one schema.
	MaxSchemaValues = 100_000
	// MaxSchemaEnum bounds the values of one "enum".
	MaxSchemaEnum = 10_000
	// MaxSchemaUnion bounds the members of one "anyOf", "oneOf" or
	// "allOf" and the types of one "type" array.
	MaxSchemaUnion = 1_000
)

// Bounds on one message from a server that is not a tool list (a call's
// result, a notification, a request), checked on its bytes before it is
// decoded.
const (
	// MaxServerResultBytes bounds one such message: a program cannot
	// receive more than a 4 MiB frame anyway.
	MaxServerResultBytes = 4 << 20
	// MaxServerResultValues bounds its JSON values: decoded, each costs
	// the host tens of bytes, whatever its size on the wire.
	MaxServerResultValues = 100_000
	// MaxServerResultDepth bounds its JSON nesting.
	MaxServerResultDepth = 128
)

// skipSpace returns the index of the first byte at or after i that is not
// JSON whitespace.
func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// stringEnd returns the index just past the string whose opening quote is
// at b[i].
func stringEnd(b []byte, i int) int {
	for i++; i < len(b); i++ {
		switch b[i] {
		case '\\':
			i++
		case '"':
			return i + 1
		}
	}
	return len(b)
}

// valueEnd returns the index just past the value that starts at b[i].
func valueEnd(b []byte, i int) int {
	switch b[i] {
	case '"':
		return stringEnd(b, i)
	case '{', '[':
		depth := 0
		for ; i < len(b); i++ {
			switch b[i] {
			case '"':
				i = stringEnd(b, i) - 1
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return i + 1
				}
			}
		}
		return len(b)
	}
	for i < len(b) {
		switch b[i] {
		case ',', '}', ']', ' ', '\t', '\n', '\r':
			return i
		}
		i++
	}
	return i
}

// eachMember calls fn with each member of the object b: its key as it is
// written (without the quotes, escapes kept) and its value. It returns
// false, calling nothing, when b is not an object; fn returning an error
// stops it with that error.
func eachMember(b []byte, fn func(key, val []byte) error) (bool, error) {
	i := skipSpace(b, 0)
	if i >= len(b) || b[i] != '{' {
		return false, nil
	}
	for i = skipSpace(b, i+1); i < len(b) && b[i] != '}'; {
		kEnd := stringEnd(b, i)
		key := b[i+1 : kEnd-1]
		v := skipSpace(b, skipSpace(b, kEnd)+1) // past the colon
		vEnd := valueEnd(b, v)
		if err := fn(key, b[v:vEnd]); err != nil {
			return true, err
		}
		i = skipSpace(b, vEnd)
		if i < len(b) && b[i] == ',' {
			i = skipSpace(b, i+1)
		}
	}
	return true, nil
}

// eachElement calls fn with each element of the array b. It returns
// false, calling nothing, when b is not an array.
func eachElement(b []byte, fn func(val []byte) error) (bool, error) {
	i := skipSpace(b, 0)
	if i >= len(b) || b[i] != '[' {
		return false, nil
	}
	for i = skipSpace(b, i+1); i < len(b) && b[i] != ']'; {
		end := valueEnd(b, i)
		if err := fn(b[i:end]); err != nil {
			return true, err
		}
		i = skipSpace(b, end)
		if i < len(b) && b[i] == ',' {
			i = skipSpace(b, i+1)
		}
	}
	return true, nil
}

// jsonString decodes the JSON string b; ok is false when b is not one.
func jsonString(b []byte) (s string, ok bool) {
	if len(b) < 2 || b[0] != '"' {
		return "", false
	}
	if inner := b[1 : len(b)-1]; bytes.IndexByte(inner, '\\') < 0 {
		return string(inner), true
	}
	return s, json.Unmarshal(b, &s) == nil
}

// Keys that hold arrays checkSchema counts.
const (
	keyOther uint8 = iota
	keyEnum
	keyUnion // anyOf, oneOf, allOf, type
)

func keyKind(k []byte) uint8 {
	switch string(k) { // no allocation: the conversion only compares
	case "enum":
		return keyEnum
	case "anyOf", "oneOf", "allOf", "type":
		return keyUnion
	}
	return keyOther
}

// jsonStringIs reports whether the JSON string b is s, without decoding b
// when it has no escapes.
func jsonStringIs(b []byte, s string) bool {
	if len(b) >= 2 && b[0] == '"' && bytes.IndexByte(b, '\\') < 0 {
		return string(b[1:len(b)-1]) == s
	}
	d, ok := jsonString(b)
	return ok && d == s
}

// checkSchema checks one schema (or annotations) against the schema
// bounds, in one pass over its bytes. b is valid JSON.
func checkSchema(b []byte) error {
	type frame struct {
		obj  bool
		key  uint8 // obj: the current member's key; array: the key holding it
		name []byte
		n    int
	}
	var stack []frame
	values := 0
	for i := 0; i < len(b); {
		c := b[i]
		top := len(stack) - 1
		switch c {
		case ' ', '\t', '\n', '\r', ',', ':':
			i++
			continue
		case '}', ']':
			stack = stack[:top]
			i++
			continue
		case '"':
			if top >= 0 && stack[top].obj && (i == 0 || b[skipBack(b, i)] != ':') {
				end := stringEnd(b, i)
				stack[top].key, stack[top].name = keyKind(b[i+1:end-1]), b[i+1:end-1]
				i = end
				continue
			}
		}
		values++
		if values > MaxSchemaValues {
			return fmt.Errorf("it has more than %d JSON values (MaxSchemaValues)", MaxSchemaValues)
		}
		if top >= 0 && !stack[top].obj {
			stack[top].n++
			switch f := stack[top]; {
			case f.key == keyEnum && f.n > MaxSchemaEnum:
				return fmt.Errorf("an enum has more than %d values (MaxSchemaEnum)", MaxSchemaEnum)
			case f.key == keyUnion && f.n > MaxSchemaUnion:
				return fmt.Errorf("a %q has more than %d members (MaxSchemaUnion)", f.name, MaxSchemaUnion)
			}
		}
		switch c {
		case '{', '[':
			if len(stack) == MaxSchemaDepth {
				return fmt.Errorf("it is nested deeper than %d levels (MaxSchemaDepth)", MaxSchemaDepth)
			}
			f := frame{obj: c == '{'}
			if !f.obj && top >= 0 && stack[top].obj {
				f.key, f.name = stack[top].key, stack[top].name
			}
			stack = append(stack, f)
			i++
		default:
			i = valueEnd(b, i)
		}
	}
	return nil
}

// skipBack returns the index of the last byte before i that is not JSON
// whitespace (or 0).
func skipBack(b []byte, i int) int {
	for i--; i > 0 && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r'); i-- {
	}
	return max(i, 0)
}

// jsonStats returns the nesting depth and the number of values of the
// JSON b, in one pass; it stops counting past the limits.
func jsonStats(b []byte, maxDepth, maxValues int) (depth, values int) {
	d := 0
	for i := 0; i < len(b) && depth <= maxDepth && values <= maxValues; {
		switch c := b[i]; c {
		case ' ', '\t', '\n', '\r', ',', ':':
			i++
		case '}', ']':
			d--
			i++
		case '{', '[':
			values++
			d++
			depth = max(depth, d)
			i++
		case '"':
			end := stringEnd(b, i)
			if j := skipSpace(b, end); j >= len(b) || b[j] != ':' { // not a key
				values++
			}
			i = end
		default:
			values++
			i = valueEnd(b, i)
		}
	}
	return depth, values
}
