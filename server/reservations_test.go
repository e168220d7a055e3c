package server_test

import (
	"bufio"
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/dsh-container/dsh-container/server"
)

// The error paths after a reservation give it back (adopted from the
// review of 70ea649): a chunked POST past its first 4 KiB that stalls
// (408), a start frame under way that stalls (408), and both when the
// client leaves mid-read.
func TestReservationsComeBackOnErrors(t *testing.T) {
	auth := server.NewAuth([]server.Tenant{{Name: "alpha", TokenSHA256: hashOf("a"), MaxRuns: 1, Queue: 0}})
	sf := newSessionFixture(t, server.WithAuth(auth), server.WithAdmission(4, 4), server.WithBodyTimeout(500*time.Millisecond))
	chunked := func(leave bool) {
		c, err := net.Dial("tcp", sf.ts.Listener.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		chunk := strings.Repeat("x", 6<<10)
		fmt.Fprintf(c, "POST /v1/run HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer a\r\nTransfer-Encoding: chunked\r\n\r\n%x\r\n%s\r\n", len(chunk), chunk)
		sf.waitRequestBytes(t, func(v float64) bool { return v == server.DefaultMaxBodyBytes })
		if leave {
			c.Close()
			return
		}
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil || resp.StatusCode != http.StatusRequestTimeout {
			t.Fatalf("stalled chunked POST: %v %v", resp, err)
		}
	}
	chunked(false)
	sf.waitRequestBytes(t, func(v float64) bool { return v == 0 })
	chunked(true)
	sf.waitRequestBytes(t, func(v float64) bool { return v == 0 })

	frame := padded(16 << 10)
	p := sf.dial(t, bearer("a"))
	p.startUnderWay(frame)
	sf.waitRequestBytes(t, func(v float64) bool { return v == server.DefaultMaxBodyBytes })
	if m, _ := p.expect(server.FrameRefused); m["status"] != 408.0 {
		t.Fatalf("stalled start: %v", m)
	}
	sf.waitRequestBytes(t, func(v float64) bool { return v == 0 })
	q := sf.dial(t, bearer("a"))
	q.startUnderWay(frame)
	sf.waitRequestBytes(t, func(v float64) bool { return v == server.DefaultMaxBodyBytes })
	q.conn.Close()
	sf.waitRequestBytes(t, func(v float64) bool { return v == 0 })
}
