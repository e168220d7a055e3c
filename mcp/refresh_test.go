package mcp

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"runtime"
	"strings"
	"testing"

	"github.com/dsh-container/dsh-container/registry"
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
