package docker

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/containerd/errdefs"
	dcontainer "github.com/docker/docker/api/types/container"
	dimage "github.com/docker/docker/api/types/image"

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
// bridge) running cmd under an OCI runtime, started, waited for and
// removed.
func (d *Driver) Probe(ctx context.Context, image string, cmd []string, runtime string) error {
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	resp, err := d.api.ContainerCreate(ctx,
		&dcontainer.Config{Image: image, Cmd: cmd, Entrypoint: []string{}, Labels: map[string]string{container.LabelPrefix + "probe": "true"}},
		&dcontainer.HostConfig{NetworkMode: "none", Runtime: runtime}, nil, nil, "")
	if err != nil {
		return translate(err, image)
	}
	defer d.api.ContainerRemove(context.WithoutCancel(ctx), resp.ID, dcontainer.RemoveOptions{Force: true})
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
