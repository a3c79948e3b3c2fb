package bench

import (
	"context"
	"flag"
	"fmt"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"
)

var (
	rstEnabled = flag.Bool("redistime", false, "run TestRedisServerTime, the interleaved Redis server-time comparison")
	rstRounds  = flag.Int("redistime.rounds", 15, "rounds of TestRedisServerTime")
	rstBatch   = flag.Int("redistime.batch", 2000, "decisions per contender per round of TestRedisServerTime")
	rstPeriod  = flag.Duration("redistime.period", time.Second, "the period of TestRedisServerTime's limits (2^20 decisions per period): 1s lets a key's state expire between rounds, so most decisions find none; 1h keeps it, so every round after the first finds the state it left")
)

// TestRedisServerTime measures the Redis server's time per decision
// (INFO commandstats usec of the commands each client sent ÷ decisions)
// of every Redis implementation, interleaved: in each round every
// contender makes rstBatch serial decisions over distinct keys, in an
// order rotated from round to round, with CONFIG RESETSTAT before and INFO
// commandstats after each batch; the table gives the median over rounds
// and, for every row, the median of the rounds' ratios to redis_rate and
// to the floor (floor.fcall, and floor.evalsha for the EVALSHA rows). A
// batch of a few thousand decisions takes a fraction of a second, so the
// contenders of a round see the same machine, which a run of whole
// benchmarks (BenchmarkRedis, seconds apart) does not give on a shared
// host. It runs with -redistime and prints a Markdown table on stdout.
func TestRedisServerTime(t *testing.T) {
	if !*rstEnabled {
		t.Skip("the interleaved Redis server-time comparison runs with -redistime (run-redis.sh)")
	}
	srv := startRedis(t)
	ctx := context.Background()
	impls := redisImpls()
	lims := make([]redisLimiter, len(impls))
	hooks := make([]*tripCounter, len(impls))
	for i, impl := range impls {
		c, h := countedClient(t, srv.addr)
		lims[i], hooks[i] = impl.build(t, c, redisHugeRate, *rstPeriod), h
		redisWarm(t, lims[i])
	}
	keys := make([]string, *rstBatch)
	for i := range keys {
		keys[i] = "st:" + strconv.Itoa(i)
	}
	us := make([][]float64, len(impls))
	for round := range *rstRounds {
		for j := range impls {
			i := (j + round) % len(impls)
			srv.resetStats(t)
			before := hooks[i].snap()
			for _, k := range keys {
				ok, err := lims[i].allow(ctx, k)
				if err != nil || !ok {
					t.Fatalf("%s: admitted %v, %v", impls[i].name, ok, err)
				}
			}
			sent := hooks[i].since(before)
			us[i] = append(us[i], serverUsec(srv.commandStats(t), sent.cmds)/float64(len(keys)))
		}
	}
	idx := func(name string) int {
		return slices.IndexFunc(impls, func(r redisImpl) bool { return r.name == name })
	}
	ref, ffc, fev := idx("redis_rate"), idx("floor.fcall"), idx("floor.evalsha")
	ratio := func(i, j int) (m, lo, hi float64) {
		var rs []float64
		for r := range us[i] {
			rs = append(rs, us[i][r]/us[j][r])
		}
		return median(rs), slices.Min(rs), slices.Max(rs)
	}
	w := os.Stdout
	fmt.Fprintf(w, "Redis server time per decision, µs (INFO commandstats), serial, distinct keys, limits of %d per %v: median of %d interleaved rounds of %d decisions; in parentheses the median of the rounds' ratios [lowest–highest].\n\n", redisHugeRate, *rstPeriod, *rstRounds, *rstBatch)
	fmt.Fprintln(w, "| implementation | µs per decision | ÷ redis_rate | ÷ floor.fcall | ÷ floor.evalsha |")
	fmt.Fprintln(w, "|---|--:|--:|--:|--:|")
	for i, impl := range impls {
		cols := fmt.Sprintf("| %s | %.2f |", impl.name, median(us[i]))
		for _, j := range []int{ref, ffc, fev} {
			if j < 0 || j == i {
				cols += " |"
				continue
			}
			m, lo, hi := ratio(i, j)
			cols += fmt.Sprintf(" %.2f× [%.2f–%.2f] |", m, lo, hi)
		}
		fmt.Fprintln(w, cols)
	}
}
