package main

import (
	"fmt"
	"runtime"

	"github.com/spf13/cobra"

	"github.com/dsh-container/dsh-container/images"
	"github.com/dsh-container/dsh-container/portproto"
)

func newVersionCmd(f *factory) *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print version, protocol and runner image tags",
		Args:  cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			fmt.Fprintf(f.stdout, "dsh-container %s (%s, %s/%s)\n", Version, runtime.Version(), runtime.GOOS, runtime.GOARCH)
			fmt.Fprintf(f.stdout, "protocol version %d\n", portproto.Version)
			for _, im := range images.Runners {
				fmt.Fprintf(f.stdout, "%s image %s\n", im.Language, im.DefaultTag())
			}
			return nil
		},
	}
}
