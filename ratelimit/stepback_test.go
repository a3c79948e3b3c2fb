package ratelimit

import (
	"context"
	"testing"
	"time"
)

// A request whose time reads earlier than the key's last decision (a
// goroutine that read the clock before another decided on the same key, or
// a store whose clock was set back) is decided at the key's time: it must
// not bring back refill already counted, nor reset a newer window's count.
// 5 units at T, 1 at T−5s, then units at T+1ms until refused: a limit of 10
// per second admits at most 10 in all (T+1ms refills only 0.01).
func TestSteppedBackTimeNeverOverAdmits(t *testing.T) {
	const T = int64(10 * time.Second)
	for _, alg := range []Algorithm{FixedWindow, SlidingWindow, TokenBucket, GCRA} {
		t.Run(alg.String(), func(t *testing.T) {
			p, err := NewPolicy(alg, Limit{Rate: 10, Period: time.Second})
			if err != nil {
				t.Fatal(err)
			}
			s, res, err := p.Decide(State{}, T, 5)
			if err != nil || !res.Allowed {
				t.Fatalf("5 at T: %+v, %v", res, err)
			}
			total := 5
			s, res, _ = p.Decide(s, T-int64(5*time.Second), 1)
			if res.Allowed {
				total++
			}
			for range 20 {
				var r Result
				s, r, _ = p.Decide(s, T+int64(time.Millisecond), 1)
				if !r.Allowed {
					break
				}
				total++
			}
			if total > 10 {
				t.Fatalf("admitted %d units around T, limit 10 per second", total)
			}
		})
	}
}

// A refused request at a stepped-back time is told the wait from its own
// time: the key's time minus its own, plus the wait from the key's time.
func TestSteppedBackRetryAfter(t *testing.T) {
	const T = int64(10 * time.Second)
	back := T - int64(5*time.Second)
	for _, tc := range []struct {
		alg   Algorithm
		retry time.Duration // from T
		reset time.Duration // from T
	}{
		{FixedWindow, time.Second, time.Second},
		{SlidingWindow, 1100 * time.Millisecond, 2 * time.Second},
		{TokenBucket, 100 * time.Millisecond, time.Second},
		{GCRA, 100 * time.Millisecond, time.Second},
	} {
		t.Run(tc.alg.String(), func(t *testing.T) {
			p, err := NewPolicy(tc.alg, Limit{Rate: 10, Period: time.Second})
			if err != nil {
				t.Fatal(err)
			}
			s, res, _ := p.Decide(State{}, T, 10)
			if !res.Allowed {
				t.Fatal("10 at T refused")
			}
			_, atT, _ := p.Decide(s, T, 1)
			if atT.Allowed || atT.RetryAfter != tc.retry || atT.ResetAfter != tc.reset {
				t.Fatalf("at T: %+v, want retry %v reset %v", atT, tc.retry, tc.reset)
			}
			next, r, _ := p.Decide(s, back, 1)
			if r.Allowed || next != s {
				t.Fatalf("at T-5s: %+v (state %+v -> %+v), want refused and unchanged", r, s, next)
			}
			if want := 5*time.Second + tc.retry; r.RetryAfter != want {
				t.Errorf("RetryAfter at T-5s = %v, want %v", r.RetryAfter, want)
			}
			if want := 5*time.Second + tc.reset; r.ResetAfter != want {
				t.Errorf("ResetAfter at T-5s = %v, want %v", r.ResetAfter, want)
			}
		})
	}
}

// Reservations on a token bucket at a stepped-back time are queued behind
// the key's time, like requests: no refill is counted twice.
func TestSteppedBackReserve(t *testing.T) {
	const T = int64(10 * time.Second)
	p, err := NewPolicy(TokenBucket, Limit{Rate: 10, Period: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	s, _, _ := p.Decide(State{}, T, 10)
	next, ok, delay, _, err := p.Reserve(s, T-int64(5*time.Second), 1, time.Hour)
	if err != nil || !ok {
		t.Fatalf("Reserve: ok %v err %v", ok, err)
	}
	if want := 5*time.Second + 100*time.Millisecond; delay != want {
		t.Fatalf("delay %v, want %v", delay, want)
	}
	// At T+1ms the bucket is still 1 token in debt: nothing is admitted.
	if _, r, _ := p.Decide(next, T+int64(time.Millisecond), 1); r.Allowed {
		t.Fatalf("admitted at T+1ms after a reservation made at a stepped-back time: %+v", r)
	}
}

// A sliding log keeps its stamps in order when a request's time reads
// earlier than its newest stamp: the request is stamped at the newest
// stamp's time, and the key's reset is measured from its real newest stamp.
func TestSteppedBackSlidingLog(t *testing.T) {
	T := time.Unix(10, 0)
	m, err := NewMemoryStore(10)
	if err != nil {
		t.Fatal(err)
	}
	p, err := NewPolicy(SlidingLog, Limit{Rate: 10, Period: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	apply := func(at time.Time, n int) Result {
		t.Helper()
		reqs := []Request{{Key: "k", Policy: &p, N: n}}
		if err := m.Apply(context.Background(), at, reqs); err != nil {
			t.Fatal(err)
		}
		return reqs[0].Result
	}
	apply(T, 5)
	if r := apply(T.Add(-5*time.Second), 1); !r.Allowed || r.ResetAfter != 6*time.Second {
		t.Fatalf("at T-5s: %+v, want admitted, reset 6s (T+1s)", r)
	}
	r := apply(T.Add(time.Millisecond), 5)
	if r.Allowed || r.Remaining != 4 || r.RetryAfter != 999*time.Millisecond || r.ResetAfter != 999*time.Millisecond {
		t.Fatalf("at T+1ms: %+v, want refused, 4 remaining, retry and reset 999ms", r)
	}
}
