package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dsh-container/dsh-container/backend"
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
try { await fetch("https://localhost:1/hello"); other = "reached"; } catch (e) { other = "refused"; }
return [ok, other];
`, s.port), fmt.Sprintf(`
import urllib.request
with urllib.request.urlopen("https://localhost:%[1]d/hello", timeout=20) as r:
    ok = r.read().decode()
try:
    urllib.request.urlopen("https://localhost:1/hello", timeout=20)
    other = "reached"
except Exception as e:
    other = "refused"
return [ok, other]
`, s.port))
	bin := buildCLI(t)
	for _, lang := range langs {
		ext := map[backend.Language]string{backend.TypeScript: "ts", backend.Python: "py"}[lang]
		prog := filepath.Join(dir, "prog."+ext)
		os.WriteFile(prog, []byte(progs[lang]), 0o644)
		cmd := exec.Command(bin, "run", "--json", "--policy", pol, prog)
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
	}
	s.waitClosed(t)

	// A policy whose CA file is missing is a usage error before any run.
	os.WriteFile(pol, []byte(`{"egress":{"allow":["localhost:443"],"caFile":"/nonexistent/ca.pem"}}`), 0o644)
	cmd := exec.Command(bin, "run", "--policy", pol, filepath.Join(dir, "prog.py"))
	out, err := cmd.CombinedOutput()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 2 || !strings.Contains(string(out), "egress.caFile") {
		t.Errorf("missing CA file: %v %s, want exit 2 naming egress.caFile", err, out)
	}
}
