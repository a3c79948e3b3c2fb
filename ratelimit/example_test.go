package ratelimit_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/sluicehq/sluice/clock"
	"github.com/sluicehq/sluice/ratelimit"
)

// A token bucket of 500 refilled at 100 per second admits a burst of 500,
// then one request per 10ms.
func Example() {
	c := clock.NewManual(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	lim, err := ratelimit.New(ratelimit.TokenBucket,
		ratelimit.Limit{Rate: 100, Period: time.Second, Burst: 500},
		ratelimit.WithClock(c))
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	admitted := 0
	for range 600 {
		if res, _ := lim.Allow(ctx, "user:42"); res.Allowed {
			admitted++
		}
	}
	res, _ := lim.Allow(ctx, "user:42")
	fmt.Println("admitted:", admitted)
	fmt.Printf("next: allowed=%v remaining=%d retry after %v, full again after %v\n",
		res.Allowed, res.Remaining, res.RetryAfter, res.ResetAfter)
	c.Advance(res.RetryAfter)
	res, _ = lim.Allow(ctx, "user:42")
	fmt.Println("10ms later:", res.Allowed)
	// Output:
	// admitted: 500
	// next: allowed=false remaining=0 retry after 10ms, full again after 5s
	// 10ms later: true
}

// A fixed window counts per calendar window: 3 per minute resets on the
// minute, whenever the first request came.
func ExampleNew() {
	c := clock.NewManual(time.Date(2026, 1, 1, 12, 0, 50, 0, time.UTC))
	lim, _ := ratelimit.New(ratelimit.FixedWindow,
		ratelimit.Limit{Rate: 3, Period: time.Minute}, ratelimit.WithClock(c))
	ctx := context.Background()
	res, _ := lim.AllowN(ctx, "10.0.0.1", 3)
	fmt.Println(res.Allowed, res.Remaining, res.ResetAfter)
	res, _ = lim.Allow(ctx, "10.0.0.1")
	fmt.Println(res.Allowed, res.RetryAfter)
	// Output:
	// true 0 10s
	// false 10s
}

// Costs that can never be admitted, and bad keys, are errors; refusals are
// not.
func ExampleLimiter_AllowN() {
	lim, err := ratelimit.New(ratelimit.GCRA, ratelimit.Limit{Rate: 10, Period: time.Second, Burst: 5})
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	_, err = lim.AllowN(ctx, "upload:7", 6)
	fmt.Println(errors.Is(err, ratelimit.ErrInvalidCost), err)
	_, err = lim.AllowN(ctx, "", 1)
	fmt.Println(errors.Is(err, ratelimit.ErrInvalidKey), err)
	// Output:
	// true sluice/ratelimit: invalid cost 6: exceeds the burst of 5, so it could never be admitted
	// true sluice/ratelimit: invalid key: empty
}

// Reserve is the leaky bucket as a queue: every caller gets its tokens and
// a delay, and a cancelled reservation gives its tokens back.
func ExampleLimiter_Reserve() {
	c := clock.NewManual(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	lim, _ := ratelimit.New(ratelimit.GCRA,
		ratelimit.Limit{Rate: 100, Period: time.Second, Burst: 1}, ratelimit.WithClock(c))
	ctx := context.Background()
	var last *ratelimit.Reservation
	for range 4 {
		r, _ := lim.Reserve(ctx, "sms-vendor", 1)
		fmt.Println("go after", r.Delay())
		last = r
	}
	last.Cancel()
	r, _ := lim.Reserve(ctx, "sms-vendor", 1)
	fmt.Println("after a cancel, go after", r.Delay())
	// Output:
	// go after 0s
	// go after 10ms
	// go after 20ms
	// go after 30ms
	// after a cancel, go after 30ms
}

// Wait queues callers behind a bucket: each returns once its token is due,
// here one per millisecond.
func ExampleLimiter_Wait() {
	lim, err := ratelimit.New(ratelimit.GCRA, ratelimit.Limit{Rate: 1000, Period: time.Second, Burst: 1})
	if err != nil {
		panic(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	start := time.Now()
	for range 3 {
		if err := lim.Wait(ctx, "batch-job", 1); err != nil {
			panic(err)
		}
	}
	fmt.Println("three tokens took at least 2ms:", time.Since(start) >= 2*time.Millisecond)
	// Output: three tokens took at least 2ms: true
}

// Tiers check one request against several limits; a refusal by one tier
// spends nothing in the others.
func ExampleAll() {
	c := clock.NewManual(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	perKey, _ := ratelimit.New(ratelimit.TokenBucket,
		ratelimit.Limit{Rate: 10, Period: time.Second}, ratelimit.WithClock(c))
	perTenant, _ := ratelimit.New(ratelimit.SlidingWindow,
		ratelimit.Limit{Rate: 3, Period: time.Minute}, ratelimit.WithClock(c))
	tiers, err := ratelimit.All(perKey, perTenant)
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	each := make([]ratelimit.Result, 2)
	for range 4 {
		res, _ := tiers.AllowN(ctx, []string{"key:abc", "tenant:acme"}, 1, each)
		fmt.Printf("allowed=%v: per key %d left, per tenant %d left\n",
			res.Allowed, each[0].Remaining, each[1].Remaining)
	}
	// Output:
	// allowed=true: per key 9 left, per tenant 2 left
	// allowed=true: per key 8 left, per tenant 1 left
	// allowed=true: per key 7 left, per tenant 0 left
	// allowed=false: per key 7 left, per tenant 0 left
}

// In shadow mode a limit decides and reports, but never refuses: a dark
// launch.
func ExampleWithShadow() {
	lim, _ := ratelimit.New(ratelimit.SlidingLog,
		ratelimit.Limit{Rate: 2, Period: time.Minute}, ratelimit.WithShadow(true))
	ctx := context.Background()
	for range 3 {
		res, _ := lim.Allow(ctx, "login:bob")
		fmt.Println("allowed:", res.Allowed, "would have refused:", res.Shadowed)
	}
	// Output:
	// allowed: true would have refused: false
	// allowed: true would have refused: false
	// allowed: true would have refused: true
}

// A Concurrency limiter bounds the requests in flight per key; a lease that
// is never released expires.
func ExampleConcurrency() {
	c := clock.NewManual(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	conc, err := ratelimit.NewConcurrency(2, ratelimit.WithClock(c), ratelimit.WithLease(30*time.Second))
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	a, _, _ := conc.Acquire(ctx, "tenant:acme")
	_, _, _ = conc.Acquire(ctx, "tenant:acme") // a handler that crashes and never releases
	_, res, _ := conc.Acquire(ctx, "tenant:acme")
	fmt.Println("third:", res.Allowed)
	a.Release()
	_, res, _ = conc.Acquire(ctx, "tenant:acme")
	fmt.Println("after a release:", res.Allowed)
	c.Advance(30 * time.Second) // both leases expire
	fmt.Println("in flight after the lease:", conc.InFlight("tenant:acme"))
	// Output:
	// third: false
	// after a release: true
	// in flight after the lease: 0
}

// At its key cap the in-memory store refuses new keys, so that a key spray
// can neither exhaust memory nor slip past the limit.
func ExampleWithMaxKeys() {
	lim, _ := ratelimit.New(ratelimit.TokenBucket,
		ratelimit.Limit{Rate: 1, Period: time.Hour}, ratelimit.WithMaxKeys(2))
	ctx := context.Background()
	for _, ip := range []string{"10.0.0.1", "10.0.0.2", "10.0.0.3"} {
		res, err := lim.Allow(ctx, ip)
		fmt.Println(ip, res.Allowed, res.Source, err)
	}
	// Output:
	// 10.0.0.1 true limit <nil>
	// 10.0.0.2 true limit <nil>
	// 10.0.0.3 false full <nil>
}

// Policy.Decide is the whole arithmetic, as a pure function over a key's
// state: what a Store must reproduce.
func ExamplePolicy_Decide() {
	p, err := ratelimit.NewPolicy(ratelimit.GCRA, ratelimit.Limit{Rate: 1, Period: time.Second, Burst: 2})
	if err != nil {
		panic(err)
	}
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano()
	var s ratelimit.State // a fresh key
	for range 3 {
		var res ratelimit.Result
		s, res, _ = p.Decide(s, now, 1)
		fmt.Println(res.Allowed, res.Remaining, res.RetryAfter)
	}
	// Output:
	// true 1 0s
	// true 0 0s
	// false 0 1s
}

// A limiter on a coarse clock: no clock read per decision, decisions made
// at the last millisecond tick. Stop the clock when the limiter is retired.
func ExampleWithClock_coarse() {
	c, err := clock.NewCoarse(time.Millisecond)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer c.Stop()
	lim, err := ratelimit.New(ratelimit.GCRA, ratelimit.Limit{Rate: 60, Period: time.Hour, Burst: 2},
		ratelimit.WithClock(c))
	if err != nil {
		fmt.Println(err)
		return
	}
	for range 3 {
		res, _ := lim.Allow(context.Background(), "client-1")
		fmt.Println(res.Allowed)
	}
	// Output:
	// true
	// true
	// false
}

// Take is Allow's decision in a 32-byte Decision, for the hottest paths; on
// a clock.Coarse the limiter reads the clock with one atomic load.
func ExampleLimiter_Take() {
	c, err := clock.NewCoarse(time.Millisecond)
	if err != nil {
		panic(err)
	}
	defer c.Stop()
	lim, err := ratelimit.New(ratelimit.GCRA, ratelimit.Limit{Rate: 2, Period: time.Hour}, ratelimit.WithClock(c))
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	for range 3 {
		d, err := lim.Take(ctx, "10.0.0.7", 1)
		if err != nil {
			panic(err)
		}
		fmt.Println(d.Allowed(), d.Remaining(), d.RetryAfter() > 29*time.Minute)
	}
	// Output:
	// true 1 false
	// true 0 false
	// false 0 true
}
