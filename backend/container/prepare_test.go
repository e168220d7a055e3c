package container

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dsh-container/dsh-container/backend"
)

// prepareTest prepares src with a stripper of its own.
func prepareTest(t *testing.T, lang backend.Language, src string) (prepared, *backend.Failure) {
	t.Helper()
	s := newStripper(1)
	t.Cleanup(s.close)
	p, fail, err := prepare(context.Background(), lang, src, s)
	if err != nil {
		t.Fatalf("prepare: %v", err)
	}
	return p, fail
}

func TestPrepareSyntaxErrorNamesTheModelsLine(t *testing.T) {
	for _, tc := range []struct {
		src  string
		want string
	}{
		{"const a = 1\nconst b = ;\n", "program.ts:2:11:"},
		{"let x = (", "program.ts:1:"},
		{"return 1\n}\n", "program.ts:3:1: Expected"},
	} {
		_, fail := prepareTest(t, backend.TypeScript, tc.src)
		if fail == nil {
			t.Fatalf("%q: no failure", tc.src)
		}
		if fail.Kind != backend.FailureException || !strings.HasPrefix(fail.Message, "SyntaxError: ") || !strings.Contains(fail.Message, tc.want) {
			t.Errorf("%q: got %s %q, want exception containing %q", tc.src, fail.Kind, fail.Message, tc.want)
		}
	}
}

func TestPrepareAllowsTopLevelAwaitAndReturn(t *testing.T) {
	p, fail := prepareTest(t, backend.TypeScript, "interface A { a: number }\nconst x: A = { a: await Promise.resolve(1) }\nreturn x.a as number\n")
	if fail != nil {
		t.Fatal(fail)
	}
	if !strings.HasPrefix(p.program, "(async () => {") || strings.Contains(p.program, "interface") {
		t.Fatalf("unexpected program %q", p.program)
	}
}

func TestPrepareLeavesPythonAlone(t *testing.T) {
	src := "x = 1\nreturn x\n"
	p, fail := prepareTest(t, backend.Python, src)
	if fail != nil || p.program != src || p.sourceMap != "" {
		t.Fatalf("got %+v %v", p, fail)
	}
}

// The shifted map sends generated positions to the model's own lines.
func TestSourceMapPointsAtOriginalLines(t *testing.T) {
	src := "interface A {\n  a: string\n}\n\n\nthrow new Error('boom')\n"
	p, fail := prepareTest(t, backend.TypeScript, src)
	if fail != nil {
		t.Fatal(fail)
	}
	var m struct {
		Sources  []string `json:"sources"`
		Mappings string   `json:"mappings"`
	}
	if err := json.Unmarshal([]byte(p.sourceMap), &m); err != nil {
		t.Fatal(err)
	}
	genLines := strings.Split(p.program, "\n")
	throwGen := -1
	for i, l := range genLines {
		if strings.Contains(l, "throw") {
			throwGen = i
		}
	}
	if throwGen < 0 {
		t.Fatalf("no throw in %q", p.program)
	}
	// Decode to absolute positions and find the segment on the throw line.
	srcLine := 0
	found := -1
	for li, line := range strings.Split(m.Mappings, ";") {
		for _, seg := range strings.Split(line, ",") {
			if seg == "" {
				continue
			}
			f, err := decodeVLQ(seg)
			if err != nil {
				t.Fatal(err)
			}
			if len(f) >= 4 {
				srcLine += f[2]
				if li == throwGen && found < 0 {
					found = srcLine
				}
			}
		}
	}
	if found != 5 { // zero-based: line 6 of the model's source
		t.Fatalf("throw maps to zero-based line %d, want 5 (map %s)", found, p.sourceMap)
	}
}

func TestVLQRoundTrip(t *testing.T) {
	for _, v := range []int{0, 1, -1, 15, 16, -16, 1000, -123456, 1 << 28} {
		var b strings.Builder
		encodeVLQ(&b, v)
		got, err := decodeVLQ(b.String())
		if err != nil || len(got) != 1 || got[0] != v {
			t.Errorf("%d → %q → %v %v", v, b.String(), got, err)
		}
	}
	for _, bad := range []string{"!", "g", "gggggggggg"} {
		if _, err := decodeVLQ(bad); err == nil {
			t.Errorf("decodeVLQ(%q) accepted", bad)
		}
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
