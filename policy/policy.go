// Package policy reads the declarative policy of `--policy FILE|safe` and
// turns it into a registry guard: each call is allowed, denied, or asked
// about (the registry's Approver decides). The file also carries the
// egress section, decoded here into an egress.Config and validated with
// egress's grammar; this package does not act on it.
//
// The file is JSON:
//
//	{"default": "allow|deny|ask",
//	 "tools": {"NAME": {"action": "allow|deny|ask",
//	                    "when": [{"path": "a.b.0", "equals"|"prefix"|"regex": ...}]}},
//	 "egress": {"allow": ["api.github.com:443", "*.example.com:443"],
//	            "maxBytes": 10485760, "maxConnections": 16}}
//
// docs/policy.md gives the exact semantics.
package policy

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/big"
	"os"
	"reflect"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/containerd/errdefs"

	"github.com/dsh-container/dsh-container/egress"
	"github.com/dsh-container/dsh-container/registry"
)

// Action is what a policy does with a call.
type Action string

const (
	Allow Action = "allow"
	Deny  Action = "deny"
	Ask   Action = "ask"
)

// Safe is the name of the built-in policy: tools annotated
// destructiveHint: true ask, every other call is allowed.
const Safe = "safe"

// MaxFileBytes bounds a policy file.
const MaxFileBytes = 1 << 20

// Policy is a parsed policy. The zero value allows everything.
type Policy struct {
	// Default is the action for a call no rule matches ("allow" when the
	// file does not say).
	Default Action
	// Tools holds each tool's rules in file order; the first that matches
	// decides.
	Tools map[string][]Rule
	// Egress is the egress section, nil when the file has none: the
	// configuration egress.New compiles (it reads CAFile).
	Egress *egress.Config
	// AskDestructive makes a call no rule matches ask when its tool is
	// annotated destructiveHint: true (the built-in "safe" policy).
	AskDestructive bool
	// Name is where the policy came from (a file path or "safe"), for
	// messages.
	Name string
}

// Rule is one rule of a tool: Action applies when every condition of
// When holds (an empty When always holds).
type Rule struct {
	Action Action
	When   []Condition
}

// Condition tests the argument value at a dot path. Exactly one of
// Equals, Prefix and Regex is set.
type Condition struct {
	// Path is the dot path into the arguments: "a.b", "items.0.name".
	Path string
	// Equals is a JSON value the argument must equal (see docs/policy.md
	// for how values compare).
	Equals json.RawMessage
	// Prefix is a string the argument, a string, must start with.
	Prefix *string
	// Regex is an RE2 expression the whole argument, a string, must match.
	Regex *string

	segs   []string
	equals any
	re     *regexp.Regexp
}

// Load reads a policy: "safe" is the built-in policy, anything else a
// file path.
func Load(nameOrPath string) (*Policy, error) {
	if nameOrPath == Safe {
		return &Policy{Default: Allow, AskDestructive: true, Name: Safe}, nil
	}
	f, err := os.Open(nameOrPath)
	if err != nil {
		return nil, fmt.Errorf("%w: policy: %w", errdefs.ErrInvalidArgument, err)
	}
	defer f.Close()
	var buf bytes.Buffer
	if _, err := buf.ReadFrom(io.LimitReader(f, MaxFileBytes+1)); err != nil {
		return nil, fmt.Errorf("%w: policy %s: %w", errdefs.ErrInvalidArgument, nameOrPath, err)
	}
	if buf.Len() > MaxFileBytes {
		return nil, fmt.Errorf("%w: policy %s: larger than %d bytes", errdefs.ErrInvalidArgument, nameOrPath, MaxFileBytes)
	}
	p, err := Parse(buf.Bytes())
	if err != nil {
		return nil, fmt.Errorf("policy %s: %w", nameOrPath, err)
	}
	p.Name = nameOrPath
	return p, nil
}

// Parse parses a policy file's bytes strictly: unknown fields, duplicate
// keys, bad actions, paths and expressions are errors naming where they
// are. Errors wrap errdefs.ErrInvalidArgument.
func Parse(data []byte) (*Policy, error) {
	if len(bytes.TrimSpace(data)) == 0 {
		return nil, invalid("", "empty file; expected {\"default\": ..., \"tools\": {...}}")
	}
	if _, err := registry.NormalizeArguments(data); err != nil {
		return nil, invalid("", "%s", strings.TrimPrefix(err.Error(), "invalid argument: arguments are "))
	}
	top, err := object("", data, "default", "tools", "egress")
	if err != nil {
		return nil, err
	}
	p := &Policy{Default: Allow, Tools: map[string][]Rule{}}
	if raw, ok := top["default"]; ok {
		if p.Default, err = action("default", raw); err != nil {
			return nil, err
		}
	}
	if raw, ok := top["tools"]; ok {
		var tools map[string]json.RawMessage
		if err := json.Unmarshal(raw, &tools); err != nil || tools == nil {
			return nil, invalid("tools", "must be an object of tool names")
		}
		for _, name := range sortedKeys(tools) {
			where := "tools." + name
			if name == "" {
				return nil, invalid("tools", "a tool name is empty")
			}
			rules, err := parseRules(where, tools[name])
			if err != nil {
				return nil, err
			}
			p.Tools[name] = rules
		}
	}
	if raw, ok := top["egress"]; ok {
		if p.Egress, err = parseEgress(raw); err != nil {
			return nil, err
		}
	}
	return p, nil
}

