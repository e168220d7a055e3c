package server

import (
	"encoding/json"
	"fmt"
	"runtime"
	"runtime/debug"
	"strings"
	"testing"
)

var schemaCases = []struct{ schema, want string }{
	{`{}`, ""},
	{`true`, ""},
	{`{"type":"object","properties":{"q":{"type":"string","minLength":1},"n":{"type":["integer","null"],"minimum":0}},"required":["q"],"additionalProperties":false}`, ""},
	{`{"items":[{"type":"string"},true],"prefixItems":[{}],"allOf":[{"$ref":"#/$defs/a"}],"$defs":{"a":{"enum":[1,"x",null]}}}`, ""},
	{`{"dependencies":{"a":["b"],"c":{"required":["d"]}},"dependentRequired":{"x":["y"]},"exclusiveMinimum":true,"exclusiveMaximum":3,"multipleOf":0.5,"x-unknown":{"type":5}}`, ""},
	{`{"type":"strin"}`, `type: "strin" is not a JSON Schema type`},
	{`{"type":[]}`, "type: an array of types must not be empty"},
	{`{"type":["string","string"]}`, `type: "string" is listed twice`},
	{`{"type":[1]}`, "type: must be a type name or an array of type names"},
	{`{"type":{}}`, "type: must be a type name or an array of type names, not an object"},
	{`{"properties":{"a":{"type":5}}}`, "properties.a.type: must be a type name or an array of type names, not a number"},
	{`{"properties":[]}`, "properties: must be an object of schemas"},
	{`{"properties":{"a":3}}`, "properties.a: a schema must be an object or a boolean, not a number"},
	{`{"items":[{},"x"]}`, "items[1]: a schema must be an object or a boolean, not a string"},
	{`{"anyOf":[]}`, "anyOf: must be a non-empty array of schemas"},
	{`{"oneOf":{}}`, "oneOf: must be a non-empty array of schemas"},
	{`{"not":null}`, "not: a schema must be an object or a boolean, not null"},
	{`{"required":"rows"}`, "required: must be an array of property names"},
	{`{"required":["a",1]}`, "required[1]: must be a string"},
	{`{"required":["a","a"]}`, `required: "a" is listed twice`},
	{`{"enum":{}}`, "enum: must be an array"},
	{`{"dependentRequired":{"a":"b"}}`, "dependentRequired.a: must be an array of property names"},
	{`{"dependentRequired":{"a":[1]}}`, "dependentRequired.a[0]: must be a string"},
	{`{"dependentRequired":[]}`, "dependentRequired: must be an object of arrays of property names"},
	{`{"dependencies":{"a":[2]}}`, "dependencies.a[0]: must be a string"},
	{`{"dependencies":{"a":"b"}}`, "dependencies.a: a schema must be an object or a boolean, not a string"},
	{`{"dependencies":1}`, "dependencies: must be an object"},
	{`{"description":1}`, "description: must be a string"},
	{`{"maxLength":-1}`, "maxLength: must be a non-negative integer"},
	{`{"maxItems":1.5}`, "maxItems: must be a non-negative integer"},
	{`{"minimum":"0"}`, "minimum: must be a number"},
	{`{"multipleOf":0}`, "multipleOf: must be greater than 0"},
	{`{"exclusiveMinimum":"x"}`, "exclusiveMinimum: must be a number"},
	{`{"uniqueItems":"yes"}`, "uniqueItems: must be true or false"},
	{`[]`, "the schema: a schema must be an object or a boolean, not an array"},
	{strings.Repeat(`{"not":`, MaxSchemaDepth+1) + "{}" + strings.Repeat("}", MaxSchemaDepth+1), "nested deeper than 64 levels"},
	{`{"type":`, "not JSON"},
}

// The streaming check gives the answers the tree-building one gave.
func TestCheckSchema(t *testing.T) {
	for _, c := range schemaCases {
		err := checkSchema(json.RawMessage(c.schema), false)
		ref := refCheckSchema(json.RawMessage(c.schema), false)
		if c.want == "" {
			if err != nil || ref != nil {
				t.Errorf("%.80s: %v (reference %v)", c.schema, err, ref)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%.80s: %v, want %q", c.schema, err, c.want)
		}
		if ref == nil || (ref.Error() != err.Error() && !strings.HasPrefix(err.Error(), "not JSON")) {
			t.Errorf("%.80s: %v, the reference %v", c.schema, err, ref)
		}
	}
	if err := checkSchema(json.RawMessage(`false`), true); err == nil || !strings.Contains(err.Error(), "must be a JSON Schema object, not false") {
		t.Errorf("a boolean input schema: %v", err)
	}
}

// On any JSON the streaming check accepts exactly what the reference
// accepts (on a schema with several problems it may name another one:
// the first in the text, not in key order).
func FuzzCheckSchemaMatchesReference(f *testing.F) {
	for _, c := range schemaCases {
		f.Add([]byte(c.schema), false)
	}
	f.Add([]byte(`false`), true)
	f.Fuzz(func(t *testing.T, raw []byte, objectOnly bool) {
		if !json.Valid(raw) {
			return
		}
		err := checkSchema(raw, objectOnly)
		ref := refCheckSchema(raw, objectOnly)
		if (err == nil) != (ref == nil) {
			t.Fatalf("%q: %v, reference %v", raw, err, ref)
		}
	})
}

// A schema of many small properties costs the check little memory: it
// streams, holding its path, not a tree thirty times the text (the
// reference, measured alongside).
func TestCheckSchemaHoldsLittle(t *testing.T) {
	var b strings.Builder
	b.WriteString(`{"type":"object","properties":{`)
	for i := 0; b.Len() < 2<<20; i++ {
		if i > 0 {
			b.WriteString(",")
		}
		fmt.Fprintf(&b, `"p%d":{"type":"string"}`, i)
	}
	b.WriteString(`}}`)
	raw := json.RawMessage(b.String())
	// With the collector running at every 1% of growth, the heap's peak
	// is what the check holds, not garbage awaiting collection.
	defer debug.SetGCPercent(debug.SetGCPercent(1))
	grew := func(check func(json.RawMessage, bool) error) int64 {
		var before runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		var peak uint64
		stop, done := make(chan struct{}), make(chan struct{})
		go func() {
			defer close(done)
			for {
				var m runtime.MemStats
				runtime.ReadMemStats(&m)
				peak = max(peak, m.HeapAlloc)
				select {
				case <-stop:
					return
				default:
				}
			}
		}()
		if err := check(raw, true); err != nil {
			t.Fatal(err)
		}
		close(stop)
		<-done
		return int64(peak) - int64(before.HeapAlloc)
	}
	streamed, tree := grew(checkSchema), grew(refCheckSchema)
	t.Logf("a %d-byte schema: the heap grew by %d KiB checked as it streams, %d KiB as a tree", len(raw), streamed>>10, tree>>10)
	if streamed*4 > tree {
		t.Errorf("the heap grew by %d bytes checking %d (%d for the tree)", streamed, len(raw), tree)
	}
}
