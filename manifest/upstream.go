package manifest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/containerd/errdefs"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/dsh-container/dsh-container/registry"
)

// Bounds on what an MCP server can make the host hold.
const (
	// MaxServerTools bounds the tools one MCP server may list.
	MaxServerTools = 1000
	// MaxServerListBytes bounds the JSON size of one server's tool list,
	// all pages together.
	MaxServerListBytes = 16 << 20
	// MaxServerMessageBytes bounds one message from a server: a line on
	// stdio, an event or a JSON response body over HTTP.
	MaxServerMessageBytes = 16 << 20
	// MaxUpstreamToolNameBytes bounds a server's tool name.
	MaxUpstreamToolNameBytes = 256
	// maxListPages bounds the pages of one tools/list: a server that hands
	// out cursors forever cannot keep the host listing.
	maxListPages = 100
)

// Connection timing.
const (
	// StartTimeout bounds starting (or restarting) a server: spawning or
	// reaching it, the MCP handshake and listing its tools.
	StartTimeout = 30 * time.Second
	// minConnectInterval spaces connection attempts to one server: a server
	// that dies on every call is restarted at most once per interval.
	minConnectInterval = time.Second
	// maxConnectBackoff caps the wait after failed attempts; calls in
	// between fail at once with the last error.
	maxConnectBackoff = 30 * time.Second
	// minRelistInterval spaces the tool listings a server's
	// tools/list_changed notifications trigger.
	minRelistInterval = time.Second
)

// upstream is one MCP server of a manifest, reached as an MCP client. It
// connects once at start, reconnects on the next call after the server
// crashed or disconnected (spacing attempts, backing off after failures),
// relists its tools when the server says they changed, and stops the
// server cleanly on close.
type upstream struct {
	name   string
	cfg    MCPServer
	log    *slog.Logger
	impl   *mcp.Implementation
	client *mcp.Client
	// onList is called with each new tool list after the first; the toolset
	// accepts it or keeps the previous one. accepted returns the list the
	// toolset holds (nil: none), which a listing compares against; pace
	// spaces relistings by their cost (nil: only minRelistInterval).
	onList   func(*upstream, []*upstreamTool)
	accepted func() []*upstreamTool
	pace     *pacer

	connMu sync.Mutex // serializes connection attempts

	mu      sync.Mutex
	conn    *conn
	closed  bool
	lastTry time.Time
	failErr error
	retryAt time.Time
	backoff time.Duration

	relist chan struct{} // capacity 1
	// ctx is cancelled by close: it stops the relister and any listing.
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// conn is one connection: an MCP session and, for stdio, the process.
type conn struct {
	sess   *mcp.ClientSession
	wire   *upConn // stdio only
	lister lister
	proc   *process
	stderr *stderrLog
	gone   chan struct{} // closed when the session has ended
	once   sync.Once
}

func newUpstream(name string, cfg MCPServer, log *slog.Logger, version string) *upstream {
	u := &upstream{name: name, cfg: cfg, log: log.With("mcp_server", name), relist: make(chan struct{}, 1),
		impl: &mcp.Implementation{Name: "dsh-container", Version: version}}
	u.ctx, u.cancel = context.WithCancel(context.Background())
	u.client = mcp.NewClient(u.impl, &mcp.ClientOptions{
		Logger: u.log,
		// Advertise nothing: no roots, sampling or elicitation reach the
		// server from here.
		Capabilities: &mcp.ClientCapabilities{},
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) {
			select {
			case u.relist <- struct{}{}:
			default:
			}
		},
	})
	u.wg.Add(1)
	go u.relister()
	return u
}

// start connects for the first time and returns the server's tools.
func (u *upstream) start(ctx context.Context) ([]*upstreamTool, error) {
	c, tools, err := u.dial(ctx)
	u.mu.Lock()
	defer u.mu.Unlock()
	u.lastTry = time.Now()
	if err != nil {
		return nil, err
	}
	u.conn = c
	return tools, nil
}

