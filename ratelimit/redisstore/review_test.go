package redisstore_test

import (
	"context"
	"errors"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/sluicehq/sluice/clock"
	"github.com/sluicehq/sluice/internal/redistest"
	"github.com/sluicehq/sluice/ratelimit"
	"github.com/sluicehq/sluice/ratelimit/redisstore"
)

// silentServer accepts connections and never answers: a Redis that hangs
// (stopped, partitioned, stuck in a slow script).
func silentServer(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var (
		mu    sync.Mutex
		conns []net.Conn
		wg    sync.WaitGroup
	)
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		wg.Wait()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
	})
	return ln.Addr().String()
}

// TestTimeoutOnHungRedis: a Redis that accepts but never answers is a
// failure when the store's timeout ends the call, not the client's own read
// timeout (a minute here: only the store's timeout can end the call before
// the test's own deadline); and New refuses a client that would ignore the
// timeout. What is checked is the cause, not the elapsed time, which is
// logged.
func TestTimeoutOnHungRedis(t *testing.T) {
	addr := silentServer(t)
	deaf := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})
	defer deaf.Close()
	if _, err := redisstore.New(deaf); err == nil || !strings.Contains(err.Error(), "ContextTimeoutEnabled") {
		t.Fatalf("New with a client that ignores context deadlines: err %v, want one naming ContextTimeoutEnabled", err)
	}
	if _, err := redisstore.New(deaf, redisstore.WithTimeout(0)); err != nil {
		t.Fatalf("New with WithTimeout(0): %v", err)
	}

	c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, ReadTimeout: time.Minute, WriteTimeout: time.Minute, ContextTimeoutEnabled: true})
	defer c.Close()
	s := newStore(t, c, redisstore.WithTimeout(50*time.Millisecond), redisstore.WithBreaker(0, 0))
	l, err := ratelimit.New(ratelimit.GCRA, ratelimit.Limit{Rate: 5, Period: time.Second}, ratelimit.WithStore(s))
	if err != nil {
		t.Fatal(err)
	}
	cc, err := redisstore.NewConcurrency(s, 1, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	start := time.Now()
	res, err := l.Allow(ctx, "k")
	t.Logf("Allow on a hung Redis took %v (timeout 50ms)", time.Since(start))
	if err != nil || res.Allowed || res.Source != ratelimit.SourceFailClosed {
		t.Errorf("Allow on a hung Redis: %+v %v, want a FailClosed refusal", res, err)
	}
	if err := s.LastError(); !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "timeout (50ms)") {
		t.Errorf("LastError %v, want the store's 50ms deadline", err)
	}
	start = time.Now()
	_, res, err = cc.Acquire(ctx, "k")
	t.Logf("Acquire on a hung Redis took %v (timeout 50ms)", time.Since(start))
	if err != nil || res.Allowed || res.Source != ratelimit.SourceFailClosed {
		t.Errorf("Acquire on a hung Redis: %+v %v, want a FailClosed refusal", res, err)
	}
	if err := s.LastError(); !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "timeout (50ms)") {
		t.Errorf("LastError %v, want the store's 50ms deadline", err)
	}
}

