package registry

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/containerd/errdefs"

	"github.com/dsh-container/dsh-container/backend"
	"github.com/dsh-container/dsh-container/sdkgen"
)

// Progressive disclosure. In Code Mode the SDK section (and so run_code's
// description over MCP) carries either the full SDK, every tool's typed
// declaration, or the SDK index, one line per tool; with the index the
// model gets the declarations it needs from describe_tools, a second
// reserved tool next to run_code.

// DescribeTools is the name of the reserved tool that returns the full
// declarations of the tools an SDK index names. Like run_code it cannot be
// registered, restrictions never hide it, and it is never part of the SDK;
// it is offered next to run_code when the SDK section is the index, and
// programs never see it (their bindings are the tools, nothing more).
const DescribeTools = sdkgen.DescribeTool

// SDKView selects what the SDK section carries in Code Mode.
type SDKView string

const (
	// SDKFull is every tool's full declaration (the default).
	SDKFull SDKView = "full"
	// SDKIndex is the SDK index, with describe_tools offered.
	SDKIndex SDKView = "index"
	// SDKAuto is the index when the full SDK of the visible tools would
	// be longer than the auto threshold (WithSDKAutoThreshold, default
	// DefaultSDKAutoThreshold bytes), the full SDK otherwise.
	SDKAuto SDKView = "auto"
)

// DefaultSDKAutoThreshold is the size in bytes of the full SDK section
// beyond which SDKAuto presents the index: 32 KiB, roughly 8k tokens.
const DefaultSDKAutoThreshold = 32 << 10

// MaxDescribeNames bounds the names one describe_tools call may ask for.
const MaxDescribeNames = 1024

// SDKViews lists the valid views, the default first.
func SDKViews() []SDKView { return []SDKView{SDKFull, SDKIndex, SDKAuto} }

// ParseSDKView validates s as an SDKView; "" is SDKFull. Errors wrap
// errdefs.ErrInvalidArgument.
func ParseSDKView(s string) (SDKView, error) {
	if s == "" {
		return SDKFull, nil
	}
	for _, v := range SDKViews() {
		if string(v) == s {
			return v, nil
		}
	}
	return "", errorf(errdefs.ErrInvalidArgument, "unknown SDK view %q (valid: full, index, auto)", s)
}

// WithSDK selects what the SDK section carries in Code Mode (default
// SDKFull). An invalid view is reported by Assemble and Execute.
func WithSDK(v SDKView) Option {
	return func(c *config) {
		view, err := ParseSDKView(string(v))
		if err != nil {
			c.err = cmp.Or(c.err, err)
			return
		}
		c.sdkView = view
	}
}

// WithSDKAutoThreshold sets the full SDK size in bytes beyond which
// SDKAuto presents the index; n <= 0 means DefaultSDKAutoThreshold.
func WithSDKAutoThreshold(n int) Option {
	return func(c *config) {
		if n <= 0 {
			n = DefaultSDKAutoThreshold
		}
		c.sdkThreshold = n
	}
}

// describeFlavors holds describe_tools' description per language.
var describeFlavors = map[backend.Language]string{
	backend.TypeScript: "Get the full TypeScript declarations of tools listed in the SDK index: argument and result types and documentation. " +
		"Call it before writing a " + RunCode + " program, naming every tool the program will call.",
	backend.Python: "Get the full Python stubs of tools listed in the SDK index: argument and return types and documentation. " +
		"Call it before writing a " + RunCode + " program, naming every tool the program will call.",
}

// describeParameters is describe_tools' argument schema.
var describeParameters = json.RawMessage(`{"type":"object","properties":{"names":{"type":"array","items":{"type":"string"},"minItems":1,` +
	`"description":"Tool names exactly as the SDK index lists them."}},"required":["names"]}`)

// describeWireTool is describe_tools' schema for lang.
func describeWireTool(lang backend.Language) WireTool {
	return WireTool{Name: DescribeTools, Description: describeFlavors[lang], Parameters: describeParameters}
}

