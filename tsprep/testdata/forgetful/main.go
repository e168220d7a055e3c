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
//     instead: it hangs, or prints a usage line and exits.
//
// A started process appends its pid to the file "started". The parent
// prepares one program and prints "ok" or "error: <the error>".
package main

import (
	"context"
	"fmt"
	"os"
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
		if mode == "parent-print" {
			fmt.Println("usage: forgetful ARG")
			os.Exit(2)
		}
		time.Sleep(time.Hour)
		return
	}
	if strings.HasPrefix(mode, "parent-") {
		tsprep.ServeWorkerIfRequested()
	}
	s := tsprep.NewStripper(1, tsprep.Limits{Handshake: 2 * time.Second})
	defer s.Close()
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
