package registry

import (
	"context"
	"encoding/json"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/containerd/errdefs"

	"github.com/dsh-container/dsh-container/backend"
	"github.com/dsh-container/dsh-container/registry/registrytest"
	"github.com/dsh-container/dsh-container/sdkgen"
)

func TestRegister(t *testing.T) {
	exec := func(context.Context, Execution) ([]Block, error) { return nil, nil }
	tests := []struct {
		name    string
		tool    Tool
		wantErr func(error) bool
		errText string
	}{
		{name: "ok", tool: Tool{Name: "read", Execute: exec}},
		{name: "exotic name", tool: Tool{Name: "my tool/__proto__", Execute: exec}},
		{name: "empty name", tool: Tool{Execute: exec}, wantErr: errdefs.IsInvalidArgument, errText: "empty tool name"},
		{name: "reserved run_code", tool: Tool{Name: RunCode, Execute: exec}, wantErr: errdefs.IsInvalidArgument, errText: "reserved"},
		{name: "duplicate", tool: Tool{Name: "dup", Execute: exec}, wantErr: errdefs.IsAlreadyExists, errText: "already registered"},
		{name: "nil execute", tool: Tool{Name: "x"}, wantErr: errdefs.IsInvalidArgument, errText: "no Execute"},
		{name: "invalid utf8 name", tool: Tool{Name: "a\xffb", Execute: exec}, wantErr: errdefs.IsInvalidArgument, errText: "UTF-8"},
		{name: "long name", tool: Tool{Name: strings.Repeat("n", backend.MaxFunctionNameBytes+1), Execute: exec}, wantErr: errdefs.IsInvalidArgument, errText: "longer than"},
		{name: "schema not JSON", tool: Tool{Name: "s1", Execute: exec, Parameters: json.RawMessage(`{"type":`)}, wantErr: errdefs.IsInvalidArgument, errText: "parameters schema"},
		{name: "schema NaN", tool: Tool{Name: "s2", Execute: exec, Parameters: json.RawMessage(`{"default":NaN}`)}, wantErr: errdefs.IsInvalidArgument, errText: "parameters schema"},
		{name: "schema not object", tool: Tool{Name: "s3", Execute: exec, Parameters: json.RawMessage(`["type"]`)}, wantErr: errdefs.IsInvalidArgument, errText: "must be a JSON object"},
		{name: "schema duplicate key", tool: Tool{Name: "s4", Execute: exec, Parameters: json.RawMessage(`{"type":"object","type":"string"}`)}, wantErr: errdefs.IsInvalidArgument, errText: "duplicate object key"},
	}
	r := newReg(t)
	mustRegister(t, r, Tool{Name: "dup", Execute: exec})
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := r.Register(tt.tool)
			if tt.wantErr == nil {
				if err != nil {
					t.Fatalf("Register: %v", err)
				}
				return
			}
			if err == nil || !tt.wantErr(err) || !strings.Contains(err.Error(), tt.errText) {
				t.Fatalf("Register error = %v, want the right class, containing %q", err, tt.errText)
			}
		})
	}
}

func TestRegisterSchemaKept(t *testing.T) {
	r := newReg(t)
	mustRegister(t, r,
		Tool{Name: "a", Execute: echoTool("a").Execute},
		Tool{Name: "b", Execute: echoTool("b").Execute, Parameters: json.RawMessage("{ \"type\": \"object\",\n \"properties\": {\"z\": {}, \"a\": {}} }")},
	)
	asm, err := r.Assemble(t.Context(), Scope{})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, w := range asm.Tools {
		got[w.Name] = string(w.Parameters)
	}
	want := map[string]string{
		"a": `{"type":"object"}`,                              // nil parameters: the default
		"b": `{"type":"object","properties":{"z":{},"a":{}}}`, // compacted, key order kept
	}
	if !maps.Equal(got, want) {
		t.Fatalf("parameters = %v, want %v", got, want)
	}
}

