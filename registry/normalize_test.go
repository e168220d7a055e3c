package registry

import (
	"encoding/json"
	"strings"
	"testing"

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
