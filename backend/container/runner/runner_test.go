package runner

import (
	"fmt"
	"path"
	"slices"
	"strings"
	"testing"
)

func TestUserIsUIDAndGID(t *testing.T) {
	if want := fmt.Sprintf("%d:%d", UID, GID); User != want {
		t.Fatalf("User %q, want %q", User, want)
	}
	if UID == 0 || GID == 0 {
		t.Fatal("programs must not run as root")
	}
}

func TestPaths(t *testing.T) {
	for _, p := range []string{WorkDir, BridgeDir, BridgeSocket, InstallDir, TypeScriptDir, TypeScriptMain, PythonDir} {
		if !path.IsAbs(p) || path.Clean(p) != p {
			t.Errorf("%q is not a clean absolute path", p)
		}
	}
	if path.Dir(BridgeSocket) != BridgeDir || path.Base(BridgeSocket) != SocketName {
		t.Errorf("socket %q is not %s in %s", BridgeSocket, SocketName, BridgeDir)
	}
	if !strings.HasPrefix(TypeScriptMain, InstallDir+"/") {
		t.Errorf("%q is not under %s", TypeScriptMain, InstallDir)
	}
	// python3 -I searches the system site directory and nothing the
	// program's environment can add.
	if !strings.HasSuffix(PythonDir, "/dist-packages") || strings.HasPrefix(PythonDir, WorkDir) {
		t.Errorf("%q is not a system site directory", PythonDir)
	}
}

func TestArgv(t *testing.T) {
	for _, tc := range []struct {
		got, want []string
	}{
		{TypeScriptArgv("/s", 0), []string{"node", "--disable-warning=ExperimentalWarning", "/opt/dsh/ts-runner/main.js", "/s"}},
		{TypeScriptArgv(BridgeSocket, 192), []string{"node", "--disable-warning=ExperimentalWarning", "--max-old-space-size=192", "/opt/dsh/ts-runner/main.js", "/run/dsh/bridge.sock"}},
		{PythonArgv(BridgeSocket), []string{"python3", "-I", "-m", "dsh_runner", "/run/dsh/bridge.sock"}},
	} {
		if !slices.Equal(tc.got, tc.want) {
			t.Errorf("argv %q, want %q", tc.got, tc.want)
		}
	}
}
