package interceptors

import (
	"context"
	"testing"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"
)

// redisQuiet drops go-redis's log lines: the Redis tests stop the server on
// purpose.
type redisQuiet struct{}

func (redisQuiet) Printf(context.Context, string, ...any) {}

// TestMain fails the package's tests if any of them leaves a goroutine
// running: every server, listener and connection a test opens must be closed.
func TestMain(m *testing.M) {
	redis.SetLogger(redisQuiet{})
	goleak.VerifyTestMain(m)
}
