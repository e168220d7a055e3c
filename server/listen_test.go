package server_test

import (
	"net"
	"os"
	"path/filepath"
	"testing"

	"github.com/dsh-container/dsh-container/server"
)

func TestParseAddress(t *testing.T) {
	t.Setenv("XDG_RUNTIME_DIR", "/run/user/7")
	for in, want := range map[string]server.Address{
		"":                    {Network: "unix", Address: "/run/user/7/dsh-container-api/api.sock", Default: true},
		"/x/api.sock":         {Network: "unix", Address: "/x/api.sock"},
		"unix:///x/../y.sock": {Network: "unix", Address: "/y.sock"},
		"tcp://127.0.0.1:80":  {Network: "tcp", Address: "127.0.0.1:80"},
		"tcp://[::1]:80":      {Network: "tcp", Address: "[::1]:80"},
		"tcp://0.0.0.0:8080":  {Network: "tcp", Address: "0.0.0.0:8080"},
	} {
		got, err := server.ParseAddress(in)
		if err != nil || got != want {
			t.Errorf("%q: %+v %v, want %+v", in, got, err, want)
		}
	}
	for _, in := range []string{"tcp://:8080", "tcp://127.0.0.1", "unix://rel.sock", "http://x:1", "api.sock", "tcp://h:1/path"} {
		if a, err := server.ParseAddress(in); err == nil {
			t.Errorf("%q: parsed as %+v", in, a)
		}
	}
}

func TestListenUnix(t *testing.T) {
	base := t.TempDir()
	t.Setenv("XDG_RUNTIME_DIR", base)
	a, _ := server.ParseAddress("")
	ln, err := server.Listen(a)
	if err != nil {
		t.Fatal(err)
	}
	if !server.Loopback(ln) {
		t.Error("a Unix socket is local")
	}
	dir, _ := os.Stat(filepath.Dir(a.Address))
	sock, _ := os.Stat(a.Address)
	if dir.Mode().Perm() != 0o700 || sock.Mode().Perm() != 0o660 {
		t.Errorf("dir %v socket %v, want 0700 and 0660", dir.Mode(), sock.Mode())
	}
	// A live socket is not taken over.
	if _, err := server.Listen(a); err == nil {
		t.Error("second Listen on a live socket succeeded")
	}
	ln.Close()
	if _, err := os.Stat(a.Address); !os.IsNotExist(err) {
		t.Errorf("Close left the socket: %v", err)
	}
	// A stale socket (its server died without unlinking) is replaced.
	stale, err := net.ListenUnix("unix", &net.UnixAddr{Name: a.Address, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	stale.SetUnlinkOnClose(false)
	stale.Close()
	ln, err = server.Listen(a)
	if err != nil {
		t.Fatalf("stale socket: %v", err)
	}
	ln.Close()
	// A file that is not a socket is left alone.
	os.WriteFile(a.Address, nil, 0o600)
	if _, err := server.Listen(a); err == nil {
		t.Error("Listen replaced a regular file")
	}
}

func TestListenTCP(t *testing.T) {
	a, _ := server.ParseAddress("tcp://127.0.0.1:0")
	ln, err := server.Listen(a)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	if !server.Loopback(ln) {
		t.Error("127.0.0.1 is loopback")
	}
}
