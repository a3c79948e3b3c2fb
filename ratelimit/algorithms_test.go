package ratelimit

import (
	"fmt"
	"math/big"
	"math/rand/v2"
	"testing"
	"time"
)

// t0 is a Unix instant on a whole minute, far from 1970 so windows have
// large numbers, and far in the future so that context deadlines taken from
// a manual clock never fire on the wall clock.
var t0 = time.Date(2100, 1, 1, 0, 0, 0, 0, time.UTC)

var t0ns = t0.UnixNano()

func mustPolicy(t testing.TB, alg Algorithm, lim Limit) Policy {
	t.Helper()
	p, err := NewPolicy(alg, lim)
	if err != nil {
		t.Fatalf("NewPolicy(%v, %v): %v", alg, lim, err)
	}
	return p
}

// model is one key under one policy, decided by the package's arithmetic.
type model struct {
	p   *Policy
	s   State
	log stampLog
}

func newModel(p Policy) *model { return &model{p: &p} }

func (m *model) take(now, n int64) outcome {
	if m.p.alg == SlidingLog {
		return m.p.slidingLog(&m.log, now, n)
	}
	next, o := m.p.take(m.s, now, n)
	if o.allowed {
		m.s = next
	}
	return o
}

func (m *model) clone() *model {
	c := *m
	c.log.ts = append([]int64(nil), m.log.ts...)
	return &c
}

// fresh reports whether the key's state is a fresh key's at now.
func (m *model) fresh(now int64) bool {
	c := m.clone()
	if c.p.alg == SlidingLog {
		c.take(now, 0)
		return c.log.n == 0
	}
	next, _ := c.p.take(c.s, now, 0)
	return next == State{}
}

// step is one request of a table test: after advancing the clock by adv,
// ask for n units and expect the outcome.
type step struct {
	adv   time.Duration
	n     int64
	ok    bool
	rem   int64
	retry time.Duration
	reset time.Duration
}

func runSteps(t *testing.T, p Policy, steps []step) {
	t.Helper()
	m := newModel(p)
	now := t0ns
	for i, s := range steps {
		now += int64(s.adv)
		o := m.take(now, s.n)
		got := step{adv: s.adv, n: s.n, ok: o.allowed, rem: o.remaining, retry: time.Duration(o.retryAfter), reset: time.Duration(o.resetAfter)}
		if got != s {
			t.Errorf("step %d (t=+%v, n=%d): got ok=%v rem=%d retry=%v reset=%v; want ok=%v rem=%d retry=%v reset=%v",
				i, time.Duration(now-t0ns), s.n, got.ok, got.rem, got.retry, got.reset, s.ok, s.rem, s.retry, s.reset)
		}
	}
}

func TestFixedWindowSteps(t *testing.T) {
	p := mustPolicy(t, FixedWindow, Limit{Rate: 3, Period: time.Minute})
	runSteps(t, p, []step{
		{0, 1, true, 2, 0, time.Minute},
		{10 * time.Second, 2, true, 0, 0, 50 * time.Second},
		{0, 1, false, 0, 50 * time.Second, 50 * time.Second},
		{50*time.Second - 1, 1, false, 0, 1, 1},
		{1, 3, true, 0, 0, time.Minute}, // a new calendar minute
		{2 * time.Minute, 1, true, 2, 0, time.Minute},
	})
}

func TestSlidingWindowSteps(t *testing.T) {
	p := mustPolicy(t, SlidingWindow, Limit{Rate: 10, Period: time.Second})
	runSteps(t, p, []step{
		{0, 10, true, 0, 0, 2 * time.Second},
		// Next window, 0.25s in: prev 10 weighs ⌈7.5⌉ = 8, so 2 remain.
		{1250 * time.Millisecond, 2, true, 0, 0, 1750 * time.Millisecond},
		// One more needs prev·(1s−e) ≤ (10−2−1)·1s: e ≥ 0.3s.
		{0, 1, false, 0, 50 * time.Millisecond, 1750 * time.Millisecond},
		{50 * time.Millisecond, 1, true, 0, 0, 1700 * time.Millisecond},
		// 5 need 10·(1s−e) ≤ (10−3−5)·1s: e ≥ 0.8s.
		{0, 5, false, 0, 500 * time.Millisecond, 1700 * time.Millisecond},
		// 10 cannot pass in this window, nor while 3 weigh in the next:
		// only when the window after next begins.
		{0, 10, false, 0, 1700 * time.Millisecond, 1700 * time.Millisecond},
		{1700 * time.Millisecond, 10, true, 0, 0, 2 * time.Second},
	})
}

