package docker

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/containerd/errdefs"
	dcontainer "github.com/docker/docker/api/types/container"
	dimage "github.com/docker/docker/api/types/image"
	"github.com/docker/docker/api/types/network"
	"github.com/docker/docker/client"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/dsh-container/dsh-container/backend/container"
)

// createAPI fakes the calls Create makes, counting them. The image under
// every reference is image, of ID id ("sha256:1" when empty).
type createAPI struct {
	apiClient // nil: any other call panics
	image     ocispec.ImageConfig
	id        string
	missing   bool
	inspects  int
	created   []*dcontainer.Config
}

func (a *createAPI) ImageInspect(context.Context, string, ...client.ImageInspectOption) (dimage.InspectResponse, error) {
	a.inspects++
	if a.missing {
		return dimage.InspectResponse{}, errdefs.ErrNotFound
	}
	id := a.id
	if id == "" {
		id = "sha256:1"
	}
	// Built from JSON, as the client decodes the daemon's answer.
	var r dimage.InspectResponse
	b, _ := json.Marshal(map[string]any{"Id": id, "Config": a.image})
	err := json.Unmarshal(b, &r)
	return r, err
}

func (a *createAPI) ContainerCreate(_ context.Context, cfg *dcontainer.Config, _ *dcontainer.HostConfig, _ *network.NetworkingConfig, _ any, _ string) (dcontainer.CreateResponse, error) {
	a.created = append(a.created, cfg)
	return dcontainer.CreateResponse{ID: "c1"}, nil
}

func runnerSpec() container.Spec {
	return container.Spec{Name: "dsh-x", Image: "dsh-container/py-runner:abc", User: container.RunnerUser, Cmd: []string{"python3"},
		Env:    []string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=/tmp", "LANG=C.UTF-8"},
		Labels: map[string]string{container.LabelManaged: "true", container.LabelOwner: "o"}}
}

// A User that is not a numeric uid:gid is refused before any call to the
// daemon: Docker would resolve it through the image's /etc/passwd.
func TestCreateRefusesUnparsableUser(t *testing.T) {
	for _, u := range []string{"", "root", "0", "abc", "-1", "4294967296", "4294967295:0", "99999999999:0", "1000:x"} {
		api := &createAPI{}
		d := &Driver{api: api}
		s := runnerSpec()
		s.User = u
		if _, err := d.Create(context.Background(), s); !errdefs.IsInvalidArgument(err) || !strings.Contains(err.Error(), "User") {
			t.Errorf("User %q: %v, want InvalidArgument naming User", u, err)
		}
		if api.inspects != 0 || len(api.created) != 0 {
			t.Errorf("User %q: %d inspects, %d creates before the refusal", u, api.inspects, len(api.created))
		}
	}
}

