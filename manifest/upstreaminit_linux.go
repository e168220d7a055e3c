package manifest

import (
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// upstreamInitEnv, set to "1", makes this executable the init of a stdio
// MCP server (see process): its arguments are the server's command, fd 3
// its control socket.
const upstreamInitEnv = "DSH_MANIFEST_UPSTREAM_INIT"

func init() {
	if os.Getenv(upstreamInitEnv) == "1" {
		// Straight to exit_group: nothing is left to flush, and a race
		// detector's exit would linger a second with the tree alive.
		syscall.Exit(upstreamInitMain())
	}
}

// upstreamInitMain starts the server's command as its child, in a process
// group of its own with the same standard streams, and then:
//
//   - forwards SIGTERM, SIGINT and SIGHUP to that group (as process 1 of a
//     PID namespace it would otherwise ignore them, and so would a server
//     that is process 1);
//   - reaps every process that ends below it (orphans are its children: it
//     is process 1, or a child subreaper);
//   - when the server exits, writes "exit N" or "signal N" on the control
//     socket and ends the tree;
//   - when the control socket reaches its end (the host is gone, or wants
//     the tree ended), ends the tree.
//
// Ending the tree is exiting as process 1 of a namespace: the kernel kills
// everything else in it. As a subreaper it kills its children until none
// is left (each one's orphans become its children in turn), then exits.
func upstreamInitMain() int {
	os.Unsetenv(upstreamInitEnv)
	ctl := os.NewFile(3, "control")
	syscall.CloseOnExec(3)
	say := func(format string, args ...any) { fmt.Fprintf(ctl, format+"\n", args...) }
	ns := os.Getpid() == 1
	if !ns {
		if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
			say("error cannot become a subreaper: %v", err)
			return 127
		}
	}
	if len(os.Args) < 2 {
		say("error no command")
		return 127
	}
	sigs := make(chan os.Signal, 16)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP, syscall.SIGCHLD)
	proc, err := os.StartProcess(os.Args[1], os.Args[1:], &os.ProcAttr{
		Env:   os.Environ(),
		Files: []*os.File{os.Stdin, os.Stdout, os.Stderr},
		Sys:   &syscall.SysProcAttr{Setpgid: true},
	})
	if err != nil {
		say("error %v", err)
		return 127
	}
	// Only the server holds its streams now: their ends are its ends.
	os.Stdin.Close()
	os.Stdout.Close()
	os.Stderr.Close()
	say("started")
	server := proc.Pid
	hostGone := make(chan struct{})
	go func() {
		buf := make([]byte, 64)
		for {
			if _, err := ctl.Read(buf); err != nil {
				close(hostGone)
				return
			}
		}
	}()
	for {
		select {
		case <-hostGone:
			endTree(ns, server)
			return 137
		case sig := <-sigs:
			if sig != syscall.SIGCHLD {
				_ = syscall.Kill(-server, sig.(syscall.Signal))
				continue
			}
			if ws, ok := reap(server); ok {
				if ws.Signaled() {
					say("signal %d", int(ws.Signal()))
				} else {
					say("exit %d", ws.ExitStatus())
				}
				endTree(ns, server)
				return 0
			}
		}
	}
}

// reap collects every exited child without blocking and returns the wait
// status of want (a pid; 0 for none) when it was among them.
func reap(want int) (status syscall.WaitStatus, found bool) {
	for {
		var ws syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil)
		if err == syscall.EINTR {
			continue
		}
		if pid <= 0 || err != nil {
			return status, found
		}
		if want != 0 && pid == want {
			status, found = ws, true
		}
	}
}

// endTree kills what is left below the init. As process 1 of a PID
// namespace its exit does it; a subreaper kills its group and its
// children, round after round, until it has none.
func endTree(ns bool, server int) {
	if ns {
		return
	}
	_ = syscall.Kill(-server, syscall.SIGKILL)
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); {
		kids := children()
		if len(kids) == 0 {
			return
		}
		for _, pid := range kids {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		reap(0)
		time.Sleep(time.Millisecond)
	}
}

// children lists the init's children, from every thread's list.
func children() []int {
	var out []int
	tasks, _ := filepath.Glob("/proc/self/task/*/children")
	for _, f := range tasks {
		b, _ := os.ReadFile(f)
		for _, s := range strings.Fields(string(b)) {
			if pid, err := strconv.Atoi(s); err == nil {
				out = append(out, pid)
			}
		}
	}
	return out
}
