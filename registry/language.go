package registry

import (
	"encoding/json"
	"slices"
	"strings"

	"github.com/containerd/errdefs"

	"github.com/dsh-container/dsh-container/backend"
	"github.com/dsh-container/dsh-container/sdkgen"
)

// Language dispatch (seed 004). The runtime's Language() is the single source
// of truth; two parallel tables map it to the language sdkgen renders its SDK
// in and to the model-facing run_code strings, so the SDK section and the
// transport schema always speak the same language. Adding a language is one
// entry in each table plus its sdkgen renderer; a test pins the two key sets
// equal. A language absent from the tables fails assembly and run_code
// loudly: there is no fallback that would show the model the wrong language.

// sdkLanguages maps a runtime language to the language of its SDK.
var sdkLanguages = map[backend.Language]sdkgen.Language{
	backend.TypeScript: sdkgen.TypeScript,
	backend.Python:     sdkgen.Python,
}

// sdkRenderer renders an SDK text: sdkgen.RenderWith.
type sdkRenderer func(sdkgen.Language, sdkgen.Format, []sdkgen.Tool, sdkgen.RenderOptions) (sdkgen.Rendered, error)

// runCodeFlavor holds the two model-facing run_code strings of a language.
type runCodeFlavor struct {
	description string // the tool's description
	code        string // the description of its code parameter
}

// runCodeFlavors maps a language to its run_code strings.
var runCodeFlavors = map[backend.Language]runCodeFlavor{
	backend.TypeScript: {
		description: "Run a TypeScript program against the tools SDK described in the system prompt. " +
			"Call tools with `await tools[\"name\"](args)`; a failed call rejects with an Error you can catch. " +
			"Only what the program logs (console.log) or returns comes back to you, so return or log just what you need. " +
			"Tool calls run one at a time in the order they are made, even under Promise.all. " +
			"Each program runs in a fresh sandbox with no network and no state kept between runs.",
		code: "The body of an async TypeScript function: top-level await and return work. " +
			"Use erasable TypeScript only (types are stripped before it runs; no enum or namespace). " +
			"The run completes when the program returns or reaches its end; process.exit() at any status, 0 included, ends it as a failed run (kind exit).",
	},
	backend.Python: {
		description: "Run a Python program against the tools SDK described in the system prompt. " +
			"Call tools with `await tools.name(args)` or `await tools[\"name\"](args)` with plain dict/list arguments; " +
			"a failed call raises ToolCallError, which you can catch. " +
			"Only what the program prints or returns comes back to you, so return or print just what you need. " +
			"Tool calls run one at a time in the order they are made, even under asyncio.gather. " +
			"Each program runs in a fresh sandbox with no network and no state kept between runs.",
		code: "The body of an async Python function: top-level await and return work. " +
			"The run completes when the program returns or reaches its end; sys.exit(), exit() or os._exit() at any status, 0 included, ends it as a failed run (kind exit).",
	},
}

// knownLanguages lists the languages with an SDK, sorted.
func knownLanguages() string {
	names := make([]string, 0, len(sdkLanguages))
	for l := range sdkLanguages {
		names = append(names, string(l))
	}
	slices.Sort(names)
	return strings.Join(names, ", ")
}

// codeRuntime returns the runtime Code Mode needs, with its SDK's language
// and run_code flavor, or an error wrapping errdefs.ErrFailedPrecondition
// that names the known languages.
func (r *Registry) codeRuntime() (backend.Runtime, sdkgen.Language, runCodeFlavor, error) {
	rt := r.cfg.runtime
	if rt == nil {
		return nil, "", runCodeFlavor{}, errorf(errdefs.ErrFailedPrecondition, "tool mode %q needs a code runtime and none is configured (known languages: %s)",
			r.cfg.mode, knownLanguages())
	}
	lang := rt.Language()
	sdkLang, ok := sdkLanguages[lang]
	if !ok {
		return nil, "", runCodeFlavor{}, errorf(errdefs.ErrFailedPrecondition, "code runtime language %q has no SDK renderer (known languages: %s)",
			lang, knownLanguages())
	}
	flavor, ok := runCodeFlavors[lang]
	if !ok { // unreachable while the tables are in step (see the tables test)
		return nil, "", runCodeFlavor{}, errorf(errdefs.ErrFailedPrecondition, "code runtime language %q has no run_code description (known languages: %s)",
			lang, knownLanguages())
	}
	return rt, sdkLang, flavor, nil
}

// wireTool is run_code's schema in the given flavor.
func (f runCodeFlavor) wireTool() WireTool {
	type prop struct {
		Type        string `json:"type"`
		Description string `json:"description"`
	}
	type schema struct {
		Type       string          `json:"type"`
		Properties map[string]prop `json:"properties"`
		Required   []string        `json:"required"`
	}
	params, err := json.Marshal(schema{
		Type:       "object",
		Properties: map[string]prop{"code": {Type: "string", Description: f.code}},
		Required:   []string{"code"},
	})
	if err != nil {
		panic("registry: run_code schema: " + err.Error()) // static data
	}
	return WireTool{Name: RunCode, Description: f.description, Parameters: params}
}
