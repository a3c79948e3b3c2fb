package prom

import (
	"context"
	"errors"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
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

func newMetrics(t *testing.T, opts ...Option) (*Metrics, *prometheus.Registry) {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	m, err := New(reg, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return m, reg
}

func compare(t *testing.T, reg prometheus.Gatherer, want string, names ...string) {
	t.Helper()
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), names...); err != nil {
		t.Fatal(err)
	}
}

// waitQueued yields until n callers wait in g's queue (no sleeping: the
// waiter only has to reach the queue).
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
	compare(t, reg, "", "sluice_gate_limit") // not attached: not exported
	m.AttachGate(g)
	ctx := context.Background()

	a, _ := g.TryAcquire()
	b, _ := g.Acquire(ctx)
	if _, ok := g.TryAcquire(); ok {
		t.Fatal("admitted past the limit")
	}
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
	compare(t, reg, `
# HELP sluice_gate_in_flight Tokens of the adaptive gate held now.
# TYPE sluice_gate_in_flight gauge
sluice_gate_in_flight 2
# HELP sluice_gate_limit Current concurrency limit of the adaptive gate.
# TYPE sluice_gate_limit gauge
sluice_gate_limit 2
# HELP sluice_gate_queue_length Callers waiting in the adaptive gate's queue now.
# TYPE sluice_gate_queue_length gauge
sluice_gate_queue_length 1
`, "sluice_gate_in_flight", "sluice_gate_limit", "sluice_gate_queue_length")

	c.Advance(20 * time.Millisecond)
	a.Success() // hands the slot to the waiter
	w := <-waited
	c.Advance(30 * time.Millisecond)
	b.Dropped()
	w.Ignore()

	compare(t, reg, `
# HELP sluice_gate_decisions_total Acquisitions of the adaptive gate, by partition and outcome.
# TYPE sluice_gate_decisions_total counter
sluice_gate_decisions_total{outcome="admitted",partition=""} 3
sluice_gate_decisions_total{outcome="canceled",partition=""} 0
sluice_gate_decisions_total{outcome="deadline_unmeetable",partition=""} 0
sluice_gate_decisions_total{outcome="queue_full",partition=""} 1
sluice_gate_decisions_total{outcome="queue_timeout",partition=""} 0
sluice_gate_decisions_total{outcome="rejected",partition=""} 1
# HELP sluice_gate_in_flight Tokens of the adaptive gate held now.
# TYPE sluice_gate_in_flight gauge
sluice_gate_in_flight 0
# HELP sluice_gate_queue_length Callers waiting in the adaptive gate's queue now.
# TYPE sluice_gate_queue_length gauge
sluice_gate_queue_length 0
# HELP sluice_gate_releases_total Tokens released to the adaptive gate, by kind.
# TYPE sluice_gate_releases_total counter
sluice_gate_releases_total{kind="dropped"} 1
sluice_gate_releases_total{kind="ignored"} 1
sluice_gate_releases_total{kind="success"} 1
# HELP sluice_gate_rtt_seconds Round-trip time of requests released with Success by the adaptive gate.
# TYPE sluice_gate_rtt_seconds histogram
sluice_gate_rtt_seconds_bucket{le="0.0005"} 0
sluice_gate_rtt_seconds_bucket{le="0.001"} 0
sluice_gate_rtt_seconds_bucket{le="0.0025"} 0
sluice_gate_rtt_seconds_bucket{le="0.005"} 0
sluice_gate_rtt_seconds_bucket{le="0.01"} 0
sluice_gate_rtt_seconds_bucket{le="0.025"} 1
sluice_gate_rtt_seconds_bucket{le="0.05"} 1
sluice_gate_rtt_seconds_bucket{le="0.1"} 1
sluice_gate_rtt_seconds_bucket{le="0.25"} 1
sluice_gate_rtt_seconds_bucket{le="0.5"} 1
sluice_gate_rtt_seconds_bucket{le="1"} 1
sluice_gate_rtt_seconds_bucket{le="2.5"} 1
sluice_gate_rtt_seconds_bucket{le="5"} 1
sluice_gate_rtt_seconds_bucket{le="10"} 1
sluice_gate_rtt_seconds_bucket{le="+Inf"} 1
sluice_gate_rtt_seconds_sum 0.02
sluice_gate_rtt_seconds_count 1
`, "sluice_gate_decisions_total", "sluice_gate_in_flight", "sluice_gate_queue_length", "sluice_gate_releases_total", "sluice_gate_rtt_seconds")

	// A waiter whose context ends is counted as canceled.
	a, _ = g.TryAcquire()
	b, _ = g.TryAcquire()
	cctx, cancel := context.WithCancel(ctx)
	done := make(chan error)
	go func() {
		_, err := g.Acquire(cctx)
		done <- err
	}()
	waitQueued(g, 1)
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled waiter: %v", err)
	}
	a.Success()
	b.Success()
	if got := testutil.ToFloat64(m.gateDecision.WithLabelValues("", "canceled")); got != 1 {
		t.Fatalf("canceled = %v, want 1", got)
	}
}

