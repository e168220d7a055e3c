package docker

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/containerd/errdefs"
	dcontainer "github.com/docker/docker/api/types/container"
	dimage "github.com/docker/docker/api/types/image"
	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/dsh-container/dsh-container/backend/container"
)

// ImageExists implements container.ImageChecker.
func (d *Driver) ImageExists(ctx context.Context, ref string) (bool, error) {
	if _, err := d.api.ImageInspect(ctx, ref); err != nil {
		if errdefs.IsNotFound(err) {
			return false, nil
		}
		return false, translate(err, "")
	}
	return true, nil
}

// ImageRefs implements container.ImageChecker: every tag on the daemon.
func (d *Driver) ImageRefs(ctx context.Context) ([]string, error) {
	list, err := d.api.ImageList(ctx, dimage.ListOptions{})
	if err != nil {
		return nil, translate(err, "")
	}
	var refs []string
	for _, im := range list {
		refs = append(refs, im.RepoTags...)
	}
	slices.Sort(refs)
	return refs, nil
}

// Ping implements container.Describer.
func (d *Driver) Ping(ctx context.Context) error {
	if _, err := d.api.Ping(ctx); err != nil {
		return translate(err, "")
	}
	return nil
}

// Describe implements container.Describer.
func (d *Driver) Describe(ctx context.Context) (container.EngineInfo, error) {
	ver, err := d.api.ServerVersion(ctx)
	if err != nil {
		return container.EngineInfo{}, translate(err, "")
	}
	info, err := d.api.Info(ctx)
	if err != nil {
		return container.EngineInfo{}, translate(err, "")
	}
	out := container.EngineInfo{
		Engine:         "Docker Engine " + ver.Version,
		API:            fmt.Sprintf("%s (client negotiated %s)", ver.APIVersion, d.cli.ClientVersion()),
		CgroupVersion:  info.CgroupVersion,
		CgroupDriver:   info.CgroupDriver,
		Storage:        info.Driver,
		Runtimes:       map[string][]string{},
		DefaultRuntime: info.DefaultRuntime,
		Seccomp:        slices.ContainsFunc(info.SecurityOptions, func(o string) bool { return strings.HasPrefix(o, "name=seccomp") }),
	}
	for name, rt := range info.Runtimes {
		out.Runtimes[name] = rt.Args
	}
	return out, nil
}

// Probe implements container.Prober: a bare container (network none, no
// bridge, our seccomp profile for that runtime) running cmd under an OCI
// runtime, started, waited for and removed. Docker's default profile would
// not do under gVisor, which answers its clone3 rule with EPERM. The
// container is removed whatever the outcome, under a fresh bounded context
// (the probe's own may have ended), and a removal that fails is the
// probe's error (a *container.LeftError naming it). It has a name of its
// own, so that a create whose answer was lost finds and removes what the
// daemon made (undoCreate).
func (d *Driver) Probe(ctx context.Context, image string, cmd []string, runtime string) (retErr error) {
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	s := container.Spec{Name: "dsh-probe-" + strings.ToLower(rand.Text()), Image: image, Labels: map[string]string{container.LabelPrefix + "probe": "true"}}
	resp, err := d.api.ContainerCreate(ctx,
		&dcontainer.Config{Image: image, Cmd: cmd, Entrypoint: []string{}, Labels: s.Labels},
		&dcontainer.HostConfig{NetworkMode: "none", Runtime: runtime, SecurityOpt: []string{"seccomp=" + seccompJSON(container.SeccompFor(runtime))}}, nil, nil, s.Name)
	if err != nil {
		// The daemon may have made the container before the error.
		return d.undoCreate(ctx, s, "", translate(err, image))
	}
	defer func() { retErr = d.undoCreate(ctx, s, resp.ID, retErr) }()
	wait, errc := d.api.ContainerWait(ctx, resp.ID, dcontainer.WaitConditionNextExit)
	if err := d.api.ContainerStart(ctx, resp.ID, dcontainer.StartOptions{}); err != nil {
		return translate(err, "")
	}
	select {
	case r := <-wait:
		if r.StatusCode != 0 {
			return fmt.Errorf("the probe exited with status %d", r.StatusCode)
		}
		return nil
	case err := <-errc:
		return translate(err, "")
	}
}

