package redisstore_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/redistest"
	"github.com/sluicehq/sluice/ratelimit"
	"github.com/sluicehq/sluice/ratelimit/redisstore"
)

// roundUpMicro rounds d up to a whole microsecond.
func roundUpMicro(d time.Duration) time.Duration {
	if r := d % time.Microsecond; r != 0 {
		return d + time.Microsecond - r
	}
	return d
}

// TestConformanceNearBounds replays random single requests (OpAllow of
// every cost, and OpReserve and OpRefund for the buckets) through Redis and
// the in-memory store for limits near the scripts' bounds: counts, products
// and periods close to 2^53, a sliding log admitting thousands of units at
// once. The decisions must be equal, the times rounded up to the µs.
func TestConformanceNearBounds(t *testing.T) {
	srv := redistest.Start(t)
	s := newStore(t, client(t, srv.Addr), redisstore.WithCallerTime(), redisstore.WithRefusalCache(0))
	cases := []struct {
		alg ratelimit.Algorithm
		lim ratelimit.Limit
	}{
		{ratelimit.FixedWindow, ratelimit.Limit{Rate: 1 << 40, Period: time.Hour}},
		{ratelimit.SlidingWindow, ratelimit.Limit{Rate: 1<<32 - 1, Period: 2 * time.Second}},
		{ratelimit.SlidingWindow, ratelimit.Limit{Rate: 3, Period: 7 * 24 * time.Hour}},
		{ratelimit.TokenBucket, ratelimit.Limit{Rate: 999983, Period: time.Hour, Burst: 1000}},
		{ratelimit.GCRA, ratelimit.Limit{Rate: 999983, Period: time.Hour, Burst: 1000}},
		{ratelimit.GCRA, ratelimit.Limit{Rate: 1 << 40, Period: time.Second, Burst: 1 << 20}},
		{ratelimit.TokenBucket, ratelimit.Limit{Rate: 7, Period: 365 * 24 * time.Hour, Burst: 2}},
		{ratelimit.SlidingLog, ratelimit.Limit{Rate: 5000, Period: 400 * 24 * time.Hour}},
	}
	for ci, tc := range cases {
		p, err := ratelimit.NewPolicy(tc.alg, tc.lim)
		if err != nil {
			t.Fatal(err)
		}
		mem, _ := ratelimit.NewMemoryStore(100)
		r := rand.New(rand.NewPCG(uint64(ci), 7))
		now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
		burst := p.Limit().Burst
		type pair struct{ a, b ratelimit.Request }
		var res []pair
		for step := range 600 {
			if r.IntN(3) > 0 {
				now = now.Add(time.Duration(r.Int64N(min(int64(tc.lim.Period), int64(tc.lim.Period)/int64(burst)*3)/4+1)) / time.Microsecond * time.Microsecond)
			}
			req := ratelimit.Request{Key: fmt.Sprint("x", ci, r.IntN(2)), Policy: &p, N: r.IntN(min(burst, 3) + 1)}
			if r.IntN(2) == 0 {
				req.N = r.IntN(burst + 1)
			}
			var oreq ratelimit.Request
			if tc.alg == ratelimit.TokenBucket || tc.alg == ratelimit.GCRA {
				switch r.IntN(6) {
				case 0:
					req.Op = ratelimit.OpReserve
					req.N = max(1, req.N)
					req.MaxWait = time.Duration(r.Int64N(int64(tc.lim.Period)*2)) / time.Microsecond * time.Microsecond
				case 1:
					if len(res) > 0 {
						i := r.IntN(len(res))
						req, oreq = res[i].a, res[i].b
						req.Op, oreq.Op = ratelimit.OpRefund, ratelimit.OpRefund
						res = append(res[:i], res[i+1:]...)
					}
				}
			}
			if oreq.Policy == nil {
				oreq = req
			}
			a := []ratelimit.Request{req}
			b := []ratelimit.Request{oreq}
			e1 := s.Apply(context.Background(), now, a)
			e2 := mem.Apply(context.Background(), now, b)
			if e1 != nil || e2 != nil {
				t.Fatal(e1, e2)
			}
			w := b[0].Result
			w.RetryAfter, w.ResetAfter = roundUpMicro(w.RetryAfter), roundUpMicro(w.ResetAfter)
			if a[0].Result != w || a[0].Delay != roundUpMicro(b[0].Delay) {
				t.Fatalf("%v step %d op %d n %d: got %+v %v want %+v %v", p, step, req.Op, req.N, a[0].Result, a[0].Delay, w, b[0].Delay)
			}
			if req.Op == ratelimit.OpReserve && a[0].Result.Allowed {
				res = append(res, pair{a[0], b[0]})
			}
		}
	}
}
