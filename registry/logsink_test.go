package registry

import (
	"context"
	"sync"
	"testing"

	"github.com/dsh-container/dsh-container/backend"
)

// The log sink sees each entry as the runtime captures it, tagged with the
// run_code call id, before Execute returns.
func TestLogSinkStreamsRunLogs(t *testing.T) {
	var mu sync.Mutex
	var got []string
	sink := func(callID string, e backend.LogEntry) {
		mu.Lock()
		defer mu.Unlock()
		got = append(got, callID+"|"+e.Text)
	}
	r, _, _ := codeReg(t, WithLogSink(sink))
	res := r.Execute(context.Background(), runCall("c9", "log one\nlog two\nreturn 1"))
	if res.IsError {
		t.Fatalf("%s (%v)", res.Text(), res.Err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(got) != 2 || got[0] != "c9|one" || got[1] != "c9|two" {
		t.Fatalf("streamed %q", got)
	}
	if len(res.CodeRun.Logs) != 2 {
		t.Fatalf("result logs %+v", res.CodeRun.Logs)
	}
}
