package registry

import (
	"encoding/json"
	"strings"
	"testing"
)

// BenchmarkNormalizeArguments measures the canonicalisation every binding
// call's arguments go through, for a small argument object (the common
// case) and a large array, with allocations:
//
//	go test -run '^$' -bench NormalizeArguments -benchmem ./registry/
func BenchmarkNormalizeArguments(b *testing.B) {
	large := "[" + strings.Repeat(`{"b":2,"a":"x"},`, 20000) + "1]"
	for _, c := range []struct {
		name string
		in   json.RawMessage
	}{
		{"small", json.RawMessage(`{"query":"weather in Paris","limit":3,"tags":["a","b"]}`)},
		{"large", json.RawMessage(large)},
	} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(c.in)))
			for b.Loop() {
				if _, err := NormalizeArguments(c.in); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestNormalizeTapeSizing checks inputs around the first tape chunk's size
// (the input's length, capped at a full chunk): the densest inputs, where
// nearly every byte starts a value, come back intact.
func TestNormalizeTapeSizing(t *testing.T) {
	for _, n := range []int{1, 2, 3, tapeChunk/2 - 1, tapeChunk/2 + 1, tapeChunk - 1, tapeChunk + 1, 3 * tapeChunk} {
		in := "[" + strings.Repeat("1,", n) + "1]"
		out, err := NormalizeArguments(json.RawMessage(in))
		if err != nil || string(out) != in {
			t.Fatalf("%d elements: %v (equal: %v)", n, err, string(out) == in)
		}
		deep := strings.Repeat("[", min(n, maxJSONDepth-1)) + strings.Repeat("]", min(n, maxJSONDepth-1))
		if out, err := NormalizeArguments(json.RawMessage(deep)); err != nil || string(out) != deep {
			t.Fatalf("depth %d: %v", n, err)
		}
	}
	if out, err := NormalizeArguments(json.RawMessage("7")); err != nil || string(out) != "7" {
		t.Fatalf("7: %s %v", out, err)
	}
}
