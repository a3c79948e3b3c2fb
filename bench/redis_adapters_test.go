package bench

// Adapters of the Redis rate-limit benchmark (redis_bench_test.go): sluice's
// redisstore and its Redis-backed peers, each behind the same small
// interface, on a go-redis client whose hook counts what is sent, and the
// server-side accounting (INFO commandstats) of one redis-server.

import (
	"bufio"
	"context"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/go-redis/redis_rate/v10"
	"github.com/redis/go-redis/v9"
	ulule "github.com/ulule/limiter/v3"
	ululeredis "github.com/ulule/limiter/v3/drivers/store/redis"

	"github.com/sluicehq/sluice/internal/redistest"
	"github.com/sluicehq/sluice/ratelimit"
	"github.com/sluicehq/sluice/ratelimit/redisstore"
)

// redisLimiter is one Redis-backed rate limiter: allow decides one request
// of cost 1 for key.
type redisLimiter interface {
	allow(ctx context.Context, key string) (bool, error)
}

// redisImpl names a Redis-backed limiter and builds it on a client with a
// limit of n per period, burst n.
type redisImpl struct {
	name  string
	build func(tb testing.TB, c *redis.Client, n int, per time.Duration) redisLimiter
}

// redisSluiceAlgorithms are the algorithms of sluice's store that the
// benchmark runs: all five (GCRA is redis_rate's algorithm).
var redisSluiceAlgorithms = []ratelimit.Algorithm{ratelimit.GCRA, ratelimit.TokenBucket, ratelimit.SlidingWindow, ratelimit.FixedWindow, ratelimit.SlidingLog}

// redisImpls returns the implementations in table order: sluice's first
// (on Redis 7 with FCALL; the ".evalsha" row forces scripts), then the
// floors, then the peers.
func redisImpls() []redisImpl {
	var impls []redisImpl
	for _, alg := range redisSluiceAlgorithms {
		impls = append(impls, redisImpl{
			name: "sluice." + alg.String(),
			build: func(tb testing.TB, c *redis.Client, n int, per time.Duration) redisLimiter {
				return newSluiceRedis(tb, c, alg, n, per)
			},
		})
	}
	impls = append(impls,
		redisImpl{name: "sluice.gcra.evalsha", build: func(tb testing.TB, c *redis.Client, n int, per time.Duration) redisLimiter {
			return newSluiceRedis(tb, c, ratelimit.GCRA, n, per, redisstore.WithoutFunctions(), redisstore.WithPrefix("evalsha:"))
		}},
		redisImpl{name: "sluice.gcra.legacy_ignore", build: func(tb testing.TB, c *redis.Client, n int, per time.Duration) redisLimiter {
			return newSluiceRedis(tb, c, ratelimit.GCRA, n, per, redisstore.WithLegacyState(redisstore.LegacyIgnore), redisstore.WithPrefix("ignore:"))
		}},
		redisImpl{name: "floor.fcall", build: func(tb testing.TB, c *redis.Client, _ int, _ time.Duration) redisLimiter {
			return newFloor(tb, c, true)
		}},
		redisImpl{name: "floor.evalsha", build: func(tb testing.TB, c *redis.Client, _ int, _ time.Duration) redisLimiter {
			return newFloor(tb, c, false)
		}},
		redisImpl{name: "redis_rate", build: func(_ testing.TB, c *redis.Client, n int, per time.Duration) redisLimiter {
			return newRedisRate(c, n, per)
		}},
		redisImpl{name: "ulule", build: newUluleRedis},
	)
	return impls
}

// ---- the floor: TIME, GET and SET PX on constant strings ----

// floorSource is the least a rate limit on Redis does per decision: read
// the server's clock, read the key's state, write it with an expiry; here
// on constant strings, with no arithmetic. Server time per decision of a
// limiter ÷ this one's is its overhead over the commands it cannot avoid.
const floorSource = `local t = redis.call('TIME')
redis.call('GET', KEYS[1])
redis.call('SET', KEYS[1], 'xxxxxxxxxxxxxxxx', 'PX', 60000)
return 1
`

// floor runs floorSource with FCALL (a library loaded when it is built)
// or EVALSHA.
type floor struct {
	c      *redis.Client
	fcall  bool
	script *redis.Script
}

func newFloor(tb testing.TB, c *redis.Client, fcall bool) floor {
	tb.Helper()
	f := floor{c: c, fcall: fcall, script: redis.NewScript(floorSource)}
	if fcall {
		lib := "#!lua name=benchfloor\nredis.register_function('benchfloor', function(KEYS, ARGV)\n" + floorSource + "end)\n"
		if err := c.FunctionLoadReplace(context.Background(), lib).Err(); err != nil {
			tb.Fatal(err)
		}
	}
	return f
}

func (f floor) allow(ctx context.Context, key string) (bool, error) {
	keys := []string{"floor:{" + key + "}"}
	if f.fcall {
		return true, f.c.FCall(ctx, "benchfloor", keys).Err()
	}
	return true, f.script.Run(ctx, f.c, keys).Err()
}

