package portproto

import (
	"encoding/json"
	"errors"
	"os"
	"strings"
	"testing"
)

type vector struct {
	Name      string    `json:"name"`
	Direction Direction `json:"direction"`
	Frame     string    `json:"frame"`
	Valid     bool      `json:"valid"`
	Code      string    `json:"code"`
}

func loadVectors(t testing.TB) []vector {
	t.Helper()
	data, err := os.ReadFile("testdata/vectors.json")
	if err != nil {
		t.Fatal(err)
	}
	var file struct {
		Vectors []vector `json:"vectors"`
	}
	if err := json.Unmarshal(data, &file); err != nil {
		t.Fatal(err)
	}
	if len(file.Vectors) == 0 {
		t.Fatal("no vectors")
	}
	return file.Vectors
}

func TestVectors(t *testing.T) {
	for _, v := range loadVectors(t) {
		t.Run(v.Name, func(t *testing.T) {
			msg, err := Decode(v.Direction, []byte(v.Frame), 1<<20)
			if v.Valid {
				if err != nil {
					t.Fatalf("rejected a valid frame: %v", err)
				}
				// A valid frame survives a round trip through the Go types.
				again, err := json.Marshal(msg)
				if err != nil {
					t.Fatal(err)
				}
				if _, err := Decode(v.Direction, again, 1<<20); err != nil {
					t.Fatalf("re-encoded frame %s rejected: %v", again, err)
				}
				return
			}
			var pe *Error
			if !errors.As(err, &pe) {
				t.Fatalf("accepted an invalid frame (got %T %v)", msg, err)
			}
			if pe.Code != v.Code {
				t.Fatalf("code %q, want %q (%v)", pe.Code, v.Code, err)
			}
		})
	}
}

func TestDecodeRejectsInvalidUTF8(t *testing.T) {
	frame := []byte("{\"type\":\"log\",\"source\":\"stdout\",\"text\":\"\xff\xfe\"}")
	_, err := Decode(RunnerToHost, frame, 0)
	var pe *Error
	if !errors.As(err, &pe) || pe.Code != CodeNotUTF8 {
		t.Fatalf("got %v, want %s", err, CodeNotUTF8)
	}
}

func TestDecodeRejectsOversizeFrame(t *testing.T) {
	frame := []byte(`{"type":"log","source":"stdout","text":"` + strings.Repeat("x", 5000) + `"}`)
	_, err := Decode(RunnerToHost, frame, 4096)
	var pe *Error
	if !errors.As(err, &pe) || pe.Code != CodeTooLarge {
		t.Fatalf("got %v, want %s", err, CodeTooLarge)
	}
	if _, err := Decode(RunnerToHost, frame, 0); err != nil {
		t.Fatalf("unbounded decode: %v", err)
	}
}

func FuzzDecode(f *testing.F) {
	for _, v := range loadVectors(f) {
		f.Add(string(v.Direction), []byte(v.Frame))
	}
	f.Fuzz(func(t *testing.T, dir string, frame []byte) {
		msg, err := Decode(Direction(dir), frame, 1<<16)
		if err != nil {
			if !IsProtocolError(err) {
				t.Fatalf("untyped error %v", err)
			}
			return
		}
		// Whatever is accepted re-encodes to something accepted.
		again, err := json.Marshal(msg)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := Decode(Direction(dir), again, 0); err != nil {
			t.Fatalf("accepted %q but rejected its re-encoding %s: %v", frame, again, err)
		}
	})
}
