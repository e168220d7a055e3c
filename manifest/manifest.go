package manifest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
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
	// TimeoutMs bounds one call's wall time in milliseconds; 0 means
	// DefaultTimeout. See the package doc.
	TimeoutMs int `json:"timeoutMs,omitempty"`
	// MaxOutputBytes caps the stdout one call returns; 0 means
	// DefaultMaxOutputBytes. See the package doc.
	MaxOutputBytes int `json:"maxOutputBytes,omitempty"`
	// Annotations are optional hints in MCP's ToolAnnotations shape
	// (annotations.go); unknown fields are errors.
	Annotations *Annotations `json:"annotations,omitempty"`
}

// UnmarshalJSON decodes a manifest entry strictly (unknown fields are
// errors) and checks its limits where they are written, so that an
// explicit 0 is an error rather than a silent default.
func (t *Tool) UnmarshalJSON(data []byte) error {
	type fields Tool // the same fields without this method
	var w struct {
		fields
		TimeoutMs      *int `json:"timeoutMs"`
		MaxOutputBytes *int `json:"maxOutputBytes"`
	}
	if err := strictDecode(data, &w); err != nil {
		return err
	}
	*t = Tool(w.fields)
	if w.TimeoutMs != nil {
		t.TimeoutMs = *w.TimeoutMs
		if err := checkTimeout(t.Name, t.TimeoutMs); err != nil {
			return err
		}
	}
	if w.MaxOutputBytes != nil {
		t.MaxOutputBytes = *w.MaxOutputBytes
		if err := checkMaxOutput(t.Name, t.MaxOutputBytes); err != nil {
			return err
		}
	}
	return nil
}

// Manifest is a parsed manifest.
type Manifest struct {
	Tools []Tool `json:"tools"`
	// MCPServers are the MCP servers whose tools the manifest adds, by
	// name (see MCPServer and Open).
	MCPServers map[string]MCPServer `json:"mcpServers,omitempty"`
}

// manifestWire is a manifest as written; mcpServers is decoded entry by
// entry so that an error names the server.
type manifestWire struct {
	Tools      []Tool          `json:"tools"`
	MCPServers json.RawMessage `json:"mcpServers"`
}

// ReservedName cannot be a manifest tool: it is Code Mode's transport.
const ReservedName = "run_code"

// Options select what a manifest must provide.
type Options struct {
	// RequireCommand rejects tools without a command (for `run`).
	RequireCommand bool
	// AllowBare accepts a bare array of tools or a single tool object.
	AllowBare bool
	// AllowMCPServers accepts "mcpServers". Without it a manifest naming
	// MCP servers is an error: the caller would not start them, and their
	// tools must not vanish silently.
	AllowMCPServers bool
}

// Load reads and parses the manifest at path ("-" for stdin is not
// accepted: stdin may carry the program).
func Load(path string, opts Options) (*Manifest, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("%w: cannot read tool manifest: %w", errdefs.ErrInvalidArgument, err)
	}
	// Command elements written "./x" are relative to the manifest's folder,
	// so a manifest and its scripts travel together.
	dir := filepath.Dir(path)
	m, err := parse(data, opts, dir)
	if err != nil {
		return nil, fmt.Errorf("tool manifest %s: %w", path, err)
	}
	for i := range m.Tools {
		for j, arg := range m.Tools[i].Command {
			if strings.HasPrefix(arg, "./") {
				m.Tools[i].Command[j] = filepath.Join(dir, arg)
			}
		}
	}
	return m, nil
}

// Parse parses manifest bytes. ${VAR} references in MCP servers are
// expanded from the host's environment; "./" paths are kept as written.
func Parse(data []byte, opts Options) (*Manifest, error) {
	return parse(data, opts, "")
}

func parse(data []byte, opts Options, dir string) (*Manifest, error) {
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
		_, hasTools := probe["tools"]
		_, hasServers := probe["mcpServers"]
		if hasTools || hasServers {
			var w manifestWire
			if err := strictDecode(trimmed, &w); err != nil {
				return nil, invalid("%v", err)
			}
			m.Tools = w.Tools
			if hasServers && !opts.AllowMCPServers {
				return nil, invalid("mcpServers: this command does not connect to MCP servers; use dsh-container mcp, run or serve, or remove \"mcpServers\"")
			}
			servers, err := parseMCPServers(w.MCPServers, lookupEnv, dir)
			if err != nil {
				return nil, invalid("%v", err)
			}
			m.MCPServers = servers
		} else if _, ok := probe["name"]; ok && opts.AllowBare {
			var t Tool
			if err := strictDecode(trimmed, &t); err != nil {
				return nil, invalid("%v", err)
			}
			m.Tools = []Tool{t}
		} else {
			return nil, invalid("expected an object with a \"tools\" array or \"mcpServers\"")
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
