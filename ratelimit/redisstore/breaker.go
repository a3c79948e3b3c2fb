package redisstore

import (
	"sync/atomic"
	"time"
)

// breaker is a circuit breaker: threshold failures in a row open it for
// cooldown, then one call (the probe) may try Redis again.
type breaker struct {
	threshold int32
	cooldown  time.Duration
	fails     atomic.Int32
	openUntil atomic.Int64 // Unix ns; 0 when closed
}

// allow reports whether a call may try Redis at now.
func (b *breaker) allow(now time.Time) bool {
	if b.threshold == 0 {
		return true
	}
	until := b.openUntil.Load()
	if until == 0 {
		return true
	}
	t := now.UnixNano()
	if t < until {
		return false
	}
	// Half open: the first caller past the cool-down probes; the others
	// wait for its verdict for another cool-down.
	return b.openUntil.CompareAndSwap(until, t+int64(b.cooldown))
}

// failure records a failed call.
func (b *breaker) failure(now time.Time) {
	if b.threshold == 0 {
		return
	}
	if b.fails.Add(1) >= b.threshold {
		b.openUntil.Store(now.UnixNano() + int64(b.cooldown))
	}
}

// success records a successful call and closes the breaker.
func (b *breaker) success() {
	if b.threshold == 0 {
		return
	}
	if b.fails.Load() != 0 {
		b.fails.Store(0)
	}
	if b.openUntil.Load() != 0 {
		b.openUntil.Store(0)
	}
}
