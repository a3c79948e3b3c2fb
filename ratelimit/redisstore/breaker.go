package redisstore

import (
	"sync/atomic"
	"time"
)

// breaker is a circuit breaker: threshold failures in a row open it for
// cooldown, then one call (the probe) may try Redis again. It measures time
// on the monotonic clock (since epoch), so a step of the wall clock neither
// keeps it open nor closes it early.
type breaker struct {
	threshold int32
	cooldown  time.Duration
	fails     atomic.Int32
	openUntil atomic.Int64 // ns since epoch; 0 when closed
}

// epoch is the origin of the breakers' instants.
var epoch = time.Now()

// since returns now as ns since epoch, never 0 (which means closed).
func since(now time.Time) int64 {
	if t := int64(now.Sub(epoch)); t != 0 {
		return t
	}
	return 1
}

// open reports whether the breaker is open at now, without claiming the
// probe: for calls that should not wait on a Redis known to be failing but
// must not stand in for the probe either.
func (b *breaker) open(now time.Time) bool {
	until := b.openUntil.Load()
	return until != 0 && since(now) < until
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
	t := since(now)
	if t < until {
		return false
	}
	// Half open: the first caller past the cool-down probes; the others
	// wait for its verdict for another cool-down.
	return b.openUntil.CompareAndSwap(until, t+int64(b.cooldown))
}

// allowNow is allow at the current time; it reads the clock only while the
// breaker is open, so a closed breaker costs one atomic load per call.
func (b *breaker) allowNow() bool {
	if b.threshold == 0 || b.openUntil.Load() == 0 {
		return true
	}
	return b.allow(time.Now())
}

// openNow is open at the current time, reading the clock only if needed.
func (b *breaker) openNow() bool {
	return b.openUntil.Load() != 0 && b.open(time.Now())
}

// failure records a failed call.
func (b *breaker) failure(now time.Time) {
	if b.threshold == 0 {
		return
	}
	if b.fails.Add(1) >= b.threshold {
		b.openUntil.Store(since(now) + int64(b.cooldown))
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
