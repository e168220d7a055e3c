package containerd

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"

	containerdclient "github.com/containerd/containerd"
	"github.com/containerd/containerd/images"
	"github.com/containerd/errdefs"
	"github.com/opencontainers/image-spec/identity"
)

// resolvedImage is what creating a container needs of its image: the
// chain id of its unpacked root filesystem, the parent of every
// container's snapshot.
type resolvedImage struct {
	name    string
	chainID string
}

// ErrImageMissing reports a runner image missing from the namespace, with
// the fix.
func ErrImageMissing(ref, namespace string) error {
	return fmt.Errorf("%w: runner image %s is missing from containerd namespace %s; build it with `dsh-container images build --driver containerd`", errdefs.ErrNotFound, ref, namespace)
}

// lookupImage finds ref in the namespace: under that very name, or under
// its normalized Docker form (docker.io/library/...), as an import of a
// Docker archive names it.
func (d *Driver) lookupImage(ctx context.Context, ref string) (images.Image, error) {
	is := d.client.ImageService()
	var last error
	for _, name := range imageNames(ref) {
		im, err := is.Get(ctx, name)
		if err == nil {
			return im, nil
		}
		if last = fromGRPC(err); !errdefs.IsNotFound(last) {
			return images.Image{}, d.translate(last)
		}
	}
	return images.Image{}, ErrImageMissing(ref, d.ns)
}

// imageNames are the names ref may be stored under.
func imageNames(ref string) []string {
	names := []string{ref}
	first, _, _ := strings.Cut(ref, "/")
	if !strings.ContainsAny(first, ".:") && first != "localhost" {
		if !strings.Contains(ref, "/") {
			names = append(names, "docker.io/library/"+ref)
		} else {
			names = append(names, "docker.io/"+ref)
		}
	}
	return names
}

// familiar turns a normalized Docker reference back into the short form
// the runtime uses ("docker.io/library/x:t" → "x:t").
func familiar(name string) string {
	if rest, ok := strings.CutPrefix(name, "docker.io/"); ok {
		return strings.TrimPrefix(rest, "library/")
	}
	return name
}

// resolveImage returns ref's snapshot parent, unpacking the image into the
// driver's snapshotter the first time if needed. It is remembered: a
// container's creation costs no image lookup.
func (d *Driver) resolveImage(ctx context.Context, ref string) (resolvedImage, error) {
	d.imagesMu.Lock()
	defer d.imagesMu.Unlock()
	if r, ok := d.images[ref]; ok {
		return r, nil
	}
	im, err := d.lookupImage(ctx, ref)
	if err != nil {
		return resolvedImage{}, err
	}
	img := containerdclient.NewImage(d.client, im)
	unpacked, err := img.IsUnpacked(ctx, d.sn)
	if err != nil {
		return resolvedImage{}, fmt.Errorf("image %s: %w", ref, d.translate(fromGRPC(err)))
	}
	if !unpacked {
		d.log.Info("unpacking image", "image", ref, "snapshotter", d.sn)
		if err := img.Unpack(ctx, d.sn); err != nil {
			return resolvedImage{}, fmt.Errorf("unpacking image %s into snapshotter %s: %w", ref, d.sn, d.translate(fromGRPC(err)))
		}
	}
	diffIDs, err := img.RootFS(ctx)
	if err != nil {
		return resolvedImage{}, fmt.Errorf("image %s: %w", ref, d.translate(fromGRPC(err)))
	}
	r := resolvedImage{name: im.Name, chainID: identity.ChainID(diffIDs).String()}
	d.images[ref] = r
	return r, nil
}

func (d *Driver) forgetImage(ref string) {
	d.imagesMu.Lock()
	delete(d.images, ref)
	d.imagesMu.Unlock()
}

// ImageExists implements container.ImageChecker: the image is in the
// namespace (under its name or its normalized Docker form).
func (d *Driver) ImageExists(ctx context.Context, ref string) (bool, error) {
	_, err := d.lookupImage(d.nsCtx(ctx), ref)
	switch {
	case err == nil:
		return true, nil
	case errdefs.IsNotFound(err):
		return false, nil
	}
	return false, err
}

// ImageRefs implements container.ImageChecker: every image name in the
// namespace, normalized Docker names in their short form.
func (d *Driver) ImageRefs(ctx context.Context) ([]string, error) {
	list, err := d.client.ImageService().List(d.nsCtx(ctx))
	if err != nil {
		return nil, d.translate(fromGRPC(err))
	}
	refs := make([]string, 0, len(list))
	for _, im := range list {
		refs = append(refs, familiar(im.Name))
	}
	slices.Sort(refs)
	return slices.Compact(refs), nil
}

// Import reads an image archive (`docker save` output, or an OCI image
// layout in a tar) into the namespace, names each image it holds by its
// short name (as the runtime refers to it), and unpacks it into the
// driver's snapshotter. It returns the names.
func (d *Driver) Import(ctx context.Context, archive io.Reader) ([]string, error) {
	ctx = d.nsCtx(ctx)
	imported, err := d.client.Import(ctx, archive)
	if err != nil {
		return nil, fmt.Errorf("importing into containerd namespace %s: %w", d.ns, d.translate(fromGRPC(err)))
	}
	is := d.client.ImageService()
	var names []string
	for _, im := range imported {
		name := familiar(im.Name)
		if name != im.Name {
			short := images.Image{Name: name, Target: im.Target, Labels: im.Labels}
			if _, err := is.Update(ctx, short, "target"); errdefs.IsNotFound(err) {
				_, err = is.Create(ctx, short)
				if err != nil {
					return nil, fmt.Errorf("naming image %s: %w", name, fromGRPC(err))
				}
			} else if err != nil {
				return nil, fmt.Errorf("naming image %s: %w", name, fromGRPC(err))
			}
			if err := is.Delete(ctx, im.Name); err != nil && !errdefs.IsNotFound(err) {
				return nil, fmt.Errorf("dropping the long name %s: %w", im.Name, fromGRPC(err))
			}
		}
		d.forgetImage(name)
		if _, err := d.resolveImage(ctx, name); err != nil {
			return nil, err
		}
		names = append(names, name)
	}
	return names, nil
}

// RemoveImage removes an image name from the namespace (its content and
// snapshots go with containerd's garbage collection).
func (d *Driver) RemoveImage(ctx context.Context, ref string) error {
	ctx = d.nsCtx(ctx)
	d.forgetImage(ref)
	var found bool
	for _, name := range imageNames(ref) {
		err := d.client.ImageService().Delete(ctx, name)
		if err == nil {
			found = true
		} else if !errdefs.IsNotFound(fromGRPC(err)) {
			return d.translate(fromGRPC(err))
		}
	}
	if !found {
		return fmt.Errorf("%w: no image %s in containerd namespace %s", errdefs.ErrNotFound, ref, d.ns)
	}
	return nil
}
