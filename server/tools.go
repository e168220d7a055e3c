package server

import (
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/dsh-container/dsh-container/backend"
	"github.com/dsh-container/dsh-container/registry"
)

// ToolsResponse is the body of GET /v1/tools.
type ToolsResponse struct {
	// Mode is the server's presentation mode.
	Mode registry.Mode `json:"mode"`
	// Language is the language run_code's description and SDK speak
	// (absent in native mode, where there is no run_code).
	Language string `json:"language,omitempty"`
	// Tools is the assembled wire tool list in MCP's tool shape: the tools
	// natively, run_code with its schema and its description carrying the
	// SDK, or both, as the mode says.
	Tools []registry.MCPTool `json:"tools"`
}

// handleTools serves GET /v1/tools?language=typescript|python: what an
// MCP client of this server's tools would list, so API users see the
// run_code schema and the SDK the programs they send run against. The
// language defaults to typescript when it is served, otherwise to the one
// language served; it must be a served language, since the SDK comes from
// that language's runtime.
func (s *Server) handleTools(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	for key := range q {
		if key != "language" {
			writeError(w, http.StatusBadRequest, fmt.Sprintf("unknown query parameter %q (known: language)", key))
			return
		}
	}
	name := q.Get("language")
	if name == "" {
		name = string(backend.TypeScript)
		if !slices.Contains(s.langs, name) {
			name = s.langs[0]
		}
	}
	lang, err := backend.ParseLanguage(name)
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	rt, ok := s.runtimes[lang]
	if !ok {
		writeError(w, http.StatusBadRequest, fmt.Sprintf("language %q is not served here (served: %s)", lang, strings.Join(s.langs, ", ")))
		return
	}
	reg := registry.New(append(slices.Clone(s.opts.regOpts), registry.WithMode(s.opts.mode), registry.WithRuntime(rt), registry.WithLogger(s.log))...)
	for _, t := range s.tools() {
		if err := reg.Register(t); err != nil {
			writeError(w, http.StatusInternalServerError, err.Error())
			return
		}
	}
	asm, err := reg.Assemble(r.Context(), registry.Scope{})
	if err != nil {
		writeError(w, statusFor(err), err.Error())
		return
	}
	out := ToolsResponse{Mode: s.opts.mode, Tools: asm.MCPTools()}
	if s.opts.mode != registry.ModeNative {
		out.Language = string(lang)
	}
	writeJSON(w, http.StatusOK, out)
}
