package tsprep

import (
	"os"
	"testing"
)

// TestMain serves the type-strip workers this test binary re-executes.
func TestMain(m *testing.M) {
	ServeWorkerIfRequested()
	os.Exit(m.Run())
}
