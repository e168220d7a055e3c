package server

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
)

// checkSchema reports why raw is not a JSON Schema, naming the path of
// the first problem; objectOnly refuses a boolean schema at the root (an
// input schema must be an object).
func refCheckSchema(raw json.RawMessage, objectOnly bool) error {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return fmt.Errorf("not JSON: %v", err)
	}
	if _, isBool := v.(bool); isBool && objectOnly {
		return fmt.Errorf("must be a JSON Schema object, not %s", raw)
	}
	return refSchemaNode(v, "", 0)
}

func refSchemaNode(v any, path string, depth int) error {
	at := func(p string) string {
		if p == "" {
			return "the schema"
		}
		return strings.TrimPrefix(p, ".")
	}
	if depth > MaxSchemaDepth {
		return fmt.Errorf("%s: nested deeper than %d levels", at(path), MaxSchemaDepth)
	}
	switch v := v.(type) {
	case bool:
		return nil
	case map[string]any:
		for _, k := range refSortedAnyKeys(v) {
			val, p := v[k], path+"."+k
			switch {
			case k == "type":
				if err := refSchemaType(val); err != nil {
					return fmt.Errorf("%s: %v", at(p), err)
				}
			case schemaKeywords[k]:
				if err := refSchemaNode(val, p, depth+1); err != nil {
					return err
				}
			case k == "items":
				// A schema, or (draft-07) an array of schemas.
				if arr, ok := val.([]any); ok {
					for i, s := range arr {
						if err := refSchemaNode(s, fmt.Sprintf("%s[%d]", p, i), depth+1); err != nil {
							return err
						}
					}
				} else if err := refSchemaNode(val, p, depth+1); err != nil {
					return err
				}
			case schemaMapKeywords[k]:
				m, ok := val.(map[string]any)
				if !ok {
					return fmt.Errorf("%s: must be an object of schemas", at(p))
				}
				for _, name := range refSortedAnyKeys(m) {
					if err := refSchemaNode(m[name], p+"."+name, depth+1); err != nil {
						return err
					}
				}
			case schemaArrayKeywords[k]:
				arr, ok := val.([]any)
				if !ok || len(arr) == 0 {
					return fmt.Errorf("%s: must be a non-empty array of schemas", at(p))
				}
				for i, s := range arr {
					if err := refSchemaNode(s, fmt.Sprintf("%s[%d]", p, i), depth+1); err != nil {
						return err
					}
				}
			case k == "required":
				arr, ok := val.([]any)
				if !ok {
					return fmt.Errorf("%s: must be an array of property names", at(p))
				}
				seen := map[string]bool{}
				for i, s := range arr {
					name, ok := s.(string)
					if !ok {
						return fmt.Errorf("%s[%d]: must be a string", at(p), i)
					}
					if seen[name] {
						return fmt.Errorf("%s: %q is listed twice", at(p), truncateName(name))
					}
					seen[name] = true
				}
			case k == "enum" || k == "examples":
				if _, ok := val.([]any); !ok {
					return fmt.Errorf("%s: must be an array", at(p))
				}
			case k == "dependentRequired":
				m, ok := val.(map[string]any)
				if !ok {
					return fmt.Errorf("%s: must be an object of arrays of property names", at(p))
				}
				for _, name := range refSortedAnyKeys(m) {
					arr, ok := m[name].([]any)
					if !ok {
						return fmt.Errorf("%s.%s: must be an array of property names", at(p), name)
					}
					for i, s := range arr {
						if _, ok := s.(string); !ok {
							return fmt.Errorf("%s.%s[%d]: must be a string", at(p), name, i)
						}
					}
				}
			case k == "dependencies":
				// draft-07: each value is a schema or an array of names.
				m, ok := val.(map[string]any)
				if !ok {
					return fmt.Errorf("%s: must be an object", at(p))
				}
				for _, name := range refSortedAnyKeys(m) {
					if arr, ok := m[name].([]any); ok {
						for i, s := range arr {
							if _, ok := s.(string); !ok {
								return fmt.Errorf("%s.%s[%d]: must be a string", at(p), name, i)
							}
						}
					} else if err := refSchemaNode(m[name], p+"."+name, depth+1); err != nil {
						return err
					}
				}
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
			}
		}
		return nil
	default:
		return fmt.Errorf("%s: a schema must be an object or a boolean, not %s", at(path), refJSONKind(v))
	}
}

func refSchemaType(v any) error {
	known := func(s string) error {
		if !slices.Contains(schemaTypes, s) {
			return fmt.Errorf("%q is not a JSON Schema type (%s)", truncateName(s), strings.Join(schemaTypes, ", "))
		}
		return nil
	}
	switch v := v.(type) {
	case string:
		return known(v)
	case []any:
		if len(v) == 0 {
			return fmt.Errorf("an array of types must not be empty")
		}
		seen := map[string]bool{}
		for _, t := range v {
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
		}
		return nil
	}
	return fmt.Errorf("must be a type name or an array of type names, not %s", refJSONKind(v))
}

func refSortedAnyKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

func refJSONKind(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "a boolean"
	case json.Number:
		return "a number"
	case string:
		return "a string"
	case []any:
		return "an array"
	case map[string]any:
		return "an object"
	}
	return fmt.Sprintf("%T", v)
}
