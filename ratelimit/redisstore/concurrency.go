package redisstore

import (
	"context"
	crand "crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/sluicehq/sluice/ratelimit"
)

// Concurrency bounds the requests in flight per key across processes
// (Stripe's concurrent-requests limiter) on Redis: at most Max leases per
// key at once. Each key is a sorted set of lease ids scored by their expiry
// (server time, µs); a lease that is neither released nor renewed within the
// lease duration expires and its slot is taken back by the next Acquire, so a
// crashed process cannot leak slots. Memory per key: a sorted set of
// its leases (a 32-byte id each; about 60 bytes per lease up to 128 leases),
// at most Max leases; the set expires with its last lease.
//
// Acquire, Release, Renew and InFlight are each one script, one round trip,
// bounded by the store's timeout. When Redis fails, Acquire decides by the
// store's failure policy (FailLocal acts as FailOpen: a local count of
// another process's leases would mean nothing) and returns that decision
// with a nil error and Result.Source saying so (the store's LastError has
// the cause); it shares the store's circuit breaker. Release, Renew and InFlight return Redis's errors as
// they are: a lease that could not be released expires on its own. It is
// safe for concurrent use.
type Concurrency struct {
	s     *Store
	max   int
	lease time.Duration
	id    string // the limit's part of the Redis key
}

