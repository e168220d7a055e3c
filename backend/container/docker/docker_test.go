package docker

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/containerd/errdefs"
	mobyseccomp "github.com/moby/profiles/seccomp"
	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/dsh-container/dsh-container/backend/container"
	"github.com/dsh-container/dsh-container/backend/container/seccomp"
)

// Translate carries every field of a Spec and adds nothing (the e2e suite
// checks the same preset on a live container through inspect).
func TestTranslate(t *testing.T) {
	s := container.Spec{
		Name: "dsh-x", Hostname: "sandbox", Image: "img:tag", Cmd: []string{"node", "b.js"},
		Env: []string{"PATH=/bin", "HOME=/tmp", "LANG=C.UTF-8"}, User: "65532:65532", WorkingDir: "/tmp",
		Labels: map[string]string{container.LabelManaged: "true"}, BindDir: "/run/x",
		NetworkDisabled: true, ReadOnlyRoot: true, CapDropAll: true, NoNewPrivileges: true,
		Init: true, IPCPrivate: true, LogDriverNone: true,
		MemoryBytes: 256 << 20, NanoCPUs: 1e9, Pids: 64, TmpfsBytes: 32 << 20, NoFile: 256, OCIRuntime: "runsc",
		Seccomp: seccomp.Profile(),
	}
	cfg, hc := Translate(s)
	check := func(ok bool, what string, v any) {
		t.Helper()
		if !ok {
			t.Errorf("%s: %v", what, v)
		}
	}
	check(cfg.Image == "img:tag" && cfg.Hostname == "sandbox" && slices.Equal(cfg.Cmd, s.Cmd), "image/hostname/cmd", cfg)
	check(cfg.Entrypoint != nil && len(cfg.Entrypoint) == 0, "entrypoint cleared", cfg.Entrypoint)
	check(slices.Equal(cfg.Env, s.Env), "env", cfg.Env)
	check(cfg.User == s.User && cfg.WorkingDir == "/tmp", "user/workdir", cfg.User)
	check(cfg.NetworkDisabled && string(hc.NetworkMode) == "none", "network", hc.NetworkMode)
	check(hc.ReadonlyRootfs, "read-only root", hc.ReadonlyRootfs)
	check(slices.Equal(hc.CapDrop, []string{"ALL"}) && len(hc.CapAdd) == 0, "caps", hc.CapDrop)
	check(len(hc.SecurityOpt) == 2 && hc.SecurityOpt[0] == "no-new-privileges" && strings.HasPrefix(hc.SecurityOpt[1], "seccomp={"), "security opts", hc.SecurityOpt)
	check(hc.Init != nil && *hc.Init, "init", hc.Init)
	check(string(hc.IpcMode) == "private", "ipc", hc.IpcMode)
	check(hc.LogConfig.Type == "none", "log driver", hc.LogConfig)
	check(hc.Memory == s.MemoryBytes && hc.MemorySwap == s.MemoryBytes, "memory = memory+swap", hc.Memory)
	check(hc.NanoCPUs == 1e9 && hc.PidsLimit != nil && *hc.PidsLimit == 64, "cpu/pids", hc.NanoCPUs)
	check(len(hc.Ulimits) == 1 && hc.Ulimits[0].Name == "nofile" && hc.Ulimits[0].Hard == 256 && hc.Ulimits[0].Soft == 256, "nofile", hc.Ulimits)
	check(hc.Tmpfs["/tmp"] == fmt.Sprintf("rw,noexec,nosuid,nodev,size=%d", 32<<20) && len(hc.Tmpfs) == 1, "tmpfs", hc.Tmpfs)
	check(len(hc.Mounts) == 1 && hc.Mounts[0].Source == "/run/x" && hc.Mounts[0].Target == container.BridgeDir && hc.Mounts[0].ReadOnly && len(hc.Binds) == 0, "mounts", hc.Mounts)
	check(hc.OomScoreAdj == container.OOMScoreAdj, "oom_score_adj", hc.OomScoreAdj)
	check(hc.Runtime == "runsc" && !hc.Privileged && hc.PublishAllPorts == false, "runtime/privileged", hc.Runtime)
	check(len(hc.Devices) == 0 && len(hc.VolumesFrom) == 0 && hc.PidMode == "" && hc.UsernsMode == "", "no extra host access", hc)
}

