package ratelimit

import (
	"context"
	"errors"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/sluicehq/sluice/clock"
)

// FuzzNew checks that New either rejects a limit and options with an error
// or returns a limiter that works: it never panics, bad input to AllowN is
// an error, and every Result keeps its promises.
func FuzzNew(f *testing.F) {
	f.Add(uint8(TokenBucket), 100, int64(time.Second), 500, 1000, 256, 3, int64(7e6))
	f.Add(uint8(GCRA), 3, int64(10), 0, 1, 1, 1, int64(1))
	f.Add(uint8(SlidingWindow), 4294967295, int64(1<<60), 0, 5, 8, 2, int64(1<<59))
	f.Add(uint8(SlidingLog), 65536, int64(time.Hour), 65536, 2, 4, 65536, int64(time.Minute))
	f.Add(uint8(FixedWindow), -1, int64(-1), -1, 0, 0, 0, int64(-5))
	f.Add(uint8(TokenBucket), 1, int64(1<<60), 1<<40, 1, 1, 1<<40, int64(1<<62))
	f.Add(uint8(GCRA), 1<<62, int64(1), 1<<62, 3, 3, 1<<62, int64(3))
	f.Add(uint8(9), 1, int64(1), 1, 1, 1, 1, int64(0))
	f.Fuzz(func(t *testing.T, alg uint8, rate int, period int64, burst, maxKeys, maxKeyLen, n int, advance int64) {
		c := clock.NewManual(t0)
		lim := Limit{Rate: rate, Period: time.Duration(period), Burst: burst}
		l, err := New(Algorithm(alg), lim, WithClock(c), WithMaxKeys(maxKeys), WithMaxKeyLen(maxKeyLen))
		if err != nil {
			if l != nil {
				t.Fatal("a limiter and an error")
			}
			return
		}
		ctx := context.Background()
		b := l.Policy().Limit().Burst
		keys := []string{"k", "key2", "a-longer-key"}
		for i := range 6 {
			key := keys[i%len(keys)]
			res, err := l.AllowN(ctx, key, n)
			switch {
			case n < 1 || n > b:
				if !errors.Is(err, ErrInvalidCost) {
					t.Fatalf("AllowN(%d) with burst %d: %v", n, b, err)
				}
				return
			case len(key) > maxKeyLen:
				if !errors.Is(err, ErrInvalidKey) {
					t.Fatalf("key of %d bytes, max %d: %v", len(key), maxKeyLen, err)
				}
				continue
			case err != nil:
				t.Fatal(err)
			case !res.Decided():
				t.Fatalf("no decision and no error: %+v", res)
			case res.Source == SourceFull:
				if res.Allowed || res.RetryAfter <= 0 {
					t.Fatalf("a full store's decision: %+v", res)
				}
				continue
			}
			if res.Limit != b || res.Remaining < 0 || res.Remaining > b || res.ResetAfter < 0 {
				t.Fatalf("%v, n=%d: %+v", l.Policy(), n, res)
			}
			if res.Allowed != (res.RetryAfter == 0) {
				t.Fatalf("%v, n=%d: Allowed %v with RetryAfter %v", l.Policy(), n, res.Allowed, res.RetryAfter)
			}
			if res.Allowed && res.ResetAfter == 0 {
				t.Fatalf("%v, n=%d: admitted, yet fresh", l.Policy(), n)
			}
			if advance > 0 {
				c.Advance(time.Duration(advance % (1 << 50)))
			}
		}
		if Algorithm(alg).reserves() && n >= 1 && n <= b {
			r, err := l.Reserve(ctx, "k", n)
			if err != nil {
				t.Fatal(err)
			}
			if r.Source() == SourceFull {
				if r.OK() {
					t.Fatal("a full store granted a reservation")
				}
				return
			}
			if r.OK() && r.Delay() < 0 {
				t.Fatal("negative delay")
			}
			r.Cancel()
		}
	})
}

// FuzzDecide runs a random trace, at any scale of rate, period and burst,
// through each algorithm and checks every decision against the reference
// definitions in exact rationals, and every Result's promises: Remaining is
// exact, the same request is refused 1ns before RetryAfter and admitted at
// it, and the key is fresh at ResetAfter.
func FuzzDecide(f *testing.F) {
	f.Add(uint8(TokenBucket), 100, int64(time.Second), 500, uint64(1), uint8(40))
	f.Add(uint8(GCRA), 7, int64(3), 2, uint64(2), uint8(60))
	f.Add(uint8(SlidingWindow), 1<<31, int64(1<<59), 0, uint64(3), uint8(30))
	f.Add(uint8(FixedWindow), 1<<62, int64(75), 0, uint64(4), uint8(20))
	f.Add(uint8(SlidingLog), 3, int64(time.Minute), 0, uint64(5), uint8(50))
	f.Add(uint8(TokenBucket), 1<<40, int64(1), 1<<20, uint64(6), uint8(50))
	f.Fuzz(func(t *testing.T, alg uint8, rate int, period int64, burst int, seed uint64, steps uint8) {
		p, err := NewPolicy(Algorithm(alg), Limit{Rate: rate, Period: time.Duration(period), Burst: burst})
		if err != nil || (p.alg == SlidingLog && p.burst > 64) {
			return
		}
		r := rand.New(rand.NewPCG(seed, seed>>7))
		m, ref := newModel(p), &reference{p: p}
		now := t0ns
		for i := range int(steps) {
			switch r.IntN(3) {
			case 0:
			case 1:
				now += r.Int64N(p.period/p.rate + 2)
			default:
				now += r.Int64N(min(p.period, 1<<50) + 1)
			}
			n := 1 + r.Int64N(min(p.burst, 1<<40))
			if r.IntN(2) == 0 {
				n = 1
			}
			before := m.clone()
			o := m.take(now, n)
			if want := ref.allow(now, n); o.allowed != want {
				t.Fatalf("%v step %d (n=%d at +%d): allowed %v, reference %v", p, i, n, now-t0ns, o.allowed, want)
			}
			if o.remaining < 0 || o.remaining > p.burst || o.resetAfter < 0 || o.allowed != (o.retryAfter == 0) {
				t.Fatalf("%v step %d: %+v", p, i, o)
			}
			if !o.allowed {
				if before.clone().take(now+o.retryAfter-1, n).allowed || !before.clone().take(now+o.retryAfter, n).allowed {
					t.Fatalf("%v step %d (n=%d): RetryAfter %d is not exact", p, i, n, o.retryAfter)
				}
			}
			if o.remaining < p.burst && m.clone().take(now, o.remaining+1).allowed {
				t.Fatalf("%v step %d: Remaining %d understated", p, i, o.remaining)
			}
			if o.remaining > 0 && !m.clone().take(now, o.remaining).allowed {
				t.Fatalf("%v step %d: Remaining %d overstated", p, i, o.remaining)
			}
			if !m.fresh(now+o.resetAfter) || (o.resetAfter > 0 && m.fresh(now+o.resetAfter-1)) {
				t.Fatalf("%v step %d: ResetAfter %d is not exact", p, i, o.resetAfter)
			}
		}
	})
}