// parseRules reads a tool's entry: one rule object, or an array of them
// tried in order.
func parseRules(where string, raw json.RawMessage) ([]Rule, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) > 0 && raw[0] == '[' {
		var list []json.RawMessage
		if err := json.Unmarshal(raw, &list); err != nil {
			return nil, invalid(where, "must be a rule object or an array of them")
		}
		if len(list) == 0 {
			return nil, invalid(where, "an empty array of rules")
		}
		rules := make([]Rule, 0, len(list))
		for i, r := range list {
			rule, err := parseRule(fmt.Sprintf("%s[%d]", where, i), r)
			if err != nil {
				return nil, err
			}
			rules = append(rules, rule)
		}
		return rules, nil
	}
	rule, err := parseRule(where, raw)
	if err != nil {
		return nil, err
	}
	return []Rule{rule}, nil
}

func parseRule(where string, raw json.RawMessage) (Rule, error) {
	fields, err := object(where, raw, "action", "when")
	if err != nil {
		return Rule{}, err
	}
	var r Rule
	a, ok := fields["action"]
	if !ok {
		return r, invalid(where, "\"action\" is required (allow, deny or ask)")
	}
	if r.Action, err = action(where+".action", a); err != nil {
		return r, err
	}
	if w, ok := fields["when"]; ok {
		var list []json.RawMessage
		if err := json.Unmarshal(w, &list); err != nil || list == nil {
			return r, invalid(where+".when", "must be an array of conditions")
		}
		for i, c := range list {
			cond, err := parseCondition(fmt.Sprintf("%s.when[%d]", where, i), c)
			if err != nil {
				return r, err
			}
			r.When = append(r.When, cond)
		}
	}
	return r, nil
}

func parseCondition(where string, raw json.RawMessage) (Condition, error) {
	fields, err := object(where, raw, "path", "equals", "prefix", "regex")
	if err != nil {
		return Condition{}, err
	}
	var c Condition
	p, ok := fields["path"]
	if !ok {
		return c, invalid(where, "\"path\" is required (a dot path into the arguments, e.g. \"owner\" or \"items.0.name\")")
	}
	if err := json.Unmarshal(p, &c.Path); err != nil {
		return c, invalid(where+".path", "must be a string")
	}
	if c.segs, err = splitPath(c.Path); err != nil {
		return c, invalid(where+".path", "%v", err)
	}
	n := 0
	if v, ok := fields["equals"]; ok {
		n++
		c.Equals = v
		if c.equals, err = decodeValue(v); err != nil {
			return c, invalid(where+".equals", "%v", err)
		}
	}
	for _, k := range []string{"prefix", "regex"} {
		v, ok := fields[k]
		if !ok {
			continue
		}
		n++
		var s string
		if err := json.Unmarshal(v, &s); err != nil {
			return c, invalid(where+"."+k, "must be a string")
		}
		if k == "prefix" {
			c.Prefix = &s
			continue
		}
		c.Regex = &s
		re, err := regexp.Compile(`^(?:` + s + `)$`)
		if err != nil {
			return c, invalid(where+".regex", "not an RE2 expression: %v", err)
		}
		c.re = re
	}
	if n != 1 {
		return c, invalid(where, "needs exactly one of \"equals\", \"prefix\" or \"regex\" (has %d)", n)
	}
	return c, nil
}

// splitPath splits a dot path; every segment must be non-empty, and one
// written as a number must be an array index in canonical decimal (see
// indexLike).
func splitPath(path string) ([]string, error) {
	if path == "" {
		return nil, fmt.Errorf("empty path")
	}
	segs := strings.Split(path, ".")
	for i, s := range segs {
		if s == "" {
			return nil, fmt.Errorf("path %q has an empty segment at position %d", path, i)
		}
		if indexLike(s) && !canonicalIndex(s) {
			return nil, fmt.Errorf("path %q: segment %d %q is not an array index: write an index in decimal from 0, without sign, spaces or leading zeros (\"0\", \"12\")", path, i, s)
		}
	}
	return segs, nil
}

// indexLike reports a segment written as a number: ASCII digits, after
// optional spaces and an optional sign ("01", "+1", "-0", " 1").
func indexLike(s string) bool {
	s = strings.TrimSpace(s)
	if s != "" && (s[0] == '+' || s[0] == '-') {
		s = s[1:]
	}
	return s != "" && strings.Trim(s, "0123456789") == ""
}

// canonicalIndex reports an array index as lookup reads it: decimal from
// 0, digits only, no leading zero but in "0" itself.
func canonicalIndex(s string) bool {
	return s != "" && strings.Trim(s, "0123456789") == "" && (s == "0" || s[0] != '0')
}

