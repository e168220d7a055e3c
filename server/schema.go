package server

// A structural check that a client-supplied schema is JSON Schema: every
// keyword the SDK renderer or a validator would read has the type the
// specification gives it. Unknown keywords are allowed, as the
// specification allows them. The check streams the schema's tokens: it
// holds the path it is at, never a tree of the schema (Go values of a
// schema of many small properties cost some thirty times its text, and a
// start frame's schemas are checked before its run is admitted).

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
)

// MaxSchemaDepth bounds the nesting of a client-supplied schema.
const MaxSchemaDepth = 64

var schemaTypes = []string{"array", "boolean", "integer", "null", "number", "object", "string"}

// Keyword classes (draft 2020-12, plus draft-07's forms of items,
// definitions and dependencies).
var (
	schemaKeywords      = set("additionalProperties", "additionalItems", "unevaluatedProperties", "unevaluatedItems", "contains", "propertyNames", "not", "if", "then", "else", "contentSchema")
	schemaMapKeywords   = set("properties", "patternProperties", "$defs", "definitions", "dependentSchemas")
	schemaArrayKeywords = set("allOf", "anyOf", "oneOf", "prefixItems")
	stringKeywords      = set("title", "description", "$comment", "$id", "$schema", "$ref", "$anchor", "$dynamicRef", "$dynamicAnchor", "pattern", "format", "contentMediaType", "contentEncoding")
	countKeywords       = set("minLength", "maxLength", "minItems", "maxItems", "minProperties", "maxProperties", "minContains", "maxContains")
	numberKeywords      = set("minimum", "maximum", "multipleOf")
	boolKeywords        = set("uniqueItems", "readOnly", "writeOnly", "deprecated")
)

func set(keys ...string) map[string]bool {
	m := make(map[string]bool, len(keys))
	for _, k := range keys {
		m[k] = true
	}
	return m
}

// checkSchema reports why raw is not a JSON Schema, naming the path of
// the first problem (in the order of the text); objectOnly refuses a
// boolean schema at the root (an input schema must be an object).
func checkSchema(raw json.RawMessage, objectOnly bool) error {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	w := &schemaWalker{dec: dec}
	tok, err := w.next()
	if err != nil {
		return fmt.Errorf("not JSON: %v", err)
	}
	if _, isBool := tok.(bool); isBool && objectOnly {
		return fmt.Errorf("must be a JSON Schema object, not %s", raw)
	}
	err = w.schema(tok, "", 0)
	if w.err != nil {
		return fmt.Errorf("not JSON: %v", w.err)
	}
	return err
}

// schemaWalker reads a schema's tokens; err is the decoder's, which
// ends the walk.
type schemaWalker struct {
	dec *json.Decoder
	err error
}

// errNotJSON stops a walk whose text is not JSON (w.err says why).
var errNotJSON = errors.New("not JSON")

func (w *schemaWalker) next() (json.Token, error) {
	tok, err := w.dec.Token()
	if err != nil {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		w.err = err
		return nil, errNotJSON
	}
	return tok, nil
}

// skip reads past the rest of the value tok begins.
func (w *schemaWalker) skip(tok json.Token) error {
	for depth := 0; ; {
		if d, ok := tok.(json.Delim); ok {
			if d == '{' || d == '[' {
				depth++
			} else {
				depth--
			}
		}
		if depth == 0 {
			return nil
		}
		var err error
		if tok, err = w.next(); err != nil {
			return err
		}
	}
}

// each calls f for every element of the array tok opens, with its index
// and first token; tok must open an array.
func (w *schemaWalker) each(f func(i int, tok json.Token) error) error {
	for i := 0; ; i++ {
		tok, err := w.next()
		if err != nil {
			return err
		}
		if tok == json.Delim(']') {
			return nil
		}
		if err := f(i, tok); err != nil {
			return err
		}
	}
}

// members calls f for every member of the object tok opens, with its
// key and its value's first token.
func (w *schemaWalker) members(f func(k string, tok json.Token) error) error {
	for {
		tok, err := w.next()
		if err != nil {
			return err
		}
		if tok == json.Delim('}') {
			return nil
		}
		k, _ := tok.(string)
		if tok, err = w.next(); err != nil {
			return err
		}
		if err := f(k, tok); err != nil {
			return err
		}
	}
}

// strings checks that the array tok opens holds strings only, each once
// when unique: what says what at p.
func (w *schemaWalker) strings(p, what string, unique bool) error {
	seen := map[string]bool{}
	return w.each(func(i int, tok json.Token) error {
		name, ok := tok.(string)
		if !ok {
			return fmt.Errorf("%s[%d]: must be a string", p, i)
		}
		if unique && seen[name] {
			return fmt.Errorf("%s: %q is listed twice", what, truncateName(name))
		}
		seen[name] = true
		return nil
	})
}

