package sdkgen

import (
	"encoding/json"
	"math/rand"
	"strings"
	"testing"
)

// genPool holds the names, keys and texts random schemas draw from: the
// adversarial cases of the golden fixtures and a few plain ones.
var genPool = []string{
	"a", "b", "path", "items", "__proto__", "constructor", "toString", "delete", "class", "my-key",
	"a.b", "with space", `quote"d`, `back\slash`, "new\nline", "*/", "/*", "@param", "日本語", "café",
	"", "1", "0x1", "None", "def", "str", "list", "Any", "Literal", "Union", "self", "__private", "__dunder__",
	"_ok", "Tools", "ToolCallError", "run_code", "tab\there", "\u2028", "nul\x00", "bad\xffutf8",
	"```", `"""`, `ends with "`, "emoji😀", "\u202eevil", strings.Repeat("long", 40),
	"type", "match", "case", "_", "__total__", "__annotations__", "__required_keys__", "__class__",
}

func genString(r *rand.Rand) string {
	s := genPool[r.Intn(len(genPool))]
	if r.Intn(4) == 0 {
		s += genPool[r.Intn(len(genPool))]
	}
	return s
}

// genSchema returns a random JSON-able schema; depth bounds the nesting
// (a rare chain goes far past MaxDepth).
func genSchema(r *rand.Rand, depth int) any {
	if depth <= 0 {
		return map[string]any{"type": []string{"string", "number", "integer", "boolean", "null"}[r.Intn(5)]}
	}
	sub := func() any { return genSchema(r, depth-1-r.Intn(2)) }
	switch r.Intn(16) {
	case 0:
		return map[string]any{"type": []string{"string", "number", "integer", "boolean", "null", "foo"}[r.Intn(6)]}
	case 1:
		return map[string]any{"type": []any{"string", "null", "array", "object", 5}[:1+r.Intn(4)], "items": sub(),
			"properties": map[string]any{genString(r): sub()}}
	case 2:
		vals := []any{genString(r), 1, -2.5, 1e300, true, false, nil, genString(r)}
		if r.Intn(5) == 0 {
			vals = append(vals, map[string]any{"x": 1})
		}
		return map[string]any{"enum": vals[:r.Intn(len(vals)+1)]}
	case 3:
		return map[string]any{"const": []any{genString(r), 42, 0.5, true, nil, []any{1}}[r.Intn(6)]}
	case 4:
		return map[string]any{"type": "array", "items": sub()}
	case 5:
		return map[string]any{"type": "array", "items": []any{sub(), sub()}}
	case 6, 7, 8:
		props := map[string]any{}
		var req []any
		for range r.Intn(6) {
			k := genString(r)
			s := sub()
			if m, ok := s.(map[string]any); ok && r.Intn(2) == 0 {
				m["description"] = genString(r)
			}
			props[k] = s
			if r.Intn(2) == 0 {
				req = append(req, k)
			}
		}
		if r.Intn(4) == 0 {
			req = append(req, genString(r), 7)
		}
		o := map[string]any{"type": "object", "properties": props, "required": req}
		switch r.Intn(6) {
		case 0:
			o["additionalProperties"] = false
		case 1:
			o["additionalProperties"] = true
		case 2:
			o["additionalProperties"] = sub()
		case 3:
			o["patternProperties"] = map[string]any{"^x": sub()}
		}
		return o
	case 9:
		return map[string]any{"type": "object", "additionalProperties": sub()}
	case 10:
		alts := make([]any, 1+r.Intn(4))
		for i := range alts {
			alts[i] = sub()
		}
		return map[string]any{[]string{"anyOf", "oneOf"}[r.Intn(2)]: alts}
	case 11:
		return []any{true, false, "string", 5, nil, []any{}, map[string]any{"$ref": "#/x"}}[r.Intn(7)]
	case 12:
		return map[string]any{"type": 5, "properties": 1, "required": "x", "items": "y", "enum": 3}
	case 13:
		if r.Intn(8) == 0 { // a chain far deeper than MaxDepth
			var s any = map[string]any{"type": "string"}
			for range 40 + r.Intn(40) {
				if r.Intn(2) == 0 {
					s = map[string]any{"type": "array", "items": s}
				} else {
					s = map[string]any{"type": "object", "properties": map[string]any{genString(r): s}}
				}
			}
			return s
		}
		return map[string]any{}
	default:
		return map[string]any{"type": "string", "description": genString(r)}
	}
}

// genTools returns a random tool set.
func genTools(r *rand.Rand) []Tool {
	tools := make([]Tool, 1+r.Intn(6))
	for i := range tools {
		b, err := json.Marshal(genSchema(r, 1+r.Intn(6)))
		if err != nil {
			panic(err)
		}
		tools[i] = Tool{Name: genString(r), Description: genString(r) + "\n" + genString(r), InputSchema: b}
		if r.Intn(3) == 0 { // a structured result
			out, err := json.Marshal(genSchema(r, 1+r.Intn(6)))
			if err != nil {
				panic(err)
			}
			tools[i].OutputSchema = out
		}
	}
	return tools
}

// FuzzGenerated renders random schema-shaped tool sets (the fuzzer
// explores seeds) and checks the output structurally.
func FuzzGenerated(f *testing.F) {
	for i := range int64(20) {
		f.Add(i)
	}
	f.Fuzz(func(t *testing.T, seed int64) {
		tools := genTools(rand.New(rand.NewSource(seed)))
		if err := checkTS(TypeScriptSource(tools)); err != nil {
			t.Fatalf("typescript: %v\n%s", err, TypeScriptSource(tools))
		}
		if err := checkPython(PythonSource(tools)); err != nil {
			t.Fatalf("python: %v\n%s", err, PythonSource(tools))
		}
	})
}