func TestSlidingLogSteps(t *testing.T) {
	p := mustPolicy(t, SlidingLog, Limit{Rate: 3, Period: time.Second})
	runSteps(t, p, []step{
		{0, 1, true, 2, 0, time.Second},
		{300 * time.Millisecond, 2, true, 0, 0, time.Second},
		{0, 1, false, 0, 700 * time.Millisecond, time.Second},
		{0, 2, false, 0, time.Second, time.Second},
		{700 * time.Millisecond, 1, true, 0, 0, time.Second}, // the first stamp left the window
		{300 * time.Millisecond, 3, false, 2, 700 * time.Millisecond, 700 * time.Millisecond},
		{700 * time.Millisecond, 3, true, 0, 0, time.Second},
	})
}

func TestBucketSteps(t *testing.T) {
	for _, alg := range []Algorithm{TokenBucket, GCRA} {
		t.Run(alg.String(), func(t *testing.T) {
			// 10 per second (one per 100ms), bucket of 5.
			p := mustPolicy(t, alg, Limit{Rate: 10, Period: time.Second, Burst: 5})
			runSteps(t, p, []step{
				{0, 5, true, 0, 0, 500 * time.Millisecond},
				{0, 1, false, 0, 100 * time.Millisecond, 500 * time.Millisecond},
				{50 * time.Millisecond, 1, false, 0, 50 * time.Millisecond, 450 * time.Millisecond},
				{50 * time.Millisecond, 1, true, 0, 0, 500 * time.Millisecond},
				{250 * time.Millisecond, 3, false, 2, 50 * time.Millisecond, 250 * time.Millisecond},
				{time.Hour, 5, true, 0, 0, 500 * time.Millisecond},
			})
		})
	}
}

// 0.3 tokens per nanosecond are counted exactly: no drift.
func TestBucketFractionalRateIsExact(t *testing.T) {
	for _, alg := range []Algorithm{TokenBucket, GCRA} {
		t.Run(alg.String(), func(t *testing.T) {
			p := mustPolicy(t, alg, Limit{Rate: 3, Period: 10 * time.Nanosecond, Burst: 3})
			m := newModel(p)
			now := t0ns
			admitted := 0
			for range 1_000_000 / 1000 {
				for range 1000 {
					if m.take(now, 1).allowed {
						admitted++
					}
					now++
				}
			}
			// Asked every ns, the bucket never fills, so nothing is lost: the
			// 3 tokens it started with, plus 0.3 per ns for 1ms − 1ns, is
			// 300002.7 tokens.
			if admitted != 300_002 {
				t.Fatalf("admitted %d in 1ms at 3 per 10ns, want 300002", admitted)
			}
		})
	}
}

// The article's token bucket: capacity 500, 100/s. A 500 burst passes; a
// second 500 burst two seconds later, arriving over 50ms, gets 205; steady
// 100/s traffic afterwards passes 1000 of 1000.
func TestTokenBucketArticle(t *testing.T) {
	for _, alg := range []Algorithm{TokenBucket, GCRA} {
		t.Run(alg.String(), func(t *testing.T) {
			p := mustPolicy(t, alg, Limit{Rate: 100, Period: time.Second, Burst: 500})
			m := newModel(p)
			count := func(start int64, n int, spacing time.Duration) int {
				ok := 0
				for i := range n {
					if m.take(start+int64(i)*int64(spacing), 1).allowed {
						ok++
					}
				}
				return ok
			}
			if got := count(t0ns, 500, 0); got != 500 {
				t.Errorf("first burst: %d of 500", got)
			}
			// 500 requests spread evenly from 2s to 2.05s.
			ok := 0
			for i := range int64(500) {
				if m.take(t0ns+int64(2*time.Second)+i*int64(50*time.Millisecond)/499, 1).allowed {
					ok++
				}
			}
			if ok != 205 {
				t.Errorf("second burst: %d of 500, want 205", ok)
			}
			// The bucket is drained at 2.05s; steady 100/s from 2.06s on.
			if got := count(t0ns+int64(2060*time.Millisecond), 1000, 10*time.Millisecond); got != 1000 {
				t.Errorf("steady 100/s: %d of 1000", got)
			}
		})
	}
}

