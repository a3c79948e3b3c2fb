package ratelimit

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/sluicehq/sluice/clock"
	"github.com/sluicehq/sluice/metrics"
)

// policyStore decides every request as a failed store's failure policy
// would (src), or fails without a decision (err), or, with src
// SourceNone, decides admitted with the Source left unset, as a Store
// written before Source existed would.
type policyStore struct {
	src Source
	err error
}

func (s policyStore) Apply(_ context.Context, _ time.Time, reqs []Request) error {
	if s.err != nil {
		return s.err
	}
	for i := range reqs {
		r := &reqs[i]
		r.Result = Result{Source: s.src, Limit: r.Policy.Limit().Burst}
		switch s.src {
		case SourceFailClosed:
			r.Result.RetryAfter = 250 * time.Millisecond
		case SourceFailOpen, SourceNone:
			r.Result.Allowed = true
		}
	}
	return nil
}

// degradedCount counts the decisions an observer saw as degraded.
type degradedCount struct {
	metrics.RateBase
	all, degraded int
}

func (o *degradedCount) RateDecision(_ string, d metrics.RateDecision) {
	o.all++
	if d.Degraded {
		o.degraded++
	}
}

// TestErrorContract: a non-nil error comes with no decision; a decision
// made by a failure policy comes with a nil error, says so in its Source,
// and is counted as degraded. The idiom "if err != nil || !res.Allowed
// { refuse }" therefore refuses exactly what the policies refuse.
func TestErrorContract(t *testing.T) {
	errDown := errors.New("down")
	ctx := context.Background()
	for _, tc := range []struct {
		name     string
		store    policyStore
		wantErr  bool
		allowed  bool
		src      Source
		degraded bool
	}{
		{"fail closed", policyStore{src: SourceFailClosed}, false, false, SourceFailClosed, true},
		{"fail open", policyStore{src: SourceFailOpen}, false, true, SourceFailOpen, true},
		{"fail local", policyStore{src: SourceFailLocal}, false, false, SourceFailLocal, true},
		{"source left unset", policyStore{}, false, true, SourceLimit, false},
		{"no decision", policyStore{err: errDown}, true, false, SourceNone, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			obs := &degradedCount{}
			l := mustNew(t, TokenBucket, Limit{Rate: 10, Period: time.Second},
				WithStore(tc.store), WithObserver(obs), WithClock(clock.NewManual(t0)))
			res, err := l.Allow(ctx, "k")
			if (err != nil) != tc.wantErr {
				t.Fatalf("err %v, want error %v", err, tc.wantErr)
			}
			if err != nil {
				if res != (Result{}) || res.Decided() || !errors.Is(err, errDown) {
					t.Fatalf("an error came with %+v (%v)", res, err)
				}
				if obs.all != 0 {
					t.Fatal("the observer saw a decision that was not made")
				}
				return
			}
			if !res.Decided() || res.Allowed != tc.allowed || res.Source != tc.src || res.Degraded() != tc.degraded {
				t.Fatalf("%+v (degraded %v), want allowed %v source %v degraded %v", res, res.Degraded(), tc.allowed, tc.src, tc.degraded)
			}
			if obs.all != 1 || (obs.degraded == 1) != tc.degraded {
				t.Fatalf("observer: %d decisions, %d degraded", obs.all, obs.degraded)
			}
			// Tiers on the store combine the same way.
			l2 := mustNew(t, GCRA, Limit{Rate: 5, Period: time.Second}, WithStore(tc.store), WithClock(clock.NewManual(t0)))
			tiers, err := All(l, l2)
			if err != nil {
				t.Fatal(err)
			}
			each := make([]Result, 2)
			tr, err := tiers.AllowN(ctx, []string{"k", "k"}, 1, each)
			if err != nil || tr.Source != tc.src || tr.Allowed != tc.allowed || each[1].Source != tc.src {
				t.Fatalf("tiers: %+v %+v %v", tr, each, err)
			}
		})
	}
}

// TestWaitRefusals: Wait, which has no Result, says why it refused: a full
// store (ErrTooManyKeys), a failed store's fail-closed policy (ErrDegraded),
// and grants what a fail-open policy grants.
func TestWaitRefusals(t *testing.T) {
	ctx := context.Background()
	clk := clock.NewManual(t0)
	full := mustNew(t, TokenBucket, Limit{Rate: 1, Period: time.Hour}, WithClock(clk), WithMaxKeys(1))
	if err := full.Wait(ctx, "a", 1); err != nil {
		t.Fatal(err)
	}
	if err := full.Wait(ctx, "b", 1); !errors.Is(err, ErrTooManyKeys) {
		t.Fatalf("Wait on a full store: %v, want ErrTooManyKeys", err)
	}
	r, err := full.Reserve(ctx, "c", 1)
	if err != nil || r.OK() || r.Source() != SourceFull {
		t.Fatalf("Reserve on a full store: ok %v source %v, %v", r.OK(), r.Source(), err)
	}
	closed := mustNew(t, TokenBucket, Limit{Rate: 1, Period: time.Hour}, WithClock(clk), WithStore(policyStore{src: SourceFailClosed}))
	if err := closed.Wait(ctx, "a", 1); !errors.Is(err, ErrDegraded) {
		t.Fatalf("Wait on a fail-closed store: %v, want ErrDegraded", err)
	}
	open := mustNew(t, TokenBucket, Limit{Rate: 1, Period: time.Hour}, WithClock(clk), WithStore(policyStore{src: SourceFailOpen}))
	if err := open.Wait(ctx, "a", 1); err != nil {
		t.Fatalf("Wait on a fail-open store: %v", err)
	}
}

func TestSourceString(t *testing.T) {
	for s, want := range map[Source]string{SourceNone: "none", SourceLimit: "limit", SourceFull: "full",
		SourceFailClosed: "fail_closed", SourceFailOpen: "fail_open", SourceFailLocal: "fail_local", 99: "Source(99)"} {
		if s.String() != want {
			t.Errorf("%d: %q, want %q", s, s.String(), want)
		}
	}
}