// The seccomp profile crosses as `seccomp=<compact json>` that the
// daemon's parser turns back into the very same profile; no profile keeps
// the daemon's default.
func TestTranslateSeccomp(t *testing.T) {
	_, hc := Translate(container.Spec{NoNewPrivileges: true})
	if !slices.Equal(hc.SecurityOpt, []string{"no-new-privileges"}) {
		t.Fatalf("without a profile: security opts %v", hc.SecurityOpt)
	}

	p := seccomp.Profile()
	_, hc = Translate(container.Spec{Seccomp: p})
	if len(hc.SecurityOpt) != 1 {
		t.Fatalf("security opts %v", hc.SecurityOpt)
	}
	body, ok := strings.CutPrefix(hc.SecurityOpt[0], "seccomp=")
	if !ok {
		t.Fatalf("security opt %.40q", hc.SecurityOpt[0])
	}
	var compact bytes.Buffer
	if err := json.Compact(&compact, []byte(body)); err != nil || compact.String() != body {
		t.Fatalf("not compact JSON (%v)", err)
	}

	// Every key is one Docker parses; anything else it would drop
	// without a word.
	var raw struct {
		Top      map[string]json.RawMessage
		Syscalls []map[string]json.RawMessage `json:"syscalls"`
	}
	if err := json.Unmarshal([]byte(body), &raw.Top); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal([]byte(body), &raw); err != nil {
		t.Fatal(err)
	}
	known := func(what string, m map[string]json.RawMessage, keys ...string) {
		t.Helper()
		for k := range m {
			if !slices.Contains(keys, k) {
				t.Errorf("%s: key %q is not one Docker parses", what, k)
			}
		}
	}
	known("profile", raw.Top, "defaultAction", "defaultErrnoRet", "architectures", "syscalls")
	for _, r := range raw.Syscalls {
		known("rule", r, "names", "action", "errnoRet", "args")
		var args []map[string]json.RawMessage
		if err := json.Unmarshal(r["args"], &args); len(r["args"]) > 0 && err != nil {
			t.Fatal(err)
		}
		for _, a := range args {
			known("argument", a, "index", "value", "valueTwo", "op")
		}
	}

	// The daemon's own loader (moby's, as Docker 25+ vendors it) yields
	// the same profile for a container without capabilities.
	got, err := mobyseccomp.LoadProfile(body, &specs.Spec{Process: &specs.Process{Capabilities: &specs.LinuxCapabilities{}}})
	if err != nil {
		t.Fatalf("the daemon's loader rejects the profile: %v", err)
	}
	if !reflect.DeepEqual(got, p) {
		t.Fatal("the daemon's loader reads a different profile")
	}
}

func TestTranslateErrors(t *testing.T) {
	if err := translate(nil, ""); err != nil {
		t.Fatal(err)
	}
	nf := fmt.Errorf("No such image: x: %w", errdefs.ErrNotFound)
	err := translate(nf, "dsh-container/ts-runner:abc")
	if !errdefs.IsNotFound(err) || !strings.Contains(err.Error(), "images build") {
		t.Fatalf("missing image: %v", err)
	}
	other := errors.New("boom")
	if translate(other, "") != other {
		t.Fatal("unclassified errors pass through unchanged")
	}
}

func TestNewWithUnreachableDaemon(t *testing.T) {
	t.Setenv("DOCKER_HOST", "unix:///nonexistent/docker.sock")
	_, err := New(context.Background())
	if !errdefs.IsUnavailable(err) || !strings.Contains(err.Error(), "cannot reach the Docker daemon") {
		t.Fatalf("got %v", err)
	}
}
