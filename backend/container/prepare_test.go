package container

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/containerd/errdefs"

	"github.com/dsh-container/dsh-container/backend"
	"github.com/dsh-container/dsh-container/tsprep"
)

func TestPrepareLeavesPythonAlone(t *testing.T) {
	src := "x = 1\nreturn x\n"
	p, fail, err := prepare(context.Background(), backend.Python, src, nil)
	if err != nil || fail != nil || p.program != src || p.sourceMap != "" {
		t.Fatalf("got %+v %v %v", p, fail, err)
	}
}

// tsprep's errors keep their classes: the program's fault is an exception
// it gets (the text unchanged), a worker that cannot run is unavailable.
func TestPrepareClassesTsprepErrors(t *testing.T) {
	s := tsprep.NewStripper(1, tsprep.Limits{})
	defer s.Close()
	p, fail, err := prepare(context.Background(), backend.TypeScript, "const a = 1\nconst b = ;\n", s)
	if err != nil || fail == nil || fail.Kind != backend.FailureException || !strings.HasPrefix(fail.Message, "SyntaxError: program.ts:2:11:") {
		t.Fatalf("a syntax error: got %+v %+v %v", p, fail, err)
	}
	if p, fail, err = prepare(context.Background(), backend.TypeScript, "const a: number = 1\nreturn a", s); err != nil || fail != nil || !strings.Contains(p.program, "return a") || p.sourceMap == "" {
		t.Fatalf("a program: got %+v %+v %v", p, fail, err)
	}
	// A handshake limit no worker can meet.
	never := tsprep.NewStripper(1, tsprep.Limits{Handshake: time.Nanosecond})
	defer never.Close()
	_, fail, err = prepare(context.Background(), backend.TypeScript, "return 1", never)
	if fail != nil || !errdefs.IsUnavailable(err) || !strings.HasPrefix(err.Error(), "unavailable: the type-strip worker did not answer its handshake") {
		t.Fatalf("a worker that did not start: got %+v %v", fail, err)
	}
}

func TestLimitsValidate(t *testing.T) {
	if err := DefaultLimits().Validate(); err != nil {
		t.Fatal(err)
	}
	l := DefaultLimits()
	l.TmpfsBytes = l.MemoryBytes
	if err := l.Validate(); err == nil || !strings.Contains(err.Error(), "tmpfs") {
		t.Fatalf("oversize tmpfs accepted: %v", err)
	}
	l = DefaultLimits()
	l.WallTime = 0
	if err := l.Validate(); err == nil {
		t.Fatal("zero wall time accepted")
	}
}

func TestOwnerLiveness(t *testing.T) {
	if !ownerLive(defaultOwner()) {
		t.Fatal("this process judged dead")
	}
	if err := checkLabelValue("owner", defaultOwner()); err != nil {
		t.Fatal(err)
	}
	host, _ := os.Hostname()
	for _, dead := range []string{"999999999.1." + hostTag(), "1.0." + hostTag(), host + "/999999999/1", host + "/1/not-a-start"} {
		if ownerLive(dead) {
			t.Errorf("%q judged live", dead)
		}
	}
	// Labels of neither form (WithOwner) cannot be judged: their
	// containers are left alone.
	for _, foreign := range []string{"garbage", "e2e-1-typescript-2", "x.y.z", "1.2.3.4", host + "/x/y"} {
		if !ownerLive(foreign) {
			t.Errorf("%q judged dead; it cannot be judged", foreign)
		}
	}
	for _, other := range []string{"1.1.00000000", "some-other-host/1/2"} {
		if !ownerLive(other) {
			t.Errorf("another host's owner %q judged dead; it cannot be judged from here", other)
		}
	}
	base := t.TempDir()
	own := filepath.Join(base, sockDirPrefix+"own")
	os.WriteFile(own+ownerSuffix, []byte(selfID()), 0o600)
	dead := filepath.Join(base, sockDirPrefix+"dead")
	os.WriteFile(dead+ownerSuffix, []byte("999999999.1"), 0o600)
	switch {
	case !dirLive(base, filepath.Base(own)):
		t.Error("own socket dir judged dead")
	case dirLive(base, filepath.Base(dead)):
		t.Error("dead socket dir judged live")
	case dirLive(base, sockDirPrefix+"no-owner-file"):
		t.Error("a socket dir without an owner file judged live")
	case !dirLive(base, fmt.Sprintf("run-%s-abc", selfID())):
		t.Error("own socket dir of the earlier layout judged dead")
	case dirLive(base, "run-999999999.1-abc"):
		t.Error("dead socket dir of the earlier layout judged live")
	case !dirLive(base, "not-ours"):
		t.Error("a directory that is not ours judged dead")
	}
}
