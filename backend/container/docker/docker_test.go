package docker

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/containerd/errdefs"

	"github.com/dsh-container/dsh-container/backend/container"
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
	check(slices.Equal(hc.SecurityOpt, []string{"no-new-privileges"}), "security opts", hc.SecurityOpt)
	check(hc.Init != nil && *hc.Init, "init", hc.Init)
	check(string(hc.IpcMode) == "private", "ipc", hc.IpcMode)
	check(hc.LogConfig.Type == "none", "log driver", hc.LogConfig)
	check(hc.Memory == s.MemoryBytes && hc.MemorySwap == s.MemoryBytes, "memory = memory+swap", hc.Memory)
	check(hc.NanoCPUs == 1e9 && hc.PidsLimit != nil && *hc.PidsLimit == 64, "cpu/pids", hc.NanoCPUs)
	check(len(hc.Ulimits) == 1 && hc.Ulimits[0].Name == "nofile" && hc.Ulimits[0].Hard == 256 && hc.Ulimits[0].Soft == 256, "nofile", hc.Ulimits)
	check(hc.Tmpfs["/tmp"] == fmt.Sprintf("rw,noexec,nosuid,nodev,size=%d", 32<<20) && len(hc.Tmpfs) == 1, "tmpfs", hc.Tmpfs)
	check(len(hc.Mounts) == 1 && hc.Mounts[0].Source == "/run/x" && hc.Mounts[0].Target == container.BridgeDir && hc.Mounts[0].ReadOnly && len(hc.Binds) == 0, "mounts", hc.Mounts)
	check(hc.Runtime == "runsc" && !hc.Privileged && hc.PublishAllPorts == false, "runtime/privileged", hc.Runtime)
	check(len(hc.Devices) == 0 && len(hc.VolumesFrom) == 0 && hc.PidMode == "" && hc.UsernsMode == "", "no extra host access", hc)
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
