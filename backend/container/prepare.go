package container

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"

	"github.com/evanw/esbuild/pkg/api"

	"github.com/dsh-container/dsh-container/backend"
)

// ProgramFile is the file name runners give the program in stack traces.
func ProgramFile(lang backend.Language) string {
	if lang == backend.Python {
		return "program.py"
	}
	return "program.ts"
}

var staticImport = regexp.MustCompile(`(?m)^\s*import\s+[\w*{]`)

// prepared is a program ready for the run frame.
type prepared struct {
	program   string
	sourceMap string
}

// wrapperHead turns the model's body into an async function expression.
// It sits on its own line so the body's line N is line N+1 of the wrapped
// text; shiftSourceMap undoes that offset so the map points at the
// model's own lines.
const wrapperHead = "(async () => {\n"

// prepare validates a program and, for TypeScript, strips its types in a
// worker process (see stripper). A program that does not parse, nests
// too deeply or breaks a worker limit comes back as a Failure and never
// reaches a container; err is for cancellation and for a worker that
// could not run.
func prepare(ctx context.Context, lang backend.Language, src string, s *stripper) (prepared, *backend.Failure, error) {
	if lang != backend.TypeScript {
		return prepared{program: src}, nil, nil
	}
	if err := checkProgram(src); err != nil {
		return prepared{}, &backend.Failure{Kind: backend.FailureException, Message: "SyntaxError: " + ProgramFile(lang) + ":" + err.Error()}, nil
	}
	res, err := s.strip(ctx, src)
	if err != nil {
		var sf *errStripFailed
		if errors.As(err, &sf) {
			return prepared{}, &backend.Failure{Kind: backend.FailureException, Message: "SyntaxError: " + ProgramFile(lang) + ": " + sf.msg}, nil
		}
		return prepared{}, nil, err
	}
	if len(res.Errors) > 0 {
		var msgs []string
		for _, e := range res.Errors {
			if e.Line == 0 {
				msgs = append(msgs, e.Text)
				continue
			}
			msgs = append(msgs, fmt.Sprintf("%s:%d:%d: %s", ProgramFile(lang), e.Line, e.Column, e.Text))
		}
		msg := "SyntaxError: " + strings.Join(msgs, "; ")
		if staticImport.MatchString(src) {
			msg += ` (a program is the body of an async function: static "import" is not available; use "const fs = await import('node:fs')")`
		}
		return prepared{}, &backend.Failure{Kind: backend.FailureException, Message: msg}, nil
	}
	return prepared{program: res.Program, sourceMap: res.SourceMap}, nil, nil
}

// stripTS type-strips a TypeScript program with esbuild. It runs in a
// type-strip worker, never in the host process (see stripper): esbuild
// cannot bound its own recursion. Error positions are the model's own.
func stripTS(src string) stripResponse {
	res := api.Transform(wrapperHead+src+"\n})", api.TransformOptions{
		Loader:     api.LoaderTS,
		Sourcefile: ProgramFile(backend.TypeScript),
		Sourcemap:  api.SourceMapExternal,
		Target:     api.ES2022,
		LogLevel:   api.LogLevelSilent,
	})
	if len(res.Errors) > 0 {
		lines := strings.Count(src, "\n") + 1
		var out stripResponse
		for _, e := range res.Errors {
			if e.Location == nil {
				out.Errors = append(out.Errors, stripErrMsg{Text: e.Text})
				continue
			}
			line := e.Location.Line - 1 // undo the wrapper line
			col := e.Location.Column + 1
			if line < 1 {
				line, col = 1, 1
			}
			if line > lines {
				line, col = lines, 1
			}
			out.Errors = append(out.Errors, stripErrMsg{Line: line, Column: col, Text: e.Text})
		}
		return out
	}
	sm, err := shiftSourceMap(res.Map, -1)
	if err != nil {
		// The map is a debugging aid; a program without one still runs,
		// with stack positions in the stripped code.
		sm = ""
	}
	return stripResponse{Program: string(res.Code), SourceMap: sm}
}

// shiftSourceMap moves every original-line position of a v3 source map by
// delta lines, dropping segments that land before the first line, and drops
// sourcesContent.
func shiftSourceMap(raw []byte, delta int) (string, error) {
	var m struct {
		Version  int      `json:"version"`
		Sources  []string `json:"sources"`
		Names    []string `json:"names"`
		Mappings string   `json:"mappings"`
	}
	if err := json.Unmarshal(raw, &m); err != nil {
		return "", err
	}
	var out strings.Builder
	var prevSrc, prevLine, prevCol, prevName int // absolute, running over the input
	var wSrc, wLine, wCol, wName int             // absolute, running over the output
	for li, line := range strings.Split(m.Mappings, ";") {
		if li > 0 {
			out.WriteByte(';')
		}
		genCol, wGenCol := 0, 0
		first := true
		for _, seg := range strings.Split(line, ",") {
			if seg == "" {
				continue
			}
			f, err := decodeVLQ(seg)
			if err != nil {
				return "", err
			}
			genCol += f[0]
			if len(f) < 4 {
				continue // unmapped segment: drop
			}
			prevSrc += f[1]
			prevLine += f[2]
			prevCol += f[3]
			hasName := len(f) >= 5
			if hasName {
				prevName += f[4]
			}
			line := prevLine + delta
			if line < 0 {
				continue
			}
			if !first {
				out.WriteByte(',')
			}
			first = false
			fields := []int{genCol - wGenCol, prevSrc - wSrc, line - wLine, prevCol - wCol}
			wGenCol, wSrc, wLine, wCol = genCol, prevSrc, line, prevCol
			if hasName {
				fields = append(fields, prevName-wName)
				wName = prevName
			}
			for _, v := range fields {
				encodeVLQ(&out, v)
			}
		}
	}
	m.Mappings = out.String()
	b, err := json.Marshal(m)
	return string(b), err
}

const b64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"

func decodeVLQ(s string) ([]int, error) {
	var out []int
	value, shift := 0, 0
	for i := 0; i < len(s); i++ {
		d := strings.IndexByte(b64, s[i])
		if d < 0 {
			return nil, fmt.Errorf("source map: bad base64 digit %q", s[i])
		}
		value += (d & 31) << shift
		if d&32 != 0 {
			shift += 5
			if shift > 30 {
				return nil, fmt.Errorf("source map: VLQ overflow")
			}
			continue
		}
		if value&1 != 0 {
			out = append(out, -(value >> 1))
		} else {
			out = append(out, value>>1)
		}
		value, shift = 0, 0
	}
	if shift != 0 {
		return nil, fmt.Errorf("source map: truncated VLQ")
	}
	return out, nil
}

func encodeVLQ(b *strings.Builder, v int) {
	u := v << 1
	if v < 0 {
		u = (-v << 1) | 1
	}
	for {
		d := u & 31
		u >>= 5
		if u > 0 {
			d |= 32
		}
		b.WriteByte(b64[d])
		if u == 0 {
			return
		}
	}
}