// ---- sluice: ratelimit.Limiter on redisstore ----

// sluiceRedis is ratelimit.New(alg, Limit{n, per}, WithStore(redisstore.New(c)))
// with the store's defaults: server time, the refusal cache on (1<<16 keys),
// FailClosed, 100 ms timeout, no Preload.
type sluiceRedis struct{ lim *ratelimit.Limiter }

func newSluiceRedis(tb testing.TB, c *redis.Client, alg ratelimit.Algorithm, n int, per time.Duration, opts ...redisstore.Option) sluiceRedis {
	tb.Helper()
	if alg == ratelimit.SlidingLog {
		n = min(n, ratelimit.MaxLogRate) // 65,536 per period: still far above what a cell reaches
	}
	store, err := redisstore.New(c, opts...)
	if err != nil {
		tb.Fatal(err)
	}
	lim, err := ratelimit.New(alg, ratelimit.Limit{Rate: n, Period: per}, ratelimit.WithStore(store))
	if err != nil {
		tb.Fatal(err)
	}
	return sluiceRedis{lim}
}

func (s sluiceRedis) allow(ctx context.Context, key string) (bool, error) {
	res, err := s.lim.Allow(ctx, key)
	return res.Allowed, err
}

// ---- go-redis/redis_rate v10: GCRA in one Lua script ----

// redisRate is redis_rate's Limiter.Allow with Limit{Rate: n, Burst: n,
// Period: per}.
type redisRate struct {
	l   *redis_rate.Limiter
	lim redis_rate.Limit
}

func newRedisRate(c *redis.Client, n int, per time.Duration) redisRate {
	return redisRate{redis_rate.NewLimiter(c), redis_rate.Limit{Rate: n, Burst: n, Period: per}}
}

func (r redisRate) allow(ctx context.Context, key string) (bool, error) {
	res, err := r.l.Allow(ctx, key, r.lim)
	if err != nil {
		return false, err
	}
	return res.Allowed > 0, nil
}

// ---- ulule/limiter v3, redis store: a fixed window in one Lua script ----

// ululeRedis is ulule's Limiter.Get on its Redis store (which loads its two
// scripts when it is built), Rate{Period: per, Limit: n}.
type ululeRedis struct{ l *ulule.Limiter }

func newUluleRedis(tb testing.TB, c *redis.Client, n int, per time.Duration) redisLimiter {
	tb.Helper()
	store, err := ululeredis.NewStoreWithOptions(c, ulule.StoreOptions{Prefix: ulule.DefaultPrefix})
	if err != nil {
		tb.Fatal(err)
	}
	return ululeRedis{ulule.New(store, ulule.Rate{Period: per, Limit: int64(n)})}
}

func (u ululeRedis) allow(ctx context.Context, key string) (bool, error) {
	lc, err := u.l.Get(ctx, key)
	if err != nil {
		return false, err
	}
	return !lc.Reached, nil
}

// ---- counting what a client sends ----

// tripCounter is a go-redis hook that counts round trips (a command, or a
// pipeline of commands, is one) and commands by name. go-redis runs the hook
// around its retries, so a retried command counts once. A new connection's
// handshake (a pipeline of HELLO and CLIENT SETINFO) also passes through the
// hook (HELLO alone, then CLIENT SETINFO pipelined); it is counted apart,
// in handshakes, not as a round trip of a decision.
type tripCounter struct {
	trips      atomic.Int64
	handshakes atomic.Int64
	mu         sync.Mutex
	cmds       map[string]int64
}

// handshake reports whether cmds is a new connection's set-up.
func handshake(cmds []redis.Cmder) bool {
	for _, c := range cmds {
		switch c.Name() {
		case "hello", "client", "auth", "select", "readonly":
		default:
			return false
		}
	}
	return len(cmds) > 0
}

func (h *tripCounter) note(cmd redis.Cmder) {
	name := cmd.Name()
	h.mu.Lock()
	if h.cmds == nil {
		h.cmds = map[string]int64{}
	}
	h.cmds[name]++
	h.mu.Unlock()
}

func (h *tripCounter) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *tripCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if handshake([]redis.Cmder{cmd}) {
			h.handshakes.Add(1)
			return next(ctx, cmd)
		}
		h.trips.Add(1)
		h.note(cmd)
		return next(ctx, cmd)
	}
}

func (h *tripCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		if handshake(cmds) {
			h.handshakes.Add(1)
			return next(ctx, cmds)
		}
		h.trips.Add(1)
		for _, c := range cmds {
			h.note(c)
		}
		return next(ctx, cmds)
	}
}

// tripSnap is a tripCounter's counts at one instant.
type tripSnap struct {
	trips int64
	cmds  map[string]int64
}

func (h *tripCounter) snap() tripSnap {
	h.mu.Lock()
	defer h.mu.Unlock()
	s := tripSnap{trips: h.trips.Load(), cmds: make(map[string]int64, len(h.cmds))}
	for k, v := range h.cmds {
		s.cmds[k] = v
	}
	return s
}

