package manifest

import (
	"strings"
	"testing"
)

func TestAnnotations(t *testing.T) {
	m, err := Parse([]byte(`{"tools":[{"name":"rm","command":["/bin/rm"],"annotations":{"title":"Remove","destructiveHint":true,"readOnlyHint":false}}]}`), Options{RequireCommand: true})
	if err != nil {
		t.Fatal(err)
	}
	rt := m.Tools[0].RegistryTool()
	if got := string(rt.Annotations); got != `{"title":"Remove","readOnlyHint":false,"destructiveHint":true}` {
		t.Errorf("registry annotations %s", got)
	}
	m, err = Parse([]byte(`{"tools":[{"name":"ls","command":["/bin/ls"]}]}`), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if rt := m.Tools[0].RegistryTool(); rt.Annotations != nil {
		t.Errorf("no annotations: %s", rt.Annotations)
	}
	for in, want := range map[string]string{
		`{"tools":[{"name":"x","annotations":{"destructive":true}}]}`:      `unknown field "destructive"`,
		`{"tools":[{"name":"x","annotations":{"destructiveHint":"yes"}}]}`: `destructiveHint`,
		`{"tools":[{"name":"x","annotations":[]}]}`:                        `annotations`,
	} {
		if _, err := Parse([]byte(in), Options{}); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want an error with %q", in, err, want)
		}
	}
}
