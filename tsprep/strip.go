package tsprep

import (
	"bufio"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// The TypeScript type-strip runs esbuild on untrusted text. esbuild's
// parser recurses without a bound, keeps large ASTs and backtracks
// super-linearly on some inputs (nested arrow functions), and a Go stack
// overflow or out-of-memory is fatal to the whole process. So the host
// never runs it in its own process: a Stripper keeps a few worker
// processes — this same executable, re-executed with stripWorkerEnv set,
// served by ServeWorkerIfRequested — and sends each program to one of them. A worker runs with a small stack,
// a memory ceiling it enforces on itself and one CPU; the host gives it a
// time limit. A program that makes a worker die or overrun is an exception
// naming the limit, the worker is replaced, and the host is untouched.
//
// checkProgram rejects the known deep shapes first, with a precise
// message; the worker's limits are the backstop for everything else.

// The default limits of a type-strip worker. They bound one program's
// preparation; a real program at the size cap needs a few MiB and
// milliseconds.
const (
	// StackBytes is a worker's maximum goroutine stack.
	StackBytes = 64 << 20
	// MemoryBytes is the memory a worker's Go runtime may hold before it
	// exits.
	MemoryBytes = 512 << 20
	// TimeLimit bounds the type-strip of one program.
	TimeLimit = 5 * time.Second
	// HandshakeLimit bounds how long a new worker has to answer its
	// handshake: a process that has not called ServeWorkerIfRequested by
	// then is killed.
	HandshakeLimit = 10 * time.Second
)

// Limits are a Stripper's limits; a zero field takes its default.
type Limits struct {
	StackBytes, MemoryBytes int
	Time, Handshake         time.Duration
}

func (l Limits) orDefaults() Limits {
	if l.StackBytes <= 0 {
		l.StackBytes = StackBytes
	}
	if l.MemoryBytes <= 0 {
		l.MemoryBytes = MemoryBytes
	}
	if l.Time <= 0 {
		l.Time = TimeLimit
	}
	if l.Handshake <= 0 {
		l.Handshake = HandshakeLimit
	}
	return l
}

// stripWorkerEnv, set to "1", makes this executable a type-strip worker:
// see ServeWorkerIfRequested.
const stripWorkerEnv = "DSH_CONTAINER_STRIP_WORKER"

// hello is a worker's first output, before it reads a request: a process
// that writes anything else, or nothing within the handshake limit, is not
// serving (its main did not call ServeWorkerIfRequested).
const hello = "dsh-container tsprep worker v1\n"

// A worker's stack and memory limits, in bytes, from its environment.
const (
	stripStackEnv  = "DSH_CONTAINER_STRIP_STACK"
	stripMemoryEnv = "DSH_CONTAINER_STRIP_MEMORY"
)

// exitStripMemory is a worker's exit status when it passed its memory
// ceiling.
const exitStripMemory = 3

// registered records that this process called ServeWorkerIfRequested: a
// Stripper starts no worker in a process that has not, since the worker
// would be this program's main re-executed doing its normal work.
var registered atomic.Bool

// ServeWorkerIfRequested makes this process a type-strip worker when a
// Stripper started it: it then serves, and exits, never returning. In any
// other process it returns at once. A program that uses a Stripper (a
// container runtime for TypeScript, say) must call it first thing in main,
// and a test package that strips in-process from its TestMain:
//
//	func main() {
//		tsprep.ServeWorkerIfRequested()
//		...
//	}
//
// A worker is this executable re-executed (the pattern of moby's reexec
// and runsc) with no arguments and an environment of the worker's own
// only, so it runs the program's package initialisation and its main up
// to this call: call it before main does anything else. A program that
// never calls it gets an error naming it from the Stripper, which then
// starts no process; one whose re-executed main does not reach the call
// (behind a flag, say) is killed when it has not answered the worker's
// handshake within Limits.Handshake, with the same error.
func ServeWorkerIfRequested() {
	registered.Store(true)
	if os.Getenv(stripWorkerEnv) == "1" {
		os.Exit(stripWorkerMain(os.Stdin, os.Stdout))
	}
}

// stripRequest and stripResponse are the worker protocol: each message is
// a 4-byte big-endian length and that many bytes; a request is the
// program's source, a response this JSON.
type stripResponse struct {
	Program   string        `json:"program"`
	SourceMap string        `json:"sourceMap,omitempty"`
	Errors    []stripErrMsg `json:"errors,omitempty"`
}

type stripErrMsg struct {
	// Line and Column are 1-based positions in the model's source; 0 when
	// esbuild gave none.
	Line   int    `json:"line"`
	Column int    `json:"column"`
	Text   string `json:"text"`
}

// maxStripMessage bounds a message in either direction.
const maxStripMessage = 64 << 20

func writeMessage(w io.Writer, b []byte) error {
	var hdr [4]byte
	binary.BigEndian.PutUint32(hdr[:], uint32(len(b)))
	if _, err := w.Write(hdr[:]); err != nil {
		return err
	}
	_, err := w.Write(b)
	return err
}

func readMessage(r io.Reader) ([]byte, error) {
	var hdr [4]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return nil, err
	}
	n := binary.BigEndian.Uint32(hdr[:])
	if n > maxStripMessage {
		return nil, fmt.Errorf("type-strip message of %d bytes exceeds %d", n, maxStripMessage)
	}
	b := make([]byte, n)
	_, err := io.ReadFull(r, b)
	return b, err
}

