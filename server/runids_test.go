package server_test

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/dsh-container/dsh-container/server"
)

// An explicit run id runs at most once on a daemon: a start (or POST
// /v1/run) naming an id the daemon accepted is refused with 409, not run
// again — the retry of a client that lost its connection before it read
// accepted. An id that was refused (429) or is free may run; a daemon's
// own ids are never remembered.
func TestRunIDRunsAtMostOnce(t *testing.T) {
	sf := newSessionFixture(t, server.WithAdmission(1, 0))
	run := func(id string) map[string]any {
		t.Helper()
		p := sf.dial(t, nil)
		st := start("python", "return 1")
		st.ID = id
		p.send(st)
		m, _ := p.next()
		if m["type"] == "accepted" {
			m, _ = p.until(server.FrameDone)
		}
		p.closed()
		return m
	}
	if m := run("job-1"); m["type"] != "done" {
		t.Fatalf("first run: %v", m)
	}
	m := run("job-1")
	if m["type"] != "refused" || m["status"] != 409.0 || !strings.Contains(m["error"].(string), `duplicate-run: run id "job-1" was accepted by this daemon`) {
		t.Fatalf("the same id again: %v, want a 409 refusal", m)
	}
	// POST /v1/run shares the ids.
	resp, err := http.Post(sf.ts.URL+"/v1/run", "application/json", strings.NewReader(`{"language":"python","code":"return 1","id":"job-1"}`))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusConflict || !strings.Contains(string(body), "duplicate-run") {
		t.Fatalf("POST with the same id: %d %s", resp.StatusCode, body)
	}
	if resp = sf.post(t, "/v1/run", nil, `{"language":"python","code":"return 2","id":"job-2"}`); resp.StatusCode != 200 {
		t.Fatalf("POST with a new id: %d", resp.StatusCode)
	}
	if m := run("job-2"); m["status"] != 409.0 {
		t.Fatalf("a session with a POSTed id: %v", m)
	}

	// While one run holds the daemon's one slot, a start with a new id is
	// refused (429) and its id stays free: the retry runs.
	busy := sf.dial(t, nil)
	st := start("python", "call greet {}\nreturn 1", greetTool)
	st.ID = "holder"
	busy.send(st)
	busy.expect(server.FrameAccepted)
	_, msg := busy.expect(server.FrameCall)
	// The same id as the run in flight: 409 (accepted), not 429.
	if m := run("holder"); m["status"] != 409.0 {
		t.Fatalf("the id of the run in flight: %v", m)
	}
	if m := run("job-3"); m["status"] != 429.0 {
		t.Fatalf("with the slot taken: %v, want 429", m)
	}
	busy.send(server.ResultFrame{Type: "result", ID: msg.(*server.CallFrame).ID, OK: true, Value: json.RawMessage(`"hi"`)})
	busy.until(server.FrameDone)
	busy.closed()
	waitNoSessions(t, sf.srv)
	if m := run("job-3"); m["type"] != "done" {
		t.Fatalf("the id refused with 429, retried: %v", m)
	}
	// Without an id, every start runs.
	for range 2 {
		if m := run(""); m["type"] != "done" {
			t.Fatalf("no id: %v", m)
		}
	}
	waitNoSessions(t, sf.srv)
}
