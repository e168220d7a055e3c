package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dsh-container/dsh-container/backend"
	"github.com/dsh-container/dsh-container/registry"
)

// Code Mode end to end: the registry's dispatch bridge over the real
// container runtime, in both languages.

func textTool(name string, fn func(args map[string]any) (string, error)) registry.Tool {
	return registry.Tool{
		Name:       name,
		Parameters: json.RawMessage(`{"type":"object"}`),
		Execute: func(_ context.Context, exec registry.Execution) ([]registry.Block, error) {
			var args map[string]any
			if err := json.Unmarshal(exec.Arguments, &args); err != nil {
				return nil, err
			}
			out, err := fn(args)
			if err != nil {
				return nil, err
			}
			return []registry.Block{registry.TextBlock(out)}, nil
		},
	}
}

type eventLog struct {
	mu     sync.Mutex
	events []registry.Event
}

func (l *eventLog) sink(e registry.Event) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.events = append(l.events, e)
}

func (l *eventLog) snapshot() []registry.Event {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]registry.Event(nil), l.events...)
}

func codeCall(id, program string) registry.Call {
	args, _ := json.Marshal(map[string]string{"code": program})
	return registry.Call{ID: id, Name: registry.RunCode, Arguments: args}
}

func TestRegistryComposesTwoTools(t *testing.T) {
	programs := map[backend.Language]string{
		backend.TypeScript: `
const users: string[] = JSON.parse(await tools["list-users"]({}));
let total = 0;
for (const u of users) {
  const n = Number(await tools.orders({ user: u }));
  if (n > 1) total += n;
}
console.log("heavy users counted");
return total;`,
		backend.Python: `
import json
users = json.loads(await tools["list-users"]({}))
total = 0
for u in users:
    n = int(await tools.orders({"user": u}))
    if n > 1:
        total += n
print("heavy users counted")
return total`,
	}
	for _, lang := range langs {
		t.Run(string(lang), func(t *testing.T) {
			e := newEnv(t, lang, nil)
			var ev eventLog
			reg := registry.New(registry.WithMode(registry.ModeCode), registry.WithRuntime(e.rt), registry.WithEventSink(ev.sink))
			orders := map[string]string{"ann": "3", "bob": "1", "cy": "5"}
			must(t, reg.Register(textTool("list-users", func(map[string]any) (string, error) { return `["ann","bob","cy"]`, nil })))
			must(t, reg.Register(textTool("orders", func(a map[string]any) (string, error) { return orders[a["user"].(string)], nil })))
			res := reg.Execute(context.Background(), codeCall("call-1", programs[lang]))
			if res.IsError {
				t.Fatalf("run_code failed: %s (%v)", res.Text(), res.Err)
			}
			if res.CodeRun == nil || string(res.CodeRun.Value) != "8" {
				t.Fatalf("value %+v", res.CodeRun)
			}
			if !strings.Contains(res.Text(), "heavy users counted") || !strings.Contains(res.Text(), "8") {
				t.Fatalf("text %q", res.Text())
			}
			evs := ev.snapshot()
			if len(evs) != 4 {
				t.Fatalf("%d events", len(evs))
			}
			for i, e := range evs {
				if e.ParentCallID != "call-1" || e.Seq != i+1 || e.CallID != "call-1:code:"+itoa(i+1) || e.IsError {
					t.Fatalf("event %d: %+v", i, e)
				}
			}
			if evs[0].Tool != "list-users" || evs[1].Tool != "orders" || string(evs[1].Arguments) != `{"user":"ann"}` {
				t.Fatalf("events %+v", evs)
			}
		})
	}
}