func TestGatePartitions(t *testing.T) {
	m, reg := newMetrics(t)
	g, err := adaptive.New(adaptive.Fixed(2), adaptive.WithPartitions(map[string]float64{"live": 0.5}), adaptive.WithObserver(m))
	if err != nil {
		t.Fatal(err)
	}
	live := g.Partition("live")
	l1, _ := live.TryAcquire()
	l2, _ := live.TryAcquire() // borrows the unowned half
	if _, ok := g.TryAcquire(); ok {
		t.Fatal("admitted past the limit")
	}
	l1.Success()
	l2.Success()
	compare(t, reg, `
# HELP sluice_gate_decisions_total Acquisitions of the adaptive gate, by partition and outcome.
# TYPE sluice_gate_decisions_total counter
sluice_gate_decisions_total{outcome="admitted",partition=""} 0
sluice_gate_decisions_total{outcome="canceled",partition=""} 0
sluice_gate_decisions_total{outcome="deadline_unmeetable",partition=""} 0
sluice_gate_decisions_total{outcome="queue_full",partition=""} 0
sluice_gate_decisions_total{outcome="queue_timeout",partition=""} 0
sluice_gate_decisions_total{outcome="rejected",partition=""} 1
sluice_gate_decisions_total{outcome="admitted",partition="live"} 2
sluice_gate_decisions_total{outcome="canceled",partition="live"} 0
sluice_gate_decisions_total{outcome="deadline_unmeetable",partition="live"} 0
sluice_gate_decisions_total{outcome="queue_full",partition="live"} 0
sluice_gate_decisions_total{outcome="queue_timeout",partition="live"} 0
sluice_gate_decisions_total{outcome="rejected",partition="live"} 0
`, "sluice_gate_decisions_total")
}

func TestGateLimitChanges(t *testing.T) {
	m, reg := newMetrics(t)
	c := clock.NewManual(t0)
	g, err := adaptive.New(adaptive.NewAIMD(adaptive.WithAIMDInitial(10)), adaptive.WithClock(c),
		adaptive.WithWindow(10*time.Millisecond, 100*time.Millisecond), adaptive.WithMinSamples(1), adaptive.WithObserver(m))
	if err != nil {
		t.Fatal(err)
	}
	m.AttachGate(g)
	// A drop in a window: the limit backs off, 10 → 9.
	tok, _ := g.TryAcquire()
	c.Advance(200 * time.Millisecond)
	tok.Dropped()
	if g.Limit() != 9 {
		t.Fatalf("limit %d after a dropped window, want 9", g.Limit())
	}
	// A healthy, busy window: 9 → 10.
	var toks []adaptive.Token
	for range 5 {
		tok, _ := g.TryAcquire()
		toks = append(toks, tok)
	}
	c.Advance(20 * time.Millisecond)
	for _, tok := range toks {
		tok.Success()
	}
	if g.Limit() != 10 {
		t.Fatalf("limit %d after a healthy busy window, want 10", g.Limit())
	}
	compare(t, reg, `
# HELP sluice_gate_limit Current concurrency limit of the adaptive gate.
# TYPE sluice_gate_limit gauge
sluice_gate_limit 10
# HELP sluice_gate_limit_changes_total Changes of the adaptive gate's limit, by direction.
# TYPE sluice_gate_limit_changes_total counter
sluice_gate_limit_changes_total{direction="down"} 1
sluice_gate_limit_changes_total{direction="up"} 1
`, "sluice_gate_limit", "sluice_gate_limit_changes_total")
}

