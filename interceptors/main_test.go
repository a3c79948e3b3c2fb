package interceptors

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package's tests if any of them leaves a goroutine
// running: every server, listener and connection a test opens must be closed.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
