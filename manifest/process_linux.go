package manifest

import (
	"bufio"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// process is a stdio MCP server's process tree, kept by an init of ours
// (upstreamInitMain: this executable re-executed), talking over pipes this
// side owns (so no os/exec goroutine copies them and Wait never closes them
// under a reader). Its stderr goes to a stderrLog.
//
// The init starts the server's command as its child and stays its parent:
// it forwards SIGTERM, SIGINT and SIGHUP to the server's process group,
// reaps whatever is orphaned below it, reports how the server ended, and
// when the server exits — or this process dies, or asks it to — it ends
// the whole tree. Where the kernel allows, the init is process 1 of a new
// PID namespace with the parent-death signal SIGKILL (isolation
// isoPIDNamespace, or isoUserNamespace when only an unprivileged user
// namespace can create one): when it dies, the kernel kills every process
// in the namespace, so nothing the server started — whatever group or
// session it moved to, however it was forked — outlives it, even when this
// process is killed outright. Where it does not (user namespaces switched
// off), the init is a child subreaper instead (isoSubreaper): orphans below
// it are still its children, and when its control socket closes (this
// process died) it kills them all; that holds unless the init itself is
// killed too.
type process struct {
	cmd       *exec.Cmd // the init
	stdin     *os.File  // our end: the server's standard input
	stdout    *os.File  // our end: the server's standard output
	ctl       *os.File  // our end of the init's control socket
	stderr    *stderrLog
	isolation string

	exited chan struct{} // closed once the init has exited and been reaped
	state  *os.ProcessState
	err    error  // from waiting, when the wait itself failed
	status string // how the server ended, as the init reported it

	mu       sync.Mutex
	dead     bool // the init exited: never signal its pid again
	stopOnce sync.Once
}

// How a stdio server's tree is held.
const (
	isoPIDNamespace  = "pid namespace"
	isoUserNamespace = "user and pid namespaces"
	isoSubreaper     = "subreaper"
)

// stopGrace is how long stop waits after closing the server's input before
// SIGTERM, and after SIGTERM before killing the tree.
const stopGrace = 2 * time.Second

// initStartTimeout bounds how long the init may take to start the server.
const initStartTimeout = 10 * time.Second

// isolations lists how to hold a server's tree, best first. A test may
// narrow it.
var isolations = func() []string {
	if os.Geteuid() == 0 {
		return []string{isoPIDNamespace, isoUserNamespace, isoSubreaper}
	}
	return []string{isoUserNamespace, isoSubreaper}
}

func sysProcAttr(isolation string) *syscall.SysProcAttr {
	switch isolation {
	case isoPIDNamespace:
		return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL, Cloneflags: syscall.CLONE_NEWPID}
	case isoUserNamespace:
		return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL,
			Cloneflags:  syscall.CLONE_NEWUSER | syscall.CLONE_NEWPID,
			UidMappings: []syscall.SysProcIDMap{{ContainerID: os.Getuid(), HostID: os.Getuid(), Size: 1}},
			GidMappings: []syscall.SysProcIDMap{{ContainerID: os.Getgid(), HostID: os.Getgid(), Size: 1}},
		}
	}
	// The subreaper must outlive us to clean up: no parent-death signal;
	// its control socket closing tells it we are gone.
	return &syscall.SysProcAttr{Setpgid: true}
}

// namespaceRefused reports whether a start failed because the kernel
// refused the namespaces (rather than the program).
func namespaceRefused(err error) bool {
	var errno syscall.Errno
	if !errors.As(err, &errno) {
		return false
	}
	switch errno {
	case syscall.EPERM, syscall.EINVAL, syscall.ENOSPC, syscall.EUSERS, syscall.EACCES, syscall.ENOSYS:
		return true
	}
	return false
}

