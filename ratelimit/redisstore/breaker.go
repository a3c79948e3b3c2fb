package redisstore

import (
	"sync/atomic"
	"time"
)

// breaker is a circuit breaker: threshold failures in a row open it for
// cooldown, and so does one refused connection (trip); then one caller is
// told to probe Redis, in the background, and the breaker stays open for
// another cool-down unless the probe succeeds and closes it. It measures
// time on the monotonic clock (since epoch), so a step of the wall clock
// neither keeps it open nor closes it early.
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

// open reports whether the breaker is open at now.
func (b *breaker) open(now time.Time) bool {
	until := b.openUntil.Load()
	return until != 0 && since(now) < until
}

// allow reports whether a call may try Redis at now (try), and, when it may
// not, whether the caller was picked to start the probe: the first caller
// past a cool-down is, and the breaker stays open for another cool-down
// meanwhile.
func (b *breaker) allow(now time.Time) (try, probe bool) {
	if b.threshold == 0 {
		return true, false
	}
	until := b.openUntil.Load()
	if until == 0 {
		return true, false
	}
	t := since(now)
	if t < until {
		return false, false
	}
	return false, b.openUntil.CompareAndSwap(until, t+int64(b.cooldown))
}

// allowNow is allow at the current time; it reads the clock only while the
// breaker is open, so a closed breaker costs one atomic load per call.
func (b *breaker) allowNow() (try, probe bool) {
	if b.threshold == 0 || b.openUntil.Load() == 0 {
		return true, false
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

// trip opens the breaker at once: Redis refused a connection, so every
// call until the next probe would fail the same way.
func (b *breaker) trip(now time.Time) {
	if b.threshold == 0 {
		return
	}
	b.fails.Store(b.threshold)
	b.openUntil.Store(since(now) + int64(b.cooldown))
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
