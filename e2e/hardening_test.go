package e2e

import (
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"reflect"
	"slices"
	"strings"

	dcontainer "github.com/docker/docker/api/types/container"
	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/dsh-container/dsh-container/backend/container"
	"github.com/dsh-container/dsh-container/backend/container/seccomp"
)

// checkPreset compares a live container's inspect output with the
// hardening preset of DESIGN.md, field by field.
func checkPreset(info dcontainer.InspectResponse, e *env) error {
	var errs []error
	want := func(ok bool, format string, args ...any) {
		if !ok {
			errs = append(errs, fmt.Errorf(format, args...))
		}
	}
	hc, cfg := info.HostConfig, info.Config
	l := e.rt.Limits()
	want(string(hc.NetworkMode) == "none", "network mode %q", hc.NetworkMode)
	want(cfg.NetworkDisabled, "network not disabled")
	want(hc.ReadonlyRootfs, "root not read-only")
	want(slices.Equal(hc.CapDrop, []string{"ALL"}), "cap drop %v", hc.CapDrop)
	want(len(hc.CapAdd) == 0, "cap add %v", hc.CapAdd)
	want(!hc.Privileged, "privileged")
	want(slices.Contains(hc.SecurityOpt, "no-new-privileges"), "security opts %v", hc.SecurityOpt)
	for _, o := range hc.SecurityOpt {
		want(!strings.Contains(o, "unconfined"), "security opt %q weakens the default profile", o)
	}
	// The seccomp profile is ours (the envs checked here keep the
	// runtime's default), as the daemon recorded it.
	var profiles []string
	for _, o := range hc.SecurityOpt {
		if p, ok := strings.CutPrefix(o, "seccomp="); ok {
			profiles = append(profiles, p)
		}
	}
	var profile specs.LinuxSeccomp
	want(len(profiles) == 1 && json.Unmarshal([]byte(profiles[0]), &profile) == nil && reflect.DeepEqual(&profile, seccomp.Profile()),
		"seccomp security opts %.120q: not exactly our profile (seccomp.Profile)", profiles)
	want(cfg.User == container.RunnerUser, "user %q", cfg.User)
	want(hc.PidsLimit != nil && *hc.PidsLimit == l.Pids, "pids limit %v", hc.PidsLimit)
	want(hc.Memory == l.MemoryBytes && hc.MemorySwap == l.MemoryBytes, "memory %d swap %d", hc.Memory, hc.MemorySwap)
	want(hc.NanoCPUs == l.NanoCPUs, "nano cpus %d", hc.NanoCPUs)
	want(string(hc.IpcMode) == "private" || string(hc.IpcMode) == "none", "ipc %q", hc.IpcMode)
	want(hc.Init != nil && *hc.Init, "init not set")
	tmpfs := hc.Tmpfs["/tmp"]
	for _, opt := range []string{"noexec", "nosuid", "nodev", fmt.Sprintf("size=%d", l.TmpfsBytes)} {
		want(slices.Contains(strings.Split(tmpfs, ","), opt), "tmpfs /tmp %q lacks %s", tmpfs, opt)
	}
	want(l.TmpfsBytes <= l.MemoryBytes/2, "tmpfs larger than half the memory")
	want(hc.LogConfig.Type == "none", "log driver %q", hc.LogConfig.Type)
	nofile := false
	for _, u := range hc.Ulimits {
		if u.Name == "nofile" && u.Hard == l.NoFile && u.Soft == l.NoFile {
			nofile = true
		}
	}
	want(nofile, "nofile ulimit %v", hc.Ulimits)
	want(len(cfg.Env) == 3, "env %v", cfg.Env)
	for _, v := range cfg.Env {
		k, _, _ := strings.Cut(v, "=")
		want(k == "PATH" || k == "HOME" || k == "LANG", "env variable %q", v)
	}
	want(cfg.WorkingDir == "/tmp", "working dir %q", cfg.WorkingDir)
	want(len(info.Mounts) == 1, "mounts %+v", info.Mounts)
	for _, m := range info.Mounts {
		want(string(m.Type) == "bind" && !m.RW && m.Destination == container.BridgeDir, "mount %+v", m)
		want(filepath.Dir(m.Source) == e.sockDir, "mount source %s is not a per-run directory under %s", m.Source, e.sockDir)
	}
	for k := range cfg.Labels {
		want(strings.HasPrefix(k, container.LabelPrefix), "label %q outside the reserved prefix", k)
	}
	want(cfg.Labels[container.LabelManaged] == "true" && cfg.Labels[container.LabelOwner] == e.owner, "labels %v", cfg.Labels)
	want(info.State != nil && info.State.Running, "not running")
	return errors.Join(errs...)
}
