// Package ratelimit is sluice's per-key rate limiter: it answers "has this
// caller (IP, API key, tenant, endpoint) used up its allowance?" with one of
// five algorithms, exactly, in integer nanoseconds.
//
// Typical use:
//
//	lim, err := ratelimit.New(ratelimit.TokenBucket,
//		ratelimit.Limit{Rate: 100, Period: time.Second, Burst: 500})
//	...
//	res, err := lim.Allow(ctx, apiKey)
//	if err != nil {
//		// invalid key, or a failed store
//	}
//	if !res.Allowed {
//		// refuse: 429 with Retry-After from res.RetryAfter
//	}
//
// A refusal is a decision, not an error: Result.Allowed says what the limit
// decided, and Remaining, RetryAfter and ResetAfter say exactly why and for
// how long. Errors are for invalid input (an empty key, a cost the limit can
// never admit), a full key table, and failed stores.
//
// The algorithms (see Algorithm) keep a small state per key in a Store. The
// default store is in memory (MemoryStore): sharded, bounded by WithMaxKeys,
// and it only ever drops a key whose state is the same as a fresh key's, so
// forgetting a key never resets an active limit. The arithmetic is a pure
// function (Policy.Decide), so the same Limiter runs on other stores (Redis,
// in ratelimit/redisstore) with the same decisions.
//
// All checks several limits for one request (per IP, per API key, per
// tenant) and admits it only if every one admits, spending nothing when one
// refuses. WithShadow decides and reports without ever refusing, to dark
// launch a new limit. Concurrency bounds the requests in flight per key, with
// leases that expire so a crashed handler cannot leak its slot.
//
// Time comes from the limiter's clock (WithClock). Nothing in this package
// starts a goroutine or a timer except Wait on a real clock, so a limiter on a
// clock.Manual is driven entirely by its callers.
package ratelimit
