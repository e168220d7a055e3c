package images

import (
	"archive/tar"
	"io"
	"strings"
	"testing"

	"github.com/dsh-container/dsh-container/backend"
)

func TestTagsAreContentAddressed(t *testing.T) {
	seen := map[string]bool{}
	for _, im := range append(Runners, SDKCheck) {
		tag := im.Tag()
		if tag != im.Tag() || tag != im.DefaultTag() {
			t.Fatalf("%s: tag not stable", im.Name)
		}
		if !strings.HasPrefix(tag, Repository+im.Name+":") || len(tag) != len(Repository+im.Name+":")+12 {
			t.Fatalf("tag %q", tag)
		}
		if seen[tag] {
			t.Fatalf("duplicate tag %q", tag)
		}
		seen[tag] = true
	}
	if b := DefaultBase.Tag(); !strings.HasPrefix(b, Repository+"base:trixie-") {
		t.Fatalf("base tag %q", b)
	}
	changed := DefaultBase
	changed.Packages = append([]string{"extra"}, changed.Packages...)
	if changed.Tag() == DefaultBase.Tag() {
		t.Fatal("base tag ignores its package list")
	}
}

func TestRunnerFor(t *testing.T) {
	for _, l := range backend.Languages() {
		im, err := RunnerFor(l)
		if err != nil || im.Language != l {
			t.Fatalf("%s: %v", l, err)
		}
	}
	if _, err := RunnerFor("ruby"); err == nil {
		t.Fatal("ruby has a runner")
	}
}

func TestBuildContextHoldsTheInputs(t *testing.T) {
	r, err := Runners[0].context()
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(r)
	var names []string
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, h.Name)
	}
	if strings.Join(names, ",") != "Dockerfile,bootstrap.js" {
		t.Fatalf("context %v", names)
	}
}
