package mcp

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"slices"
	"sync"

	"github.com/containerd/errdefs"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/dsh-container/dsh-container/backend"
	"github.com/dsh-container/dsh-container/registry"
)

// ToolSource provides the tools a Server offers when they can change
// while it runs (manifest.Toolset is one): Tools returns the current
// list, Subscribe calls fn after it changed and returns an unsubscribe
// function.
type ToolSource interface {
	Tools() []registry.Tool
	Subscribe(fn func()) (cancel func())
}

// staticTools is a ToolSource that never changes.
type staticTools []registry.Tool

func (s staticTools) Tools() []registry.Tool         { return slices.Clone(s) }
func (staticTools) Subscribe(func()) (cancel func()) { return func() {} }

// Option configures a Server.
type Option func(*options)

type options struct {
	mode     registry.Mode
	runtime  backend.Runtime
	source   ToolSource
	tools    []registry.Tool
	logger   *slog.Logger
	regOpts  []registry.Option
	version  string
	sessions int
	sdkView  registry.SDKView
	sdkLimit int
}

// WithMode selects what tools/list offers: registry.ModeCode (the
// default) only run_code, registry.ModeBoth run_code and the tools,
// registry.ModeNative only the tools.
func WithMode(m registry.Mode) Option { return func(o *options) { o.mode = m } }

// WithRuntime sets the code runtime run_code runs programs on; its
// language picks the SDK. Required unless the mode is native. The server
// does not close it.
func WithRuntime(rt backend.Runtime) Option { return func(o *options) { o.runtime = rt } }

// WithTools adds tools that never change.
func WithTools(tools ...registry.Tool) Option {
	return func(o *options) { o.tools = append(o.tools, tools...) }
}

// WithToolSource sets tools that may change while the server runs; each
// change is told to clients with notifications/tools/list_changed. Tools
// given WithTools come first.
func WithToolSource(src ToolSource) Option { return func(o *options) { o.source = src } }

// WithLogger sets the logger (default: discard).
func WithLogger(l *slog.Logger) Option { return func(o *options) { o.logger = l } }

// WithRegistryOptions adds options (hooks, guards, observers) to the
// registry every call goes through. Mode, runtime, logger, event and log
// sinks are the server's.
func WithRegistryOptions(opts ...registry.Option) Option {
	return func(o *options) { o.regOpts = append(o.regOpts, opts...) }
}

// WithSDK selects what run_code's description carries: registry.SDKFull
// (the default) the whole SDK, registry.SDKIndex the SDK index with
// describe_tools offered next to run_code, registry.SDKAuto the index when
// the full SDK would pass the auto threshold (WithSDKAutoThreshold,
// default registry.DefaultSDKAutoThreshold bytes). In both mode the native
// tools keep their own schemas either way.
func WithSDK(v registry.SDKView) Option { return func(o *options) { o.sdkView = v } }

// WithSDKAutoThreshold sets the full SDK size in bytes past which
// registry.SDKAuto offers the index; n <= 0 means the default.
func WithSDKAutoThreshold(n int) Option { return func(o *options) { o.sdkLimit = n } }

// WithVersion sets the version the server reports to clients.
func WithVersion(v string) Option { return func(o *options) { o.version = v } }

// WithMaxSessions bounds the MCP sessions Handler holds at once, stateless
// requests in flight included (default DefaultMaxSessions); a client that
// would open one more gets 503.
func WithMaxSessions(n int) Option { return func(o *options) { o.sessions = n } }

// DefaultMaxSessions is the default of WithMaxSessions.
const DefaultMaxSessions = 64

// Server is Code Mode served as an MCP server. It is safe for concurrent
// use; every session a transport opens shares its tools and runtime.
type Server struct {
	opts options
	log  *slog.Logger
	srv  *sdk.Server

	// ctx ends every call in flight when the server closes.
	ctx    context.Context
	cancel context.CancelCauseFunc
	unsub  func()

	// rebuild serialises refresh.
	rebuild sync.Mutex

	mu      sync.Mutex
	snap    *snapshot
	size    int                         // bytes of the tools snap's registry holds
	exposed map[string]registry.MCPTool // tools on the MCP server, by name
	adds    int                         // tools added to the MCP server so far

	// sessMu guards pending, the sessions Handler has admitted that are
	// not (yet) among the go-sdk server's sessions.
	sessMu  sync.Mutex
	pending int

	streams sync.Map // run_code call id → *progress
}

// snapshot is one version of the tool set: the registry calls go through
// and its assembly. A call keeps the snapshot it started with.
type snapshot struct {
	reg   *registry.Registry
	tools []registry.MCPTool
}

