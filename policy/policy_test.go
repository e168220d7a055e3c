package policy

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/containerd/errdefs"

	"github.com/dsh-container/dsh-container/egress"
	"github.com/dsh-container/dsh-container/registry"
)

func TestParseErrors(t *testing.T) {
	tests := []struct {
		name, in, want string
	}{
		{"empty", ``, "empty file"},
		{"not object", `[]`, "must be a JSON object"},
		{"invalid json", `{"default":`, "not lossless JSON"},
		{"duplicate key", `{"default":"allow","default":"deny"}`, "duplicate"},
		{"unknown top field", `{"defualt":"allow"}`, `unknown field "defualt"`},
		{"egress caFile empty", `{"egress":{"allow":["a.example:443"],"caFile":""}}`, `egress.caFile: must be the path of a PEM file`},
		{"egress caFile not string", `{"egress":{"allow":["a.example:443"],"caFile":1}}`, `egress.caFile: must be the path of a PEM file`},
		{"bad default", `{"default":"maybe"}`, `default: unknown action "maybe" (want allow, deny or ask)`},
		{"default not string", `{"default":1}`, `default: must be a string`},
		{"tools not object", `{"tools":[]}`, `tools: must be an object`},
		{"rule not object", `{"tools":{"t":"deny"}}`, `tools.t: must be an object`},
		{"unknown rule field", `{"tools":{"t":{"action":"deny","whne":[]}}}`, `tools.t: unknown field "whne"`},
		{"missing action", `{"tools":{"t":{"when":[]}}}`, `tools.t: "action" is required`},
		{"bad action", `{"tools":{"t":{"action":"Allow"}}}`, `tools.t.action: unknown action "Allow"`},
		{"when not array", `{"tools":{"t":{"action":"deny","when":{}}}}`, `tools.t.when: must be an array`},
		{"unknown condition field", `{"tools":{"t":{"action":"deny","when":[{"path":"a","equal":"x"}]}}}`, `tools.t.when[0]: unknown field "equal"`},
		{"no matcher", `{"tools":{"t":{"action":"deny","when":[{"path":"a"}]}}}`, `tools.t.when[0]: needs exactly one of "equals", "prefix" or "regex" (has 0)`},
		{"two matchers", `{"tools":{"t":{"action":"deny","when":[{"path":"a","equals":"x","prefix":"y"}]}}}`, `(has 2)`},
		{"missing path", `{"tools":{"t":{"action":"deny","when":[{"equals":"x"}]}}}`, `tools.t.when[0]: "path" is required`},
		{"empty path", `{"tools":{"t":{"action":"deny","when":[{"path":"","equals":"x"}]}}}`, `tools.t.when[0].path: empty path`},
		{"empty segment", `{"tools":{"t":{"action":"deny","when":[{"path":"a..b","equals":"x"}]}}}`, `tools.t.when[0].path: path "a..b" has an empty segment at position 1`},
		{"path not string", `{"tools":{"t":{"action":"deny","when":[{"path":1,"equals":"x"}]}}}`, `tools.t.when[0].path: must be a string`},
		{"index with a leading zero", `{"tools":{"t":{"action":"deny","when":[{"path":"items.01.name","equals":"x"}]}}}`, `tools.t.when[0].path: path "items.01.name": segment 1 "01" is not an array index: write an index in decimal from 0, without sign, spaces or leading zeros`},
		{"index 00", `{"tools":{"t":[{"action":"allow"},{"action":"deny","when":[{"path":"00","equals":"x"}]}]}}`, `tools.t[1].when[0].path: path "00": segment 0 "00" is not an array index`},
		{"index with a plus", `{"tools":{"t":{"action":"deny","when":[{"path":"items.+1","equals":"x"}]}}}`, `path "items.+1": segment 1 "+1" is not an array index`},
		{"negative zero index", `{"tools":{"t":{"action":"deny","when":[{"path":"items.-0","equals":"x"}]}}}`, `path "items.-0": segment 1 "-0" is not an array index`},
		{"negative index", `{"tools":{"t":{"action":"deny","when":[{"path":"items.-1","equals":"x"}]}}}`, `segment 1 "-1" is not an array index`},
		{"index with a space", `{"tools":{"t":{"action":"deny","when":[{"path":"items. 1","prefix":"x"}]}}}`, `path "items. 1": segment 1 " 1" is not an array index`},
		{"index with a trailing space", `{"tools":{"t":{"action":"deny","when":[{"path":"items.1 .name","regex":"x"}]}}}`, `segment 1 "1 " is not an array index`},
		{"bad regex", `{"tools":{"t":{"action":"deny","when":[{"path":"a","regex":"(x"}]}}}`, `tools.t.when[0].regex: not an RE2 expression`},
		{"backreference is not RE2", `{"tools":{"t":{"action":"deny","when":[{"path":"a","regex":"(a)\\1"}]}}}`, `not an RE2 expression`},
		{"prefix not string", `{"tools":{"t":{"action":"deny","when":[{"path":"a","prefix":1}]}}}`, `tools.t.when[0].prefix: must be a string`},
		{"second rule in list", `{"tools":{"t":[{"action":"allow"},{"action":"nope"}]}}`, `tools.t[1].action: unknown action "nope"`},
		{"empty rule list", `{"tools":{"t":[]}}`, `tools.t: an empty array of rules`},
		{"egress unknown field", `{"egress":{"allow":[],"maxbytes":1}}`, `egress: unknown field "maxbytes"`},
		{"egress no port", `{"egress":{"allow":["api.github.com"]}}`, `egress.allow[0]: "api.github.com": want host:port`},
		{"egress bad port", `{"egress":{"allow":["api.github.com:0"]}}`, `port "0" is not a number from 1 to 65535`},
		{"egress ip", `{"egress":{"allow":["10.0.0.1:443"]}}`, `an IP address cannot be allowlisted`},
		{"egress mid wildcard", `{"egress":{"allow":["api.*.com:443"]}}`, `a wildcard is allowed only as a whole first label`},
		{"egress bare wildcard", `{"egress":{"allow":["*.com:443"]}}`, `a wildcard must cover a domain with at least two labels`},
		{"egress upper case", `{"egress":{"allow":["API.github.com:443"]}}`, `only lower-case letters`},
		{"egress negative bytes", `{"egress":{"maxBytes":-1}}`, `egress.maxBytes: must not be negative`},
		{"egress bytes not int", `{"egress":{"maxBytes":"1MB"}}`, `egress.maxBytes: must be an integer`},
		{"egress bad private", `{"egress":{"allowPrivate":["10.0.0.0/33"]}}`, `egress.allowPrivate[0]: "10.0.0.0/33": not a CIDR prefix`},
		// The section validates with egress's grammar (TestPatternGrammar
		// has the rest): an empty allowlist and names that look like
		// addresses, which the policy's own grammar took, are refused
		// here, not first when the daemon starts; every problem is named.
		{"egress no allow", `{"egress":{}}`, `egress.allow: at least one host:port is needed`},
		{"egress numeric name", `{"egress":{"allow":["a.example:443","foo.123:443"]}}`, `egress.allow[1]: "foo.123:443": "foo.123" looks like an address`},
		{"egress trailing dot", `{"egress":{"allow":["api.github.com.:443"]}}`, `egress.allow[0]: "api.github.com.:443": "api.github.com." ends with a dot`},
		{"egress every problem", `{"egress":{"allow":["a.example:443","A.example:443"],"maxConnections":-1,"allowPrivate":["x"]}}`, `egress.allow[1]: "A.example:443": "A.example": only lower-case letters, digits, '-' and '.' are allowed in an allowlisted name; egress.maxConnections: must not be negative (0 means 16); egress.allowPrivate[0]: "x": not an IP address or CIDR prefix`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(tc.in))
			if err == nil {
				t.Fatalf("Parse succeeded, want an error containing %q", tc.want)
			}
			if !errdefs.IsInvalidArgument(err) {
				t.Errorf("error %v is not invalid-argument", err)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q does not contain %q", err, tc.want)
			}
		})
	}
}

