package manifest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// MCPServer is one entry of a manifest's "mcpServers": an MCP server whose
// tools become tools here, named "<server>__<tool>". It is the shape agent
// configurations use: a stdio server is a command with args and env, a
// streamable HTTP server a url with headers.
type MCPServer struct {
	// Type is "stdio", "http" or "streamable-http" when the manifest says
	// so, otherwise the one the other fields imply.
	Type string `json:"type,omitempty"`
	// Command, Args and Env start a stdio server: the command runs with the
	// host's environment plus Env, in its own process group.
	Command string            `json:"command,omitempty"`
	Args    []string          `json:"args,omitempty"`
	Env     map[string]string `json:"env,omitempty"`
	// URL and Headers reach a streamable HTTP server; the headers go with
	// every request.
	URL     string            `json:"url,omitempty"`
	Headers map[string]string `json:"headers,omitempty"`
	// TimeoutMs bounds one tool call in milliseconds; 0 means
	// DefaultTimeout.
	TimeoutMs int `json:"timeoutMs,omitempty"`
}

// Transports of an MCPServer.
const (
	TransportStdio = "stdio"
	TransportHTTP  = "http"
)

// ToolNameSeparator joins a server's name and its tool's name.
const ToolNameSeparator = "__"

// MaxServerNameBytes bounds the name of an MCP server in a manifest.
const MaxServerNameBytes = 64

// Transport is TransportStdio or TransportHTTP.
func (s MCPServer) Transport() string {
	if s.URL != "" {
		return TransportHTTP
	}
	return TransportStdio
}

// Timeout is the wall time of one call.
func (s MCPServer) Timeout() time.Duration {
	if s.TimeoutMs == 0 {
		return DefaultTimeout
	}
	return time.Duration(s.TimeoutMs) * time.Millisecond
}

// mcpServerWire is an entry as written: pointers tell absent from empty.
type mcpServerWire struct {
	Type      *string           `json:"type"`
	Command   *string           `json:"command"`
	Args      []string          `json:"args"`
	Env       map[string]string `json:"env"`
	URL       *string           `json:"url"`
	Headers   map[string]string `json:"headers"`
	TimeoutMs *int              `json:"timeoutMs"`
}

// reservedHeaders are set by the transport; a manifest may not replace them.
var reservedHeaders = []string{"Accept", "Content-Length", "Content-Type", "Host", "Mcp-Protocol-Version", "Mcp-Session-Id", "Last-Event-Id"}

// parseMCPServers decodes and checks a manifest's "mcpServers" object.
// Every error names the server and the field. ${VAR} and ${VAR:-default}
// in command, args, env values, url and header values are replaced by the
// host's environment (getenv); "./" at the start of command or an arg is
// resolved against dir when dir is not empty.
func parseMCPServers(raw json.RawMessage, getenv func(string) (string, bool), dir string) (map[string]MCPServer, error) {
	if len(bytes.TrimSpace(raw)) == 0 || bytes.Equal(bytes.TrimSpace(raw), []byte("null")) {
		return nil, nil
	}
	var entries map[string]json.RawMessage
	if err := json.Unmarshal(raw, &entries); err != nil {
		return nil, fmt.Errorf("mcpServers: must be an object mapping server names to servers: %v", typeError(err))
	}
	names := make([]string, 0, len(entries))
	for n := range entries {
		names = append(names, n)
	}
	slices.Sort(names)
	out := make(map[string]MCPServer, len(entries))
	for _, name := range names {
		s, err := parseMCPServer(name, entries[name], getenv, dir)
		if err != nil {
			return nil, fmt.Errorf("mcpServers %q: %w", name, err)
		}
		out[name] = s
	}
	return out, nil
}

