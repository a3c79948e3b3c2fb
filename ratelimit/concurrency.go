package ratelimit

import (
	"context"
	"errors"
	"fmt"
	"hash/maphash"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice/metrics"
)

// Concurrency bounds the requests in flight per key (Stripe's
// concurrent-requests limiter): at most Max leases per key are held at once.
// A lease ends when it is released, or when it has been held for the lease
// duration (WithLease) without being renewed; an expired lease's slot is
// taken back the next time the key is used, so a crashed or hung handler
// cannot leak it.
//
// Leases live in memory, in 256 shards each under its own mutex. A key that
// holds no lease (all released or expired) is dropped by the sweeps that
// every new key makes (two keys of its shard), and at the key cap
// (WithMaxKeys) by a bounded reclaim over a few shards; if nothing can be
// dropped, a new key is refused (Result.Source SourceFull). Acquiring and releasing
// on a key that is kept allocates nothing. A Concurrency is safe for
// concurrent use.
type Concurrency struct {
	max       int
	lease     int64
	timebase  timebase
	maxKeys   int64
	keys      atomic.Int64
	maxKeyLen int
	shadow    bool
	obs       metrics.RateObserver
	name      string
	seed      maphash.Seed
	next      atomic.Uint32 // the next shard reclaim looks at
	shards    [numShards]leaseShard
}

type leaseShard struct {
	mu   sync.Mutex
	m    map[string]*leases
	next uint64       // lease ids, per shard
	held atomic.Int32 // len(m), readable without the lock (a hint for reclaim)
	_    [36]byte
}

// leases are one key's leases, oldest first.
type leases struct{ held []held }

type held struct {
	id  uint64
	exp int64 // Unix ns
}

// A Lease is a slot of a Concurrency limiter, held until Release. The zero
// Lease, and the lease of a refused or shadowed acquisition, holds nothing.
// A Lease is a small value: copy it freely, release it once.
type Lease struct {
	c   *Concurrency
	key string
	id  uint64
}

// NewConcurrency returns a limiter that lets at most max requests per key be
// in flight at once. It accepts WithClock, WithLease, WithMaxKeys,
// WithMaxKeyLen, WithShadow, WithObserver and WithName, and returns an error
// naming every invalid one.
func NewConcurrency(max int, opts ...Option) (*Concurrency, error) {
	cfg := defaultConfig()
	for _, o := range opts {
		if o != nil {
			o.apply(&cfg)
		}
	}
	err := cfg.validate(true)
	if max < 1 {
		err = errors.Join(fmt.Errorf("sluice/ratelimit: concurrency limit %d: must be at least 1", max), err)
	}
	if err != nil {
		return nil, err
	}
	c := &Concurrency{
		max:       max,
		lease:     int64(cfg.lease),
		timebase:  newTimebase(cfg.clock),
		maxKeys:   int64(cfg.maxKeys),
		maxKeyLen: cfg.maxKeyLen,
		shadow:    cfg.shadow,
		obs:       cfg.observer,
		name:      cfg.name,
		seed:      maphash.MakeSeed(),
	}
	for i := range c.shards {
		c.shards[i].m = make(map[string]*leases)
	}
	return c, nil
}

// Acquire takes a slot of key if fewer than Max of its leases are held, and
// returns the Lease to release when the request is done. It never waits.
// The Result says whether it was granted; when refused, RetryAfter is when
// the oldest lease expires (a release may free a slot sooner) and
// ResetAfter is when the last one does. As for Limiter.AllowN, a key that
// cannot be held (WithMaxKeys) is refused with Source SourceFull and a nil
// error, and the only error is ErrInvalidKey, which comes with no decision.
// ctx is not used.
func (c *Concurrency) Acquire(ctx context.Context, key string) (Lease, Result, error) {
	if len(key) == 0 || len(key) > c.maxKeyLen {
		return Lease{}, Result{}, keyError(key, c.maxKeyLen)
	}
	now := c.timebase.now()
	h := maphash.String(c.seed, key)
	sh := &c.shards[h&(numShards-1)]
	sh.mu.Lock()
	ls := sh.m[key]
	expired := 0
	if ls != nil {
		expired = ls.reap(now)
	}
	n := 0
	if ls != nil {
		n = len(ls.held)
	}
	res := Result{Source: SourceLimit, Limit: c.max}
	var lease Lease
	switch {
	case n >= c.max:
		res.Remaining = 0
		res.RetryAfter = time.Duration(ls.held[0].exp - now)
		res.ResetAfter = time.Duration(ls.held[n-1].exp - now)
	case ls == nil && !c.addKey(sh, now):
		res.Source = SourceFull
		res.RetryAfter = time.Duration(c.lease)
	default:
		if ls == nil {
			ls = &leases{held: make([]held, 0, min(c.max, 4))}
			sh.m[strings.Clone(key)] = ls
			sh.held.Store(int32(len(sh.m)))
		}
		sh.next++
		ls.held = append(ls.held, held{id: sh.next, exp: now + c.lease})
		lease = Lease{c: c, key: key, id: sh.next}
		res.Allowed = true
		res.Remaining = c.max - len(ls.held)
		res.ResetAfter = time.Duration(c.lease)
	}
	sh.mu.Unlock()
	c.report(expired)
	if c.shadow && !res.Allowed {
		res.Allowed, res.Shadowed = true, true
	}
	if c.obs != nil {
		observe(c.obs, c.name, 1, res)
	}
	return lease, res, nil
}

