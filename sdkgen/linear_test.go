package sdkgen

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"
)

// bigInputs build inputs of size n that stress depth or width.
var bigInputs = map[string]func(n int) []Tool{
	"deep properties": func(n int) []Tool {
		return schemaTool(strings.Repeat(`{"type":"object","properties":{"a":`, n) + `{"type":"string"}` + strings.Repeat(`},"required":["a"]}`, n))
	},
	"deep items": func(n int) []Tool {
		return schemaTool(`{"type":"object","properties":{"x":` + strings.Repeat(`{"type":"array","items":`, n) + `{}` + strings.Repeat(`}`, n) + `}}`)
	},
	"deep anyOf": func(n int) []Tool {
		return schemaTool(strings.Repeat(`{"anyOf":[{"type":"null"},`, n) + `{}` + strings.Repeat(`]}`, n))
	},
	"deep additionalProperties": func(n int) []Tool {
		return schemaTool(strings.Repeat(`{"type":"object","additionalProperties":`, n) + `true` + strings.Repeat(`}`, n))
	},
	"deep type arrays": func(n int) []Tool {
		return schemaTool(strings.Repeat(`{"type":["array","object","null"],"items":`, n) + `{}` + strings.Repeat(`,"additionalProperties":{"type":"string"}}`, n))
	},
	"deep raw JSON": func(n int) []Tool {
		return schemaTool(`{"type":"object","properties":{"x":{"const":` + strings.Repeat(`[`, 10*n) + strings.Repeat(`]`, 10*n) + `}}}`)
	},
	"wide properties": func(n int) []Tool {
		var b strings.Builder
		b.WriteString(`{"type":"object","properties":{`)
		for i := range n {
			if i > 0 {
				b.WriteByte(',')
			}
			fmt.Fprintf(&b, `"p%d":{"type":"object","description":"Property %d.","properties":{"q":{"type":"string"}}}`, i, i)
		}
		b.WriteString(`},"required":["p0"]}`)
		return schemaTool(b.String())
	},
	"wide enum": func(n int) []Tool {
		vals := make([]string, n)
		for i := range vals {
			vals[i] = fmt.Sprintf("v%d", i)
		}
		b, _ := json.Marshal(map[string]any{"enum": vals})
		return schemaTool(string(b))
	},
	"wide anyOf": func(n int) []Tool {
		var b strings.Builder
		b.WriteString(`{"anyOf":[`)
		for i := range n {
			if i > 0 {
				b.WriteByte(',')
			}
			fmt.Fprintf(&b, `{"type":"object","properties":{"k%d":{"type":"integer"}},"required":["k%d"]}`, i, i)
		}
		b.WriteString(`]}`)
		return schemaTool(b.String())
	},
	"wide duplicate union": func(n int) []Tool { return schemaTool(duplicateUnion(n)) },
	"wide distinct union":  func(n int) []Tool { return schemaTool(distinctListUnion(n)) },
	"nested wide union":    func(n int) []Tool { return schemaTool(nestedUnion(n)) },
	"many tools": func(n int) []Tool {
		tools := make([]Tool, n)
		for i := range tools {
			// Names that all derive the same Python class name.
			tools[i] = Tool{Name: fmt.Sprintf("tool%s%d", strings.Repeat("-", i%7), n-i), Description: "A tool.",
				InputSchema: json.RawMessage(`{"type":"object","properties":{"x":{"type":"object","properties":{"y":{"type":"string"}}}}}`)}
		}
		return tools
	},
	"long names": func(n int) []Tool {
		return []Tool{
			{Name: strings.Repeat("a-", n), InputSchema: json.RawMessage(`{"type":"object","properties":{"` + strings.Repeat("k_", n) + `":{"type":"object","properties":{"z":{}}}}}`)},
			{Name: strings.Repeat("a_", n), Description: strings.Repeat("*/ \"\"\" ", n), InputSchema: json.RawMessage(`{"type":"object","properties":{"x":{"type":"object","properties":{"z":{}}}}}`)},
		}
	},
}

func schemaTool(schema string) []Tool {
	return []Tool{{Name: "t", Description: "Big.", InputSchema: json.RawMessage(schema)}}
}

// TestBigInputs renders each big input at n = 10,000: it must complete and
// pass the structural checks.
func TestBigInputs(t *testing.T) {
	for name, mk := range bigInputs {
		t.Run(name, func(t *testing.T) {
			tools := mk(10000)
			if err := checkTS(TypeScriptSource(tools)); err != nil {
				t.Error(err)
			}
			if err := checkPython(PythonSource(tools)); err != nil {
				t.Error(err)
			}
		})
	}
}

// TestLinearTime checks that rendering time grows linearly: 8 times the
// input may take at most 32 times as long (quadratic growth would take 64
// times). Each measure is the best of several runs, to keep noise out.
func TestLinearTime(t *testing.T) {
	if testing.Short() {
		t.Skip("timing test skipped in -short mode")
	}
	const n, factor, bound = 500, 8, 32.0
	for name, mk := range bigInputs {
		t.Run(name, func(t *testing.T) {
			small, large := mk(n), mk(factor*n)
			for lang, render := range map[string]func([]Tool) string{"ts": TypeScriptSource, "py": PythonSource} {
				ts, tl := bestOf(render, small), bestOf(render, large)
				ratio := float64(tl) / float64(max(ts, time.Microsecond))
				t.Logf("%s: n=%d %v, n=%d %v, ratio %.1f", lang, n, ts, factor*n, tl, ratio)
				if ratio > bound {
					t.Errorf("%s: %dx the input took %.1fx the time (%v -> %v)", lang, factor, ratio, ts, tl)
				}
			}
		})
	}
}

// bestOf returns the shortest of several timed renders, each repeated
// until it has run for at least a few milliseconds.
func bestOf(render func([]Tool) string, tools []Tool) time.Duration {
	best := time.Duration(1<<63 - 1)
	for range 3 {
		start, runs := time.Now(), 0
		for runs == 0 || time.Since(start) < 5*time.Millisecond {
			render(tools)
			runs++
		}
		best = min(best, time.Since(start)/time.Duration(runs))
	}
	return best
}
