package redisstore_test

import (
	"context"
	"fmt"
	"os"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/sluicehq/sluice/internal/redistest"
	"go.uber.org/goleak"
)

// quiet drops go-redis's log lines: the fault tests dial a dead server on
// purpose.
type quiet struct{}

func (quiet) Printf(context.Context, string, ...any) {}

func TestMain(m *testing.M) {
	redis.SetLogger(quiet{})
	srv, err := redistest.Launch()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	// The examples read their Redis's address from REDIS_ADDR, as a
	// service would from its configuration ("" is go-redis's default,
	// localhost:6379): here, the redis-server started on a free port.
	if err := os.Setenv("REDIS_ADDR", srv.Addr); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	srv.Close()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.Exit(code)
}
