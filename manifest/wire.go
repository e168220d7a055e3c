package manifest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// codeTooLarge is the code of the error a reply over a bound becomes: the
// call it answers fails with it, and the connection stays.
const codeTooLarge = -32099

// upConn is the stdio transport of one MCP server, under the go-sdk's
// client session: the session sees only what passed the bounds. It reads
// the server's stdout with a msgReader, so a message is measured as it
// streams and refused before anything decodes it (MaxServerResultBytes,
// MaxServerResultDepth and MaxServerResultValues for anything but a tool
// list).
//
// A reply over a bound becomes a JSON-RPC error for its call (which then
// fails naming the bound; the connection stays); a request or
// notification over one is dropped and logged. The connection itself
// ends only when the stream cannot be framed (a message over
// MaxServerMessageBytes, malformed or too deeply nested JSON).
//
// It also lists the server's tools itself (listPage), beside the session:
// the go-sdk would decode every schema into Go maps, while a listing here
// stays bytes, one copy per tool, and keeps the tools that did not change
// from the list before without reading them twice.
type upConn struct {
	server string
	log    *slog.Logger

	rd      *msgReader
	w       io.Writer
	wmu     sync.Mutex
	closeFn func() error

	queue []jsonrpc.Message // the rest of a batch; only Read touches it

	mu       sync.Mutex
	lists    map[string]*listCall // our own tools/list calls, by raw id
	nextID   int
	reason   error         // why this side ended the connection
	gone     chan struct{} // closed when the connection ended
	goneOnce sync.Once
}

// listCall is one of our tools/list calls waiting for its reply.
type listCall struct {
	rawID string // the id as it appears on the wire
	page
	// tools holds, for each tool of the message being read, the previous
	// list's tool when it is the same, else the tool imported from it;
	// err the first tool that could not be imported. Reset per message.
	tools []*upstreamTool
	err   error
	done  chan listReply
}

// page is what one page of a listing needs to know.
type page struct {
	params json.RawMessage
	// base is the server's current list by name: a listed tool of the
	// same name, size and hash is that tool again.
	base map[string]*upstreamTool
	// prior counts the tools of the pages before; budget is what is left
	// of MaxServerListBytes.
	prior, budget int
	// imp imports a listed tool that is new or changed; old is the
	// current list's tool of its name, if any.
	imp func(raw []byte, old *upstreamTool) (*upstreamTool, error)
}

// lister lists one page of a server's tools: upConn over stdio,
// httpLister over HTTP.
type lister interface {
	listPage(ctx context.Context, p page) listReply
}

// listReply is one page of a listing: its tools (each the previous list's
// or a new one), its cursor, its size.
type listReply struct {
	tools  []*upstreamTool
	cursor string
	bytes  int
	err    error
}

// stdioConn is an upConn over a server's stdout (r) and stdin (w); close
// closes both.
func stdioConn(server string, log *slog.Logger, r io.Reader, w io.Writer, closeFn func() error) *upConn {
	return &upConn{server: server, log: log, lists: map[string]*listCall{}, gone: make(chan struct{}),
		rd: newMsgReader(r), w: w, closeFn: closeFn}
}

// Connect hands c to the go-sdk's client as its transport.
func (c *upConn) Connect(context.Context) (mcp.Connection, error) { return c, nil }

// end records why the connection ended (the first reason) and wakes the
// listings waiting on it.
func (c *upConn) end(reason error) {
	c.mu.Lock()
	if c.reason == nil {
		c.reason = reason
	}
	c.mu.Unlock()
	c.goneOnce.Do(func() { close(c.gone) })
}

