package bench

import (
	"context"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// The Redis rate-limit benchmark (issue "ratelimit on Redis"): sluice's
// redisstore against go-redis/redis_rate v10 and ulule/limiter v3's Redis
// store, all on one redis-server that the benchmark starts on a loopback
// port. `./run-redis.sh` runs it and prints the tables (cmd/redistable);
// see README.md.
//
// Custom metrics, per decision unless said otherwise:
//
//	trips/op     round trips (commands or pipelines) the client sent
//	failed/op    decisions that returned an error (sluice: its 100 ms
//	             timeout, on a busy machine; a cell fails above 1%)
//	srv-us/op    the server's execution time of those commands, µs
//	             (INFO commandstats usec, reset with CONFIG RESETSTAT)
//	inner-us/op  of srv-us/op, the time of the commands the scripts called
//	             (GET, SET, TIME...): the rest is the Lua interpreter's
//	srvcpu-us/op the redis-server process's CPU time (INFO cpu: user + sys,
//	             so also reading, parsing and answering), µs
//	cli-us/op    the benchmark process's CPU time (getrusage: the client
//	             library, go-redis, the kernel's loopback TCP), µs

// redisHugeRate is the limit of the throughput cells: 2^20 per second,
// burst 2^20, for every implementation. Nothing comes near it, so every
// decision is an admission (a cell fails otherwise).
const redisHugeRate = 1 << 20

// redisKeys is how many distinct keys the "distinct" cells cycle through.
const redisKeys = 10_000

// redisGoroutines is the concurrency of the parallel cells and the flood.
const redisGoroutines = 64

// redisKeyList returns the keys of the distinct cells.
func redisKeyList() []string {
	keys := make([]string, redisKeys)
	for i := range keys {
		keys[i] = "user:" + strconv.Itoa(i)
	}
	return keys
}

// BenchmarkRedis measures one decision (an admission) per iteration, for
// every implementation, in three cells:
//
//	serial    one goroutine, keys cycled over redisKeys distinct keys
//	distinct  64 goroutines, each decision on the next of redisKeys keys
//	hot       64 goroutines, one key
//
// Each implementation has its own client (pool of 64 connections) with a
// counting hook; every cell is warmed (scripts loaded, a decision made)
// before it is timed, and the server's command statistics are reset just
// before the timed span.
func BenchmarkRedis(b *testing.B) {
	srv := startRedis(b)
	keys := redisKeyList()
	for _, impl := range redisImpls() {
		b.Run(impl.name, func(b *testing.B) {
			c, h := countedClient(b, srv.addr)
			lim := impl.build(b, c, redisHugeRate, time.Second)
			ctx := context.Background()
			redisWarm(b, lim)
			b.Run("serial", func(b *testing.B) {
				redisCell(b, srv, h, func(n int) (refused, failed int64) {
					for i := range n {
						ok, err := lim.allow(ctx, keys[i%len(keys)])
						if err != nil {
							failed++
						} else if !ok {
							refused++
						}
					}
					return refused, failed
				})
			})
			for _, cell := range []string{"distinct", "hot"} {
				b.Run(cell, func(b *testing.B) {
					redisCell(b, srv, h, func(n int) (refused, failed int64) {
						return redisParallel(ctx, lim, n, func(i int64) string {
							if cell == "hot" {
								return "hot"
							}
							return keys[i%int64(len(keys))]
						})
					})
				})
			}
		})
	}
}

// redisWarm loads the limiter's scripts and opens the client's connections
// (64 goroutines deciding on the key "warm") before anything is measured.
// Dialing 64 connections at once on a busy machine can take longer than
// sluice's default timeout (100 ms), so warm-up decisions may fail; the
// serial decision before them must not, nor, after them, another.
func redisWarm(b testing.TB, lim redisLimiter) {
	b.Helper()
	ctx := context.Background()
	if _, err := lim.allow(ctx, "warm"); err != nil {
		b.Fatal(err)
	}
	redisParallel(ctx, lim, 4*redisGoroutines, func(int64) string { return "warm" })
	if _, err := lim.allow(ctx, "warm"); err != nil {
		b.Fatal(err)
	}
}

// redisCell times run(b.N) and reports the round trips and server time per
// decision; it fails if anything was refused or failed.
func redisCell(b *testing.B, srv *redisServer, h *tripCounter, run func(n int) (refused, failed int64)) {
	b.ReportAllocs()
	srv.resetStats(b)
	before := h.snap()
	srvCPU, cliCPU := srv.cpuSeconds(b), processCPU(b)
	b.ResetTimer()
	refused, failed := run(b.N)
	b.StopTimer()
	cliCPU = processCPU(b) - cliCPU
	srvCPU = srv.cpuSeconds(b) - srvCPU
	sent := h.since(before)
	stats := srv.commandStats(b)
	usec := serverUsec(stats, sent.cmds)
	if refused > 0 {
		b.Fatalf("%d of %d decisions refused: the limit must admit everything", refused, b.N)
	}
	if failed*100 > int64(b.N) {
		b.Fatalf("%d of %d decisions failed", failed, b.N)
	}
	b.ReportMetric(float64(failed)/float64(b.N), "failed/op")
	b.ReportMetric(float64(sent.trips)/float64(b.N), "trips/op")
	b.ReportMetric(usec/float64(b.N), "srv-us/op")
	b.ReportMetric(innerUsec(stats, sent.cmds)/float64(b.N), "inner-us/op")
	b.ReportMetric(srvCPU*1e6/float64(b.N), "srvcpu-us/op")
	b.ReportMetric(float64(cliCPU.Microseconds())/float64(b.N), "cli-us/op")
}

// redisParallel makes n decisions from redisGoroutines goroutines, the i-th
// (from 0) on key(i), and returns how many were refused and failed.
func redisParallel(ctx context.Context, lim redisLimiter, n int, key func(i int64) string) (refused, failed int64) {
	var next, nRefused, nFailed atomic.Int64
	var wg sync.WaitGroup
	for range redisGoroutines {
		wg.Go(func() {
			for {
				i := next.Add(1) - 1
				if i >= int64(n) {
					return
				}
				ok, err := lim.allow(ctx, key(i))
				if err != nil {
					nFailed.Add(1)
				} else if !ok {
					nRefused.Add(1)
				}
			}
		})
	}
	wg.Wait()
	return nRefused.Load(), nFailed.Load()
}

// BenchmarkRedisCold counts the round trips of a limiter's first decisions
// without scripts in Redis's cache. One iteration:
//
//  1. SCRIPT FLUSH, then build the limiter (setup: ulule's store loads its
//     scripts here; sluice's and redis_rate's send nothing);
//  2. its first decision (first), and a second one (second);
//  3. SCRIPT FLUSH again, as after a Redis restart or failover, and the
//     next decision of the same limiter (restart).
//
// It reports the round trips of each step (setup-trips, first-trips,
// second-trips, restart-trips) and, per step, the commands by name
// ("first.evalsha", ...). All counts are per iteration; ns/op is not
// meaningful.
func BenchmarkRedisCold(b *testing.B) {
	srv := startRedis(b)
	ctx := context.Background()
	for _, impl := range redisImpls() {
		b.Run(impl.name, func(b *testing.B) {
			c, h := countedClient(b, srv.addr)
			totals := map[string]float64{}
			step := func(name string, s tripSnap) {
				totals[name+"-trips"] += float64(s.trips)
				for cmd, n := range s.cmds {
					totals[name+"."+cmd] += float64(n)
				}
			}
			for i := range b.N {
				srv.scriptFlush(b)
				s := h.snap()
				lim := impl.build(b, c, redisHugeRate, time.Second)
				step("setup", h.since(s))
				for j, name := range []string{"first", "second", "restart"} {
					if name == "restart" {
						srv.scriptFlush(b)
					}
					s = h.snap()
					if _, err := lim.allow(ctx, "cold:"+strconv.Itoa(i)+":"+strconv.Itoa(j)); err != nil {
						b.Fatalf("%s decision: %v", name, err)
					}
					step(name, h.since(s))
				}
			}
			for name, v := range totals {
				b.ReportMetric(v/float64(b.N), name)
			}
		})
	}
}

// redisFloodRate is the flood's limit: 10 per second, burst 10.
const redisFloodRate = 10

// redisFloodDecisions is how many decisions one flood makes.
const redisFloodDecisions = 10_000

// redisFloodSeq makes every flood's key new.
var redisFloodSeq atomic.Int64

// BenchmarkRedisFlood floods one key, limited to 10 per second, with
// redisFloodDecisions decisions from 64 goroutines; one iteration is one
// flood on a fresh key. It reports the round trips per 1000 decisions
// (trips/kdec), the admissions per flood (admitted/flood), the server's
// time per decision (srv-us/dec) and the decisions per second
// (dec/s); ns/op is one flood's duration.
func BenchmarkRedisFlood(b *testing.B) {
	srv := startRedis(b)
	ctx := context.Background()
	for _, impl := range redisImpls() {
		b.Run(impl.name, func(b *testing.B) {
			c, h := countedClient(b, srv.addr)
			lim := impl.build(b, c, redisFloodRate, time.Second)
			redisWarm(b, lim)
			b.ReportAllocs()
			srv.resetStats(b)
			before := h.snap()
			var refused int64
			b.ResetTimer()
			for range b.N {
				key := "flood:" + strconv.FormatInt(redisFloodSeq.Add(1), 10)
				r, failed := redisParallel(ctx, lim, redisFloodDecisions, func(int64) string { return key })
				if failed*100 > redisFloodDecisions {
					b.Fatalf("%d of %d decisions failed", failed, redisFloodDecisions)
				}
				refused += r
			}
			b.StopTimer()
			sent := h.since(before)
			usec := serverUsec(srv.commandStats(b), sent.cmds)
			decisions := float64(b.N) * redisFloodDecisions
			b.ReportMetric(float64(sent.trips)*1000/decisions, "trips/kdec")
			b.ReportMetric((decisions-float64(refused))/float64(b.N), "admitted/flood")
			b.ReportMetric(usec/decisions, "srv-us/dec")
			b.ReportMetric(decisions/b.Elapsed().Seconds(), "dec/s")
		})
	}
}
