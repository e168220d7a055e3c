package sdkgen

import "slices"

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

// buildShape maps one schema node in an arena of its own (see
// arena.shape).
func buildShape(v *jvalue, depth int) *shape { return new(arena).shape(v, depth) }

// shape maps one schema node, its shapes in a. Anything it does not
// understand, or anything malformed, becomes unknown.
func (a *arena) shape(v *jvalue, depth int) *shape {
	if v == nil || v.kind != jObject || depth > MaxDepth {
		return unknownShape // boolean schemas, malformed values, too deep
	}
	if v.get("$ref") != nil || v.get("$dynamicRef") != nil || v.get("$recursiveRef") != nil {
		return unknownShape
	}
	if c := v.get("const"); c != nil {
		return a.literal(c)
	}
	if e := v.get("enum"); e != nil {
		if e.kind != jArray || len(e.arr) == 0 {
			return unknownShape
		}
		mark := len(a.altStack)
		for _, m := range e.arr {
			if !a.alternative(mark, a.literal(m)) {
				return unknownShape
			}
		}
		return a.union(mark)
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
		mark := len(a.altStack)
		for _, m := range alt.arr {
			if !a.alternative(mark, a.shape(m, depth+1)) {
				return unknownShape
			}
		}
		return a.union(mark)
	}

	switch t := v.get("type"); {
	case t == nil:
		switch {
		case v.get("properties") != nil || v.get("additionalProperties") != nil ||
			v.get("patternProperties") != nil || v.get("required") != nil:
			return a.object(v, depth)
		case v.get("items") != nil:
			return a.array(v, depth)
		}
		return unknownShape
	case t.kind == jString:
		return a.typed(v, t.s, depth)
	case t.kind == jArray:
		for _, n := range t.arr {
			if n.kind != jString || typeNames[n.s] == 0 {
				return unknownShape
			}
		}
		var seen [8]bool // by typeNames
		mark := len(a.altStack)
		for _, n := range t.arr {
			if id := typeNames[n.s]; !seen[id] { // a type named twice counts once
				seen[id] = true
				a.altStack = append(a.altStack, a.typed(v, n.s, depth))
			}
		}
		return a.union(mark)
	}
	return unknownShape
}

// typeNames numbers the type names of JSON Schema from 1.
var typeNames = map[string]int{"array": 1, "object": 2, "string": 3, "number": 4, "integer": 5, "boolean": 6, "null": 7}

// typed maps schema node v as of the named type: unknown for a name JSON
// Schema does not have.
func (a *arena) typed(v *jvalue, typ string, depth int) *shape {
	switch typ {
	case "array":
		return a.array(v, depth)
	case "object":
		return a.object(v, depth)
	}
	if p, ok := primShapes[typ]; ok {
		return p
	}
	return unknownShape
}

// literal maps a const or enum member: strings, numbers and booleans
// become literals, null becomes null, anything else unknown.
func (a *arena) literal(v *jvalue) *shape {
	switch v.kind {
	case jString, jNumber, jBool:
		s := a.shapes.one()
		s.kind, s.lit = kLiteral, v
		return s
	case jNull:
		return nullShape
	}
	return unknownShape
}

func (a *arena) array(v *jvalue, depth int) *shape {
	s := a.shapes.one()
	s.kind, s.elem = kArray, unknownShape
	if items := v.get("items"); items != nil && items.kind != jArray { // not absent, not a tuple
		s.elem = a.shape(items, depth+1)
	}
	return s
}

// smallSet is the size up to which a set of keys is looked through rather
// than put in a map.
const smallSet = 16