// why is why this side ended the connection, nil when it did not.
func (c *upConn) why() error {
	if c == nil {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	var bad *errMalformed
	if errors.As(c.reason, &bad) {
		return c.reason
	}
	return nil
}

func (c *upConn) SessionID() string { return "" }

func (c *upConn) Close() error {
	c.end(errors.New("closed"))
	return c.closeFn()
}

func (c *upConn) Write(ctx context.Context, msg jsonrpc.Message) error {
	data, err := jsonrpc.EncodeMessage(msg)
	if err != nil {
		return err
	}
	c.wmu.Lock()
	defer c.wmu.Unlock()
	_, err = c.w.Write(append(data, '\n'))
	return err
}

// Read returns the next message for the session: replies to our own
// listings are taken out, messages over a bound are answered or dropped.
func (c *upConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	for {
		if len(c.queue) > 0 {
			msg := c.queue[0]
			c.queue = c.queue[1:]
			return msg, nil
		}
		msg, err := c.readStdio()
		if err != nil {
			c.end(err)
			return nil, err
		}
		if msg != nil {
			return msg, nil
		}
	}
}

// pending returns a listing waiting for its reply, if any.
func (c *upConn) pending() *listCall {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, call := range c.lists {
		return call
	}
	return nil
}

func (c *upConn) take(rawID string) *listCall {
	c.mu.Lock()
	defer c.mu.Unlock()
	call := c.lists[rawID]
	delete(c.lists, rawID)
	return call
}

// readStdio reads one message from the server's stdout.
func (c *upConn) readStdio() (jsonrpc.Message, error) {
	// Decided when the message begins, which is after the request it may
	// answer was sent.
	var call *listCall
	m, err := c.rd.read(func() readLimits {
		if call = c.pending(); call == nil {
			return readLimits{limit: MaxServerResultBytes}
		}
		return call.limits()
	})
	if err != nil {
		var bad *errMalformed
		if errors.As(err, &bad) {
			c.log.Warn("closing the connection to the MCP server", "err", err)
		}
		return nil, err
	}
	if call != nil && !m.method && string(m.id) == call.rawID {
		c.take(call.rawID)
		call.done <- call.reply(m)
		return nil, nil
	}
	if !m.method && m.id != nil {
		if other := c.take(string(m.id)); other != nil {
			// A listing's reply that began before its request was sent.
			other.done <- listReply{err: errors.New("it answered tools/list before it was asked")}
			return nil, nil
		}
	}
	if why := m.overBound(); why != "" {
		return c.refuse(m, why)
	}
	for _, t := range m.tools {
		if t == nil {
			// A tool the listing in flight already has was not kept: this
			// is not that listing's reply, and cannot be put together.
			return c.refuse(m, "unreadable: it repeats listed tools while the host lists them")
		}
	}
	data := m.joined()
	if data[0] == '[' {
		return c.batch(data)
	}
	msg, err := jsonrpc.DecodeMessage(data)
	if err != nil {
		err = &errMalformed{fmt.Sprintf("it sent a message that is not JSON-RPC: %v", err)}
		c.log.Warn("closing the connection to the MCP server", "err", err)
		return nil, err
	}
	return msg, nil
}

// batch queues the messages of a JSON-RPC batch and returns none.
func (c *upConn) batch(data []byte) (jsonrpc.Message, error) {
	if !json.Valid(data) {
		return nil, &errMalformed{"it sent a batch that is not JSON"}
	}
	_, err := eachElement(data, func(el []byte) error {
		msg, err := jsonrpc.DecodeMessage(el)
		if err != nil {
			return &errMalformed{fmt.Sprintf("it sent a message that is not JSON-RPC: %v", err)}
		}
		c.queue = append(c.queue, msg)
		return nil
	})
	return nil, err
}

// overBound names the bound a message that is not a tool list is over
// (MaxServerResultBytes, MaxServerResultDepth, MaxServerResultValues), ""
// when it is within them. It reads what msgReader counted: nothing of the
// message has been decoded. Both transports ask it: the stdio reader of
// each line, and over HTTP boundedBody of each JSON body and event.
func (m *wireMsg) overBound() string {
	switch {
	case m.over || m.size > MaxServerResultBytes:
		return fmt.Sprintf("larger than %d bytes (MaxServerResultBytes)", MaxServerResultBytes)
	case m.depth > MaxServerResultDepth:
		return fmt.Sprintf("nested deeper than %d levels (MaxServerResultDepth)", MaxServerResultDepth)
	case m.values > MaxServerResultValues:
		return fmt.Sprintf("made of more than %d JSON values (MaxServerResultValues)", MaxServerResultValues)
	}
	return ""
}

// refusal is what stands for a message over a bound: for a reply, an
// error for its call (the server's reply is <why>); nil for a request or
// notification, which is dropped.
func refusal(m *wireMsg, why string) *jsonrpc.Response {
	if !m.method && m.id != nil {
		if id, ok := parseID(m.id); ok {
			return &jsonrpc.Response{ID: id, Error: &jsonrpc.Error{Code: codeTooLarge, Message: "the server's reply is " + why}}
		}
	}
	return nil
}

// refuse answers a reply over a bound with an error for its call, and
// drops a request or notification over one (refusal).
func (c *upConn) refuse(m *wireMsg, why string) (jsonrpc.Message, error) {
	if r := refusal(m, why); r != nil {
		c.log.Warn("a reply from the MCP server is over a bound; its call fails", "why", why)
		return r, nil
	}
	c.log.Warn("dropped a message from the MCP server over a bound", "why", why)
	return nil, nil
}

// parseID turns a raw JSON-RPC id (a string or a number) into an id.
func parseID(raw []byte) (jsonrpc.ID, bool) {
	if s, ok := jsonString(raw); ok {
		id, err := jsonrpc.MakeID(s)
		return id, err == nil
	}
	f, err := strconv.ParseFloat(string(raw), 64)
	if err != nil {
		return jsonrpc.ID{}, false
	}
	id, err := jsonrpc.MakeID(f)
	return id, err == nil
}

// limits are how a message that may be the listing's reply is read: up to
// MaxServerMessageBytes and what is left of MaxServerListBytes, its tools
// kept apart (keep), those identical to the previous list's not copied
// again. The tools of the message before are forgotten.
func (call *listCall) limits() readLimits {
	call.tools, call.err = call.tools[:0], nil
	return readLimits{limit: min(MaxServerMessageBytes, call.budget), split: true, keep: call.keep}
}

// keep takes a listed tool as it streams in: the previous list's tool
// when it is the same (same name, size and hash), else the tool imported
// from it, so that the reply is never held whole. Nothing of it is left
// for the message, which only a listing's reply can do without.
func (call *listCall) keep(raw []byte) []byte {
	if call.prior+len(call.tools) >= MaxServerTools {
		if call.err == nil {
			call.err = fmt.Errorf("it lists more than %d tools (MaxServerTools)", MaxServerTools)
		}
		return nil
	}
	var old *upstreamTool
	if name, ok := toolName(raw); ok {
		if old = call.base[name]; old != nil && old.size == len(raw) && old.hash == toolHash(raw) {
			call.tools = append(call.tools, old)
			return nil
		}
	}
	if call.err != nil {
		return nil // the listing fails anyway
	}
	t, err := call.imp(raw, old)
	if err != nil {
		call.err = err
	}
	call.tools = append(call.tools, t)
	return nil
}

// toolName is the "name" of a listed tool, when it is valid JSON with one.
func toolName(tool []byte) (string, bool) {
	if !json.Valid(tool) {
		return "", false
	}
	name, found := "", false
	_, _ = eachMember(tool, func(k, v []byte) error {
		if string(k) == "name" {
			name, found = jsonString(v)
		}
		return nil
	})
	return name, found
}

// reply is the page a listing's reply carries, read with call.limits —
// from a server's stdout, an HTTP body or an event's data alike.
func (call *listCall) reply(m *wireMsg) listReply {
	r := listReply{bytes: m.size, tools: call.tools}
	switch {
	case m.over:
		r.err = fmt.Errorf("its tool list is larger than %d bytes (MaxServerListBytes)", MaxServerListBytes)
		return r
	case call.err != nil:
		r.err = call.err
		return r
	case !json.Valid(m.skel):
		r.err = errors.New("it answered tools/list with a message that is not JSON")
		return r
	}
	var result, rpcErr []byte
	_, _ = eachMember(m.skel, func(k, v []byte) error {
		switch string(k) {
		case "result":
			result = v
		case "error":
			rpcErr = v
		}
		return nil
	})
	if rpcErr != nil {
		var e jsonrpc.Error
		if json.Unmarshal(rpcErr, &e) != nil {
			r.err = errors.New("it answered tools/list with a malformed error")
		} else {
			r.err = fmt.Errorf("it answered tools/list with an error: %s", capMessage(e.Message))
		}
		return r
	}
	r.err = listResult(result, &r)
	return r
}

// listResult checks a tools/list result (valid JSON; over stdio its tools
// already taken out) and reads its cursor.
func listResult(result []byte, r *listReply) error {
	var tools []byte
	isObject, _ := eachMember(result, func(k, v []byte) error {
		switch string(k) {
		case "tools":
			tools = v
		case "nextCursor":
			r.cursor, _ = jsonString(v)
		}
		return nil
	})
	switch {
	case !isObject:
		return errors.New("it answered tools/list without a result object")
	case tools == nil:
		return errors.New("it answered tools/list without tools")
	case tools[0] != '[':
		return errors.New("it answered tools/list with tools that are not an array")
	}
	return nil
}

// listPage sends tools/list and waits for its reply.
func (c *upConn) listPage(ctx context.Context, p page) listReply {
	c.mu.Lock()
	c.nextID++
	id := fmt.Sprintf("dsh-list-%d", c.nextID)
	call := &listCall{rawID: strconv.Quote(id), page: p, done: make(chan listReply, 1)}
	c.lists[call.rawID] = call
	c.mu.Unlock()
	defer c.take(call.rawID)
	rid, err := jsonrpc.MakeID(id)
	if err != nil {
		return listReply{err: err}
	}
	if err := c.Write(ctx, &jsonrpc.Request{ID: rid, Method: "tools/list", Params: p.params}); err != nil {
		return listReply{err: err}
	}
	select {
	case r := <-call.done:
		return r
	case <-ctx.Done():
		return listReply{err: context.Cause(ctx)}
	case <-c.gone:
		c.mu.Lock()
		err := c.reason
		c.mu.Unlock()
		return listReply{err: fmt.Errorf("the connection ended: %w", err)}
	}
}
