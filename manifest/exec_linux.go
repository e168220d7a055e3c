package manifest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
)

// runGroup runs argv as the leader of a new process group with stdin on
// its standard input and waits for it. When ctx is done first, it kills
// the group and the leader and reports killed. Whatever the outcome,
// every process left in the group has been sent SIGKILL when it returns.
//
// A process group id is the leader's pid, and a pid is not reused while
// its process is an unreaped zombie. So the group is only ever signalled
// while the leader is alive or a zombie not yet reaped: after the leader
// exits, runGroup waits for it without reaping (waitid WNOWAIT), kills the
// group, and only then lets Cmd.Wait reap it. A signal to a reused pgid
// would hit an unrelated process group.
func runGroup(ctx context.Context, argv []string, stdin []byte, stdout, stderr io.Writer) (killed bool, err error) {
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Stdin = bytes.NewReader(stdin)
	cmd.Stdout, cmd.Stderr = stdout, stderr
	// Pdeathsig kills the tool if the host dies. Linux sends it when the
	// thread that forked exits (go.dev/issue/27505); the Go runtime ends a
	// thread only when a goroutine exits locked to it (LockOSThread), which
	// neither this module nor its dependencies do. A host embedding this
	// package that does so may see a tool killed early, never one left over.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	cmd.WaitDelay = waitDelay

	var (
		mu     sync.Mutex
		exited bool // the leader has exited; it may be reaped from now on
	)
	cmd.Cancel = func() error {
		mu.Lock()
		defer mu.Unlock()
		if exited {
			return os.ErrProcessDone // the group was killed already
		}
		killed = true
		killGroup(cmd.Process.Pid)
		// The leader too, in case it left its group; the pidfd-based
		// Process.Kill cannot hit a reused pid.
		if err := cmd.Process.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
			return err
		}
		return nil
	}
	if err := cmd.Start(); err != nil {
		return false, err
	}

	werr := waitExited(cmd.Process.Pid)
	mu.Lock()
	exited = true
	if werr == nil {
		killGroup(cmd.Process.Pid)
	} else {
		_ = cmd.Process.Kill() // cannot happen; never leave it running
	}
	mu.Unlock()

	err = cmd.Wait()
	mu.Lock()
	defer mu.Unlock()
	if werr != nil {
		return killed, fmt.Errorf("waiting for the tool's process: %w", werr)
	}
	return killed, err
}

// waitExited blocks until the child pid has exited, leaving it unreaped.
func waitExited(pid int) error {
	var info unix.Siginfo
	for {
		err := unix.Waitid(unix.P_PID, pid, &info, unix.WEXITED|unix.WNOWAIT, nil)
		if err != unix.EINTR {
			return err
		}
	}
}

// killGroup sends SIGKILL to the process group pgid. Errors are ignored:
// ESRCH means the group is empty, and a member that cannot be signalled
// (EPERM: a setuid program) is beyond our reach anyway.
func killGroup(pgid int) {
	if pgid <= 1 {
		// kill(0) would signal our own group and kill(-1) every process
		// we may signal: never.
		return
	}
	_ = syscall.Kill(-pgid, syscall.SIGKILL)
}