func parseMCPServer(name string, raw json.RawMessage, getenv func(string) (string, bool), dir string) (MCPServer, error) {
	if err := checkServerName(name); err != nil {
		return MCPServer{}, err
	}
	if t := bytes.TrimSpace(raw); len(t) == 0 || t[0] != '{' {
		return MCPServer{}, errors.New(`must be an object: {"command": "...", "args": [...], "env": {...}} or {"url": "https://...", "headers": {...}}`)
	}
	var w mcpServerWire
	if err := strictDecode(raw, &w); err != nil {
		return MCPServer{}, typeError(err)
	}
	var s MCPServer
	expand := func(field, v string) (string, error) {
		out, err := expandEnv(v, getenv)
		if err != nil {
			return "", fmt.Errorf("%s: %w", field, err)
		}
		return out, nil
	}
	var err error
	if w.Type != nil {
		switch *w.Type {
		case "stdio":
			s.Type = TransportStdio
		case "http", "streamable-http", "streamableHttp":
			s.Type = TransportHTTP
		case "sse":
			return s, errors.New(`type: "sse" (the deprecated HTTP+SSE transport) is not supported; use the server's streamable HTTP endpoint ("type": "http")`)
		default:
			return s, fmt.Errorf(`type: %q is not a transport; use "stdio" or "http"`, *w.Type)
		}
	}
	switch {
	case w.Command == nil && w.URL == nil:
		return s, errors.New(`needs "command" (a stdio server) or "url" (a streamable HTTP server)`)
	case w.Command != nil && w.URL != nil:
		return s, errors.New(`has both "command" and "url"; a server is either a command (stdio) or a url (streamable HTTP)`)
	case w.Command != nil:
		if s.Type == TransportHTTP {
			return s, errors.New(`type: "http" needs "url", not "command"`)
		}
		if w.Headers != nil {
			return s, errors.New(`headers: only a "url" server takes headers; a command takes "env"`)
		}
		if s.Command, err = expand("command", *w.Command); err != nil {
			return s, err
		}
		if strings.TrimSpace(s.Command) == "" {
			return s, errors.New("command: is empty")
		}
		if strings.ContainsRune(s.Command, 0) {
			return s, errors.New("command: contains a NUL byte")
		}
		s.Command = resolveRelative(s.Command, dir)
		for i, a := range w.Args {
			field := fmt.Sprintf("args[%d]", i)
			if a, err = expand(field, a); err != nil {
				return s, err
			}
			if strings.ContainsRune(a, 0) {
				return s, fmt.Errorf("%s: contains a NUL byte", field)
			}
			s.Args = append(s.Args, resolveRelative(a, dir))
		}
		if len(w.Env) > 0 {
			s.Env = make(map[string]string, len(w.Env))
		}
		for k, v := range w.Env {
			if k == "" || strings.ContainsAny(k, "=\x00") {
				return s, fmt.Errorf("env: %q is not a variable name", k)
			}
			field := fmt.Sprintf("env.%s", k)
			if v, err = expand(field, v); err != nil {
				return s, err
			}
			if strings.ContainsRune(v, 0) {
				return s, fmt.Errorf("%s: contains a NUL byte", field)
			}
			s.Env[k] = v
		}
	default:
		if s.Type == TransportStdio {
			return s, errors.New(`type: "stdio" needs "command", not "url"`)
		}
		if w.Args != nil || w.Env != nil {
			return s, errors.New(`args and env: only a "command" server takes them; a url takes "headers"`)
		}
		if s.URL, err = expand("url", *w.URL); err != nil {
			return s, err
		}
		u, perr := url.Parse(s.URL)
		switch {
		case perr != nil:
			return s, fmt.Errorf("url: %v", perr)
		case u.Scheme != "http" && u.Scheme != "https":
			return s, fmt.Errorf("url: %q must start with https:// or http://", s.URL)
		case u.Host == "":
			return s, fmt.Errorf("url: %q has no host", s.URL)
		}
		if len(w.Headers) > 0 {
			s.Headers = make(map[string]string, len(w.Headers))
		}
		for k, v := range w.Headers {
			if !validHeaderName(k) {
				return s, fmt.Errorf("headers: %q is not a header name", k)
			}
			for _, r := range reservedHeaders {
				if strings.EqualFold(k, r) {
					return s, fmt.Errorf("headers: %q is set by the transport and cannot be replaced", k)
				}
			}
			field := "headers." + k
			if v, err = expand(field, v); err != nil {
				return s, err
			}
			if strings.ContainsAny(v, "\r\n\x00") {
				return s, fmt.Errorf("%s: contains a line break or NUL", field)
			}
			s.Headers[k] = v
		}
	}
	if s.Type == "" {
		s.Type = s.Transport()
	}
	if w.TimeoutMs != nil {
		s.TimeoutMs = *w.TimeoutMs
		if err := checkTimeout(name, s.TimeoutMs); err != nil {
			// checkTimeout names a tool; the caller names the server.
			return s, errors.New(strings.TrimPrefix(err.Error(), fmt.Sprintf("tool %q: ", name)))
		}
	}
	return s, nil
}

