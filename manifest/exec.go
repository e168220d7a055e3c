package manifest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"syscall"
	"time"

	"github.com/containerd/errdefs"
)

// Limits of one command tool call (see the package doc).
const (
	// DefaultTimeout is a call's wall time when the tool sets no timeoutMs.
	DefaultTimeout = 30 * time.Second
	// MaxTimeout is the largest timeoutMs a tool may set.
	MaxTimeout = 10 * time.Minute
	// DefaultMaxOutputBytes is the stdout a call returns when the tool sets
	// no maxOutputBytes.
	DefaultMaxOutputBytes = 1 << 20
	// HardMaxOutputBytes is the largest maxOutputBytes a tool may set.
	HardMaxOutputBytes = 16 << 20
	// MaxMessageBytes is the stderr a rejection message keeps.
	MaxMessageBytes = 16 << 10
)

// waitDelay bounds how long a call waits, after the tool's process group
// is gone, for a process outside the group that holds the tool's output
// open (os/exec's Cmd.WaitDelay).
const waitDelay = 2 * time.Second

// errTimedOut is the cause of a call's context when timeoutMs passes.
var errTimedOut = errors.New("tool timed out")

func checkTimeout(name string, ms int) error {
	if ms < 1 || int64(ms) > MaxTimeout.Milliseconds() {
		return fmt.Errorf("tool %q: timeoutMs is %d; it must be between 1 and %d (10 minutes); omit it for the default %d",
			name, ms, MaxTimeout.Milliseconds(), DefaultTimeout.Milliseconds())
	}
	return nil
}

func checkMaxOutput(name string, n int) error {
	if n < 1 || n > HardMaxOutputBytes {
		return fmt.Errorf("tool %q: maxOutputBytes is %d; it must be between 1 and %d (16 MiB); omit it for the default %d",
			name, n, HardMaxOutputBytes, DefaultMaxOutputBytes)
	}
	return nil
}

// limits returns the tool's timeout and stdout cap: the defaults for
// zero fields, an invalid-argument error for values out of range.
func (t Tool) limits() (time.Duration, int, error) {
	timeout, maxOut := DefaultTimeout, DefaultMaxOutputBytes
	if t.TimeoutMs != 0 {
		if err := checkTimeout(t.Name, t.TimeoutMs); err != nil {
			return 0, 0, fmt.Errorf("%w: %w", errdefs.ErrInvalidArgument, err)
		}
		timeout = time.Duration(t.TimeoutMs) * time.Millisecond
	}
	if t.MaxOutputBytes != 0 {
		if err := checkMaxOutput(t.Name, t.MaxOutputBytes); err != nil {
			return 0, 0, fmt.Errorf("%w: %w", errdefs.ErrInvalidArgument, err)
		}
		maxOut = t.MaxOutputBytes
	}
	return timeout, maxOut, nil
}

// Exec runs a command tool with args on stdin, in its own process group,
// for at most its timeout. It returns stdout, capped and marked when cut,
// or an error carrying stderr, capped and marked when cut, when the
// command fails. When Exec returns, every process left in the tool's
// process group has been sent SIGKILL. See the package doc.
func Exec(ctx context.Context, t Tool, args json.RawMessage) (string, error) {
	if len(t.Command) == 0 {
		return "", fmt.Errorf("tool %q has no command", t.Name)
	}
	timeout, maxOut, err := t.limits()
	if err != nil {
		return "", err
	}
	ctx, cancel := context.WithTimeoutCause(ctx, timeout, errTimedOut)
	defer cancel()
	interrupted := func() error {
		if errors.Is(context.Cause(ctx), errTimedOut) {
			return fmt.Errorf("tool %q timed out after %v", t.Name, timeout)
		}
		return fmt.Errorf("tool %q cancelled", t.Name)
	}
	if ctx.Err() != nil {
		return "", interrupted()
	}

	stdout, stderr := newCapWriter(maxOut), newCapWriter(MaxMessageBytes)
	killed, err := runGroup(ctx, t.Command, args, stdout, stderr)
	var ee *exec.ExitError
	switch {
	case killed:
		return "", interrupted()
	case errors.As(err, &ee):
		if msg := stderr.message(); msg != "" {
			return "", errors.New(msg)
		}
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return "", fmt.Errorf("tool %q was killed by signal %d (%v)", t.Name, int(ws.Signal()), ws.Signal())
		}
		return "", fmt.Errorf("tool %q exited with status %d", t.Name, ee.ExitCode())
	case errors.Is(err, exec.ErrWaitDelay):
		return "", fmt.Errorf("tool %q exited, but a process it started outside its process group kept its output open; gave up after %v", t.Name, waitDelay)
	case err != nil:
		if ctx.Err() != nil {
			return "", interrupted()
		}
		return "", fmt.Errorf("tool %q: %w", t.Name, err)
	}
	return stdout.result(), nil
}

// result renders captured stdout as a call's result text.
func (w *capWriter) result() string {
	if !w.truncated() {
		return strings.ToValidUTF8(string(w.buf), "\uFFFD")
	}
	return strings.ToValidUTF8(string(wholeRunes(w.buf)), "\uFFFD") +
		fmt.Sprintf("\n[dsh-container: output truncated: the tool printed %d bytes, the cap is %d]", w.total, w.max)
}

// message renders captured stderr as a rejection message.
func (w *capWriter) message() string {
	if !w.truncated() {
		return strings.TrimSpace(strings.ToValidUTF8(string(w.buf), "\uFFFD"))
	}
	kept := wholeRunes(w.buf)
	return strings.TrimSpace(strings.ToValidUTF8(string(kept), "\uFFFD")) +
		fmt.Sprintf("… (%d more bytes cut)", w.total-int64(len(kept)))
}