func TestParseMode(t *testing.T) {
	tests := []struct {
		in      string
		want    Mode
		wantErr bool
	}{
		{"", ModeNative, false},
		{"native", ModeNative, false},
		{"code", ModeCode, false},
		{"both", ModeBoth, false},
		{"Code", "", true},
		{"all", "", true},
		{" native", "", true},
	}
	for _, tt := range tests {
		got, err := ParseMode(tt.in)
		if tt.wantErr {
			if err == nil || !errdefs.IsInvalidArgument(err) || !strings.Contains(err.Error(), "valid: native, code, both") {
				t.Errorf("ParseMode(%q) error = %v, want an invalid-argument error listing the modes", tt.in, err)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("ParseMode(%q) = %q, %v; want %q", tt.in, got, err, tt.want)
		}
	}
	if got := New().Mode(); got != ModeNative {
		t.Errorf("default mode = %q, want native", got)
	}
	if got := New(WithMode("")).Mode(); got != ModeNative {
		t.Errorf("WithMode(\"\") mode = %q, want native", got)
	}
}

func TestInvalidModeOption(t *testing.T) {
	r := newReg(t, WithMode("turbo"))
	if _, err := r.Assemble(t.Context(), Scope{}); err == nil || !errdefs.IsInvalidArgument(err) || !strings.Contains(err.Error(), `"turbo"`) {
		t.Fatalf("Assemble error = %v, want the invalid mode", err)
	}
	res := r.Execute(t.Context(), Call{ID: "c", Name: "x"})
	if !res.IsError || !errdefs.IsInvalidArgument(res.Err) {
		t.Fatalf("Execute = %+v, want an invalid-argument error result", res)
	}
}

func wireNames(a Assembly) []string {
	var names []string
	for _, w := range a.Tools {
		names = append(names, w.Name)
	}
	return names
}

func sectionNames(a Assembly) []string {
	var names []string
	for _, s := range a.Sections {
		names = append(names, s.Name)
	}
	return names
}

func TestAssemble(t *testing.T) {
	ts := registrytest.New(backend.TypeScript)
	py := registrytest.New(backend.Python)
	ruby := registrytest.New("ruby")
	tests := []struct {
		name         string
		mode         Mode
		rt           backend.Runtime
		scope        Scope
		wantTools    []string
		wantSections []string
		wantErr      []string // substrings of a FailedPrecondition error
	}{
		{name: "native without runtime", mode: ModeNative, wantTools: []string{"alpha", "beta", "gamma"}},
		{name: "native ignores unknown language", mode: ModeNative, rt: ruby, wantTools: []string{"alpha", "beta", "gamma"}},
		{name: "native scoped", mode: ModeNative, scope: Scope{}.Restrict(Deny("beta")), wantTools: []string{"alpha", "gamma"}},
		{name: "code typescript", mode: ModeCode, rt: ts, wantTools: []string{RunCode}, wantSections: []string{SectionSDK}},
		{name: "code python", mode: ModeCode, rt: py, wantTools: []string{RunCode}, wantSections: []string{SectionSDK}},
		{name: "both", mode: ModeBoth, rt: ts, wantTools: []string{"alpha", "beta", "gamma", RunCode}, wantSections: []string{SectionSDK}},
		{name: "both scoped", mode: ModeBoth, rt: py, scope: Scope{}.Restrict(Allow("gamma", "beta")).Restrict(Deny("beta")), wantTools: []string{"gamma", RunCode}, wantSections: []string{SectionSDK}},
		{name: "restrictions cannot remove run_code", mode: ModeCode, rt: ts, scope: Scope{}.Restrict(Allow(), Deny(RunCode)), wantTools: []string{RunCode}, wantSections: []string{SectionSDK}},
		{name: "both with everything hidden", mode: ModeBoth, rt: ts, scope: Scope{}.Restrict(Allow()), wantTools: []string{RunCode}, wantSections: []string{SectionSDK}},
		{name: "code without runtime", mode: ModeCode, wantErr: []string{`mode "code" needs a code runtime`, "known languages: python, typescript"}},
		{name: "both without runtime", mode: ModeBoth, wantErr: []string{`mode "both" needs a code runtime`, "known languages: python, typescript"}},
		{name: "code with unknown language", mode: ModeCode, rt: ruby, wantErr: []string{`language "ruby" has no SDK renderer`, "known languages: python, typescript"}},
		{name: "both with unknown language", mode: ModeBoth, rt: ruby, wantErr: []string{`language "ruby"`, "known languages: python, typescript"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			opts := []Option{WithMode(tt.mode)}
			if tt.rt != nil {
				opts = append(opts, WithRuntime(tt.rt))
			}
			r := newReg(t, opts...)
			mustRegister(t, r, echoTool("gamma"), echoTool("alpha"), echoTool("beta"))
			asm, err := r.Assemble(t.Context(), tt.scope)
			if tt.wantErr != nil {
				if err == nil || !errdefs.IsFailedPrecondition(err) {
					t.Fatalf("Assemble error = %v, want a failed-precondition error", err)
				}
				for _, s := range tt.wantErr {
					if !strings.Contains(err.Error(), s) {
						t.Errorf("error %q does not contain %q", err, s)
					}
				}
				return
			}
			if err != nil {
				t.Fatalf("Assemble: %v", err)
			}
			if asm.Mode != tt.mode {
				t.Errorf("Mode = %q, want %q", asm.Mode, tt.mode)
			}
			if got := wireNames(asm); !slices.Equal(got, tt.wantTools) {
				t.Errorf("tools = %q, want %q", got, tt.wantTools)
			}
			if got := sectionNames(asm); !slices.Equal(got, tt.wantSections) {
				t.Errorf("sections = %q, want %q", got, tt.wantSections)
			}
		})
	}
}

func TestAssembleCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := newReg(t).Assemble(ctx, Scope{}); !errdefs.IsCanceled(err) {
		t.Fatalf("Assemble error = %v, want canceled", err)
	}
}

