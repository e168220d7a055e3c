// Command forgetful is a program that uses a tsprep.Stripper, built by
// tsprep's TestServeWorkerIfRequestedIsNeeded. What it does is read from
// the file "mode" in its working directory, which a worker it starts
// inherits (a worker gets no arguments and an environment of its own):
//
//   - "first": it calls tsprep.ServeWorkerIfRequested first thing, as it
//     should;
//   - "never": it never calls it;
//   - "parent-hang", "parent-print": it calls it only when it has
//     arguments, so a worker (started without any) runs its normal work
//     instead: it hangs, or prints a usage line and exits;
//   - "parent-spawn": the same, and the worker's normal work starts a
//     shell (/bin/sh: a worker has no PATH) that inherits its output, writes its pid to the file
//     "children", and writes the file "finished" after 20 s unless it is
//     killed first; the worker hangs;
//   - "parent-print-twice": as "parent-print", and the parent prepares
//     two programs.
//
// A started process appends its pid to the file "started". The parent
// prepares one program and prints "ok" or "error: <the error>".
package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"

	"github.com/dsh-container/dsh-container/tsprep"
)

func main() {
	b, _ := os.ReadFile("mode")
	mode := strings.TrimSpace(string(b))
	if mode == "first" {
		tsprep.ServeWorkerIfRequested()
	}
	f, err := os.OpenFile("started", os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err == nil {
		fmt.Fprintln(f, os.Getpid())
		f.Close()
	}
	if len(os.Args) == 1 {
		// Run without arguments: the program's normal work.
		if mode == "parent-spawn" {
			sh := exec.Command("/bin/sh", "-c", "/bin/sleep 20; echo done > finished")
			sh.Stdout, sh.Stderr = os.Stdout, os.Stderr
			if err := sh.Start(); err == nil {
				_ = os.WriteFile("children", []byte(strconv.Itoa(sh.Process.Pid)), 0o644)
			}
		}
		if mode == "parent-print" || mode == "parent-print-twice" {
			fmt.Println("usage: forgetful ARG")
			os.Exit(2)
		}
		time.Sleep(time.Hour)
		return
	}
	if strings.HasPrefix(mode, "parent-") {
		tsprep.ServeWorkerIfRequested()
	}
	var l tsprep.Limits // a worker that serves gets the default handshake limit
	if mode != "first" {
		l.Handshake = 2 * time.Second
	}
	s := tsprep.NewStripper(1, l)
	defer s.Close()
	programs := 1
	if mode == "parent-print-twice" {
		programs = 2
	}
	for range programs {
		p, err := s.Prepare(context.Background(), "const x: number = 1\nreturn x")
		switch {
		case err != nil:
			fmt.Println("error:", err)
		case strings.Contains(p.Program, "return x"):
			fmt.Println("ok")
		default:
			fmt.Printf("unexpected program %q\n", p.Program)
		}
	}
}
