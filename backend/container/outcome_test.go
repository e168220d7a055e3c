package container

import (
	"strings"
	"testing"

	"github.com/dsh-container/dsh-container/backend"
	"github.com/dsh-container/dsh-container/portproto"
)

// A program that exits before returning is an exit whose message states
// the status first, whatever it is, then how and where (issue 24 §4).
func TestProgramExitMessage(t *testing.T) {
	long := strings.Repeat("x", 2*maxFailureBytes)
	for _, tc := range []struct {
		name string
		err  *portproto.ProgramError
		want string
	}{
		{"a JavaScript stack loses the line that repeats the call",
			&portproto.ProgramError{Name: "Exit", Message: "process.exit(0)", Stack: "Exit: process.exit(0)\n    at program.ts:1:9"},
			"the program exited with status 0 before returning (process.exit(0))\n    at program.ts:1:9"},
		{"a stack with no program frame adds nothing",
			&portproto.ProgramError{Name: "Exit", Message: "process.exit(0)", Stack: "Exit: process.exit(0)"},
			"the program exited with status 0 before returning (process.exit(0))"},
		{"no stack",
			&portproto.ProgramError{Name: "Exit", Message: "os.abort()"},
			"the program exited with status 0 before returning (os.abort())"},
		{"a Python traceback stays whole",
			&portproto.ProgramError{Name: "SystemExit", Message: "SystemExit", Stack: "Traceback (most recent call last):\n  File \"program.py\", line 1, in __dsh_main__\nSystemExit\n"},
			"the program exited with status 0 before returning (SystemExit)\nTraceback (most recent call last):\n  File \"program.py\", line 1, in __dsh_main__\nSystemExit"},
		{"no message",
			&portproto.ProgramError{Name: "Exit"},
			"the program exited with status 0 before returning"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := programExit(&portproto.Done{Exit: &portproto.ProgramExit{}, Error: tc.err})
			if f.Kind != backend.FailureExit || f.Message != tc.want {
				t.Fatalf("got %s %q, want exit %q", f.Kind, f.Message, tc.want)
			}
		})
	}
	// The status comes first, and the message is cut like any runner's.
	f := programExit(&portproto.Done{Exit: &portproto.ProgramExit{Status: 255}, Error: &portproto.ProgramError{Name: "SystemExit", Message: "SystemExit: " + long}})
	if !strings.HasPrefix(f.Message, "the program exited with status 255 before returning (SystemExit: xxx") || len(f.Message) > maxFailureBytes+64 {
		t.Fatalf("got %d bytes: %.100q", len(f.Message), f.Message)
	}
}

// Without a done frame the host reports the container's own status, and
// names the signal when the status says a signal ended the runner.
func TestExitFailureStatesTheStatus(t *testing.T) {
	l := DefaultLimits()
	for _, tc := range []struct {
		st   ExitStatus
		want string
	}{
		{ExitStatus{Code: 0}, "the container exited with status 0 before the program returned"},
		{ExitStatus{Code: 3}, "the container exited with status 3 before the program returned"},
		{ExitStatus{Code: 128}, "the container exited with status 128 before the program returned"},
		{ExitStatus{Code: 134}, "the container exited with status 134 (128 + signal 6: aborted) before the program returned"},
		{ExitStatus{Code: 137}, "the container exited with status 137 (128 + signal 9: killed) before the program returned"},
		{ExitStatus{Code: 143}, "the container exited with status 143 (128 + signal 15: terminated) before the program returned"},
		{ExitStatus{Code: 255}, "the container exited with status 255 before the program returned"},
	} {
		f := exitFailure(tc.st, l)
		if f.Kind != backend.FailureExit || f.Message != tc.want {
			t.Errorf("status %d: got %s %q, want exit %q", tc.st.Code, f.Kind, f.Message, tc.want)
		}
	}
}
