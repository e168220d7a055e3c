package nodelocal

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"syscall"

	"github.com/containerd/errdefs"
)

// PrivateDir makes dir (and its parents, 0700) if needed and insists that
// dir itself is a real directory, not a symlink, owned by this process's
// effective user, that no one else can write to; then it closes dir to
// everyone else (0700). A directory that fails is refused with
// errdefs.ErrFailedPrecondition, never repaired: on a shared /tmp another
// user could have made it first, and taking back a directory others
// could write to does not undo what they may already have put in it.
// A node-local driver keeps here what a sandbox's neighbours must not
// reach or replace: bridge sockets, output FIFOs, a wrapper the engine
// executes as root.
func PrivateDir(dir string) error {
	fi, err := os.Lstat(dir)
	if errors.Is(err, fs.ErrNotExist) {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return err
		}
		fi, err = os.Lstat(dir)
	}
	if err != nil {
		return err
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !fi.IsDir() || !ok || int(st.Uid) != os.Geteuid() || fi.Mode().Perm()&0o022 != 0 {
		owner := int64(-1)
		if ok {
			owner = int64(st.Uid)
		}
		return fmt.Errorf("%w: %s must be a directory owned by uid %d that no one else can write to; it is %v, owned by uid %d: remove it or choose another",
			errdefs.ErrFailedPrecondition, dir, os.Geteuid(), fi.Mode(), owner)
	}
	if fi.Mode().Perm() != 0o700 {
		return os.Chmod(dir, 0o700)
	}
	return nil
}
