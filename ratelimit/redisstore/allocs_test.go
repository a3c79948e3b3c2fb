package redisstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/redistest"
	"github.com/sluicehq/sluice/ratelimit"
)

// TestAllocsPerDecision bounds the client's allocations per decision on the
// hot path (a single Allow, script cached): the bound is what this store
// adds to go-redis's own command allocations. Two of them register the call
// with the store's abort epoch, so that a refused connection cancels it at
// once (see failfast.go).
func TestAllocsPerDecision(t *testing.T) {
	if testing.Short() {
		t.Skip("needs a redis-server")
	}
	srv := redistest.Start(t)
	s := newStore(t, client(t, srv.Addr))
	ctx := context.Background()
	if err := s.Preload(ctx); err != nil {
		t.Fatal(err)
	}
	l, err := ratelimit.New(ratelimit.GCRA, ratelimit.Limit{Rate: 1 << 30, Period: time.Second}, ratelimit.WithStore(s))
	if err != nil {
		t.Fatal(err)
	}
	l.Allow(ctx, "warm")
	allocs := testing.AllocsPerRun(200, func() {
		if _, err := l.Allow(ctx, "user:42"); err != nil {
			t.Fatal(err)
		}
	})
	t.Logf("%.1f allocations per decision", allocs)
	if allocs > 22 {
		t.Fatalf("%.1f allocations per decision, want at most 22", allocs)
	}
}
