package main

import (
	"context"
	"io"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/dsh-container/dsh-container/backend"
	"github.com/dsh-container/dsh-container/manifest"
	"github.com/dsh-container/dsh-container/registry"
	"github.com/dsh-container/dsh-container/sdkgen"
)

type sdkOptions struct {
	Lang   string
	Format string
	SDK    string
	Names  string
	Tools  string
}

func newSDKCmd(f *factory) *cobra.Command {
	opts := &sdkOptions{}
	cmd := &cobra.Command{
		Use:   "sdk --tools FILE [--lang typescript|python] [--format prompt|source|index] [--names a,b]",
		Short: "Print the Code Mode SDK generated from a tool manifest",
		Long: `Print the SDK a model sees in Code Mode, generated from the tools' JSON Schemas.

--format prompt (default) prints the whole SDK prompt section: usage
instructions and declarations. --format source prints only the declaration
block as a standalone file (tsc --noEmit --strict accepts the TypeScript one;
CPython compiles the Python one). --format index prints the SDK index: the
usage instructions, one line per tool (tools["name"], its argument names
with ? for optional ones, the first sentence of its description) grouped
by source, and how to get full declarations with describe_tools.

--sdk full|index|auto is the same choice as serve and mcp make for
run_code's description: full is --format prompt, index is --format index,
auto is the index when the full SDK would be longer than 32 KiB.

--names a,b keeps only the named tools: with --format source it prints
exactly what describe_tools returns for them.

The manifest is the one "run" reads ("command" is optional here); a bare JSON
array of tools or a single tool object is accepted too.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if cmd.Flags().Changed("sdk") && cmd.Flags().Changed("format") {
				return usagef("--sdk and --format both choose the format; give one")
			}
			return runSDK(cmd.Context(), f, opts)
		},
	}
	cmd.Flags().StringVar(&opts.Lang, "lang", "typescript", "SDK language: typescript|python")
	cmd.Flags().StringVar(&opts.Format, "format", "prompt", "prompt|source|index")
	addSDKFlag(cmd.Flags(), &opts.SDK)
	cmd.Flags().StringVar(&opts.Names, "names", "", "comma-separated tool names: only these tools (an unknown name is an error)")
	cmd.Flags().StringVar(&opts.Tools, "tools", "", "tool manifest FILE (required)")
	return cmd
}

// addSDKFlag declares --sdk, the SDK view of run_code's description (serve,
// mcp, and sdk as an alias of --format).
func addSDKFlag(fs *pflag.FlagSet, p *string) {
	fs.StringVar(p, "sdk", "", "what run_code's description carries: full|index|auto (auto: the index when the full SDK passes 32 KiB)")
}

// parseSDKView validates --sdk; "" is full.
func parseSDKView(v string) (registry.SDKView, error) {
	view, err := registry.ParseSDKView(v)
	if err != nil {
		return "", usagef("--sdk %q: use full, index or auto", v)
	}
	return view, nil
}

func runSDK(_ context.Context, f *factory, opts *sdkOptions) error {
	lang, err := backend.ParseLanguage(opts.Lang)
	if err != nil {
		return usagef("--lang: %v", err)
	}
	format := sdkgen.Format(opts.Format)
	if format != sdkgen.FormatPrompt && format != sdkgen.FormatSource && format != sdkgen.FormatIndex {
		return usagef("--format %q: use prompt, source or index", opts.Format)
	}
	view, err := parseSDKView(opts.SDK)
	if err != nil {
		return err
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
	if opts.Names != "" {
		sel, unknown := sdkgen.Select(tools, strings.Split(opts.Names, ","))
		if len(unknown) > 0 {
			return usagef("--names: no tool named %q in %s", unknown[0], opts.Tools)
		}
		tools = sel
	}
	switch view {
	case registry.SDKIndex:
		format = sdkgen.FormatIndex
	case registry.SDKAuto:
		format = sdkgen.FormatPrompt
		if full, _ := sdkgen.Render(sdkgen.Language(lang), format, tools); len(full) > registry.DefaultSDKAutoThreshold {
			format = sdkgen.FormatIndex
		}
	}
	text, err := sdkgen.Render(sdkgen.Language(lang), format, tools)
	if err != nil {
		return usageError{err}
	}
	_, err = io.WriteString(f.stdout, text)
	return err
}
