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

// tierBackends build the limiters of a Tiers on one kind of store.
var tierBackends = []struct {
	name string
	opts func(t testing.TB) func() []Option
}{
	{"memory", func(testing.TB) func() []Option { return func() []Option { return nil } }},
	{"shared-memory", func(t testing.TB) func() []Option {
		m, _ := NewMemoryStore(1000)
		return func() []Option { return []Option{WithStore(m)} }
	}},
	{"store", func(t testing.TB) func() []Option {
		m, _ := NewMemoryStore(1000)
		return func() []Option { return []Option{WithStore(opaqueStore{m})} }
	}},
}

func TestTiersAllOrNothing(t *testing.T) {
	for _, be := range tierBackends {
		t.Run(be.name, func(t *testing.T) {
			c := clock.NewManual(t0)
			opts := be.opts(t)
			perUser := mustNew(t, TokenBucket, Limit{Rate: 5, Period: time.Second}, append(opts(), WithClock(c))...)
			global := mustNew(t, FixedWindow, Limit{Rate: 3, Period: time.Second}, append(opts(), WithClock(c))...)
			tiers, err := All(perUser, global)
			if err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			each := make([]Result, 2)
			for i := range 3 {
				res, err := tiers.AllowN(ctx, []string{"alice", "all"}, 1, each)
				if err != nil || !res.Allowed || res.Remaining != 2-i || res.Limit != 3 {
					t.Fatalf("request %d: %+v, %v", i, res, err)
				}
			}
			res, err := tiers.AllowN(ctx, []string{"alice", "all"}, 1, each)
			if err != nil || res.Allowed || res.RetryAfter != time.Second || res.Remaining != 0 {
				t.Fatalf("fourth: %+v, %v", res, err)
			}
			// The user tier admitted but spent nothing.
			if !each[0].Allowed || each[0].Remaining != 2 || each[1].Allowed {
				t.Fatalf("tiers of the fourth: %+v", each)
			}
			if res, _ := perUser.AllowN(ctx, "alice", 2); !res.Allowed || res.Remaining != 0 {
				t.Fatalf("alice's own allowance after the refusal: %+v", res)
			}
			// Both refuse: RetryAfter is the longer wait.
			res, _ = tiers.Allow(ctx, "alice", "all")
			if res.Allowed || res.RetryAfter != time.Second {
				t.Fatalf("both refusing: %+v", res)
			}
			c.Advance(time.Second)
			if res, _ := tiers.Allow(ctx, "alice", "all"); !res.Allowed {
				t.Fatalf("after the window: %+v", res)
			}
		})
	}
}

// Under concurrency every tier admits exactly its limit and nothing is
// spent on refused requests.
func TestTiersConcurrent(t *testing.T) {
	for _, be := range tierBackends {
		t.Run(be.name, func(t *testing.T) {
			c := clock.NewManual(t0)
			opts := be.opts(t)
			perUser := mustNew(t, GCRA, Limit{Rate: 10, Period: time.Hour}, append(opts(), WithClock(c))...)
			perTenant := mustNew(t, SlidingLog, Limit{Rate: 30, Period: time.Hour}, append(opts(), WithClock(c))...)
			global := mustNew(t, SlidingWindow, Limit{Rate: 45, Period: time.Hour}, append(opts(), WithClock(c))...)
			tiers, _ := All(perUser, perTenant, global)
			ctx := context.Background()
			var perUserOK [8]atomic.Int64
			var total atomic.Int64
			var wg sync.WaitGroup
			for g := range 8 {
				wg.Go(func() {
					for i := range 100 {
						u := (g + i) % 8
						keys := []string{fmt.Sprint("user", u), fmt.Sprint("tenant", u%2), "all"}
						res, err := tiers.AllowN(ctx, keys, 1, nil)
						if err != nil {
							t.Error(err)
							return
						}
						if res.Allowed {
							perUserOK[u].Add(1)
							total.Add(1)
						}
					}
				})
			}
			wg.Wait()
			if total.Load() != 45 {
				t.Fatalf("admitted %d, want the global 45", total.Load())
			}
			each := make([]Result, 3)
			tenant := [2]int64{}
			for u := range perUserOK {
				n := perUserOK[u].Load()
				tenant[u%2] += n
				if n > 10 {
					t.Fatalf("user %d admitted %d of 10", u, n)
				}
				// Refused by the global tier: the user tier reports exactly
				// what it spent.
				res, _ := tiers.AllowN(ctx, []string{fmt.Sprint("user", u), fmt.Sprint("tenant", u%2), "all"}, 1, each)
				if res.Allowed || (each[0].Remaining != int(10-n) && n < 10) {
					t.Fatalf("user %d: admitted %d, tier says %+v", u, n, each[0])
				}
			}
			if tenant[0] > 30 || tenant[1] > 30 {
				t.Fatalf("tenants admitted %v of 30 each", tenant)
			}
		})
	}
}