// errClosed is the cause of a call's context when the server closes.
var errClosed = errors.New("the MCP server is shutting down")

// New builds a Server. It fails (errdefs.ErrInvalidArgument) for an
// invalid mode, a tool the registry rejects, and (errdefs.
// ErrFailedPrecondition) for code or both mode without a runtime whose
// language has an SDK.
func New(opts ...Option) (*Server, error) {
	o := options{mode: registry.ModeCode, version: "dev", sessions: DefaultMaxSessions}
	for _, opt := range opts {
		opt(&o)
	}
	if o.logger == nil {
		o.logger = slog.New(slog.DiscardHandler)
	}
	mode, err := registry.ParseMode(string(o.mode))
	if err != nil {
		return nil, err
	}
	o.mode = mode
	if o.sdkView, err = registry.ParseSDKView(string(o.sdkView)); err != nil {
		return nil, err
	}
	if o.sessions <= 0 {
		return nil, fmt.Errorf("%w: max sessions %d must be positive", errdefs.ErrInvalidArgument, o.sessions)
	}
	if o.source == nil {
		o.source = staticTools(nil)
	}
	s := &Server{opts: o, log: o.logger, exposed: map[string]registry.MCPTool{}}
	s.ctx, s.cancel = context.WithCancelCause(context.Background())
	s.srv = sdk.NewServer(&sdk.Implementation{Name: "dsh-container", Title: "dsh-container Code Mode", Version: o.version}, &sdk.ServerOptions{
		Logger: o.logger,
		// Tools, with list changes; nothing else (no logging capability).
		Capabilities: &sdk.ServerCapabilities{Tools: &sdk.ToolCapabilities{ListChanged: true}},
	})
	if err := s.refresh(); err != nil {
		return nil, err
	}
	s.unsub = o.source.Subscribe(func() {
		if err := s.refresh(); err != nil {
			s.log.Error("the tool list changed but cannot be offered; the previous one stays", "err", err)
		}
	})
	return s, nil
}

// MCPServer is the go-sdk server, for transports this package does not
// wrap.
func (s *Server) MCPServer() *sdk.Server { return s.srv }

// Run serves one session over t (stdio: &sdk.StdioTransport{}) until the
// client disconnects or ctx is done.
func (s *Server) Run(ctx context.Context, t sdk.Transport) error {
	return s.srv.Run(ctx, t)
}

// Close aborts the calls in flight (their runs end with kind abort and
// their containers are removed by the runtime) and stops following the
// tool source. Sessions end when their transports do.
func (s *Server) Close() {
	s.cancel(errClosed)
	s.unsub()
}

// Tools returns what tools/list offers now, in MCP's tool shape.
func (s *Server) Tools() []registry.MCPTool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.snap.tools)
}

// register builds a registry of the current tools and returns it with the
// bytes of their descriptions and schemas.
func (s *Server) register() (*registry.Registry, int, error) {
	// The approver comes first: an Approver among the caller's options
	// replaces it.
	regOpts := append(append([]registry.Option{registry.WithApprover(elicitApprover{})}, s.opts.regOpts...),
		registry.WithMode(s.opts.mode),
		registry.WithSDK(s.opts.sdkView),
		registry.WithSDKAutoThreshold(s.opts.sdkLimit),
		registry.WithLogger(s.log),
		registry.WithEventSink(func(e registry.Event) {
			s.log.Debug("tool/code-dispatch", "parent_call_id", e.ParentCallID, "call_id", e.CallID, "tool", e.Tool, "is_error", e.IsError, "dropped", e.Dropped)
		}),
		registry.WithLogSink(func(callID string, e backend.LogEntry) {
			if p, ok := s.streams.Load(callID); ok {
				p.(*progress).push(e)
			}
		}),
	)
	if s.opts.runtime != nil {
		regOpts = append(regOpts, registry.WithRuntime(s.opts.runtime))
	}
	reg := registry.New(regOpts...)
	size := 0
	for _, t := range append(slices.Clone(s.opts.tools), s.opts.source.Tools()...) {
		if err := reg.Register(t); err != nil {
			return nil, 0, err
		}
		size += len(t.Description) + len(t.Parameters) + len(t.OutputSchema)
	}
	return reg, size, nil
}

// collectAfterBytes is the size of a tool set (its descriptions and
// schemas) from which a rebuild in code mode collects the previous
// generation, and gives its memory back, before it renders the SDK of the
// next.
const collectAfterBytes = 1 << 20

// beforeRender, when set (by tests), is called between the two steps of a
// rebuild.
var beforeRender func()