// sdkSection renders the SDK section for tools in lang, the full SDK or
// the index as the view says (index reports which), after prefix in one
// string, joined: the section is joined without prefix. SDKAuto asks for
// the full SDK within the threshold, so telling that a large tool set is
// past it costs about the threshold's bytes of rendering, not the full SDK.
func (r *Registry) sdkSection(lang sdkgen.Language, tools []sdkgen.Tool, prefix string) (text, joined string, index bool, err error) {
	opts := sdkgen.RenderOptions{Prefix: prefix}
	format := sdkgen.FormatPrompt
	switch r.cfg.sdkView {
	case SDKIndex:
		format = sdkgen.FormatIndex
	case SDKAuto:
		opts.Limit = r.cfg.sdkThreshold
	}
	res, err := r.render(lang, format, tools, opts)
	if err == nil && res.Over {
		format, opts.Limit = sdkgen.FormatIndex, 0
		res, err = r.render(lang, format, tools, opts)
	}
	if err != nil {
		return "", "", false, err
	}
	joined, ok := strings.CutPrefix(res.Text, prefix)
	if !ok { // a renderer that does not write the prefix
		return res.Text, "", format == sdkgen.FormatIndex, nil
	}
	return joined, res.Text, format == sdkgen.FormatIndex, nil
}

// describeTools executes a describe_tools call: the declarations, in the
// runtime's language, of the named tools the call's scope can see. A name
// the scope hides is unknown, exactly like a name no tool has.
func (r *Registry) describeTools(_ context.Context, exec Execution) Result {
	_, lang, _, err := r.codeRuntime()
	if err != nil {
		return errorResult(fmt.Errorf("%s: %w", DescribeTools, err))
	}
	names, err := parseDescribeArgs(exec.Arguments)
	if err != nil {
		return errorResult(err)
	}
	selected, unknown := sdkgen.Select(sdkTools(r.visible(exec.Scope)), names)
	if len(unknown) > 0 {
		return errorResult(errorf(errdefs.ErrNotFound, "%s: %s; ask for tools by their names as the SDK index lists them", DescribeTools, unknownList(unknown)))
	}
	res, err := r.render(lang, sdkgen.FormatSource, selected, sdkgen.RenderOptions{})
	if err != nil {
		return errorResult(fmt.Errorf("%s: %w", DescribeTools, err))
	}
	return Result{Content: []Block{TextBlock(res.Text)}}
}

// parseDescribeArgs extracts the names of normalized describe_tools
// arguments: a non-empty array of at most MaxDescribeNames strings.
func parseDescribeArgs(args json.RawMessage) ([]string, error) {
	var a struct {
		Names *[]string `json:"names"`
	}
	if err := json.Unmarshal(args, &a); err != nil || a.Names == nil {
		return nil, errorf(errdefs.ErrInvalidArgument, "%s needs arguments {\"names\": [string, ...]}", DescribeTools)
	}
	switch n := len(*a.Names); {
	case n == 0:
		return nil, errorf(errdefs.ErrInvalidArgument, "%s: names is empty; name the tools whose declarations you need", DescribeTools)
	case n > MaxDescribeNames:
		return nil, errorf(errdefs.ErrInvalidArgument, "%s: %d names; ask for at most %d at a time", DescribeTools, n, MaxDescribeNames)
	}
	return *a.Names, nil
}

// unknownList names unknown tools for an error message: at most 10, each
// quoted and cut at 128 bytes, then how many more.
func unknownList(unknown []string) string {
	const maxNames, maxBytes = 10, 128
	parts := make([]string, 0, maxNames+1)
	for i, n := range unknown {
		if i == maxNames {
			parts = append(parts, fmt.Sprintf("and %d more", len(unknown)-maxNames))
			break
		}
		if len(n) > maxBytes {
			n = strings.ToValidUTF8(n[:maxBytes], "") + "…"
		}
		parts = append(parts, fmt.Sprintf("%q", n))
	}
	what := "no tool named "
	if len(unknown) > 1 {
		what = "no tools named "
	}
	return what + strings.Join(parts, ", ")
}
