package policy

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/dsh-container/dsh-container/registry"
)

// BenchmarkExecute measures what a policy adds to one native call through
// the registry's pipeline: none, an allow by tool name, and a rule list
// whose conditions walk the arguments (prefix, regex, equals).
func BenchmarkExecute(b *testing.B) {
	file := []byte(`{"default":"deny","tools":{"echo":[
	  {"action":"deny","when":[{"path":"repo.owner","equals":"evil"}]},
	  {"action":"ask","when":[{"path":"path","regex":"/etc/.*"}]},
	  {"action":"allow","when":[{"path":"path","prefix":"/tmp/"},{"path":"items.2","equals":3}]}]}}`)
	args := json.RawMessage(`{"path":"/tmp/x","repo":{"owner":"me","name":"r"},"items":[1,2,3]}`)
	echo := registry.Tool{Name: "echo", Execute: func(context.Context, registry.Execution) ([]registry.Block, error) {
		return []registry.Block{registry.TextBlock("ok")}, nil
	}}
	byName, _ := Parse([]byte(`{"default":"deny","tools":{"echo":{"action":"allow"}}}`))
	rules, err := Parse(file)
	if err != nil {
		b.Fatal(err)
	}
	for _, c := range []struct {
		name string
		opts []registry.Option
	}{
		{"no-policy", nil},
		{"by-name", []registry.Option{registry.WithGuard(byName.Guard())}},
		{"conditions", []registry.Option{registry.WithGuard(rules.Guard())}},
	} {
		b.Run(c.name, func(b *testing.B) {
			reg := registry.New(c.opts...)
			if err := reg.Register(echo); err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			for b.Loop() {
				if res := reg.Execute(context.Background(), registry.Call{ID: "c", Name: "echo", Arguments: args}); res.IsError {
					b.Fatal(res.Text())
				}
			}
		})
	}
}

// BenchmarkDecide is the policy's own cost per call, without the pipeline.
func BenchmarkDecide(b *testing.B) {
	p, err := Parse([]byte(`{"default":"deny","tools":{"echo":[
	  {"action":"deny","when":[{"path":"repo.owner","equals":"evil"}]},
	  {"action":"ask","when":[{"path":"path","regex":"/etc/.*"}]},
	  {"action":"allow","when":[{"path":"path","prefix":"/tmp/"},{"path":"items.2","equals":3}]}]}}`))
	if err != nil {
		b.Fatal(err)
	}
	exec := registry.Execution{Name: "echo", Arguments: json.RawMessage(`{"path":"/tmp/x","repo":{"owner":"me","name":"r"},"items":[1,2,3]}`)}
	b.ReportAllocs()
	for b.Loop() {
		if a, _ := p.Decide(exec); a != Allow {
			b.Fatal(a)
		}
	}
}