func (w *schemaWalker) schema(tok json.Token, path string, depth int) error {
	at := func(p string) string {
		if p == "" {
			return "the schema"
		}
		return strings.TrimPrefix(p, ".")
	}
	if depth > MaxSchemaDepth {
		return fmt.Errorf("%s: nested deeper than %d levels", at(path), MaxSchemaDepth)
	}
	if _, ok := tok.(bool); ok {
		return nil
	}
	if tok != json.Delim('{') {
		return fmt.Errorf("%s: a schema must be an object or a boolean, not %s", at(path), tokenKind(tok))
	}
	return w.members(func(k string, val json.Token) error {
		p := path + "." + k
		switch {
		case k == "type":
			if err := w.schemaType(val); err != nil {
				if errors.Is(err, errNotJSON) {
					return err
				}
				return fmt.Errorf("%s: %v", at(p), err)
			}
		case schemaKeywords[k]:
			return w.schema(val, p, depth+1)
		case k == "items":
			// A schema, or (draft-07) an array of schemas.
			if val == json.Delim('[') {
				return w.each(func(i int, tok json.Token) error { return w.schema(tok, fmt.Sprintf("%s[%d]", p, i), depth+1) })
			}
			return w.schema(val, p, depth+1)
		case schemaMapKeywords[k]:
			if val != json.Delim('{') {
				return fmt.Errorf("%s: must be an object of schemas", at(p))
			}
			return w.members(func(name string, tok json.Token) error { return w.schema(tok, p+"."+name, depth+1) })
		case schemaArrayKeywords[k]:
			if val != json.Delim('[') {
				return fmt.Errorf("%s: must be a non-empty array of schemas", at(p))
			}
			n := 0
			if err := w.each(func(i int, tok json.Token) error { n++; return w.schema(tok, fmt.Sprintf("%s[%d]", p, i), depth+1) }); err != nil {
				return err
			}
			if n == 0 {
				return fmt.Errorf("%s: must be a non-empty array of schemas", at(p))
			}
		case k == "required":
			if val != json.Delim('[') {
				return fmt.Errorf("%s: must be an array of property names", at(p))
			}
			return w.strings(at(p), at(p), true)
		case k == "enum" || k == "examples":
			if val != json.Delim('[') {
				return fmt.Errorf("%s: must be an array", at(p))
			}
			return w.skip(val)
		case k == "dependentRequired":
			if val != json.Delim('{') {
				return fmt.Errorf("%s: must be an object of arrays of property names", at(p))
			}
			return w.members(func(name string, tok json.Token) error {
				if tok != json.Delim('[') {
					return fmt.Errorf("%s.%s: must be an array of property names", at(p), name)
				}
				return w.strings(at(p)+"."+name, "", false)
			})
		case k == "dependencies":
			// draft-07: each value is a schema or an array of names.
			if val != json.Delim('{') {
				return fmt.Errorf("%s: must be an object", at(p))
			}
			return w.members(func(name string, tok json.Token) error {
				if tok == json.Delim('[') {
					return w.strings(at(p)+"."+name, "", false)
				}
				return w.schema(tok, p+"."+name, depth+1)
			})
		case stringKeywords[k]:
			if _, ok := val.(string); !ok {
				return fmt.Errorf("%s: must be a string", at(p))
			}
		case countKeywords[k]:
			n, ok := val.(json.Number)
			if i, err := n.Int64(); !ok || err != nil || i < 0 {
				return fmt.Errorf("%s: must be a non-negative integer", at(p))
			}
		case numberKeywords[k]:
			n, ok := val.(json.Number)
			f, err := n.Float64()
			if !ok || err != nil {
				return fmt.Errorf("%s: must be a number", at(p))
			}
			if k == "multipleOf" && f <= 0 {
				return fmt.Errorf("%s: must be greater than 0", at(p))
			}
		case k == "exclusiveMinimum" || k == "exclusiveMaximum":
			// A number (draft 6 on) or a boolean (draft 4).
			switch val.(type) {
			case json.Number, bool:
			default:
				return fmt.Errorf("%s: must be a number", at(p))
			}
		case boolKeywords[k]:
			if _, ok := val.(bool); !ok {
				return fmt.Errorf("%s: must be true or false", at(p))
			}
		default:
			return w.skip(val)
		}
		return nil
	})
}

// schemaType checks the value of "type", which tok begins.
func (w *schemaWalker) schemaType(tok json.Token) error {
	known := func(s string) error {
		if !slices.Contains(schemaTypes, s) {
			return fmt.Errorf("%q is not a JSON Schema type (%s)", truncateName(s), strings.Join(schemaTypes, ", "))
		}
		return nil
	}
	switch tok := tok.(type) {
	case string:
		return known(tok)
	case json.Delim:
		if tok != '[' {
			break
		}
		seen := map[string]bool{}
		n := 0
		err := w.each(func(_ int, t json.Token) error {
			n++
			s, ok := t.(string)
			if !ok {
				return fmt.Errorf("must be a type name or an array of type names")
			}
			if err := known(s); err != nil {
				return err
			}
			if seen[s] {
				return fmt.Errorf("%q is listed twice", s)
			}
			seen[s] = true
			return nil
		})
		if err == nil && n == 0 {
			err = fmt.Errorf("an array of types must not be empty")
		}
		return err
	}
	return fmt.Errorf("must be a type name or an array of type names, not %s", tokenKind(tok))
}

// tokenKind names the kind of the value a token begins.
func tokenKind(tok json.Token) string {
	switch tok := tok.(type) {
	case nil:
		return "null"
	case bool:
		return "a boolean"
	case json.Number:
		return "a number"
	case string:
		return "a string"
	case json.Delim:
		if tok == '[' {
			return "an array"
		}
		return "an object"
	}
	return fmt.Sprintf("%T", tok)
}
