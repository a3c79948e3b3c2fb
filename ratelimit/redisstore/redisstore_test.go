package redisstore_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/sluicehq/sluice/clock"
	"github.com/sluicehq/sluice/internal/redistest"
	"github.com/sluicehq/sluice/metrics"
	"github.com/sluicehq/sluice/ratelimit"
	"github.com/sluicehq/sluice/ratelimit/ratelimittest"
	"github.com/sluicehq/sluice/ratelimit/redisstore"
)

var algs = []ratelimit.Algorithm{ratelimit.FixedWindow, ratelimit.SlidingLog, ratelimit.SlidingWindow, ratelimit.TokenBucket, ratelimit.GCRA}

// client returns a client of the redis-server at addr whose own timeouts are
// generous: no test may depend on a wall-clock bound being met on a busy
// machine (the tests run under -race while other packages' tests take the
// cores). Tests of the fault paths stop the server instead.
func client(t *testing.T, addr string) *redis.Client {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, DialTimeout: 10 * time.Second,
		ReadTimeout: 30 * time.Second, WriteTimeout: 30 * time.Second, ContextTimeoutEnabled: true})
	t.Cleanup(func() { c.Close() })
	return c
}

// generous is the store timeout of the tests, where Redis is expected to
// answer: a decision of a live Redis must never be decided by the failure
// policy because the machine is slow.
const generous = 30 * time.Second

