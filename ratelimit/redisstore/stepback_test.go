package redisstore_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/redistest"
	"github.com/sluicehq/sluice/ratelimit"
	"github.com/sluicehq/sluice/ratelimit/redisstore"
)

// TestSteppedBackSlidingLogAfterRefusal is ratelimit's test of the same
// name on Redis: a request that admits nothing (refused, or a query) does
// not drop the stamps that a later request whose time reads earlier still
// counts.
func TestSteppedBackSlidingLogAfterRefusal(t *testing.T) {
	srv := redistest.Start(t)
	s := newStore(t, client(t, srv.Addr), redisstore.WithCallerTime(), redisstore.WithRefusalCache(0))
	p, err := ratelimit.NewPolicy(ratelimit.SlidingLog, ratelimit.Limit{Rate: 10, Period: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	T := time.Unix(4102444800, 0)
	for _, later := range []int{6, 0} {
		key := fmt.Sprint("k", later)
		apply := func(at time.Time, n int) ratelimit.Result {
			t.Helper()
			reqs := []ratelimit.Request{{Key: key, Policy: &p, N: n}}
			if err := s.Apply(context.Background(), at, reqs); err != nil {
				t.Fatal(err)
			}
			return reqs[0].Result
		}
		apply(T, 5)
		apply(T.Add(500*time.Millisecond), 5)
		apply(T.Add(1200*time.Millisecond), later)
		if q := apply(T.Add(1200*time.Millisecond), 0); !q.Allowed || q.Remaining != 5 || q.ResetAfter != 300*time.Millisecond {
			t.Errorf("query at T+1.2s: %+v, want 5 remaining, reset 300ms", q)
		}
		r := apply(T.Add(900*time.Millisecond), 5)
		if r.Allowed || r.Remaining != 0 || r.RetryAfter != 100*time.Millisecond || r.ResetAfter != 600*time.Millisecond {
			t.Errorf("%d units at T+1.2s, then 5 at T+900ms: %+v, want refused, 0 remaining, retry 100ms, reset 600ms", later, r)
		}
	}
}

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