func TestTiersShadow(t *testing.T) {
	c := clock.NewManual(t0)
	perUser := mustNew(t, TokenBucket, Limit{Rate: 5, Period: time.Second}, WithClock(c))
	dark := mustNew(t, FixedWindow, Limit{Rate: 1, Period: time.Second}, WithClock(c), WithShadow(true))
	tiers, _ := All(perUser, dark)
	ctx := context.Background()
	each := make([]Result, 2)
	tiers.Allow(ctx, "u", "g")
	res, err := tiers.AllowN(ctx, []string{"u", "g"}, 1, each)
	if err != nil || !res.Allowed || !res.Shadowed || res.Remaining != 3 || res.RetryAfter != 0 {
		t.Fatalf("shadow tier over its limit: %+v, %v", res, err)
	}
	if !each[1].Allowed || !each[1].Shadowed || each[1].RetryAfter != time.Second {
		t.Fatalf("shadow tier's own result: %+v", each[1])
	}
	// Only shadow tiers: the combined result reports theirs.
	only, _ := All(dark)
	if res, _ := only.Allow(ctx, "g"); !res.Allowed || !res.Shadowed || res.RetryAfter != time.Second {
		t.Fatalf("shadow-only tiers: %+v", res)
	}
}

func TestTiersErrors(t *testing.T) {
	a := mustNew(t, GCRA, Limit{Rate: 5, Period: time.Second})
	b := mustNew(t, GCRA, Limit{Rate: 5, Period: time.Second}, WithStore(opaqueStore{}))
	for _, tc := range []struct {
		lims []*Limiter
		want string
	}{
		{nil, "at least one limiter"},
		{[]*Limiter{a, nil}, "limiter 1 is nil"},
		{[]*Limiter{a, a}, "limiter 1 appears twice"},
		{[]*Limiter{a, b}, "all keep their state in memory, or all share one Store"},
	} {
		if _, err := All(tc.lims...); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("All(%d limiters): %v, want %q", len(tc.lims), err, tc.want)
		}
	}
	tiers, _ := All(a)
	ctx := context.Background()
	if _, err := tiers.Allow(ctx, "x", "y"); err == nil {
		t.Error("two keys for one tier: no error")
	}
	if _, err := tiers.AllowN(ctx, []string{"x"}, 1, make([]Result, 2)); err == nil {
		t.Error("two results for one tier: no error")
	}
	if _, err := tiers.Allow(ctx, ""); !errors.Is(err, ErrInvalidKey) || !strings.Contains(err.Error(), "tier 0") {
		t.Errorf("empty key: %v", err)
	}
	if _, err := tiers.AllowN(ctx, []string{"x"}, 6, nil); !errors.Is(err, ErrInvalidCost) {
		t.Errorf("cost above burst: %v", err)
	}
}

// A full store refuses the whole request, and counts nothing anywhere.
func TestTiersFullStore(t *testing.T) {
	c := clock.NewManual(t0)
	a := mustNew(t, GCRA, Limit{Rate: 5, Period: time.Second}, WithClock(c))
	b := mustNew(t, GCRA, Limit{Rate: 5, Period: time.Second}, WithClock(c), WithMaxKeys(1))
	tiers, _ := All(a, b)
	ctx := context.Background()
	tiers.Allow(ctx, "x", "held")
	each := make([]Result, 2)
	res, err := tiers.AllowN(ctx, []string{"x", "new"}, 1, each)
	if err != nil || res.Allowed || res.Source != SourceFull || each[0].Source != SourceLimit || each[1].Source != SourceFull {
		t.Fatalf("%+v, %v", res, err)
	}
	if res, _ := a.AllowN(ctx, "x", 4); !res.Allowed {
		t.Fatalf("tier a spent on the refused request: %+v", res)
	}
}

func TestTiersDoNotAllocate(t *testing.T) {
	c := clock.NewManual(t0)
	a := mustNew(t, GCRA, Limit{Rate: 1000, Period: time.Hour}, WithClock(c))
	b := mustNew(t, SlidingWindow, Limit{Rate: 1000, Period: time.Hour}, WithClock(c))
	tiers, _ := All(a, b)
	ctx := context.Background()
	keys := []string{"user", "tenant"}
	each := make([]Result, 2)
	tiers.AllowN(ctx, keys, 1, each)
	if n := testing.AllocsPerRun(200, func() { tiers.AllowN(ctx, keys, 1, each) }); n != 0 {
		t.Fatalf("Tiers.AllowN allocates %v times", n)
	}
}
