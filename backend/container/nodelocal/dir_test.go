package nodelocal

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/containerd/errdefs"
)

// PrivateDir makes a missing directory 0700 with its parents, closes one
// others can read or enter, and refuses, untouched, one others can
// write to, a symlink, a file and a directory of another user.
func TestPrivateDir(t *testing.T) {
	root := t.TempDir()
	mode := func(p string) os.FileMode {
		t.Helper()
		fi, err := os.Lstat(p)
		if err != nil {
			t.Fatal(err)
		}
		return fi.Mode()
	}

	made := filepath.Join(root, "a", "b")
	if err := PrivateDir(made); err != nil {
		t.Fatalf("missing: %v", err)
	}
	if m := mode(made); !m.IsDir() || m.Perm() != 0o700 {
		t.Fatalf("made %v", m)
	}
	if err := PrivateDir(made); err != nil {
		t.Fatalf("again: %v", err)
	}

	open := filepath.Join(root, "open")
	os.Mkdir(open, 0o700)
	os.Chmod(open, 0o755)
	if err := PrivateDir(open); err != nil {
		t.Fatalf("readable by others: %v", err)
	}
	if m := mode(open); m.Perm() != 0o700 {
		t.Fatalf("readable by others: left %v", m)
	}

	refused := func(name, p string, want os.FileMode) {
		t.Helper()
		err := PrivateDir(p)
		if !errdefs.IsFailedPrecondition(err) || !strings.Contains(err.Error(), p) {
			t.Errorf("%s: got %v", name, err)
		}
		if m := mode(p); m != want {
			t.Errorf("%s: changed to %v", name, m)
		}
	}
	for _, perm := range []os.FileMode{0o777, 0o770, 0o702} {
		p := filepath.Join(root, "writable"+perm.String())
		os.Mkdir(p, 0o700)
		os.Chmod(p, perm)
		refused("writable by others "+perm.String(), p, os.ModeDir|perm)
	}
	link := filepath.Join(root, "link")
	if err := os.Symlink(made, link); err != nil {
		t.Fatal(err)
	}
	refused("a symlink to a private directory", link, mode(link))
	dangling := filepath.Join(root, "dangling")
	if err := os.Symlink(filepath.Join(root, "nowhere"), dangling); err != nil {
		t.Fatal(err)
	}
	refused("a symlink to nothing", dangling, mode(dangling))
	if _, err := os.Lstat(filepath.Join(root, "nowhere")); err == nil {
		t.Error("a symlink's target was made")
	}
	file := filepath.Join(root, "file")
	os.WriteFile(file, nil, 0o600)
	refused("a file", file, 0o600)

	if os.Geteuid() == 0 {
		other := filepath.Join(root, "other")
		os.Mkdir(other, 0o700)
		if err := os.Chown(other, 12345, 12345); err != nil {
			t.Fatal(err)
		}
		refused("another user's", other, os.ModeDir|0o700)
		if err := PrivateDir(other); !strings.Contains(err.Error(), "owned by uid 12345") {
			t.Errorf("the owner is not named: %v", err)
		}
	}
}
