// Package redisstore keeps the state of sluice's rate limits on Redis, so
// that many processes share one limit:
//
//	store, err := redisstore.New(client)  // a go-redis v9 UniversalClient
//	lim, err := ratelimit.New(ratelimit.GCRA, limit, ratelimit.WithStore(store))
//
// Every decision is one Lua script run atomically on the server, in one
// round trip: the five algorithms of package ratelimit, with the same
// decisions as its in-memory store, a batch of requests (tiers, or several
// limits on one key: 10/s and 1000/day) all or nothing, and Reserve and
// Refund for the buckets.
//
// A single Allow on a *redis.Client whose server has Redis Functions (7.0
// and later) is an FCALL of a function library the store loads with
// FUNCTION LOAD REPLACE in the same round trip as its first decision (and
// again, once, if the server loses it); the library's name carries a hash
// of its code, so several versions of this package can share one Redis
// (FUNCTION LIST shows them; FUNCTION DELETE removes an old one). On older
// servers, on Cluster and Ring clients, and for batches, reservations and
// refunds, the store runs scripts: EVAL for a store's first call of each,
// EVALSHA after it (and EVAL again after NOSCRIPT).
//
// # Time
//
// The scripts decide at the Redis server's clock (TIME), so every client
// decides on one time base whatever its own clock says. Redis's clock has
// microsecond resolution, and Redis's Lua counts in doubles, exact to 2^53:
// the scripts count time in whole microseconds and every quantity exactly as
// an integer below 2^53. Hence:
//
//   - a Limit's Period must be a whole number of microseconds;
//   - the bucket arithmetic must stay small: Burst·Period/gcd(Rate, Period
//     in µs) and Rate/gcd(Rate, Period in µs) at most 2^48 (a 1000/day or
//     100/s-burst-500 limit uses well under 2^40), a sliding window's
//     Rate·Period in µs below 2^53, and every Rate and Burst below 2^53;
//     a reservation's debt is bounded by 2^52 units instead of 2^61;
//   - RetryAfter, ResetAfter and a reservation's delay are those of the
//     in-memory store rounded up to the microsecond (never earlier).
//
// A Policy outside these bounds is refused with ErrUnsupportedPolicy, never
// decided inexactly. For instants that are whole microseconds the decisions
// (Allowed, Remaining) are those of ratelimit.MemoryStore exactly;
// WithCallerTime makes the store decide at the limiter's clock instead, and
// the tests check the equality with ratelimittest.RunResolution.
//
// # Keys
//
// A key's state lives at
//
//	<prefix>{<key>}:<policy>                 by default
//	<prefix>{<tag>}:<policy>:<key>           with WithHashTag
//
// where <policy> names the algorithm and limit (limits never share state),
// <key> is the caller's key and <tag> the hash tag WithHashTag gives it,
// both sanitised: a key of at most 64 bytes of
// letters, digits and "-_.:/@=+," is used as it is (readable in redis-cli);
// any other key is replaced by "#" and the base64url of 16 bytes of its
// SHA-256, so user text can neither pick a Redis Cluster slot nor make a
// Redis key long. All limits on one key share its hash tag, so a batch on
// one key works on Redis Cluster; a batch over several keys (tiers per IP
// and per tenant) needs WithHashTag to give them a common tag there (and on
// a go-redis Ring), else Apply returns ErrCrossSlot. Every write sets the
// key's expiry to at least its reset time, so idle keys disappear, and a
// key back to a fresh key's state is deleted.
// The state of FixedWindow, SlidingWindow, TokenBucket and GCRA is kept
// binary (its numbers as little-endian doubles, all integers below 2^53),
// under a <policy> whose algorithm tag ends in "2" ("tb2:100:1000000:100");
// versions before it kept the same numbers as text under the tag without
// the "2". By default (LegacyCarry) a key without binary state is read
// once from its text key and carried over; LegacyShare makes new and old
// processes count on the text keys as one limit during a rolling upgrade
// (see LegacyState for the upgrade path). A SlidingLog's sorted set is
// the same in all versions and keeps its key. Memory in Redis (MEMORY
// USAGE, Redis 7.0): a key of FixedWindow, SlidingWindow, TokenBucket or
// GCRA is a short string of about 100-120 bytes; a SlidingLog key is a
// sorted set of its admitted units, about 37 bytes per unit up to 128
// units (Redis's compact listpack encoding) and about 116 beyond, Rate
// units at most (116 KB for a 1000-unit log).
//
// # Failure
//
// When Redis cannot be reached, fails, or does not answer within the
// timeout (WithTimeout, default 100ms), the store decides by its failure
// policy (WithFailurePolicy): FailClosed (the default) refuses, FailOpen
// admits, FailLocal decides with a local in-memory store (the limit then
// holds per process; a reservation made there and cancelled once Redis is
// back gives Redis nothing back, and the other way round). That is a
// decision, so it comes with a nil error, as every decision does in
// package ratelimit: the Result's Source is SourceFailClosed,
// SourceFailOpen or SourceFailLocal (Result.Degraded reports any of them),
// the limiter's observer counts it as degraded, and LastError (and the
// WithErrorHandler function, called with every failure) has the cause for
// errors.Is. An error from the Limiter still means no decision: invalid
// input, or the caller's context ending before Redis answered.
//
// A Redis that is gone is noticed at once, not after the timeout: on a
// *redis.Client the store watches the client's dials, and the first
// refused connection opens the circuit breaker and ends every call in
// flight, which the failure policy then decides (go-redis would otherwise
// retry the dial and the command until the timeout). The breaker also
// opens after several failures in a row (WithBreaker: timeouts, errors).
// While it is open every call decides at once, without trying Redis; after
// each cool-down one probe (a PING, bounded by the timeout) runs in the
// background and closes the breaker when Redis answers, so no caller waits
// on a Redis known to be failing. Decisions come back to Redis within a
// cool-down (250ms by default) of its return, or within about a second more
// after a long outage, when go-redis paces its own redials (after PoolSize
// failed dials its pool redials once a second). The timeout needs a client
// that obeys context deadlines: set ContextTimeoutEnabled in the go-redis
// options (New checks it).
//
// Keys refused by Redis are remembered locally until their retry time
// (WithRefusalCache), so a flood from one abusive key costs nothing on Redis:
// such requests are refused without a round trip, as Redis would refuse them
// (their Remaining is 0 and their RetryAfter the one Redis gave, less the time
// passed: Redis's own unless other processes were admitted on the key since).
package redisstore

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/sluicehq/sluice/metrics"
	"github.com/sluicehq/sluice/ratelimit"
)

