package ratelimit

import (
	"context"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/sluicehq/sluice/clock"
)

// Take decides exactly as AllowN: two limiters with the same limit and
// clock, one asked through Take and the other through AllowN, give equal
// decisions on a random trace, also in shadow mode, at the key cap and for
// invalid input; and Take allocates nothing on a held key.
func TestTakeMatchesAllowN(t *testing.T) {
	ctx := context.Background()
	for _, alg := range []Algorithm{FixedWindow, SlidingLog, SlidingWindow, TokenBucket, GCRA} {
		for _, shadow := range []bool{false, true} {
			c := clock.NewManual(t0)
			lim := Limit{Rate: 5, Period: time.Second}
			opts := []Option{WithClock(c), WithMaxKeys(3), WithShadow(shadow)}
			a, b := mustNew(t, alg, lim, opts...), mustNew(t, alg, lim, opts...)
			r := rand.New(rand.NewPCG(uint64(alg), 18))
			keys := []string{"a", "user:42", "tenant:acme/user:42", "b", ""}
			for step := range 2000 {
				key, n := keys[r.IntN(len(keys))], r.IntN(7)
				want, werr := a.AllowN(ctx, key, n)
				got, gerr := b.Take(ctx, key, n)
				if (werr == nil) != (gerr == nil) || got.Result(want.Limit) != want {
					t.Fatalf("%v shadow %v step %d: AllowN %+v %v, Take %+v %v", alg, shadow, step, want, werr, got.Result(want.Limit), gerr)
				}
				if got.Allowed() != want.Allowed || got.Source() != want.Source || got.Remaining() != want.Remaining ||
					got.RetryAfter() != want.RetryAfter || got.ResetAfter() != want.ResetAfter || got.Shadowed() != want.Shadowed {
					t.Fatalf("%v step %d: accessors disagree with %+v", alg, step, want)
				}
				c.Advance(time.Duration(r.Int64N(int64(300 * time.Millisecond))))
			}
		}
	}
	l := mustNew(t, TokenBucket, Limit{Rate: 1000, Period: time.Hour})
	key := string([]byte("user:42"))
	l.Take(ctx, key, 1)
	if n := testing.AllocsPerRun(500, func() { l.Take(ctx, key, 1) }); n != 0 {
		t.Fatalf("Take allocates %v times", n)
	}
}

// The zero Decision holds no decision.
func TestZeroDecision(t *testing.T) {
	var d Decision
	if d.Result(0).Decided() || d.Allowed() {
		t.Fatalf("zero Decision: %+v", d.Result(0))
	}
}
