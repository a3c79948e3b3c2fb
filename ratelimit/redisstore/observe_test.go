package redisstore_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/internal/redistest"
	"github.com/sluicehq/sluice/metrics"
	"github.com/sluicehq/sluice/ratelimit"
	"github.com/sluicehq/sluice/ratelimit/redisstore"
)

// storeLog records what a store reports to its observer.
type storeLog struct {
	mu       sync.Mutex
	calls    []string // "op outcome"
	degraded []string // "policy cause n"
	slowest  time.Duration
}

func (l *storeLog) StoreCall(op string, o metrics.StoreOutcome, d time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.calls = append(l.calls, op+" "+o.String())
	l.slowest = max(l.slowest, d)
}

func (l *storeLog) StoreDegraded(policy string, cause metrics.StoreOutcome, n int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.degraded = append(l.degraded, fmt.Sprintf("%s %s %d", policy, cause, n))
}

func (l *storeLog) take() (calls, degraded []string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	calls, degraded = l.calls, l.degraded
	l.calls, l.degraded = nil, nil
	return calls, degraded
}

func eq(a, b []string) bool { return fmt.Sprint(a) == fmt.Sprint(b) }

// The observer sees each script call to a real Redis — decisions, batches
// of tiers and leases; a script Redis lost (NOSCRIPT) once, as the EVAL
// that followed — and, once Redis is killed, the failed call and the
// decision the failure policy made, then the breaker's.
func TestObserverOnRealRedis(t *testing.T) {
	srv := redistest.Start(t)
	c := redis.NewClient(&redis.Options{Addr: srv.Addr, ContextTimeoutEnabled: true, MaxRetries: -1})
	defer c.Close()
	log := &storeLog{}
	s := newStore(t, c, redisstore.WithObserver(log), redisstore.WithFailurePolicy(redisstore.FailOpen), redisstore.WithBreaker(1, time.Hour),
		redisstore.WithRefusalCache(0))
	lim, err := ratelimit.New(ratelimit.GCRA, ratelimit.Limit{Rate: 5, Period: time.Second}, ratelimit.WithStore(s))
	if err != nil {
		t.Fatal(err)
	}
	lim2, err := ratelimit.New(ratelimit.TokenBucket, ratelimit.Limit{Rate: 5, Period: time.Second}, ratelimit.WithStore(s))
	if err != nil {
		t.Fatal(err)
	}
	tiers, err := ratelimit.All(lim, lim2)
	if err != nil {
		t.Fatal(err)
	}
	cc, err := redisstore.NewConcurrency(s, 2, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := lim.Allow(ctx, "a"); err != nil { // first call of the script: NOSCRIPT, then EVAL
		t.Fatal(err)
	}
	if _, err := lim.Allow(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	if _, err := tiers.Allow(ctx, "a", "a"); err != nil {
		t.Fatal(err)
	}
	lease, _, err := cc.Acquire(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := lease.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if err := c.Set(ctx, "unrelated", "x", 0).Err(); err != nil { // not the store's: not reported
		t.Fatal(err)
	}
	calls, degraded := log.take()
	if want := []string{"decide ok", "decide ok", "decide ok", "lease_acquire ok", "lease_release ok"}; !eq(calls, want) || len(degraded) != 0 {
		t.Errorf("calls %q, degraded %q; want %q and none", calls, degraded, want)
	}
	if log.slowest <= 0 {
		t.Error("no call took any time")
	}

	srv.Kill()
	res, err := lim.Allow(ctx, "a")
	if err != nil || !res.Allowed || res.Source != ratelimit.SourceFailOpen {
		t.Fatalf("Allow with Redis killed: %+v %v, want a fail-open admission", res, err)
	}
	if _, err := tiers.Allow(ctx, "a", "a"); err != nil { // the breaker is open now: no call
		t.Fatal(err)
	}
	calls, degraded = log.take()
	if len(calls) != 1 || calls[0] != "decide failed" && calls[0] != "decide canceled" {
		t.Errorf("calls with Redis killed: %q, want one failed (or abandoned) decide", calls)
	}
	if len(degraded) != 2 || degraded[0] != "fail_open failed 1" && degraded[0] != "fail_open canceled 1" || degraded[1] != "fail_open breaker_open 2" {
		t.Errorf("degraded with Redis killed: %q, want [fail_open failed 1, fail_open breaker_open 2]", degraded)
	}
}

// A Redis that never answers: the call ends at the store's timeout, and
// the observer hears a timed-out call and a fail-closed decision.
func TestObserverTimeout(t *testing.T) {
	addr := silentServer(t)
	c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, ReadTimeout: time.Minute, WriteTimeout: time.Minute, ContextTimeoutEnabled: true})
	defer c.Close()
	log := &storeLog{}
	s := newStore(t, c, redisstore.WithTimeout(50*time.Millisecond), redisstore.WithBreaker(0, 0), redisstore.WithObserver(log))
	lim, err := ratelimit.New(ratelimit.GCRA, ratelimit.Limit{Rate: 5, Period: time.Second}, ratelimit.WithStore(s))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := lim.Allow(context.Background(), "k"); err != nil {
		t.Fatal(err)
	}
	calls, degraded := log.take()
	if !eq(calls, []string{"decide timed_out"}) || !eq(degraded, []string{"fail_closed timed_out 1"}) {
		t.Errorf("calls %q, degraded %q; want [decide timed_out] and [fail_closed timed_out 1]", calls, degraded)
	}
	if _, err := redisstore.New(c, redisstore.WithObserver(nil)); err == nil {
		t.Error("New accepted a nil observer")
	}
}
