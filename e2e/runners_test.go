package e2e

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dsh-container/dsh-container/images"
)

// TestRunnerSuites runs each runner's own test suite inside its real
// image, hardened like a run (no network, read-only root, non-root, a
// tmpfs /tmp): the portproto vectors replay and the bootstrap driven by a
// fake host.
func TestRunnerSuites(t *testing.T) {
	root, err := filepath.Abs("..")
	if err != nil {
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

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