// NewConcurrency returns a per-key concurrency limit of max leases, each
// held for at most lease unless renewed, on s's Redis (its prefix, hash
// tags, timeout and failure policy).
func NewConcurrency(s *Store, max int, lease time.Duration) (*Concurrency, error) {
	var errs []error
	if s == nil {
		errs = append(errs, errors.New("sluice/redisstore: NewConcurrency: nil store"))
	}
	if max < 1 {
		errs = append(errs, fmt.Errorf("sluice/redisstore: concurrency max %d: must be at least 1", max))
	}
	if lease < time.Millisecond {
		errs = append(errs, fmt.Errorf("sluice/redisstore: lease %v: must be at least 1ms", lease))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return &Concurrency{s: s, max: max, lease: lease, id: fmt.Sprintf("cc:%d:%d", max, lease/time.Microsecond)}, nil
}

// Max returns the most leases a key may hold at once.
func (c *Concurrency) Max() int { return c.max }

// A Lease is a slot of a Concurrency limit, held until Release or its
// expiry. The zero Lease, and the lease of a refused acquisition, holds
// nothing.
type Lease struct {
	c   *Concurrency
	key string // the Redis key
	id  string
}

// leaseAcquire: KEYS[1] the set; ARGV: max, lease µs, id. It returns
// {granted, held after, µs until the oldest lease expires, µs until the
// last does, expired leases taken back}.
var leaseAcquire = redis.NewScript(`
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local k, max, lease = KEYS[1], tonumber(ARGV[1]), tonumber(ARGV[2])
local expired = redis.call('ZREMRANGEBYSCORE', k, '-inf', string.format('%.0f', now))
local n = redis.call('ZCARD', k)
if n >= max then
  local first = redis.call('ZRANGE', k, 0, 0, 'WITHSCORES')
  local last = redis.call('ZRANGE', k, -1, -1, 'WITHSCORES')
  return {0, n, tonumber(first[2]) - now, tonumber(last[2]) - now, expired}
end
redis.call('ZADD', k, string.format('%.0f', now + lease), ARGV[3])
local last = redis.call('ZRANGE', k, -1, -1, 'WITHSCORES')
redis.call('PEXPIREAT', k, string.format('%.0f', math.floor(tonumber(last[2]) / 1000) + 1))
return {1, n + 1, 0, lease, expired}
`)

// leaseRelease: KEYS[1] the set; ARGV: id. It returns 1 if the lease was
// held and not expired.
var leaseRelease = redis.NewScript(`
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local exp = redis.call('ZSCORE', KEYS[1], ARGV[1])
if not exp then return 0 end
redis.call('ZREM', KEYS[1], ARGV[1])
if tonumber(exp) <= now then return 0 end
return 1
`)

// leaseRenew: KEYS[1] the set; ARGV: lease µs, id. It returns 1 if the
// lease was held, now extended by the lease duration from now.
var leaseRenew = redis.NewScript(`
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local exp = redis.call('ZSCORE', KEYS[1], ARGV[2])
if not exp or tonumber(exp) <= now then return 0 end
redis.call('ZADD', KEYS[1], string.format('%.0f', now + tonumber(ARGV[1])), ARGV[2])
local last = redis.call('ZRANGE', KEYS[1], -1, -1, 'WITHSCORES')
redis.call('PEXPIREAT', KEYS[1], string.format('%.0f', math.floor(tonumber(last[2]) / 1000) + 1))
return 1
`)

// Acquire takes a slot of key if fewer than Max of its leases are held.
// The Result says whether it was granted; when refused, RetryAfter is when
// the oldest lease expires (a release may free a slot sooner) and
// ResetAfter when the last one does. It never waits beyond the store's
// timeout.
func (c *Concurrency) Acquire(ctx context.Context, key string) (Lease, ratelimit.Result, error) {
	if len(key) == 0 || len(key) > 1<<16 {
		return Lease{}, ratelimit.Result{}, fmt.Errorf("%w: %d bytes", ratelimit.ErrInvalidKey, len(key))
	}
	rk := c.s.redisKey(key, &policy{id: c.id})
	var raw [16]byte
	crand.Read(raw[:])
	id := hex.EncodeToString(raw[:])
	res := ratelimit.Result{Source: ratelimit.SourceLimit, Limit: c.max}
	if !c.s.tryRedis() {
		return Lease{}, c.degraded(res, ErrBreakerOpen), nil
	}
	call := c.s.begin(ctx)
	defer call.end()
	v, err := leaseAcquire.Run(call.ctx, c.s.client, []string{rk}, c.max, int64(c.lease/time.Microsecond), id).Int64Slice()
	if err == nil && len(v) != 5 {
		err = fmt.Errorf("sluice/redisstore: lease script answered %d values", len(v))
	}
	if err != nil {
		if ctx.Err() != nil {
			return Lease{}, ratelimit.Result{}, ctx.Err()
		}
		return Lease{}, c.degraded(res, c.s.callFailed(call, err)), nil
	}
	c.s.brk.success()
	res.Allowed = v[0] == 1
	res.Remaining = c.max - int(v[1])
	res.RetryAfter = time.Duration(v[2]) * time.Microsecond
	res.ResetAfter = time.Duration(v[3]) * time.Microsecond
	if !res.Allowed {
		return Lease{}, res, nil
	}
	return Lease{c: c, key: rk, id: id}, res, nil
}

// degraded decides an acquisition by the failure policy.
func (c *Concurrency) degraded(res ratelimit.Result, cause error) ratelimit.Result {
	c.s.failed(cause)
	if c.s.failure == FailClosed {
		res.Source, res.RetryAfter = ratelimit.SourceFailClosed, c.s.brk.cooldown
		c.s.observeDegraded(FailClosed, cause, 1)
	} else {
		res.Source, res.Allowed = ratelimit.SourceFailOpen, true
		c.s.observeDegraded(FailOpen, cause, 1) // FailLocal admits leases as FailOpen does
	}
	return res
}

// Release frees the lease's slot. It reports whether the lease was still
// held (false for an expired, released or empty lease) and any Redis error;
// while the store's circuit breaker is open it returns false and
// ErrBreakerOpen at once, and the lease expires on its own.
func (l Lease) Release(ctx context.Context) (bool, error) {
	if l.c == nil {
		return false, nil
	}
	if l.c.s.brk.openNow() {
		return false, ErrBreakerOpen
	}
	call := l.c.s.begin(ctx)
	defer call.end()
	n, err := leaseRelease.Run(call.ctx, l.c.s.client, []string{l.key}, l.id).Int64()
	return n == 1, err
}

// Renew extends a held lease by the lease duration from now. It reports
// whether the lease was still held; an expired lease cannot be renewed.
// While the store's circuit breaker is open it returns false and
// ErrBreakerOpen at once.
func (l Lease) Renew(ctx context.Context) (bool, error) {
	if l.c == nil {
		return false, nil
	}
	if l.c.s.brk.openNow() {
		return false, ErrBreakerOpen
	}
	call := l.c.s.begin(ctx)
	defer call.end()
	n, err := leaseRenew.Run(call.ctx, l.c.s.client, []string{l.key}, int64(l.c.lease/time.Microsecond), l.id).Int64()
	return n == 1, err
}

// leaseCount: KEYS[1] the set. It returns the number of leases not expired
// at the server's time (on the node that holds the set).
var leaseCount = redis.NewScript(`
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
return redis.call('ZCOUNT', KEYS[1], '(' .. string.format('%.0f', now), '+inf')
`)

// InFlight returns the number of unexpired leases of key, in one round
// trip, or the Redis error.
func (c *Concurrency) InFlight(ctx context.Context, key string) (int, error) {
	if len(key) == 0 || len(key) > 1<<16 {
		return 0, fmt.Errorf("%w: %d bytes", ratelimit.ErrInvalidKey, len(key))
	}
	rk := c.s.redisKey(key, &policy{id: c.id})
	call := c.s.begin(ctx)
	defer call.end()
	n, err := leaseCount.Run(call.ctx, c.s.client, []string{rk}).Int64()
	return int(n), err
}
