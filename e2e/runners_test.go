package e2e

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dsh-container/dsh-container/backend/container/seccomp"
	"github.com/dsh-container/dsh-container/images"
)

// TestRunnerSuites runs each runner's own test suite inside its real
// image, hardened like a run (no network, read-only root, non-root, no
// capabilities, no-new-privileges, our seccomp profile, a tmpfs /tmp): the
// portproto vectors replay and the runner driven by a fake host.
func TestRunnerSuites(t *testing.T) {
	root := readableCopy(t)
	// The docker CLI reads seccomp= as a file.
	profile, err := json.Marshal(seccomp.Profile())
	if err != nil {
		t.Fatal(err)
	}
	profileFile := filepath.Join(t.TempDir(), "seccomp.json")
	if err := os.WriteFile(profileFile, profile, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		image string
		cmd   []string
	}{
		{"ts-runner", []string{"node", "--test", "/src/images/ts-runner/test/"}},
		{"py-runner", []string{"python3", "-m", "unittest", "discover", "-s", "/src/images/py-runner/test", "-v"}},
	} {
		t.Run(tc.image, func(t *testing.T) {
			var tag string
			for _, im := range images.Runners {
				if im.Name == tc.image {
					tag = im.DefaultTag()
				}
			}
			args := append([]string{"run", "--rm", "--network", "none", "--read-only", "--tmpfs", "/tmp:rw,nosuid,nodev",
				"--cap-drop", "ALL", "--security-opt", "no-new-privileges", "--security-opt", "seccomp=" + profileFile,
				"-u", "65532:65532", "-w", "/tmp", "-v", root + ":/src:ro", "--entrypoint", "", tag}, tc.cmd...)
			out, err := exec.Command("docker", args...).CombinedOutput()
			if err != nil {
				t.Fatalf("%s suite failed: %v\n%s", tc.image, err, out)
			}
			text := string(out)
			if !strings.Contains(text, "pass") && !strings.Contains(text, "OK") {
				t.Fatalf("no test ran:\n%s", text)
			}
			t.Logf("%s suite:\n%s", tc.image, lastLines(text, 12))
		})
	}
}

// readableCopy copies what the suites read (runners, tests, protocol
// vectors) into a world-readable temp tree: the checkout may sit in a
// private directory the container's non-root user cannot enter.
func readableCopy(t *testing.T) string {
	t.Helper()
	src, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	dst, err := os.MkdirTemp("", "dshsuite")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dst) })
	var files []string
	for _, pattern := range []string{"images/ts-runner/*.js", "images/py-runner/dsh_runner/*.py", "images/*/test/*", "portproto/testdata/vectors.json"} {
		m, err := filepath.Glob(filepath.Join(src, pattern))
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, m...)
	}
	for _, f := range files {
		rel, _ := filepath.Rel(src, f)
		if info, err := os.Stat(f); err != nil || info.IsDir() {
			continue
		}
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		out := filepath.Join(dst, rel)
		if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(out, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// MkdirTemp and MkdirAll under a umask may leave directories private.
	filepath.Walk(dst, func(p string, info os.FileInfo, err error) error {
		if err == nil && info.IsDir() {
			os.Chmod(p, 0o755)
		}
		return nil
	})
	return dst
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
