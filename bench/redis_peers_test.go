package bench

import (
	"context"
	"maps"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/ratelimit"
	"github.com/sluicehq/sluice/ratelimit/redisstore"
)

// These tests keep the Redis benchmark honest, on a redis-server of their
// own (a fraction of a second in all): every adapter limits per key, and
// sluice's store sends exactly one command (FCALL on Redis 7, EVALSHA
// with WithoutFunctions) per decision once its code is loaded, as the
// benchmark's trips/op reports. Nothing sleeps or
// times: the limits are per hour.

func TestRedisAdaptersLimitPerKey(t *testing.T) {
	srv := startRedis(t)
	ctx := context.Background()
	for _, impl := range redisImpls() {
		if strings.HasPrefix(impl.name, "floor.") {
			continue // no limit: the cost of the commands a limit cannot avoid
		}
		t.Run(impl.name, func(t *testing.T) {
			c, _ := countedClient(t, srv.addr)
			lim := impl.build(t, c, rlSmall, time.Hour)
			for i := range rlSmall {
				if ok, err := lim.allow(ctx, "user:a"); !ok || err != nil {
					t.Fatalf("request %d of %d not admitted: %v", i+1, rlSmall, err)
				}
			}
			if ok, err := lim.allow(ctx, "user:a"); ok || err != nil {
				t.Fatalf("request %d past the limit of %d: admitted %v, err %v; want refused", rlSmall+1, rlSmall, ok, err)
			}
			if ok, err := lim.allow(ctx, "user:b"); !ok || err != nil {
				t.Fatalf("first request for another key not admitted: %v", err)
			}
		})
	}
}

// TestRedisSluiceOneRoundTrip checks, for every algorithm of sluice's Redis
// store, that the first decision is one round trip (FUNCTION LOAD REPLACE
// and FCALL in one pipeline), every later one one FCALL, on new and known
// keys, admitted or refused by Redis; that a refusal the refusal cache
// remembers is none; that SCRIPT FLUSH changes nothing; and, with
// WithoutFunctions, one EVAL for the store's first decision, one EVALSHA
// per decision after it, and two (EVALSHA answered NOSCRIPT, then EVAL)
// for the first after SCRIPT FLUSH.
func TestRedisSluiceOneRoundTrip(t *testing.T) {
	srv := startRedis(t)
	ctx := context.Background()
	for _, scripts := range []bool{false, true} {
		for _, alg := range []ratelimit.Algorithm{ratelimit.FixedWindow, ratelimit.SlidingLog,
			ratelimit.SlidingWindow, ratelimit.TokenBucket, ratelimit.GCRA} {
			name := alg.String()
			call := "fcall"
			var opts []redisstore.Option
			if scripts {
				name += ".evalsha"
				call = "evalsha"
				opts = append(opts, redisstore.WithoutFunctions(), redisstore.WithPrefix("evalsha:"))
			}
			t.Run(name, func(t *testing.T) {
				c, h := countedClient(t, srv.addr)
				lim := newSluiceRedis(t, c, alg, rlSmall, time.Hour, opts...)
				decide := func(key string, want bool) {
					t.Helper()
					ok, err := lim.allow(ctx, key)
					if err != nil || ok != want {
						t.Fatalf("%q: admitted %v, err %v; want admitted %v", key, ok, err, want)
					}
				}
				expect := func(what string, s tripSnap, trips int64, cmds map[string]int64) {
					t.Helper()
					if s.trips != trips || !maps.Equal(s.cmds, cmds) {
						t.Fatalf("%s: %d round trips %v, want %d %v", what, s.trips, s.cmds, trips, cmds)
					}
				}
				s := h.snap()
				decide("warm", true) // loads the code
				if !scripts {
					expect("the first decision", h.since(s), 1, map[string]int64{"function": 1, "fcall": 1})
				} else {
					expect("the first decision", h.since(s), 1, map[string]int64{"eval": 1})
				}

				const n = 20
				s = h.snap()
				for i := range n {
					decide("user:"+strconv.Itoa(i), true) // new keys
				}
				for range rlSmall - 1 {
					decide("user:0", true) // a known key, up to its limit
				}
				expect("admitted decisions", h.since(s), n+rlSmall-1, map[string]int64{call: n + rlSmall - 1})

				s = h.snap()
				decide("user:0", false)
				expect("a refusal by Redis", h.since(s), 1, map[string]int64{call: 1})
				s = h.snap()
				for range 10 {
					decide("user:0", false)
				}
				expect("refusals the refusal cache remembers", h.since(s), 0, map[string]int64{})

				srv.scriptFlush(t)
				s = h.snap()
				decide("user:1", true)
				if scripts {
					expect("the first decision after SCRIPT FLUSH", h.since(s), 2, map[string]int64{"evalsha": 1, "eval": 1})
				} else {
					expect("the first decision after SCRIPT FLUSH", h.since(s), 1, map[string]int64{"fcall": 1})
				}
				s = h.snap()
				decide("user:2", true)
				expect("the next decision", h.since(s), 1, map[string]int64{call: 1})
			})
		}
	}
}

func TestParseCommandStats(t *testing.T) {
	info := "# Commandstats\r\n" +
		"cmdstat_evalsha:calls=5,usec=61,usec_per_call=12.20,rejected_calls=0,failed_calls=1\r\n" +
		"cmdstat_script|load:calls=2,usec=30,usec_per_call=15.00,rejected_calls=0,failed_calls=0\r\n" +
		"cmdstat_get:calls=5,usec=4,usec_per_call=0.80,rejected_calls=0,failed_calls=0\r\n" +
		"cmdstat_info:calls=1,usec=9,usec_per_call=9.00,rejected_calls=0,failed_calls=0\r\n"
	stats := parseCommandStats(info)
	if got := stats["evalsha"]; got != (cmdStat{calls: 5, usec: 61}) {
		t.Fatalf("evalsha: %+v", got)
	}
	sent := map[string]int64{"evalsha": 5, "script": 2}
	if got := serverUsec(stats, sent); got != 91 {
		t.Fatalf("serverUsec = %v, want 91", got)
	}
	if got := innerUsec(stats, sent); got != 4 {
		t.Fatalf("innerUsec = %v, want 4 (get; info is the admin's)", got)
	}
}
