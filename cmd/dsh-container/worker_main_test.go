package main

import (
	"os"
	"testing"

	"github.com/dsh-container/dsh-container/tsprep"
)

// TestMain serves the type-strip workers this test binary re-executes: its
// tests run TypeScript through container runtimes in-process.
func TestMain(m *testing.M) {
	tsprep.ServeWorkerIfRequested()
	os.Exit(m.Run())
}
