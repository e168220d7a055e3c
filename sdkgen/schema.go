package sdkgen

// This file turns a parsed JSON Schema into a small language-neutral type
// tree (shape) that both renderers print. The walk visits every schema node
// at most once and stops at MaxDepth, so it is linear in the input.

// MaxDepth caps schema nesting: a subschema nested more than MaxDepth
// levels below a tool's input schema (counting properties, items,
// additionalProperties and anyOf/oneOf members) renders as unknown (TS) /
// Any (Python).
const MaxDepth = 32

type kind uint8

const (
	kUnknown kind = iota // TypeScript unknown, Python Any
	kNever               // only the value of a closed empty object
	kString
	kNumber
	kInteger
	kBoolean
	kNull
	kLiteral
	kArray
	kObject
	kUnion
)

// shape is a type. Values are immutable once built.
type shape struct {
	kind kind
	lit  *jvalue // kLiteral: a jString, jNumber or jBool value (null is kNull)
	elem *shape  // kArray: the element type

	// kObject with fields: a record, closed unless extra is set (then
	// extra is the type of the other keys). kObject without fields: a map
	// whose values have type extra (never nil).
	fields []field
	extra  *shape

	members []*shape // kUnion: two or more, none a union or unknown
}

type field struct {
	key      string
	doc      string
	required bool
	typ      *shape
}

var (
	unknownShape = &shape{kind: kUnknown}
	neverShape   = &shape{kind: kNever}
	nullShape    = &shape{kind: kNull}
	primShapes   = map[string]*shape{
		"string":  {kind: kString},
		"number":  {kind: kNumber},
		"integer": {kind: kInteger},
		"boolean": {kind: kBoolean},
		"null":    nullShape,
	}
)

// buildShape maps one schema node. Anything it does not understand, or
// anything malformed, becomes unknown.
func buildShape(v *jvalue, depth int) *shape {
	if v == nil || v.kind != jObject || depth > MaxDepth {
		return unknownShape // boolean schemas, malformed values, too deep
	}
	if v.get("$ref") != nil || v.get("$dynamicRef") != nil || v.get("$recursiveRef") != nil {
		return unknownShape
	}
	if c := v.get("const"); c != nil {
		return literalShape(c)
	}
	if e := v.get("enum"); e != nil {
		if e.kind != jArray || len(e.arr) == 0 {
			return unknownShape
		}
		members := make([]*shape, len(e.arr))
		for i, m := range e.arr {
			members[i] = literalShape(m)
		}
		return union(members)
	}
	anyOf, oneOf := v.get("anyOf"), v.get("oneOf")
	if anyOf != nil || oneOf != nil {
		alt := anyOf
		if alt == nil {
			alt = oneOf
		} else if oneOf != nil {
			return unknownShape // the intersection of two unions
		}
		if alt.kind != jArray || len(alt.arr) == 0 {
			return unknownShape
		}
		members := make([]*shape, len(alt.arr))
		for i, m := range alt.arr {
			members[i] = buildShape(m, depth+1)
		}
		return union(members)
	}

	var types []string
	switch t := v.get("type"); {
	case t == nil:
		switch {
		case v.get("properties") != nil || v.get("additionalProperties") != nil ||
			v.get("patternProperties") != nil || v.get("required") != nil:
			types = []string{"object"}
		case v.get("items") != nil:
			types = []string{"array"}
		default:
			return unknownShape
		}
	case t.kind == jString:
		types = []string{t.s}
	case t.kind == jArray:
		seen := make(map[string]bool, len(t.arr))
		for _, n := range t.arr {
			s, ok := n.str()
			if !ok {
				return unknownShape
			}
			if !seen[s] {
				seen[s] = true
				types = append(types, s)
			}
		}
	default:
		return unknownShape
	}
	members := make([]*shape, 0, len(types))
	for _, t := range types {
		switch t {
		case "array":
			members = append(members, buildArray(v, depth))
		case "object":
			members = append(members, buildObject(v, depth))
		default:
			p, ok := primShapes[t]
			if !ok {
				return unknownShape
			}
			members = append(members, p)
		}
	}
	return union(members)
}

