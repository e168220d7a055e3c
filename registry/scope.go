package registry

import "slices"

// Restriction is one visibility layer: it reports whether a registered tool
// stays visible. Restrictions never see run_code, which stays outside the
// layers so no restriction can remove Code Mode's only entry point.
type Restriction func(tool string) bool

// Allow returns a restriction that keeps only the named tools. Allow() with
// no names hides every registered tool.
func Allow(names ...string) Restriction {
	names = slices.Clone(names)
	return func(tool string) bool { return slices.Contains(names, tool) }
}

// Deny returns a restriction that hides the named tools.
func Deny(names ...string) Restriction {
	names = slices.Clone(names)
	return func(tool string) bool { return !slices.Contains(names, tool) }
}

// Scope selects which registered tools an assembly or a call can see and
// execute: a tool is visible when every layer keeps it. The zero Scope sees
// every registered tool. Lookup (what Assemble presents, what the SDK lists)
// and execution (what Execute and a program's bindings reach) share the
// same scope, so a model is offered exactly what it can call. A Scope is an
// immutable value; Restrict returns a new one.
type Scope struct {
	layers []Restriction
}

// Restrict returns the scope with more layers nested inside it: a tool is
// visible only if it passes s and every one of rs.
func (s Scope) Restrict(rs ...Restriction) Scope {
	layers := make([]Restriction, 0, len(s.layers)+len(rs))
	layers = append(layers, s.layers...)
	for _, r := range rs {
		if r != nil {
			layers = append(layers, r)
		}
	}
	return Scope{layers: layers}
}

// Allows reports whether a registered tool named name is visible in s.
func (s Scope) Allows(name string) bool {
	for _, keep := range s.layers {
		if !keep(name) {
			return false
		}
	}
	return true
}