// An image carrying a label the runtime sets and the reaper reads, or a
// VOLUME, is refused before anything is created; one without them is
// checked at each create (a missing one: TestCreateRefusesAMissingImage).
func TestCreateChecksTheImage(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		name  string
		image ocispec.ImageConfig
		want  []string
	}{
		{"owner label", ocispec.ImageConfig{Labels: map[string]string{container.LabelOwner: "victim"}}, []string{container.LabelOwner, `"victim"`}},
		{"bridge label", ocispec.ImageConfig{Labels: map[string]string{container.LabelBridge: "s-x", "org.opencontainers.image.title": "t"}}, []string{container.LabelBridge}},
		{"earlier managed label", ocispec.ImageConfig{Labels: map[string]string{"io.dsh-container.managed": "true", "io.dsh-container.owner": "1.1.gone"}}, []string{"io.dsh-container.managed", "io.dsh-container.owner"}},
		{"volume", ocispec.ImageConfig{Volumes: map[string]struct{}{"/var/tmp": {}, "/data": {}}}, []string{"VOLUME /data /var/tmp"}},
		{"environment", ocispec.ImageConfig{Env: []string{"PATH=/opt/evil:/usr/bin", "NODE_OPTIONS=--require /tmp/x.js", "PYTHONSTARTUP=/tmp/x.py", "LD_PRELOAD=/tmp/x.so", "NODE_OPTIONS=--inspect", "EMPTY"}},
			[]string{"ENV EMPTY LD_PRELOAD NODE_OPTIONS PYTHONSTARTUP (", "the runtime sets only PATH, HOME, LANG"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			api := &createAPI{image: c.image}
			d := &Driver{api: api}
			_, err := d.Create(ctx, runnerSpec())
			if !errdefs.IsInvalidArgument(err) {
				t.Fatalf("%v, want InvalidArgument", err)
			}
			for _, w := range append(c.want, "dsh-container/py-runner:abc") {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("%q lacks %q", err, w)
				}
			}
			if len(api.created) != 0 {
				t.Errorf("created %d containers", len(api.created))
			}
			// Refused again: a refusal is not remembered as a pass.
			if _, err := d.Create(ctx, runnerSpec()); !errdefs.IsInvalidArgument(err) || api.inspects != 2 {
				t.Errorf("second create: %v after %d inspects", err, api.inspects)
			}
		})
	}
	// Other labels, ours under the prefix included, pass, and so does an
	// environment the Spec sets (its values win); the reference is
	// resolved on each create and the container made from the ID checked.
	api := &createAPI{id: "sha256:good", image: ocispec.ImageConfig{User: "0", Env: []string{"PATH=/usr/local/sbin:/usr/bin", "LANG=C"}, Labels: map[string]string{
		container.LabelPrefix + "image": "py-runner", "io.containerd.logger.uri": "binary:///bin/sh", "com.docker.log-driver": "json-file"}}}
	d := &Driver{api: api}
	for range 3 {
		if _, err := d.Create(ctx, runnerSpec()); err != nil {
			t.Fatal(err)
		}
	}
	if api.inspects != 3 || len(api.created) != 3 {
		t.Fatalf("%d inspects, %d creates; want 3 and 3", api.inspects, len(api.created))
	}
	for _, cfg := range api.created {
		if cfg.Image != "sha256:good" {
			t.Fatalf("created from %q, want the ID checked", cfg.Image)
		}
	}
	if got := d.imageName("sha256:good"); got != runnerSpec().Image {
		t.Errorf("the ID's reference for Inspect: %q", got)
	}
	// The image's USER and HEALTHCHECK never apply.
	if cfg := api.created[0]; cfg.User != container.RunnerUser || cfg.Healthcheck == nil || strings.Join(cfg.Healthcheck.Test, " ") != "NONE" {
		t.Errorf("user %q, healthcheck %+v", cfg.User, cfg.Healthcheck)
	}
}

// A reference the daemon has no image under is refused at the check,
// naming the image and how to build it, and nothing is created: a create
// from the reference would take whatever image appeared under it after
// the check, unchecked.
func TestCreateRefusesAMissingImage(t *testing.T) {
	api := &createAPI{missing: true}
	d := &Driver{api: api}
	_, err := d.Create(context.Background(), runnerSpec())
	if !errdefs.IsNotFound(err) {
		t.Fatalf("%v, want NotFound", err)
	}
	for _, w := range []string{"runner image dsh-container/py-runner:abc is missing", "dsh-container images build"} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("%q lacks %q", err, w)
		}
	}
	if api.inspects != 1 || len(api.created) != 0 {
		t.Fatalf("%d inspects, %d creates; want 1 and none", api.inspects, len(api.created))
	}
}

// Another image tagged under a reference after a create checked it
// (a retag) is checked again, and refused: the check is on the image ID
// the reference names at each create, and the container made from that
// ID.
func TestCreateChecksARetaggedImage(t *testing.T) {
	ctx := context.Background()
	api := &createAPI{id: "sha256:good"}
	d := &Driver{api: api}
	if _, err := d.Create(ctx, runnerSpec()); err != nil || len(api.created) != 1 || api.created[0].Image != "sha256:good" {
		t.Fatalf("%v, created %d", err, len(api.created))
	}
	// The same reference now names an image with an environment and a
	// reserved label.
	api.id = "sha256:evil"
	api.image = ocispec.ImageConfig{Env: []string{"NODE_OPTIONS=--require /tmp/x.js"}, Labels: map[string]string{container.LabelOwner: "victim"}}
	_, err := d.Create(ctx, runnerSpec())
	if !errdefs.IsInvalidArgument(err) || !strings.Contains(err.Error(), "ENV NODE_OPTIONS") || !strings.Contains(err.Error(), container.LabelOwner) {
		t.Fatalf("after the retag: %v, want InvalidArgument naming the ENV and the label", err)
	}
	if len(api.created) != 1 {
		t.Fatalf("%d creates after the retag", len(api.created))
	}
}