func exec(name, args string) registry.Execution {
	return registry.Execution{CallID: "c", Name: name, Arguments: json.RawMessage(args)}
}

func TestDecide(t *testing.T) {
	const file = `{
	  "default": "deny",
	  "tools": {
	    "read": {"action": "allow"},
	    "push": {"action": "allow", "when": [{"path": "owner", "equals": "me"}, {"path": "repo", "prefix": "sandbox-"}]},
	    "pay": [
	      {"action": "deny", "when": [{"path": "amount", "equals": 1000}]},
	      {"action": "ask", "when": [{"path": "to.iban", "regex": "DE[0-9]{2}"}]},
	      {"action": "allow", "when": [{"path": "items.1.sku", "equals": "b"}]},
	      {"action": "deny"}
	    ],
	    "cfg": {"action": "ask", "when": [{"path": "opts", "equals": {"b": [1, 2.0], "a": null}}]},
	    "run_code": {"action": "allow"}
	  }
	}`
	p, err := Parse([]byte(file))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, tool, args string
		want             Action
		rule             string
	}{
		{"plain allow", "read", `{}`, Allow, "tools.read"},
		{"unlisted takes default", "other", `{}`, Deny, "default"},
		{"all conditions hold", "push", `{"owner":"me","repo":"sandbox-1"}`, Allow, "tools.push"},
		{"one condition fails", "push", `{"owner":"me","repo":"prod"}`, Deny, "default"},
		{"missing path fails", "push", `{"repo":"sandbox-1"}`, Deny, "default"},
		{"equals is typed: string vs number", "pay", `{"amount":"1000"}`, Deny, "tools.pay[3]"},
		{"number equals by value", "pay", `{"amount":1e3}`, Deny, "tools.pay[0]"},
		{"regex anchored: full match", "pay", `{"to":{"iban":"DE12"}}`, Ask, "tools.pay[1]"},
		{"regex anchored: no partial", "pay", `{"to":{"iban":"xDE12"}}`, Deny, "tools.pay[3]"},
		{"regex on non-string fails", "pay", `{"to":{"iban":12}}`, Deny, "tools.pay[3]"},
		{"array index", "pay", `{"items":[{"sku":"a"},{"sku":"b"}]}`, Allow, "tools.pay[2]"},
		{"array index out of range", "pay", `{"items":[{"sku":"b"}]}`, Deny, "tools.pay[3]"},
		{"first match wins", "pay", `{"amount":1000,"to":{"iban":"DE12"}}`, Deny, "tools.pay[0]"},
		{"object equality ignores key order", "cfg", `{"opts":{"a":null,"b":[1,2]}}`, Ask, "tools.cfg"},
		{"object equality is exact", "cfg", `{"opts":{"a":null,"b":[1,2],"c":1}}`, Deny, "default"},
		{"run_code only by its own rule", "run_code", `{"code":"x"}`, Allow, "tools.run_code"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a, rule := p.Decide(exec(tc.tool, tc.args))
			if a != tc.want || rule != tc.rule {
				t.Errorf("Decide = %s (%s), want %s (%s)", a, rule, tc.want, tc.rule)
			}
		})
	}
}

