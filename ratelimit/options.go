package ratelimit

import (
	"errors"
	"fmt"
	"time"

	"github.com/sluicehq/sluice/clock"
	"github.com/sluicehq/sluice/metrics"
)

// An Option configures a Limiter or a Concurrency limiter. Options are
// checked together by New and NewConcurrency, which report every invalid
// one; none is ever clamped or repaired silently.
type Option interface {
	apply(*config)
}

type optionFunc func(*config)

func (f optionFunc) apply(c *config) { f(c) }

// Defaults of the options; each option's doc repeats its default.
const (
	// DefaultMaxKeys is how many keys the default in-memory store holds at
	// most (WithMaxKeys): about 50 MB of state plus the keys' own bytes.
	DefaultMaxKeys = 1 << 20
	// DefaultMaxKeyLen is the longest key accepted, in bytes (WithMaxKeyLen).
	DefaultMaxKeyLen = 256
	// DefaultLease is how long a Concurrency lease is held before it
	// expires on its own (WithLease).
	DefaultLease = time.Minute
)

type config struct {
	clock       clock.Clock
	store       Store
	storeSet    bool
	maxKeys     int
	maxKeysSet  bool
	maxKeyLen   int
	shadow      bool
	observer    metrics.RateObserver
	nilObserver bool
	name        string
	timer       TimerFunc
	timerSet    bool
	lease       time.Duration
	leaseSet    bool
}

func defaultConfig() config {
	return config{
		clock:     clock.System(),
		maxKeys:   DefaultMaxKeys,
		maxKeyLen: DefaultMaxKeyLen,
		lease:     DefaultLease,
	}
}

// WithClock sets the clock the limiter reads. The default is clock.System().
// Calendar windows are aligned to the Unix epoch of the clock's time as read
// when the limiter is created; after that the limiter measures time by the
// clock's monotonic elapsed time (clock.Since), so wall-clock steps do not
// move its windows. The simulator and tests pass a *clock.Manual.
//
// A *clock.Coarse saves the clock read on every decision (a third of a
// decision's cost on a VM; the limiter reads it directly, one atomic load,
// without an interface call), at the price of deciding as if each request
// came at the clock's last tick. The decisions stay exact on the clock's
// time; the bound is on how that time lags the real one, by at most the
// lag L (about one resolution while the process is scheduled normally):
//
//   - over any real span t a key is admitted at most what the limit admits
//     over t + L (a bucket: Burst + Rate·(t + L)/Period; a window: a request
//     up to L after a window's end may still count in the ending window);
//   - never more than the limit over the clock's own time, and never less
//     than it admits over t − L;
//   - RetryAfter and ResetAfter are measured from the tick, so they read up
//     to L longer than from the real instant of the request (a caller that
//     retries after RetryAfter is never early).
//
// The default, clock.System(), is read as one monotonic clock read
// (time.Since on a time with a monotonic reading: the runtime's nanotime,
// through the vDSO). No cheaper source in the standard library keeps
// monotonicity: a coarse kernel clock (CLOCK_MONOTONIC_COARSE) is not in the
// vDSO path Go exposes and costs a system call, and reading the TSC needs
// assembly and per-machine calibration; so the system clock is left as it
// is, and clock.Coarse is the cheaper source.
func WithClock(c clock.Clock) Option {
	return optionFunc(func(cfg *config) { cfg.clock = c })
}

// WithStore keeps the per-key state in s instead of a new in-memory store of
// its own, for example a MemoryStore shared by several limiters, or a Redis
// store. Limiters sharing a store should read the same clock. Not for
// Concurrency.
func WithStore(s Store) Option {
	return optionFunc(func(cfg *config) { cfg.store, cfg.storeSet = s, true })
}

// WithMaxKeys bounds the keys of the default in-memory store, or of a
// Concurrency limiter, to n (default DefaultMaxKeys; at least 1). At the cap
// a request for a key that is not held, and cannot be made room for by
// dropping a key whose state is back to a fresh key's, is refused (a
// decision with Result.Source SourceFull and a nil error; Wait returns
// ErrTooManyKeys); keys already held are decided as always. It cannot be
// combined with WithStore: pass NewMemoryStore(n) instead.
func WithMaxKeys(n int) Option {
	return optionFunc(func(cfg *config) { cfg.maxKeys, cfg.maxKeysSet = n, true })
}

