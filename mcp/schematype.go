package mcp

import (
	"bytes"
	"encoding/json"
)

// schemaType reads the top level of an input schema: object reports
// whether it is one valid JSON object, and typ is the value of its "type"
// member, nil when it has none. Keys are matched as the go-sdk's AddTool
// matches them, decoding the schema into a map: exactly (escapes decoded),
// the last of repeated keys winning. Nothing below the top level is
// decoded or copied.
func schemaType(schema []byte) (typ json.RawMessage, object bool) {
	if !json.Valid(schema) {
		return nil, false
	}
	i := skipSpace(schema, 0)
	if schema[i] != '{' {
		return nil, false
	}
	i = skipSpace(schema, i+1)
	for schema[i] != '}' {
		end := skipString(schema, i) // the key
		key := schema[i : end+1]
		i = skipSpace(schema, end+1) + 1 // the colon
		i = skipSpace(schema, i)
		from := i
		i = skipValue(schema, i)
		if isTypeKey(key) {
			typ = schema[from:i:i]
		}
		i = skipSpace(schema, i)
		if schema[i] == ',' {
			i = skipSpace(schema, i+1)
		}
	}
	return typ, true
}

// isTypeKey reports whether key, a JSON string with its quotes, is "type".
func isTypeKey(key []byte) bool {
	if bytes.IndexByte(key, '\\') < 0 {
		return string(key) == `"type"`
	}
	var k string
	return json.Unmarshal(key, &k) == nil && k == "type"
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// skipString returns the position of the closing quote of the valid JSON
// string starting at i.
func skipString(b []byte, i int) int {
	for i++; i < len(b); i++ {
		switch b[i] {
		case '\\':
			i++
		case '"':
			return i
		}
	}
	return i
}

// skipValue returns the position just after the valid JSON value starting
// at i.
func skipValue(b []byte, i int) int {
	depth := 0
	for ; i < len(b); i++ {
		switch b[i] {
		case '"':
			i = skipString(b, i)
			if depth == 0 {
				return i + 1
			}
		case '{', '[':
			depth++
		case '}', ']':
			if depth == 0 { // the end of a number or literal
				return i
			}
			depth--
			if depth == 0 {
				return i + 1
			}
		case ',', ' ', '\t', '\n', '\r':
			if depth == 0 {
				return i
			}
		}
	}
	return i
}
