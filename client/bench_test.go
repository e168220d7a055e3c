package client_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/dsh-container/dsh-container/client"
)

// BenchmarkSessionVsPost is the protocol's own cost without containers:
// one session running `return 1` on the in-memory runtime, against the
// same program through POST /v1/run on the same handler.
//
//	go test -run '^$' -bench SessionVsPost ./client/
func BenchmarkSessionVsPost(b *testing.B) {
	ts := newDaemonB(b)
	c := &client.Client{URL: ts.URL}
	b.Run("session", func(b *testing.B) {
		for range b.N {
			if _, err := c.Run(context.Background(), client.Request{Language: "python", Code: "return 1"}, nil, client.Handlers{}); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("post", func(b *testing.B) {
		for range b.N {
			resp, err := http.Post(ts.URL+"/v1/run", "application/json", strings.NewReader(`{"language":"python","code":"return 1"}`))
			if err != nil {
				b.Fatal(err)
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
	})
}