// TestAssembleSDKListsExecutableTools observes the renderer's input: exactly
// the tools the scope can execute, sorted, never run_code.
func TestAssembleSDKListsExecutableTools(t *testing.T) {
	for _, mode := range []Mode{ModeCode, ModeBoth} {
		t.Run(string(mode), func(t *testing.T) {
			r := newReg(t, WithMode(mode), WithRuntime(registrytest.New(backend.Python)))
			var got []sdkgen.Tool
			r.render = func(lang sdkgen.Language, format sdkgen.Format, tools []sdkgen.Tool, _ sdkgen.RenderOptions) (sdkgen.Rendered, error) {
				if lang != sdkgen.Python || format != sdkgen.FormatPrompt {
					t.Errorf("rendered %s %s, want python prompt", lang, format)
				}
				got = tools
				return sdkgen.Rendered{Text: "SDK"}, nil
			}
			mustRegister(t, r, echoTool("zeta"), echoTool("hidden"), echoTool("Alpha"), echoTool("mid"))
			scope := Scope{}.Restrict(Deny("hidden"))
			asm, err := r.Assemble(t.Context(), scope)
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, tool := range got {
				names = append(names, tool.Name)
				if tool.Description != "echoes "+tool.Name || string(tool.InputSchema) != `{"type":"object"}` {
					t.Errorf("sdk tool %+v lost its description or schema", tool)
				}
			}
			if want := []string{"Alpha", "mid", "zeta"}; !slices.Equal(names, want) {
				t.Errorf("SDK tools = %q, want %q", names, want)
			}
			if asm.Sections[0].Text != "SDK" {
				t.Errorf("section text = %q, want the renderer's output", asm.Sections[0].Text)
			}
			// The SDK lists what the program can call: the bindings agree.
			rt := registrytest.New(backend.Python)
			r2 := newReg(t, WithMode(mode), WithRuntime(rt))
			mustRegister(t, r2, echoTool("zeta"), echoTool("hidden"), echoTool("Alpha"), echoTool("mid"))
			call := runCall("c", "log hi")
			call.Scope = scope
			if res := r2.Execute(t.Context(), call); res.IsError {
				t.Fatalf("run_code: %s", res.Text())
			}
			bound := slices.Sorted(maps.Keys(rt.Requests()[0].Bindings[0].Functions))
			if !slices.Equal(bound, names) {
				t.Errorf("bindings = %q, SDK tools = %q", bound, names)
			}
		})
	}
}

// TestLanguageTablesInStep: the SDK renderer table and the run_code flavor
// table have the same languages, and those are exactly the languages the
// seam knows, so every known runtime language is live.
func TestLanguageTablesInStep(t *testing.T) {
	renderers := slices.Sorted(maps.Keys(sdkLanguages))
	flavors := slices.Sorted(maps.Keys(runCodeFlavors))
	if !slices.Equal(renderers, flavors) {
		t.Fatalf("renderer languages %q != run_code flavor languages %q", renderers, flavors)
	}
	known := slices.Sorted(slices.Values(backend.Languages()))
	if !slices.Equal(renderers, known) {
		t.Fatalf("table languages %q != backend.Languages() %q", renderers, known)
	}
	for lang, f := range runCodeFlavors {
		if f.description == "" || f.code == "" {
			t.Errorf("%s flavor has an empty string", lang)
		}
	}
}

// TestLanguageRenderers pins which sdkgen language each runtime language's
// SDK is rendered in.
func TestLanguageRenderers(t *testing.T) {
	want := map[backend.Language]sdkgen.Language{
		backend.TypeScript: sdkgen.TypeScript,
		backend.Python:     sdkgen.Python,
	}
	if !maps.Equal(sdkLanguages, want) {
		t.Errorf("SDK languages %v, want %v", sdkLanguages, want)
	}
}

