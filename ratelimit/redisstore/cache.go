package redisstore

import (
	"strings"
	"sync"
	"time"

	"github.com/sluicehq/sluice/ratelimit"
)

// refusalCache remembers keys Redis refused until their retry time (Envoy's
// local over-limit cache): until then a request of the refused cost would
// be refused by Redis too, since with no other traffic it is admitted no
// sooner, and other traffic only delays it. A request refused here reports
// Remaining 0 and the remembered RetryAfter less the time passed: exactly
// Redis's while no other traffic is admitted on the key (an admission seen
// by this store forgets the key), and a lower bound of it when other
// processes' traffic is.
//
// A refund of this process forgets the key before it goes to Redis, and
// after, and bumps its shard's generation, so that a refusal Redis decided before the
// refund but reported after it is not remembered: note takes the
// generation refuse read before the call, and remembers nothing if it has
// moved.
//
// Memory: at most size entries (a shard drops one to make room), each the
// key's bytes plus about 100.
type refusalCache struct {
	shards [64]cacheShard
	per    int
}

type cacheShard struct {
	mu  sync.Mutex
	gen uint64 // bumped by every forget
	m   map[cacheKey]refusal
}

type cacheKey struct {
	pol *policy
	key string
}

type refusal struct {
	at    int64 // when Redis refused (the caller's Unix ns)
	n     int   // the refused cost
	until int64 // at + RetryAfter
	res   ratelimit.Result
}

func newRefusalCache(size int) *refusalCache {
	c := &refusalCache{per: max(1, size/64)}
	for i := range c.shards {
		c.shards[i].m = make(map[cacheKey]refusal)
	}
	return c
}

func (c *refusalCache) shard(key string) *cacheShard {
	var h uint32 = 2166136261
	for i := 0; i < len(key); i++ {
		h = (h ^ uint32(key[i])) * 16777619
	}
	return &c.shards[h%64]
}

// refuse decides r locally if its key is remembered as refused at now and
// r is an enforcing OpAllow of the refused cost. Otherwise it returns the
// generation of the key's shard, for note.
func (c *refusalCache) refuse(r *ratelimit.Request, q *policy, now int64) (bool, uint64) {
	if r.Op == ratelimit.OpRefund {
		return false, c.forget(r.Key, q, true)
	}
	sh := c.shard(r.Key)
	k := cacheKey{q, r.Key}
	sh.mu.Lock()
	gen := sh.gen
	f, ok := sh.m[k]
	if ok && now >= f.until {
		delete(sh.m, k)
		ok = false
	}
	sh.mu.Unlock()
	if !ok || r.Op != ratelimit.OpAllow || r.Shadow || r.N != f.n || now < f.at {
		return false, gen
	}
	passed := time.Duration(now - f.at)
	res := f.res
	res.Remaining = 0
	res.RetryAfter -= passed
	res.ResetAfter = max(res.RetryAfter, res.ResetAfter-passed)
	r.Result = res
	return true, gen
}

// note remembers r, decided by Redis at now, if Redis refused it and no
// refund passed its shard since refuse read gen; it forgets r's key if
// Redis admitted it (the key's retry time may have moved) or refunded on it.
func (c *refusalCache) note(r *ratelimit.Request, q *policy, now int64, gen uint64) {
	if r.Op != ratelimit.OpAllow || r.Shadow || r.Result.RetryAfter <= 0 {
		if r.Op == ratelimit.OpRefund || r.Result.Allowed && r.N > 0 {
			c.forget(r.Key, q, r.Op == ratelimit.OpRefund)
		}
		return
	}
	sh := c.shard(r.Key)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if sh.gen != gen {
		return // a refund may have given the key tokens since Redis decided
	}
	k := cacheKey{q, r.Key}
	if _, ok := sh.m[k]; !ok {
		if len(sh.m) >= c.per {
			for k, f := range sh.m { // make room: drop expired entries, else any one
				delete(sh.m, k)
				if f.until > now {
					break
				}
			}
		}
		k.key = strings.Clone(k.key) // not the caller's buffer
	}
	sh.m[k] = refusal{at: now, n: r.N, until: now + int64(r.Result.RetryAfter), res: r.Result}
}

// forget drops key's entry and, for a refund (which may admit the key
// sooner), bumps its shard's generation. It returns the generation.
func (c *refusalCache) forget(key string, q *policy, refund bool) uint64 {
	sh := c.shard(key)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	delete(sh.m, cacheKey{q, key})
	if refund {
		sh.gen++
	}
	return sh.gen
}
