package container

import (
	"context"
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

// The default owner label is a valid label value.
func TestDefaultOwnerIsALabelValue(t *testing.T) {
	if err := checkLabelValue("owner", defaultOwner()); err != nil {
		t.Fatal(err)
	}
}
