// Command dsh-container runs programs written by language models in
// throwaway hardened containers and lets them call host tools through a
// generated SDK ("Code Mode").
package main

import (
	"os"

	"github.com/dsh-container/dsh-container/tsprep"
)

func main() {
	// First: a type-strip worker is this executable re-executed.
	tsprep.ServeWorkerIfRequested()
	os.Exit(Main(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}
