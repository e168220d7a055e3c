// Package testenv decides what a test does when the machine lacks something
// it needs: the Docker daemon, a runner image, the SDK check image, an OCI
// runtime. One variable, DSH_TEST_DAEMON, sets the policy:
//
//   - unset: use what is there; a test whose need is missing skips, and
//     the reason names the fix. `go test ./...` passes on a machine
//     without Docker.
//   - "require": a missing need fails the test, naming the fix. `.ci/run`
//     and `make test` set it, so CI never skips silently.
//   - "off": never touch the daemon; every daemon-bound test skips before
//     it does. `make unit` sets it.
//
// The one skip "require" allows is [Unsupported]: something this host truly
// cannot provide, such as an OCI runtime it cannot run. It is logged with its
// reason and appended to the file DSH_TEST_SKIP_LOG names, so CI can print
// every such skip after the run.
package testenv

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"os"
	"regexp"
	"runtime"
	"sync"
	"testing"
)

const (
	// Var names the variable that sets the policy.
	Var = "DSH_TEST_DAEMON"
	// SkipLogVar names a file every skip is appended to, one line each
	// ("<test>: <reason>"), when set.
	SkipLogVar = "DSH_TEST_SKIP_LOG"
)

// Mode is the policy DSH_TEST_DAEMON sets.
type Mode string

const (
	Auto    Mode = ""        // skip what is missing
	Require Mode = "require" // fail on what is missing
	Off     Mode = "off"     // never touch the daemon
)

// CurrentMode reads DSH_TEST_DAEMON. Any value but the three modes is an
// error: a typo must not quietly turn failures back into skips.
func CurrentMode() (Mode, error) {
	switch m := Mode(os.Getenv(Var)); m {
	case Auto, Require, Off:
		return m, nil
	default:
		return Auto, fmt.Errorf("%s=%q: use %q, %q or leave it unset", Var, string(m), Require, Off)
	}
}

func mode(t testing.TB) Mode {
	t.Helper()
	m, err := CurrentMode()
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// UsesDaemon marks t as needing the Docker daemon: under DSH_TEST_DAEMON=off
// it skips t before anything touches the daemon. Call it first.
func UsesDaemon(t testing.TB) {
	t.Helper()
	if mode(t) == Off {
		skip(t, fmt.Sprintf("%s=%s: this test needs the Docker daemon", Var, Off))
	}
}

// Missing reports that something t needs is missing; the message says what
// and how to get it. It skips t, or fails it under DSH_TEST_DAEMON=require.
func Missing(t testing.TB, format string, args ...any) {
	t.Helper()
	msg := fmt.Sprintf(format, args...)
	if mode(t) == Require {
		t.Fatalf("%s (%s=%s: missing is a failure)", msg, Var, Require)
	}
	skip(t, msg)
}

// Unsupported skips t because this host truly cannot provide what it needs
// (for example an OCI runtime its kernel cannot run). It skips under every
// mode, require included, so use it for nothing a CI machine is expected to
// have. The reason is logged and appended to DSH_TEST_SKIP_LOG.
func Unsupported(t testing.TB, format string, args ...any) {
	t.Helper()
	skip(t, "unsupported on this host: "+fmt.Sprintf(format, args...))
}

func skip(t testing.TB, msg string) {
	t.Helper()
	if path := os.Getenv(SkipLogVar); path != "" {
		if err := appendLine(path, t.Name()+": "+msg); err != nil {
			t.Errorf("%s: %v", SkipLogVar, err)
		}
	}
	t.Skip(msg)
}

func appendLine(path, line string) error {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	_, err = f.WriteString(line + "\n")
	return errors.Join(err, f.Close())
}

// RunOnly makes the next m.Run run only the top-level test named name and no
// benchmark or fuzz target. A TestMain that finds its package cannot run at
// all (no daemon, no runner image) calls it, and name is a test that reports
// the problem through [Missing]: `go test` then shows one skip, or under
// require one failure, naming the fix, instead of every test failing on what
// is missing. It parses the command line first if TestMain has not.
func RunOnly(name string) error {
	if !flag.Parsed() {
		flag.Parse()
	}
	for f, v := range map[string]string{
		"test.run":   "^" + regexp.QuoteMeta(name) + "$",
		"test.skip":  "",
		"test.bench": "",
		"test.fuzz":  "",
	} {
		if err := flag.Set(f, v); err != nil {
			return fmt.Errorf("testenv: -%s: %w", f, err)
		}
	}
	return nil
}

// Allocated is the bytes the process allocated while f ran (the Go
// heap's running total, after a collection so that f starts from a quiet
// heap): what an allocation bound in a test measures. Other goroutines'
// allocations count too; call it where none run.
func Allocated(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// LockedBuffer is a log destination that goroutines write and a test
// reads at the same time.
type LockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *LockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *LockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