func (a *arena) object(v *jvalue, depth int) *shape {
	o := a.shapes.one()
	o.kind = kObject
	// The required keys, each once, in order.
	var reqBuf [smallSet]string
	required := reqBuf[:0]
	var requiredSet map[string]bool
	if r := v.get("required"); r != nil && r.kind == jArray {
		for _, n := range r.arr {
			k, ok := n.str()
			if !ok {
				continue
			}
			if requiredSet != nil {
				if requiredSet[k] {
					continue
				}
				requiredSet[k] = true
			} else if slices.Contains(required, k) {
				continue
			}
			required = append(required, k)
			if len(required) == smallSet+1 {
				requiredSet = a.set()
				defer a.putSet(requiredSet)
				for _, k := range required {
					requiredSet[k] = true
				}
			}
		}
	}
	isRequired := func(k string) bool {
		if requiredSet != nil {
			return requiredSet[k]
		}
		return slices.Contains(required, k)
	}
	props := v.get("properties")
	if props != nil && props.kind != jObject {
		props = nil
	}
	// A required key without a declaration must be present with any value.
	var declared map[string]bool
	if props != nil && len(props.keys) > smallSet && len(required) > 0 {
		declared = a.set()
		defer a.putSet(declared)
		for _, k := range props.keys {
			declared[k] = true
		}
	}
	isDeclared := func(k string) bool {
		if declared != nil {
			return declared[k]
		}
		return props != nil && slices.Contains(props.keys, k)
	}
	n := 0
	if props != nil {
		n = len(props.keys)
	}
	for _, k := range required {
		if !isDeclared(k) {
			n++
		}
	}
	o.fields = a.fields.take(n)[:0]
	if props != nil {
		for i, k := range props.keys {
			ps := props.vals[i]
			doc, _ := ps.get("description").str()
			o.fields = append(o.fields, field{key: k, doc: doc, required: isRequired(k), typ: a.shape(ps, depth+1)})
		}
	}
	for _, k := range required {
		if !isDeclared(k) {
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
		o.extra = a.shape(ap, depth+1)
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

// alternative adds s to the alternatives of the union gathered from mark,
// or, when s is unknown (which makes the union unknown), drops them and
// reports false.
func (a *arena) alternative(mark int, s *shape) bool {
	if s.kind == kUnknown {
		a.altStack = a.altStack[:mark]
		return false
	}
	a.altStack = append(a.altStack, s)
	return true
}

// union takes the alternatives gathered from mark: it flattens nested
// unions, drops duplicate primitives and literals, and collapses to
// unknown if any member is unknown.
func (a *arena) union(mark int) *shape {
	members := a.altStack[mark:]
	defer func() { a.altStack = a.altStack[:mark] }()
	var seenKind [kUnion + 1]bool
	var seenLit map[string]bool // by kind and text, for unions too long to look through
	var seenLits []*shape
	dupLit := func(m *shape) bool {
		if seenLit == nil && len(seenLits) < smallSet {
			for _, l := range seenLits {
				if l.lit.kind == m.lit.kind && litText(l.lit) == litText(m.lit) {
					return true
				}
			}
			seenLits = append(seenLits, m)
			return false
		}
		if seenLit == nil {
			seenLit = a.set()
			for _, l := range seenLits {
				seenLit[litKey(l.lit)] = true
			}
		}
		k := litKey(m.lit)
		if seenLit[k] {
			return true
		}
		seenLit[k] = true
		return false
	}
	defer func() {
		if seenLit != nil {
			a.putSet(seenLit)
		}
	}()
	out := 0 // the alternatives kept, gathered after the members
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
			if dupLit(m) {
				return true
			}
		}
		a.altStack = append(a.altStack, m)
		out++
		return true
	}
	for i := range members {
		if !add(a.altStack[mark+i]) {
			return unknownShape
		}
	}
	kept := a.altStack[len(a.altStack)-out:]
	switch out {
	case 0:
		return unknownShape
	case 1:
		return kept[0]
	}
	u := a.shapes.one()
	u.kind, u.members = kUnion, a.alts.take(out)
	copy(u.members, kept)
	return u
}

// litKey is a literal's kind and text, as one string.
func litKey(v *jvalue) string { return string(rune('0'+v.kind)) + litText(v) }

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
