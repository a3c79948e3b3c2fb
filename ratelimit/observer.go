package ratelimit

import "github.com/sluicehq/sluice/metrics"

// observe reports a decision of the limiter named name on a request of cost
// n to o (see metrics.RateObserver).
func observe(o metrics.RateObserver, name string, n int, res Result) {
	o.RateDecision(name, metrics.RateDecision{
		Cost: n, Allowed: res.Allowed, Shadowed: res.Shadowed,
		Limit: res.Limit, Remaining: res.Remaining, RetryAfter: res.RetryAfter,
		Degraded: res.Degraded(),
	})
}
