package registry

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package if any goroutine outlives the tests: every run
// must drain to quiescence.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