// ErrUnsupportedPolicy is returned by Apply for a Policy the scripts cannot
// decide exactly (see the package documentation, Time).
var ErrUnsupportedPolicy = errors.New("sluice/redisstore: policy not supported on Redis")

// ErrCrossSlot is returned by Apply on Redis Cluster for a batch whose keys
// lie in different hash slots (on a go-redis Ring, whose keys do not share
// one hash tag), which no script can update atomically. Give such keys a
// common tag with WithHashTag.
var ErrCrossSlot = errors.New("sluice/redisstore: a batch's keys are in different Redis Cluster slots; give them a common hash tag (WithHashTag)")

// ErrBreakerOpen is the cause WithErrorHandler is given, and LastError
// wraps, while the circuit breaker is open.
var ErrBreakerOpen = errors.New("sluice/redisstore: circuit breaker open after repeated Redis failures")

// FailurePolicy is how the store decides when Redis cannot.
type FailurePolicy uint8

// The failure policies.
const (
	// FailClosed refuses every request (Source SourceFailClosed), with
	// RetryAfter the breaker's cool-down: no traffic passes unlimited. The
	// default.
	FailClosed FailurePolicy = iota
	// FailOpen admits every request, uncounted (Source SourceFailOpen;
	// Remaining and the times unknown, 0): availability before the limit.
	FailOpen
	// FailLocal decides with an in-memory store of this process (Source
	// SourceFailLocal): the limit holds per process instead of across all
	// of them.
	FailLocal
)

// String returns the policy's name.
func (f FailurePolicy) String() string {
	switch f {
	case FailClosed:
		return "fail_closed"
	case FailOpen:
		return "fail_open"
	case FailLocal:
		return "fail_local"
	}
	return "FailurePolicy(" + strconv.Itoa(int(f)) + ")"
}