// Canonical indices and keys that are not numbers parse; a huge index is
// canonical (it names no element, and can be an object's key).
func TestPathSegments(t *testing.T) {
	for _, path := range []string{"0", "12", "items.0.name", "a.10", "x1", "1a", "0x1", "1e2", "-", "+", " ", "a b", "99999999999999999999"} {
		file := `{"tools":{"t":{"action":"deny","when":[{"path":` + jsonString(path) + `,"equals":1}]}}}`
		if _, err := Parse([]byte(file)); err != nil {
			t.Errorf("path %q: %v", path, err)
		}
	}
	p, err := Parse([]byte(`{"tools":{"t":{"action":"deny","when":[{"path":"a.10","equals":1}]}}}`))
	if err != nil {
		t.Fatal(err)
	}
	if a, _ := p.Decide(exec("t", `{"a":[0,0,0,0,0,0,0,0,0,0,1]}`)); a != Deny {
		t.Errorf("a.10 on an array: %s", a)
	}
	if a, _ := p.Decide(exec("t", `{"a":{"10":1}}`)); a != Deny {
		t.Errorf("a.10 on an object: %s", a)
	}
}

func jsonString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// regex and prefix match strings only: a number, boolean, null, array or
// object never matches, even where its text would (12 as "12" against
// 1.*, true as "true" against t.*); the same values as strings do.
func TestRegexAndPrefixMatchOnlyStrings(t *testing.T) {
	p, err := Parse([]byte(`{"default":"allow","tools":{
	  "re1":  {"action":"deny","when":[{"path":"v","regex":"1.*"}]},
	  "reT":  {"action":"deny","when":[{"path":"v","regex":"t.*"}]},
	  "reN":  {"action":"deny","when":[{"path":"v","regex":"n.*"}]},
	  "reAll":{"action":"deny","when":[{"path":"v","regex":"(?s).*"}]},
	  "pre1": {"action":"deny","when":[{"path":"v","prefix":"1"}]},
	  "preT": {"action":"deny","when":[{"path":"v","prefix":"t"}]},
	  "preN": {"action":"deny","when":[{"path":"v","prefix":"n"}]},
	  "preNone": {"action":"deny","when":[{"path":"v","prefix":""}]}
	}}`))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		tool, value string
		want        Action
	}{
		{"re1", `12`, Allow}, {"re1", `1.5e3`, Allow}, {"re1", `"12"`, Deny},
		{"reT", `true`, Allow}, {"reT", `"true"`, Deny},
		{"reN", `null`, Allow}, {"reN", `"null"`, Deny},
		{"reAll", `12`, Allow}, {"reAll", `false`, Allow}, {"reAll", `null`, Allow}, {"reAll", `[1]`, Allow}, {"reAll", `{"a":1}`, Allow}, {"reAll", `""`, Deny},
		{"pre1", `12`, Allow}, {"pre1", `"12"`, Deny},
		{"preT", `true`, Allow}, {"preT", `"tea"`, Deny},
		{"preN", `null`, Allow}, {"preN", `"no"`, Deny},
		{"preNone", `0`, Allow}, {"preNone", `[]`, Allow}, {"preNone", `{}`, Allow}, {"preNone", `""`, Deny},
	} {
		if a, rule := p.Decide(exec(tc.tool, `{"v":`+tc.value+`}`)); a != tc.want {
			t.Errorf("%s on %s: %s (%s), want %s", tc.tool, tc.value, a, rule, tc.want)
		}
	}
}

