package docker

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/containerd/errdefs"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/dsh-container/dsh-container/backend/container"
)

// checkSpec refuses, before anything is created, what Docker would
// otherwise resolve through the image: a User that is not a numeric
// uid:gid (Docker would look a name, or a uid's group, up in the image's
// /etc/passwd and /etc/group), and an image whose configuration Docker
// would merge into the container against the preset (checkImage). It
// returns the ID of the image checked, which the container is created
// from; an image the daemon does not have is an error (missingImage).
func (d *Driver) checkSpec(ctx context.Context, s container.Spec) (string, error) {
	if _, _, err := container.ParseUser(s.User); err != nil {
		return "", err
	}
	return d.checkImage(ctx, s.Image, s.Env)
}

// checkImage resolves ref to its image ID and refuses an image whose
// configuration the daemon would carry into every container made from it
// where the Spec does not say otherwise, against the runtime:
//
//   - a label of container.ReservedLabels: the daemon adds each image
//     label the container does not set to the container's labels, so the
//     image could speak for the runtime to the reaper (the earlier
//     labels it still reads are never set on a new container);
//   - a VOLUME: the daemon mounts a fresh volume at each, writable and
//     executable, past the read-only root and the noexec /tmp;
//   - an ENV variable the Spec's environment (env) does not set: the
//     daemon adds each to the container's environment, so a string of the
//     image's choosing would reach the program's interpreter before the
//     program (NODE_OPTIONS, PYTHONSTARTUP, LD_PRELOAD...). One the Spec
//     sets (PATH, HOME, LANG) is the Spec's: the container's value wins.
//     Refused rather than overridden: the daemon cannot unset a variable,
//     and no value is harmless for every name (an empty LD_LIBRARY_PATH
//     entry is the working directory).
//
// The image's USER, ENTRYPOINT and HEALTHCHECK the Spec always overrides
// (Translate); its other labels land in the container's labels, where
// nothing reads them, and never in its log configuration or runtime,
// which the host config sets.
//
// The reference is resolved on every create and the container is created
// from the ID whose configuration was checked: a reference moved to
// another image after a check (a retag) is checked again, and one moved
// between this check and the create does not reach the create. Nothing is
// remembered by reference; the check is on the inspection in hand. A
// reference the daemon has no image under is refused here (missingImage),
// never left to the create: an image appearing under it after this look
// would be created from unchecked.
func (d *Driver) checkImage(ctx context.Context, ref string, env []string) (string, error) {
	im, err := d.api.ImageInspect(ctx, ref)
	switch {
	case errdefs.IsNotFound(err):
		return "", missingImage(ref)
	case err != nil:
		return "", translate(err, ref)
	case im.ID == "":
		return "", fmt.Errorf("%w: the Docker daemon's inspection of image %s has no ID", errdefs.ErrUnknown, ref)
	}
	if im.Config != nil {
		if bad := imageProblems(&im.Config.ImageConfig, env); len(bad) > 0 {
			return "", fmt.Errorf("%w: image %s carries %s; rebuild it without", errdefs.ErrInvalidArgument, ref, strings.Join(bad, "; "))
		}
	}
	d.imageRefs.Store(im.ID, ref)
	return im.ID, nil
}

// missingImage is the error for a runner image the daemon does not have.
func missingImage(ref string) error {
	return fmt.Errorf("%w: runner image %s is missing; build it with `dsh-container images build` (or `make images`)", errdefs.ErrNotFound, ref)
}

// imageProblems lists what checkImage refuses in an image's configuration.
func imageProblems(cfg *ocispec.ImageConfig, env []string) []string {
	var bad []string
	for _, k := range container.ReservedLabels() {
		if v, found := cfg.Labels[k]; found {
			bad = append(bad, fmt.Sprintf("label %s=%q, which the runtime sets on its containers and its reaper judges them by (Docker copies image labels into every container)", k, v))
		}
	}
	if len(cfg.Volumes) > 0 {
		var vols []string
		for v := range cfg.Volumes {
			vols = append(vols, v)
		}
		slices.Sort(vols)
		bad = append(bad, fmt.Sprintf("VOLUME %s (Docker would mount a writable, executable volume there, past the read-only root and the noexec /tmp)", strings.Join(vols, " ")))
	}
	set := make([]string, 0, len(env))
	for _, kv := range env {
		k, _, _ := strings.Cut(kv, "=")
		set = append(set, k)
	}
	var extra []string
	for _, kv := range cfg.Env {
		if k, _, _ := strings.Cut(kv, "="); !slices.Contains(set, k) && !slices.Contains(extra, k) {
			extra = append(extra, k)
		}
	}
	if len(extra) > 0 {
		slices.Sort(extra)
		bad = append(bad, fmt.Sprintf("ENV %s (Docker would add the image's environment to the program's; the runtime sets only %s)", strings.Join(extra, " "), strings.Join(set, ", ")))
	}
	return bad
}

// imageName is the reference a container's image ID was resolved from
// (the last one, when several name it), for Inspect: the container is
// created from the ID.
func (d *Driver) imageName(image string) string {
	if ref, ok := d.imageRefs.Load(image); ok {
		return ref.(string)
	}
	return image
}