func TestRateLimit(t *testing.T) {
	m, reg := newMetrics(t)
	c := clock.NewManual(t0)
	lim := ratelimit.Limit{Rate: 2, Period: time.Second}
	perIP, err := ratelimit.New(ratelimit.TokenBucket, lim, ratelimit.WithClock(c), ratelimit.WithName("per_ip"), ratelimit.WithObserver(m))
	if err != nil {
		t.Fatal(err)
	}
	dark, err := ratelimit.New(ratelimit.GCRA, lim, ratelimit.WithClock(c), ratelimit.WithName("dark"), ratelimit.WithShadow(true), ratelimit.WithObserver(m))
	if err != nil {
		t.Fatal(err)
	}
	conc, err := ratelimit.NewConcurrency(1, ratelimit.WithClock(c), ratelimit.WithLease(time.Second), ratelimit.WithName("conc"), ratelimit.WithObserver(m))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for range 3 {
		if _, err := perIP.Allow(ctx, "10.0.0.1"); err != nil {
			t.Fatal(err)
		}
		if res, err := dark.Allow(ctx, "10.0.0.1"); err != nil || !res.Allowed {
			t.Fatal("shadow mode refused", err)
		}
	}
	if _, res, _ := conc.Acquire(ctx, "k"); !res.Allowed {
		t.Fatal("first lease refused")
	}
	if _, res, _ := conc.Acquire(ctx, "k"); res.Allowed {
		t.Fatal("second lease admitted")
	}
	c.Advance(2 * time.Second) // the held lease expires, unreleased
	lease, res, _ := conc.Acquire(ctx, "k")
	if !res.Allowed {
		t.Fatal("expired lease not taken back")
	}
	lease.Release()
	compare(t, reg, `
# HELP sluice_ratelimit_decisions_total Rate limiter decisions, by limiter and outcome.
# TYPE sluice_ratelimit_decisions_total counter
sluice_ratelimit_decisions_total{limiter="conc",outcome="allowed"} 2
sluice_ratelimit_decisions_total{limiter="conc",outcome="refused"} 1
sluice_ratelimit_decisions_total{limiter="conc",outcome="shadow_refused"} 0
sluice_ratelimit_decisions_total{limiter="dark",outcome="allowed"} 2
sluice_ratelimit_decisions_total{limiter="dark",outcome="refused"} 0
sluice_ratelimit_decisions_total{limiter="dark",outcome="shadow_refused"} 1
sluice_ratelimit_decisions_total{limiter="per_ip",outcome="allowed"} 2
sluice_ratelimit_decisions_total{limiter="per_ip",outcome="refused"} 1
sluice_ratelimit_decisions_total{limiter="per_ip",outcome="shadow_refused"} 0
# HELP sluice_ratelimit_lease_expiries_total Concurrency leases taken back because they expired, by limiter.
# TYPE sluice_ratelimit_lease_expiries_total counter
sluice_ratelimit_lease_expiries_total{limiter="conc"} 1
`, "sluice_ratelimit_decisions_total", "sluice_ratelimit_lease_expiries_total")
}