func TestDefaultSparesRunCode(t *testing.T) {
	p, err := Parse([]byte(`{"default":"deny"}`))
	if err != nil {
		t.Fatal(err)
	}
	if a, _ := p.Decide(exec(registry.RunCode, `{"code":"1"}`)); a != Allow {
		t.Errorf("run_code under default deny: %s", a)
	}
	if a, _ := p.Decide(exec("x", `{}`)); a != Deny {
		t.Errorf("x: %s", a)
	}
	p, err = Parse([]byte(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	if a, _ := p.Decide(exec("x", `{}`)); a != Allow {
		t.Errorf("default of an empty policy: %s", a)
	}
}

func TestSafe(t *testing.T) {
	p, err := Load(Safe)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		ann  string
		want Action
	}{
		{``, Allow},
		{`{"destructiveHint":true}`, Ask},
		{`{"destructiveHint":false}`, Allow},
		{`{"readOnlyHint":true}`, Allow},
		{`{"readOnlyHint":false}`, Allow},
	} {
		e := exec("t", `{}`)
		e.Annotations = json.RawMessage(tc.ann)
		if a, _ := p.Decide(e); a != tc.want {
			t.Errorf("annotations %s: %s, want %s", tc.ann, a, tc.want)
		}
	}
}

func TestGuard(t *testing.T) {
	p, err := Parse([]byte(`{"default":"ask","tools":{"rm":{"action":"deny"},"ls":{"action":"allow"}}}`))
	if err != nil {
		t.Fatal(err)
	}
	g := p.Guard()
	if err := g(context.Background(), exec("ls", `{}`)); err != nil {
		t.Errorf("ls: %v", err)
	}
	if err := g(context.Background(), exec("rm", `{}`)); err == nil || err.Error() != "denied by policy (tools.rm)" {
		t.Errorf("rm: %v", err)
	}
	var ask *registry.AskError
	if err := g(context.Background(), exec("cat", `{}`)); !errors.As(err, &ask) {
		t.Errorf("cat: %v, want an ask", err)
	}
}

func TestLoad(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "p.json")
	if err := os.WriteFile(path, []byte(`{"default":"ask","egress":{"allow":["api.github.com:443"]}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	p, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if p.Default != Ask || p.Name != path {
		t.Errorf("got %+v", p)
	}
	if p.Egress == nil || !reflect.DeepEqual(p.Egress.Allow, []string{"api.github.com:443"}) {
		t.Fatalf("egress: %+v", p.Egress)
	}
	// Left out, the caps are egress's defaults (one set of them).
	if ep, err := egress.New(*p.Egress); err != nil || ep.MaxBytes() != egress.DefaultMaxBytes || ep.MaxConnections() != egress.DefaultMaxConnections {
		t.Errorf("egress defaults: %v %v", ep, err)
	}
	if _, err := Load(filepath.Join(dir, "missing.json")); !errdefs.IsInvalidArgument(err) {
		t.Errorf("missing file: %v", err)
	}
	bad := filepath.Join(dir, "bad.json")
	_ = os.WriteFile(bad, []byte(`{"default":"no"}`), 0o600)
	if _, err := Load(bad); err == nil || !strings.Contains(err.Error(), "policy "+bad+": ") {
		t.Errorf("bad file: %v", err)
	}
}

// TestEgressSection: the section decodes into egress's Config as written;
// caFile stays a path (egress.New reads it, not Parse).
func TestEgressSection(t *testing.T) {
	p, err := Parse([]byte(`{"egress":{"allow":["*.example.com:443"],"maxBytes":1000,"maxConnections":2,"allowPrivate":["10.0.0.0/8"],"caFile":"/nonexistent/ca.pem"}}`))
	if err != nil {
		t.Fatal(err)
	}
	want := egress.Config{Allow: []string{"*.example.com:443"}, MaxBytes: 1000, MaxConnections: 2, AllowPrivate: []string{"10.0.0.0/8"}, CAFile: "/nonexistent/ca.pem"}
	if !reflect.DeepEqual(*p.Egress, want) {
		t.Errorf("egress = %+v, want %+v", *p.Egress, want)
	}
	if _, err := egress.New(*p.Egress); err == nil || !strings.Contains(err.Error(), "caFile: open /nonexistent/ca.pem") {
		t.Errorf("New with a missing caFile: %v", err)
	}
}
