package main

import (
	"fmt"
	"strings"
	"testing"

	"github.com/dsh-container/dsh-container/sdkgen"
)

// sdk --format index, --sdk as its alias, --names as describe_tools.
func TestSDKIndexCommand(t *testing.T) {
	manifest := write(t, "tools.json", `[
	  {"name":"b","description":"Bee tool. More.","inputSchema":{"type":"object","properties":{"x":{"type":"string"},"y":{"type":"number"}},"required":["x"]}},
	  {"name":"a","description":"Ay tool."}
	]`)
	tools := []sdkgen.Tool{
		{Name: "b", Description: "Bee tool. More.", InputSchema: []byte(`{"type":"object","properties":{"x":{"type":"string"},"y":{"type":"number"}},"required":["x"]}`)},
		{Name: "a", Description: "Ay tool."},
	}
	for _, lang := range []sdkgen.Language{sdkgen.TypeScript, sdkgen.Python} {
		index, _ := sdkgen.Render(lang, sdkgen.FormatIndex, tools)
		full, _ := sdkgen.Render(lang, sdkgen.FormatPrompt, tools)
		sel, _ := sdkgen.Select(tools, []string{"b"})
		describe, _ := sdkgen.Render(lang, sdkgen.FormatSource, sel)
		for _, tc := range []struct {
			args []string
			want string
		}{
			{[]string{"--format", "index"}, index},
			{[]string{"--sdk", "index"}, index},
			{[]string{"--sdk", "full"}, full},
			{[]string{"--sdk", "auto"}, full}, // far below the threshold
			{[]string{"--format", "source", "--names", "b"}, describe},
		} {
			args := append([]string{"sdk", "--tools", manifest, "--lang", string(lang)}, tc.args...)
			r := runCLI(t, "", nil, args...)
			if r.code != exitOK || r.stdout != tc.want {
				t.Errorf("%v: exit %d, stderr %q, stdout:\n%s", args, r.code, r.stderr, r.stdout)
			}
		}
	}
	if r := runCLI(t, "", nil, "sdk", "--tools", manifest, "--format", "index"); !strings.Contains(r.stdout, `tools["b"]({x, y?}) — Bee tool.`) {
		t.Errorf("index line missing:\n%s", r.stdout)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--sdk", "most"}, `--sdk "most": use full, index or auto`},
		{[]string{"--sdk", "index", "--format", "source"}, "--sdk and --format both choose the format"},
		{[]string{"--format", "html"}, `--format "html": use prompt, source or index`},
		{[]string{"--names", "a,zz"}, `--names: no tool named "zz"`},
	} {
		args := append([]string{"sdk", "--tools", manifest}, tc.args...)
		r := runCLI(t, "", nil, args...)
		if r.code != exitUsage || !strings.Contains(r.stderr, tc.want) {
			t.Errorf("%v: exit %d, stderr %q", args, r.code, r.stderr)
		}
	}
	// auto picks the index once the full SDK passes the threshold.
	var many []string
	for i := range 200 {
		many = append(many, fmt.Sprintf(`{"name":"tool_%03d","description":"Tool number %d. It does a thing at length.","inputSchema":{"type":"object","properties":{"alpha":{"type":"string","description":"%s"}}}}`, i, i, strings.Repeat("long words ", 20)))
	}
	big := write(t, "big.json", "["+strings.Join(many, ",")+"]")
	if r := runCLI(t, "", nil, "sdk", "--tools", big, "--sdk", "auto"); r.code != exitOK || !strings.Contains(r.stdout, `tools["tool_000"]({alpha?}) — Tool number 0.`) {
		t.Errorf("auto on a big tool set: exit %d, %d bytes, stderr %q", r.code, len(r.stdout), r.stderr)
	}
}