func TestTiersReportEachTier(t *testing.T) {
	m, _ := newMetrics(t)
	c := clock.NewManual(t0)
	ip, _ := ratelimit.New(ratelimit.FixedWindow, ratelimit.Limit{Rate: 10, Period: time.Minute}, ratelimit.WithClock(c), ratelimit.WithName("ip"), ratelimit.WithObserver(m))
	tenant, _ := ratelimit.New(ratelimit.FixedWindow, ratelimit.Limit{Rate: 1, Period: time.Minute}, ratelimit.WithClock(c), ratelimit.WithName("tenant"), ratelimit.WithObserver(m))
	tiers, err := ratelimit.All(ip, tenant)
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if _, err := tiers.Allow(context.Background(), "10.0.0.1", "acme"); err != nil {
			t.Fatal(err)
		}
	}
	for _, tt := range []struct {
		limiter, outcome string
		want             float64
	}{
		{"ip", "allowed", 2}, {"ip", "refused", 0}, // a tier that admits reports admission
		{"tenant", "allowed", 1}, {"tenant", "refused", 1},
	} {
		if got := testutil.ToFloat64(m.rateDecision.WithLabelValues(tt.limiter, tt.outcome)); got != tt.want {
			t.Errorf("%s %s = %v, want %v", tt.limiter, tt.outcome, got, tt.want)
		}
	}
}

func TestShed(t *testing.T) {
	m, reg := newMetrics(t)
	g, err := adaptive.New(adaptive.Fixed(2))
	if err != nil {
		t.Fatal(err)
	}
	s, err := shed.New(g, shed.WithReserve(0.5), shed.WithObserver(m))
	if err != nil {
		t.Fatal(err)
	}
	m.AttachShedder(s)
	first, _ := s.TryAcquire(shed.CriticalPlus, 0) // critical work arrives: the reserve keeps room for it
	first.Success()
	low, _ := s.TryAcquire(shed.Sheddable, 1)
	s.TryAcquire(shed.Sheddable, 2) // the other half is reserved
	crit, _ := s.TryAcquire(shed.CriticalPlus, 3)
	s.TryAcquire(shed.CriticalPlus, 4) // the gate is full
	low.Success()
	crit.Success()
	compare(t, reg, `
# HELP sluice_shed_cutoff_level Load shedder cutoff: requests at or above this level are shed.
# TYPE sluice_shed_cutoff_level gauge
sluice_shed_cutoff_level 512
# HELP sluice_shed_decisions_total Load shedder decisions, by priority and outcome.
# TYPE sluice_shed_decisions_total counter
sluice_shed_decisions_total{outcome="admitted",priority="critical_plus"} 2
sluice_shed_decisions_total{outcome="gate_full",priority="critical_plus"} 1
sluice_shed_decisions_total{outcome="shed",priority="critical_plus"} 0
sluice_shed_decisions_total{outcome="admitted",priority="sheddable"} 1
sluice_shed_decisions_total{outcome="gate_full",priority="sheddable"} 0
sluice_shed_decisions_total{outcome="shed",priority="sheddable"} 1
`, "sluice_shed_cutoff_level", "sluice_shed_decisions_total")
	if shed.Levels() != 512 {
		t.Fatalf("Levels() = %d; update the expected cutoff", shed.Levels())
	}
}

// drive makes one event of every kind, so every metric has a series.
func TestLint(t *testing.T) {
	m, reg := newMetrics(t)
	g, _ := adaptive.New(adaptive.Fixed(1))
	s, _ := shed.New(g)
	m.AttachGate(g)
	m.AttachShedder(s)
	observertest.Drive(m, metrics.Success)
	problems, err := testutil.GatherAndLint(reg)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("%s: %s", p.Metric, p.Text)
	}
	n, err := testutil.GatherAndCount(reg)
	if err != nil {
		t.Fatal(err)
	}
	// 4 gauges, 1 histogram, 6 gate decisions, 3 releases, 2 directions,
	// 3 rate outcomes, 1 lease expiry, 3 shed outcomes; for the store's
	// decide, 5 call histograms (one per outcome) and 3 error counters
	// (failed, timed_out, canceled); for fail_open, 4 degraded causes.
	if n != 4+1+6+3+2+3+1+3+5+3+4 {
		t.Fatalf("%d series", n)
	}
}

