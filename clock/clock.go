// Package clock is the time source every sluice limiter reads.
//
// Limiters take a Clock through their WithClock option. Production code uses
// System, or a Coarse clock where decisions are many and a resolution of a
// millisecond is acceptable (rate limits, not latency measurements); tests
// and the simulator use a Manual clock, which only moves when told to, so
// every time-dependent decision is reproducible.
package clock

import (
	"sync"
	"time"
)

// Clock tells the current time. Implementations must be safe for concurrent
// use and must never run backwards (a Manual clock refuses to).
type Clock interface {
	Now() time.Time
}

// Elapsed is implemented by clocks that can measure the time since an earlier
// instant more cheaply than Now().Sub(t). Limiters that stamp every request
// use it on their hot path; Since(t) must equal Now().Sub(t).
type Elapsed interface {
	Since(t time.Time) time.Duration
}

// System returns the machine's clock. Its Since reads only the monotonic
// clock when t carries a monotonic reading (as every time from Now does),
// which costs about half of a full time.Now.
func System() Clock { return systemClock{} }

type systemClock struct{}

func (systemClock) Now() time.Time                  { return time.Now() }
func (systemClock) Since(t time.Time) time.Duration { return time.Since(t) }

// Since returns the time elapsed on c since t, using c's cheaper Elapsed
// method when it has one.
func Since(c Clock, t time.Time) time.Duration {
	if e, ok := c.(Elapsed); ok {
		return e.Since(t)
	}
	return c.Now().Sub(t)
}

// ElapsedOf returns c's Elapsed method when it has one, and otherwise an
// Elapsed that measures with c.Now: for limiters that read elapsed time on
// every request, so that the choice is made once, not per call.
func ElapsedOf(c Clock) Elapsed {
	if e, ok := c.(Elapsed); ok {
		return e
	}
	return nowElapsed{c}
}

// nowElapsed measures elapsed time with a Clock's Now.
type nowElapsed struct{ c Clock }

func (n nowElapsed) Since(t time.Time) time.Duration { return n.c.Now().Sub(t) }

// Manual is a virtual clock that moves only when Advance or Set is called.
// It is safe for concurrent use. The zero value is not usable; call NewManual.
type Manual struct {
	mu  sync.Mutex
	now time.Time
}

// NewManual returns a Manual clock that reads start until moved. The
// monotonic reading of start, if any, is stripped so that all arithmetic on
// the clock's times is plain wall arithmetic.
func NewManual(start time.Time) *Manual {
	return &Manual{now: start.Round(0)}
}

// Now returns the clock's current time.
func (m *Manual) Now() time.Time {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.now
}

// Since returns Now().Sub(t).
func (m *Manual) Since(t time.Time) time.Duration {
	return m.Now().Sub(t)
}

// Advance moves the clock forward by d and returns the new time. A negative
// d panics: a clock that runs backwards would break every limiter reading it,
// and the mistake is the caller's, found at test time.
func (m *Manual) Advance(d time.Duration) time.Time {
	if d < 0 {
		panic("sluice/clock: Manual.Advance with negative duration " + d.String())
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.now = m.now.Add(d)
	return m.now
}

// Set moves the clock to t, which must not be before the current time; an
// earlier t panics for the same reason as a negative Advance.
func (m *Manual) Set(t time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	t = t.Round(0)
	if t.Before(m.now) {
		panic("sluice/clock: Manual.Set would move the clock backwards from " +
			m.now.Format(time.RFC3339Nano) + " to " + t.Format(time.RFC3339Nano))
	}
	m.now = t
}