// newStore returns a store on c with the generous timeout, then opts.
func newStore(t *testing.T, c redis.UniversalClient, opts ...redisstore.Option) *redisstore.Store {
	t.Helper()
	s, err := redisstore.New(c, append([]redisstore.Option{redisstore.WithTimeout(generous)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestConformance replays ratelimittest's random traces through Redis and
// through the in-memory store: the same decisions, times rounded up to the
// microsecond.
func TestConformance(t *testing.T) {
	srv := redistest.Start(t)
	c := client(t, srv.Addr)
	s := newStore(t, c, redisstore.WithCallerTime(), redisstore.WithRefusalCache(0))
	if err := s.Preload(context.Background()); err != nil {
		t.Fatal(err)
	}
	ratelimittest.RunResolution(t, func(*testing.T) ratelimit.Store { return s }, time.Microsecond)
}

// TestHotKey: 64 goroutines on two limiters (two stores, two clients, as
// two processes would be) share one Redis and one key whose quota is 100 in
// a long window: exactly 100 admitted, no errors, for every algorithm.
func TestHotKey(t *testing.T) {
	srv := redistest.Start(t)
	for _, alg := range algs {
		t.Run(alg.String(), func(t *testing.T) {
			var lims [2]*ratelimit.Limiter
			for i := range lims {
				s := newStore(t, client(t, srv.Addr))
				l, err := ratelimit.New(alg, ratelimit.Limit{Rate: 100, Period: time.Hour}, ratelimit.WithStore(s))
				if err != nil {
					t.Fatal(err)
				}
				lims[i] = l
			}
			var admitted, errs atomic.Int64
			var wg sync.WaitGroup
			for g := range 64 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for range 10 {
						res, err := lims[g%2].Allow(context.Background(), "hot")
						if err != nil {
							errs.Add(1)
						} else if res.Allowed {
							admitted.Add(1)
						}
					}
				}()
			}
			wg.Wait()
			if admitted.Load() != 100 || errs.Load() != 0 {
				t.Fatalf("admitted %d with %d errors, want exactly 100 and 0", admitted.Load(), errs.Load())
			}
		})
	}
}

// TestMultiPolicy: 3 per second and 5 per hour on one key, all or nothing,
// in one round trip; a refusal of either spends nothing of the other.
func TestMultiPolicy(t *testing.T) {
	srv := redistest.Start(t)
	s := newStore(t, client(t, srv.Addr), redisstore.WithCallerTime())
	clk := clock.NewManual(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
	perSec, err := ratelimit.New(ratelimit.GCRA, ratelimit.Limit{Rate: 3, Period: time.Second}, ratelimit.WithStore(s), ratelimit.WithClock(clk))
	if err != nil {
		t.Fatal(err)
	}
	perHour, err := ratelimit.New(ratelimit.FixedWindow, ratelimit.Limit{Rate: 5, Period: time.Hour}, ratelimit.WithStore(s), ratelimit.WithClock(clk))
	if err != nil {
		t.Fatal(err)
	}
	tiers, err := ratelimit.All(perSec, perHour)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	var got []bool
	for range 4 { // the 4th is refused by 3/s: the hourly count must not move
		res, err := tiers.Allow(ctx, "k", "k")
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, res.Allowed)
	}
	clk.Advance(time.Second)
	for range 3 { // 2 more fit the hour, the 3rd does not
		res, err := tiers.Allow(ctx, "k", "k")
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, res.Allowed)
	}
	if want := "[true true true false true true false]"; fmt.Sprint(got) != want {
		t.Fatalf("decisions %v, want %v", got, want)
	}
	res, err := perSec.Allow(ctx, "k") // the hourly refusal spent nothing of 3/s
	if err != nil || !res.Allowed || res.Remaining != 0 {
		t.Fatalf("3/s after the refused batch: %+v %v, want admitted with 0 remaining", res, err)
	}
}

// TestFailurePolicies kills Redis under load and starts it again. With
// Redis gone every policy decides at once — the refused connection opens
// the breaker and cancels the calls in flight, well before the store's
// (generous) timeout — with a nil error and the Source saying who decided;
// after the restart decisions come from Redis again. The figures are
// logged: the first decision after the kill, the decisions of the load
// goroutines while Redis was down (p50, p99, max: on a busy machine the
// tail is scheduling), and the time from the restart to the first decision
// on Redis (the breaker's cool-down, 100ms here, plus up to a second when
// go-redis paces its redials; see failfast.go). Only generous bounds are
// asserted.
func TestFailurePolicies(t *testing.T) {
	srv := redistest.Start(t)
	type setup struct {
		policy redisstore.FailurePolicy
		src    ratelimit.Source
		store  *redisstore.Store
		lim    *ratelimit.Limiter
		fails  *atomic.Int64
	}
	var setups []setup
	for _, fp := range []redisstore.FailurePolicy{redisstore.FailClosed, redisstore.FailOpen, redisstore.FailLocal} {
		fails := new(atomic.Int64)
		// The client keeps go-redis's default retries and dial retries,
		// which are what made a refused connection wait out the timeout.
		c := redis.NewClient(&redis.Options{Addr: srv.Addr, ContextTimeoutEnabled: true})
		t.Cleanup(func() { c.Close() })
		s := newStore(t, c, redisstore.WithFailurePolicy(fp), redisstore.WithTimeout(10*time.Second),
			redisstore.WithBreaker(3, 100*time.Millisecond), redisstore.WithErrorHandler(func(error) { fails.Add(1) }))
		l, err := ratelimit.New(ratelimit.TokenBucket, ratelimit.Limit{Rate: 1000, Period: time.Second}, ratelimit.WithStore(s))
		if err != nil {
			t.Fatal(err)
		}
		src := map[redisstore.FailurePolicy]ratelimit.Source{redisstore.FailClosed: ratelimit.SourceFailClosed,
			redisstore.FailOpen: ratelimit.SourceFailOpen, redisstore.FailLocal: ratelimit.SourceFailLocal}[fp]
		setups = append(setups, setup{fp, src, s, l, fails})
	}
	ctx := context.Background()
	for _, su := range setups {
		if res, err := su.lim.Allow(ctx, "f"); err != nil || !res.Allowed || res.Source != ratelimit.SourceLimit {
			t.Fatalf("%v before the kill: %+v %v", su.policy, res, err)
		}
	}
	// Load from 6 goroutines while Redis dies; each records how long its
	// decisions took while Redis was down.
	var down atomic.Bool
	stop := make(chan struct{})
	var wg sync.WaitGroup
	lat := make([][]time.Duration, 6)
	var errs atomic.Int64
	for g := range 6 {
		wg.Go(func() {
			su := setups[g%len(setups)]
			for {
				select {
				case <-stop:
					return
				default:
				}
				start := time.Now()
				_, err := su.lim.Allow(ctx, fmt.Sprint("load", g))
				took := time.Since(start)
				if err != nil {
					errs.Add(1)
				}
				if down.Load() {
					lat[g] = append(lat[g], took)
				}
				runtime.Gosched()
			}
		})
	}
	srv.Kill()
	down.Store(true)
	for _, su := range setups {
		start := time.Now()
		res, err := su.lim.Allow(ctx, "f")
		took := time.Since(start)
		if err != nil || !res.Decided() || !res.Degraded() || res.Source != su.src {
			t.Fatalf("%v with Redis dead: %+v %v, want a %v decision and no error", su.policy, res, err, su.src)
		}
		switch su.policy {
		case redisstore.FailClosed:
			if res.Allowed || res.RetryAfter != 100*time.Millisecond {
				t.Errorf("fail closed: %+v, want a refusal with the cool-down as RetryAfter", res)
			}
		case redisstore.FailOpen, redisstore.FailLocal:
			if !res.Allowed {
				t.Errorf("%v refused: %+v", su.policy, res)
			}
		}
		// The cause is the refused connection, or, if this call's retries
		// all met connections the dead server had closed, their EOF.
		if err := su.store.LastError(); !errors.Is(err, ratelimit.ErrDegraded) ||
			!errors.Is(err, syscall.ECONNREFUSED) && !errors.Is(err, io.EOF) && !errors.Is(err, syscall.ECONNRESET) {
			t.Errorf("%v: LastError %v, want ErrDegraded and the refused or closed connection", su.policy, err)
		}
		t.Logf("%v: first decision after the kill took %v", su.policy, took)
		if took > 5*time.Second { // half the timeout: generous slack, not a latency target
			t.Errorf("%v: a decision with Redis refusing took %v: the refusal did not end the call", su.policy, took)
		}
	}
	srv.Restart()
	down.Store(false)
	start := time.Now()
	for _, su := range setups {
		for {
			res, err := su.lim.Allow(ctx, "f")
			if err != nil {
				t.Fatal(err)
			}
			if res.Source == ratelimit.SourceLimit {
				break
			}
			if time.Since(start) > 30*time.Second {
				t.Fatalf("%v: no decision on Redis within 30s of the restart: %+v", su.policy, res)
			}
			time.Sleep(time.Millisecond) // polling for the recovery, not timing it
		}
		t.Logf("%v: decisions back on Redis %v after the restart", su.policy, time.Since(start))
	}
	close(stop)
	wg.Wait()
	var all []time.Duration
	for _, l := range lat {
		all = append(all, l...)
	}
	if len(all) > 0 {
		slices.Sort(all)
		t.Logf("%d decisions while Redis was down: p50 %v, p99 %v, max %v", len(all), all[len(all)/2], all[len(all)*99/100], all[len(all)-1])
		if all[len(all)-1] > 5*time.Second {
			t.Errorf("a decision took %v while Redis was down", all[len(all)-1])
		}
	}
	if errs.Load() > 0 {
		t.Errorf("%d decisions came with an error", errs.Load())
	}
	for _, su := range setups {
		if su.fails.Load() == 0 {
			t.Errorf("%v: the error handler saw no failure", su.policy)
		}
	}
}

// TestBreakerSkipsRedis: with the breaker open, a decision is made without
// a network call (microseconds, not the timeout).
func TestBreakerSkipsRedis(t *testing.T) {
	srv := redistest.Start(t)
	c := client(t, srv.Addr)
	var calls atomic.Int64
	c.AddHook(countHook{&calls})
	s := newStore(t, c, redisstore.WithBreaker(2, time.Hour))
	obs := &degradedObserver{}
	l, err := ratelimit.New(ratelimit.GCRA, ratelimit.Limit{Rate: 10, Period: time.Second}, ratelimit.WithStore(s), ratelimit.WithObserver(obs))
	if err != nil {
		t.Fatal(err)
	}
	srv.Kill()
	ctx := context.Background()
	for range 2 {
		l.Allow(ctx, "b")
	}
	before := calls.Load()
	for range 1000 {
		if res, err := l.Allow(ctx, "b"); err != nil || res.Source != ratelimit.SourceFailClosed {
			t.Fatalf("%+v %v, want a FailClosed decision", res, err)
		}
	}
	if err := s.LastError(); !errors.Is(err, redisstore.ErrBreakerOpen) || !errors.Is(err, ratelimit.ErrDegraded) {
		t.Fatalf("LastError %v, want ErrDegraded and ErrBreakerOpen", err)
	}
	if n := calls.Load() - before; n != 0 {
		t.Fatalf("%d Redis calls with the breaker open, want 0", n)
	}
	if n := obs.degraded.Load(); n != 1002 {
		t.Fatalf("the observer counted %d degraded decisions, want 1002", n)
	}
}

// degradedObserver counts the decisions a failure policy made.
type degradedObserver struct {
	metrics.RateBase
	degraded atomic.Int64
}

func (o *degradedObserver) RateDecision(_ string, d metrics.RateDecision) {
	if d.Degraded {
		o.degraded.Add(1)
	}
}

// TestRefusalCache: a flood from one key over its limit reaches Redis once
// per retry time, not once per request, and is refused as Redis refuses it.
func TestRefusalCache(t *testing.T) {
	srv := redistest.Start(t)
	c := client(t, srv.Addr)
	var calls atomic.Int64
	c.AddHook(countHook{&calls})
	s := newStore(t, c, redisstore.WithCallerTime())
	clk := clock.NewManual(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
	l, err := ratelimit.New(ratelimit.GCRA, ratelimit.Limit{Rate: 10, Period: time.Second}, ratelimit.WithStore(s), ratelimit.WithClock(clk))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := s.Preload(ctx); err != nil {
		t.Fatal(err)
	}
	calls.Store(0) // count decisions only, not connection setup
	admitted := 0
	for range 1000 {
		res, err := l.Allow(ctx, "abuser")
		if err != nil {
			t.Fatal(err)
		}
		if res.Allowed {
			admitted++
		} else if res.RetryAfter <= 0 || res.RetryAfter > 100*time.Millisecond {
			t.Fatalf("refusal with RetryAfter %v", res.RetryAfter)
		}
	}
	if admitted != 10 || calls.Load() != 11 {
		t.Fatalf("admitted %d with %d Redis calls, want 10 admitted and 11 calls", admitted, calls.Load())
	}
	clk.Advance(100 * time.Millisecond) // one token back: Redis is asked again
	res, err := l.Allow(ctx, "abuser")
	if err != nil || !res.Allowed || calls.Load() != 12 {
		t.Fatalf("after the retry time: %+v %v, %d calls", res, err, calls.Load())
	}
}

// TestKeys: a key with a hash tag or odd bytes cannot pick the slot or
// lengthen the Redis key; readable keys stay readable.
func TestKeys(t *testing.T) {
	srv := redistest.Start(t)
	c := client(t, srv.Addr)
	s := newStore(t, c, redisstore.WithPrefix("t:"))
	ctx := context.Background()
	for _, key := range []string{"user:42", "{evil}", strings.Repeat("x", 60000), "ünï"} {
		l, err := ratelimit.New(ratelimit.FixedWindow, ratelimit.Limit{Rate: 5, Period: time.Hour}, ratelimit.WithStore(s), ratelimit.WithMaxKeyLen(1<<16))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := l.Allow(ctx, key); err != nil {
			t.Fatal(err)
		}
	}
	keys, err := c.Keys(ctx, "t:*").Result()
	if err != nil {
		t.Fatal(err)
	}
	if len(keys) != 4 {
		t.Fatalf("keys %q, want 4", keys)
	}
	for _, k := range keys {
		if len(k) > 80 || strings.Count(k, "{") != 1 || strings.Count(k, "}") != 1 {
			t.Errorf("redis key %q: want one short hash tag", k)
		}
		ttl, _ := c.PTTL(ctx, k).Result()
		if ttl <= 0 || ttl > time.Hour+time.Second {
			t.Errorf("key %q has TTL %v, want the window's rest", k, ttl)
		}
	}
	if !contains(keys, "t:{user:42}:fw2:5:3600000000:5") {
		t.Errorf("keys %q: want t:{user:42}:fw2:5:3600000000:5", keys)
	}
}

func contains(xs []string, x string) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}

// TestUnsupported: policies the scripts cannot decide exactly are refused
// with ErrUnsupportedPolicy, never decided.
func TestUnsupported(t *testing.T) {
	c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", ContextTimeoutEnabled: true})
	defer c.Close()
	s, err := redisstore.New(c)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		alg ratelimit.Algorithm
		lim ratelimit.Limit
	}{
		{ratelimit.GCRA, ratelimit.Limit{Rate: 10, Period: time.Second + time.Nanosecond}},
		{ratelimit.TokenBucket, ratelimit.Limit{Rate: 99991, Period: time.Hour}},
		{ratelimit.SlidingWindow, ratelimit.Limit{Rate: 1 << 31, Period: 24 * time.Hour}},
	} {
		p, err := ratelimit.NewPolicy(tc.alg, tc.lim)
		if err != nil {
			t.Fatal(err)
		}
		reqs := []ratelimit.Request{{Key: "k", Policy: &p, N: 1}}
		if err := s.Apply(context.Background(), time.Now(), reqs); !errors.Is(err, redisstore.ErrUnsupportedPolicy) {
			t.Errorf("%v: err %v, want ErrUnsupportedPolicy", p, err)
		}
	}
}