// The article's GCRA: 100/s with a 100 ms tolerance (Burst 11) lets 11 of a
// 20-burst through and spaces the rest 10ms apart.
func TestGCRAArticle(t *testing.T) {
	p := mustPolicy(t, GCRA, Limit{Rate: 100, Period: time.Second, Burst: 11})
	m := newModel(p)
	ok := 0
	for range 20 {
		if m.take(t0ns, 1).allowed {
			ok++
		}
	}
	if ok != 11 {
		t.Fatalf("burst of 20: %d admitted, want 11", ok)
	}
	// 50/s afterwards: every one passes once the tolerance is used.
	now := t0ns
	for i := range 100 {
		now += int64(20 * time.Millisecond)
		if !m.take(now, 1).allowed {
			t.Fatalf("50/s request %d refused", i)
		}
	}
}

// The article's boundary attack: a fixed window of 100 per minute admits
// 100 in the last second of a minute and 100 in the first of the next;
// the sliding log admits 100 in any rolling minute. The sliding window
// counter assumes the previous minute's 100 were spread over it, so it
// lets one more through 0.6s into the next minute.
func TestFixedWindowBoundaryAttack(t *testing.T) {
	lim := Limit{Rate: 100, Period: time.Minute}
	for _, tc := range []struct {
		alg  Algorithm
		want int
	}{{FixedWindow, 200}, {SlidingLog, 100}, {SlidingWindow, 101}} {
		m := newModel(mustPolicy(t, tc.alg, lim))
		ok := 0
		start := t0ns + int64(59*time.Second)
		for i := range 200 {
			if m.take(start+int64(i)*int64(10*time.Millisecond), 1).allowed {
				ok++
			}
		}
		if ok != tc.want {
			t.Errorf("%v: %d admitted across the boundary, want %d", tc.alg, ok, tc.want)
		}
	}
}

// randomPolicy returns a random valid policy of alg with small numbers, so
// random traces hit every edge.
func randomPolicy(r *rand.Rand, alg Algorithm) Policy {
	periods := []time.Duration{1, 7, 10, 1000, 3 * time.Millisecond, time.Second, time.Second / 3}
	lim := Limit{Rate: 1 + r.IntN(12), Period: periods[r.IntN(len(periods))]}
	if alg.reserves() && r.IntN(2) == 0 {
		lim.Burst = 1 + r.IntN(20)
	}
	p, err := NewPolicy(alg, lim)
	if err != nil {
		panic(err)
	}
	return p
}

// randomTrace returns request instants and costs: bursts, gaps shorter and
// longer than the period, and repeated instants.
func randomTrace(r *rand.Rand, p Policy, n int, unit bool) ([]int64, []int64) {
	ts, ns := make([]int64, n), make([]int64, n)
	now := t0ns + r.Int64N(p.period)
	for i := range n {
		switch r.IntN(4) {
		case 0: // same instant
		case 1:
			now += r.Int64N(p.period/max(p.rate, 1) + 1)
		case 2:
			now += r.Int64N(p.period + 1)
		default:
			now += r.Int64N(3*p.period + 1)
		}
		ts[i], ns[i] = now, 1
		if !unit {
			ns[i] = 1 + r.Int64N(p.burst)
		}
	}
	return ts, ns
}

var allAlgorithms = []Algorithm{FixedWindow, SlidingLog, SlidingWindow, TokenBucket, GCRA}