// literalShape maps a const or enum member: strings, numbers and booleans
// become literals, null becomes null, anything else unknown.
func literalShape(v *jvalue) *shape {
	switch v.kind {
	case jString, jNumber, jBool:
		return &shape{kind: kLiteral, lit: v}
	case jNull:
		return nullShape
	}
	return unknownShape
}

func buildArray(v *jvalue, depth int) *shape {
	items := v.get("items")
	if items == nil || items.kind == jArray { // absent, or a tuple
		return &shape{kind: kArray, elem: unknownShape}
	}
	return &shape{kind: kArray, elem: buildShape(items, depth+1)}
}

func buildObject(v *jvalue, depth int) *shape {
	o := &shape{kind: kObject}
	required := map[string]bool{}
	var requiredOrder []string
	if r := v.get("required"); r != nil && r.kind == jArray {
		for _, n := range r.arr {
			if s, ok := n.str(); ok && !required[s] {
				required[s] = true
				requiredOrder = append(requiredOrder, s)
			}
		}
	}
	declared := map[string]bool{}
	if props := v.get("properties"); props != nil && props.kind == jObject {
		o.fields = make([]field, 0, len(props.keys)+len(requiredOrder))
		for i, k := range props.keys {
			ps := props.vals[i]
			doc, _ := ps.get("description").str()
			declared[k] = true
			o.fields = append(o.fields, field{key: k, doc: doc, required: required[k], typ: buildShape(ps, depth+1)})
		}
	}
	// A required key without a declaration must be present with any value.
	for _, k := range requiredOrder {
		if !declared[k] {
			o.fields = append(o.fields, field{key: k, required: true, typ: unknownShape})
		}
	}

	closed := false
	switch ap := v.get("additionalProperties"); {
	case ap == nil:
		// Absent: other keys are allowed, but a record with declared
		// fields is rendered closed so that a misspelt argument is caught.
	case ap.kind == jBool && ap.b:
		o.extra = unknownShape
	case ap.kind == jBool:
		closed = true
	default:
		o.extra = buildShape(ap, depth+1)
	}
	if pp := v.get("patternProperties"); pp != nil && (pp.kind != jObject || len(pp.keys) > 0) {
		o.extra, closed = unknownShape, false // keys matching the patterns are allowed
	}
	if len(o.fields) == 0 && o.extra == nil {
		o.extra = unknownShape
		if closed {
			o.extra = neverShape
		}
	}
	return o
}

// union flattens nested unions, drops duplicate primitives and literals,
// and collapses to unknown if any member is unknown.
func union(members []*shape) *shape {
	var out []*shape
	seenKind := map[kind]bool{}
	seenLit := map[[2]string]bool{}
	var add func(m *shape) bool
	add = func(m *shape) bool {
		switch m.kind {
		case kUnknown:
			return false
		case kUnion:
			for _, mm := range m.members {
				add(mm) // members of a built union are never unknown
			}
			return true
		case kString, kNumber, kInteger, kBoolean, kNull, kNever:
			if seenKind[m.kind] {
				return true
			}
			seenKind[m.kind] = true
		case kLiteral:
			k := [2]string{string(rune('0' + m.lit.kind)), litText(m.lit)}
			if seenLit[k] {
				return true
			}
			seenLit[k] = true
		}
		out = append(out, m)
		return true
	}
	for _, m := range members {
		if !add(m) {
			return unknownShape
		}
	}
	switch len(out) {
	case 0:
		return unknownShape
	case 1:
		return out[0]
	}
	return &shape{kind: kUnion, members: out}
}

// litText is the canonical text of a literal's value (the JSON number
// text, the string value, or true/false).
func litText(v *jvalue) string {
	if v.kind == jBool {
		if v.b {
			return "true"
		}
		return "false"
	}
	return v.s
}