func TestNewErrors(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	if _, err := New(reg); err != nil {
		t.Fatal(err)
	}
	_, err := New(reg)
	var are prometheus.AlreadyRegisteredError
	if !errors.As(err, &are) {
		t.Fatalf("second registration: %v, want an AlreadyRegisteredError", err)
	}
	// Several Metrics share a registry when they have the same const label
	// names with different values.
	shared := prometheus.NewPedanticRegistry()
	for _, gate := range []string{"api", "batch"} {
		if _, err := New(shared, WithConstLabels(prometheus.Labels{"gate": gate})); err != nil {
			t.Fatalf("gate %q: %v", gate, err)
		}
	}
	if _, err := New(shared, WithConstLabels(prometheus.Labels{"gate": "api"})); !errors.As(err, &are) {
		t.Fatalf("same const labels twice: %v", err)
	}
	for _, tt := range []struct {
		name string
		reg  prometheus.Registerer
		opts []Option
		want string
	}{
		{"nil registerer", nil, nil, "New(nil)"},
		{"no buckets", prometheus.NewRegistry(), []Option{WithRTTBuckets(nil)}, "no buckets"},
		{"decreasing buckets", prometheus.NewRegistry(), []Option{WithRTTBuckets([]float64{1, 0.5})}, "increasing"},
		{"bad const label", prometheus.NewRegistry(), []Option{WithConstLabels(prometheus.Labels{"__reserved": "x"})}, "__reserved"},
		{"clashing const label", prometheus.NewRegistry(), []Option{WithConstLabels(prometheus.Labels{"outcome": "x"})}, "outcome"},
	} {
		if _, err := New(tt.reg, tt.opts...); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: error %v, want it to mention %q", tt.name, err, tt.want)
		}
	}
}

func TestObserverDoesNotAllocate(t *testing.T) {
	m, _ := newMetrics(t)
	observertest.NoAllocs(t, m, metrics.Success)
}

func BenchmarkObserver(b *testing.B) {
	m, err := New(prometheus.NewRegistry())
	if err != nil {
		b.Fatal(err)
	}
	observertest.Drive(m, metrics.Success)
	b.ReportAllocs()
	for b.Loop() {
		m.GateDecision(metrics.Admitted, "", 0)
		m.GateRelease(metrics.Success, 3*time.Millisecond)
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
		redisstore.WithFailurePolicy(redisstore.FailOpen), redisstore.WithBreaker(1, time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	lim, err := ratelimit.New(ratelimit.GCRA, ratelimit.Limit{Rate: 5, Period: time.Second}, ratelimit.WithStore(store))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for range 3 {
		if _, err := lim.Allow(ctx, "k"); err != nil {
			t.Fatal(err)
		}
	}
	srv.Kill()
	for range 2 { // the first call fails and opens the breaker; the second is not sent
		if res, err := lim.Allow(ctx, "k"); err != nil || !res.Allowed {
			t.Fatalf("with Redis killed: %+v %v, want a fail-open admission", res, err)
		}
	}
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	calls := map[string]uint64{}
	for _, f := range fams {
		if f.GetName() != "sluice_store_call_seconds" {
			continue
		}
		for _, mt := range f.GetMetric() {
			var op, outcome string
			for _, l := range mt.GetLabel() {
				switch l.GetName() {
				case "op":
					op = l.GetValue()
				case "outcome":
					outcome = l.GetValue()
				}
			}
			calls[op+" "+outcome] = mt.GetHistogram().GetSampleCount()
		}
	}
	if calls["decide ok"] != 3 || calls["decide failed"]+calls["decide canceled"] != 1 {
		t.Errorf("sluice_store_call_seconds counts %v, want 3 ok and 1 failed (or canceled) decide", calls)
	}
	failed := testutil.ToFloat64(m.storeErrors.WithLabelValues("decide", "failed")) + testutil.ToFloat64(m.storeErrors.WithLabelValues("decide", "canceled"))
	if failed != 1 {
		t.Errorf("sluice_store_errors_total for decide = %v, want 1", failed)
	}
	degraded := testutil.ToFloat64(m.storeDegrade.WithLabelValues("fail_open", "failed")) + testutil.ToFloat64(m.storeDegrade.WithLabelValues("fail_open", "canceled"))
	open := testutil.ToFloat64(m.storeDegrade.WithLabelValues("fail_open", "breaker_open"))
	if degraded != 1 || open != 1 {
		t.Errorf("sluice_store_degraded_total: %v after the failed call, %v with the breaker open; want 1 and 1", degraded, open)
	}
}