// startProcess starts argv with env under an init, its standard streams on
// fresh pipes.
func startProcess(argv, env []string, stderr *stderrLog, log *slog.Logger) (_ *process, retErr error) {
	path, err := exec.LookPath(argv[0])
	if err != nil {
		return nil, err
	}
	var files []*os.File // the child's ends, ours to close once it has them
	defer func() {
		for _, f := range files {
			f.Close()
		}
	}()
	var ours []*os.File // closed on failure
	defer func() {
		if retErr != nil {
			for _, f := range ours {
				f.Close()
			}
		}
	}()
	pipe := func() (r, w *os.File, err error) {
		r, w, err = os.Pipe()
		return
	}
	inR, inW, err := pipe()
	if err != nil {
		return nil, err
	}
	files, ours = append(files, inR), append(ours, inW)
	outR, outW, err := pipe()
	if err != nil {
		return nil, err
	}
	files, ours = append(files, outW), append(ours, outR)
	errR, errW, err := pipe()
	if err != nil {
		return nil, err
	}
	files, ours = append(files, errW), append(ours, errR)
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	ctl, ctlInit := os.NewFile(uintptr(fds[0]), "init control"), os.NewFile(uintptr(fds[1]), "init control")
	files, ours = append(files, ctlInit), append(ours, ctl)

	var cmd *exec.Cmd
	var isolation string
	var refused []string
	for _, iso := range isolations() {
		cmd = exec.Command("/proc/self/exe", append([]string{path}, argv[1:]...)...)
		cmd.Args[0] = "dsh-container-mcp-init"
		cmd.Env = append(env, upstreamInitEnv+"=1")
		cmd.Stdin, cmd.Stdout, cmd.Stderr = inR, outW, errW
		cmd.ExtraFiles = []*os.File{ctlInit}
		cmd.SysProcAttr = sysProcAttr(iso)
		if err = cmd.Start(); err == nil {
			isolation = iso
			break
		}
		if !namespaceRefused(err) {
			return nil, fmt.Errorf("cannot start its init: %w", err)
		}
		refused = append(refused, fmt.Sprintf("%s: %v", iso, err))
	}
	if isolation == "" {
		return nil, fmt.Errorf("cannot start its init: %s", strings.Join(refused, "; "))
	}
	if isolation == isoSubreaper {
		log.Warn("the kernel refused a PID namespace for the MCP server (user namespaces are off?): its processes are held by a subreaper instead, which kills them when this process dies unless it is killed too",
			"refused", strings.Join(refused, "; "))
	}
	p := &process{cmd: cmd, stdin: inW, stdout: outR, ctl: ctl, stderr: stderr, isolation: isolation, exited: make(chan struct{})}
	stderr.start(errR)
	// The init says "started" or why it could not, then, later, how the
	// server ended.
	first, ctlDone := make(chan string, 1), make(chan struct{})
	go func() {
		defer close(ctlDone)
		sc := bufio.NewScanner(ctl)
		for n := 0; sc.Scan(); n++ {
			if n == 0 {
				first <- sc.Text()
			} else {
				p.status = sc.Text() // read once exited is closed
			}
		}
		close(first)
	}()
	go p.wait(ctlDone)
	select {
	case line := <-first:
		if line == "started" {
			return p, nil
		}
		<-p.exited
		if msg, found := strings.CutPrefix(line, "error "); found {
			return nil, errors.New(msg)
		}
		return nil, fmt.Errorf("its init ended before starting it (%s)", p.describe())
	case <-time.After(initStartTimeout):
		p.kill()
		<-p.exited
		return nil, fmt.Errorf("its init did not start it within %v", initStartTimeout)
	}
}

// wait reaps the init and records how the server ended.
func (p *process) wait(ctlDone <-chan struct{}) {
	err := p.cmd.Wait()
	p.mu.Lock()
	p.dead = true
	p.mu.Unlock()
	// The init's control socket closes with it: the rest of its report.
	<-ctlDone
	p.ctl.Close()
	p.state = p.cmd.ProcessState
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		p.err = err
	}
	close(p.exited)
}

// signal sends sig to the init while it lives; it forwards SIGTERM,
// SIGINT and SIGHUP to the server's group.
func (p *process) signal(sig syscall.Signal) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.dead {
		_ = p.cmd.Process.Signal(sig) // pidfd-based: never a reused pid
	}
}

// kill ends the whole tree. In a PID namespace, SIGKILL to the init does
// it (the kernel kills the rest); a subreaper is told to kill its tree by
// its control socket closing, and gets SIGKILL itself if it is slow.
func (p *process) kill() {
	if p.isolation == isoSubreaper {
		if rc, err := p.ctl.SyscallConn(); err == nil {
			_ = rc.Control(func(fd uintptr) { _ = unix.Shutdown(int(fd), unix.SHUT_WR) })
		}
		select {
		case <-p.exited:
			return
		case <-time.After(stopGrace):
		}
	}
	p.signal(syscall.SIGKILL)
}

// stop ends the server the way the MCP specification asks a client to:
// close its input, wait, SIGTERM, wait, kill the tree. It returns when the
// init is reaped and the stderr reader is done. Idempotent.
func (p *process) stop() {
	p.stopOnce.Do(func() {
		p.stdin.Close()
		p.stdout.Close()
		select {
		case <-p.exited:
		case <-time.After(stopGrace):
			p.signal(syscall.SIGTERM)
			select {
			case <-p.exited:
			case <-time.After(stopGrace):
				p.kill()
			}
		}
		<-p.exited
		p.stderr.wait()
	})
}

// exitStatus describes how the server ended, waiting up to d for it;
// exited says it has.
func (p *process) exitStatus(d time.Duration) (status string, exited bool) {
	select {
	case <-p.exited:
	case <-time.After(d):
		return "still running", false
	}
	return p.describe(), true
}

// describe is how the server ended: as the init reported it, else how the
// init itself ended.
func (p *process) describe() string {
	if kind, n, ok := strings.Cut(p.status, " "); ok {
		if v, err := strconv.Atoi(n); err == nil {
			switch kind {
			case "exit":
				return fmt.Sprintf("exit status %d", v)
			case "signal":
				return fmt.Sprintf("killed by signal %d (%v)", v, syscall.Signal(v))
			}
		}
	}
	if p.err != nil {
		return p.err.Error()
	}
	if ws, ok := p.state.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return fmt.Sprintf("killed by signal %d (%v)", int(ws.Signal()), ws.Signal())
	}
	return fmt.Sprintf("exit status %d", p.state.ExitCode())
}
