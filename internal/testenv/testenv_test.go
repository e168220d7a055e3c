package testenv

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// fakeT records what a helper did to its test; Skip and Fatal end the
// calling goroutine as the real ones do.
type fakeT struct {
	testing.TB
	skipped, failed string
}

func (f *fakeT) Helper()      {}
func (f *fakeT) Name() string { return "TestFake" }
func (f *fakeT) Skip(args ...any) {
	f.skipped = fmt.Sprint(args...)
	runtime.Goexit()
}
func (f *fakeT) Fatal(args ...any) {
	f.failed = fmt.Sprint(args...)
	runtime.Goexit()
}
func (f *fakeT) Fatalf(format string, args ...any) {
	f.failed = fmt.Sprintf(format, args...)
	runtime.Goexit()
}
func (f *fakeT) Errorf(format string, args ...any) { f.failed = fmt.Sprintf(format, args...) }

func call(fn func(testing.TB)) *fakeT {
	f := &fakeT{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		fn(f)
	}()
	<-done
	return f
}

func TestPolicy(t *testing.T) {
	missing := func(t testing.TB) { Missing(t, "the Docker daemon is unreachable; start it") }
	unsupported := func(t testing.TB) { Unsupported(t, "runsc cannot run here") }
	type want struct{ skip, fail string }
	for _, tc := range []struct {
		mode string
		fn   func(testing.TB)
		want want
	}{
		{"", UsesDaemon, want{}},
		{"", missing, want{skip: "the Docker daemon is unreachable; start it"}},
		{"", unsupported, want{skip: "unsupported on this host: runsc cannot run here"}},
		{"require", UsesDaemon, want{}},
		{"require", missing, want{fail: "the Docker daemon is unreachable; start it (DSH_TEST_DAEMON=require: missing is a failure)"}},
		{"require", unsupported, want{skip: "unsupported on this host: runsc cannot run here"}},
		{"off", UsesDaemon, want{skip: "DSH_TEST_DAEMON=off: this test needs the Docker daemon"}},
		{"off", missing, want{skip: "the Docker daemon is unreachable; start it"}},
		{"off", unsupported, want{skip: "unsupported on this host: runsc cannot run here"}},
		{"1", UsesDaemon, want{fail: `DSH_TEST_DAEMON="1": use "require", "off" or leave it unset`}},
		{"1", missing, want{fail: `DSH_TEST_DAEMON="1": use "require", "off" or leave it unset`}},
	} {
		t.Setenv(Var, tc.mode)
		t.Setenv(SkipLogVar, "")
		got := call(tc.fn)
		if got.skipped != tc.want.skip || got.failed != tc.want.fail {
			t.Errorf("%s=%q: skipped %q, failed %q; want skipped %q, failed %q", Var, tc.mode, got.skipped, got.failed, tc.want.skip, tc.want.fail)
		}
	}
}

func TestSkipLog(t *testing.T) {
	log := filepath.Join(t.TempDir(), "skips")
	t.Setenv(SkipLogVar, log)
	t.Setenv(Var, "")
	call(func(t testing.TB) { Missing(t, "image x is missing") })
	call(func(t testing.TB) { Unsupported(t, "no runsc") })
	t.Setenv(Var, "require")
	if f := call(func(t testing.TB) { Missing(t, "image y is missing") }); f.failed == "" {
		t.Fatal("require: Missing did not fail")
	}
	data, err := os.ReadFile(log)
	if err != nil {
		t.Fatal(err)
	}
	want := "TestFake: image x is missing\nTestFake: unsupported on this host: no runsc\n"
	if string(data) != want {
		t.Fatalf("skip log %q, want %q", data, want)
	}
}

// runOnlyEnv makes TestMain call RunOnly("TestRunOnlyTarget") in a child
// test binary.
const runOnlyEnv = "DSH_TESTENV_RUN_ONLY"

func TestMain(m *testing.M) {
	if os.Getenv(runOnlyEnv) == "1" {
		if err := RunOnly("TestRunOnlyTarget"); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
	}
	os.Exit(m.Run())
}

// TestRunOnlyTarget is the one test a RunOnly child runs.
func TestRunOnlyTarget(t *testing.T) {
	if os.Getenv(runOnlyEnv) == "1" {
		t.Log("RUN-ONLY TARGET RAN")
	}
}

// BenchmarkRunOnlyExcluded must not run in a RunOnly child.
func BenchmarkRunOnlyExcluded(b *testing.B) {
	if os.Getenv(runOnlyEnv) == "1" {
		b.Log("EXCLUDED BENCHMARK RAN")
	}
}

// RunOnly overrides -run, -skip and -bench: only the named test runs.
func TestRunOnly(t *testing.T) {
	cmd := exec.Command(os.Args[0], "-test.v", "-test.run=TestPolicy", "-test.skip=TestRunOnlyTarget", "-test.bench=.", "-test.benchtime=1x")
	cmd.Env = append(os.Environ(), runOnlyEnv+"=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	s := string(out)
	if !strings.Contains(s, "RUN-ONLY TARGET RAN") || strings.Contains(s, "=== RUN   TestPolicy") || strings.Contains(s, "EXCLUDED BENCHMARK RAN") {
		t.Fatalf("child ran something else than TestRunOnlyTarget:\n%s", s)
	}
}