// Store is a ratelimit.Store on Redis. It is safe for concurrent use.
type Store struct {
	client     redis.UniversalClient
	cluster    bool // a *redis.ClusterClient: a batch's keys must share a slot
	ring       bool // a *redis.Ring: a batch's keys must share a hash tag
	prefix     string
	tag        func(string) string
	callerTime bool
	timeout    time.Duration
	failure    FailurePolicy
	local      *ratelimit.MemoryStore
	onError    func(error)
	observer   metrics.StoreObserver // nil: none
	brk        breaker
	cache      *refusalCache
	scripts    [6]*redis.Script  // by algorithm; 0: all five, for batches
	sent       [2][6]atomic.Bool // scripts (0) and lean scripts (1) this store has sent in full (see run)
	fn         atomic.Int32      // the Functions library: fnUnknown, fnLoaded, fnUnsupported
	legacy     LegacyState

	policies  sync.Map // ratelimit.Policy → *policy
	npolicies atomic.Int64
	last      atomic.Pointer[error] // the last failure of Redis
	abort     atomic.Pointer[abort] // the calls in flight (see failfast.go)
}

// policy is a Policy in the scripts' arithmetic.
type policy struct {
	err  error
	id   string // the key suffix naming the policy
	text string // the suffix of the key of the earlier versions' text state; "": the same key (SlidingLog)
	alg  ratelimit.Algorithm
	args [6]int64 // alg, period µs, burst, r, p, cap
	lean [2]any   // ARGV[1] of the lean scripts for a cost of 1 (leanPolicy), boxed once: server time, caller time
}

// Bounds of the scripts' arithmetic (see the package documentation).
const (
	maxExact   = 1 << 53
	maxBucket  = 1 << 48
	maxTagText = 64
)

// New returns a store on client (a *redis.Client, *redis.ClusterClient or
// failover client). It does not contact Redis; Preload loads the scripts
// ahead of the first request. It returns an error naming every invalid
// option.
//
// The store bounds every call by its timeout (WithTimeout) through the
// call's context, which a go-redis client only obeys with
// ContextTimeoutEnabled set in its options; without it a Redis that stops
// answering holds each decision for the client's ReadTimeout (3s by
// default) instead. New therefore refuses a *redis.Client,
// *redis.ClusterClient or *redis.Ring whose ContextTimeoutEnabled is false,
// unless WithTimeout(0) leaves the bounds to the client.
//
// On a *redis.Client, New adds a hook (AddHook) that reports the client's
// refused dials to the store, so that a Redis that is gone is decided by
// the failure policy at once (see Failure); it changes nothing else the
// client does. On Cluster and Ring clients the breaker opens after
// WithBreaker's failures instead.
func New(client redis.UniversalClient, opts ...Option) (*Store, error) {
	cfg := defaultConfig()
	for _, o := range opts {
		o(&cfg)
	}
	var errs []error
	if client == nil {
		errs = append(errs, errors.New("sluice/redisstore: nil client"))
	} else if cfg.timeout > 0 && ignoresDeadlines(client) {
		errs = append(errs, errors.New("sluice/redisstore: the client ignores context deadlines, so no call could be bounded by the store's timeout: set ContextTimeoutEnabled in its options (or pass WithTimeout(0) to rely on its own read and write timeouts)"))
	}
	errs = append(errs, cfg.errs...)
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	s := &Store{
		client:     client,
		prefix:     cfg.prefix,
		tag:        cfg.tag,
		callerTime: cfg.callerTime,
		timeout:    cfg.timeout,
		failure:    cfg.failure,
		onError:    cfg.onError,
		observer:   cfg.observer,
		legacy:     cfg.legacy,
		brk:        breaker{threshold: int32(cfg.breakerFailures), cooldown: cfg.breakerCooldown},
	}
	s.abort.Store(newAbort())
	_, s.cluster = client.(*redis.ClusterClient)
	_, s.ring = client.(*redis.Ring)
	if c, ok := client.(*redis.Client); ok {
		c.AddHook(dialWatch{s}) // see failfast.go
	}
	if cfg.cacheSize > 0 {
		s.cache = newRefusalCache(cfg.cacheSize)
	}
	if cfg.noFunctions {
		s.fn.Store(fnUnsupported)
	}
	if cfg.failure == FailLocal {
		local, err := ratelimit.NewMemoryStore(cfg.localKeys)
		if err != nil {
			return nil, err
		}
		s.local = local
	}
	for a := range s.scripts {
		s.scripts[a] = scriptFor(ratelimit.Algorithm(a))
	}
	if s.observer != nil {
		client.AddHook(newCallWatch(s, s.observer)) // see observe.go
	}
	return s, nil
}