// addKey counts a new key against the cap. At the cap it first drops keys
// whose leases have all expired: in this shard, then in other shards
// (reclaimOthers). Requires sh.mu held.
func (c *Concurrency) addKey(sh *leaseShard, now int64) bool {
	if c.tryAdd() {
		c.sweep(sh, now, 2) // keep abandoned keys from piling up
		return true
	}
	sweep := func(o *leaseShard) int { return c.sweep(o, now, reclaimBudget) }
	return sweep(sh) > 0 && c.tryAdd() || reclaimOthers(sh, &c.shards, &c.next, sweep, c.tryAdd)
}

func (sh *leaseShard) lockAndHeld() (*sync.Mutex, *atomic.Int32) { return &sh.mu, &sh.held }

func (c *Concurrency) tryAdd() bool {
	if c.keys.Add(1) <= c.maxKeys {
		return true
	}
	c.keys.Add(-1)
	return false
}

// sweep looks at up to steps keys of the shard (from a random point, as map
// iteration starts) and drops those whose leases have all expired. Requires
// sh.mu held.
func (c *Concurrency) sweep(sh *leaseShard, now int64, steps int) int {
	freed := 0
	for k, ls := range sh.m {
		if steps == 0 {
			break
		}
		steps--
		c.report(ls.reap(now))
		if len(ls.held) == 0 {
			c.drop(sh, k)
			freed++
		}
	}
	return freed
}

// drop deletes a key that holds no lease. Requires sh.mu held.
func (c *Concurrency) drop(sh *leaseShard, key string) {
	delete(sh.m, key)
	sh.held.Store(int32(len(sh.m)))
	c.keys.Add(-1)
}

// reap drops the leases expired at now and returns how many.
func (ls *leases) reap(now int64) int {
	k := 0
	for _, h := range ls.held {
		if h.exp > now {
			ls.held[k] = h
			k++
		}
	}
	n := len(ls.held) - k
	ls.held = ls.held[:k]
	return n
}

func (c *Concurrency) report(expired int) {
	if c.obs != nil {
		for range expired {
			c.obs.LeaseExpired(c.name)
		}
	}
}

// find returns the key's leases and the index of the lease id, or -1.
// Requires sh.mu held.
func (l Lease) find(sh *leaseShard) (*leases, int) {
	ls := sh.m[l.key]
	if ls == nil {
		return nil, -1
	}
	for i, h := range ls.held {
		if h.id == l.id {
			return ls, i
		}
	}
	return ls, -1
}

func (l Lease) shard() *leaseShard {
	return &l.c.shards[maphash.String(l.c.seed, l.key)&(numShards-1)]
}

// Release frees the lease's slot. It reports whether the lease was still
// held: false for a lease that expired (its slot was already, or is now,
// taken back), was released before, or holds nothing. Releasing twice never
// frees another holder's slot.
func (l Lease) Release() bool {
	if l.c == nil {
		return false
	}
	now := l.c.timebase.now()
	sh := l.shard()
	sh.mu.Lock()
	ls, i := l.find(sh)
	ok := false
	expired := 0
	if i >= 0 {
		ok = ls.held[i].exp > now
		if !ok {
			expired = 1
		}
		// A key left without leases stays until a sweep drops it, so that a
		// key in steady use is not dropped and re-made at every release.
		ls.held = append(ls.held[:i], ls.held[i+1:]...)
	}
	sh.mu.Unlock()
	l.c.report(expired)
	return ok
}

// Renew extends a held lease by the lease duration from now, for a request
// that legitimately runs long. It reports whether the lease was still held;
// an expired lease cannot be renewed.
func (l Lease) Renew() bool {
	if l.c == nil {
		return false
	}
	now := l.c.timebase.now()
	sh := l.shard()
	sh.mu.Lock()
	defer sh.mu.Unlock()
	ls, i := l.find(sh)
	if i < 0 || ls.held[i].exp <= now {
		return false
	}
	h := ls.held[i]
	h.exp = now + l.c.lease
	// Keep the leases ordered by expiry: move the renewed one last.
	ls.held = append(append(ls.held[:i], ls.held[i+1:]...), h)
	return true
}

// InFlight returns the number of leases of key held now (expired ones not
// counted).
func (c *Concurrency) InFlight(key string) int {
	now := c.timebase.now()
	sh := &c.shards[maphash.String(c.seed, key)&(numShards-1)]
	sh.mu.Lock()
	defer sh.mu.Unlock()
	n := 0
	if ls := sh.m[key]; ls != nil {
		for _, h := range ls.held {
			if h.exp > now {
				n++
			}
		}
	}
	return n
}

// Max returns the most leases a key may hold at once.
func (c *Concurrency) Max() int { return c.max }

func keyError(key string, maxLen int) error {
	if len(key) == 0 {
		return fmt.Errorf("%w: empty", ErrInvalidKey)
	}
	return fmt.Errorf("%w: %d bytes, longer than the maximum of %d", ErrInvalidKey, len(key), maxLen)
}
