package nodelocal

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// Remove touches only a directory of ours directly in the base, whatever
// a container's label says.
func TestSocketDirsRemoveOnlyOurs(t *testing.T) {
	root := t.TempDir()
	base := filepath.Join(root, "base")
	for _, d := range []string{base, filepath.Join(root, SockDirPrefix+"outside"), filepath.Join(base, "not-ours"), filepath.Join(base, SockDirPrefix+"x")} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	os.WriteFile(filepath.Join(base, SockDirPrefix+"x"+OwnerSuffix), nil, 0o600)
	s := SocketDirs{Base: base}
	for _, bridge := range []string{"", "not-ours", "../" + SockDirPrefix + "outside", SockDirPrefix + "x/..", "/" + SockDirPrefix + "x"} {
		if dir, ok := s.Remove(bridge); ok {
			t.Errorf("Remove(%q) removed %s", bridge, dir)
		}
	}
	for _, p := range []string{filepath.Join(root, SockDirPrefix+"outside"), filepath.Join(base, "not-ours"), filepath.Join(base, SockDirPrefix+"x")} {
		if _, err := os.Stat(p); err != nil {
			t.Fatalf("%s: %v", p, err)
		}
	}
	if dir, ok := s.Remove(SockDirPrefix + "x"); !ok || dir != filepath.Join(base, SockDirPrefix+"x") {
		t.Fatalf("Remove of ours: %q, %v", dir, ok)
	}
	for _, p := range []string{filepath.Join(base, SockDirPrefix+"x"), filepath.Join(base, SockDirPrefix+"x"+OwnerSuffix)} {
		if _, err := os.Lstat(p); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("%s left: %v", p, err)
		}
	}
	if got, err := (SocketDirs{Base: filepath.Join(root, "missing")}).Sweep(0); err != nil || len(got) != 0 {
		t.Fatalf("sweeping a missing base: %v, %v", got, err)
	}
	if got, err := s.Sweep(time.Hour); err != nil || len(got) != 0 {
		t.Fatalf("sweeping young directories: %v, %v", got, err)
	}
}