// ignoresDeadlines reports whether client is a go-redis client that does
// not obey its calls' context deadlines (ContextTimeoutEnabled false).
func ignoresDeadlines(client redis.UniversalClient) bool {
	switch c := client.(type) {
	case *redis.Client:
		return !c.Options().ContextTimeoutEnabled
	case *redis.ClusterClient:
		return !c.Options().ContextTimeoutEnabled
	case *redis.Ring:
		return !c.Options().ContextTimeoutEnabled
	}
	return false
}

// Preload loads the scripts into Redis (on Cluster, into every master; on a
// Ring, into every shard), so that the first decisions need no extra round
// trip. Without it a store sends each script in full (EVAL) the first time
// it needs it, one round trip; after Redis restarts and forgets its
// scripts, and on Cluster for the first call on a node other than the
// one that got the EVAL, a call costs one extra round trip (EVALSHA
// answered NOSCRIPT, then EVAL).
func (s *Store) Preload(ctx context.Context) error {
	load := func(ctx context.Context, c redis.Scripter) error {
		all := append(s.scripts[:], leaseAcquire, leaseRelease, leaseRenew, leaseCount)
		for _, sc := range leanScripts {
			if sc != nil {
				all = append(all, sc)
			}
		}
		for _, sc := range all {
			if err := sc.Load(ctx, c).Err(); err != nil {
				return fmt.Errorf("sluice/redisstore: loading scripts: %w", err)
			}
		}
		return nil
	}
	if c, ok := s.client.(*redis.Client); ok && s.fn.Load() != fnUnsupported {
		err := c.FunctionLoadReplace(ctx, leanLibrary).Err()
		switch {
		case err == nil:
			s.fn.CompareAndSwap(fnUnknown, fnLoaded)
		case isNoFunctions(err):
			s.fn.Store(fnUnsupported)
		default:
			return fmt.Errorf("sluice/redisstore: loading functions: %w", err)
		}
	}
	var err error
	switch c := s.client.(type) {
	case *redis.ClusterClient:
		err = c.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error { return load(ctx, c) })
	case *redis.Ring:
		err = c.ForEachShard(ctx, func(ctx context.Context, c *redis.Client) error { return load(ctx, c) })
	default:
		err = load(ctx, s.client)
	}
	if err == nil {
		for i := range s.sent {
			for a := range s.sent[i] {
				s.sent[i][a].Store(true)
			}
		}
	}
	return err
}

// policyOf returns the scripts' form of p, checking it once. The lookup on
// the hot path takes no lock (a sync.Map read); at most maxPolicies are
// kept, later ones are converted on every call.
func (s *Store) policyOf(p *ratelimit.Policy) *policy {
	if q, ok := s.policies.Load(*p); ok {
		return q.(*policy)
	}
	q := toPolicy(*p, s.legacy)
	if s.npolicies.Load() < maxPolicies {
		if prev, loaded := s.policies.LoadOrStore(*p, q); loaded {
			return prev.(*policy)
		}
		s.npolicies.Add(1)
	}
	return q
}

// maxPolicies bounds the policies a Store remembers.
const maxPolicies = 1 << 12

// toPolicy converts p to microseconds and checks that the scripts decide it
// exactly; legacy is the store's LegacyState.
func toPolicy(p ratelimit.Policy, legacy LegacyState) *policy {
	lim := p.Limit()
	alg := p.Algorithm()
	q := &policy{alg: alg}
	if lim.Period%time.Microsecond != 0 {
		q.err = fmt.Errorf("%w: %v: the period must be a whole number of microseconds", ErrUnsupportedPolicy, p)
		return q
	}
	P, rate, burst := int64(lim.Period/time.Microsecond), int64(lim.Rate), int64(lim.Burst)
	q.args = [6]int64{int64(alg), P, burst, 0, 0, 0}
	if rate >= maxExact || burst >= maxExact {
		q.err = fmt.Errorf("%w: %v: rate and burst must be below 2^53", ErrUnsupportedPolicy, p)
		return q
	}
	switch alg {
	case ratelimit.TokenBucket, ratelimit.GCRA:
		g := gcd(rate, P)
		r, per := rate/g, P/g
		if per > maxBucket/burst {
			q.err = fmt.Errorf("%w: %v: burst·period/gcd(rate, period in µs) must be at most 2^48", ErrUnsupportedPolicy, p)
			return q
		}
		if r > maxBucket {
			q.err = fmt.Errorf("%w: %v: rate/gcd(rate, period in µs) must be at most 2^48", ErrUnsupportedPolicy, p)
			return q
		}
		q.args[3], q.args[4], q.args[5] = r, per, burst*per
	case ratelimit.SlidingWindow:
		if P > (maxExact-1)/rate {
			q.err = fmt.Errorf("%w: %v: rate·period in µs must be below 2^53", ErrUnsupportedPolicy, p)
			return q
		}
	}
	// The "2" marks the binary state: a key of the text state of earlier
	// versions (q.text) is never read as binary; LegacyState says when it
	// is read as text. A sliding log's sorted set did not change.
	q.id = fmt.Sprintf("%s:%d:%d:%d", algTag[alg], rate, P, burst)
	if alg != ratelimit.SlidingLog {
		q.text = q.id
		q.id = fmt.Sprintf("%s2:%d:%d:%d", algTag[alg], rate, P, burst)
	}
	q.lean = [2]any{leanPolicy(q.args, minTTLServer, 1, legacy), leanPolicy(q.args, minTTLCaller, 1, legacy)}
	return q
}