// WithMaxKeyLen sets the longest key accepted, in bytes (default
// DefaultMaxKeyLen; from 1 to 65536). Longer keys are refused with
// ErrInvalidKey before they reach the store.
func WithMaxKeyLen(n int) Option {
	return optionFunc(func(cfg *config) { cfg.maxKeyLen = n })
}

// WithShadow(true) puts the limiter in shadow mode, to dark launch a limit:
// it decides and counts exactly as it would otherwise, but never refuses.
// A request the limit would have refused is admitted with Result.Shadowed
// set, and is not counted against the limit (just as a refused request would
// not be). Errors (an invalid key or cost, a failed store with no policy to
// decide) are still errors; a full store's refusal (SourceFull) is a
// shadowed admission too.
func WithShadow(on bool) Option {
	return optionFunc(func(cfg *config) { cfg.shadow = on })
}

// WithObserver reports every decision of Allow, AllowN, Tiers and
// Concurrency to o (see metrics.RateObserver). The default reports nothing.
func WithObserver(o metrics.RateObserver) Option {
	return optionFunc(func(cfg *config) {
		cfg.observer = o
		cfg.nilObserver = o == nil
	})
}

// WithName names the limiter in what it reports to its Observer (default
// ""), e.g. "per-ip".
func WithName(name string) Option {
	return optionFunc(func(cfg *config) { cfg.name = name })
}

// A TimerFunc starts a timer for Wait: c receives once d has passed, and
// stop stops the timer (as time.Timer's Stop does).
type TimerFunc func(d time.Duration) (c <-chan time.Time, stop func() bool)

// WithTimer sets how Wait waits out a delay. The default uses time.NewTimer,
// except on a *clock.Manual, where Wait returns once another goroutine has
// moved the clock past the delay, yielding the processor in between, and
// never sleeps on the wall clock. Tests and simulations that want to wake
// Wait themselves pass a TimerFunc whose channel they control. Not for
// Concurrency.
func WithTimer(f TimerFunc) Option {
	return optionFunc(func(cfg *config) { cfg.timer, cfg.timerSet = f, true })
}

// WithLease sets how long a Concurrency lease is held at most (default
// DefaultLease; positive): a lease neither released nor renewed within d
// frees its slot, so a crashed or hung handler cannot leak it. Only for
// Concurrency.
func WithLease(d time.Duration) Option {
	return optionFunc(func(cfg *config) { cfg.lease, cfg.leaseSet = d, true })
}

// validate checks the configuration and returns every problem found;
// concurrency says it configures a Concurrency limiter.
func (c *config) validate(concurrency bool) error {
	var errs []error
	bad := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("sluice/ratelimit: "+format, args...))
	}
	if c.clock == nil {
		bad("WithClock(nil): a clock is required")
	}
	if c.nilObserver {
		bad("WithObserver(nil): pass an observer or omit the option")
	}
	if c.maxKeys < 1 {
		bad("max keys %d: must be at least 1", c.maxKeys)
	}
	if c.maxKeyLen < 1 || c.maxKeyLen > maxKeyLen {
		bad("max key length %d: must be in [1, %d]", c.maxKeyLen, maxKeyLen)
	}
	if concurrency {
		if c.storeSet {
			bad("WithStore: a Concurrency limiter keeps its leases in memory")
		}
		if c.timerSet {
			bad("WithTimer: a Concurrency limiter does not wait")
		}
		if c.lease <= 0 {
			bad("lease %v: must be positive", c.lease)
		}
	} else {
		if m, ok := c.store.(*MemoryStore); c.storeSet && (c.store == nil || ok && m == nil) {
			bad("WithStore(nil): pass a store or omit the option")
		}
		if c.storeSet && c.maxKeysSet {
			bad("WithMaxKeys configures the default in-memory store; with WithStore, bound the store itself (NewMemoryStore(n))")
		}
		if c.timerSet && c.timer == nil {
			bad("WithTimer(nil): pass a timer or omit the option")
		}
		if c.leaseSet {
			bad("WithLease is for Concurrency limiters")
		}
	}
	return errors.Join(errs...)
}