func action(where string, raw json.RawMessage) (Action, error) {
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return "", invalid(where, "must be a string: allow, deny or ask")
	}
	switch a := Action(s); a {
	case Allow, Deny, Ask:
		return a, nil
	}
	return "", invalid(where, "unknown action %q (want allow, deny or ask)", s)
}

// object decodes a JSON object and rejects keys outside allowed.
func object(where string, raw json.RawMessage, allowed ...string) (map[string]json.RawMessage, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil || m == nil {
		if where == "" {
			return nil, invalid("", "must be a JSON object")
		}
		return nil, invalid(where, "must be an object")
	}
	for _, k := range sortedKeys(m) {
		if !contains(allowed, k) {
			return nil, invalid(where, "unknown field %q (known: %s)", k, strings.Join(allowed, ", "))
		}
	}
	return m, nil
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func invalid(where, format string, args ...any) error {
	msg := fmt.Sprintf(format, args...)
	if where != "" {
		msg = where + ": " + msg
	}
	return fmt.Errorf("%w: %s", errdefs.ErrInvalidArgument, msg)
}

// decodeValue decodes JSON with numbers as exact rationals, so that 1,
// 1.0 and 1e0 are equal and big integers stay exact.
func decodeValue(raw []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	return exactNumbers(v), nil
}

func exactNumbers(v any) any {
	switch x := v.(type) {
	case json.Number:
		if r, ok := new(big.Rat).SetString(string(x)); ok {
			return number(r.RatString())
		}
		return number(x)
	case []any:
		for i := range x {
			x[i] = exactNumbers(x[i])
		}
	case map[string]any:
		for k := range x {
			x[k] = exactNumbers(x[k])
		}
	}
	return v
}

// number is a JSON number as an exact rational's text, a type of its own
// so that it never equals a string.
type number string

// Decide returns the action for a call: the first rule of the call's
// tool whose conditions all hold, else the default (for run_code and
// describe_tools, which are governed only by their own rules: allow),
// with "safe" asking about destructive tools. rule names the deciding
// rule for messages ("default" when none did).
func (p *Policy) Decide(exec registry.Execution) (a Action, rule string) {
	rules := p.Tools[exec.Name]
	if len(rules) > 0 {
		var args any
		decoded := false
		for i, r := range rules {
			if len(r.When) > 0 && !decoded {
				args, _ = decodeValue(exec.Arguments)
				decoded = true
			}
			if r.matches(args) {
				where := "tools." + exec.Name
				if len(rules) > 1 {
					where += "[" + strconv.Itoa(i) + "]"
				}
				return r.Action, where
			}
		}
	}
	if exec.Name == registry.RunCode || exec.Name == registry.DescribeTools {
		return Allow, "default"
	}
	if p.AskDestructive && destructive(exec.Annotations) {
		return Ask, "destructiveHint"
	}
	if p.Default == "" {
		return Allow, "default"
	}
	return p.Default, "default"
}

func (r Rule) matches(args any) bool {
	for _, c := range r.When {
		if !c.matches(args) {
			return false
		}
	}
	return true
}

func (c Condition) matches(args any) bool {
	v, ok := lookup(args, c.segs)
	if !ok {
		return false
	}
	switch {
	case c.re != nil:
		s, ok := v.(string)
		return ok && c.re.MatchString(s)
	case c.Prefix != nil:
		s, ok := v.(string)
		return ok && strings.HasPrefix(s, *c.Prefix)
	}
	return equalValues(v, c.equals)
}

// equalValues compares decoded values: numbers by exact value, objects
// whatever their key order.
func equalValues(a, b any) bool { return reflect.DeepEqual(a, b) }

// lookup walks a dot path: an object segment is a key; an array segment
// is a decimal index from 0.
func lookup(v any, segs []string) (any, bool) {
	for _, s := range segs {
		switch x := v.(type) {
		case map[string]any:
			next, ok := x[s]
			if !ok {
				return nil, false
			}
			v = next
		case []any:
			i, err := strconv.Atoi(s)
			if err != nil || i < 0 || i >= len(x) || strconv.Itoa(i) != s {
				return nil, false
			}
			v = x[i]
		default:
			return nil, false
		}
	}
	return v, true
}

// destructive reports annotations saying destructiveHint: true.
func destructive(ann json.RawMessage) bool {
	if len(ann) == 0 {
		return false
	}
	var a struct {
		DestructiveHint *bool `json:"destructiveHint"`
	}
	return json.Unmarshal(ann, &a) == nil && a.DestructiveHint != nil && *a.DestructiveHint
}

// Guard is the policy as a registry guard: allow is nil, deny an error
// naming the rule, ask registry.Ask.
func (p *Policy) Guard() registry.Guard {
	return func(_ context.Context, exec registry.Execution) error {
		a, rule := p.Decide(exec)
		switch a {
		case Deny:
			return fmt.Errorf("denied by policy (%s)", rule)
		case Ask:
			return registry.Ask(fmt.Sprintf("policy (%s) asks before %q runs", rule, exec.Name))
		}
		return nil
	}
}