// Every decision's Remaining, RetryAfter and ResetAfter are exact: Remaining
// units (and no more) would pass now; the same request is refused one
// nanosecond before RetryAfter and admitted at it; the key is fresh at
// ResetAfter and not one nanosecond before.
func TestResultIsExact(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, alg := range allAlgorithms {
		t.Run(alg.String(), func(t *testing.T) {
			for range 300 {
				p := randomPolicy(r, alg)
				m := newModel(p)
				ts, ns := randomTrace(r, p, 60, r.IntN(2) == 0)
				for i, now := range ts {
					before := m.clone()
					o := m.take(now, ns[i])
					where := func() string { return fmt.Sprintf("%v, request %d (n=%d at +%d)", p, i, ns[i], now-t0ns) }
					if o.allowed && o.retryAfter != 0 {
						t.Fatalf("%s: admitted with RetryAfter %d", where(), o.retryAfter)
					}
					if !o.allowed {
						if o.retryAfter <= 0 {
							t.Fatalf("%s: refused with RetryAfter %d", where(), o.retryAfter)
						}
						if before.clone().take(now+o.retryAfter-1, ns[i]).allowed {
							t.Fatalf("%s: admitted 1ns before RetryAfter %d", where(), o.retryAfter)
						}
						if !before.clone().take(now+o.retryAfter, ns[i]).allowed {
							t.Fatalf("%s: refused at RetryAfter %d", where(), o.retryAfter)
						}
					}
					if o.remaining > 0 && !m.clone().take(now, o.remaining).allowed {
						t.Fatalf("%s: Remaining %d refused", where(), o.remaining)
					}
					if o.remaining < p.burst && m.clone().take(now, o.remaining+1).allowed {
						t.Fatalf("%s: Remaining %d, but %d more pass", where(), o.remaining, o.remaining+1)
					}
					if !m.fresh(now + o.resetAfter) {
						t.Fatalf("%s: not fresh at ResetAfter %d", where(), o.resetAfter)
					}
					if o.resetAfter > 0 && m.fresh(now+o.resetAfter-1) {
						t.Fatalf("%s: fresh 1ns before ResetAfter %d", where(), o.resetAfter)
					}
				}
			}
		})
	}
}

// reference decides as the textbook definitions do, in exact rationals.
type reference struct {
	p       Policy
	tokens  *big.Rat // TokenBucket
	last    int64
	tat     *big.Rat // GCRA
	stamps  []int64  // SlidingLog
	counts  map[int64]int64
	started bool
}

func rat(a int64) *big.Rat { return new(big.Rat).SetInt64(a) }

func (f *reference) allow(now, n int64) bool {
	p := f.p
	P, b, r := rat(p.period), rat(p.burst), rat(p.rate)
	switch p.alg {
	case TokenBucket: // tokens refill at r/P per ns up to b
		if !f.started {
			f.tokens, f.last, f.started = new(big.Rat).Set(b), now, true
		}
		el := new(big.Rat).Mul(rat(now-f.last), new(big.Rat).Quo(r, P))
		f.tokens.Add(f.tokens, el)
		if f.tokens.Cmp(b) > 0 {
			f.tokens.Set(b)
		}
		f.last = now
		if f.tokens.Cmp(rat(n)) < 0 {
			return false
		}
		f.tokens.Sub(f.tokens, rat(n))
		return true
	case GCRA: // TAT' = max(TAT, now) + n·T; allow iff TAT' − now ≤ τ + T
		T := new(big.Rat).Quo(P, r)
		if !f.started {
			f.tat, f.started = rat(now), true
		}
		tat := new(big.Rat).Set(f.tat)
		if tat.Cmp(rat(now)) < 0 {
			tat = rat(now)
		}
		next := new(big.Rat).Add(tat, new(big.Rat).Mul(rat(n), T))
		tau := new(big.Rat).Mul(new(big.Rat).Sub(b, rat(1)), T)
		if new(big.Rat).Sub(next, rat(now)).Cmp(new(big.Rat).Add(tau, T)) > 0 {
			return false
		}
		f.tat = next
		return true
	case SlidingLog:
		c := int64(0)
		for _, s := range f.stamps {
			if s > now-p.period {
				c++
			}
		}
		if c+n > p.burst {
			return false
		}
		for range n {
			f.stamps = append(f.stamps, now)
		}
		return true
	default:
		if f.counts == nil {
			f.counts = map[int64]int64{}
		}
		w, e := floorDivMod(now, p.period)
		if p.alg == FixedWindow {
			if f.counts[w]+n > p.burst {
				return false
			}
			f.counts[w] += n
			return true
		}
		// est = curr + prev·(P − e)/P
		est := new(big.Rat).Add(rat(f.counts[w]), new(big.Rat).Mul(rat(f.counts[w-1]), new(big.Rat).Quo(rat(p.period-e), P)))
		if est.Add(est, rat(n)).Cmp(b) > 0 {
			return false
		}
		f.counts[w] += n
		return true
	}
}

// Every algorithm decides as its textbook definition does, on random traces.
func TestAlgorithmsMatchReference(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for _, alg := range allAlgorithms {
		t.Run(alg.String(), func(t *testing.T) {
			for range 150 {
				p := randomPolicy(r, alg)
				m, ref := newModel(p), &reference{p: p}
				ts, ns := randomTrace(r, p, 80, r.IntN(2) == 0)
				for i, now := range ts {
					if got, want := m.take(now, ns[i]).allowed, ref.allow(now, ns[i]); got != want {
						t.Fatalf("%v request %d (n=%d at +%d): allowed %v, reference %v", p, i, ns[i], now-t0ns, got, want)
					}
				}
			}
		})
	}
}