var algTag = [...]string{"", "fw", "sl", "sw", "tb", "gcra"}

func gcd(a, b int64) int64 {
	for b != 0 {
		a, b = b, a%b
	}
	return a
}

// redisKey returns the Redis key of key under q.
func (s *Store) redisKey(key string, q *policy) string {
	if s.tag == nil {
		return s.prefix + "{" + sanitize(key) + "}:" + q.id
	}
	return s.prefix + "{" + sanitize(s.tag(key)) + "}:" + q.id + ":" + sanitize(key)
}

// redisKeys returns the Redis key of key under q and, when the scripts
// may read the earlier versions' text state (LegacyCarry, LegacyShare),
// the key of that state ("" otherwise). Both are cut from one string, one
// allocation.
func (s *Store) redisKeys(key string, q *policy) (string, string) {
	if s.legacy == LegacyIgnore || q.text == "" {
		return s.redisKey(key, q), ""
	}
	var both string
	var n int
	if s.tag == nil {
		k := sanitize(key)
		n = len(s.prefix) + len(k) + 3 + len(q.id)
		both = s.prefix + "{" + k + "}:" + q.id + s.prefix + "{" + k + "}:" + q.text
	} else {
		t, k := sanitize(s.tag(key)), sanitize(key)
		n = len(s.prefix) + len(t) + 4 + len(q.id) + len(k)
		both = s.prefix + "{" + t + "}:" + q.id + ":" + k + s.prefix + "{" + t + "}:" + q.text + ":" + k
	}
	return both[:n], both[n:]
}

// sanitize returns key if it is short and made of safe characters, else
// "#" and the base64url of 16 bytes of its SHA-256.
func sanitize(key string) string {
	if len(key) > 0 && len(key) <= maxTagText {
		safe := true
		for i := 0; i < len(key) && safe; i++ {
			c := key[i]
			safe = c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' ||
				c == '-' || c == '_' || c == '.' || c == ':' || c == '/' || c == '@' || c == '=' || c == '+' || c == ','
		}
		if safe {
			return key
		}
	}
	sum := sha256.Sum256([]byte(key))
	return "#" + base64.RawURLEncoding.EncodeToString(sum[:16])
}

