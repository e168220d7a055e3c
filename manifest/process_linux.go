package manifest

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"
)

// process is a stdio MCP server's process: the leader of its own process
// group, with the parent-death signal, talking over pipes this side owns
// (so no os/exec goroutine copies them and Wait never closes them under
// a reader). Its stderr goes to a stderrLog.
//
// When the leader exits, for any reason, the whole group is killed before
// the leader is reaped (see runGroup for why the order matters), so nothing
// a crashed server started keeps its pipes open or keeps running.
type process struct {
	cmd    *exec.Cmd
	stdin  *os.File // our end: the server's standard input
	stdout *os.File // our end: the server's standard output
	stderr *stderrLog

	exited chan struct{} // closed once the leader has exited and been reaped
	state  *os.ProcessState
	err    error // from waiting, when the wait itself failed

	mu       sync.Mutex
	dead     bool // the leader exited: never signal its pid again
	stopOnce sync.Once
}

// stopGrace is how long stop waits after closing the server's input before
// SIGTERM, and after SIGTERM before SIGKILL.
const stopGrace = 2 * time.Second

// startProcess starts argv with env, its standard streams on fresh pipes.
func startProcess(argv, env []string, stderr *stderrLog) (_ *process, retErr error) {
	inR, inW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		inR.Close()
		inW.Close()
		return nil, err
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		inR.Close()
		inW.Close()
		outR.Close()
		outW.Close()
		return nil, err
	}
	// The child's ends are ours to close once it has them (or failed to).
	defer func() {
		inR.Close()
		outW.Close()
		errW.Close()
		if retErr != nil {
			inW.Close()
			outR.Close()
			errR.Close()
		}
	}()
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = env
	cmd.Stdin, cmd.Stdout, cmd.Stderr = inR, outW, errW
	// See runGroup for the parent-death signal's caveat.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	p := &process{cmd: cmd, stdin: inW, stdout: outR, stderr: stderr, exited: make(chan struct{})}
	stderr.start(errR)
	go p.wait()
	return p, nil
}

// wait reaps the leader after killing its group.
func (p *process) wait() {
	werr := waitExited(p.cmd.Process.Pid)
	p.mu.Lock()
	p.dead = true
	if werr == nil {
		killGroup(p.cmd.Process.Pid)
	} else {
		_ = p.cmd.Process.Kill() // cannot happen; never leave it running
	}
	p.mu.Unlock()
	err := p.cmd.Wait()
	p.state = p.cmd.ProcessState
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		p.err = err
	}
	close(p.exited)
}

// signal sends sig to the group and the leader while the leader lives.
func (p *process) signal(sig syscall.Signal) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.dead {
		return
	}
	if pid := p.cmd.Process.Pid; pid > 1 {
		_ = syscall.Kill(-pid, sig)
	}
	_ = p.cmd.Process.Signal(sig)
}

// stop ends the server the way the MCP specification asks a client to:
// close its input, wait, SIGTERM, wait, SIGKILL — each signal to the whole
// group. It returns when the leader is reaped and the stderr reader is
// done. Idempotent.
func (p *process) stop() {
	p.stopOnce.Do(func() {
		p.stdin.Close()
		p.stdout.Close()
		for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGKILL} {
			select {
			case <-p.exited:
			case <-time.After(stopGrace):
				p.signal(sig)
			}
		}
		<-p.exited
		p.stderr.wait()
	})
}

// exitStatus describes how the leader ended, waiting up to d for it.
func (p *process) exitStatus(d time.Duration) string {
	select {
	case <-p.exited:
	case <-time.After(d):
		return "still running"
	}
	if p.err != nil {
		return p.err.Error()
	}
	if ws, ok := p.state.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return fmt.Sprintf("killed by signal %d (%v)", int(ws.Signal()), ws.Signal())
	}
	return fmt.Sprintf("exit status %d", p.state.ExitCode())
}