// stripWorkerMain says hello, then serves requests until its input closes.
func stripWorkerMain(in io.Reader, out io.Writer) int {
	stack, memory := envBytes(stripStackEnv, StackBytes), envBytes(stripMemoryEnv, MemoryBytes)
	debug.SetMaxStack(stack)
	debug.SetMemoryLimit(int64(memory / 2))
	runtime.GOMAXPROCS(1)
	r, w := bufio.NewReader(in), bufio.NewWriter(out)
	if _, err := w.WriteString(hello); err != nil || w.Flush() != nil {
		return 1
	}
	for {
		src, err := readMessage(r)
		if err != nil {
			return 0 // the host closed our input: done
		}
		// Watched only while it works: an idle worker allocates nothing,
		// and must not wake every 2 ms for nothing.
		stop := make(chan struct{})
		watched := make(chan struct{})
		go func() { defer close(watched); watchMemory(uint64(memory), stop) }()
		res := stripTS(string(src))
		close(stop)
		<-watched
		resp, err := json.Marshal(res)
		if err != nil {
			fmt.Fprintln(os.Stderr, "type-strip worker:", err)
			return 1
		}
		if writeMessage(w, resp) != nil || w.Flush() != nil {
			return 1
		}
	}
}

func envBytes(name string, def int) int {
	if n, err := strconv.Atoi(os.Getenv(name)); err == nil && n > 0 {
		return n
	}
	return def
}

// watchMemory ends the worker when its Go runtime holds more than limit
// bytes, until stop closes: an allocation can no more be refused than a
// stack overflow caught, so the ceiling is enforced from the side.
func watchMemory(limit uint64, stop <-chan struct{}) {
	sample := []metrics.Sample{{Name: "/memory/classes/total:bytes"}}
	tick := time.NewTicker(2 * time.Millisecond)
	defer tick.Stop()
	for {
		metrics.Read(sample)
		if sample[0].Value.Kind() == metrics.KindUint64 && sample[0].Value.Uint64() > limit {
			fmt.Fprintf(os.Stderr, "type-strip worker: memory ceiling of %d bytes passed\n", limit)
			os.Exit(exitStripMemory)
		}
		select {
		case <-stop:
			return
		case <-tick.C:
		}
	}
}

// A Stripper hands programs to worker processes and replaces a worker that
// dies or overruns. Its methods are safe for concurrent use.
type Stripper struct {
	// slots bounds the workers busy at once.
	slots chan struct{}
	// lim is the limits; a worker learns its own from its environment.
	lim Limits

	mu     sync.Mutex
	idle   []*stripProc
	closed bool
	// refused is the first handshake a worker answered with something
	// other than the hello, or did not answer before it exited: this
	// executable's main does not serve workers, and re-executing it again
	// would run its normal work again. Later strips get the same error.
	// A worker silent until the handshake limit is not remembered (a
	// machine that loaded may be all it was).
	refused error
}

// NewStripper returns a Stripper that runs at most workers workers at once
// (and so strips that many programs at once) under l. It starts a worker
// when a program needs one; Close stops them.
func NewStripper(workers int, l Limits) *Stripper {
	return &Stripper{slots: make(chan struct{}, max(workers, 1)), lim: l.orDefaults()}
}

