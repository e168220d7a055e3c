package policy

import (
	"encoding/json"
	"testing"

	"github.com/containerd/errdefs"

	"github.com/dsh-container/dsh-container/registry"
)

// FuzzParse: any input parses or fails with an invalid-argument error,
// never panics; a parsed policy decides any arguments without panicking.
func FuzzParse(f *testing.F) {
	for _, s := range []string{
		`{}`,
		`{"default":"ask","tools":{"t":{"action":"deny","when":[{"path":"a.0.b","equals":{"x":[1,2.5e3]}}]}}}`,
		`{"tools":{"t":[{"action":"allow","when":[{"path":"p","regex":"a+"}]},{"action":"ask"}]}}`,
		`{"egress":{"allow":["*.example.com:443"],"maxBytes":1,"allowPrivate":["10.0.0.0/8"]}}`,
		`{"tools":{"t":{"action":"deny","when":[{"path":"a","prefix":"/"}]}}}`,
		`{"tools":{"t":{"action":"deny","when":[{"path":"a.01","regex":"1.*"}]}}}`,
	} {
		f.Add(s, `{"a":[{"b":{"x":[1,2500]}}],"p":"aaa"}`)
	}
	f.Fuzz(func(t *testing.T, file, args string) {
		p, err := Parse([]byte(file))
		if err != nil {
			if !errdefs.IsInvalidArgument(err) {
				t.Fatalf("error %v is not invalid-argument", err)
			}
			return
		}
		canon, err := registry.NormalizeArguments(json.RawMessage(args))
		if err != nil {
			return
		}
		for name := range p.Tools {
			a, _ := p.Decide(registry.Execution{Name: name, Arguments: canon})
			if a != Allow && a != Deny && a != Ask {
				t.Fatalf("action %q", a)
			}
		}
	})
}