// dial starts or reaches the server, initializes a session and lists its
// tools, within StartTimeout.
func (u *upstream) dial(ctx context.Context) (_ *conn, _ []*upstreamTool, retErr error) {
	ctx, cancel := context.WithTimeout(ctx, StartTimeout)
	defer cancel()
	c := &conn{gone: make(chan struct{})}
	var t mcp.Transport
	switch u.cfg.Transport() {
	case TransportStdio:
		c.stderr = newStderrLog(u.log, u.name)
		p, err := startProcess(append([]string{u.cfg.Command}, u.cfg.Args...), serverEnv(u.cfg.Env), c.stderr, u.log)
		if err != nil {
			return nil, nil, fmt.Errorf("%w: MCP server %q: cannot start %s: %w", errdefs.ErrUnavailable, u.name, u.cfg.Command, err)
		}
		c.proc = p
		c.wire = stdioConn(u.name, u.log, p.stdout, p.stdin, func() error {
			return errors.Join(p.stdin.Close(), p.stdout.Close())
		})
		t, c.lister = c.wire, c.wire
	default:
		hc := httpClient(u.cfg.Headers)
		t = &mcp.StreamableClientTransport{
			Endpoint:   u.cfg.URL,
			HTTPClient: hc,
			MaxRetries: 2,
			// Every event the session reads is bounded like a result
			// (boundResponse; tool lists do not go through it:
			// httpLister), plus room for the event's own fields.
			MaxEventSize: MaxServerResultBytes + 16<<10,
		}
		c.lister = &httpLister{url: u.cfg.URL, client: hc}
	}
	defer func() {
		if retErr != nil {
			c.close()
			retErr = u.withStderr(retErr, c)
		}
	}()
	sess, err := u.client.Connect(ctx, t, nil)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: MCP server %q: %s: %w", errdefs.ErrUnavailable, u.name, u.where(), err)
	}
	c.sess = sess
	if hl, ok := c.lister.(*httpLister); ok {
		hl.sess = sess
	}
	var base []*upstreamTool
	if u.accepted != nil {
		base = u.accepted()
	}
	tools, err := u.listTools(ctx, c, base)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: MCP server %q: listing its tools: %w", errdefs.ErrUnavailable, u.name, err)
	}
	u.wg.Add(1)
	go func() {
		defer u.wg.Done()
		_ = sess.Wait()
		close(c.gone)
		u.mu.Lock()
		if u.conn == c {
			u.conn = nil
		}
		u.mu.Unlock()
		c.close()
	}()
	return c, tools, nil
}

// where names the server's command or URL for messages.
func (u *upstream) where() string {
	if u.cfg.Transport() == TransportStdio {
		return u.cfg.Command
	}
	return u.cfg.URL
}

// withStderr adds the exit status and the end of stderr to err.
func (u *upstream) withStderr(err error, c *conn) error {
	if c.proc == nil {
		return err
	}
	status, exited := c.proc.exitStatus(500 * time.Millisecond)
	msg := err.Error() + " (the server's process: " + status + ")"
	if exited {
		// Its last words may still be in the pipe: read them first.
		c.stderr.drain(stderrTailWait)
	}
	if tail := c.stderr.Tail(); tail != "" {
		msg += "; its stderr ended with:\n" + indent(tail)
	}
	return wrapf(err, "%s", msg)
}

func indent(s string) string {
	return "    " + strings.ReplaceAll(s, "\n", "\n    ")
}

// wrapf returns an error with msg that still matches err's classes.
func wrapf(err error, format string, args ...any) error {
	return &wrappedError{msg: fmt.Sprintf(format, args...), err: err}
}

type wrappedError struct {
	msg string
	err error
}

func (e *wrappedError) Error() string { return e.msg }
func (e *wrappedError) Unwrap() error { return e.err }

// close ends the connection: the session, then the process. Idempotent.
func (c *conn) close() {
	c.once.Do(func() {
		if c.sess != nil {
			_ = c.sess.Close()
		}
		if c.proc != nil {
			c.proc.stop()
		}
	})
}

func (c *conn) alive() bool {
	select {
	case <-c.gone:
		return false
	default:
		return true
	}
}

// serverEnv is the host's environment with env on top.
func serverEnv(env map[string]string) []string {
	out := os.Environ()
	for k, v := range env {
		out = append(out, k+"="+v)
	}
	return out
}

// session returns a live connection, connecting when there is none.
func (u *upstream) session(ctx context.Context) (*conn, error) {
	if c, due, err := u.current(); !due {
		return c, err
	}
	u.connMu.Lock()
	defer u.connMu.Unlock()
	if c, due, err := u.current(); !due { // someone else connected meanwhile
		return c, err
	}
	u.mu.Lock()
	wait := time.Until(u.lastTry.Add(minConnectInterval))
	u.mu.Unlock()
	if wait > 0 {
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return nil, context.Cause(ctx)
		case <-u.ctx.Done():
			t.Stop()
			return nil, u.closedErr()
		}
	}
	u.log.Info("connecting to the MCP server again")
	c, tools, err := u.dial(ctx)
	u.mu.Lock()
	u.lastTry = time.Now()
	if u.closed && err == nil {
		u.mu.Unlock()
		c.close()
		return nil, u.closedErr()
	}
	if err != nil {
		u.backoff = min(max(2*u.backoff, minConnectInterval), maxConnectBackoff)
		u.failErr, u.retryAt = err, time.Now().Add(u.backoff)
		u.mu.Unlock()
		u.log.Warn("cannot connect to the MCP server", "err", err, "retry_in", u.backoff)
		return nil, err
	}
	u.conn, u.failErr, u.backoff = c, nil, 0
	u.mu.Unlock()
	u.onList(u, tools)
	return c, nil
}

