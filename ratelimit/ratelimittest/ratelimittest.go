// Package ratelimittest checks that a ratelimit.Store decides exactly as the
// in-memory store does: the conformance suite every Store runs in its tests.
package ratelimittest

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice/ratelimit"
)

// Run replays random traces of requests, for every algorithm and several
// limits, through a new store made by newStore and through a MemoryStore,
// and fails t at the first Result, Delay, Mark or error that differs. The
// traces cover single requests (OpAllow with costs 0 to Burst, OpReserve and
// OpRefund for the buckets) and, separately, batches of two or more requests
// over several keys and policies that must commit all or nothing, with
// shadow requests among them.
//
// The store must decide at the time Apply is given, not at a clock of its
// own: a store that reads a server's clock needs a test mode for this suite.
// One step in eight moves the time back (a clock read before another
// decision on the key), which a store must decide at the key's time, as
// Policy.Decide does.
// Keys are unique to each run in a process, so a store may be shared
// between runs; the traces are the same in every run.
func Run(t *testing.T, newStore func(t *testing.T) ratelimit.Store) {
	t.Helper()
	RunResolution(t, newStore, time.Nanosecond)
}

// RunResolution is Run for a store whose clock counts in whole multiples of
// res (a Redis store counts microseconds): the traces use instants, periods
// and wait bounds that are multiples of res, and the store's times
// (RetryAfter, ResetAfter, Delay) must be the in-memory store's rounded up
// to a multiple of res. Allowed, Limit, Remaining and Source must be equal
// (a Source left unset by the store counts as SourceLimit). A
// store's reservation marks may differ from the in-memory store's; each
// store gets its own marks back for refunds.
func RunResolution(t *testing.T, newStore func(t *testing.T) ratelimit.Store, res time.Duration) {
	t.Helper()
	if res <= 0 {
		t.Fatalf("ratelimittest: resolution %v: must be positive", res)
	}
	limits := []ratelimit.Limit{
		{Rate: 5, Period: time.Second},
		{Rate: 3, Period: time.Second / 3, Burst: 7},
		{Rate: 100, Period: time.Minute},
		{Rate: 7, Period: 10 * time.Nanosecond},
	}
	if res > time.Nanosecond {
		limits[1].Period = roundDown(time.Second/3, res)
		limits[3].Period = 10 * res
	}
	algs := []ratelimit.Algorithm{ratelimit.FixedWindow, ratelimit.SlidingLog, ratelimit.SlidingWindow, ratelimit.TokenBucket, ratelimit.GCRA}
	for _, alg := range algs {
		for i, lim := range limits {
			p, err := ratelimit.NewPolicy(alg, lim)
			if err != nil {
				continue // a burst the window algorithms do not take
			}
			t.Run(fmt.Sprintf("%v/%d", alg, i), func(t *testing.T) {
				runTrace(t, newStore(t), []*ratelimit.Policy{&p}, uint64(i), res)
			})
		}
	}
	t.Run("batches", func(t *testing.T) {
		var ps []*ratelimit.Policy
		for i, alg := range algs {
			p, err := ratelimit.NewPolicy(alg, limits[i%2*2]) // burst = rate
			if err != nil {
				t.Fatal(err)
			}
			ps = append(ps, &p)
		}
		runTrace(t, newStore(t), ps, 99, res)
	})
	t.Run("sliding_log/stepped_back", func(t *testing.T) {
		steppedBackLog(t, newStore(t))
	})
}

