package manifest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/maphash"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/dsh-container/dsh-container/registry"
)

// upstreamTool is one tool a server listed: the registry tool made of it
// — its description and schemas are the only copy of the listing the host
// keeps — and the size and hash of its JSON as listed, which the next
// listing compares against.
type upstreamTool struct {
	name string // the server's name for it
	size int
	hash uint64
	rt   registry.Tool
}

// toolSeed seeds the hashes that tell a listed tool unchanged: random per
// process, so a server cannot aim for a collision.
var toolSeed = maphash.MakeSeed()

func toolHash(raw []byte) uint64 { return maphash.Bytes(toolSeed, raw) }

// protocolWithMeta is the first MCP version whose requests carry the
// client's identity in _meta (SEP-2575).
const protocolWithMeta = "2026-07-28"

// listTools lists every tool of the server on c, page by page, within the
// bounds. Tools identical to the current list's (base) are that list's
// tools again: neither copied nor converted a second time.
func (u *upstream) listTools(ctx context.Context, c *conn, base []*upstreamTool) ([]*upstreamTool, error) {
	index := make(map[string]*upstreamTool, len(base))
	for _, t := range base {
		index[t.name] = t
	}
	var meta map[string]any
	if res := c.sess.InitializeResult(); res != nil && res.ProtocolVersion >= protocolWithMeta {
		meta = map[string]any{
			mcp.MetaKeyProtocolVersion:    res.ProtocolVersion,
			mcp.MetaKeyClientInfo:         u.impl,
			mcp.MetaKeyClientCapabilities: map[string]any{},
		}
	}
	var tools []*upstreamTool
	size := 0
	cursor := ""
	for n := 0; ; n++ {
		if n == maxListPages {
			return nil, fmt.Errorf("the tool list has more than %d pages", maxListPages)
		}
		params := map[string]any{}
		if cursor != "" {
			params["cursor"] = cursor
		}
		if meta != nil {
			params["_meta"] = meta
		}
		p, err := json.Marshal(params)
		if err != nil {
			return nil, err
		}
		r := c.lister.listPage(ctx, page{params: p, base: index, prior: len(tools), budget: MaxServerListBytes - size, imp: u.importTool})
		if r.err != nil {
			return nil, r.err
		}
		if size += r.bytes; size > MaxServerListBytes {
			return nil, fmt.Errorf("its tool list is larger than %d bytes (MaxServerListBytes)", MaxServerListBytes)
		}
		tools = append(tools, r.tools...)
		if r.cursor == "" {
			return tools, nil
		}
		cursor = r.cursor
	}
}

// importTool reads a listed tool and makes its registry tool: named
// "<server>__<tool>", with its input schema, output schema, description
// and annotations, each checked against the schema bounds first; a call
// goes to the server. What did not change from old (the tool of the same
// name in the current list) is old's: a tool whose description changed
// shares its schemas with the list before, and the other way round.
func (u *upstream) importTool(raw []byte, old *upstreamTool) (*upstreamTool, error) {
	if !json.Valid(raw) {
		return nil, errors.New("it lists a tool that is not valid JSON")
	}
	var name, desc string
	var nameOK bool
	var in, out, ann []byte
	isObject, err := eachMember(raw, func(k, v []byte) error {
		switch string(k) {
		case "name":
			name, nameOK = jsonString(v)
		case "description":
			if old != nil && jsonStringIs(v, old.rt.Description) {
				desc = old.rt.Description
			} else if s, ok := jsonString(v); ok {
				desc = s
			}
		case "inputSchema":
			in = v
		case "outputSchema":
			out = v
		case "annotations":
			ann = v
		}
		return nil
	})
	if !isObject {
		return nil, errors.New("it lists a tool that is not a JSON object")
	}
	if err != nil {
		return nil, err
	}
	if !nameOK {
		name = ""
	}
	if err := checkUpstreamToolName(name); err != nil {
		return nil, err
	}
	rt := registry.Tool{
		Name:        u.name + ToolNameSeparator + name,
		Description: desc,
		Parameters:  json.RawMessage(`{"type":"object"}`),
		Source:      u.name,
	}
	// The schemas get one allocation of their own (nothing keeps raw),
	// except those that are old's, byte for byte.
	var prev [3]json.RawMessage
	if old != nil {
		prev = [3]json.RawMessage{old.rt.Parameters, old.rt.OutputSchema, old.rt.Annotations}
	}
	parts := [3]struct {
		what string
		v    []byte
		dst  *json.RawMessage
	}{{"inputSchema", in, &rt.Parameters}, {"outputSchema", out, &rt.OutputSchema}, {"annotations", ann, &rt.Annotations}}
	n := 0
	for i, f := range parts {
		switch {
		case f.v == nil || string(f.v) == "null":
			parts[i].v = nil
		case prev[i] != nil && bytes.Equal(prev[i], f.v):
			*f.dst, parts[i].v = prev[i], nil
		default:
			if err := checkSchema(f.v); err != nil {
				return nil, fmt.Errorf("tool %q: its %s is over a bound: %w", name, f.what, err)
			}
			n += len(f.v)
		}
	}
	buf := make([]byte, 0, n)
	for _, f := range parts {
		if f.v != nil {
			start := len(buf)
			buf = append(buf, f.v...)
			*f.dst = buf[start:len(buf):len(buf)]
		}
	}
	rt.ExecuteOutput = func(ctx context.Context, exec registry.Execution) (registry.Output, error) {
		return u.call(ctx, name, exec.Arguments)
	}
	// The registry's own checks, now, so that a bad tool fails the listing.
	if err := registry.New().Register(rt); err != nil {
		return nil, fmt.Errorf("tool %q: %w", name, err)
	}
	return &upstreamTool{name: name, size: len(raw), hash: toolHash(raw), rt: rt}, nil
}

// checkUpstreamToolName checks a listed tool's name: 1 to
// MaxUpstreamToolNameBytes bytes of UTF-8 without control characters.
func checkUpstreamToolName(name string) error {
	switch {
	case name == "":
		return errors.New("it lists a tool without a name")
	case len(name) > MaxUpstreamToolNameBytes:
		return fmt.Errorf("it lists a tool whose name is longer than %d bytes", MaxUpstreamToolNameBytes)
	case !utf8.ValidString(name):
		return errors.New("it lists a tool whose name is not valid UTF-8")
	case strings.IndexFunc(name, func(r rune) bool { return unicode.IsControl(r) || !unicode.IsPrint(r) && !unicode.IsSpace(r) }) >= 0:
		return fmt.Errorf("it lists a tool named %q, with control characters", name)
	}
	return nil
}
