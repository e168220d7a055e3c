package server

import (
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/dsh-container/dsh-container/backend"
	"github.com/dsh-container/dsh-container/sdkgen"
)

// handleSDK serves the SDK of the loaded tools:
// GET /v1/sdk?language=typescript|python&format=prompt|source|index[&tools=a,b].
// The language defaults to typescript, the format to prompt; tools keeps
// only the named tools.
func (s *Server) handleSDK(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	for key := range q {
		if key != "language" && key != "format" && key != "tools" {
			writeError(w, http.StatusBadRequest, fmt.Sprintf("unknown query parameter %q (known: language, format, tools)", key))
			return
		}
	}
	langName := q.Get("language")
	if langName == "" {
		langName = string(backend.TypeScript)
	}
	lang, err := backend.ParseLanguage(langName)
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	format := q.Get("format")
	if format == "" {
		format = string(sdkgen.FormatPrompt)
	}
	current := s.tools()
	tools := make([]sdkgen.Tool, 0, len(current))
	for _, t := range current {
		tools = append(tools, sdkgen.Tool{Name: t.Name, Description: t.Description, InputSchema: t.Parameters, OutputSchema: t.OutputSchema, Source: t.Source})
	}
	if q.Has("tools") {
		// tools=a,b: only those tools (what describe_tools returns, with
		// format=source); an unknown name is a 404 naming it.
		sel, unknown := sdkgen.Select(tools, strings.Split(q.Get("tools"), ","))
		if len(unknown) > 0 {
			writeError(w, http.StatusNotFound, fmt.Sprintf("no tool named %q", unknown[0]))
			return
		}
		tools = sel
	}
	text, err := sdkgen.Render(sdkgen.Language(lang), sdkgen.Format(format), tools)
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(http.StatusOK)
	if r.Method != http.MethodHead {
		_, _ = io.WriteString(w, text)
	}
}