// TokenBucket and GCRA admit exactly the same requests, unit or weighted.
func TestTokenBucketEqualsGCRA(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	for range 1000 {
		p := randomPolicy(r, TokenBucket)
		q := p
		q.alg = GCRA
		tb, g := newModel(p), newModel(q)
		ts, ns := randomTrace(r, p, 100, r.IntN(2) == 0)
		for i, now := range ts {
			a, b := tb.take(now, ns[i]), g.take(now, ns[i])
			if a != b {
				t.Fatalf("%v request %d (n=%d at +%d): token bucket %+v, GCRA %+v", p.Limit(), i, ns[i], now-t0ns, a, b)
			}
		}
	}
}

// admitted returns the instants of admitted units (one per unit).
func admitted(m *model, ts, ns []int64) []int64 {
	var out []int64
	for i, now := range ts {
		if m.take(now, ns[i]).allowed {
			for range ns[i] {
				out = append(out, now)
			}
		}
	}
	return out
}

// The sliding log never admits more than Rate units in any rolling window
// (t − Period, t].
func TestSlidingLogNeverExceedsLimit(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	for range 500 {
		p := randomPolicy(r, SlidingLog)
		ts, ns := randomTrace(r, p, 200, r.IntN(2) == 0)
		got := admitted(newModel(p), ts, ns)
		for i := range got { // the window ending at each admission is the fullest
			c := int64(0)
			for j := i; j >= 0 && got[j] > got[i]-p.period; j-- {
				c++
			}
			if c > p.burst {
				t.Fatalf("%v: %d units in the window ending at +%d", p, c, got[i]-t0ns)
			}
		}
	}
}

// A token bucket (and GCRA) never admits more than Burst + Rate·t/Period
// units over any span of length t; for unit costs that means admissions i and
// i+k are at least (k+1−Burst)·Period/Rate apart (GCRA's spacing).
func TestBucketBound(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 10))
	for _, alg := range []Algorithm{TokenBucket, GCRA} {
		for range 200 {
			p := randomPolicy(r, alg)
			ts, ns := randomTrace(r, p, 200, r.IntN(2) == 0)
			got := admitted(newModel(p), ts, ns)
			for i := range got {
				for k := int64(1); i+int(k) < len(got); k++ {
					span := got[i+int(k)] - got[i]
					// k+1 units in span: need (k+1) ≤ b + span·r/P.
					if (k+1-p.burst)*p.period > span*p.rate {
						t.Fatalf("%v: %d units within %dns", p, k+1, span)
					}
				}
			}
		}
	}
}

// After the bucket is drained, steady traffic at the rate passes in full,
// forever: no float drift.
func TestSteadyRatePassesInFull(t *testing.T) {
	for _, alg := range []Algorithm{TokenBucket, GCRA} {
		// With a fractional interval the requests arrive up to 1ns after
		// their token, so a bucket of 1 would overflow and lose the rest:
		// the bucket holds 2.
		for _, lim := range []Limit{{Rate: 100, Period: time.Second}, {Rate: 3, Period: time.Second}, {Rate: 7, Period: time.Millisecond, Burst: 2}} {
			p := mustPolicy(t, alg, lim)
			m := newModel(p)
			for m.take(t0ns, 1).allowed {
			}
			// The bucket refills one token per Period/Rate; ask at exactly that
			// pace, rounded up to whole ns.
			n := 1000
			ok := 0
			for i := 1; i <= n; i++ {
				at := t0ns + ceilDiv(int64(i)*p.period, p.rate)
				if m.take(at, 1).allowed {
					ok++
				}
			}
			if ok != n {
				t.Errorf("%v: %d of %d passed", p, ok, n)
			}
		}
	}
}

