package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/containerd/errdefs"
	"github.com/docker/docker/client"
	"github.com/spf13/cobra"

	"github.com/dsh-container/dsh-container/backend/container/containerd"
	"github.com/dsh-container/dsh-container/backend/container/docker"
	"github.com/dsh-container/dsh-container/images"
)

func newImagesCmd(f *factory) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "images",
		Short: "Build and inspect the runner images",
	}
	var base string
	var sdkCheck bool
	var src ctrdSource
	build := &cobra.Command{
		Use:   "build",
		Short: "Build the runner images (offline: the base comes from Debian packages)",
		Long: `Build the TypeScript and Python runner images, tagged by a hash of their
build inputs, skipping any that are already current. Older tags of the same
images are left alone: another dsh-container version on this host (the
compose daemon beside a newer CLI, say) may still need them. Remove them
with "dsh-container images prune".

Without --base, the base image is built from Debian trixie packages with
mmdebstrap and imported into the daemon (no container registry needed).
With --base REF, the Dockerfiles build on REF (e.g. debian:trixie-slim when a
registry is reachable) and install what it lacks.

With --driver containerd the images go into containerd's namespace under
the same tags: imported from the Docker daemon when one answers (built
there first if needed), else built offline from the same Debian root
filesystem as OCI images (the same Dockerfiles, read as a recipe) and
imported. --from chooses between the two; --base-rootfs gives the offline
build a root filesystem tar to start from instead of running mmdebstrap.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if (src.from != "" || src.rootfs != "") && (len(mustNames(f)) != 1 || mustNames(f)[0] != driverContainerd) {
				return usagef("--from and --base-rootfs apply to --driver containerd")
			}
			switch src.from {
			case "", "docker", "debian":
			default:
				return usagef("--from %q: use docker or debian", src.from)
			}
			if src.rootfs != "" && src.from == "docker" {
				return usagef("--base-rootfs builds offline: it needs --from debian (or no Docker daemon)")
			}
			if src.rootfs != "" && base != "" {
				return usagef("--base and --base-rootfs are two bases: give one")
			}
			return runImagesBuild(cmd.Context(), f, base, sdkCheck, src)
		},
	}
	build.Flags().StringVar(&base, "base", "", "base image reference (default: build one from Debian packages)")
	build.Flags().BoolVar(&sdkCheck, "sdk-check", false, "also build the test-only compiler image used by sdkgen's tests")
	build.Flags().StringVar(&src.from, "from", "", "with --driver containerd: docker (import from the Docker daemon) or debian (build offline as OCI images) (default: docker when its daemon answers)")
	build.Flags().StringVar(&src.rootfs, "base-rootfs", "", "with --driver containerd, offline: the base root filesystem as a tar (default: build it with mmdebstrap)")
	addDriverFlags(build, f)
	cmd.AddCommand(build)
	prune := &cobra.Command{
		Use:   "prune",
		Short: "Remove runner image tags other than the ones this version needs",
		Long: `Remove the daemon's tags of the runner images (and the compiler image)
built from inputs other than this version's. A tag a container still uses
is kept and reported. Run it when no other dsh-container version on this
host needs its images.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runImagesPrune(cmd.Context(), f)
		},
	}
	addDriverFlags(prune, f)
	cmd.AddCommand(prune)
	cmd.AddCommand(&cobra.Command{
		Use:   "tags",
		Short: "Print the tag each image must have (for scripts)",
		Args:  cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			fmt.Fprintf(f.stdout, "base %s\n", images.DefaultBase.Tag())
			for _, im := range append(images.Runners, images.SDKCheck) {
				fmt.Fprintf(f.stdout, "%s %s\n", im.Name, im.DefaultTag())
			}
			return nil
		},
	})
	return cmd
}

// ctrdSource is where `images build --driver containerd` takes the images
// from: --from, --base-rootfs.
type ctrdSource struct {
	from   string
	rootfs string
}

// mustNames is the driver names the flags choose, nil when they are bad
// (openDriver reports that).
func mustNames(f *factory) []string {
	names, _ := f.drv.check(false)
	return names
}

func runImagesBuild(ctx context.Context, f *factory, base string, sdkCheck bool, src ctrdSource) error {
	drv, err := f.connect(ctx)
	if err != nil {
		return err
	}
	defer drv.Close()
	if c, ok := drv.(*containerd.Driver); ok {
		return buildContainerd(ctx, f, c, base, sdkCheck, src)
	}
	d, ok := drv.(*docker.Driver)
	if !ok {
		return fmt.Errorf("%w: the %s driver cannot build images", errdefs.ErrNotImplemented, driverName(drv))
	}
	list := images.Runners
	if sdkCheck {
		list = append(append([]images.Image{}, list...), images.SDKCheck)
	}
	_, err = buildDocker(ctx, f, d.Client(), base, list)
	return err
}

// buildDocker builds list in the Docker daemon (skipping current ones) on
// base, or on the offline base it builds first when base is "".
func buildDocker(ctx context.Context, f *factory, cli *client.Client, base string, list []images.Image) ([]string, error) {
	if base == "" {
		if err := images.EnsureBase(ctx, cli, images.DefaultBase, f.stdout); err != nil {
			return nil, err
		}
		base = images.DefaultBase.Tag()
	}
	var tags []string
	for _, im := range list {
		tag, err := images.Build(ctx, cli, im, base, f.stdout)
		if err != nil {
			return nil, err
		}
		fmt.Fprintf(f.stdout, "%s ready: %s\n", im.Name, tag)
		tags = append(tags, tag)
	}
	return tags, nil
}

