package registry

import (
	"bytes"
	"encoding/json"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/containerd/errdefs"
)

func TestNormalizeArguments(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		want    string
		wantErr string
	}{
		{name: "empty", in: "", want: `{}`},
		{name: "whitespace", in: " \n\t", want: `{}`},
		{name: "sorted and compact", in: `{ "b": 1, "a": { "d": [], "c": null } }`, want: `{"a":{"c":null,"d":[]},"b":1}`},
		{name: "numbers keep their text", in: `[1.50, -0, 2e3, 12345678901234567890, 1E-400]`, want: `[1.50,-0,2e3,12345678901234567890,1E-400]`},
		{name: "no HTML escaping", in: `{"s":"<a href=\"x\">&</a>"}`, want: `{"s":"<a href=\"x\">&</a>"}`},
		{name: "escapes decoded", in: `"\u00e9\n\/"`, want: `"é\n/"`},
		{name: "surrogate pair", in: `"\ud83d\ude00"`, want: `"😀"`},
		{name: "scalars", in: `true`, want: `true`},
		{name: "null", in: `null`, want: `null`},
		{name: "backslash before u", in: `"\\ud800"`, want: `"\\ud800"`},
		{name: "NaN", in: `{"x":NaN}`, wantErr: "invalid character 'N'"},
		{name: "Infinity", in: `{"x":Infinity}`, wantErr: "invalid character 'I'"},
		{name: "negative Infinity", in: `[-Infinity]`, wantErr: "invalid character 'I'"},
		{name: "undefined", in: `undefined`, wantErr: "invalid character 'u'"},
		{name: "overflowing number", in: `{"x":1e400}`, wantErr: "overflows a float64"},
		{name: "duplicate key", in: `{"a":1,"a":1}`, wantErr: `duplicate object key "a"`},
		{name: "nested duplicate key", in: `[{"k":{"x":1,"x":2}}]`, wantErr: `duplicate object key "x"`},
		{name: "lone high surrogate", in: `"\ud800"`, wantErr: `lone UTF-16 surrogate escape \ud800`},
		{name: "high surrogate then non-low", in: `"\ud800\u0041"`, wantErr: `lone UTF-16 surrogate escape \ud800`},
		{name: "lone low surrogate", in: `{"\udc00":1}`, wantErr: `lone UTF-16 surrogate escape \udc00`},
		{name: "invalid UTF-8", in: "\"\xff\"", wantErr: "invalid UTF-8"},
		{name: "trailing data", in: `{} {}`, wantErr: "trailing data"},
		{name: "truncated", in: `{"a":`, wantErr: "unexpected end of JSON input"},
		{name: "truncated array", in: `[1,`, wantErr: "unexpected end of JSON input"},
		{name: "bad escape", in: `"\x"`, wantErr: "invalid character"},
		{name: "short unicode escape", in: `"\u12"`, wantErr: "invalid character"},
		{name: "object key not string", in: `{1:2}`, wantErr: "invalid character"},
		{name: "single quotes", in: `{'a':1}`, wantErr: "invalid character"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := NormalizeArguments(json.RawMessage(tt.in))
			if tt.wantErr != "" {
				if err == nil || !errdefs.IsInvalidArgument(err) || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("NormalizeArguments(%q) = %s, %v; want invalid argument %q", tt.in, got, err, tt.wantErr)
				}
				return
			}
			if err != nil || string(got) != tt.want {
				t.Fatalf("NormalizeArguments(%q) = %s, %v; want %s", tt.in, got, err, tt.want)
			}
			// Canonical form is a fixed point.
			again, err := NormalizeArguments(got)
			if err != nil || string(again) != string(got) {
				t.Errorf("not idempotent: %s -> %s, %v", got, again, err)
			}
		})
	}
}

func FuzzNormalizeArguments(f *testing.F) {
	for _, s := range []string{`{}`, `{"a":[1,2.5,"x"]}`, `"\ud83d\ude00"`, `{"a":1,"a":2}`, `NaN`, `"\ud800"`, "\"\xff\""} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		got, err := NormalizeArguments(in)
		if err != nil {
			return
		}
		if !json.Valid(got) {
			t.Fatalf("invalid output %q for %q", got, in)
		}
		again, err := NormalizeArguments(got)
		if err != nil || string(again) != string(got) {
			t.Fatalf("not idempotent: %q -> %q, %v", got, again, err)
		}
	})
}

// canonicalJSON agrees with the reference implementation on every input:
// the same output, or both fail.
func FuzzCanonicalMatchesReference(f *testing.F) {
	for _, s := range []string{`{}`, `{"b":1,"a":{"d":[],"c":null}}`, `[1.50,-0,2e3,1E-400]`, `"\u00e9\n\/\u2028\u0001\b\f"`,
		`{"a":1,"a":2}`, `{"x":1e400}`, `[1,`, `{} {}`, `"\ud83d\ude00"`, `{"\u0061":1,"a":2}`, ` [ true , false , null ] `, "\"\u2029\""} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		if len(bytes.TrimSpace(in)) == 0 {
			return
		}
		got, err := canonicalJSON(in)
		want, werr := referenceNormalize(in)
		if (err == nil) != (werr == nil) {
			t.Fatalf("%q: canonicalJSON %q, %v; reference %q, %v", in, got, err, want, werr)
		}
		if err == nil && !bytes.Equal(got, want) {
			t.Fatalf("%q: canonicalJSON %q, reference %q", in, got, want)
		}
	})
}

// Normalizing costs a small multiple of the input, whatever its shape
// (issue 10: a program chooses its arguments).
func TestNormalizeArgumentsMemoryIsLinear(t *testing.T) {
	const size = 4 << 20
	for name, in := range map[string]string{
		"long array of zeros": "[" + strings.Repeat("0,", size/2-1) + "0]",
		"wide object":         `{"k":0` + wideObject(size) + "}",
		"deep nesting":        strings.Repeat(`{"b":0,"a":`, 9000) + `"` + strings.Repeat("x", size-9000*12) + `"` + strings.Repeat("}", 9000),
		"long string":         `"` + strings.Repeat("é", size/2) + `"`,
	} {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		start := time.Now()
		if _, err := NormalizeArguments([]byte(in)); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		elapsed := time.Since(start)
		runtime.ReadMemStats(&after)
		alloc := after.TotalAlloc - before.TotalAlloc
		t.Logf("%s: %d KiB in, %d KiB allocated, %v", name, len(in)>>10, alloc>>10, elapsed)
		if alloc > 12*uint64(len(in)) {
			t.Errorf("%s: allocated %d bytes for %d bytes of input", name, alloc, len(in))
		}
	}
}

func wideObject(size int) string {
	var b strings.Builder
	for i := 0; b.Len() < size-32; i++ {
		fmt.Fprintf(&b, `,"k%07d":0`, i)
	}
	return b.String()
}