// current returns the live connection or the error to fail with at once;
// due reports instead that a connection attempt is due.
func (u *upstream) current() (c *conn, due bool, err error) {
	u.mu.Lock()
	defer u.mu.Unlock()
	switch {
	case u.closed:
		return nil, false, u.closedErr()
	case u.conn != nil && u.conn.alive():
		return u.conn, false, nil
	case u.failErr != nil && time.Now().Before(u.retryAt):
		return nil, false, fmt.Errorf("%w (the next attempt is in %v)", u.failErr, time.Until(u.retryAt).Round(100*time.Millisecond))
	}
	return nil, true, nil
}

func (u *upstream) closedErr() error {
	return fmt.Errorf("%w: MCP server %q: stopped", errdefs.ErrUnavailable, u.name)
}

// drop forgets c after a transport failure; the next call reconnects.
func (u *upstream) drop(c *conn) {
	u.mu.Lock()
	if u.conn == c {
		u.conn = nil
	}
	u.mu.Unlock()
	u.wg.Add(1)
	go func() {
		defer u.wg.Done()
		c.close()
	}()
}

// call calls the server's tool with args, within the server's timeout.
func (u *upstream) call(ctx context.Context, tool string, args json.RawMessage) (registry.Output, error) {
	timeout := u.cfg.Timeout()
	ctx, cancel := context.WithTimeoutCause(ctx, timeout, errTimedOut)
	defer cancel()
	interrupted := func() error {
		if errors.Is(context.Cause(ctx), errTimedOut) {
			return fmt.Errorf("MCP server %q: tool %q timed out after %v", u.name, tool, timeout)
		}
		return fmt.Errorf("MCP server %q: call to %q cancelled", u.name, tool)
	}
	c, err := u.session(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return registry.Output{}, interrupted()
		}
		return registry.Output{}, err
	}
	res, err := c.sess.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: args})
	switch werr := serverError(err); {
	case err == nil:
	case ctx.Err() != nil:
		return registry.Output{}, interrupted()
	case werr != nil && werr.Code == codeTooLarge:
		// A reply over a bound, refused before it was decoded.
		return registry.Output{}, fmt.Errorf("MCP server %q: tool %q: %s", u.name, tool, werr.Message)
	case werr != nil:
		// The server answered with a protocol error (an unknown tool,
		// arguments it rejects): a rejection carrying its message.
		return registry.Output{}, errors.New(capMessage(werr.Message))
	default:
		u.drop(c)
		if why := c.wire.why(); why != nil && !strings.Contains(err.Error(), why.Error()) {
			err = fmt.Errorf("%w (the connection was closed: %w)", err, why)
		}
		return registry.Output{}, u.withStderr(fmt.Errorf("MCP server %q disconnected during the call to %q (it is restarted on the next call): %w", u.name, tool, err), c)
	}
	return convertResult(res)
}

// Codes of the JSON-RPC errors the SDK makes up for transport failures:
// the connection closing on either side, and a request the transport
// could not deliver (an HTTP failure).
const (
	codeClientClosing = -32003
	codeServerClosing = -32004
	codeRejected      = -32005
)

// serverError returns the JSON-RPC error the server answered with, or nil
// when err is a transport failure (or nil).
func serverError(err error) *jsonrpc.Error {
	var found *jsonrpc.Error
	var walk func(error)
	walk = func(e error) {
		if e == nil || found != nil {
			return
		}
		if we, ok := e.(*jsonrpc.Error); ok {
			switch we.Code {
			case codeClientClosing, codeServerClosing, codeRejected:
			default:
				found = we
				return
			}
		}
		switch u := e.(type) {
		case interface{ Unwrap() error }:
			walk(u.Unwrap())
		case interface{ Unwrap() []error }:
			for _, e := range u.Unwrap() {
				walk(e)
			}
		}
	}
	walk(err)
	return found
}

// capMessage keeps the first MaxMessageBytes of a message from a server.
func capMessage(s string) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	if len(s) <= MaxMessageBytes {
		return s
	}
	cut := MaxMessageBytes
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + fmt.Sprintf("… (%d more bytes cut)", len(s)-cut)
}

