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
//		// no decision: an invalid key, or the context ended, or a store
//		// failed with no failure policy to decide; refuse (or admit: the
//		// choice is the caller's, as no limit was applied)
//	}
//	if !res.Allowed {
//		// refuse: 429 with Retry-After from res.RetryAfter, unless
//		// res.Source says the refusal was not the key's quota (SourceFull,
//		// SourceFailClosed: 503)
//	}
//
// # Errors and decisions
//
// One contract holds for every call that decides (Allow, AllowN, Tiers,
// Reserve, Concurrency.Acquire, Store.Apply): a non-nil error means there is
// no decision, and comes with the zero Result; a nil error comes with a
// decision. A refusal is a decision, not an error: Result.Allowed says what
// was decided, and Remaining, RetryAfter and ResetAfter say exactly why and
// for how long. Errors are for input that can never be decided (an empty
// key, a cost the limit can never admit), a context that ended before the
// store answered, and a store that failed with no policy to decide for it.
//
// A decision the limit did not make is still a decision, and Result.Source
// says who made it: a store that cannot hold another key refuses
// (SourceFull), and a store that fails decides by its failure policy
// (SourceFailClosed, SourceFailOpen, SourceFailLocal; see
// ratelimit/redisstore). Such decisions come with a nil error, are counted
// by the observer (metrics.RateDecision.Degraded), and the store's own
// error reporting keeps the cause for errors.Is (redisstore.Store.LastError,
// redisstore.WithErrorHandler). So the usual
//
//	if err != nil || !res.Allowed { refuse }
//
// refuses exactly what the limit and the store's policies refuse: it never
// turns a store configured to fail open into one that fails closed.
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
