package registry

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/dsh-container/dsh-container/internal/testenv"
	"unsafe"
)

// Registering a tool checks its schema without copying it: a compact
// schema is kept as given and checking it costs its tape (a few entries
// for a property of long text), not its canonical form, copies of its
// strings and a compacted copy to compare — a tool source's list is
// registered again into a new registry on every change (issue 24 §7: a
// 15.5 MiB list cost some 200 MiB of allocations a rebuild).
func TestRegisterChecksSchemasWithoutCopies(t *testing.T) {
	tools := bigListTools(16, 4<<20)
	size := 0
	for _, tool := range tools {
		size += len(tool.Parameters)
	}
	r := newReg(t)
	n := testenv.Allocated(func() { mustRegister(t, r, tools...) })
	t.Logf("registering %d bytes of schemas allocated %d bytes", size, n)
	if n > uint64(size)/3 {
		t.Errorf("registering %d bytes of schemas allocated %d bytes; the bound is a third of them", size, n)
	}
	for _, tool := range tools {
		got, _ := r.lookup(Scope{}, tool.Name)
		if unsafe.SliceData(got.Parameters) != unsafe.SliceData(tool.Parameters) {
			t.Fatalf("%s: the registry holds a copy of a compact schema", tool.Name)
		}
	}
	// A schema with space between its tokens is compacted; one with space
	// only inside its strings is compact.
	for in, want := range map[string]string{
		`{ "type" : "object" }`:                       `{"type":"object"}`,
		`{"description":"a \"b\" c","type":"object"}`: `{"description":"a \"b\" c","type":"object"}`,
		"{\"type\":\"object\",\n\"x\":\"\\\\\"}":      `{"type":"object","x":"\\"}`,
	} {
		tool := echoTool("c")
		tool.Parameters = json.RawMessage(in)
		r := newReg(t)
		mustRegister(t, r, tool)
		if got, _ := r.lookup(Scope{}, "c"); string(got.Parameters) != want {
			t.Errorf("%q registered as %s, want %s", in, got.Parameters, want)
		}
	}
}

// isCompact says what json.Compact says: that it would return the JSON
// unchanged.
func FuzzIsCompact(f *testing.F) {
	for _, s := range []string{`{}`, `{ }`, `{"a":"b c"}`, `{"a":"\" "}`, `{"a":"\\"," b":1}`, "[1,\n2]", `"\\\" "`, `{"a":[1, 2]}`, "\t1"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		if !json.Valid(in) {
			return
		}
		var buf bytes.Buffer
		if err := json.Compact(&buf, in); err != nil {
			t.Fatal(err)
		}
		if got, want := isCompact(in), bytes.Equal(buf.Bytes(), in); got != want {
			t.Fatalf("isCompact(%q) = %v, json.Compact says %v", in, got, want)
		}
	})
}