// Apply carries out reqs as one atomic step on Redis (see ratelimit.Store),
// at the server's time unless WithCallerTime. A batch of one request uses
// its algorithm's script; a larger batch the script of all five. An
// OpReserve's MaxWait counts in whole microseconds, rounded down, so that a
// granted reservation's Delay (rounded up) never exceeds it.
//
// Apply follows the error contract of ratelimit.Store: it returns the
// errors of ratelimit.CheckRequests, ErrUnsupportedPolicy, ErrCrossSlot and
// ctx's error if ctx ends before Redis answers, all without a decision.
// When Redis fails, times out or the breaker is open, the failure policy
// decides: reqs hold its decisions, with Source SourceFailClosed,
// SourceFailOpen or SourceFailLocal, and Apply returns nil (LastError has
// the cause).
func (s *Store) Apply(ctx context.Context, now time.Time, reqs []ratelimit.Request) error {
	if err := ratelimit.CheckRequests(reqs); err != nil {
		return err
	}
	var polBuf [8]*policy
	pols := polBuf[:0]
	alg := ratelimit.Algorithm(0)
	for i := range reqs {
		q := s.policyOf(reqs[i].Policy)
		if q.err != nil {
			return q.err
		}
		pols = append(pols, q)
		if i == 0 {
			alg = q.alg
		} else if q.alg != alg {
			alg = 0
		}
	}
	if len(reqs) > 1 {
		alg = 0
	}
	nowNs := now.UnixNano()
	var gen uint64
	if s.cache != nil && len(reqs) == 1 {
		var refused bool
		if refused, gen = s.cache.refuse(&reqs[0], pols[0], nowNs); refused {
			return nil
		}
	}
	if len(reqs) == 1 && reqs[0].Op == ratelimit.OpAllow && alg > 0 && int(alg) < len(leanScripts) && leanScripts[alg] != nil {
		keys := make([]string, 1, 2)
		var text string
		keys[0], text = s.redisKeys(reqs[0].Key, pols[0])
		if text != "" {
			keys = append(keys, text)
		}
		if !s.tryRedis() {
			return s.degrade(ctx, now, reqs, ErrBreakerOpen)
		}
		return s.applyLean(ctx, now, reqs, pols[0], keys, gen)
	}
	legacy := s.legacy.code()
	keys := make([]string, len(reqs), 2*len(reqs))
	for i := range reqs {
		var text string
		keys[i], text = s.redisKeys(reqs[i].Key, pols[i])
		if legacy > 0 {
			if text == "" {
				text = keys[i] // a sliding log's: never read as text
			}
			keys = append(keys, text)
		}
	}
	if err := s.sameNode(keys); err != nil {
		return err
	}
	if !s.tryRedis() {
		return s.degrade(ctx, now, reqs, ErrBreakerOpen)
	}
	args := make([]any, 0, 3+fieldsPerRequest*len(reqs))
	if s.callerTime {
		// The caller's clock may run apart from the server's, which
		// expires the keys: keep them at least a minute.
		args = append(args, floorDiv(nowNs, 1000), 60000, legacy)
	} else {
		args = append(args, -1, 1, legacy)
	}
	for i := range reqs {
		r, q := &reqs[i], pols[i]
		shadow := 0
		if r.Shadow {
			shadow = 1
		}
		maxWait := int64(-1)
		switch {
		case r.MaxWait < 0:
			maxWait = 0
		case r.MaxWait > 0:
			maxWait = int64(r.MaxWait / time.Microsecond)
		}
		args = append(args, q.args[0], q.args[1], q.args[2], q.args[3], q.args[4], q.args[5],
			int(r.Op), r.N, shadow, maxWait, r.Mark.A, r.Mark.B)
	}

	c := s.begin(ctx)
	defer c.end()
	vals, err := s.run(c.ctx, s.scripts[alg], &s.sent[0][alg], keys, args).Int64Slice()
	if err == nil && len(vals) != 2+7*len(reqs) {
		err = fmt.Errorf("sluice/redisstore: script answered %d values for %d requests", len(vals), len(reqs))
	}
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err() // the caller gave up: not Redis's failure
		}
		return s.degrade(ctx, now, reqs, s.callFailed(c, err))
	}
	s.brk.success()
	for i := range reqs {
		r, v := &reqs[i], vals[2+7*i:]
		r.Result = ratelimit.Result{
			Allowed:    v[0] == 1,
			Source:     ratelimit.SourceLimit,
			Limit:      int(pols[i].args[2]),
			Remaining:  int(v[1]),
			RetryAfter: time.Duration(v[2]) * time.Microsecond,
			ResetAfter: time.Duration(v[3]) * time.Microsecond,
		}
		if r.Op == ratelimit.OpReserve {
			r.Delay = time.Duration(v[4]) * time.Microsecond
			r.Mark = ratelimit.State{A: v[5], B: v[6]}
		}
		if s.cache != nil && len(reqs) == 1 {
			s.cache.note(r, pols[i], nowNs, gen)
		}
	}
	return nil
}

// The least expiries of a written key, in ms: on the server's clock, and
// on the callers' (which may run apart from the server's, which expires
// the keys: at least a minute).
const (
	minTTLServer = 1
	minTTLCaller = 60000
)

