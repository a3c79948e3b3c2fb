package redisstore

import (
	"fmt"
	"math"
	"time"

	"github.com/sluicehq/sluice/metrics"
)

// An Option configures a Store.
type Option func(*config)

type config struct {
	prefix          string
	tag             func(string) string
	callerTime      bool
	timeout         time.Duration
	failure         FailurePolicy
	localKeys       int
	onError         func(error)
	breakerFailures int
	breakerCooldown time.Duration
	cacheSize       int
	observer        metrics.StoreObserver
	noFunctions     bool
	legacy          LegacyState
	errs            []error
}

func defaultConfig() config {
	return config{
		prefix:          "sluice:",
		timeout:         100 * time.Millisecond,
		failure:         FailClosed,
		localKeys:       1 << 20,
		breakerFailures: 5,
		breakerCooldown: 250 * time.Millisecond,
		cacheSize:       1 << 16,
	}
}

func (c *config) bad(format string, args ...any) {
	c.errs = append(c.errs, fmt.Errorf("sluice/redisstore: "+format, args...))
}

// WithPrefix sets the prefix of every Redis key the store writes (default
// "sluice:"). It may not contain '{' or '}', which would pick the Redis
// Cluster slot.
func WithPrefix(p string) Option {
	return func(c *config) {
		for _, r := range p {
			if r == '{' || r == '}' {
				c.bad("prefix %q: must not contain '{' or '}'", p)
				return
			}
		}
		c.prefix = p
	}
}

// WithoutFunctions makes the store run its scripts with EVALSHA even where
// the server has Redis Functions: for a Redis whose ACLs forbid FUNCTION
// LOAD or FCALL (the store also falls back by itself when the server
// refuses them), or to compare the two. See the package documentation.
func WithoutFunctions() Option {
	return func(c *config) { c.noFunctions = true }
}

// WithLegacyState sets how the store treats the text state that versions
// of this package before the binary state kept under the earlier key names
// (default LegacyCarry; see LegacyState for the upgrade path).
func WithLegacyState(l LegacyState) Option {
	return func(c *config) {
		if l > LegacyIgnore {
			c.bad("unknown legacy state mode %v", l)
			return
		}
		c.legacy = l
	}
}

// WithHashTag sets how a key maps to its hash tag, the part of the Redis key
// that picks the Redis Cluster slot (default: the key itself). Keys whose
// tags are equal are decided on one node, so a batch over them (tiers: one
// key per IP and one per tenant) works on Cluster. The tag is sanitised like
// a key (see the package documentation).
func WithHashTag(f func(key string) string) Option {
	return func(c *config) {
		if f == nil {
			c.bad("WithHashTag: nil function")
			return
		}
		c.tag = f
	}
}

// WithCallerTime makes the store decide at the time the Limiter passes
// (its clock) instead of at the Redis server's TIME. All clients must then
// have the same time; it is meant for tests and simulations with a manual
// clock, which must not run before 1970.
func WithCallerTime() Option {
	return func(c *config) { c.callerTime = true }
}

// WithTimeout bounds each call to Redis (default 100ms); a call that takes
// longer is a failure, decided by the failure policy. A refused connection
// does not wait for it (see the package documentation, Failure). The client
// must obey context deadlines (see New). 0 means only the caller's context
// bounds a call, and the client's own timeouts if it ignores contexts.
func WithTimeout(d time.Duration) Option {
	return func(c *config) {
		if d < 0 {
			c.bad("timeout %v: must not be negative", d)
			return
		}
		c.timeout = d
	}
}

// WithFailurePolicy sets how the store decides when Redis cannot (default
// FailClosed).
func WithFailurePolicy(f FailurePolicy) Option {
	return func(c *config) {
		if f > FailLocal {
			c.bad("unknown failure policy %v", f)
			return
		}
		c.failure = f
	}
}

// WithLocalMaxKeys bounds the keys of FailLocal's in-memory store (default
// 1<<20).
func WithLocalMaxKeys(n int) Option {
	return func(c *config) {
		if n < 1 {
			c.bad("local max keys %d: must be at least 1", n)
			return
		}
		c.localKeys = n
	}
}

// WithBreaker sets the circuit breaker: after failures failed calls in a
// row, or one refused connection, it opens, and for cooldown every call is
// decided by the failure policy at once; then one probe (a PING) tries
// Redis in the background, closing the breaker if it succeeds and keeping
// it open for another cooldown if it fails, while calls go on being decided
// at once (default 5 failures, 250ms). failures 0 disables the breaker (a
// refused connection still ends the calls in flight at once, but every call
// tries Redis); cooldown, if positive, is then only the RetryAfter of
// FailClosed's refusals, which is always the cool-down (0 keeps the
// default).
func WithBreaker(failures int, cooldown time.Duration) Option {
	return func(c *config) {
		if failures < 0 || failures > math.MaxInt32 || cooldown < 0 || cooldown == 0 && failures > 0 {
			c.bad("breaker (%d failures, cooldown %v): want 0 ≤ failures < 2^31 and a positive cooldown", failures, cooldown)
			return
		}
		c.breakerFailures = failures
		if cooldown > 0 {
			c.breakerCooldown = cooldown
		}
	}
}

// WithRefusalCache sets how many refused keys the store remembers until
// their retry time (default 1<<16, about 100 bytes each plus the key's own;
// 0 disables the cache). A remembered key's
// requests of the refused cost are refused locally, as Redis would refuse
// them — unless a reservation of another process is refunded meanwhile,
// which the cache cannot see — with Remaining 0 and the RetryAfter Redis
// gave less the time passed: Redis's own unless other processes' traffic
// was admitted on the key meanwhile, which only makes Redis's later.
func WithRefusalCache(keys int) Option {
	return func(c *config) {
		if keys < 0 {
			c.bad("refusal cache size %d: must not be negative", keys)
			return
		}
		c.cacheSize = keys
	}
}

// WithErrorHandler sets a function called with every Redis failure (before
// the failure policy decides), to log or count it. It must be cheap and safe
// for concurrent use.
func WithErrorHandler(f func(error)) Option {
	return func(c *config) {
		if f == nil {
			c.bad("WithErrorHandler: nil function")
			return
		}
		c.onError = f
	}
}