// TestSlidingLogLargeCost: a SlidingLog request of thousands of units is
// one script call (Lua's unpack takes only a few thousand values, so the
// members are added in chunks), and every unit is counted.
func TestSlidingLogLargeCost(t *testing.T) {
	srv := redistest.Start(t)
	c := client(t, srv.Addr)
	s := newStore(t, c, redisstore.WithCallerTime(), redisstore.WithPrefix("big:"))
	clk := clock.NewManual(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
	l, err := ratelimit.New(ratelimit.SlidingLog, ratelimit.Limit{Rate: 20000, Period: time.Hour},
		ratelimit.WithStore(s), ratelimit.WithClock(clk))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for i, tc := range []struct {
		n       int
		allowed bool
		rem     int
	}{{10000, true, 10000}, {10001, false, 10000}, {9999, true, 1}, {2, false, 1}, {1, true, 0}} {
		clk.Advance(time.Microsecond)
		res, err := l.AllowN(ctx, "k", tc.n)
		if err != nil || res.Allowed != tc.allowed || res.Remaining != tc.rem {
			t.Fatalf("request %d (n %d): %+v %v, want allowed %v remaining %d", i, tc.n, res, err, tc.allowed, tc.rem)
		}
	}
	keys, _ := c.Keys(ctx, "big:*").Result()
	if len(keys) != 1 {
		t.Fatalf("keys %q", keys)
	}
	if n, _ := c.ZCard(ctx, keys[0]).Result(); n != 20000 {
		t.Fatalf("the log holds %d members, want 20000", n)
	}
}

// TestSlidingLogMembersUnique: when the time goes back (a failover to a
// replica whose clock is behind, or callers' clocks apart), a unit admitted
// at an instant the log has seen before is still a member of its own, so
// the log counts every admitted unit.
func TestSlidingLogMembersUnique(t *testing.T) {
	srv := redistest.Start(t)
	c := client(t, srv.Addr)
	s := newStore(t, c, redisstore.WithCallerTime(), redisstore.WithRefusalCache(0), redisstore.WithPrefix("uniq:"))
	p, err := ratelimit.NewPolicy(ratelimit.SlidingLog, ratelimit.Limit{Rate: 10, Period: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	t0 := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	apply := func(at time.Time, n int) ratelimit.Result {
		t.Helper()
		reqs := []ratelimit.Request{{Key: "k", Policy: &p, N: n}}
		if err := s.Apply(ctx, at, reqs); err != nil {
			t.Fatal(err)
		}
		return reqs[0].Result
	}
	t1 := t0.Add(500 * time.Millisecond)
	apply(t0, 3) // t0:1..3
	apply(t1, 1) // t1:4
	// A batch that admits a unit, which drops t0's three (out of its
	// window), and is refused by its second request: t1:4 is left.
	batch := []ratelimit.Request{{Key: "k", Policy: &p, N: 1}, {Key: "k", Policy: &p, N: 10}}
	if err := s.Apply(ctx, t0.Add(time.Second+time.Microsecond), batch); err != nil || batch[1].Result.Allowed {
		t.Fatalf("batch: %+v, %v; want refused", batch, err)
	}
	if res := apply(t1, 3); !res.Allowed || res.Remaining != 6 { // t1 again: t1:2..4 would collide
		t.Fatalf("back at t1: %+v, want admitted with 6 remaining", res)
	}
	if res := apply(t1, 0); res.Remaining != 6 {
		t.Fatalf("the log counts %d units, want 4 (%+v)", 10-res.Remaining, res)
	}
}

// TestFailLocalReservations: a reservation the local store granted while
// Redis was down, refunded once Redis is back, gives Redis nothing back
// (Redis never took its tokens).
func TestFailLocalReservations(t *testing.T) {
	srv := redistest.Start(t)
	s := newStore(t, client(t, srv.Addr), redisstore.WithCallerTime(), redisstore.WithFailurePolicy(redisstore.FailLocal),
		redisstore.WithBreaker(0, 0), redisstore.WithRefusalCache(0))
	p, err := ratelimit.NewPolicy(ratelimit.TokenBucket, ratelimit.Limit{Rate: 1, Period: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	apply := func(r ratelimit.Request) (ratelimit.Request, error) {
		t.Helper()
		r.Key, r.Policy = "k", &p
		reqs := []ratelimit.Request{r}
		err := s.Apply(ctx, now, reqs)
		return reqs[0], err
	}
	srv.Kill()
	var local ratelimit.Request
	for i := range 2 { // the second waits an hour: a refundable reservation
		r, err := apply(ratelimit.Request{Op: ratelimit.OpReserve, N: 1})
		if err != nil || !r.Result.Allowed || r.Result.Source != ratelimit.SourceFailLocal {
			t.Fatalf("local reservation %d: %+v %v", i, r, err)
		}
		local = r
	}
	if local.Delay != time.Hour {
		t.Fatalf("local reservation's delay %v, want 1h", local.Delay)
	}
	srv.Restart()
	if r, err := apply(ratelimit.Request{N: 1}); err != nil || !r.Result.Allowed {
		t.Fatalf("on Redis again: %+v %v", r.Result, err)
	}
	local.Op = ratelimit.OpRefund
	if _, err := apply(local); err != nil {
		t.Fatal(err)
	}
	if r, err := apply(ratelimit.Request{N: 1}); err != nil || r.Result.Allowed {
		t.Fatalf("after refunding a local reservation on Redis: %+v %v, want refused (Redis's bucket is empty)", r.Result, err)
	}
}

// TestRefundToFresh: a refund that leaves the bucket full deletes its key
// instead of writing a fresh key's state.
func TestRefundToFresh(t *testing.T) {
	srv := redistest.Start(t)
	c := client(t, srv.Addr)
	s := newStore(t, c, redisstore.WithCallerTime(), redisstore.WithPrefix("fresh:"))
	p, err := ratelimit.NewPolicy(ratelimit.GCRA, ratelimit.Limit{Rate: 1, Period: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	reqs := []ratelimit.Request{{Key: "k", Policy: &p, Op: ratelimit.OpReserve, N: 1}}
	if err := s.Apply(ctx, now, reqs); err != nil || !reqs[0].Result.Allowed {
		t.Fatal(reqs[0].Result, err)
	}
	reqs[0].Op = ratelimit.OpRefund // spent long ago: gives nothing back
	if err := s.Apply(ctx, now.Add(time.Hour), reqs); err != nil {
		t.Fatal(err)
	}
	if n, _ := c.Exists(ctx, "fresh:{k}:gcra2:1:1000000:1").Result(); n != 0 {
		keys, _ := c.Keys(ctx, "fresh:*").Result()
		t.Fatalf("a full bucket's key is still there: %q", keys)
	}
}

// TestUnsupportedLarge: rates whose arithmetic would leave the doubles'
// exact integers are refused.
func TestUnsupportedLarge(t *testing.T) {
	c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", ContextTimeoutEnabled: true})
	defer c.Close()
	s := newStore(t, c)
	for _, tc := range []struct {
		alg ratelimit.Algorithm
		lim ratelimit.Limit
	}{
		{ratelimit.FixedWindow, ratelimit.Limit{Rate: 1 << 60, Period: time.Hour}},
		{ratelimit.GCRA, ratelimit.Limit{Rate: 1<<52 + 1, Period: time.Second, Burst: 1}},
		{ratelimit.TokenBucket, ratelimit.Limit{Rate: 1<<52 + 1, Period: time.Second, Burst: 1}},
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

// TestFailClosedRetryAfter: with the breaker off, a FailClosed refusal
// still tells the caller to wait (the default cool-down), never 0.
func TestFailClosedRetryAfter(t *testing.T) {
	c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1, ContextTimeoutEnabled: true})
	defer c.Close()
	s := newStore(t, c, redisstore.WithBreaker(0, 0), redisstore.WithTimeout(50*time.Millisecond))
	l, err := ratelimit.New(ratelimit.GCRA, ratelimit.Limit{Rate: 5, Period: time.Second}, ratelimit.WithStore(s))
	if err != nil {
		t.Fatal(err)
	}
	res, err := l.Allow(context.Background(), "k")
	if err != nil || res.Allowed || res.Source != ratelimit.SourceFailClosed || res.RetryAfter != 250*time.Millisecond {
		t.Fatalf("%+v %v, want a refusal with RetryAfter 250ms", res, err)
	}
	if _, err := redisstore.New(c, redisstore.WithBreaker(0, -time.Second)); err == nil {
		t.Fatal("a negative cool-down accepted")
	}
}

// TestRing: on a go-redis Ring a batch runs on the shard of its first key,
// so its keys must share a hash tag: without one it is refused with
// ErrCrossSlot rather than written to a shard that does not own them.
func TestRing(t *testing.T) {
	a, b := redistest.Start(t), redistest.Start(t)
	ring := redis.NewRing(&redis.RingOptions{Addrs: map[string]string{"a": a.Addr, "b": b.Addr}, ContextTimeoutEnabled: true})
	t.Cleanup(func() { ring.Close() })
	ctx := context.Background()
	s := newStore(t, ring)
	if err := s.Preload(ctx); err != nil {
		t.Fatal(err)
	}
	ip, _ := ratelimit.New(ratelimit.GCRA, ratelimit.Limit{Rate: 2, Period: time.Hour}, ratelimit.WithStore(s))
	tenant, _ := ratelimit.New(ratelimit.FixedWindow, ratelimit.Limit{Rate: 3, Period: time.Hour}, ratelimit.WithStore(s))
	tiers, err := ratelimit.All(ip, tenant)
	if err != nil {
		t.Fatal(err)
	}
	crossed := false
	for i := range 20 { // some pair of keys lands on two shards
		_, err := tiers.Allow(ctx, "ip:"+string(rune('a'+i)), "tenant:acme")
		if errors.Is(err, redisstore.ErrCrossSlot) {
			crossed = true
		} else if err != nil {
			t.Fatal(err)
		}
	}
	if !crossed {
		t.Error("no batch over two keys was refused with ErrCrossSlot")
	}
	if _, err := tiers.Allow(ctx, "k", "k"); err != nil {
		t.Errorf("a batch on one key: %v", err)
	}
}

// TestLeaseWithBreakerOpen: while the breaker is open, Release and Renew
// answer at once instead of each waiting out the timeout on a dead Redis.
func TestLeaseWithBreakerOpen(t *testing.T) {
	srv := redistest.Start(t)
	s := newStore(t, client(t, srv.Addr), redisstore.WithBreaker(1, time.Hour))
	cc, err := redisstore.NewConcurrency(s, 2, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	lease, res, err := cc.Acquire(ctx, "k")
	if err != nil || !res.Allowed {
		t.Fatal(res, err)
	}
	srv.Kill()
	if _, res, err := cc.Acquire(ctx, "k"); err != nil || res.Source != ratelimit.SourceFailClosed {
		t.Fatalf("acquire with Redis dead: %+v %v", res, err)
	}
	for name, f := range map[string]func(context.Context) (bool, error){"release": lease.Release, "renew": lease.Renew} {
		if ok, err := f(ctx); ok || !errors.Is(err, redisstore.ErrBreakerOpen) {
			t.Errorf("%s with the breaker open: %v %v, want false and ErrBreakerOpen", name, ok, err)
		}
	}
}