// stripProc is one worker process.
type stripProc struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	stdout *bufio.Reader
	stderr *headBuffer
	// exited is closed once the process has been waited for.
	exited chan struct{}
	// The worker's limits, for messages.
	stackBytes, memoryBytes int
}

// errStripFailed marks a program whose type-strip the worker could not
// finish: its message is the exception the program gets.
type errStripFailed struct{ msg string }

func (e *errStripFailed) Error() string { return e.msg }

// strip type-strips src in a worker. It returns the worker's response, an
// *errStripFailed for a program that broke a worker limit, ctx's error
// when cancelled, or a *WorkerError when no worker could run.
func (s *Stripper) strip(ctx context.Context, src string) (stripResponse, error) {
	select {
	case s.slots <- struct{}{}:
	case <-ctx.Done():
		return stripResponse{}, ctx.Err()
	}
	defer func() { <-s.slots }()
	p, err := s.get(ctx)
	if err != nil {
		return stripResponse{}, err
	}
	resp, err := p.do(ctx, src, s.lim.Time)
	if err != nil {
		p.kill()
		return stripResponse{}, err
	}
	s.put(p)
	return resp, nil
}

func (s *Stripper) get(ctx context.Context) (*stripProc, error) {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil, errors.New("runtime is closed")
	}
	if n := len(s.idle); n > 0 {
		p := s.idle[n-1]
		s.idle = s.idle[:n-1]
		s.mu.Unlock()
		return p, nil
	}
	if err := s.refused; err != nil {
		s.mu.Unlock()
		return nil, err
	}
	s.mu.Unlock()
	p, err := startStripProc(ctx, s.lim)
	var refused *handshakeRefused
	if errors.As(err, &refused) {
		s.mu.Lock()
		if s.refused == nil {
			s.refused = refused.WorkerError
		}
		s.mu.Unlock()
		return nil, refused.WorkerError
	}
	return p, err
}

// handshakeRefused is a handshake answered wrongly, or not answered by a
// worker that exited: Stripper.get remembers it.
type handshakeRefused struct{ *WorkerError }

func (s *Stripper) put(p *stripProc) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		p.kill()
		return
	}
	s.idle = append(s.idle, p)
}

// Close stops the idle workers and makes later strips fail; a strip in
// progress finishes and its worker is then stopped. Idempotent.
func (s *Stripper) Close() {
	s.mu.Lock()
	s.closed = true
	idle := s.idle
	s.idle = nil
	s.mu.Unlock()
	for _, p := range idle {
		p.kill()
	}
}