// convertResult turns a tools/call result into a registry output: content
// blocks (text as text, images and audio with their data, resources and
// anything else as typed blocks the program sees as placeholders) and the
// structured value. isError becomes an error carrying the text.
func convertResult(res *mcp.CallToolResult) (registry.Output, error) {
	var out registry.Output
	for _, c := range res.Content {
		out.Content = append(out.Content, convertContent(c))
	}
	if res.IsError {
		msg := registry.Result{Content: out.Content}.Text()
		if strings.TrimSpace(msg) == "" {
			msg = "the tool reported an error without a message"
		}
		return registry.Output{}, errors.New(capMessage(msg))
	}
	if res.StructuredContent != nil {
		b, err := json.Marshal(res.StructuredContent)
		if err != nil {
			return registry.Output{}, fmt.Errorf("structured content: %w", err)
		}
		out.Structured = b
	}
	return out, nil
}

func convertContent(c mcp.Content) registry.Block {
	switch c := c.(type) {
	case *mcp.TextContent:
		return registry.TextBlock(c.Text)
	case *mcp.ImageContent:
		return registry.ImageBlock(c.MIMEType, c.Data)
	case *mcp.AudioContent:
		return registry.Block{Type: "audio", MimeType: c.MIMEType, Data: c.Data}
	case *mcp.ResourceLink:
		return registry.Block{Type: "resource_link", MimeType: c.MIMEType}
	case *mcp.EmbeddedResource:
		b := registry.Block{Type: "resource"}
		if r := c.Resource; r != nil {
			b.MimeType = r.MIMEType
			if r.Blob != nil {
				b.Data = r.Blob
			} else {
				b.Data = []byte(r.Text)
			}
		}
		return b
	}
	return registry.Block{Type: "content"}
}

// relister relists the tools when the server says they changed: at most
// once per minRelistInterval, and only once the work earlier changes
// caused is paid for (pacer).
func (u *upstream) relister() {
	defer u.wg.Done()
	var last time.Time
	for {
		select {
		case <-u.relist:
		case <-u.ctx.Done():
			return
		}
		if wait := time.Until(last.Add(minRelistInterval)); wait > 0 {
			t := time.NewTimer(wait)
			select {
			case <-t.C:
			case <-u.ctx.Done():
				t.Stop()
				return
			}
		}
		if u.pace.wait(u.ctx) != nil {
			return
		}
		last = time.Now()
		u.mu.Lock()
		c := u.conn
		u.mu.Unlock()
		if c == nil || !c.alive() {
			continue // the next connection lists them anyway
		}
		ctx, cancel := context.WithTimeout(u.ctx, StartTimeout)
		var base []*upstreamTool
		if u.accepted != nil {
			base = u.accepted()
		}
		tools, err := u.listTools(ctx, c, base)
		cancel()
		u.pace.charge(time.Since(last))
		if err != nil {
			u.log.Warn("relisting the MCP server's tools after tools/list_changed", "err", err)
			continue
		}
		u.onList(u, tools)
	}
}

// close stops the server and waits for every goroutine of the upstream.
func (u *upstream) close() {
	u.mu.Lock()
	if u.closed {
		u.mu.Unlock()
		return
	}
	u.closed = true
	c := u.conn
	u.conn = nil
	u.cancel()
	u.mu.Unlock()
	// Wait out a connection attempt in progress (it then sees closed).
	u.connMu.Lock()
	//lint:ignore SA2001 the empty critical section is the wait
	u.connMu.Unlock()
	if c != nil {
		c.close()
	}
	u.wg.Wait()
}

// httpClient returns the client for a streamable HTTP server: headers on
// every request, response bodies bounded before anything decodes them
// (boundResponse), no redirects to another host, bounded dialing.
func httpClient(headers map[string]string) *http.Client {
	base := http.DefaultTransport.(*http.Transport).Clone()
	base.ResponseHeaderTimeout = 0 // a call's context bounds it
	return &http.Client{
		Transport: headerTransport{base: base, headers: headers},
		CheckRedirect: func(req *http.Request, via []*http.Request) error {
			if len(via) >= 5 || req.URL.Host != via[0].URL.Host || req.URL.Scheme != via[0].URL.Scheme {
				return http.ErrUseLastResponse
			}
			return nil
		},
	}
}

type headerTransport struct {
	base    http.RoundTripper
	headers map[string]string
}

func (t headerTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if len(t.headers) > 0 {
		req = req.Clone(req.Context())
		for k, v := range t.headers {
			req.Header.Set(k, v)
		}
	}
	resp, err := t.base.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	// What the body carries is bounded here, before anything decodes it.
	return boundResponse(req, resp), nil
}
