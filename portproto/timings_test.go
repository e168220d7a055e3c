package portproto

import (
	"strings"
	"testing"
)

// A done frame may carry the runner's timings: exactly the three keys,
// each within [0, MaxTimingUs].
func TestDoneTimings(t *testing.T) {
	m, err := Decode(RunnerToHost, []byte(`{"type":"done","ok":true,"timings":{"compileUs":120,"evaluateUs":30,"renderUs":2}}`), 0)
	if err != nil {
		t.Fatal(err)
	}
	if got := m.(*Done).Timings; got == nil || *got != (Timings{Compile: 120, Evaluate: 30, Render: 2}) {
		t.Fatalf("got %+v", got)
	}
	if m, err := Decode(RunnerToHost, []byte(`{"type":"done","ok":true}`), 0); err != nil || m.(*Done).Timings != nil {
		t.Fatalf("without timings: %+v %v", m, err)
	}
	for frame, want := range map[string]string{
		`{"type":"done","ok":true,"timings":{"compileUs":1,"evalUs":2}}`:          `unknown field "timings.evalUs"`,
		`{"type":"done","ok":true,"timings":{"CompileUs":1}}`:                     `unknown field "timings.CompileUs"`,
		`{"type":"done","ok":true,"timings":{"compileUs":-1}}`:                    "out of range",
		`{"type":"done","ok":true,"timings":{"evaluateUs":86400000001}}`:          "out of range",
		`{"type":"done","ok":true,"timings":{"renderUs":1.5}}`:                    "timings",
		`{"type":"done","ok":true,"timings":[1,2]}`:                               "timings",
		`{"type":"done","ok":true,"timings":{"compileUs":"1"}}`:                   "timings",
		`{"type":"done","ok":true,"timings":{"compileUs":1,"compileUs":2,"x":1}}`: "unknown field",
	} {
		_, err := Decode(RunnerToHost, []byte(frame), 0)
		if err == nil || !IsProtocolError(err) || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: got %v, want a protocol error with %q", frame, err, want)
		}
	}
}