// TestAssemblePerLanguage: the SDK section is the language's sdkgen prompt
// for the visible tools, and run_code's schema strings speak the same
// language.
func TestAssemblePerLanguage(t *testing.T) {
	render := map[backend.Language]func([]sdkgen.Tool) string{
		backend.TypeScript: sdkgen.TypeScriptPrompt,
		backend.Python:     sdkgen.PythonPrompt,
	}
	word := map[backend.Language]string{backend.TypeScript: "TypeScript", backend.Python: "Python"}
	descs := map[string]bool{}
	for _, lang := range backend.Languages() {
		t.Run(string(lang), func(t *testing.T) {
			r := newReg(t, WithMode(ModeCode), WithRuntime(registrytest.New(lang)))
			mustRegister(t, r, echoTool("b"), echoTool("a"))
			asm, err := r.Assemble(t.Context(), Scope{})
			if err != nil {
				t.Fatal(err)
			}
			tools := []sdkgen.Tool{
				{Name: "a", Description: "echoes a", InputSchema: json.RawMessage(`{"type":"object"}`)},
				{Name: "b", Description: "echoes b", InputSchema: json.RawMessage(`{"type":"object"}`)},
			}
			if got, want := asm.Sections[0].Text, render[lang](tools); got != want {
				t.Errorf("SDK section = %q, want %s's prompt %q", got, lang, want)
			}
			rc := asm.Tools[0]
			var schema struct {
				Type       string
				Properties map[string]struct{ Type, Description string }
				Required   []string
			}
			if err := json.Unmarshal(rc.Parameters, &schema); err != nil {
				t.Fatal(err)
			}
			code := schema.Properties["code"]
			if schema.Type != "object" || code.Type != "string" || !slices.Equal(schema.Required, []string{"code"}) || len(schema.Properties) != 1 {
				t.Errorf("run_code schema = %s, want {code: string} required", rc.Parameters)
			}
			for _, s := range []string{rc.Description, code.Description} {
				if !strings.Contains(s, word[lang]) {
					t.Errorf("%s run_code string %q does not name %s", lang, s, word[lang])
				}
				for other, w := range word {
					if other != lang && strings.Contains(s, w) {
						t.Errorf("%s run_code string %q names %s", lang, s, w)
					}
				}
			}
			descs[rc.Description] = true
		})
	}
	if len(descs) != len(backend.Languages()) {
		t.Errorf("run_code descriptions are not distinct per language")
	}
	// Once sdkgen renders, the two languages must differ.
	tools := []sdkgen.Tool{{Name: "a", InputSchema: json.RawMessage(`{"type":"object"}`)}}
	if ts, py := sdkgen.TypeScriptPrompt(tools), sdkgen.PythonPrompt(tools); ts != "" && ts == py {
		t.Errorf("TypeScript and Python prompts are identical")
	}
}

func TestScope(t *testing.T) {
	base := Scope{}.Restrict(Allow("a", "b", "c"))
	nested := base.Restrict(Deny("b"))
	tests := []struct {
		scope Scope
		name  string
		want  bool
	}{
		{Scope{}, "anything", true},
		{base, "a", true},
		{base, "b", true},
		{base, "d", false},
		{nested, "b", false},
		{nested, "c", true},
		{Scope{}.Restrict(Allow()), "a", false},
		{Scope{}.Restrict(nil), "a", true},
	}
	for i, tt := range tests {
		if got := tt.scope.Allows(tt.name); got != tt.want {
			t.Errorf("%d: Allows(%q) = %v, want %v", i, tt.name, got, tt.want)
		}
	}
	// Restrict does not alias the parent's layers.
	_ = base.Restrict(Deny("a"))
	if !nested.Allows("a") || !base.Allows("a") {
		t.Errorf("Restrict changed an existing scope")
	}
	// Allow/Deny copy their arguments.
	names := []string{"x"}
	allow := Allow(names...)
	names[0] = "y"
	if !allow("x") || allow("y") {
		t.Errorf("Allow aliases its argument slice")
	}
}

func TestBlockString(t *testing.T) {
	tests := []struct {
		b    Block
		want string
	}{
		{TextBlock("hello"), "hello"},
		{TextBlock(""), ""},
		{ImageBlock("image/png", make([]byte, 1234)), "[image: image/png, 1234 bytes]"},
		{Block{Type: "audio", MimeType: "audio/wav", Data: []byte{1, 2, 3}}, "[audio: audio/wav, 3 bytes]"},
		{Block{Type: "resource", Data: []byte{1}}, "[resource: 1 bytes]"},
		{Block{Type: "resource"}, "[resource]"},
		{Block{}, "[unknown]"},
	}
	for _, tt := range tests {
		if got := tt.b.String(); got != tt.want {
			t.Errorf("%+v.String() = %q, want %q", tt.b, got, tt.want)
		}
	}
}
