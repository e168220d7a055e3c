package tsprep

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"

	"github.com/evanw/esbuild/pkg/api"
)

// SourceFile is the file name a TypeScript program has in error messages,
// source maps and the runner's stack traces.
const SourceFile = "program.ts"

var staticImport = regexp.MustCompile(`(?m)^\s*import\s+[\w*{]`)

// Prepared is a program ready for the runner: JavaScript, and a source map
// whose positions are the model's own lines ("" when there is none).
type Prepared struct {
	Program   string
	SourceMap string
}

// A ProgramError is the program's own fault: it does not parse, nests
// deeper than MaxNesting, is not erasable TypeScript, or broke a worker
// limit. Message is the exception the program gets ("SyntaxError: ...").
type ProgramError struct{ Message string }

func (e *ProgramError) Error() string { return e.Message }

// A WorkerError is a failure of the worker machinery, not of the program:
// no worker could start, a worker did not answer its handshake (see
// ServeWorkerIfRequested), died without naming a limit or answered badly.
// A caller classes it as unavailable.
type WorkerError struct{ err error }

func (e *WorkerError) Error() string { return e.err.Error() }
func (e *WorkerError) Unwrap() error { return e.err }

func workerError(format string, args ...any) error {
	return &WorkerError{fmt.Errorf(format, args...)}
}

// wrapperHead turns the model's body into an async function expression.
// It sits on its own line so the body's line N is line N+1 of the wrapped
// text; shiftSourceMap undoes that offset so the map points at the
// model's own lines.
const wrapperHead = "(async () => {\n"

// Prepare checks a TypeScript program and strips its types in a worker
// process. A program that does not parse, nests too deeply, is not
// erasable or breaks a worker limit is a *ProgramError; a worker that could
// not run is a *WorkerError; a cancelled ctx returns its error. The body
// becomes an async function expression, so top-level await and return work.
func (s *Stripper) Prepare(ctx context.Context, src string) (Prepared, error) {
	if err := checkProgram(src); err != nil {
		return Prepared{}, &ProgramError{"SyntaxError: " + SourceFile + ":" + err.Error()}
	}
	res, err := s.strip(ctx, src)
	if err != nil {
		var sf *errStripFailed
		if errors.As(err, &sf) {
			return Prepared{}, &ProgramError{"SyntaxError: " + SourceFile + ": " + sf.msg}
		}
		return Prepared{}, err
	}
	if len(res.Errors) > 0 {
		var msgs []string
		for _, e := range res.Errors {
			if e.Line == 0 {
				msgs = append(msgs, e.Text)
				continue
			}
			msgs = append(msgs, fmt.Sprintf("%s:%d:%d: %s", SourceFile, e.Line, e.Column, e.Text))
		}
		msg := "SyntaxError: " + strings.Join(msgs, "; ")
		if staticImport.MatchString(src) {
			msg += ` (a program is the body of an async function: static "import" is not available; use "const fs = await import('node:fs')")`
		}
		return Prepared{}, &ProgramError{msg}
	}
	return Prepared{Program: res.Program, SourceMap: res.SourceMap}, nil
}

// stripTS type-strips a TypeScript program with esbuild. It runs in a
// type-strip worker, never in the host process (see stripper): esbuild
// cannot bound its own recursion. Error positions are the model's own.
func stripTS(src string) stripResponse {
	res := api.Transform(wrapperHead+src+"\n})", api.TransformOptions{
		Loader:     api.LoaderTS,
		Sourcefile: SourceFile,
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
