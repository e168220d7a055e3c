package server

import (
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/containerd/errdefs"

	"github.com/dsh-container/dsh-container/backend"
)

// MaxRuntimeNameBytes bounds the "runtime" key of a request.
const MaxRuntimeNameBytes = 64

// namedRuntime is a WithNamedRuntime choice.
type namedRuntime struct {
	name string
	rt   backend.Runtime
}

// runtimeChoices are the OCI runtimes requests may name, per language:
// `serve --allow-runtimes`. Empty when requests may not choose.
type runtimeChoices struct {
	byLang map[backend.Language]map[string]backend.Runtime
	names  []string // every allowed name, sorted
}

func newRuntimeChoices(named []namedRuntime, defaults map[backend.Language]backend.Runtime) (runtimeChoices, error) {
	c := runtimeChoices{byLang: map[backend.Language]map[string]backend.Runtime{}}
	for _, n := range named {
		if n.rt == nil {
			return c, fmt.Errorf("%w: nil runtime for OCI runtime %q", errdefs.ErrInvalidArgument, n.name)
		}
		if n.name == "" || len(n.name) > MaxRuntimeNameBytes {
			return c, fmt.Errorf("%w: OCI runtime name %q must be 1 to %d bytes", errdefs.ErrInvalidArgument, n.name, MaxRuntimeNameBytes)
		}
		l := n.rt.Language()
		if _, served := defaults[l]; !served {
			return c, fmt.Errorf("%w: OCI runtime %q is given for %s, which has no default runtime (WithRuntime)", errdefs.ErrInvalidArgument, n.name, l)
		}
		m := c.byLang[l]
		if m == nil {
			m = map[string]backend.Runtime{}
			c.byLang[l] = m
		}
		if _, dup := m[n.name]; dup {
			return c, fmt.Errorf("%w: OCI runtime %q given twice for %s", errdefs.ErrInvalidArgument, n.name, l)
		}
		m[n.name] = n.rt
		if !slices.Contains(c.names, n.name) {
			c.names = append(c.names, n.name)
		}
	}
	slices.Sort(c.names)
	return c, nil
}

// Runtimes are the OCI runtimes a request may name (sorted), nil when
// requests may not choose one.
func (s *Server) Runtimes() []string { return slices.Clone(s.choices.names) }

// runtimeFor is the runtime a request for lang runs on: the language's
// default without a name, else the allowed runtime of that name. The
// error is the 400's message.
func (s *Server) runtimeFor(lang backend.Language, name string) (backend.Runtime, error) {
	rt, ok := s.runtimes[lang]
	if !ok {
		return nil, fmt.Errorf("language %q is not served here (served: %s)", lang, strings.Join(s.langs, ", "))
	}
	if name == "" {
		return rt, nil
	}
	if len(name) > MaxRuntimeNameBytes || !utf8.ValidString(name) {
		return nil, fmt.Errorf("runtime must be valid UTF-8 of at most %d bytes", MaxRuntimeNameBytes)
	}
	if len(s.choices.names) == 0 {
		return nil, fmt.Errorf("runtime %q: this server does not let requests choose an OCI runtime (serve --allow-runtimes lists the ones they may); leave runtime out", name)
	}
	if rt, ok := s.choices.byLang[lang][name]; ok {
		return rt, nil
	}
	allowed := make([]string, 0, len(s.choices.byLang[lang]))
	for n := range s.choices.byLang[lang] {
		allowed = append(allowed, n)
	}
	slices.Sort(allowed)
	return nil, fmt.Errorf("runtime %q is not allowed here for %s (allowed: %s)", name, lang, strings.Join(allowed, ", "))
}
