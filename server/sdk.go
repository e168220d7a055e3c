package server

import (
	"fmt"
	"io"
	"net/http"

	"github.com/dsh-container/dsh-container/backend"
	"github.com/dsh-container/dsh-container/sdkgen"
)

// handleSDK serves the SDK of the loaded tools:
// GET /v1/sdk?language=typescript|python&format=prompt|source. The
// language defaults to typescript, the format to prompt.
func (s *Server) handleSDK(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	for key := range q {
		if key != "language" && key != "format" {
			writeError(w, http.StatusBadRequest, fmt.Sprintf("unknown query parameter %q (known: language, format)", key))
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
		tools = append(tools, sdkgen.Tool{Name: t.Name, Description: t.Description, InputSchema: t.Parameters, OutputSchema: t.OutputSchema})
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
