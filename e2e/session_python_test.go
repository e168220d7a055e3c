package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dsh-container/dsh-container/backend"
	"github.com/dsh-container/dsh-container/images"
	"github.com/dsh-container/dsh-container/internal/testenv"
)

// The Python client (clients/python) against the real daemon with --auth:
// its unittest suite with DSH_URL set, on the host's CPython when it has
// websockets (Debian bookworm's 10.4, the oldest we support) and in the
// runner image (Debian trixie's CPython 3.13 with websockets 15), with
// the host network to reach the daemon.
func TestPythonClient(t *testing.T) {
	testenv.UsesDaemon(t)
	auth := filepath.Join(t.TempDir(), "auth.json")
	tok, sum := token("py")
	writeAuth(t, auth, map[string]any{"name": "py", "tokenSha256": sum})
	// The policy asks about the tool "guarded" only (the Approvals test
	// answers it); every other call is allowed.
	pol := filepath.Join(t.TempDir(), "policy.json")
	if err := os.WriteFile(pol, []byte(`{"default":"allow","tools":{"guarded":{"action":"ask"}}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	s := startService(t, nil, "--pool", "1", "--auth", auth, "--wall-timeout", "30s", "--policy", pol)
	src, err := filepath.Abs("../clients/python")
	if err != nil {
		t.Fatal(err)
	}
	vectors, _ := filepath.Abs("../server/testdata/session/vectors.json")
	env := []string{"DSH_URL=" + s.url, "DSH_TOKEN=" + tok, "PYTHONDONTWRITEBYTECODE=1", "DSH_POLICY_ASKS=guarded"}

	ran := 0
	t.Run("host", func(t *testing.T) {
		py := "/usr/bin/python3"
		if out, err := exec.Command(py, "-c", "import websockets; print(websockets.__version__)").CombinedOutput(); err != nil {
			t.Skipf("the host's %s has no websockets (apt-get install python3-websockets): %s", py, out)
		} else {
			t.Logf("host CPython with websockets %s", strings.TrimSpace(string(out)))
		}
		cmd := exec.Command(py, "-m", "unittest", "-v", "tests.test_client")
		cmd.Dir = src
		cmd.Env = append(os.Environ(), env...)
		out, err := cmd.CombinedOutput()
		t.Logf("%s", out)
		if err != nil || strings.Contains(string(out), "skipped 'DSH_URL") {
			t.Fatalf("python client tests on the host: %v", err)
		}
		ran++
	})
	t.Run("runner-image", func(t *testing.T) {
		im, err := images.RunnerFor(backend.Python)
		if err != nil {
			t.Fatal(err)
		}
		name := fmt.Sprintf("%s-pyclient-%d", owner, time.Now().UnixNano())
		args := []string{"run", "--rm", "--name", name, "--network", "host", "--entrypoint", "python3", "-w", "/src",
			"-v", src + ":/src:ro", "-v", vectors + ":/vectors.json:ro", "-e", "DSH_VECTORS=/vectors.json"}
		for _, e := range env {
			args = append(args, "-e", e)
		}
		args = append(args, im.DefaultTag(), "-c", "import websockets, sys; print('websockets', websockets.__version__, 'python', sys.version.split()[0], flush=True); import unittest; unittest.main(module='tests.test_client', argv=['x', '-v'])")
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		defer exec.Command("docker", "rm", "-f", name).Run()
		out, err := exec.CommandContext(ctx, "docker", args...).CombinedOutput()
		t.Logf("%s", out)
		if err != nil || !strings.Contains(string(out), "websockets 15.") {
			t.Fatalf("python client tests in %s: %v", im.DefaultTag(), err)
		}
		ran++
	})
	if ran == 0 {
		t.Fatal("the Python client ran nowhere")
	}
	s.stop(t)
}
