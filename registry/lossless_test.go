package registry

import (
	"bytes"
	"encoding/json"
	"runtime"
	"strings"
	"testing"
	"unicode/utf8"
)

// CheckLossless accepts and refuses what NormalizeArguments does, with
// its message.
func FuzzCheckLosslessAgrees(f *testing.F) {
	for _, s := range []string{`{}`, `{"b":1,"a":{"d":[],"c":null}}`, `{"a":1,"a":2}`, `[{"k":{"x":1,"x":2}}]`, `{"\u0061":1,"a":2}`,
		`{"x":1e400}`, `[1,`, `{} {}`, `"\ud800"`, "\"\xff\"", `"\ud83d\ude00"`, `{"a":{"b":1},"c":{"b":2}}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		if len(bytes.TrimSpace(in)) == 0 {
			return // NormalizeArguments's {} for no arguments at all
		}
		_, nerr := NormalizeArguments(in)
		err := CheckLossless(in)
		if (err == nil) != (nerr == nil) || err != nil && !strings.HasSuffix(nerr.Error(), err.Error()) {
			t.Fatalf("%q: CheckLossless %v, NormalizeArguments %v", in, err, nerr)
		}
	})
}

// A frame that is mostly one long string costs CheckLossless one tape
// chunk, nothing like a copy of it.
func TestCheckLosslessDoesNotCopy(t *testing.T) {
	in := []byte(`{"type":"start","code":"` + strings.Repeat(`x\"<\n`, 1<<20) + `"}`)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	if err := CheckLossless(in); err != nil {
		t.Fatal(err)
	}
	runtime.ReadMemStats(&after)
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > uint64(len(in))/16 {
		t.Fatalf("allocated %d bytes checking %d", alloc, len(in))
	}
}

// RunCodeArguments is {"code": code} as json.Marshal would write it
// (HTML escaping aside), in one allocation of exactly its size.
func FuzzRunCodeArguments(f *testing.F) {
	for _, s := range []string{"", "return 1", "a<b>&\"\\\n\r\t\b\f\x00\x1f\u2028\u2029é😀", "\xff\xfe", strings.Repeat("<", 100)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, code string) {
		got := RunCodeArguments(code)
		if len(got) != cap(got) {
			t.Fatalf("%q: %d bytes in a buffer of %d", code, len(got), cap(got))
		}
		var back struct{ Code string }
		if err := json.Unmarshal(got, &back); err != nil {
			t.Fatalf("%q: %s is not JSON: %v", code, got, err)
		}
		want := code
		if !utf8.ValidString(code) {
			want = strings.ToValidUTF8(code, "\uFFFD")
		}
		if back.Code != want {
			t.Fatalf("%q came back as %q", code, back.Code)
		}
		if norm, err := NormalizeArguments(got); err != nil || !bytes.Equal(norm, got) {
			t.Fatalf("%q: %s is not canonical (%s, %v)", code, got, norm, err)
		}
	})
}

func TestRunCodeArgumentsAllocatesOnce(t *testing.T) {
	code := strings.Repeat("const a: Array<string> = [\"x\"];\n", 1000)
	if n := testing.AllocsPerRun(10, func() { RunCodeArguments(code) }); n != 1 {
		t.Fatalf("%v allocations", n)
	}
}
