package docker

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/containerd/errdefs"

	"github.com/dsh-container/dsh-container/backend/container"
)

// checkSpec refuses, before anything is created, what Docker would
// otherwise resolve through the image: a User that is not a numeric
// uid:gid (Docker would look a name, or a uid's group, up in the image's
// /etc/passwd and /etc/group), and an image whose configuration Docker
// would merge into the container against the preset (checkImage).
func (d *Driver) checkSpec(ctx context.Context, s container.Spec) error {
	if _, _, err := container.ParseUser(s.User); err != nil {
		return err
	}
	return d.checkImage(ctx, s.Image)
}

// checkImage refuses an image whose configuration the daemon would carry
// into every container made from it where the Spec does not say
// otherwise, against the runtime:
//
//   - a label of container.ReservedLabels: the daemon adds each image
//     label the container does not set to the container's labels, so the
//     image could speak for the runtime to the reaper (the earlier
//     labels it still reads are never set on a new container);
//   - a VOLUME: the daemon mounts a fresh volume at each, writable and
//     executable, past the read-only root and the noexec /tmp.
//
// The image's USER, ENTRYPOINT and HEALTHCHECK the Spec always overrides
// (Translate); its other labels land in the container's labels, where
// nothing reads them, and never in its log configuration or runtime,
// which the host config sets.
//
// An image that passes is remembered by reference for the driver's life,
// as the containerd driver remembers the snapshot an image reference
// resolved to; one that is missing is left to the create to report.
func (d *Driver) checkImage(ctx context.Context, ref string) error {
	if _, ok := d.imagesChecked.Load(ref); ok {
		return nil
	}
	im, err := d.api.ImageInspect(ctx, ref)
	switch {
	case errdefs.IsNotFound(err):
		return nil
	case err != nil:
		return translate(err, ref)
	case im.Config == nil:
		d.imagesChecked.Store(ref, true)
		return nil
	}
	var bad []string
	for _, k := range container.ReservedLabels() {
		if v, found := im.Config.Labels[k]; found {
			bad = append(bad, fmt.Sprintf("label %s=%q, which the runtime sets on its containers and its reaper judges them by (Docker copies image labels into every container)", k, v))
		}
	}
	if len(im.Config.Volumes) > 0 {
		var vols []string
		for v := range im.Config.Volumes {
			vols = append(vols, v)
		}
		slices.Sort(vols)
		bad = append(bad, fmt.Sprintf("VOLUME %s (Docker would mount a writable, executable volume there, past the read-only root and the noexec /tmp)", strings.Join(vols, " ")))
	}
	if len(bad) > 0 {
		return fmt.Errorf("%w: image %s carries %s; rebuild it without", errdefs.ErrInvalidArgument, ref, strings.Join(bad, "; "))
	}
	d.imagesChecked.Store(ref, true)
	return nil
}
