package sdkgen

import (
	"encoding/json"
	"fmt"
	"math/rand"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/dsh-container/dsh-container/internal/testenv"
)

// listTools is a tool list like the one an MCP upstream may send (issue
// 24 §7; e2e/testdata/mcphostile's "big" list): tools tools of about size
// bytes of JSON in all, each with a description of words and 20 described
// string properties, one required.
func listTools(tools, size int) []Tool {
	const props = 20
	per := size / tools
	words := []string{"alpha", "beta", "gamma", "delta", "epsilon", "zeta", "theta", "kappa", "lambda", "sigma"}
	filler := func(n, seed int) string {
		var b strings.Builder
		for i := seed; b.Len() < n; i++ {
			b.WriteString(words[i%len(words)])
			b.WriteByte(' ')
		}
		return b.String()[:n]
	}
	out := make([]Tool, tools)
	for i := range out {
		var sch strings.Builder
		sch.WriteString(`{"type":"object","properties":{`)
		for p := range props {
			if p > 0 {
				sch.WriteByte(',')
			}
			fmt.Fprintf(&sch, `"param_%02d":{"type":"string","description":"%s"}`, p, filler(max(per/2/props-60, 10), i*props+p))
		}
		sch.WriteString(`},"required":["param_00"]}`)
		out[i] = Tool{Name: fmt.Sprintf("tool_%04d", i), Description: "Generation 0. " + filler(max(per/2-40, 10), i),
			InputSchema: json.RawMessage(sch.String()), Source: "h"}
	}
	return out
}

// Each SDK text is rendered into one buffer sized before rendering starts:
// a 2 MiB tool list's SDK allocates about its own size (it allocated
// fifteen times its size, the intermediate strings of every type, comment
// and tool, and a text replacer built for every description; issue 24 §7).
// The index allocates a little more than itself: its estimate is rougher,
// and a buffer much larger than its text is copied to the text's size.
// Besides, a rendering allocates its arena's first chunks, a fixed 256 KiB
// at most.
func TestRenderAllocatesAboutItsSize(t *testing.T) {
	tools := listTools(128, 2<<20)
	for _, c := range []struct {
		lang   Language
		format Format
		bound  float64
	}{
		{TypeScript, FormatPrompt, 1.25},
		{TypeScript, FormatSource, 1.25},
		{Python, FormatPrompt, 1.25},
		{Python, FormatSource, 1.25},
		{TypeScript, FormatIndex, 2},
		{Python, FormatIndex, 2},
	} {
		var text string
		n := testenv.Allocated(func() { text, _ = Render(c.lang, c.format, tools) })
		ratio := float64(n) / float64(len(text))
		t.Logf("%s %s: %d bytes of text, %d allocated (%.2f a byte)", c.lang, c.format, len(text), n, ratio)
		if float64(n) > c.bound*float64(len(text))+256<<10 {
			t.Errorf("%s %s: rendering %d bytes allocated %d, %.2f a byte; the bound is %v a byte and 256 KiB", c.lang, c.format, len(text), n, ratio, c.bound)
		}
	}
}

// RenderWith writes the prefix and the rendering into one string, and
// with a limit tells exactly whether the rendering is longer: Over when
// and only when Render's text is longer than the limit, the text
// otherwise. Over the golden cases and generated sets, in every language
// and format, at limits around the text's length.
func TestRenderWith(t *testing.T) {
	rng := rand.New(rand.NewSource(5))
	sets := map[string][]Tool{}
	for _, c := range goldenCases(t) {
		sets[c] = loadFixture(t, filepath.Join(goldenDir, c, "tools.json"))
	}
	for i := range 200 {
		sets[fmt.Sprintf("generated_%03d", i)] = genTools(rand.New(rand.NewSource(int64(i))))
	}
	for name, tools := range sets {
		for _, lang := range Languages() {
			for _, format := range Formats() {
				full, err := Render(lang, format, tools)
				if err != nil {
					t.Fatal(err)
				}
				for _, limit := range []int{0, 1, len(full) - 1, len(full), len(full) + 1, 1 + rng.Intn(len(full))} {
					got, err := RenderWith(lang, format, tools, RenderOptions{Prefix: "run it\n\n", Limit: limit})
					if err != nil {
						t.Fatal(err)
					}
					over := limit > 0 && len(full) > limit
					if got.Over != over || !over && got.Text != "run it\n\n"+full || over && got.Text != "" {
						t.Fatalf("%s %s %s, limit %d of %d: over %v, text %.80q", name, lang, format, limit, len(full), got.Over, got.Text)
					}
				}
			}
		}
	}
	if _, err := RenderWith("ruby", "", nil, RenderOptions{}); err == nil {
		t.Error("an unknown language renders")
	}
}

// Telling that a large tool set's SDK passes a limit renders about the
// limit and the arena, not the SDK (registry.SDKAuto asks, and then shows
// the index; telling a 2 MiB list's SDK was over 32 KiB allocated 30 MiB).
func TestRenderWithLimitStopsEarly(t *testing.T) {
	tools := listTools(128, 2<<20)
	for _, lang := range Languages() {
		var r Rendered
		n := testenv.Allocated(func() { r, _ = RenderWith(lang, FormatPrompt, tools, RenderOptions{Limit: 32 << 10}) })
		t.Logf("%s: %d bytes allocated to tell a 2 MiB list's SDK is over 32 KiB", lang, n)
		if !r.Over || n > 512<<10 {
			t.Errorf("%s: over %v after allocating %d bytes; want over within 512 KiB", lang, r.Over, n)
		}
	}
}

// BenchmarkRender renders the SDK of a 15.5 MiB tool list (issue 24 §7's
// upstream) in each language and format, and reports the bytes allocated
// for each byte of SDK (alloc-B/sdk-B) next to -benchmem's figures:
//
//	go test -run '^$' -bench Render -benchmem -benchtime 3x ./sdkgen/
func BenchmarkRender(b *testing.B) {
	tools := listTools(1000, 15<<20+512<<10)
	for _, lang := range Languages() {
		for _, format := range Formats() {
			b.Run(string(lang)+"-"+string(format), func(b *testing.B) {
				text, _ := Render(lang, format, tools)
				b.SetBytes(int64(len(text)))
				b.ReportAllocs()
				var before, after runtime.MemStats
				runtime.ReadMemStats(&before)
				for b.Loop() {
					Render(lang, format, tools)
				}
				runtime.ReadMemStats(&after)
				b.ReportMetric(float64(after.TotalAlloc-before.TotalAlloc)/float64(b.N)/float64(len(text)), "alloc-B/sdk-B")
			})
		}
	}
}
