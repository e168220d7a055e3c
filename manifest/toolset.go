package manifest

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/containerd/errdefs"

	"github.com/dsh-container/dsh-container/registry"
)

// OpenOptions configure Open. The zero value is usable.
type OpenOptions struct {
	// Logger receives the servers' stderr and the toolset's own records
	// (default: discard).
	Logger *slog.Logger
	// Version is the client version the MCP servers are told.
	Version string
}

// Toolset is every tool a manifest provides: its command tools and the
// tools of its MCP servers, which Open starts (once) and Close stops. The
// MCP servers' tool lists may change while it runs; Tools returns the
// current list and Subscribe tells when it changed. It is safe for
// concurrent use.
type Toolset struct {
	log      *slog.Logger
	commands []registry.Tool
	servers  []*upstream // sorted by name

	mu     sync.Mutex
	lists  map[*upstream][]*upstreamTool // each server's accepted tool list
	tools  []registry.Tool               // assembled from lists
	subs   map[int]func()
	nextID int
	closed bool

	changed chan struct{} // capacity 1: the tool list changed
	stop    chan struct{} // closed by Close: ends the notifier
	wg      sync.WaitGroup
	// pace charges relistings and the rebuilds they cause, so that
	// changing lists cost a bounded share of a core.
	pace *pacer
}

