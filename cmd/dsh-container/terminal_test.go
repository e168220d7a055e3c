package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/dsh-container/dsh-container/backend"
)

func TestNeutralize(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"plain text\n\twith tab", "plain text\n\twith tab"},
		{"héllo → 世界 🙂", "héllo → 世界 🙂"},
		{"\x1b]0;pwned\x07", `\x1b]0;pwned\x07`},
		{"\x1b[2J\x1b[H$ sudo rm -rf /", `\x1b[2J\x1b[H$ sudo rm -rf /`},
		{"done\r\nnext\r\n", "done\nnext\n"},
		{"fake\rreal", `fake\x0dreal`},
		{"nul\x00del\x7f", `nul\x00del\x7f`},
		{"csi\u009b31m", `csi\u009b31m`},
		{"abc\u202edcba\u2066x\u2069\u200f", `abc\u202edcba\u2066x\u2069\u200f`},
		{"bad \xff utf8", "bad \uFFFD utf8"},
	} {
		if got := neutralize(tc.in); got != tc.want {
			t.Errorf("neutralize(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// Human output neutralizes everything the program controls; --json stays
// exact (issue 10, class 8).
func TestHumanOutputNeutralizesProgramText(t *testing.T) {
	const evil = "\x1b]0;title\x07\x1b[2J"
	var out, errb bytes.Buffer
	f := &factory{stdout: &out, stderr: &errb}
	for _, e := range []backend.LogEntry{
		{Source: backend.SourceConsole, Level: backend.LevelLog, Text: "log " + evil},
		{Source: backend.SourceConsole, Level: backend.LevelWarn, Text: "warn " + evil},
		{Source: backend.SourceStdout, Text: "raw " + evil + "\n"},
		{Source: backend.SourceStderr, Text: "err " + evil + "\n"},
	} {
		printLog(f, e)
	}
	printHuman(f, &backend.RunResult{ValueKind: backend.ValueJSON, Value: []byte(`"value \u001b[2J"`)})
	printHuman(f, &backend.RunResult{ValueKind: backend.ValueJSON, Value: []byte(`{"k":"\u001b[2J"}`)})
	printHuman(f, &backend.RunResult{ValueKind: backend.ValueInspect, Value: []byte(`"inspect \u001b[2J"`)})
	printHuman(f, &backend.RunResult{Error: &backend.Failure{Kind: backend.FailureException, Message: "Error: " + evil}})
	all := out.String() + errb.String()
	if strings.ContainsAny(all, "\x1b\x07") {
		t.Fatalf("control characters reached the terminal:\nstdout %q\nstderr %q", out.String(), errb.String())
	}
	for _, want := range []string{`log \x1b]0;title\x07\x1b[2J`, `value \x1b[2J`, `inspect \x1b[2J`, `Error: \x1b]0;title`} {
		if !strings.Contains(all, want) {
			t.Errorf("output lacks %q:\n%s", want, all)
		}
	}

	out.Reset()
	errb.Reset()
	r := &backend.RunResult{ValueKind: backend.ValueJSON, Value: []byte(`"value \u001b[2J"`), Logs: []backend.LogEntry{{Source: backend.SourceStdout, Text: evil}}}
	if err := report(f, true, r); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), `"text":"\u001b]0;title\u0007\u001b[2J"`) || !strings.Contains(out.String(), `"value":"value \u001b[2J"`) {
		t.Fatalf("--json is not exact: %s", out.String())
	}
}