// checkServerName accepts a name that can start a tool name: 1 to
// MaxServerNameBytes bytes of UTF-8 without spaces or control characters.
func checkServerName(name string) error {
	switch {
	case name == "":
		return errors.New("the server name is empty")
	case len(name) > MaxServerNameBytes:
		return fmt.Errorf("the server name is longer than %d bytes", MaxServerNameBytes)
	case !utf8.ValidString(name):
		return errors.New("the server name is not valid UTF-8")
	}
	for _, r := range name {
		if unicode.IsSpace(r) || unicode.IsControl(r) || !unicode.IsPrint(r) {
			return fmt.Errorf("the server name contains %q; use letters, digits, - and _", r)
		}
	}
	return nil
}

// validHeaderName reports whether k is an HTTP token (RFC 9110 §5.6.2).
func validHeaderName(k string) bool {
	if k == "" {
		return false
	}
	for i := 0; i < len(k); i++ {
		c := k[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		case strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0:
		default:
			return false
		}
	}
	return true
}

// expandEnv replaces ${NAME} with the variable's value and ${NAME:-word}
// with its value or, when it is unset or empty, word. An unset variable
// without a default is an error, so a missing secret fails the start
// rather than sending an empty header. Any other "$" is kept as written.
func expandEnv(s string, getenv func(string) (string, bool)) (string, error) {
	if !strings.Contains(s, "${") {
		return s, nil
	}
	var b strings.Builder
	for {
		i := strings.Index(s, "${")
		if i < 0 {
			b.WriteString(s)
			return b.String(), nil
		}
		b.WriteString(s[:i])
		end := strings.IndexByte(s[i:], '}')
		if end < 0 {
			return "", fmt.Errorf("%q has ${ without a closing }", s)
		}
		expr := s[i+2 : i+end]
		name, def, hasDef := strings.Cut(expr, ":-")
		if !envName(name) {
			return "", fmt.Errorf("${%s}: %q is not a variable name", expr, name)
		}
		v, ok := getenv(name)
		switch {
		case ok && v != "":
			b.WriteString(v)
		case hasDef:
			b.WriteString(def)
		case ok:
			// set but empty, no default: empty
		default:
			return "", fmt.Errorf("environment variable %s is not set (write ${%s:-default} for a default)", name, name)
		}
		s = s[i+end+1:]
	}
}

func envName(s string) bool {
	if s == "" || '0' <= s[0] && s[0] <= '9' {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c == '_' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9') {
			return false
		}
	}
	return true
}

// resolveRelative resolves a "./" path against dir.
func resolveRelative(arg, dir string) string {
	if dir != "" && strings.HasPrefix(arg, "./") {
		return filepath.Join(dir, arg)
	}
	return arg
}

// typeError rewrites encoding/json's errors to name the field as written.
func typeError(err error) error {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		field := te.Field
		if field == "" {
			return fmt.Errorf("expected %s, got a JSON %s", jsonKind(te.Type.String()), te.Value)
		}
		return fmt.Errorf("%s: expected %s, got a JSON %s", field, jsonKind(te.Type.String()), te.Value)
	}
	var se *json.SyntaxError
	if errors.As(err, &se) {
		return fmt.Errorf("not valid JSON: %v", se)
	}
	msg := strings.TrimPrefix(err.Error(), "json: ")
	return errors.New(msg)
}

// jsonKind names a Go type of the wire struct as its JSON kind.
func jsonKind(goType string) string {
	switch {
	case strings.HasSuffix(goType, "string") && strings.HasPrefix(goType, "map["):
		return "an object of strings"
	case strings.HasPrefix(goType, "[]"):
		return "an array of strings"
	case strings.HasSuffix(goType, "string"):
		return "a string"
	case strings.HasSuffix(goType, "int"):
		return "an integer"
	}
	return goType
}

// lookupEnv is the host's environment.
func lookupEnv(name string) (string, bool) { return os.LookupEnv(name) }
