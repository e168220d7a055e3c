package bench

import (
	"context"
	"encoding/binary"
	"io"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func frame(b []byte) []byte {
	return append(binary.BigEndian.AppendUint32(nil, uint32(len(b))), b...)
}

// The raw floor's host end echoes length-prefixed frames, returns the
// client's timings, and refuses an empty or oversized frame.
func TestServeRawFloor(t *testing.T) {
	for _, c := range []struct {
		name, want string
		client     func(net.Conn)
	}{
		{"echo", "", func(c net.Conn) {
			c.Write(frame([]byte("xx")))
			got := make([]byte, 6)
			io.ReadFull(c, got)
			if string(got[4:]) != "xx" {
				t.Errorf("echo: %q", got)
			}
			c.Write(frame([]byte("[1,2]")))
		}},
		{"empty", "a frame of 0 bytes", func(c net.Conn) { c.Write(frame(nil)) }},
		{"oversized", "a frame of 4294967295 bytes", func(c net.Conn) { c.Write([]byte{0xff, 0xff, 0xff, 0xff}) }},
		{"gone", "EOF", func(c net.Conn) {}},
	} {
		t.Run(c.name, func(t *testing.T) {
			ln, err := net.Listen("unix", filepath.Join(t.TempDir(), "s"))
			if err != nil {
				t.Fatal(err)
			}
			defer ln.Close()
			go func() {
				conn, err := net.Dial("unix", ln.Addr().String())
				if err != nil {
					return
				}
				defer conn.Close()
				c.client(conn)
				time.Sleep(100 * time.Millisecond)
			}()
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			got, err := serveRawFloor(ctx, ln)
			if c.want == "" {
				if err != nil || string(got) != "[1,2]" {
					t.Fatalf("%q %v", got, err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %v, want %q", err, c.want)
			}
		})
	}
}
