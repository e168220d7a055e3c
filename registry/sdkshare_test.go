package registry

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/dsh-container/dsh-container/internal/testenv"
	"unsafe"

	"github.com/dsh-container/dsh-container/backend"
	"github.com/dsh-container/dsh-container/registry/registrytest"
)

// bigListTools is a tool set like an MCP upstream's large list: n tools of
// about size bytes in all, their schemas of described properties.
func bigListTools(n, size int) []Tool {
	out := make([]Tool, n)
	desc := strings.Repeat("lorem ipsum ", size/n/2/12/20)
	for i := range out {
		var b strings.Builder
		b.WriteString(`{"type":"object","properties":{`)
		for p := range 20 {
			if p > 0 {
				b.WriteByte(',')
			}
			fmt.Fprintf(&b, `"p%02d":{"type":"string","description":%q}`, p, desc)
		}
		b.WriteString(`}}`)
		t := echoTool(fmt.Sprintf("tool_%04d", i))
		t.Description = strings.Repeat(desc, 20)
		t.Parameters = json.RawMessage(b.String())
		out[i] = t
	}
	return out
}

// Over MCP run_code's description carries the SDK section; the two are
// one string, rendered once: the description's end is the section's own
// bytes, not a copy (a 15 MiB SDK was held twice). An assembly whose
// section was changed after Assemble gets a description with its text.
func TestMCPToolsSharesTheSDK(t *testing.T) {
	for _, view := range SDKViews() {
		for _, lang := range []backend.Language{backend.TypeScript, backend.Python} {
			r := newReg(t, WithMode(ModeCode), WithSDK(view), WithSDKAutoThreshold(1), WithRuntime(registrytest.New(lang)))
			mustRegister(t, r, echoTool("a"), echoTool("b"))
			asm, err := r.Assemble(t.Context(), Scope{})
			if err != nil {
				t.Fatal(err)
			}
			section := asm.Sections[0].Text
			run := asm.MCPTools()[0]
			if run.Name != RunCode || run.Description != asm.Tools[0].Description+"\n\n"+section {
				t.Fatalf("%s/%s: run_code's description is not its own and the SDK:\n%s", view, lang, run.Description)
			}
			if tail := run.Description[len(run.Description)-len(section):]; unsafe.StringData(tail) != unsafe.StringData(section) {
				t.Errorf("%s/%s: run_code's description holds a copy of the SDK section", view, lang)
			}
			asm.Sections[0].Text = "another SDK"
			if got := asm.MCPTools()[0].Description; got != asm.Tools[0].Description+"\n\nanother SDK" {
				t.Errorf("%s/%s: after the section changed, run_code's description is\n%s", view, lang, got)
			}
		}
	}
}

// SDKAuto tells that a large tool set's full SDK passes the threshold by
// rendering about the threshold, then renders the index: it does not
// render the full SDK to measure it (a 2 MiB list cost 42 MB of
// allocations that way, for an index of 45 KB).
func TestAssembleAutoDoesNotRenderTheFullSDK(t *testing.T) {
	for _, lang := range []backend.Language{backend.TypeScript, backend.Python} {
		r := newReg(t, WithMode(ModeCode), WithSDK(SDKAuto), WithRuntime(registrytest.New(lang)))
		mustRegister(t, r, bigListTools(128, 2<<20)...)
		var asm Assembly
		var err error
		n := testenv.Allocated(func() { asm, err = r.Assemble(t.Context(), Scope{}) })
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%s: the index of 128 tools (%d bytes) allocated %d bytes", lang, len(asm.Sections[0].Text), n)
		if len(asm.Tools) != 2 || asm.Tools[1].Name != DescribeTools {
			t.Fatalf("%s: auto did not choose the index", lang)
		}
		if n > 1<<20 {
			t.Errorf("%s: assembling the index allocated %d bytes; the bound is 1 MiB", lang, n)
		}
	}
}