// startStripProc starts a worker and waits for its hello.
func startStripProc(ctx context.Context, l Limits) (*stripProc, error) {
	if !registered.Load() {
		return nil, workerError("type-strip worker: call tsprep.ServeWorkerIfRequested from main, first thing: the worker is this executable re-executed, and this program has not called it, so no worker was started")
	}
	stackBytes, memoryBytes := l.StackBytes, l.MemoryBytes
	cmd := exec.Command("/proc/self/exe")
	cmd.Args = []string{"dsh-container-type-strip"}
	cmd.Env = []string{stripWorkerEnv + "=1", "GOMAXPROCS=1", "GOTRACEBACK=none",
		fmt.Sprintf("%s=%d", stripStackEnv, stackBytes), fmt.Sprintf("%s=%d", stripMemoryEnv, memoryBytes)}
	// Its own process group, so that kill ends what a re-executed main
	// that never became a worker may have started; WaitDelay, so that a
	// process of that group holding the pipes open cannot hold Wait.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
	cmd.WaitDelay = time.Second
	p := &stripProc{cmd: cmd, stderr: &headBuffer{max: 2 << 10}, exited: make(chan struct{}), stackBytes: stackBytes, memoryBytes: memoryBytes}
	cmd.Stderr = p.stderr
	var err error
	if p.stdin, err = cmd.StdinPipe(); err != nil {
		return nil, workerError("type-strip worker: %w", err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		p.stdin.Close()
		return nil, workerError("type-strip worker: %w", err)
	}
	p.stdout = bufio.NewReader(stdout)
	if err := cmd.Start(); err != nil {
		p.stdin.Close()
		return nil, workerError("cannot start the type-strip worker (%s re-executed): %w", "/proc/self/exe", err)
	}
	go func() {
		_ = cmd.Wait()
		close(p.exited)
	}()
	if err := p.handshake(ctx, l.Handshake); err != nil {
		p.kill()
		return nil, err
	}
	return p, nil
}

// handshake reads the worker's hello within limit. Anything else means the
// process is this program's main re-executed doing its normal work.
func (p *stripProc) handshake(ctx context.Context, limit time.Duration) error {
	got := make(chan []byte, 1)
	go func() {
		b := make([]byte, len(hello))
		n, _ := io.ReadFull(p.stdout, b)
		got <- b[:n]
	}()
	timer := time.NewTimer(limit)
	defer timer.Stop()
	const fix = "call tsprep.ServeWorkerIfRequested from main, first thing: the worker is this executable re-executed, and its main did not reach the call"
	select {
	case b := <-got:
		if string(b) == hello {
			return nil
		}
		p.kill()
		if len(b) == 0 {
			return &handshakeRefused{&WorkerError{fmt.Errorf("the type-strip worker exited without answering its handshake%s; %s", firstLine(p.stderr.String()), fix)}}
		}
		return &handshakeRefused{&WorkerError{fmt.Errorf("the type-strip worker answered its handshake with %q, not the worker's hello; %s", b, fix)}}
	case <-timer.C:
		p.kill()
		<-got
		return workerError("the type-strip worker did not answer its handshake within %v and was killed; %s", limit, fix)
	case <-ctx.Done():
		p.kill()
		<-got
		return ctx.Err()
	}
}

// do sends one program and reads the response within limit.
func (p *stripProc) do(ctx context.Context, src string, limit time.Duration) (stripResponse, error) {
	type result struct {
		b   []byte
		err error
	}
	done := make(chan result, 1)
	go func() {
		if err := writeMessage(p.stdin, []byte(src)); err != nil {
			done <- result{err: err}
			return
		}
		b, err := readMessage(p.stdout)
		done <- result{b, err}
	}()
	timer := time.NewTimer(limit)
	defer timer.Stop()
	var r result
	select {
	case r = <-done:
	case <-timer.C:
		p.kill()
		<-done
		return stripResponse{}, &errStripFailed{fmt.Sprintf("the type-strip of this program took longer than its %v limit (deeply nested functions or types?); simplify the program", limit)}
	case <-ctx.Done():
		p.kill()
		<-done
		return stripResponse{}, ctx.Err()
	}
	if r.err != nil {
		// The worker died: say which limit it met.
		p.kill()
		state := p.cmd.ProcessState
		head := p.stderr.String()
		switch {
		case strings.Contains(head, "stack exceeds") || strings.Contains(head, "stack overflow"):
			return stripResponse{}, &errStripFailed{fmt.Sprintf("the program is nested too deeply to type-strip (the parser passed its %d MiB stack limit); simplify it", p.stackBytes>>20)}
		case state != nil && state.ExitCode() == exitStripMemory, strings.Contains(head, "out of memory"):
			return stripResponse{}, &errStripFailed{fmt.Sprintf("the type-strip of this program needed more than its %d MiB memory limit; simplify it", p.memoryBytes>>20)}
		}
		return stripResponse{}, workerError("the type-strip worker failed: %v%s", r.err, firstLine(head))
	}
	var resp stripResponse
	if err := json.Unmarshal(r.b, &resp); err != nil {
		return stripResponse{}, workerError("the type-strip worker answered badly: %w", err)
	}
	return resp, nil
}

// kill stops the worker, and anything of its process group, and waits
// for it. Idempotent.
func (p *stripProc) kill() {
	p.stdin.Close()
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
	_ = p.cmd.Process.Kill()
	<-p.exited
}

// firstLine renders the first line of a worker's stderr for an error.
func firstLine(s string) string {
	s, _, _ = strings.Cut(strings.TrimSpace(s), "\n")
	if s == "" {
		return ""
	}
	return " (" + s + ")"
}

// headBuffer keeps the first max bytes written to it: a dying Go runtime
// names its cause first, then dumps stacks.
type headBuffer struct {
	mu  sync.Mutex
	max int
	b   []byte
}

func (h *headBuffer) Write(p []byte) (int, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if room := h.max - len(h.b); room > 0 {
		h.b = append(h.b, p[:min(room, len(p))]...)
	}
	return len(p), nil
}

func (h *headBuffer) String() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return string(h.b)
}
