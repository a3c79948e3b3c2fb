package redisstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/redistest"
	"github.com/sluicehq/sluice/ratelimit"
	"github.com/sluicehq/sluice/ratelimit/redisstore"
)

// TestSteppedBackExpiry: a key written by a request whose time reads
// earlier than the key's last decision expires no sooner than its reset
// time, measured like ResetAfter from the request's time (the units are
// counted at the key's time).
func TestSteppedBackExpiry(t *testing.T) {
	srv := redistest.Start(t)
	c := client(t, srv.Addr)
	s := newStore(t, c, redisstore.WithCallerTime(), redisstore.WithRefusalCache(0), redisstore.WithPrefix("sb:"))
	ctx := context.Background()
	T := time.Unix(4102444800, 0) // a whole number of 2-minute windows
	for _, alg := range algs {
		t.Run(alg.String(), func(t *testing.T) {
			p, err := ratelimit.NewPolicy(alg, ratelimit.Limit{Rate: 10, Period: 2 * time.Minute})
			if err != nil {
				t.Fatal(err)
			}
			for i, tc := range []struct {
				at time.Time
				n  int
			}{{T, 5}, {T.Add(-100 * time.Second), 1}} {
				reqs := []ratelimit.Request{{Key: alg.String(), Policy: &p, N: tc.n}}
				if err := s.Apply(ctx, tc.at, reqs); err != nil {
					t.Fatal(err)
				}
				r := reqs[0].Result
				if !r.Allowed {
					continue // nothing written
				}
				keys, err := c.Keys(ctx, "sb:{"+alg.String()+"}:*").Result()
				if err != nil || len(keys) != 1 {
					t.Fatalf("keys %q, %v", keys, err)
				}
				ttl, err := c.PTTL(ctx, keys[0]).Result()
				if err != nil {
					t.Fatal(err)
				}
				if ttl+time.Second < r.ResetAfter {
					t.Errorf("request %d (%v): %+v, but the key expires in %v", i, tc.at.Sub(T), r, ttl)
				}
			}
		})
	}
}
