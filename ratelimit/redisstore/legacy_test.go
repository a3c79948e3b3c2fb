package redisstore_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/sluicehq/sluice/internal/redistest"
	"github.com/sluicehq/sluice/ratelimit"
	"github.com/sluicehq/sluice/ratelimit/redisstore"
)

// textProcess decides as a process of the version before the binary state
// did (commit 29aa4a9^): its lean scripts, kept verbatim in
// testdata/textstate, on the text state under the earlier key names, at
// the caller's time.
type textProcess struct {
	c       *redis.Client
	scripts map[ratelimit.Algorithm]*redis.Script
}

func newTextProcess(t *testing.T, c *redis.Client) *textProcess {
	t.Helper()
	read := func(name string) string {
		b, err := os.ReadFile("testdata/textstate/" + name + ".lua")
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	prelude := read("prelude")
	return &textProcess{c: c, scripts: map[ratelimit.Algorithm]*redis.Script{
		ratelimit.FixedWindow:   redis.NewScript(prelude + read("fixed_window")),
		ratelimit.SlidingWindow: redis.NewScript(prelude + read("sliding_window")),
		ratelimit.TokenBucket:   redis.NewScript("local GCRA = false\n" + prelude + read("bucket")),
		ratelimit.GCRA:          redis.NewScript("local GCRA = true\n" + prelude + read("bucket")),
	}}
}

// allow decides n units of key under p at now, as the earlier version's
// store did for a single Allow with WithCallerTime and the default prefix.
func (o *textProcess) allow(t *testing.T, p *ratelimit.Policy, key string, now time.Time, n int) ratelimit.Result {
	t.Helper()
	lim := p.Limit()
	P, rate, burst := int64(lim.Period/time.Microsecond), int64(lim.Rate), int64(lim.Burst)
	g := P
	for b := rate; b != 0; {
		g, b = b, g%b
	}
	r, per := rate/g, P/g
	tag := map[ratelimit.Algorithm]string{ratelimit.FixedWindow: "fw", ratelimit.SlidingWindow: "sw", ratelimit.TokenBucket: "tb", ratelimit.GCRA: "gcra"}[p.Algorithm()]
	rk := fmt.Sprintf("sluice:{%s}:%s:%d:%d:%d", key, tag, rate, P, burst)
	v, err := o.scripts[p.Algorithm()].Run(context.Background(), o.c, []string{rk},
		now.UnixMicro(), 60000, P, burst, r, per, burst*per, n).Int64Slice()
	if err != nil {
		t.Fatal(err)
	}
	return ratelimit.Result{Allowed: v[0] == 1, Source: ratelimit.SourceLimit, Limit: lim.Burst, Remaining: int(v[1]),
		RetryAfter: time.Duration(v[2]) * time.Microsecond, ResetAfter: time.Duration(v[3]) * time.Microsecond}
}

// decider is one process in TestLegacyState's traces: it decides n units
// of key at now, as an Allow (lean scripts) or, batch true, as the batch
// script does (a shadow request of 0 units on the same key rides along).
type decider func(t *testing.T, p *ratelimit.Policy, key string, now time.Time, n int, batch bool) ratelimit.Result

func storeDecider(s *redisstore.Store) decider {
	return func(t *testing.T, p *ratelimit.Policy, key string, now time.Time, n int, batch bool) ratelimit.Result {
		t.Helper()
		reqs := []ratelimit.Request{{Key: key, Policy: p, N: n}}
		if batch {
			reqs = append(reqs, ratelimit.Request{Key: key, Policy: p, Shadow: true})
		}
		if err := s.Apply(context.Background(), now, reqs); err != nil {
			t.Fatal(err)
		}
		return reqs[0].Result
	}
}

func ceilMicro(d time.Duration) time.Duration {
	return (d + time.Microsecond - 1) / time.Microsecond * time.Microsecond
}

// TestLegacyState runs random traces of decisions on a few keys, each made
// by a process picked at random among the processes a rollout phase runs
// side by side, against one in-memory store that decides them all: where
// LegacyState promises that the processes count as one limit, every
// decision must be the in-memory store's (times rounded up to the µs).
//
//   - phase 1: processes of the earlier version (the text state, its own
//     scripts) and of this one with LegacyShare, on FCALL and EVALSHA,
//     single Allows and batches;
//   - phase 2: LegacyShare and LegacyCarry processes, with the text
//     state the earlier version left;
//   - after: LegacyCarry and LegacyIgnore processes, once every key has
//     binary state or none.
func TestLegacyState(t *testing.T) {
	srv := redistest.Start(t)
	c := client(t, srv.Addr)
	text := newTextProcess(t, c)
	opts := []redisstore.Option{redisstore.WithCallerTime(), redisstore.WithRefusalCache(0)}
	mk := func(extra ...redisstore.Option) decider {
		return storeDecider(newStore(t, c, append(opts, extra...)...))
	}
	share := mk(redisstore.WithLegacyState(redisstore.LegacyShare))
	shareEval := mk(redisstore.WithLegacyState(redisstore.LegacyShare), redisstore.WithoutFunctions())
	carry := mk()
	carryEval := mk(redisstore.WithoutFunctions())
	ignore := mk(redisstore.WithLegacyState(redisstore.LegacyIgnore))
	old := func(t *testing.T, p *ratelimit.Policy, key string, now time.Time, n int, _ bool) ratelimit.Result {
		return text.allow(t, p, key, now, n)
	}
	phases := []struct {
		name  string
		procs []decider
		carry bool // at its end, a LegacyCarry process decides 0 units on every key
	}{
		{"phase 1: earlier version and LegacyShare", []decider{old, share, shareEval}, false},
		// At its end every key's state is binary (or is a fresh key's).
		{"phase 2: LegacyShare and LegacyCarry", []decider{share, shareEval, carry, carryEval}, true},
		{"after: LegacyCarry and LegacyIgnore", []decider{carry, carryEval, ignore}, false},
	}
	for _, alg := range []ratelimit.Algorithm{ratelimit.FixedWindow, ratelimit.SlidingWindow, ratelimit.TokenBucket, ratelimit.GCRA} {
		t.Run(alg.String(), func(t *testing.T) {
			lim := ratelimit.Limit{Rate: 5, Period: 10 * time.Millisecond, Burst: 8}
			if alg == ratelimit.FixedWindow || alg == ratelimit.SlidingWindow {
				lim.Burst = 0
			}
			p, err := ratelimit.NewPolicy(alg, lim)
			if err != nil {
				t.Fatal(err)
			}
			ref, err := ratelimit.NewMemoryStore(1000)
			if err != nil {
				t.Fatal(err)
			}
			rng := rand.New(rand.NewPCG(uint64(alg), 18))
			now := time.Unix(4102444800, 0)
			keys := []string{"a-" + alg.String(), "b-" + alg.String(), "c-" + alg.String()}
			step := func(phase string, i int, proc int, procs []decider, key string, n int, batch bool) {
				t.Helper()
				reqs := []ratelimit.Request{{Key: key, Policy: &p, N: n}}
				if err := ref.Apply(context.Background(), now, reqs); err != nil {
					t.Fatal(err)
				}
				want := reqs[0].Result
				want.RetryAfter, want.ResetAfter = ceilMicro(want.RetryAfter), ceilMicro(want.ResetAfter)
				if got := procs[proc](t, &p, key, now, n, batch); got != want {
					t.Fatalf("%s, decision %d (process %d, %s, %d units, batch %v): %+v, want %+v", phase, i, proc, key, n, batch, got, want)
				}
			}
			for _, ph := range phases {
				for i := range 400 {
					now = now.Add(time.Duration(rng.IntN(3000)) * time.Microsecond)
					step(ph.name, i, rng.IntN(len(ph.procs)), ph.procs, keys[rng.IntN(len(keys))], 1+rng.IntN(3), rng.IntN(3) == 0)
				}
				if ph.carry {
					for i, key := range keys {
						step(ph.name+", carried over", i, 0, []decider{carry}, key, 0, false)
					}
				}
			}
		})
	}
}

// TestLegacyKeys: a SlidingLog keeps the sorted set and key name of the
// earlier version (members "t:i" scored t, under "sl:"), so both count on
// it; LegacyCarry leaves a text key as it found it and writes binary state
// under the "2" name; LegacyIgnore never reads the text key.
func TestLegacyKeys(t *testing.T) {
	srv := redistest.Start(t)
	c := client(t, srv.Addr)
	ctx := context.Background()
	now := time.Unix(4102444800, 0)
	text := newTextProcess(t, c)
	allow := func(s *redisstore.Store, p *ratelimit.Policy, key string) ratelimit.Result {
		t.Helper()
		reqs := []ratelimit.Request{{Key: key, Policy: p, N: 1}}
		if err := s.Apply(ctx, now, reqs); err != nil {
			t.Fatal(err)
		}
		return reqs[0].Result
	}
	opts := []redisstore.Option{redisstore.WithCallerTime(), redisstore.WithRefusalCache(0)}
	carry := newStore(t, c, opts...)
	ignore := newStore(t, c, append(opts, redisstore.WithLegacyState(redisstore.LegacyIgnore))...)

	log, err := ratelimit.NewPolicy(ratelimit.SlidingLog, ratelimit.Limit{Rate: 5, Period: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	at := fmt.Sprint(now.Add(-time.Millisecond).UnixMicro())
	if err := c.ZAdd(ctx, "sluice:{log}:sl:5:1000000:5", redis.Z{Score: float64(now.Add(-time.Millisecond).UnixMicro()), Member: at + ":1"},
		redis.Z{Score: float64(now.Add(-time.Millisecond).UnixMicro()), Member: at + ":2"}).Err(); err != nil {
		t.Fatal(err)
	}
	for i, s := range []*redisstore.Store{carry, ignore} {
		if r := allow(s, &log, "log"); !r.Allowed || r.Remaining != 2-i {
			t.Fatalf("sliding log with 2 units of the earlier version, after %d more: %+v, want %d remaining", i+1, r, 2-i)
		}
	}
	if n, _ := c.ZCard(ctx, "sluice:{log}:sl:5:1000000:5").Result(); n != 4 {
		t.Fatalf("the earlier version's sorted set holds %d units, want 4", n)
	}

	gcra, err := ratelimit.NewPolicy(ratelimit.GCRA, ratelimit.Limit{Rate: 5, Period: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if r := text.allow(t, &gcra, "g", now, 3); r.Remaining != 2 {
		t.Fatalf("earlier version: %+v", r)
	}
	textKey, binKey := "sluice:{g}:gcra:5:1000000:5", "sluice:{g}:gcra2:5:1000000:5"
	before, _ := c.Get(ctx, textKey).Result()
	if r := allow(ignore, &gcra, "g"); r.Remaining != 4 {
		t.Fatalf("LegacyIgnore after 3 units of the earlier version: %+v, want a fresh key's 4 remaining", r)
	}
	if err := c.Del(ctx, binKey).Err(); err != nil {
		t.Fatal(err)
	}
	if r := allow(carry, &gcra, "g"); r.Remaining != 1 {
		t.Fatalf("LegacyCarry after 3 units of the earlier version: %+v, want 1 remaining", r)
	}
	if after, _ := c.Get(ctx, textKey).Result(); after != before {
		t.Fatalf("LegacyCarry changed the text key: %q, was %q", after, before)
	}
	if n, _ := c.Exists(ctx, binKey).Result(); n != 1 {
		t.Fatal("LegacyCarry wrote no binary state")
	}
	if r := allow(ignore, &gcra, "g"); r.Remaining != 0 {
		t.Fatalf("LegacyIgnore after the carry-over: %+v, want 0 remaining", r)
	}
}
