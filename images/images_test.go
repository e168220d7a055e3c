package images

import (
	"archive/tar"
	"encoding/json"
	"io"
	"path"
	"slices"
	"strings"
	"testing"

	"github.com/dsh-container/dsh-container/backend"
	"github.com/dsh-container/dsh-container/backend/container/runner"
)

func TestTagsAreContentAddressed(t *testing.T) {
	seen := map[string]bool{}
	for _, im := range append(Runners, SDKCheck) {
		tag := im.Tag()
		if tag != im.Tag() || tag != im.DefaultTag() {
			t.Fatalf("%s: tag not stable", im.Name)
		}
		if !strings.HasPrefix(tag, Repository+im.Name+":") || len(tag) != len(Repository+im.Name+":")+12 {
			t.Fatalf("tag %q", tag)
		}
		if seen[tag] {
			t.Fatalf("duplicate tag %q", tag)
		}
		seen[tag] = true
	}
	if b := DefaultBase.Tag(); !strings.HasPrefix(b, Repository+"base:trixie-") {
		t.Fatalf("base tag %q", b)
	}
	changed := DefaultBase
	changed.Packages = append([]string{"extra"}, changed.Packages...)
	if changed.Tag() == DefaultBase.Tag() {
		t.Fatal("base tag ignores its package list")
	}
}

func TestRunnerFor(t *testing.T) {
	for _, l := range backend.Languages() {
		im, err := RunnerFor(l)
		if err != nil || im.Language != l {
			t.Fatalf("%s: %v", l, err)
		}
	}
	if _, err := RunnerFor("ruby"); err == nil {
		t.Fatal("ruby has a runner")
	}
}

func TestBuildContextHoldsTheInputs(t *testing.T) {
	r, err := Runners[0].context()
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(r)
	var names []string
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, h.Name)
	}
	if strings.Join(names, ",") != "Dockerfile,egress.js,main.js,prewarm.js,protocol.js,runner.js,values.js" {
		t.Fatalf("context %v", names)
	}
	py, err := Runners[1].files()
	if err != nil {
		t.Fatal(err)
	}
	if want := "Dockerfile,dsh_runner/__init__.py,dsh_runner/__main__.py,dsh_runner/egress.py,dsh_runner/protocol.py,dsh_runner/runner.py,dsh_runner/values.py"; strings.Join(py, ",") != want {
		t.Fatalf("python inputs %v, want %s", py, want)
	}
}

// TestDockerfilesFollowTheContract holds what the runner Dockerfiles and
// runners repeat of the contract (package runner) to it: the ARG defaults a
// plain `docker build` uses, the exec-form CMD (which takes no build
// arguments), USER and WORKDIR, the runners' default socket and the file
// names the argv names.
func TestDockerfilesFollowTheContract(t *testing.T) {
	for _, tc := range []struct {
		im      Image
		cmd     []string
		entry   string // a build input the command names
		socket  string // the runner's default socket, as its source spells it
		install string // the COPY destination
	}{
		{Runners[0], runner.TypeScriptArgv(runner.BridgeSocket, 0), path.Base(runner.TypeScriptMain), "const DEFAULT_SOCKET = '" + runner.BridgeSocket + "';", "${TS_RUNNER_DIR}/"},
		{Runners[1], runner.PythonArgv(runner.BridgeSocket), runner.PythonPackage + "/__main__.py", `DEFAULT_SOCKET = "` + runner.BridgeSocket + `"`, "${PY_SITE_DIR}/" + runner.PythonPackage + "/"},
	} {
		t.Run(tc.im.Name, func(t *testing.T) {
			data, err := inputs.ReadFile(tc.im.Name + "/Dockerfile")
			if err != nil {
				t.Fatal(err)
			}
			args := map[string]string{}
			var user, workdir, copyTo string
			var cmd []string
			for _, line := range strings.Split(string(data), "\n") {
				instr, rest, _ := strings.Cut(line, " ")
				switch instr {
				case "ARG":
					k, v, _ := strings.Cut(rest, "=")
					args[k] = v
				case "USER":
					user = rest
				case "WORKDIR":
					workdir = rest
				case "COPY":
					f := strings.Fields(rest)
					copyTo = f[len(f)-1]
				case "CMD":
					if err := json.Unmarshal([]byte(rest), &cmd); err != nil {
						t.Fatalf("CMD %s: %v", rest, err)
					}
				}
			}
			contract := tc.im.contract()
			for k, v := range contract {
				if args[k] != v {
					t.Errorf("ARG %s=%q, want the contract's %q", k, args[k], v)
				}
			}
			if user != "${RUNNER_UID}:${RUNNER_GID}" || workdir != "${WORK_DIR}" || copyTo != tc.install {
				t.Errorf("USER %q, WORKDIR %q, COPY to %q: want the contract's build arguments", user, workdir, copyTo)
			}
			if contract["RUNNER_UID"]+":"+contract["RUNNER_GID"] != runner.User {
				t.Errorf("uid:gid is not runner.User %q", runner.User)
			}
			if !slices.Equal(cmd, tc.cmd) {
				t.Errorf("CMD %q, want %q", cmd, tc.cmd)
			}
			files, err := tc.im.files()
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Contains(files, tc.entry) {
				t.Errorf("no %s among the inputs %v", tc.entry, files)
			}
			found := false
			for _, f := range files {
				src, _ := inputs.ReadFile(path.Join(tc.im.Name, f))
				found = found || strings.Contains(string(src), tc.socket)
			}
			if !found {
				t.Errorf("no runner file defaults to the contract's socket: %s", tc.socket)
			}
		})
	}
}

func TestTagCoversTheContract(t *testing.T) {
	for _, im := range Runners {
		changed := im.contract()
		changed["WORK_DIR"] = "/elsewhere"
		if im.tag(changed) == im.Tag() {
			t.Errorf("%s: the tag ignores the contract", im.Name)
		}
	}
	if SDKCheck.contract() != nil {
		t.Error("sdk-check has a runner contract")
	}
}