func TestOptionsValidated(t *testing.T) {
	c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", ContextTimeoutEnabled: true})
	defer c.Close()
	_, err := redisstore.New(c, redisstore.WithPrefix("a{b"), redisstore.WithTimeout(-1), redisstore.WithBreaker(-1, 0),
		redisstore.WithFailurePolicy(9), redisstore.WithRefusalCache(-1), redisstore.WithHashTag(nil), redisstore.WithErrorHandler(nil),
		redisstore.WithLocalMaxKeys(0), redisstore.WithLegacyState(7))
	if err == nil {
		t.Fatal("invalid options accepted")
	}
	for _, want := range []string{"prefix", "timeout", "breaker", "failure policy", "refusal cache", "WithHashTag", "WithErrorHandler", "local max keys", "legacy state"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}
	if _, err := redisstore.New(nil); err == nil {
		t.Error("nil client accepted")
	}
}

// countHook counts the commands sent to Redis (a pipeline counts as one).
type countHook struct{ n *atomic.Int64 }

func (h countHook) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h countHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error { h.n.Add(1); return next(ctx, cmd) }
}
func (h countHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error { h.n.Add(1); return next(ctx, cmds) }
}

// TestRefusalCacheDecides: along random traffic on a few keys, a store with
// the refusal cache admits and refuses exactly what one without it does, and
// its RetryAfter is never later than Redis's.
func TestRefusalCacheDecides(t *testing.T) {
	srv := redistest.Start(t)
	c := client(t, srv.Addr)
	clk := clock.NewManual(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
	for _, alg := range algs {
		var lims [2]*ratelimit.Limiter
		for i, cache := range []int{1 << 10, 0} {
			s := newStore(t, c, redisstore.WithCallerTime(), redisstore.WithRefusalCache(cache), redisstore.WithPrefix(fmt.Sprintf("rc%d:", i)))
			l, err := ratelimit.New(alg, ratelimit.Limit{Rate: 20, Period: time.Second}, ratelimit.WithStore(s), ratelimit.WithClock(clk))
			if err != nil {
				t.Fatal(err)
			}
			lims[i] = l
		}
		r := rand.New(rand.NewPCG(uint64(alg), 1))
		ctx := context.Background()
		local := 0
		for step := range 2000 {
			clk.Advance(time.Duration(r.IntN(5000)) * time.Microsecond)
			key, n := fmt.Sprint("k", r.IntN(3)), 1+r.IntN(3)
			a, err1 := lims[0].AllowN(ctx, key, n)
			b, err2 := lims[1].AllowN(ctx, key, n)
			if err1 != nil || err2 != nil {
				t.Fatal(err1, err2)
			}
			if a.Allowed != b.Allowed || a.RetryAfter != b.RetryAfter || a.Remaining > b.Remaining {
				t.Fatalf("%v step %d: cached %+v, Redis %+v", alg, step, a, b)
			}
			if !a.Allowed && a.Remaining < b.Remaining {
				local++
			}
		}
		t.Logf("%v: %d refusals answered locally with Remaining 0", alg, local)
	}
}

// TestConcurrency: at most Max leases per key across two stores; a released
// lease frees its slot, renew extends, a crashed holder's lease expires.
// The leases that must stay held last a minute, so that no stall of a busy
// machine can expire them mid-test; those that must expire last 50ms, and
// the test waits for Redis's clock to pass them with a generous deadline.
func TestConcurrency(t *testing.T) {
	srv := redistest.Start(t)
	ctx := context.Background()
	var ccs [2]*redisstore.Concurrency
	for i := range ccs {
		cc, err := redisstore.NewConcurrency(newStore(t, client(t, srv.Addr)), 3, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		ccs[i] = cc
	}
	var leases []redisstore.Lease
	for i := range 4 {
		l, res, err := ccs[i%2].Acquire(ctx, "tenant")
		if err != nil {
			t.Fatal(err)
		}
		if res.Allowed != (i < 3) || res.Limit != 3 || res.Source != ratelimit.SourceLimit {
			t.Fatalf("acquire %d: %+v", i, res)
		}
		if res.Allowed {
			leases = append(leases, l)
		} else if res.RetryAfter <= 0 || res.RetryAfter > time.Minute {
			t.Fatalf("refusal RetryAfter %v", res.RetryAfter)
		}
	}
	if n, err := ccs[0].InFlight(ctx, "tenant"); err != nil || n != 3 {
		t.Fatalf("in flight %d %v, want 3", n, err)
	}
	if ok, err := leases[0].Release(ctx); !ok || err != nil {
		t.Fatalf("release: %v %v", ok, err)
	}
	if ok, _ := leases[0].Release(ctx); ok {
		t.Fatal("released twice")
	}
	if _, res, _ := ccs[1].Acquire(ctx, "tenant"); !res.Allowed {
		t.Fatalf("after a release: %+v", res)
	}
	if ok, err := leases[1].Renew(ctx); !ok || err != nil {
		t.Fatalf("renew: %v %v", ok, err)
	}

	// Holders of 50ms leases "crash": their leases expire on the server's
	// clock, and their slots come back.
	short, err := redisstore.NewConcurrency(newStore(t, client(t, srv.Addr)), 2, 50*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	var crashed []redisstore.Lease
	for range 2 {
		l, res, err := short.Acquire(ctx, "crashy")
		if err != nil || !res.Allowed {
			t.Fatalf("short lease: %+v %v", res, err)
		}
		crashed = append(crashed, l)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		n, err := short.InFlight(ctx, "crashy")
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d leases still held long after expiry", n)
		}
		time.Sleep(10 * time.Millisecond) // waiting for Redis's clock, which a test cannot drive
	}
	if ok, _ := crashed[0].Renew(ctx); ok {
		t.Fatal("renewed an expired lease")
	}
	for range 2 {
		if _, res, _ := short.Acquire(ctx, "crashy"); !res.Allowed {
			t.Fatalf("after expiry: %+v", res)
		}
	}
	if _, err := redisstore.NewConcurrency(nil, 0, 0); err == nil || !strings.Contains(err.Error(), "lease") {
		t.Fatalf("bad arguments: %v", err)
	}
}

// dialCount counts a client's dial attempts.
type dialCount struct{ n *atomic.Int64 }

func (h dialCount) DialHook(next redis.DialHook) redis.DialHook {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		h.n.Add(1)
		return next(ctx, network, addr)
	}
}
func (h dialCount) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }
func (h dialCount) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// TestRecoveryWhenGoRedisPacesRedials: after PoolSize failed dials a
// go-redis pool stops dialing and answers every call with its last dial
// error, until a background redial — one a second — succeeds. Decisions
// then come back to Redis within about a second and a breaker cool-down of
// the restart (logged; only a generous bound is asserted). The test drives
// the pool into that state first: a tiny pool, one dial attempt per
// sequence.
func TestRecoveryWhenGoRedisPacesRedials(t *testing.T) {
	srv := redistest.Start(t)
	var dials atomic.Int64
	c := redis.NewClient(&redis.Options{Addr: srv.Addr, PoolSize: 2, DialerRetries: 1, MaxRetries: -1,
		DialTimeout: 10 * time.Second, ReadTimeout: 30 * time.Second, WriteTimeout: 30 * time.Second, ContextTimeoutEnabled: true})
	t.Cleanup(func() { c.Close() })
	c.AddHook(dialCount{&dials})
	s := newStore(t, c, redisstore.WithBreaker(3, 100*time.Millisecond))
	l, err := ratelimit.New(ratelimit.GCRA, ratelimit.Limit{Rate: 1000, Period: time.Second}, ratelimit.WithStore(s))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if res, err := l.Allow(ctx, "k"); err != nil || res.Source != ratelimit.SourceLimit {
		t.Fatalf("before the kill: %+v %v", res, err)
	}
	srv.Kill()
	if res, err := l.Allow(ctx, "k"); err != nil || res.Source != ratelimit.SourceFailClosed {
		t.Fatalf("after the kill: %+v %v", res, err)
	}
	paced := false
	for range 1000 { // a failed PING per round: the pool gives up after 2
		before := dials.Load()
		err := c.Ping(ctx).Err()
		if err != nil && dials.Load() == before && errors.Is(err, syscall.ECONNREFUSED) {
			paced = true // refused without a dial: the pool is pacing its redials
			break
		}
	}
	if !paced {
		t.Fatal("the pool never stopped dialing")
	}
	srv.Restart()
	start := time.Now()
	for {
		res, err := l.Allow(ctx, "k")
		if err != nil {
			t.Fatal(err)
		}
		if res.Source == ratelimit.SourceLimit {
			break
		}
		if time.Since(start) > 30*time.Second {
			t.Fatalf("no decision on Redis within 30s of the restart: %+v", res)
		}
		time.Sleep(time.Millisecond) // polling for the recovery, not timing it
	}
	t.Logf("with go-redis pacing its redials, decisions back on Redis %v after the restart (cool-down 100ms)", time.Since(start))
}
