package gometrics

import (
	"context"
	"errors"
	"runtime"
	"strings"
	"testing"
	"time"

	gm "github.com/rcrowley/go-metrics"
	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/adaptive"
	"github.com/sluicehq/sluice/clock"
	"github.com/sluicehq/sluice/internal/observertest"
	"github.com/sluicehq/sluice/internal/redistest"
	"github.com/sluicehq/sluice/metrics"
	"github.com/sluicehq/sluice/ratelimit"
	"github.com/sluicehq/sluice/ratelimit/redisstore"
	"github.com/sluicehq/sluice/shed"
)

var t0 = time.Date(2100, 1, 1, 0, 0, 0, 0, time.UTC)

func newMetrics(t *testing.T, opts ...Option) (*Metrics, gm.Registry) {
	t.Helper()
	reg := gm.NewRegistry()
	m, err := New(reg, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return m, reg
}

// expect checks the values of the named counters and gauges in reg.
func expect(t *testing.T, reg gm.Registry, want map[string]int64) {
	t.Helper()
	for name, w := range want {
		var got int64
		switch v := reg.Get(name).(type) {
		case gm.Counter:
			got = v.Count()
		case gm.Gauge:
			got = v.Value()
		default:
			t.Errorf("%s: %T, not registered as a counter or gauge", name, v)
			continue
		}
		if got != w {
			t.Errorf("%s = %d, want %d", name, got, w)
		}
	}
}

func waitQueued(g *adaptive.Limiter, n int) {
	for g.Queued() != n {
		runtime.Gosched()
	}
}

func TestGate(t *testing.T) {
	m, reg := newMetrics(t)
	c := clock.NewManual(t0)
	g, err := adaptive.New(adaptive.Fixed(2), adaptive.WithClock(c), adaptive.WithQueue(1, adaptive.FIFO), adaptive.WithObserver(m))
	if err != nil {
		t.Fatal(err)
	}
	expect(t, reg, map[string]int64{"sluice.gate.limit": 0}) // not attached yet
	m.AttachGate(g)
	ctx := context.Background()
	a, _ := g.TryAcquire()
	b, _ := g.Acquire(ctx)
	g.TryAcquire() // rejected
	waited := make(chan adaptive.Token)
	go func() {
		tok, err := g.Acquire(ctx)
		if err != nil {
			t.Error(err)
		}
		waited <- tok
	}()
	waitQueued(g, 1)
	if _, err := g.Acquire(ctx); !errors.Is(err, adaptive.ErrQueueFull) {
		t.Fatalf("second waiter: %v", err)
	}
	expect(t, reg, map[string]int64{"sluice.gate.limit": 2, "sluice.gate.in_flight": 2, "sluice.gate.queue_length": 1})
	c.Advance(20 * time.Millisecond)
	a.Success()
	w := <-waited
	c.Advance(30 * time.Millisecond)
	b.Dropped()
	w.Ignore()
	expect(t, reg, map[string]int64{
		"sluice.gate.limit": 2, "sluice.gate.in_flight": 0, "sluice.gate.queue_length": 0,
		"sluice.gate.decisions._.admitted":            3,
		"sluice.gate.decisions._.rejected":            1,
		"sluice.gate.decisions._.queue_full":          1,
		"sluice.gate.decisions._.queue_timeout":       0,
		"sluice.gate.decisions._.deadline_unmeetable": 0,
		"sluice.gate.decisions._.canceled":            0,
		"sluice.gate.releases.success":                1,
		"sluice.gate.releases.dropped":                1,
		"sluice.gate.releases.ignored":                1,
	})
	h := reg.Get("sluice.gate.rtt_ns").(gm.Histogram)
	if h.Count() != 1 || h.Max() != int64(20*time.Millisecond) {
		t.Fatalf("rtt: %d samples, max %d, want 1 of %d", h.Count(), h.Max(), 20*time.Millisecond)
	}
}

func TestGatePartitionsAndLimitChanges(t *testing.T) {
	m, reg := newMetrics(t)
	g, err := adaptive.New(adaptive.Fixed(2), adaptive.WithPartitions(map[string]float64{"live": 0.5}), adaptive.WithObserver(m))
	if err != nil {
		t.Fatal(err)
	}
	live := g.Partition("live")
	l1, _ := live.TryAcquire()
	l2, _ := live.TryAcquire()
	g.TryAcquire()
	l1.Success()
	l2.Success()

	c := clock.NewManual(t0)
	a, err := adaptive.New(adaptive.NewAIMD(adaptive.WithAIMDInitial(10)), adaptive.WithClock(c),
		adaptive.WithWindow(10*time.Millisecond, 100*time.Millisecond), adaptive.WithMinSamples(1), adaptive.WithObserver(m))
	if err != nil {
		t.Fatal(err)
	}
	tok, _ := a.TryAcquire()
	c.Advance(200 * time.Millisecond)
	tok.Dropped() // 10 → 9
	var toks []adaptive.Token
	for range 5 {
		tok, _ := a.TryAcquire()
		toks = append(toks, tok)
	}
	c.Advance(20 * time.Millisecond)
	for _, tok := range toks {
		tok.Success() // 9 → 10
	}
	expect(t, reg, map[string]int64{
		"sluice.gate.decisions.live.admitted": 2,
		"sluice.gate.decisions.live.rejected": 0,
		"sluice.gate.decisions._.rejected":    1,
		"sluice.gate.decisions._.admitted":    6,
		"sluice.gate.limit_changes.down":      1,
		"sluice.gate.limit_changes.up":        1,
	})
}

func TestRateLimit(t *testing.T) {
	m, reg := newMetrics(t)
	c := clock.NewManual(t0)
	lim := ratelimit.Limit{Rate: 2, Period: time.Second}
	perIP, _ := ratelimit.New(ratelimit.SlidingWindow, lim, ratelimit.WithClock(c), ratelimit.WithName("per_ip"), ratelimit.WithObserver(m))
	dark, _ := ratelimit.New(ratelimit.SlidingLog, lim, ratelimit.WithClock(c), ratelimit.WithShadow(true), ratelimit.WithObserver(m))
	conc, err := ratelimit.NewConcurrency(1, ratelimit.WithClock(c), ratelimit.WithLease(time.Second), ratelimit.WithName("conc"), ratelimit.WithObserver(m))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for range 3 {
		perIP.Allow(ctx, "10.0.0.1")
		dark.Allow(ctx, "10.0.0.1")
	}
	conc.Acquire(ctx, "k")
	conc.Acquire(ctx, "k") // refused
	c.Advance(2 * time.Second)
	lease, _, _ := conc.Acquire(ctx, "k") // takes back the expired lease
	lease.Release()
	expect(t, reg, map[string]int64{
		"sluice.ratelimit.decisions.per_ip.allowed":        2,
		"sluice.ratelimit.decisions.per_ip.refused":        1,
		"sluice.ratelimit.decisions.per_ip.shadow_refused": 0,
		"sluice.ratelimit.decisions._.allowed":             2, // unnamed
		"sluice.ratelimit.decisions._.refused":             0,
		"sluice.ratelimit.decisions._.shadow_refused":      1,
		"sluice.ratelimit.decisions.conc.allowed":          2,
		"sluice.ratelimit.decisions.conc.refused":          1,
		"sluice.ratelimit.lease_expiries.conc":             1,
	})
}

func TestShed(t *testing.T) {
	m, reg := newMetrics(t)
	g, _ := adaptive.New(adaptive.Fixed(2))
	s, err := shed.New(g, shed.WithReserve(0.5), shed.WithObserver(m))
	if err != nil {
		t.Fatal(err)
	}
	m.AttachShedder(s)
	first, _ := s.TryAcquire(shed.CriticalPlus, 0) // critical work arrives: the reserve keeps room for it
	first.Success()
	low, _ := s.TryAcquire(shed.Sheddable, 1)
	s.TryAcquire(shed.Sheddable, 2)
	crit, _ := s.TryAcquire(shed.CriticalPlus, 3)
	s.TryAcquire(shed.CriticalPlus, 4)
	low.Success()
	crit.Success()
	expect(t, reg, map[string]int64{
		"sluice.shed.cutoff_level":                      int64(shed.Levels()),
		"sluice.shed.decisions.sheddable.admitted":      1,
		"sluice.shed.decisions.sheddable.shed":          1,
		"sluice.shed.decisions.sheddable.gate_full":     0,
		"sluice.shed.decisions.critical_plus.admitted":  2,
		"sluice.shed.decisions.critical_plus.gate_full": 1,
		"sluice.shed.decisions.critical_plus.shed":      0,
	})
}

func TestNewErrors(t *testing.T) {
	reg := gm.NewRegistry()
	if _, err := New(reg); err != nil {
		t.Fatal(err)
	}
	before := len(reg.GetAll())
	_, err := New(reg)
	var dup gm.DuplicateMetric
	if !errors.As(err, &dup) {
		t.Fatalf("second registration: %v, want a DuplicateMetric", err)
	}
	if _, err := New(reg, WithPrefix("batch.")); err != nil {
		t.Fatalf("prefixed: %v", err)
	}
	if reg.Get("batch.sluice.gate.limit") == nil {
		t.Fatal("prefix not applied")
	}
	// A failed New leaves the registry as it was.
	taken := gm.NewRegistry()
	taken.Register("sluice.gate.rtt_ns", gm.NewCounter())
	if _, err := New(taken); err == nil {
		t.Fatal("taken name accepted")
	}
	if n := len(taken.GetAll()); n != 1 {
		t.Fatalf("failed New left %d metrics registered", n)
	}
	if len(reg.GetAll()) != 2*before {
		t.Fatalf("%d metrics after a prefixed New, want %d", len(reg.GetAll()), 2*before)
	}
	if _, err := New(nil); err == nil || !strings.Contains(err.Error(), "New(nil)") {
		t.Fatalf("nil registry: %v", err)
	}
	if _, err := New(gm.NewRegistry(), WithSample(nil)); err == nil || !strings.Contains(err.Error(), "WithSample(nil)") {
		t.Fatalf("nil sample: %v", err)
	}
}

func TestTakenLabelledNames(t *testing.T) {
	reg := gm.NewRegistry()
	shared := gm.NewCounter()
	reg.Register("sluice.shed.decisions.critical.admitted", shared)
	reg.Register("sluice.shed.decisions.critical.shed", gm.NewGauge())
	m, err := New(reg)
	if err != nil {
		t.Fatal(err)
	}
	m.ShedDecision(metrics.ShedAdmitted, "critical")
	m.ShedDecision(metrics.ShedRefused, "critical") // counted outside the registry
	if shared.Count() != 1 {
		t.Fatalf("existing counter not shared: %d", shared.Count())
	}
	if _, ok := reg.Get("sluice.shed.decisions.critical.shed").(gm.Gauge); !ok {
		t.Fatal("a gauge was replaced")
	}
}

func TestObserverDoesNotAllocate(t *testing.T) {
	m, _ := newMetrics(t, WithSample(func() gm.Sample { return gm.NewUniformSample(64) }))
	observertest.NoAllocs(t, m, metrics.Dropped)
}

func TestDefaultSampleDoesNotAllocate(t *testing.T) {
	m, _ := newMetrics(t)
	for range 2000 { // fill the reservoir
		m.GateRelease(metrics.Success, time.Millisecond)
	}
	if a := testing.AllocsPerRun(1000, func() { m.GateRelease(metrics.Success, time.Millisecond) }); a != 0 {
		t.Fatalf("%v allocations per Success with the default reservoir", a)
	}
}

func BenchmarkObserver(b *testing.B) {
	m, err := New(gm.NewRegistry())
	if err != nil {
		b.Fatal(err)
	}
	observertest.Drive(m, metrics.Dropped)
	b.ReportAllocs()
	for b.Loop() {
		m.GateDecision(metrics.Admitted, "", 0)
		m.GateRelease(metrics.Success, 3*time.Millisecond)
	}
}

func TestName(t *testing.T) {
	m, _ := newMetrics(t, WithPrefix("api."))
	if got := m.Name("sluice.gate.decisions", "", "admitted"); got != "api.sluice.gate.decisions._.admitted" {
		t.Fatal(got)
	}
}

// A Redis store reports its calls and its failure policy's decisions: on a
// real redis-server, then with the server killed.
func TestRedisStore(t *testing.T) {
	m, reg := newMetrics(t)
	srv := redistest.Start(t)
	c := redis.NewClient(&redis.Options{Addr: srv.Addr, ContextTimeoutEnabled: true, MaxRetries: -1})
	defer c.Close()
	store, err := redisstore.New(c, redisstore.WithTimeout(30*time.Second), redisstore.WithObserver(m),
		redisstore.WithFailurePolicy(redisstore.FailClosed), redisstore.WithBreaker(1, time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	lim, err := ratelimit.New(ratelimit.TokenBucket, ratelimit.Limit{Rate: 5, Period: time.Second}, ratelimit.WithStore(store))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for range 2 {
		if _, err := lim.Allow(ctx, "k"); err != nil {
			t.Fatal(err)
		}
	}
	srv.Kill()
	for range 3 { // the first call fails and opens the breaker; the others are not sent
		if res, err := lim.Allow(ctx, "k"); err != nil || res.Allowed {
			t.Fatalf("with Redis killed: %+v %v, want a fail-closed refusal", res, err)
		}
	}
	count := func(name string) int64 {
		if h, ok := reg.Get(name).(gm.Histogram); ok {
			return h.Count()
		}
		return 0
	}
	if ok, bad := count("sluice.store.call_ns.decide.ok"), count("sluice.store.call_ns.decide.failed")+count("sluice.store.call_ns.decide.canceled"); ok != 2 || bad != 1 {
		t.Errorf("sluice.store.call_ns.decide: %d ok, %d failed or canceled; want 2 and 1", ok, bad)
	}
	get := func(name string) int64 {
		if c, ok := reg.Get(name).(gm.Counter); ok {
			return c.Count()
		}
		return 0
	}
	if n := get("sluice.store.errors.decide.failed") + get("sluice.store.errors.decide.canceled"); n != 1 {
		t.Errorf("sluice.store.errors.decide = %d, want 1", n)
	}
	expect(t, reg, map[string]int64{"sluice.store.degraded.fail_closed.breaker_open": 2})
	if n := get("sluice.store.degraded.fail_closed.failed") + get("sluice.store.degraded.fail_closed.canceled"); n != 1 {
		t.Errorf("sluice.store.degraded.fail_closed after the failed call = %d, want 1", n)
	}
}