// applyLean decides one OpAllow request with its algorithm's lean script:
// FCALL where the server has Redis Functions (see lean.go), else EVALSHA.
func (s *Store) applyLean(ctx context.Context, now time.Time, reqs []ratelimit.Request, q *policy, keys []string, gen uint64) error {
	r := &reqs[0]
	var argBuf [2]any
	args := argBuf[:0]
	nowNs := now.UnixNano()
	mode := 0
	if s.callerTime {
		mode = 1
	}
	if r.N == 1 {
		args = append(args, q.lean[mode])
	} else {
		args = append(args, leanPolicy(q.args, [2]int64{minTTLServer, minTTLCaller}[mode], int64(r.N), s.legacy))
	}
	if s.callerTime {
		args = append(args, floorDiv(nowNs, 1000))
	}
	c := s.begin(ctx)
	defer c.end()
	var v [4]int64
	ans, err := s.runLean(c.ctx, q.alg, keys, args)
	if err == nil {
		v, err = leanAnswer(ans)
	}
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return s.degrade(ctx, now, reqs, s.callFailed(c, err))
	}
	s.brk.success()
	r.Result = ratelimit.Result{
		Allowed:    v[0] == 1,
		Source:     ratelimit.SourceLimit,
		Limit:      int(q.args[2]),
		Remaining:  int(v[1]),
		RetryAfter: time.Duration(v[2]) * time.Microsecond,
		ResetAfter: time.Duration(v[3]) * time.Microsecond,
	}
	if s.cache != nil {
		s.cache.note(r, q, nowNs, gen)
	}
	return nil
}

// The states of a store's Redis Functions library (Store.fn).
const (
	fnUnknown     = iota // not yet loaded by this store
	fnLoaded             // loaded: FCALL
	fnUnsupported        // the server has no Functions, or the client is not a *redis.Client: EVALSHA
)

// runLean runs the lean body of alg on keys: with FCALL when the library
// is loaded; with FUNCTION LOAD REPLACE and FCALL in one pipeline (one
// round trip) when this store has not loaded it yet or the server lost it
// (FUNCTION FLUSH, a new server); as a script (run: EVAL the first time,
// then EVALSHA) where Functions are not supported.
func (s *Store) runLean(ctx context.Context, alg ratelimit.Algorithm, keys []string, args []any) (string, error) {
	c, ok := s.client.(*redis.Client)
	state := s.fn.Load()
	if !ok || state == fnUnsupported {
		return s.run(ctx, leanScripts[alg], &s.sent[1][alg], keys, args).Text()
	}
	if state == fnLoaded {
		v, err := c.FCall(ctx, leanFunctions[alg], keys, args...).Text()
		if err == nil || !isNoFunction(err) {
			return v, err
		}
		s.fn.CompareAndSwap(fnLoaded, fnUnknown)
	}
	var call *redis.Cmd
	cmds, err := c.Pipelined(ctx, func(p redis.Pipeliner) error {
		p.FunctionLoadReplace(ctx, leanLibrary)
		call = p.FCall(ctx, leanFunctions[alg], keys, args...)
		return nil
	})
	if len(cmds) > 0 {
		if lerr := cmds[0].Err(); lerr != nil {
			if isNoFunctions(lerr) {
				s.fn.Store(fnUnsupported)
				return s.run(ctx, leanScripts[alg], &s.sent[1][alg], keys, args).Text()
			}
			return "", lerr
		}
		s.fn.CompareAndSwap(fnUnknown, fnLoaded)
	}
	if call == nil {
		return "", err
	}
	return call.Text()
}

// run runs sc with EVALSHA once this store has sent it in full (sent),
// else with EVAL, which also caches it in the server: the store's first
// call of each script is one round trip, not two (EVALSHA answered
// NOSCRIPT, then EVAL). A server that lost its scripts (restarted, SCRIPT
// FLUSH) or, on Cluster, a node that has not seen the script yet answers
// NOSCRIPT once, and gets EVAL. Preload sends every script ahead.
func (s *Store) run(ctx context.Context, sc *redis.Script, sent *atomic.Bool, keys []string, args []any) *redis.Cmd {
	if sent.Load() {
		cmd := sc.EvalSha(ctx, s.client, keys, args...)
		if err := cmd.Err(); err == nil || !redis.HasErrorPrefix(err, "NOSCRIPT") {
			return cmd
		}
	}
	cmd := sc.Eval(ctx, s.client, keys, args...)
	var rerr redis.Error
	if err := cmd.Err(); err == nil || errors.As(err, &rerr) {
		sent.Store(true) // answered by the server, which compiled it
	}
	return cmd
}

// isNoFunction reports whether err is Redis's answer to FCALL of a
// function it does not have.
func isNoFunction(err error) bool {
	return err != nil && strings.Contains(err.Error(), "Function not found")
}

// isNoFunctions reports whether err is a server's answer to FUNCTION when
// it has no Redis Functions (before 7.0) or forbids them.
func isNoFunctions(err error) bool {
	if err == nil {
		return false
	}
	msg := strings.ToLower(err.Error())
	return strings.Contains(msg, "unknown command") || strings.Contains(msg, "unknown subcommand") ||
		strings.Contains(msg, "noperm") || strings.Contains(msg, "no permissions")
}