func TestReserveAndRefund(t *testing.T) {
	for _, alg := range []Algorithm{TokenBucket, GCRA} {
		t.Run(alg.String(), func(t *testing.T) {
			p := mustPolicy(t, alg, Limit{Rate: 10, Period: time.Second, Burst: 2})
			const inf = 1 << 62
			s := State{}
			now := t0ns
			s, ok, d, m1 := p.reserve(s, now, 2, inf)
			if !ok || d != 0 {
				t.Fatalf("first reservation: ok=%v delay=%v", ok, time.Duration(d))
			}
			s, ok, d, m2 := p.reserve(s, now, 2, inf)
			if !ok || d != int64(200*time.Millisecond) {
				t.Fatalf("second: ok=%v delay=%v, want 200ms", ok, time.Duration(d))
			}
			if _, ok, d, _ = p.reserve(s, now, 1, int64(250*time.Millisecond)); ok || d != int64(300*time.Millisecond) {
				t.Fatalf("third beyond max wait: ok=%v delay=%v", ok, time.Duration(d))
			}
			// Cancelling the second gives both tokens back.
			s2 := p.refund(s, now+int64(50*time.Millisecond), 2, m2)
			if _, o := p.take(s2, now+int64(50*time.Millisecond), 0); o.remaining != 0 || o.resetAfter != int64(150*time.Millisecond) {
				t.Fatalf("after refund: %+v", o)
			}
			// The first went at once: it is spent and gives nothing back.
			if s3 := p.refund(s2, now+int64(50*time.Millisecond), 2, m1); s3 != s2 {
				t.Fatalf("refund of a spent reservation changed the state")
			}
			// Cancelling the second after its delay passed gives nothing.
			if s4 := p.refund(s, now+int64(250*time.Millisecond), 2, m2); s4 != s {
				t.Fatalf("refund after the delay changed the state")
			}
		})
	}
}

// Refunds never give back more than was reserved, in any order; cancelled
// last-in first-out before any is due, they give back exactly everything.
func TestRefundsNeverOvergive(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 12))
	for range 2000 {
		p := randomPolicy(r, []Algorithm{TokenBucket, GCRA}[r.IntN(2)])
		now := t0ns
		s0, _ := p.take(State{}, now, r.Int64N(p.burst+1)) // some tokens spent already
		s := s0
		type res struct {
			n    int64
			mark State
		}
		var rs []res
		for range 1 + r.IntN(5) {
			n := 1 + r.Int64N(p.burst)
			var ok bool
			var m State
			s, ok, _, m = p.reserve(s, now, n, 1<<62)
			if ok {
				rs = append(rs, res{n, m})
			}
		}
		at := now + r.Int64N(p.period/p.rate+1)
		lifo := r.IntN(2) == 0
		if lifo {
			for i, j := 0, len(rs)-1; i < j; i, j = i+1, j-1 {
				rs[i], rs[j] = rs[j], rs[i]
			}
		} else {
			r.Shuffle(len(rs), func(i, j int) { rs[i], rs[j] = rs[j], rs[i] })
		}
		for _, x := range rs {
			s = p.refund(s, at, x.n, x.mark)
		}
		got, floor := p.deficit(s, at), p.deficit(s0, at)
		if got < floor {
			t.Fatalf("%v: refunds left %d units missing, fewer than the %d before any reservation", p, got, floor)
		}
		// Reservations not yet due are given back in full when cancelled
		// newest first.
		pending := true
		for _, x := range rs {
			pending = pending && x.mark.A-p.cap > (at-x.mark.B)*p.r
		}
		if lifo && pending && got != floor {
			t.Fatalf("%v: LIFO refunds left %d units missing, want %d", p, got, floor)
		}
	}
}

func TestDecide(t *testing.T) {
	p := mustPolicy(t, GCRA, Limit{Rate: 1, Period: time.Second, Burst: 2})
	s, res, err := p.Decide(State{}, t0ns, 2)
	if err != nil || !res.Allowed || res.Remaining != 0 || res.ResetAfter != 2*time.Second {
		t.Fatalf("Decide = %+v, %v", res, err)
	}
	if _, res, _ = p.Decide(s, t0ns, 1); res.Allowed || res.RetryAfter != time.Second {
		t.Fatalf("second Decide = %+v", res)
	}
	if s, _, _ := p.Decide(s, t0ns+int64(2*time.Second), 0); s != (State{}) {
		t.Fatalf("a full bucket is not the zero State: %+v", s)
	}
	if _, _, err := p.Decide(s, t0ns, 3); err == nil {
		t.Fatal("n above burst: no error")
	}
	if _, _, err := mustPolicy(t, SlidingLog, Limit{Rate: 1, Period: 1}).Decide(State{}, 0, 1); err == nil {
		t.Fatal("SlidingLog: no error")
	}
	if _, _, err := (Policy{}).Decide(State{}, 0, 1); err == nil {
		t.Fatal("zero Policy: no error")
	}
}