// Inspect implements container.Inspector from the daemon's inspection of
// the container.
func (d *Driver) Inspect(ctx context.Context, id string) (container.Applied, error) {
	info, err := d.api.ContainerInspect(ctx, id)
	if err != nil {
		return container.Applied{}, translate(err, "")
	}
	if info.Config == nil || info.HostConfig == nil {
		return container.Applied{}, fmt.Errorf("the daemon's inspection of %s has no configuration", id)
	}
	cfg, hc := info.Config, info.HostConfig
	a := container.Applied{
		Image: d.imageName(cfg.Image), User: cfg.User, Hostname: cfg.Hostname, WorkingDir: cfg.WorkingDir,
		Cmd: cfg.Cmd, Env: cfg.Env, Labels: cfg.Labels,
		ReadOnlyRoot: hc.ReadonlyRootfs,
		NetworkNone:  string(hc.NetworkMode) == "none" && cfg.NetworkDisabled,
		IPCPrivate:   string(hc.IpcMode) == "private" || string(hc.IpcMode) == "none",
		Init:         hc.Init != nil && *hc.Init,
		MemoryBytes:  hc.Memory, MemorySwapBytes: hc.MemorySwap,
		NanoCPUs:       hc.NanoCPUs,
		OCIRuntime:     hc.Runtime,
		Tmpfs:          map[string][]string{},
		SeccompDefault: true,
	}
	if hc.PidsLimit != nil {
		a.Pids = *hc.PidsLimit
	}
	for _, u := range hc.Ulimits {
		if u.Name == "nofile" && u.Soft == u.Hard {
			a.NoFile = u.Hard
		}
	}
	for path, opts := range hc.Tmpfs {
		a.Tmpfs[path] = strings.Split(opts, ",")
	}
	for _, m := range info.Mounts {
		if m.Type == "bind" {
			a.Mounts = append(a.Mounts, container.AppliedMount{Source: m.Source, Destination: m.Destination, ReadOnly: !m.RW})
		}
	}
	for _, o := range hc.SecurityOpt {
		switch {
		case o == "no-new-privileges" || o == "no-new-privileges:true":
			a.NoNewPrivileges = true
		case strings.HasPrefix(o, "seccomp="):
			p := new(specs.LinuxSeccomp)
			if err := json.Unmarshal([]byte(strings.TrimPrefix(o, "seccomp=")), p); err != nil {
				return a, fmt.Errorf("the container's seccomp option does not parse: %w", err)
			}
			a.Seccomp, a.SeccompDefault = p, false
		}
	}
	// The bounding set: Docker's default capabilities, less what is
	// dropped, plus what is added.
	caps := map[string]bool{}
	for _, c := range defaultCapabilities {
		caps[c] = true
	}
	for _, c := range hc.CapDrop {
		if strings.EqualFold(c, "ALL") {
			clear(caps)
			continue
		}
		delete(caps, "CAP_"+strings.TrimPrefix(strings.ToUpper(c), "CAP_"))
	}
	for _, c := range hc.CapAdd {
		caps["CAP_"+strings.TrimPrefix(strings.ToUpper(c), "CAP_")] = true
	}
	if hc.Privileged {
		caps["CAP_SYS_ADMIN"] = true
	}
	a.Capabilities = slices.Sorted(maps.Keys(caps))
	return a, nil
}

// defaultCapabilities are the capabilities Docker grants a container
// unless told otherwise (moby's oci/caps defaults).
var defaultCapabilities = []string{
	"CAP_CHOWN", "CAP_DAC_OVERRIDE", "CAP_FSETID", "CAP_FOWNER", "CAP_MKNOD", "CAP_NET_RAW", "CAP_SETGID", "CAP_SETUID",
	"CAP_SETFCAP", "CAP_SETPCAP", "CAP_NET_BIND_SERVICE", "CAP_SYS_CHROOT", "CAP_KILL", "CAP_AUDIT_WRITE",
}