// buildContainerd puts the runner images into containerd's namespace,
// tagged like Docker's: from the Docker daemon when one answers (built
// there first if it lacks them), else built offline from the Debian root
// filesystem as OCI images and imported.
func buildContainerd(ctx context.Context, f *factory, c *containerd.Driver, base string, sdkCheck bool, src ctrdSource) error {
	if sdkCheck {
		fmt.Fprintln(f.stdout, "note: --sdk-check: the compiler image serves sdkgen's tests through Docker; it is not put into containerd")
	}
	var missing []images.Image
	for _, im := range images.Runners {
		ok, err := c.ImageExists(ctx, im.DefaultTag())
		if err != nil {
			return err
		}
		if ok {
			fmt.Fprintf(f.stdout, "%s is up to date in containerd namespace %s\n", im.DefaultTag(), c.Namespace())
			continue
		}
		missing = append(missing, im)
	}
	if len(missing) == 0 {
		return nil
	}
	var dk *docker.Driver
	derr := errors.New("--from debian")
	if src.from != "debian" && src.rootfs == "" {
		pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		dk, derr = docker.New(pctx)
		cancel()
	}
	if derr == nil {
		defer dk.Close()
		tags, err := buildDocker(ctx, f, dk.Client(), base, missing)
		if err != nil {
			return err
		}
		for _, tag := range tags {
			if err := importFromDocker(ctx, f, dk.Client(), c, tag); err != nil {
				return err
			}
		}
		return nil
	}
	switch {
	case src.from == "docker":
		return fmt.Errorf("--from docker: %w", derr)
	case src.from == "" && src.rootfs == "" && !errdefs.IsUnavailable(derr):
		return derr
	case base != "":
		return usagef("--base %s needs the Docker daemon (%v); without it the base is built from Debian packages", base, derr)
	case src.from == "":
		fmt.Fprintf(f.stdout, "no Docker daemon (%v): building the images offline as OCI images\n", derr)
	}
	rootfs := src.rootfs
	if rootfs == "" {
		dir, err := os.MkdirTemp("", "dsh-oci")
		if err != nil {
			return err
		}
		defer os.RemoveAll(dir)
		rootfs = filepath.Join(dir, "base.tar")
		if err := images.BuildBaseRootfs(ctx, images.DefaultBase, rootfs, f.stdout); err != nil {
			return err
		}
	} else if st, err := os.Stat(rootfs); err != nil {
		return usagef("--base-rootfs: %v", err)
	} else if !st.Mode().IsRegular() {
		return usagef("--base-rootfs %s: not a file (want a root filesystem tar)", rootfs)
	}
	for _, im := range missing {
		pr, pw := io.Pipe()
		go func() { pw.CloseWithError(images.WriteOCI(pw, im, images.DefaultBase, rootfs)) }()
		names, err := c.Import(ctx, pr)
		pr.CloseWithError(err)
		if err != nil {
			return fmt.Errorf("importing %s: %w", im.DefaultTag(), err)
		}
		fmt.Fprintf(f.stdout, "%s ready in containerd namespace %s (%s)\n", im.Name, c.Namespace(), strings.Join(names, ", "))
	}
	return nil
}

// importFromDocker streams `docker save` of tag into containerd.
func importFromDocker(ctx context.Context, f *factory, cli *client.Client, c *containerd.Driver, tag string) error {
	fmt.Fprintf(f.stdout, "importing %s from the Docker daemon into containerd namespace %s...\n", tag, c.Namespace())
	rc, err := cli.ImageSave(ctx, []string{tag})
	if err != nil {
		return fmt.Errorf("docker save %s: %w", tag, err)
	}
	defer rc.Close()
	names, err := c.Import(ctx, rc)
	if err != nil {
		return err
	}
	if !slices.Contains(names, tag) {
		return fmt.Errorf("importing %s from Docker gave %v", tag, names)
	}
	fmt.Fprintf(f.stdout, "%s ready in containerd namespace %s\n", tag, c.Namespace())
	return nil
}

func runImagesPrune(ctx context.Context, f *factory) error {
	drv, err := f.connect(ctx)
	if err != nil {
		return err
	}
	defer drv.Close()
	all := append(append([]images.Image{}, images.Runners...), images.SDKCheck)
	if c, ok := drv.(*containerd.Driver); ok {
		refs, err := c.ImageRefs(ctx)
		if err != nil {
			return err
		}
		for _, im := range all {
			for _, ref := range refs {
				if ref == im.DefaultTag() || !strings.HasPrefix(ref, images.Repository+im.Name+":") {
					continue
				}
				if err := c.RemoveImage(ctx, ref); err != nil {
					fmt.Fprintf(f.stdout, "kept stale %s: %v\n", ref, err)
					continue
				}
				fmt.Fprintf(f.stdout, "removed stale %s\n", ref)
			}
		}
		return nil
	}
	d, ok := drv.(*docker.Driver)
	if !ok {
		return fmt.Errorf("%w: the %s driver cannot prune images", errdefs.ErrNotImplemented, driverName(drv))
	}
	for _, im := range all {
		if err := images.PruneStale(ctx, d.Client(), im, im.DefaultTag(), f.stdout); err != nil {
			return err
		}
	}
	return nil
}
