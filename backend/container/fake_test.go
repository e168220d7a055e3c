package container

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/containerd/errdefs"
	"github.com/gorilla/websocket"

	"github.com/dsh-container/dsh-container/backend"
	"github.com/dsh-container/dsh-container/portproto"
)

// fakeDriver stands in for a container engine in unit tests of the run
// logic. Start runs a Go "runner" script that speaks raw websocket frames
// to the host's bridge socket, so every hostile-peer behaviour can be
// scripted. Claims about real containers are tested in e2e/.
type fakeDriver struct {
	t      *testing.T
	script func(ctx context.Context, r *fakeRunner) ExitStatus
	cpu    func(elapsed time.Duration) time.Duration
	// peak, when set, is the container's peak memory (MemoryMeter).
	peak func() int64

	mu         sync.Mutex
	containers map[string]*fakeContainer
	created    int
	wg         sync.WaitGroup
	// rt is closed by checkNoLeaks first: containers are removed in the
	// background after Run returns, and Close waits for that.
	rt *Runtime
}

type fakeContainer struct {
	spec    Spec
	exit    chan ExitStatus
	cancel  context.CancelFunc
	started time.Time
	outW    *io.PipeWriter
	errW    *io.PipeWriter
	outR    *io.PipeReader
	errR    *io.PipeReader
}

// fakeRunner is the scripted peer.
type fakeRunner struct {
	t    *testing.T
	Conn *websocket.Conn
	Dir  string
	Out  io.Writer
	Err  io.Writer
	// Lang is the language the runner says hello in (typescript unless
	// set).
	Lang backend.Language
}

func (r *fakeRunner) send(v any) error {
	if s, ok := v.(string); ok {
		return r.Conn.WriteMessage(websocket.TextMessage, []byte(s))
	}
	return r.Conn.WriteJSON(v)
}

func (r *fakeRunner) hello() error {
	lang := "typescript"
	if r.Lang != "" {
		lang = string(r.Lang)
	}
	return r.send(portproto.Hello{Type: portproto.TypeHello, Version: 1, Language: lang, Runner: "fake/1"})
}

// handshake says hello and reads the run frame.
func (r *fakeRunner) handshake() (*portproto.Run, error) {
	if err := r.hello(); err != nil {
		return nil, err
	}
	_, data, err := r.Conn.ReadMessage()
	if err != nil {
		return nil, err
	}
	m, err := portproto.Decode(portproto.HostToRunner, data, 0)
	if err != nil {
		return nil, err
	}
	return m.(*portproto.Run), nil
}

func (r *fakeRunner) readResult() (*portproto.Result, error) {
	_, data, err := r.Conn.ReadMessage()
	if err != nil {
		return nil, err
	}
	m, err := portproto.Decode(portproto.HostToRunner, data, 0)
	if err != nil {
		return nil, err
	}
	return m.(*portproto.Result), nil
}

func dialBridge(dir string) (*websocket.Conn, *http.Response, error) {
	d := websocket.Dialer{
		NetDialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var nd net.Dialer
			return nd.DialContext(ctx, "unix", filepath.Join(dir, SocketName))
		},
		HandshakeTimeout: 5 * time.Second,
	}
	return d.Dial("ws://bridge/v1", nil)
}

func newFakeDriver(t *testing.T, script func(ctx context.Context, r *fakeRunner) ExitStatus) *fakeDriver {
	return &fakeDriver{t: t, script: script, containers: map[string]*fakeContainer{}}
}

func (d *fakeDriver) Create(_ context.Context, s Spec) (string, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.created++
	id := fmt.Sprintf("fake-%d", d.created)
	c := &fakeContainer{spec: s, exit: make(chan ExitStatus, 1)}
	c.outR, c.outW = io.Pipe()
	c.errR, c.errW = io.Pipe()
	d.containers[id] = c
	return id, nil
}

func (d *fakeDriver) get(id string) (*fakeContainer, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	c, ok := d.containers[id]
	if !ok {
		return nil, fmt.Errorf("container %s: %w", id, errdefs.ErrNotFound)
	}
	return c, nil
}

func (d *fakeDriver) Capabilities() Capabilities {
	return Capabilities{Name: "fake", Runtimes: []string{"fake"}, DefaultRuntime: "fake"}
}

func (d *fakeDriver) Endpoint(_ context.Context, req EndpointRequest) (*Endpoint, error) {
	return NewUnixEndpoint(req.SocketDir)
}

func (d *fakeDriver) StartAttached(ctx context.Context, id string) (Streams, error) {
	c, err := d.get(id)
	if err != nil {
		return Streams{}, err
	}
	if err := d.Start(ctx, id); err != nil {
		return Streams{}, err
	}
	return Streams{Stdout: c.outR, Stderr: c.errR, Close: func() error { c.outR.Close(); c.errR.Close(); return nil }}, nil
}

func (d *fakeDriver) Wait(_ context.Context, id string) (<-chan ExitStatus, error) {
	c, err := d.get(id)
	if err != nil {
		return nil, err
	}
	return c.exit, nil
}

