package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dsh-container/dsh-container/backend"
	"github.com/dsh-container/dsh-container/client"
)

// `run --policy FILE` with an egress section: the CLI's runs reach the
// allowlisted name through the host's CONNECT proxy, with the real
// resolver (localhost, named in allowPrivate) and TLS verified against the
// CA file the policy names; a name not on the list is refused. This is the
// operator's path (the policy file), where TestEgress drives the runtime.
//
//	go test -count=1 -run TestEgressPolicyFileCLI -v ./e2e/
func TestEgressPolicyFileCLI(t *testing.T) {
	s := newEgressServer(t)
	dir := t.TempDir()
	ca := filepath.Join(dir, "ca.pem")
	os.WriteFile(ca, []byte(s.caPEM), 0o644)
	pol := filepath.Join(dir, "policy.json")
	os.WriteFile(pol, []byte(fmt.Sprintf(`{"default":"allow","egress":{"allow":["localhost:%d"],"allowPrivate":["127.0.0.1","::1"],"maxBytes":1048576,"maxConnections":4,"caFile":%q}}`, s.port, ca)), 0o644)
	progs := both(fmt.Sprintf(`
const ok = await (await fetch("https://localhost:%[1]d/hello")).text();
let other;
try { await fetch("https://not-listed.test/hello"); other = "reached"; } catch (e) { other = "refused"; }
return [ok, other];
`, s.port), fmt.Sprintf(`
import urllib.request
with urllib.request.urlopen("https://localhost:%[1]d/hello", timeout=20) as r:
    ok = r.read().decode()
try:
    urllib.request.urlopen("https://not-listed.test/hello", timeout=20)
    other = "reached"
except Exception as e:
    other = "refused"
return [ok, other]
`, s.port))
	bin := buildCLI(t)
	underEachRuntime(t, func(t *testing.T, ociRuntime string) {
		for _, lang := range langs {
			ext := map[backend.Language]string{backend.TypeScript: "ts", backend.Python: "py"}[lang]
			prog := filepath.Join(dir, "prog."+ext)
			os.WriteFile(prog, []byte(progs[lang]), 0o644)
			cmd := exec.Command(bin, append(append([]string{"run", "--json", "--events", "--policy", pol}, runtimeFlag(ociRuntime)...), prog)...)
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			out, err := cmd.Output()
			var rep struct {
				Value json.RawMessage
				Error *struct{ Kind, Message string }
			}
			if err != nil || json.Unmarshal(out, &rep) != nil || rep.Error != nil {
				t.Fatalf("%s: run --policy: %v %s", lang, err, out)
			}
			want := fmt.Sprintf(`["hello from localhost:%d","refused"]`, s.port)
			var got bytes.Buffer
			if json.Compact(&got, rep.Value) != nil || got.String() != want {
				t.Errorf("%s: %s, want %s", lang, rep.Value, want)
			}
			// --events: each connection is an egress event line on stderr.
			var evs []json.RawMessage
			for _, line := range strings.Split(stderr.String(), "\n") {
				if strings.HasPrefix(line, `{"type":"egress"`) {
					evs = append(evs, json.RawMessage(line))
				}
			}
			checkEgressEvents(t, string(lang)+": run --events", evs, s.port)
		}
		s.waitClosed(t)

		// serve --policy: a session narrows the allowlist to the one name
		// (Request.Egress) and gets each connection as an event frame and in
		// the report's egressEvents.
		svc := startService(t, nil, append([]string{"--pool", "0", "--wall-timeout", "60s", "--policy", pol}, runtimeFlag(ociRuntime)...)...)
		for _, lang := range langs {
			var frames []json.RawMessage
			rep, err := svc.client("").Run(context.Background(), client.Request{Language: string(lang), Code: progs[lang], Egress: []string{fmt.Sprintf("localhost:%d", s.port)}}, nil, client.Handlers{
				Event: func(e json.RawMessage) { frames = append(frames, e) },
			})
			if err != nil || rep.Error != nil {
				t.Fatalf("%s: session with egress: %v %+v", lang, err, rep)
			}
			checkEgressEvents(t, string(lang)+": session event frames", frames, s.port)
			checkEgressEvents(t, string(lang)+": session report", rep.EgressEvents, s.port)
		}
		// serve logs each connection as JSON with the run's run_id and trace_id.
		logged := 0
		for _, line := range strings.Split(svc.stderr.String(), "\n") {
			var m map[string]any
			if json.Unmarshal([]byte(line), &m) != nil || m["msg"] != "egress" {
				continue
			}
			if runID, _ := m["run_id"].(string); runID == "" || m["trace_id"] == nil || m["trace_id"] == "" {
				t.Errorf("serve's egress log line without run_id or trace_id: %s", line)
			}
			logged++
		}
		if logged != 2*len(langs) {
			t.Errorf("serve logged %d egress lines, want %d", logged, 2*len(langs))
		}
		// A session may not widen the server's allowlist.
		_, err := svc.client("").Run(context.Background(), client.Request{Language: "python", Code: "return 1", Egress: []string{"example.com:443"}}, nil, client.Handlers{})
		var rf *client.RefusedError
		if !errors.As(err, &rf) || rf.Status != 400 || !strings.Contains(rf.Error(), "example.com:443") {
			t.Errorf("widening in a session: %v, want a 400 naming the entry", err)
		}
		s.waitClosed(t)
	})

	// A policy whose CA file is missing is a usage error before any run.
	os.WriteFile(pol, []byte(`{"egress":{"allow":["localhost:443"],"caFile":"/nonexistent/ca.pem"}}`), 0o644)
	cmd := exec.Command(bin, "run", "--policy", pol, filepath.Join(dir, "prog.py"))
	out, err := cmd.CombinedOutput()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 2 || !strings.Contains(string(out), "egress.caFile") {
		t.Errorf("missing CA file: %v %s, want exit 2 naming egress.caFile", err, out)
	}
}

// checkEgressEvents checks the program's two connections' events, in
// either order: localhost:port allowed and closed ("ok", bytes both ways),
// not-listed.test:443 refused as not on the allowlist. (Not a refused
// port of localhost: Node's fetch blocks "bad ports" such as 1 itself.)
func checkEgressEvents(t *testing.T, where string, evs []json.RawMessage, port int) {
	t.Helper()
	type event struct {
		Type, Host, Outcome, Reason string
		Port                        int
		BytesUp, BytesDown          int64
	}
	got := map[string]event{}
	for _, raw := range evs {
		var e event
		if err := json.Unmarshal(raw, &e); err != nil || e.Type != "egress" {
			t.Errorf("%s: event %s", where, raw)
			continue
		}
		got[fmt.Sprintf("%s:%d", e.Host, e.Port)] = e
	}
	ok, refused := got[fmt.Sprintf("localhost:%d", port)], got["not-listed.test:443"]
	if len(evs) != 2 || ok.Outcome != "ok" || ok.BytesUp == 0 || ok.BytesDown == 0 || refused.Outcome != "refused" || !strings.Contains(refused.Reason, "not on the egress allowlist") {
		t.Errorf("%s: egress events %s, want localhost:%d ok and not-listed.test:443 refused", where, evs, port)
	}
}