func itoa(i int) string { b, _ := json.Marshal(i); return string(b) }

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func TestRegistryServesConcurrentCallsInSubmissionOrder(t *testing.T) {
	programs := map[backend.Language]string{
		backend.TypeScript: `return await Promise.all([1, 2, 3, 4, 5, 6].map(n => tools.rec({ n })));`,
		backend.Python:     "import asyncio\nreturn list(await asyncio.gather(*[tools.rec({'n': n}) for n in [1, 2, 3, 4, 5, 6]]))",
	}
	for _, lang := range langs {
		t.Run(string(lang), func(t *testing.T) {
			e := newEnv(t, lang, nil)
			reg := registry.New(registry.WithMode(registry.ModeCode), registry.WithRuntime(e.rt))
			var mu sync.Mutex
			var seen []float64
			must(t, reg.Register(textTool("rec", func(a map[string]any) (string, error) {
				mu.Lock()
				seen = append(seen, a["n"].(float64))
				mu.Unlock()
				time.Sleep(5 * time.Millisecond)
				b, _ := json.Marshal(a["n"])
				return string(b), nil
			})))
			res := reg.Execute(context.Background(), codeCall("c", programs[lang]))
			if res.IsError {
				t.Fatalf("%s (%v)", res.Text(), res.Err)
			}
			for i, n := range seen {
				if n != float64(i+1) {
					t.Fatalf("served in order %v", seen)
				}
			}
			if len(seen) != 6 || string(res.CodeRun.Value) != `["1","2","3","4","5","6"]` {
				t.Fatalf("seen %v value %s", seen, res.CodeRun.Value)
			}
		})
	}
}

func TestRegistryDeniedSubCallIsARejection(t *testing.T) {
	programs := map[backend.Language]string{
		backend.TypeScript: `
try { await tools.secret({}); return "leaked" } catch (e) { return "denied: " + (e as Error).message }`,
		backend.Python: `
try:
    await tools.secret({})
    return "leaked"
except ToolCallError as e:
    return "denied: " + str(e)`,
	}
	for _, lang := range langs {
		t.Run(string(lang), func(t *testing.T) {
			e := newEnv(t, lang, nil)
			var ran bool
			guard := func(_ context.Context, exec registry.Execution) error {
				if exec.Name == "secret" {
					return errors.New("policy forbids secret")
				}
				return nil
			}
			var ev eventLog
			reg := registry.New(registry.WithMode(registry.ModeCode), registry.WithRuntime(e.rt), registry.WithGuard(guard), registry.WithEventSink(ev.sink))
			must(t, reg.Register(textTool("secret", func(map[string]any) (string, error) { ran = true; return "s3cr3t", nil })))
			res := reg.Execute(context.Background(), codeCall("c", programs[lang]))
			if res.IsError || res.CodeRun == nil {
				t.Fatalf("%s (%v)", res.Text(), res.Err)
			}
			var v string
			json.Unmarshal(res.CodeRun.Value, &v)
			if ran || !strings.HasPrefix(v, "denied: ") || !strings.Contains(v, "policy forbids secret") {
				t.Fatalf("ran=%v value %q", ran, v)
			}
			if evs := ev.snapshot(); len(evs) != 1 || !evs[0].IsError {
				t.Fatalf("events %+v", evs)
			}
		})
	}
}

func TestRegistryCancellationStopsDispatch(t *testing.T) {
	programs := map[backend.Language]string{
		backend.TypeScript: `for (;;) { await tools.tick({}) }`,
		backend.Python:     "while True:\n    await tools.tick({})",
	}
	for _, lang := range langs {
		t.Run(string(lang), func(t *testing.T) {
			e := newEnv(t, lang, nil)
			reg := registry.New(registry.WithMode(registry.ModeCode), registry.WithRuntime(e.rt))
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			var mu sync.Mutex
			ticks := 0
			must(t, reg.Register(textTool("tick", func(map[string]any) (string, error) {
				mu.Lock()
				defer mu.Unlock()
				ticks++
				if ticks == 3 {
					cancel()
				}
				return "ok", nil
			})))
			res := reg.Execute(ctx, codeCall("c", programs[lang]))
			var crf *registry.CodeRunFailedError
			if !res.IsError || !errors.As(res.Err, &crf) || crf.Kind != backend.FailureAbort {
				t.Fatalf("got %s (%v)", res.Text(), res.Err)
			}
			mu.Lock()
			after := ticks
			mu.Unlock()
			time.Sleep(200 * time.Millisecond)
			mu.Lock()
			defer mu.Unlock()
			if ticks != after || ticks > 4 {
				t.Fatalf("dispatch went on after cancellation: %d then %d ticks", after, ticks)
			}
		})
	}
}
