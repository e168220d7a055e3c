package mcp

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"runtime"
	"strings"
	"testing"
	"weak"

	"github.com/dsh-container/dsh-container/backend"
	"github.com/dsh-container/dsh-container/registry"
	"github.com/dsh-container/dsh-container/registry/registrytest"
)

// bigTool is a tool whose schema is about size bytes of compact JSON.
func bigTool(name string, size int) registry.Tool {
	var b strings.Builder
	b.WriteString(`{"type":"object","properties":{`)
	for i := 0; b.Len() < size; i++ {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `"p%d":{"type":"string","description":"%s"}`, i, strings.Repeat("d", 200))
	}
	b.WriteString(`}}`)
	return registry.Tool{Name: name, Description: "Big.", Parameters: json.RawMessage(b.String()),
		Execute: func(context.Context, registry.Execution) ([]registry.Block, error) { return nil, nil }}
}

func heapInUse() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// The server holds a tool source's tools without a copy of its own: its
// registry, what it offers and how it tells a change all share the
// source's bytes (a list of 8 MiB of schemas cost it 8 MiB twice more, as
// JSON to compare and as the registry's copy; the heap figure is logged).
// A change re-adds only the tools that changed.
func TestServerKeepsOneCopy(t *testing.T) {
	const size = 8 << 20
	src := &source{tools: []registry.Tool{bigTool("a", size/2), bigTool("b", size/2)}}
	before := heapInUse()
	srv, err := New(WithMode(registry.ModeNative), WithLogger(slog.New(slog.DiscardHandler)), WithToolSource(src))
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	t.Logf("the server holds %d KiB for %d KiB of schemas", (int64(heapInUse())-int64(before))>>10, size>>10)
	srv.mu.Lock()
	exposed, offered := srv.exposed["a"], srv.snap.tools
	srv.mu.Unlock()
	if &exposed.InputSchema[0] != &src.tools[0].Parameters[0] {
		t.Error("what the server compares a change with is a copy of the source's schema")
	}
	for _, o := range offered {
		if o.Name == "a" && &o.InputSchema[0] != &src.tools[0].Parameters[0] {
			t.Error("the server's registry holds a copy of the source's schema")
		}
	}
	// b changes: a is not added again.
	srv.mu.Lock()
	adds := srv.adds
	srv.mu.Unlock()
	src.set(src.tools[0], bigTool("b", size/4))
	srv.mu.Lock()
	n := srv.adds - adds
	srv.mu.Unlock()
	if n != 1 {
		t.Errorf("%d tools added again after one changed", n)
	}
}

// A rebuild in code mode lets go of the previous tools before it renders
// the next SDK: the new registry serves calls from then on, and the
// previous one, with the previous tools, is only kept by calls still
// running on it (none here). A 15.5 MiB list changing held the previous
// list and SDK next to the next list and SDK (issue 24 §7).
func TestRefreshLetsThePreviousToolsGoBeforeRendering(t *testing.T) {
	generation := func(gen int) ([]registry.Tool, weak.Pointer[byte]) {
		tools := []registry.Tool{bigTool("a", 1<<20), bigTool("b", 1<<20)}
		tools[0].Description = fmt.Sprintf("Generation %d.", gen)
		return tools, weak.Make(&tools[0].Parameters[0])
	}
	src := &source{}
	var first weak.Pointer[byte]
	src.tools, first = generation(0)
	srv, err := New(WithMode(registry.ModeCode), WithRuntime(registrytest.New(backend.TypeScript)),
		WithLogger(slog.New(slog.DiscardHandler)), WithToolSource(src))
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	renders, held := 0, false
	beforeRender = func() {
		renders++
		runtime.GC()
		held = first.Value() != nil
	}
	t.Cleanup(func() { beforeRender = nil })
	next, _ := generation(1)
	src.set(next...)
	if renders != 1 {
		t.Fatalf("%d renders for one change", renders)
	}
	if held {
		t.Error("the previous tools were still held while the next SDK rendered")
	}
	if tools := srv.Tools(); len(tools) != 1 || !strings.Contains(tools[0].Description, "Generation 1.") {
		t.Errorf("run_code does not offer the new SDK")
	}
}