// refresh rebuilds the snapshot and brings the MCP server's tool list in
// line with it: tools that went are removed, new or changed ones added
// (the go-sdk server then sends notifications/tools/list_changed). A tool
// that did not change is not touched: telling costs a comparison of its
// fields, which share their bytes with the tool source's.
//
// It works in two steps, so that the server never holds two generations
// of a large tool set next to the SDK being rendered from one (issue 24
// §7: a 15.5 MiB list changing in code mode held the previous list, the
// previous SDK, the next list and the next SDK at once). First the new
// registry is built, where a tool can be refused (and then everything
// stays as it was); it serves the calls that start from then on, and the
// previous registry, with the previous tools, is held only by calls still
// running on it. Then the SDK is rendered from the new registry, once per
// change, and what is offered is brought in line. In code mode a large
// previous generation is collected between the two and its memory given
// back to the system: the SDK is about as large as the tools, and is one
// allocation the freed pages of many small ones would not hold, so the
// collector and the runtime would otherwise keep both generations'
// memory while the next SDK takes new pages (a 15.5 MiB list changing
// peaked at 4.2-4.5× its bytes over idle after a plain collection,
// 3.2-3.8× after this).
func (s *Server) refresh() error {
	s.rebuild.Lock()
	defer s.rebuild.Unlock()
	reg, size, err := s.register()
	if err != nil {
		return err
	}
	s.mu.Lock()
	if s.snap != nil {
		s.snap = &snapshot{reg: reg, tools: s.snap.tools}
	}
	dropped := s.size
	s.size = size
	s.mu.Unlock()
	if s.opts.mode != registry.ModeNative && dropped >= collectAfterBytes {
		debug.FreeOSMemory()
	}
	if beforeRender != nil {
		beforeRender()
	}
	asm, err := reg.Assemble(context.Background(), registry.Scope{})
	if err != nil {
		return err // calls go through the new registry; what is offered stays
	}
	snap := &snapshot{reg: reg, tools: asm.MCPTools()}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.snap = snap
	next := make(map[string]registry.MCPTool, len(snap.tools))
	for _, t := range snap.tools {
		next[t.Name] = t
		if old, ok := s.exposed[t.Name]; ok && sameMCPTool(old, t) {
			continue
		}
		handler := s.native(t.Name)
		if t.Name == registry.RunCode {
			handler = s.runCode
		}
		if err := addTool(s.srv, sdkTool(t, s.log), handler); err != nil {
			// Not offered (a version offered before is removed below): one
			// tool the go-sdk refuses costs that tool, never the server.
			s.log.Error("a tool cannot be offered over MCP; it is left out", "tool", t.Name, "err", err)
			delete(next, t.Name)
			continue
		}
		s.adds++
	}
	if len(next) < len(snap.tools) { // a tool left out is not listed either
		snap.tools = slices.DeleteFunc(slices.Clone(snap.tools), func(t registry.MCPTool) bool { _, ok := next[t.Name]; return !ok })
	}
	var gone []string
	for name := range s.exposed {
		if _, ok := next[name]; !ok {
			gone = append(gone, name)
		}
	}
	if len(gone) > 0 {
		s.srv.RemoveTools(gone...)
	}
	s.exposed = next
	return nil
}

func sameMCPTool(a, b registry.MCPTool) bool {
	return a.Name == b.Name && a.Description == b.Description && bytes.Equal(a.InputSchema, b.InputSchema) &&
		bytes.Equal(a.OutputSchema, b.OutputSchema) && bytes.Equal(a.Annotations, b.Annotations)
}

// addTool adds t to srv. The go-sdk's AddTool panics on a tool it cannot
// offer (an input schema whose "type" is not "object" as it reads it, one
// nested deeper than it decodes, an output schema it cannot decode); the
// panic is returned as an error, so that a hostile upstream's tool is left
// out instead of ending mcp.
func addTool(srv *sdk.Server, t *sdk.Tool, h sdk.ToolHandler) (err error) {
	defer func() {
		if v := recover(); v != nil {
			err = fmt.Errorf("go-sdk refused the tool: %v", v)
		}
	}()
	srv.AddTool(t, h)
	return nil
}