func (d *fakeDriver) Start(_ context.Context, id string) error {
	c, err := d.get(id)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(context.Background())
	d.mu.Lock()
	c.cancel = cancel
	d.mu.Unlock()
	c.started = time.Now()
	d.wg.Add(1)
	go func() {
		defer d.wg.Done()
		defer c.outW.Close()
		defer c.errW.Close()
		conn, _, err := dialBridge(c.spec.BindDir)
		if err != nil {
			c.exit <- ExitStatus{Code: 70}
			return
		}
		// Removing the container kills the runner: close its connection.
		stop := context.AfterFunc(ctx, func() { conn.Close() })
		defer stop()
		st := d.script(ctx, &fakeRunner{t: d.t, Conn: conn, Dir: c.spec.BindDir, Out: c.outW, Err: c.errW, Lang: backend.Language(c.spec.Labels[LabelLang])})
		conn.Close()
		c.exit <- st
	}()
	return nil
}

func (d *fakeDriver) CPUUsage(_ context.Context, id string) (time.Duration, error) {
	c, err := d.get(id)
	if err != nil {
		return 0, err
	}
	if d.cpu == nil {
		return 0, nil
	}
	return d.cpu(time.Since(c.started)), nil
}

func (d *fakeDriver) MemoryPeak(_ context.Context, id string) (int64, error) {
	if _, err := d.get(id); err != nil {
		return 0, err
	}
	if d.peak == nil {
		return 0, fmt.Errorf("no memory figures: %w", errdefs.ErrNotImplemented)
	}
	return d.peak(), nil
}

// Kill stops the container's runner; the container stays until Remove.
func (d *fakeDriver) Kill(_ context.Context, id string) error {
	d.mu.Lock()
	c, ok := d.containers[id]
	var cancel context.CancelFunc
	if ok {
		cancel = c.cancel
	}
	d.mu.Unlock()
	if !ok {
		return fmt.Errorf("container %s: %w", id, errdefs.ErrNotFound)
	}
	if cancel != nil {
		cancel()
	}
	return nil
}

func (d *fakeDriver) Remove(_ context.Context, id string) error {
	d.mu.Lock()
	c, ok := d.containers[id]
	delete(d.containers, id)
	var cancel context.CancelFunc
	if ok {
		cancel = c.cancel
	}
	d.mu.Unlock()
	if !ok {
		return fmt.Errorf("container %s: %w", id, errdefs.ErrNotFound)
	}
	if cancel != nil {
		cancel()
	}
	return nil
}

func (d *fakeDriver) List(_ context.Context, label, value string) ([]ContainerInfo, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	var out []ContainerInfo
	for id, c := range d.containers {
		if c.spec.Labels[label] == value {
			out = append(out, ContainerInfo{ID: id, Labels: c.spec.Labels})
		}
	}
	return out, nil
}

// checkNoLeaks asserts every container was removed and every socket
// directory deleted, after waiting for the scripted runners to stop.
func (d *fakeDriver) checkNoLeaks(t *testing.T, sockDir string) {
	t.Helper()
	if d.rt != nil {
		if err := d.rt.Close(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	d.wg.Wait()
	d.mu.Lock()
	n := len(d.containers)
	d.mu.Unlock()
	if n != 0 {
		t.Errorf("%d container(s) left", n)
	}
	entries, _ := os.ReadDir(sockDir)
	if len(entries) != 0 {
		t.Errorf("socket directories left: %v", entries)
	}
}

func echoBindings() []backend.BindingNamespace {
	return []backend.BindingNamespace{{Global: "tools", Functions: map[string]backend.BindingFunc{
		"echo": func(_ context.Context, args json.RawMessage) (json.RawMessage, error) { return args, nil },
		"fail": func(context.Context, json.RawMessage) (json.RawMessage, error) {
			return nil, fmt.Errorf("tool failed on purpose")
		},
	}}}
}

// shortDir makes a socket directory with a short path (Unix socket paths
// are limited to 108 bytes; t.TempDir's are too long).
func shortDir(t *testing.T) (string, error) {
	t.Helper()
	dir, err := os.MkdirTemp("", "dshc")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir, nil
}

func shortDirB(b *testing.B) (string, error) {
	dir, err := os.MkdirTemp("", "dshc")
	if err == nil {
		b.Cleanup(func() { os.RemoveAll(dir) })
	}
	return dir, err
}

func newTestRuntime(t *testing.T, d Driver, mod func(*Limits), opts ...Option) (*Runtime, string) {
	t.Helper()
	dir, _ := shortDir(t)
	l := DefaultLimits()
	l.WallTime = 30 * time.Second
	l.StartupTime = 30 * time.Second
	if mod != nil {
		mod(&l)
	}
	rt, err := New(d, append([]Option{WithImage("fake"), WithLimits(l), WithSocketDir(dir)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rt.Close(context.Background()) })
	if fd, ok := d.(*fakeDriver); ok {
		fd.rt = rt
	}
	return rt, dir
}
