package redisstore

import (
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
type refusalCache struct {
	shards [64]cacheShard
	per    int
}

type cacheShard struct {
	mu sync.Mutex
	m  map[cacheKey]refusal
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
// r is an enforcing OpAllow of the refused cost.
func (c *refusalCache) refuse(r *ratelimit.Request, q *policy, now int64) bool {
	if r.Op != ratelimit.OpAllow || r.Shadow || r.N == 0 {
		if r.Op == ratelimit.OpRefund {
			c.forget(r.Key, q)
		}
		return false
	}
	sh := c.shard(r.Key)
	k := cacheKey{q, r.Key}
	sh.mu.Lock()
	f, ok := sh.m[k]
	if ok && now >= f.until {
		delete(sh.m, k)
		ok = false
	}
	sh.mu.Unlock()
	if !ok || r.N != f.n || now < f.at {
		return false
	}
	passed := time.Duration(now - f.at)
	res := f.res
	res.Remaining = 0
	res.RetryAfter -= passed
	res.ResetAfter = max(res.RetryAfter, res.ResetAfter-passed)
	r.Result = res
	return true
}

// note remembers r if Redis refused it, and forgets its key if Redis
// admitted it (the key's retry time may have moved).
func (c *refusalCache) note(r *ratelimit.Request, q *policy, now int64) {
	if r.Op != ratelimit.OpAllow || r.Shadow || r.Result.RetryAfter <= 0 {
		if r.Result.Allowed && (r.N > 0 || r.Op != ratelimit.OpAllow) {
			c.forget(r.Key, q)
		}
		return
	}
	sh := c.shard(r.Key)
	sh.mu.Lock()
	if len(sh.m) >= c.per {
		for k, f := range sh.m { // make room: drop expired entries, else any one
			delete(sh.m, k)
			if f.until > now {
				break
			}
		}
	}
	sh.m[cacheKey{q, r.Key}] = refusal{at: now, n: r.N, until: now + int64(r.Result.RetryAfter), res: r.Result}
	sh.mu.Unlock()
}

// forget drops key's entry (a refund may admit it sooner).
func (c *refusalCache) forget(key string, q *policy) {
	sh := c.shard(key)
	sh.mu.Lock()
	delete(sh.m, cacheKey{q, key})
	sh.mu.Unlock()
}