// since returns the counts from s to now.
func (h *tripCounter) since(s tripSnap) tripSnap {
	now := h.snap()
	now.trips -= s.trips
	for k, v := range s.cmds {
		now.cmds[k] -= v
		if now.cmds[k] == 0 {
			delete(now.cmds, k)
		}
	}
	return now
}

// redisPoolSize is every client's connection pool: one connection for
// each of the 64 goroutines of the parallel runs.
const redisPoolSize = 64

// countedClient returns a client of addr with its own tripCounter.
func countedClient(tb testing.TB, addr string) (*redis.Client, *tripCounter) {
	tb.Helper()
	c := redis.NewClient(&redis.Options{Addr: addr, PoolSize: redisPoolSize, ContextTimeoutEnabled: true})
	tb.Cleanup(func() { c.Close() })
	h := &tripCounter{}
	c.AddHook(h)
	return c, h
}

// ---- the server ----

// redisServer is a redis-server of the test's own with an uncounted admin
// client, for SCRIPT FLUSH, CONFIG RESETSTAT and INFO.
type redisServer struct {
	addr  string
	admin *redis.Client
}

func startRedis(tb testing.TB) *redisServer {
	tb.Helper()
	srv := redistest.Start(tb)
	admin := redis.NewClient(&redis.Options{Addr: srv.Addr})
	tb.Cleanup(func() { admin.Close() })
	return &redisServer{addr: srv.Addr, admin: admin}
}

func (s *redisServer) scriptFlush(tb testing.TB) {
	tb.Helper()
	if err := s.admin.ScriptFlush(context.Background()).Err(); err != nil {
		tb.Fatal(err)
	}
}

func (s *redisServer) resetStats(tb testing.TB) {
	tb.Helper()
	if err := s.admin.ConfigResetStat(context.Background()).Err(); err != nil {
		tb.Fatal(err)
	}
}

// cpuSeconds returns the server process's CPU time so far (INFO cpu:
// used_cpu_user + used_cpu_sys, main thread and I/O alike).
func (s *redisServer) cpuSeconds(tb testing.TB) float64 {
	tb.Helper()
	info, err := s.admin.Info(context.Background(), "cpu").Result()
	if err != nil {
		tb.Fatal(err)
	}
	var sum float64
	for line := range strings.Lines(info) {
		k, v, _ := strings.Cut(strings.TrimSpace(line), ":")
		if k == "used_cpu_user" || k == "used_cpu_sys" {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				tb.Fatalf("INFO cpu: %q: %v", line, err)
			}
			sum += f
		}
	}
	return sum
}

// processCPU returns this process's CPU time so far (user + system).
func processCPU(tb testing.TB) time.Duration {
	tb.Helper()
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		tb.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// cmdStat is one line of INFO commandstats.
type cmdStat struct {
	calls int64
	usec  float64
}

// commandStats returns INFO commandstats by command name ("evalsha",
// "script|load").
func (s *redisServer) commandStats(tb testing.TB) map[string]cmdStat {
	tb.Helper()
	info, err := s.admin.Info(context.Background(), "commandstats").Result()
	if err != nil {
		tb.Fatal(err)
	}
	return parseCommandStats(info)
}

// parseCommandStats parses lines such as
//
//	cmdstat_evalsha:calls=5,usec=61,usec_per_call=12.20,rejected_calls=0,failed_calls=0
func parseCommandStats(info string) map[string]cmdStat {
	stats := map[string]cmdStat{}
	sc := bufio.NewScanner(strings.NewReader(info))
	for sc.Scan() {
		name, fields, ok := strings.Cut(strings.TrimSpace(sc.Text()), ":")
		if !ok || !strings.HasPrefix(name, "cmdstat_") {
			continue
		}
		var st cmdStat
		for f := range strings.SplitSeq(fields, ",") {
			k, v, _ := strings.Cut(f, "=")
			switch k {
			case "calls":
				st.calls, _ = strconv.ParseInt(v, 10, 64)
			case "usec":
				st.usec, _ = strconv.ParseFloat(v, 64)
			}
		}
		stats[strings.TrimPrefix(name, "cmdstat_")] = st
	}
	return stats
}

// serverUsec returns the server's execution time (µs, INFO commandstats'
// usec) of the commands a client sent, by the names its hook saw. A command
// a script calls is in commandstats under its own name too and inside the
// script's time: only the names the client sent count, so nothing is
// counted twice (none of the adapters sends directly a command its script
// also calls).
func serverUsec(stats map[string]cmdStat, sent map[string]int64) float64 {
	var usec float64
	for name, st := range stats {
		base, _, _ := strings.Cut(name, "|") // "script|load" was sent as "script"
		if sent[base] > 0 {
			usec += st.usec
		}
	}
	return usec
}

// innerUsec returns the server's time of the commands the client did not
// send (those its scripts called), less the admin client's own (INFO, CONFIG).
func innerUsec(stats map[string]cmdStat, sent map[string]int64) float64 {
	var usec float64
	for name, st := range stats {
		base, _, _ := strings.Cut(name, "|")
		if sent[base] == 0 && base != "info" && base != "config" {
			usec += st.usec
		}
	}
	return usec
}