// sdkTool is t for the go-sdk server, whose input schemas must be objects
// of type "object": a schema without a type gets it; a schema of another
// type cannot be offered over MCP as it is and becomes {"type":"object"}
// (logged). The schema is looked at, not rebuilt: only its top-level keys
// are read (schemaType), and "type" is matched as the go-sdk matches it —
// exactly, the last of repeated keys winning — not case-insensitively as
// encoding/json fills a struct: {"Type":"object"} has no type.
func sdkTool(t registry.MCPTool, log *slog.Logger) *sdk.Tool {
	in := t.InputSchema
	typ, object := schemaType(in)
	switch {
	case !object:
		in = json.RawMessage(`{"type":"object"}`)
	case typ == nil:
		rest := bytes.TrimSpace(bytes.TrimSpace(in)[1:])
		if rest[0] == '}' {
			in = json.RawMessage(`{"type":"object"}`)
		} else {
			in = append(json.RawMessage(`{"type":"object",`), rest...)
		}
	default:
		var name string
		if json.Unmarshal(typ, &name) != nil || name != "object" {
			log.Warn("a tool's input schema is not of type object; MCP offers it as {\"type\":\"object\"}", "tool", t.Name, "schema_type", string(typ))
			in = json.RawMessage(`{"type":"object"}`)
		}
	}
	st := &sdk.Tool{Name: t.Name, Description: t.Description, InputSchema: in}
	if len(t.OutputSchema) > 0 {
		st.OutputSchema = t.OutputSchema
	}
	if len(t.Annotations) > 0 {
		var a sdk.ToolAnnotations
		if json.Unmarshal(t.Annotations, &a) == nil {
			st.Annotations = &a
		}
	}
	return st
}

// current returns the snapshot calls go through now.
func (s *Server) current() *snapshot {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.snap
}

// callContext is ctx, also cancelled when the server closes.
func (s *Server) callContext(ctx context.Context) (context.Context, func()) {
	ctx, cancel := context.WithCancelCause(ctx)
	stop := context.AfterFunc(s.ctx, func() { cancel(context.Cause(s.ctx)) })
	return ctx, func() { stop(); cancel(nil) }
}

func newCallID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return "mcp-" + hex.EncodeToString(b[:])
}

// native returns the handler of a native tool: the call goes through the
// registry's pipeline and its result converts to MCP's.
func (s *Server) native(name string) sdk.ToolHandler {
	return func(ctx context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
		ctx, done := s.callContext(withTraceMeta(ctx, req.Params.Meta))
		defer done()
		ctx = withSession(ctx, req.Session)
		res := s.current().reg.Execute(ctx, registry.Call{ID: newCallID(), Name: name, Arguments: req.Params.Arguments})
		out := &sdk.CallToolResult{Content: content(res.Content), IsError: res.IsError}
		if len(res.StructuredContent) > 0 && !res.IsError {
			out.StructuredContent = json.RawMessage(res.StructuredContent)
		}
		return out, nil
	}
}

// content converts registry blocks to MCP content: text, images and audio
// as they are, any other block as its placeholder text.
func content(blocks []registry.Block) []sdk.Content {
	out := make([]sdk.Content, 0, len(blocks))
	for _, b := range blocks {
		switch b.Type {
		case registry.BlockText:
			out = append(out, &sdk.TextContent{Text: b.Text})
		case registry.BlockImage:
			out = append(out, &sdk.ImageContent{MIMEType: b.MimeType, Data: b.Data})
		case "audio":
			out = append(out, &sdk.AudioContent{MIMEType: b.MimeType, Data: b.Data})
		default:
			out = append(out, &sdk.TextContent{Text: b.String()})
		}
	}
	return out
}

// runCode is run_code's handler: the program runs through the registry
// (its sub-calls through the same pipeline); with a progress token the
// program's logs stream as progress notifications while it runs; the
// result is the registry's text plus structuredContent {value, logs,
// error}; a failed program is an error result naming its kind.
func (s *Server) runCode(ctx context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
	ctx, done := s.callContext(withTraceMeta(ctx, req.Params.Meta))
	defer done()
	ctx = withSession(ctx, req.Session)
	id := newCallID()
	if token := req.Params.GetProgressToken(); token != nil && req.Session != nil {
		p := newProgress(ctx, req.Session, token, s.log)
		s.streams.Store(id, p)
		defer func() {
			s.streams.Delete(id)
			p.finish()
		}()
	}
	res := s.current().reg.Execute(ctx, registry.Call{ID: id, Name: registry.RunCode, Arguments: req.Params.Arguments})
	out := &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: res.Text()}}, IsError: res.IsError}
	if cr := res.CodeRun; cr != nil {
		out.StructuredContent = registry.NewRunCodeOutput(cr)
		outcome := "ok"
		if cr.Error != nil {
			outcome = string(cr.Error.Kind)
		}
		s.log.Info("run", "run_id", cr.Stats.RunID, "trace_id", cr.Stats.TraceID, "call_id", id, "outcome", outcome,
			"wall_ms", cr.Stats.Wall.Milliseconds(), "calls", cr.Stats.Calls, "warm", cr.Stats.Warm)
	} else {
		s.log.WarnContext(ctx, "run_code did not run", "call_id", id, "err", res.Err)
	}
	return out, nil
}