// sameNode returns ErrCrossSlot if keys, one batch's, cannot be updated by
// one script: on Redis Cluster they must lie in one hash slot, on a Ring
// share one hash tag (which picks the shard).
func (s *Store) sameNode(keys []string) error {
	if len(keys) < 2 || !s.cluster && !s.ring {
		return nil
	}
	for _, k := range keys[1:] {
		if s.cluster && clusterSlot(k) != clusterSlot(keys[0]) || s.ring && hashTag(k) != hashTag(keys[0]) {
			return ErrCrossSlot
		}
	}
	return nil
}

func noCancel() {}

// degrade decides reqs by the failure policy after cause: a decision, so
// it returns nil (the local store's error for requests it cannot decide,
// which CheckRequests has already ruled out).
func (s *Store) degrade(ctx context.Context, now time.Time, reqs []ratelimit.Request, cause error) error {
	s.failed(cause)
	s.observeDegraded(s.failure, cause, len(reqs))
	switch s.failure {
	case FailLocal:
		if err := s.applyLocal(ctx, now, reqs); err != nil {
			return err
		}
		for i := range reqs {
			if r := &reqs[i]; r.Result.Source != ratelimit.SourceFull {
				r.Result.Source = ratelimit.SourceFailLocal
			}
		}
	default:
		open := s.failure == FailOpen
		src := ratelimit.SourceFailClosed
		if open {
			src = ratelimit.SourceFailOpen
		}
		for i := range reqs {
			r := &reqs[i]
			r.Result = ratelimit.Result{Allowed: open, Source: src, Limit: r.Policy.Limit().Burst}
			if r.Op == ratelimit.OpReserve {
				r.Delay, r.Mark = 0, ratelimit.State{}
			}
			if !open {
				r.Result.RetryAfter = s.brk.cooldown
			}
		}
	}
	return nil
}

// failed reports a failure to the error handler and remembers a failure of
// Redis itself for LastError.
func (s *Store) failed(cause error) {
	if s.onError != nil {
		s.onError(cause)
	}
	if cause != ErrBreakerOpen {
		s.last.Store(&cause)
	}
}

// LastError returns the most recent failure of Redis, or nil if there has
// been none: the cause behind the decisions the failure policy made (those
// whose Result.Degraded is true, which come with a nil error). It wraps
// ratelimit.ErrDegraded, ErrBreakerOpen while the circuit breaker is open,
// and the cause, so errors.Is finds each (context.DeadlineExceeded for a
// timeout, syscall.ECONNREFUSED for a refused connection). It stays set
// after Redis recovers; WithErrorHandler sees every failure as it happens.
func (s *Store) LastError() error {
	p := s.last.Load()
	if p == nil {
		return nil
	}
	if s.brk.openNow() {
		return fmt.Errorf("%w (%v): %w: %w", ratelimit.ErrDegraded, s.failure, ErrBreakerOpen, *p)
	}
	return fmt.Errorf("%w (%v): %w", ratelimit.ErrDegraded, s.failure, *p)
}

// applyLocal decides reqs with the local store. A reservation's mark names
// the store that made it: the local store's marks are handed out negated,
// which the scripts' refund reads as a reservation that went at once (and
// gives nothing back: Redis never took its tokens), and a refund of a mark
// that Redis made gives nothing back locally, where its tokens were never
// taken either.
func (s *Store) applyLocal(ctx context.Context, now time.Time, reqs []ratelimit.Request) error {
	var markBuf [8]ratelimit.State
	marks := markBuf[:0]
	for i := range reqs {
		r := &reqs[i]
		marks = append(marks, r.Mark)
		if r.Op == ratelimit.OpRefund {
			if r.Mark.A < 0 {
				r.Mark.A = -r.Mark.A
			} else {
				r.Mark = ratelimit.State{}
			}
		}
	}
	err := s.local.Apply(ctx, now, reqs)
	for i := range reqs {
		r := &reqs[i]
		switch r.Op {
		case ratelimit.OpRefund:
			r.Mark = marks[i]
		case ratelimit.OpReserve:
			r.Mark.A = -r.Mark.A
		}
	}
	return err
}

func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b < 0 {
		q--
	}
	return q
}

var _ ratelimit.Store = (*Store)(nil)
