package main

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/dsh-container/dsh-container/images"
)

func newImagesCmd(f *factory) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "images",
		Short: "Build and inspect the runner images",
	}
	var base string
	var sdkCheck bool
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
registry is reachable) and install what it lacks.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runImagesBuild(cmd.Context(), f, base, sdkCheck)
		},
	}
	build.Flags().StringVar(&base, "base", "", "base image reference (default: build one from Debian packages)")
	build.Flags().BoolVar(&sdkCheck, "sdk-check", false, "also build the test-only compiler image used by sdkgen's tests")
	cmd.AddCommand(build)
	cmd.AddCommand(&cobra.Command{
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
	})
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

func runImagesBuild(ctx context.Context, f *factory, base string, sdkCheck bool) error {
	drv, err := f.connect(ctx)
	if err != nil {
		return err
	}
	defer drv.Close()
	cli := drv.Client()
	if base == "" {
		if err := images.EnsureBase(ctx, cli, images.DefaultBase, f.stdout); err != nil {
			return err
		}
		base = images.DefaultBase.Tag()
	}
	list := images.Runners
	if sdkCheck {
		list = append(append([]images.Image{}, list...), images.SDKCheck)
	}
	for _, im := range list {
		tag, err := images.Build(ctx, cli, im, base, f.stdout)
		if err != nil {
			return err
		}
		fmt.Fprintf(f.stdout, "%s ready: %s\n", im.Name, tag)
	}
	return nil
}

func runImagesPrune(ctx context.Context, f *factory) error {
	drv, err := f.connect(ctx)
	if err != nil {
		return err
	}
	defer drv.Close()
	for _, im := range append(append([]images.Image{}, images.Runners...), images.SDKCheck) {
		if err := images.PruneStale(ctx, drv.Client(), im, im.DefaultTag(), f.stdout); err != nil {
			return err
		}
	}
	return nil
}