// steppedBackLog checks that a request that admits nothing (refused, or a
// query of 0 units) does not drop a sliding log's stamps that a later
// request whose time reads earlier still counts: 5 units at T, 5 at
// T+500ms, then a refused request (or a query) at T+1.2s, then a request at
// T+900ms, whose window (T−100ms, T+900ms] already holds 10 units, must be
// refused. (Its times are whole milliseconds: any store resolution will do.)
func steppedBackLog(t *testing.T, s ratelimit.Store) {
	t.Helper()
	p, err := ratelimit.NewPolicy(ratelimit.SlidingLog, ratelimit.Limit{Rate: 10, Period: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	T := time.Date(2100, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, later := range []int{6, 0} {
		key := fmt.Sprintf("ratelimittest:%d:stepped-back:%d", runs.Add(1), later)
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

// runs makes each trace's keys unique, in a process.
var runs atomic.Uint64

// runTrace sends the same random requests to s and to an oracle.
func runTrace(t *testing.T, s ratelimit.Store, ps []*ratelimit.Policy, seed uint64, res time.Duration) {
	t.Helper()
	oracle, err := ratelimit.NewMemoryStore(1 << 20)
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(seed, 0x5eed))
	prefix := fmt.Sprintf("ratelimittest:%d:%d:", runs.Add(1), seed)
	ctx := context.Background()
	now := time.Date(2100, 1, 1, 0, 0, 0, 0, time.UTC).Add(roundDown(time.Duration(r.Int64N(int64(time.Hour))), res))
	type held struct {
		req, oracle ratelimit.Request
		done        bool
	}
	var reservations []held
	period := ps[0].Limit().Period
	for step := range 400 {
		switch r.IntN(8) {
		case 0, 1:
		case 2: // the clock reads earlier than the last decision
			now = now.Add(-roundDown(time.Duration(r.Int64N(int64(period)+1)), res))
		case 3, 4:
			now = now.Add(roundDown(time.Duration(r.Int64N(int64(period/10)+1)), res))
		default:
			now = now.Add(roundDown(time.Duration(r.Int64N(int64(period)+1)), res))
		}
		var reqs, oracleReqs []ratelimit.Request
		switch {
		case len(ps) > 1: // a batch of at least two, over several policies and keys
			for len(reqs) < 2 {
				for _, p := range ps {
					if r.IntN(3) == 0 {
						continue
					}
					reqs = append(reqs, ratelimit.Request{
						Key: prefix + fmt.Sprint(r.IntN(3)), Policy: p, N: 1 + r.IntN(2), Shadow: r.IntN(5) == 0,
					})
				}
			}
		default:
			p := ps[0]
			burst := p.Limit().Burst
			req := ratelimit.Request{Key: prefix + fmt.Sprint(r.IntN(4)), Policy: p, N: r.IntN(burst + 1)}
			reserves := p.Algorithm() == ratelimit.TokenBucket || p.Algorithm() == ratelimit.GCRA
			switch op := r.IntN(10); {
			case reserves && op == 0:
				req.Op, req.N = ratelimit.OpReserve, 1+r.IntN(burst)
				req.MaxWait = roundDown(time.Duration(r.Int64N(int64(3*period)+1)), res)
			case reserves && op == 1 && len(reservations) > 0:
				i := r.IntN(len(reservations))
				if reservations[i].done {
					continue
				}
				reservations[i].done = true
				req = reservations[i].req
				req.Op = ratelimit.OpRefund
				o := reservations[i].oracle
				o.Op = ratelimit.OpRefund
				oracleReqs = append(oracleReqs, o)
			}
			reqs = append(reqs, req)
		}
		if oracleReqs == nil {
			oracleReqs = reqs
		}
		got := append([]ratelimit.Request(nil), reqs...)
		errGot := s.Apply(ctx, now, got)
		want := append([]ratelimit.Request(nil), oracleReqs...)
		errWant := oracle.Apply(ctx, now, want)
		if (errGot == nil) != (errWant == nil) {
			t.Fatalf("step %d: error %v, want %v", step, errGot, errWant)
		}
		for i := range got {
			w := want[i]
			if got[i].Result.Source == ratelimit.SourceNone {
				got[i].Result.Source = ratelimit.SourceLimit // a Store may leave it unset (see Store)
			}
			w.Result.RetryAfter = roundUp(w.Result.RetryAfter, res)
			w.Result.ResetAfter = roundUp(w.Result.ResetAfter, res)
			w.Delay = roundUp(w.Delay, res)
			if res > time.Nanosecond {
				w.Mark = got[i].Mark
			}
			if got[i].Result != w.Result || got[i].Delay != w.Delay || got[i].Mark != w.Mark {
				t.Fatalf("step %d, request %d (%v, op %d, n %d on %q): got %+v delay %v mark %+v; want %+v delay %v mark %+v",
					step, i, got[i].Policy, got[i].Op, got[i].N, got[i].Key,
					got[i].Result, got[i].Delay, got[i].Mark, w.Result, w.Delay, w.Mark)
			}
			if got[i].Op == ratelimit.OpReserve && got[i].Result.Allowed {
				reservations = append(reservations, held{req: got[i], oracle: want[i]})
			}
		}
	}
}

// roundDown returns d rounded down to a multiple of res.
func roundDown(d, res time.Duration) time.Duration { return d - d%res }

// roundUp returns d (≥ 0) rounded up to a multiple of res.
func roundUp(d, res time.Duration) time.Duration {
	if r := d % res; r != 0 {
		return d + res - r
	}
	return d
}
