// Package manifest reads tool manifests — the MCP tool shape plus a
// command — and runs command tools.
//
// A manifest is {"tools":[{"name","description","inputSchema","command":[argv...]}]}.
// For SDK rendering a bare JSON array of tools or a single tool object is
// accepted too, and "command" may be absent. A command tool runs argv
// directly (no shell) with the call's JSON arguments on stdin and the host
// process's environment; its stdout is the result text and a non-zero exit
// rejects the call with its stderr as the message. Command elements that
// start with "./" are resolved against the manifest's folder.
package manifest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"unicode/utf8"

	"github.com/containerd/errdefs"
)

// Tool is one manifest entry.
type Tool struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	InputSchema json.RawMessage `json:"inputSchema,omitempty"`
	Command     []string        `json:"command,omitempty"`
}

// Manifest is a parsed manifest.
type Manifest struct {
	Tools []Tool `json:"tools"`
}

// ReservedName cannot be a manifest tool: it is Code Mode's transport.
const ReservedName = "run_code"

// Options select what a manifest must provide.
type Options struct {
	// RequireCommand rejects tools without a command (for `run`).
	RequireCommand bool
	// AllowBare accepts a bare array of tools or a single tool object.
	AllowBare bool
}

// Load reads and parses the manifest at path ("-" for stdin is not
// accepted: stdin may carry the program).
func Load(path string, opts Options) (*Manifest, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("%w: cannot read tool manifest: %w", errdefs.ErrInvalidArgument, err)
	}
	m, err := Parse(data, opts)
	if err != nil {
		return nil, fmt.Errorf("tool manifest %s: %w", path, err)
	}
	// Command elements written "./x" are relative to the manifest's folder,
	// so a manifest and its scripts travel together.
	dir := filepath.Dir(path)
	for i := range m.Tools {
		for j, arg := range m.Tools[i].Command {
			if strings.HasPrefix(arg, "./") {
				m.Tools[i].Command[j] = filepath.Join(dir, arg)
			}
		}
	}
	return m, nil
}

// Parse parses manifest bytes.
func Parse(data []byte, opts Options) (*Manifest, error) {
	invalid := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s", errdefs.ErrInvalidArgument, fmt.Sprintf(format, args...))
	}
	trimmed := bytes.TrimSpace(data)
	var m Manifest
	switch {
	case len(trimmed) == 0:
		return nil, invalid("empty file; expected {\"tools\": [...]}")
	case trimmed[0] == '[' && opts.AllowBare:
		if err := strictDecode(trimmed, &m.Tools); err != nil {
			return nil, invalid("%v", err)
		}
	case trimmed[0] == '{':
		var probe map[string]json.RawMessage
		if err := json.Unmarshal(trimmed, &probe); err != nil {
			return nil, invalid("not valid JSON: %v", err)
		}
		if _, ok := probe["tools"]; ok {
			if err := strictDecode(trimmed, &m); err != nil {
				return nil, invalid("%v", err)
			}
		} else if _, ok := probe["name"]; ok && opts.AllowBare {
			var t Tool
			if err := strictDecode(trimmed, &t); err != nil {
				return nil, invalid("%v", err)
			}
			m.Tools = []Tool{t}
		} else {
			return nil, invalid("expected an object with a \"tools\" array")
		}
	default:
		return nil, invalid("expected a JSON object {\"tools\": [...]}")
	}
	seen := map[string]bool{}
	for i, t := range m.Tools {
		where := fmt.Sprintf("tools[%d]", i)
		switch {
		case t.Name == "":
			return nil, invalid("%s: name is required", where)
		case !utf8.ValidString(t.Name):
			return nil, invalid("%s: name is not valid UTF-8", where)
		case t.Name == ReservedName:
			return nil, invalid("%s: %q is reserved for Code Mode's own transport; rename the tool", where, t.Name)
		case seen[t.Name]:
			return nil, invalid("%s: duplicate tool name %q", where, t.Name)
		}
		seen[t.Name] = true
		if len(t.InputSchema) > 0 && !json.Valid(t.InputSchema) {
			return nil, invalid("%s (%s): inputSchema is not JSON", where, t.Name)
		}
		if opts.RequireCommand && len(t.Command) == 0 {
			return nil, invalid("%s (%s): command is required (an argv array, e.g. [\"/usr/bin/jq\", \".\"])", where, t.Name)
		}
		if len(t.Command) > 0 && t.Command[0] == "" {
			return nil, invalid("%s (%s): command[0] is empty", where, t.Name)
		}
	}
	return &m, nil
}

func strictDecode(data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if dec.More() {
		return errors.New("trailing data after the manifest")
	}
	return nil
}

// MaxOutputBytes caps what a command tool may print.
const MaxOutputBytes = 8 << 20

// Exec runs a command tool with args on stdin. It returns stdout, or an
// error carrying stderr when the command fails.
func Exec(ctx context.Context, t Tool, args json.RawMessage) (string, error) {
	if len(t.Command) == 0 {
		return "", fmt.Errorf("tool %q has no command", t.Name)
	}
	cmd := exec.CommandContext(ctx, t.Command[0], t.Command[1:]...)
	cmd.Stdin = bytes.NewReader(args)
	var stdout, stderr capped
	stdout.max, stderr.max = MaxOutputBytes, 64<<10
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.WaitDelay = 2e9
	err := cmd.Run()
	if ctx.Err() != nil {
		return "", fmt.Errorf("tool %q cancelled", t.Name)
	}
	if err != nil {
		msg := strings.TrimSpace(stderr.String())
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			if msg == "" {
				msg = fmt.Sprintf("tool %q exited with status %d", t.Name, ee.ExitCode())
			}
			return "", errors.New(msg)
		}
		return "", fmt.Errorf("tool %q: %w", t.Name, err)
	}
	if stdout.over {
		return "", fmt.Errorf("tool %q printed more than %d bytes", t.Name, MaxOutputBytes)
	}
	return strings.ToValidUTF8(stdout.String(), "\uFFFD"), nil
}

type capped struct {
	bytes.Buffer
	max  int
	over bool
}

func (c *capped) Write(p []byte) (int, error) {
	if room := c.max - c.Len(); room < len(p) {
		c.over = true
		if room > 0 {
			c.Buffer.Write(p[:room])
		}
		return len(p), nil
	}
	return c.Buffer.Write(p)
}
