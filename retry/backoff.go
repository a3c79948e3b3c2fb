package retry

import (
	"math"
	"time"
)

// Backoff is capped exponential backoff with full jitter: attempt k (1 for
// the first retry) waits
//
//	U(0, min(Max, Base·2^(k−1)))
//
// but never less than the server's retry-after hint, and never zero.
type Backoff struct {
	Base time.Duration
	Max  time.Duration
}

// Delay returns the wait before retry attempt k given the server's
// retry-after hint (0 if none) and u, a uniform random number in [0, 1).
func (b Backoff) Delay(k int, retryAfter time.Duration, u float64) time.Duration {
	ceil := float64(b.Base) * math.Pow(2, float64(max(k, 1)-1))
	if b.Max > 0 {
		ceil = min(ceil, float64(b.Max))
	}
	return max(time.Duration(u*ceil), retryAfter, time.Nanosecond)
}
