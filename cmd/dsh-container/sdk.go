package main

import (
	"context"
	"io"

	"github.com/spf13/cobra"

	"github.com/dsh-container/dsh-container/backend"
	"github.com/dsh-container/dsh-container/manifest"
	"github.com/dsh-container/dsh-container/sdkgen"
)

type sdkOptions struct {
	Lang   string
	Format string
	Tools  string
}

func newSDKCmd(f *factory) *cobra.Command {
	opts := &sdkOptions{}
	cmd := &cobra.Command{
		Use:   "sdk --tools FILE [--lang typescript|python] [--format prompt|source]",
		Short: "Print the Code Mode SDK generated from a tool manifest",
		Long: `Print the SDK a model sees in Code Mode, generated from the tools' JSON Schemas.

--format prompt (default) prints the whole SDK prompt section: usage
instructions and declarations. --format source prints only the declaration
block as a standalone file (tsc --noEmit --strict accepts the TypeScript one;
CPython compiles the Python one).

The manifest is the one "run" reads ("command" is optional here); a bare JSON
array of tools or a single tool object is accepted too.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runSDK(cmd.Context(), f, opts)
		},
	}
	cmd.Flags().StringVar(&opts.Lang, "lang", "typescript", "SDK language: typescript|python")
	cmd.Flags().StringVar(&opts.Format, "format", "prompt", "prompt|source")
	cmd.Flags().StringVar(&opts.Tools, "tools", "", "tool manifest FILE (required)")
	return cmd
}

func runSDK(_ context.Context, f *factory, opts *sdkOptions) error {
	lang, err := backend.ParseLanguage(opts.Lang)
	if err != nil {
		return usagef("--lang: %v", err)
	}
	if opts.Format != "prompt" && opts.Format != "source" {
		return usagef("--format %q: use prompt or source", opts.Format)
	}
	if opts.Tools == "" {
		return usagef("--tools FILE is required")
	}
	m, err := manifest.Load(opts.Tools, manifest.Options{AllowBare: true})
	if err != nil {
		return err
	}
	tools := make([]sdkgen.Tool, 0, len(m.Tools))
	for _, t := range m.Tools {
		tools = append(tools, sdkgen.Tool{Name: t.Name, Description: t.Description, InputSchema: t.InputSchema})
	}
	text, err := sdkgen.Render(sdkgen.Language(lang), sdkgen.Format(opts.Format), tools)
	if err != nil {
		return usageError{err}
	}
	_, err = io.WriteString(f.stdout, text)
	return err
}
