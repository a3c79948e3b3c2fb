package ratelimit

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice/clock"
)

func mustConcurrency(t testing.TB, max int, opts ...Option) *Concurrency {
	t.Helper()
	c, err := NewConcurrency(max, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestConcurrencyAcquireRelease(t *testing.T) {
	clk := clock.NewManual(t0)
	c := mustConcurrency(t, 2, WithClock(clk), WithLease(10*time.Second))
	ctx := context.Background()
	a, res, err := c.Acquire(ctx, "k")
	if err != nil || !res.Allowed || res.Remaining != 1 || res.Limit != 2 {
		t.Fatalf("first: %+v, %v", res, err)
	}
	clk.Advance(time.Second)
	b, res, _ := c.Acquire(ctx, "k")
	if !res.Allowed || res.Remaining != 0 {
		t.Fatalf("second: %+v", res)
	}
	_, res, _ = c.Acquire(ctx, "k")
	if res.Allowed || res.RetryAfter != 9*time.Second || res.ResetAfter != 10*time.Second {
		t.Fatalf("third: %+v", res)
	}
	if _, res, _ := c.Acquire(ctx, "other"); !res.Allowed {
		t.Fatal("another key refused")
	}
	if !a.Release() || a.Release() {
		t.Fatal("Release: want true once, then false")
	}
	if c.InFlight("k") != 1 {
		t.Fatalf("in flight %d", c.InFlight("k"))
	}
	if _, res, _ := c.Acquire(ctx, "k"); !res.Allowed {
		t.Fatal("a released slot was not reused")
	}
	b.Release()
	if (Lease{}).Release() || (Lease{}).Renew() {
		t.Fatal("the zero Lease holds something")
	}
}

// A lease neither released nor renewed in time frees its slot; releasing it
// late never frees another holder's slot.
func TestConcurrencyLeaseExpiry(t *testing.T) {
	clk := clock.NewManual(t0)
	var obs countingObserver
	c := mustConcurrency(t, 1, WithClock(clk), WithLease(time.Second), WithObserver(&obs))
	ctx := context.Background()
	crashed, _, _ := c.Acquire(ctx, "k")
	clk.Advance(time.Second - 1)
	if _, res, _ := c.Acquire(ctx, "k"); res.Allowed {
		t.Fatal("admitted before the lease expired")
	}
	clk.Advance(1)
	next, res, _ := c.Acquire(ctx, "k")
	if !res.Allowed {
		t.Fatalf("refused after the lease expired: %+v", res)
	}
	if crashed.Release() {
		t.Fatal("an expired lease was released as if held")
	}
	if c.InFlight("k") != 1 {
		t.Fatal("releasing an expired lease freed another holder's slot")
	}
	// Renewal keeps a lease alive.
	clk.Advance(900 * time.Millisecond)
	if !next.Renew() {
		t.Fatal("Renew of a held lease failed")
	}
	clk.Advance(900 * time.Millisecond)
	if _, res, _ := c.Acquire(ctx, "k"); res.Allowed {
		t.Fatal("admitted while the renewed lease is held")
	}
	clk.Advance(200 * time.Millisecond)
	if next.Renew() {
		t.Fatal("an expired lease was renewed")
	}
	if obs.expired.Load() != 1 {
		t.Fatalf("observer saw %d expiries, want 1", obs.expired.Load())
	}
}

func TestConcurrencyConcurrent(t *testing.T) {
	c := mustConcurrency(t, 5, WithClock(clock.NewManual(t0)))
	ctx := context.Background()
	var inFlight, peak atomic.Int64
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 300 {
				l, res, err := c.Acquire(ctx, "k")
				if err != nil {
					t.Error(err)
					return
				}
				if !res.Allowed {
					continue
				}
				n := inFlight.Add(1)
				for {
					p := peak.Load()
					if n <= p || peak.CompareAndSwap(p, n) {
						break
					}
				}
				inFlight.Add(-1)
				l.Release()
			}
		})
	}
	wg.Wait()
	if peak.Load() > 5 || c.InFlight("k") != 0 {
		t.Fatalf("peak %d in flight of 5, %d left", peak.Load(), c.InFlight("k"))
	}
}

func TestConcurrencyShadow(t *testing.T) {
	c := mustConcurrency(t, 1, WithClock(clock.NewManual(t0)), WithShadow(true))
	ctx := context.Background()
	c.Acquire(ctx, "k")
	l, res, _ := c.Acquire(ctx, "k")
	if !res.Allowed || !res.Shadowed || l.Release() || c.InFlight("k") != 1 {
		t.Fatalf("shadowed acquisition: %+v", res)
	}
}

func TestConcurrencyMaxKeys(t *testing.T) {
	clk := clock.NewManual(t0)
	c := mustConcurrency(t, 1, WithClock(clk), WithMaxKeys(2), WithLease(time.Second))
	ctx := context.Background()
	c.Acquire(ctx, "a")
	b, _, _ := c.Acquire(ctx, "b")
	if _, res, err := c.Acquire(ctx, "c"); err != nil || res.Allowed || res.Source != SourceFull {
		t.Fatalf("third key: %+v, %v", res, err)
	}
	b.Release() // the key, without leases, can be dropped for a new one
	if _, res, err := c.Acquire(ctx, "c"); err != nil || !res.Allowed {
		t.Fatalf("after a release: %+v, %v", res, err)
	}
	// Abandoned leases make room once expired.
	clk.Advance(time.Second)
	for i := range 2 {
		if _, res, err := c.Acquire(ctx, fmt.Sprint("new", i)); err != nil || !res.Allowed {
			t.Fatalf("new key %d after the leases expired: %+v, %v", i, res, err)
		}
	}
}

func TestNewConcurrencyRejectsInvalidConfiguration(t *testing.T) {
	for _, tc := range []struct {
		max  int
		opts []Option
		want string
	}{
		{0, nil, "concurrency limit 0"},
		{1, []Option{WithLease(0)}, "lease 0s"},
		{1, []Option{WithStore(opaqueStore{})}, "WithStore"},
		{1, []Option{WithTimer(newFakeTimer().timer)}, "WithTimer"},
		{1, []Option{WithMaxKeys(0), WithClock(nil)}, "max keys 0"},
	} {
		if _, err := NewConcurrency(tc.max, tc.opts...); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("NewConcurrency(%d): %v, want %q", tc.max, err, tc.want)
		}
	}
	c := mustConcurrency(t, 1, WithMaxKeyLen(3))
	if _, _, err := c.Acquire(context.Background(), "long"); !errors.Is(err, ErrInvalidKey) {
		t.Errorf("long key: %v", err)
	}
	if c.Max() != 1 {
		t.Error("Max")
	}
}

func TestConcurrencyAcquireDoesNotAllocate(t *testing.T) {
	c := mustConcurrency(t, 100, WithClock(clock.NewManual(t0)))
	ctx := context.Background()
	if n := testing.AllocsPerRun(200, func() {
		l, _, _ := c.Acquire(ctx, "k")
		l.Release()
	}); n != 0 {
		t.Fatalf("Acquire+Release allocates %v times", n)
	}
}
