package server

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/containerd/errdefs"
)

// Address is a parsed listen address.
type Address struct {
	// Network is "unix" or "tcp".
	Network string
	// Address is the socket path or host:port.
	Address string
	// Default reports the default socket (its folder is private and
	// created on demand).
	Default bool
}

func (a Address) String() string {
	if a.Network == "unix" {
		return "unix://" + a.Address
	}
	return "tcp://" + a.Address
}

// DefaultSocketPath is where the API listens unless told otherwise:
// $XDG_RUNTIME_DIR/dsh-container-api/api.sock, or
// <tmp>/dsh-container-api-<uid>/api.sock.
func DefaultSocketPath() string {
	if d := os.Getenv("XDG_RUNTIME_DIR"); d != "" {
		return filepath.Join(d, "dsh-container-api", "api.sock")
	}
	return filepath.Join(os.TempDir(), fmt.Sprintf("dsh-container-api-%d", os.Getuid()), "api.sock")
}

// ParseAddress parses a listen address: "" (the default Unix socket),
// unix:///abs/path.sock, an absolute socket path, or tcp://host:port with
// an explicit host. Errors wrap errdefs.ErrInvalidArgument.
func ParseAddress(s string) (Address, error) {
	invalid := func(format string, args ...any) (Address, error) {
		return Address{}, fmt.Errorf("%w: listen address %q: %s", errdefs.ErrInvalidArgument, s, fmt.Sprintf(format, args...))
	}
	switch {
	case s == "":
		return Address{Network: "unix", Address: DefaultSocketPath(), Default: true}, nil
	case strings.HasPrefix(s, "/"):
		return Address{Network: "unix", Address: filepath.Clean(s)}, nil
	}
	u, err := url.Parse(s)
	if err != nil {
		return invalid("%v", err)
	}
	switch u.Scheme {
	case "unix":
		p := u.Path
		if u.Host != "" || !filepath.IsAbs(p) {
			return invalid("a Unix socket needs an absolute path: unix:///path/to/api.sock")
		}
		return Address{Network: "unix", Address: filepath.Clean(p)}, nil
	case "tcp":
		host, port, err := net.SplitHostPort(u.Host)
		if err != nil || port == "" || u.Path != "" {
			return invalid("use tcp://HOST:PORT, e.g. tcp://127.0.0.1:8080")
		}
		if host == "" {
			return invalid("name the host: tcp://127.0.0.1:%s for this machine only, or tcp://0.0.0.0:%s for every interface (the API has no authentication)", port, port)
		}
		return Address{Network: "tcp", Address: u.Host}, nil
	}
	return invalid("use unix:///path.sock or tcp://HOST:PORT")
}

// Listen opens a listener on a. A Unix socket is created mode 0660 (its
// folder, when it is the default one or does not exist, mode 0700 and
// ours); a stale socket left by a dead server is replaced, a live one is
// an error. Closing the listener removes the socket.
func Listen(a Address) (net.Listener, error) {
	if a.Network == "tcp" {
		return net.Listen("tcp", a.Address)
	}
	dir := filepath.Dir(a.Address)
	if a.Default {
		if err := privateDir(dir); err != nil {
			return nil, err
		}
	} else if _, err := os.Stat(dir); errors.Is(err, fs.ErrNotExist) {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return nil, err
		}
	}
	if err := removeStale(a.Address); err != nil {
		return nil, err
	}
	old := syscall.Umask(0o117) // the socket is born 0660: no window at 0777
	ln, err := net.Listen("unix", a.Address)
	syscall.Umask(old)
	if err != nil {
		return nil, err
	}
	if err := os.Chmod(a.Address, 0o660); err != nil {
		ln.Close()
		return nil, err
	}
	return ln, nil
}

// privateDir makes dir a folder only we can enter, refusing one someone
// else owns (a shared /tmp) or a symlink.
func privateDir(dir string) error {
	if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		return err
	}
	fi, err := os.Lstat(dir)
	if err != nil {
		return err
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !fi.IsDir() || !ok || int(st.Uid) != os.Getuid() {
		return fmt.Errorf("%w: %s is not a directory owned by uid %d; remove it or pass --listen", errdefs.ErrFailedPrecondition, dir, os.Getuid())
	}
	return os.Chmod(dir, 0o700)
}

// removeStale removes a socket at path that nobody answers on.
func removeStale(path string) error {
	fi, err := os.Lstat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if fi.Mode().Type() != fs.ModeSocket {
		return fmt.Errorf("%w: %s exists and is not a socket", errdefs.ErrAlreadyExists, path)
	}
	if c, err := net.DialTimeout("unix", path, time.Second); err == nil {
		c.Close()
		return fmt.Errorf("%w: another server is listening on %s", errdefs.ErrAlreadyExists, path)
	}
	return os.Remove(path)
}

// Loopback reports whether a listener accepts only local connections: a
// Unix socket, or TCP on a loopback address.
func Loopback(ln net.Listener) bool {
	switch a := ln.Addr().(type) {
	case *net.UnixAddr:
		return true
	case *net.TCPAddr:
		return a.IP.IsLoopback()
	}
	return false
}
