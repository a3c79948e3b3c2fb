package redisstore

import (
	"testing"
	"time"

	"github.com/sluicehq/sluice/ratelimit"
)

// TestRefusalCacheRefundRace: a refusal Redis decided before a refund of
// this process, but reported after it, is not remembered: the refund may
// have given the key the tokens the refused request wanted.
func TestRefusalCacheRefundRace(t *testing.T) {
	c := newRefusalCache(64)
	q := &policy{id: "gcra:1:1000000:1"}
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano()
	allow := ratelimit.Request{Key: "k", N: 1}
	refused, gen := c.refuse(&allow, q, now) // goes to Redis, which refuses it ...
	if refused {
		t.Fatal("refused from an empty cache")
	}
	refund := ratelimit.Request{Key: "k", N: 1, Op: ratelimit.OpRefund}
	c.refuse(&refund, q, now) // ... while a refund goes to Redis
	refund.Result.Allowed = true
	c.note(&refund, q, now, gen)
	allow.Result = ratelimit.Result{Limit: 1, RetryAfter: time.Second, ResetAfter: time.Second}
	c.note(&allow, q, now, gen) // the refusal arrives after the refund
	if refused, _ := c.refuse(&ratelimit.Request{Key: "k", N: 1}, q, now+1); refused {
		t.Fatal("a refusal decided before a refund was remembered after it")
	}
	// Without a refund in between it is remembered.
	_, gen = c.refuse(&allow, q, now)
	c.note(&allow, q, now, gen)
	if refused, _ := c.refuse(&ratelimit.Request{Key: "k", N: 1}, q, now+1); !refused {
		t.Fatal("a refusal was not remembered")
	}
}

// TestRefusalCacheBounded: a spray of refused keys never holds more than
// the cache's size, and refreshing a remembered key drops nothing.
func TestRefusalCacheBounded(t *testing.T) {
	c := newRefusalCache(128) // 2 per shard
	q := &policy{id: "fw"}
	now := int64(1e18)
	for i := range 10000 {
		r := ratelimit.Request{Key: string(rune(i)), N: 1, Result: ratelimit.Result{RetryAfter: time.Hour}}
		c.note(&r, q, now, 0)
	}
	total := 0
	for i := range c.shards {
		total += len(c.shards[i].m)
	}
	if total > 128 {
		t.Fatalf("%d entries, want at most 128", total)
	}
	sh := c.shard("x")
	sh.m = map[cacheKey]refusal{}
	for _, k := range []string{"x", "x", "x"} {
		r := ratelimit.Request{Key: k, N: 1, Result: ratelimit.Result{RetryAfter: time.Hour}}
		c.note(&r, q, now, sh.gen)
	}
	if len(sh.m) != 1 {
		t.Fatalf("%d entries for one key", len(sh.m))
	}
}

// TestBreakerOneProbe: once the cool-down has passed, exactly one of many
// concurrent callers is picked to start the probe; none of them tries
// Redis meanwhile, and all keep deciding locally.
func TestBreakerOneProbe(t *testing.T) {
	b := breaker{threshold: 2, cooldown: time.Second}
	t0 := time.Now()
	b.failure(t0)
	if try, _ := b.allow(t0); !try {
		t.Fatal("open after one failure of two")
	}
	b.failure(t0)
	if try, probe := b.allow(t0.Add(time.Second - 1)); try || probe || !b.open(t0.Add(time.Second-1)) {
		t.Fatal("closed, or probing, within the cool-down")
	}
	type verdict struct{ try, probe bool }
	verdicts := make(chan verdict, 64)
	at := t0.Add(time.Second)
	done := make(chan struct{})
	for range 64 {
		go func() {
			<-done
			try, probe := b.allow(at)
			verdicts <- verdict{try, probe}
		}()
	}
	close(done)
	n := 0
	for range 64 {
		v := <-verdicts
		if v.try {
			t.Fatal("a caller tried Redis while the breaker was open")
		}
		if v.probe {
			n++
		}
	}
	if n != 1 {
		t.Fatalf("%d probes, want 1", n)
	}
	// The probe failed: open for another cool-down from when it started.
	if try, probe := b.allow(at.Add(time.Second - 1)); try || probe {
		t.Fatal("closed, or probing again, within the next cool-down")
	}
	if _, probe := b.allow(at.Add(time.Second)); !probe {
		t.Fatal("no probe after the second cool-down")
	}
	b.success() // a probe succeeded
	for range 2 {
		if try, _ := b.allow(at.Add(time.Second)); !try {
			t.Fatal("not closed after a successful probe")
		}
	}
	b.trip(at) // a refused connection opens it at once
	if try, _ := b.allow(at); try || !b.open(at) {
		t.Fatal("not open after a refused connection")
	}
}