// Open starts the manifest's MCP servers, all at once, and lists their
// tools. It fails when a server cannot be started or reached (the error
// names it and quotes the end of its stderr; errdefs.ErrUnavailable) and
// when two tools map to the same name (the error names both;
// errdefs.ErrInvalidArgument); a server that started is then stopped
// again. A manifest without MCP servers starts nothing.
func Open(ctx context.Context, m *Manifest, opts *OpenOptions) (_ *Toolset, retErr error) {
	var o OpenOptions
	if opts != nil {
		o = *opts
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Version == "" {
		o.Version = "dev"
	}
	s := &Toolset{log: o.Logger, lists: map[*upstream][]*upstreamTool{}, subs: map[int]func(){},
		changed: make(chan struct{}, 1), stop: make(chan struct{}), pace: &pacer{}}
	for _, t := range m.Tools {
		s.commands = append(s.commands, t.RegistryTool())
	}
	for _, name := range slices.Sorted(maps.Keys(m.MCPServers)) {
		s.servers = append(s.servers, newUpstream(name, m.MCPServers[name], o.Logger, o.Version))
	}
	defer func() {
		if retErr != nil {
			s.stopServers()
		}
	}()
	for _, u := range s.servers {
		u.onList = s.update
		u.accepted = func() []*upstreamTool {
			s.mu.Lock()
			defer s.mu.Unlock()
			return s.lists[u]
		}
		u.pace = s.pace
	}
	lists := make([][]*upstreamTool, len(s.servers))
	errs := make([]error, len(s.servers))
	var wg sync.WaitGroup
	for i, u := range s.servers {
		wg.Go(func() { lists[i], errs[i] = u.start(ctx) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	for i, u := range s.servers {
		s.lists[u] = lists[i]
	}
	tools, err := s.assemble(s.lists)
	if err != nil {
		return nil, err
	}
	s.tools = tools
	for i, u := range s.servers {
		s.log.Info("MCP server started", "mcp_server", u.name, "transport", u.cfg.Transport(), "tools", len(lists[i]))
	}
	s.wg.Add(1)
	go s.notifier()
	return s, nil
}

// notifier calls the subscribers after each change, coalescing changes
// that arrive while they run; the pacer holds back the next relisting
// until they are done, and then as long again as they took times
// relistCostFactor.
func (s *Toolset) notifier() {
	defer s.wg.Done()
	for {
		select {
		case <-s.changed:
		case <-s.stop:
			return
		}
		s.mu.Lock()
		subs := slices.Collect(maps.Values(s.subs))
		s.mu.Unlock()
		start := time.Now()
		for _, fn := range subs {
			fn()
		}
		s.pace.release(time.Since(start))
	}
}

// Tools returns the current tools: the command tools in manifest order,
// then each MCP server's tools (servers by name, tools in the server's
// order), named "<server>__<tool>".
func (s *Toolset) Tools() []registry.Tool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.tools)
}

// Subscribe calls fn, from a goroutine of the toolset, after the tool list
// changed (changes that come while fn runs are told once). The returned
// function unsubscribes.
func (s *Toolset) Subscribe(fn func()) (cancel func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	id := s.nextID
	s.nextID++
	s.subs[id] = fn
	return func() {
		s.mu.Lock()
		delete(s.subs, id)
		s.mu.Unlock()
	}
}

// Close stops every MCP server (closing its input, then SIGTERM and
// SIGKILL to its process group for stdio servers; ending the session for
// HTTP ones) and waits for them. Calls in flight fail. Idempotent.
func (s *Toolset) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	s.mu.Unlock()
	if s.stop != nil {
		close(s.stop)
	}
	s.stopServers()
	s.wg.Wait()
	return nil
}

func (s *Toolset) stopServers() {
	var wg sync.WaitGroup
	for _, u := range s.servers {
		wg.Go(u.close)
	}
	wg.Wait()
}

// update is a server's new tool list: accepted unless it collides with
// another tool, in which case the previous list stays and the collision
// is logged naming both tools. Tools that did not change are the same
// values as before, so telling a change costs a comparison of pointers.
func (s *Toolset) update(u *upstream, tools []*upstreamTool) {
	s.mu.Lock()
	if s.closed || slices.Equal(s.lists[u], tools) {
		s.mu.Unlock()
		return
	}
	next := maps.Clone(s.lists)
	next[u] = tools
	assembled, err := s.assemble(next)
	if err != nil {
		s.mu.Unlock()
		s.log.Error("MCP server's new tool list refused; its previous tools stay", "mcp_server", u.name, "err", err)
		return
	}
	prev := s.lists[u]
	s.lists, s.tools = next, assembled
	// The bytes of the tools that are new in this list.
	kept := make(map[*upstreamTool]bool, len(prev))
	for _, t := range prev {
		kept[t] = true
	}
	changed := 0
	for _, t := range tools {
		if !kept[t] {
			changed += t.size
		}
	}
	// The rebuild is asked for under the lock, so that a relisting that
	// waits on the pacer after this cannot miss it.
	select {
	case s.changed <- struct{}{}:
		s.pace.hold(changed)
	default:
		s.pace.addChanged(changed) // a rebuild is asked for already
	}
	s.mu.Unlock()
	s.log.Info("MCP server's tools changed", "mcp_server", u.name, "tools", len(tools))
}

// toolSource says where a tool name came from, for collision errors.
type toolSource struct {
	server, tool string // server == "" for a command tool
}

func (t toolSource) String() string {
	if t.server == "" {
		return fmt.Sprintf("the command tool %q", t.tool)
	}
	return fmt.Sprintf("MCP server %q (its tool %q)", t.server, t.tool)
}

// assemble builds the tool list from lists, failing when two tools map
// to one name.
func (s *Toolset) assemble(lists map[*upstream][]*upstreamTool) ([]registry.Tool, error) {
	seen := map[string]toolSource{}
	tools := slices.Clone(s.commands)
	for _, t := range s.commands {
		seen[t.Name] = toolSource{tool: t.Name}
	}
	for _, u := range s.servers {
		for _, mt := range lists[u] {
			rt := mt.rt
			src := toolSource{server: u.name, tool: mt.name}
			if prev, dup := seen[rt.Name]; dup {
				return nil, fmt.Errorf("%w: tool name %q is given twice: by %v and by %v; rename the server or the command tool",
					errdefs.ErrInvalidArgument, rt.Name, prev, src)
			}
			seen[rt.Name] = src
			tools = append(tools, rt)
		}
	}
	return tools, nil
}

// ServerStatus is what Check found of one MCP server.
type ServerStatus struct {
	Name      string
	Transport string
	// Where is its command or URL.
	Where string
	// Tools counts the tools it listed; Err is why it could not be reached
	// (naming the server and quoting its stderr), nil when it could.
	Tools int
	Err   error
}

// Check starts or reaches each of the manifest's MCP servers, lists its
// tools and stops it again, all at once, and reports each one.
func Check(ctx context.Context, m *Manifest, opts *OpenOptions) []ServerStatus {
	var o OpenOptions
	if opts != nil {
		o = *opts
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	names := slices.Sorted(maps.Keys(m.MCPServers))
	out := make([]ServerStatus, len(names))
	var wg sync.WaitGroup
	for i, name := range names {
		wg.Go(func() {
			u := newUpstream(name, m.MCPServers[name], o.Logger, o.Version)
			u.onList = func(*upstream, []*upstreamTool) {}
			defer u.close()
			tools, err := u.start(ctx)
			out[i] = ServerStatus{Name: name, Transport: u.cfg.Transport(), Where: u.where(), Tools: len(tools), Err: err}
		})
	}
	wg.Wait()
	return out
}
