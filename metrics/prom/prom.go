// Package prom exports what sluice's guards decide as Prometheus metrics.
//
// New registers one collector on a prometheus.Registerer and returns a
// *Metrics, which is a metrics.GateObserver, a metrics.RateObserver, a
// metrics.ShedObserver and a metrics.StoreObserver at once: hand it to
// adaptive.WithObserver, ratelimit.WithObserver, shed.WithObserver and
// redisstore.WithObserver. The gauges read a gate and a
// shedder at scrape time; attach them with AttachGate and AttachShedder.
//
//	m, err := prom.New(prometheus.DefaultRegisterer)
//	...
//	gate, err := adaptive.New(alg, adaptive.WithObserver(m))
//	...
//	m.AttachGate(gate)
//
// The metrics (all names carry the sluice_ prefix; every label has a value
// set fixed by the code or by configuration, never by a request):
//
//	name                                   type       labels              meaning
//	sluice_gate_limit                      gauge      -                   the gate's current concurrency limit (attached gate)
//	sluice_gate_in_flight                  gauge      -                   tokens held now (attached gate)
//	sluice_gate_queue_length               gauge      -                   callers waiting in Acquire now (attached gate)
//	sluice_gate_rtt_seconds                histogram  -                   round-trip time of each token released with Success
//	sluice_gate_decisions_total            counter    partition, outcome  acquisitions by outcome (metrics.GateDecision)
//	sluice_gate_releases_total             counter    kind                tokens released, by kind: success, dropped, ignored
//	sluice_gate_limit_changes_total        counter    direction           changes of the limit: up, down
//	sluice_ratelimit_decisions_total       counter    limiter, outcome    rate-limit decisions: allowed, refused, shadow_refused
//	sluice_ratelimit_lease_expiries_total  counter    limiter             concurrency leases taken back because they expired
//	sluice_ratelimit_degraded_total        counter    limiter             decisions made by a failed store's failure policy (ratelimit.Result.Degraded)
//	sluice_shed_decisions_total            counter    priority, outcome   shedder decisions (metrics.ShedDecision): admitted, shed, gate_full
//	sluice_store_call_seconds              histogram  op, outcome         duration of each call of a rate-limit store to Redis (metrics.StoreOutcome)
//	sluice_store_errors_total              counter    op, outcome         calls to Redis that did not end ok: failed, timed_out, canceled
//	sluice_store_degraded_total            counter    policy, cause       requests a store's failure policy decided, by policy and cause
//	sluice_shed_cutoff_level               gauge      -                   the shedder's cutoff level; shed.Levels() when nothing is shed (attached shedder)
//
// partition is the gate partition's name, "" for callers that named none
// (Prometheus shows an empty label as absent). outcome of the gate is one of
// admitted, rejected, queue_full, deadline_unmeetable, queue_timeout,
// canceled. limiter is the name given with ratelimit.WithName ("" when
// none); each tier of ratelimit.All reports under its own name. priority is
// one of critical_plus, critical, sheddable_plus, sheddable. op is what the
// store's call did (decide, lease_acquire, lease_release, lease_renew,
// lease_count); policy is fail_open, fail_closed or fail_local; cause is
// failed, timed_out, canceled or breaker_open. A refusal that
// shadow mode turned into an admission counts as shadow_refused, not as
// allowed.
//
// Label values are found through a lock-free cache, so once a partition,
// limiter or priority has been seen, reporting a decision allocates nothing.
// Series of a label value appear, at zero for every outcome, with its first
// event.
//
// One *Metrics describes one set of guards: one gate, one shedder, and any
// number of rate limiters told apart by name. To export several gates from
// one registry, give each its own Metrics with const labels of the same
// names and different values (WithConstLabels), or a registry of its own;
// registering the same metrics twice is an error from New, not a panic.
package prom

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicehq/sluice/metrics"
	"github.com/sluicehq/sluice/metrics/internal/attach"
	"github.com/sluicehq/sluice/metrics/internal/memo"
)

// DefaultRTTBuckets are the upper bounds, in seconds, of the
// sluice_gate_rtt_seconds buckets unless WithRTTBuckets says otherwise: from
// half a millisecond to ten seconds, about three per decade.
var DefaultRTTBuckets = []float64{0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10}

// StoreCallBuckets are the upper bounds, in seconds, of the
// sluice_store_call_seconds buckets: from 100 µs (a Redis on the same host)
// to a second (far past any sensible store timeout).
var StoreCallBuckets = []float64{0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1}

// Option configures New.
type Option func(*config)

type config struct {
	constLabels prometheus.Labels
	buckets     []float64
}

// WithConstLabels adds labels with fixed values to every metric, for
// example {"gate": "api"}, so that several Metrics can share a registry.
// The names must be valid label names other than the metrics' own labels,
// and every Metrics on one registry must use the same names (Prometheus
// requires one set of label names per metric name), with different values.
func WithConstLabels(l prometheus.Labels) Option {
	return func(c *config) { c.constLabels = l }
}

// WithRTTBuckets sets the upper bounds, in seconds, of the RTT histogram's
// buckets (default DefaultRTTBuckets). They must be positive and strictly
// increasing; the +Inf bucket is implied.
func WithRTTBuckets(b []float64) Option {
	return func(c *config) { c.buckets = slices.Clone(b) }
}

// Metrics reports the events of sluice's guards to Prometheus. It
// implements metrics.GateObserver, metrics.RateObserver and
// metrics.ShedObserver; its methods are safe for concurrent use and, for
// label values seen before, allocate nothing. Build it with New.
type Metrics struct {
	gate    attach.Slot[metrics.GateState]
	shedder attach.Slot[metrics.ShedState]

	limit, inFlight, queued, cutoff *prometheus.Desc

	rtt          prometheus.Histogram
	gateDecision *prometheus.CounterVec
	releases     *prometheus.CounterVec
	limitChanges *prometheus.CounterVec
	rateDecision *prometheus.CounterVec
	leaseExpiry  *prometheus.CounterVec
	degraded     *prometheus.CounterVec
	shedDecision *prometheus.CounterVec
	storeCall    *prometheus.HistogramVec
	storeErrors  *prometheus.CounterVec
	storeDegrade *prometheus.CounterVec

	release  [metrics.GateReleases]prometheus.Counter
	up, down prometheus.Counter

	partitions memo.Memo[[metrics.GateDecisions]prometheus.Counter]
	limiters   memo.Memo[[metrics.RateOutcomes]prometheus.Counter]
	leases     memo.Memo[prometheus.Counter]
	degradedBy memo.Memo[prometheus.Counter]
	priorities memo.Memo[[metrics.ShedDecisions]prometheus.Counter]
	storeOps   memo.Memo[storeOp]
	degradeBy  memo.Memo[[metrics.StoreOutcomes]prometheus.Counter]
}

// storeOp holds the series of one store operation, by outcome.
type storeOp struct {
	seconds [metrics.StoreOutcomes]prometheus.Observer
	errors  [metrics.StoreOutcomes]prometheus.Counter // nil for StoreOK
}

var (
	_ metrics.GateObserver  = (*Metrics)(nil)
	_ metrics.RateObserver  = (*Metrics)(nil)
	_ metrics.ShedObserver  = (*Metrics)(nil)
	_ metrics.StoreObserver = (*Metrics)(nil)
)

// New builds the metrics and registers them on reg as one collector. It
// fails, registering nothing, when reg is nil, an option is invalid, or reg
// already has metrics of these names and labels (a
// prometheus.AlreadyRegisteredError, wrapped).
func New(reg prometheus.Registerer, opts ...Option) (*Metrics, error) {
	cfg := config{buckets: slices.Clone(DefaultRTTBuckets)}
	for _, o := range opts {
		if o != nil {
			o(&cfg)
		}
	}
	var errs []error
	if reg == nil {
		errs = append(errs, errors.New("sluice/prom: New(nil): a Registerer is required"))
	}
	if len(cfg.buckets) == 0 {
		errs = append(errs, errors.New("sluice/prom: WithRTTBuckets: no buckets"))
	}
	for i, b := range cfg.buckets {
		if !(b > 0) || (i > 0 && b <= cfg.buckets[i-1]) {
			errs = append(errs, fmt.Errorf("sluice/prom: WithRTTBuckets %v: bounds must be positive and strictly increasing", cfg.buckets))
			break
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	cl := cfg.constLabels
	counter := func(name, help string, labels ...string) *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help, ConstLabels: cl}, labels)
	}
	m := &Metrics{
		limit:    prometheus.NewDesc("sluice_gate_limit", "Current concurrency limit of the adaptive gate.", nil, cl),
		inFlight: prometheus.NewDesc("sluice_gate_in_flight", "Tokens of the adaptive gate held now.", nil, cl),
		queued:   prometheus.NewDesc("sluice_gate_queue_length", "Callers waiting in the adaptive gate's queue now.", nil, cl),
		cutoff:   prometheus.NewDesc("sluice_shed_cutoff_level", "Load shedder cutoff: requests at or above this level are shed.", nil, cl),
		rtt: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "sluice_gate_rtt_seconds", Help: "Round-trip time of requests released with Success by the adaptive gate.",
			ConstLabels: cl, Buckets: cfg.buckets,
		}),
		gateDecision: counter("sluice_gate_decisions_total", "Acquisitions of the adaptive gate, by partition and outcome.", "partition", "outcome"),
		releases:     counter("sluice_gate_releases_total", "Tokens released to the adaptive gate, by kind.", "kind"),
		limitChanges: counter("sluice_gate_limit_changes_total", "Changes of the adaptive gate's limit, by direction.", "direction"),
		rateDecision: counter("sluice_ratelimit_decisions_total", "Rate limiter decisions, by limiter and outcome.", "limiter", "outcome"),
		leaseExpiry:  counter("sluice_ratelimit_lease_expiries_total", "Concurrency leases taken back because they expired, by limiter.", "limiter"),
		degraded:     counter("sluice_ratelimit_degraded_total", "Rate limiter decisions made by the failure policy of a store that failed, by limiter.", "limiter"),
		shedDecision: counter("sluice_shed_decisions_total", "Load shedder decisions, by priority and outcome.", "priority", "outcome"),
		storeCall: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "sluice_store_call_seconds", Help: "Duration of the calls of a rate-limit store to Redis, by operation and outcome.",
			ConstLabels: cl, Buckets: StoreCallBuckets,
		}, []string{"op", "outcome"}),
		storeErrors:  counter("sluice_store_errors_total", "Calls of a rate-limit store to Redis that did not end ok, by operation and outcome.", "op", "outcome"),
		storeDegrade: counter("sluice_store_degraded_total", "Requests decided by a rate-limit store's failure policy, by policy and cause.", "policy", "cause"),
	}
	if err := reg.Register(collector{m}); err != nil {
		return nil, fmt.Errorf("sluice/prom: registering the metrics: %w", err)
	}
	// Children exist only once registration has proved the labels valid.
	for r := range metrics.GateReleases {
		m.release[r] = m.releases.WithLabelValues(metrics.GateRelease(r).String())
	}
	m.up = m.limitChanges.WithLabelValues("up")
	m.down = m.limitChanges.WithLabelValues("down")
	m.partitions.New = func(p string) *[metrics.GateDecisions]prometheus.Counter {
		var c [metrics.GateDecisions]prometheus.Counter
		for d := range c {
			c[d] = m.gateDecision.WithLabelValues(p, metrics.GateDecision(d).String())
		}
		return &c
	}
	m.limiters.New = func(l string) *[metrics.RateOutcomes]prometheus.Counter {
		var c [metrics.RateOutcomes]prometheus.Counter
		for o := range c {
			c[o] = m.rateDecision.WithLabelValues(l, metrics.RateOutcome(o).String())
		}
		return &c
	}
	m.leases.New = func(l string) *prometheus.Counter {
		c := m.leaseExpiry.WithLabelValues(l)
		return &c
	}
	m.degradedBy.New = func(l string) *prometheus.Counter {
		c := m.degraded.WithLabelValues(l)
		return &c
	}
	m.priorities.New = func(p string) *[metrics.ShedDecisions]prometheus.Counter {
		var c [metrics.ShedDecisions]prometheus.Counter
		for d := range c {
			c[d] = m.shedDecision.WithLabelValues(p, metrics.ShedDecision(d).String())
		}
		return &c
	}
	m.storeOps.New = func(op string) *storeOp {
		var o storeOp
		for k := range metrics.StoreOutcomes {
			out := metrics.StoreOutcome(k)
			o.seconds[k] = m.storeCall.WithLabelValues(op, out.String())
			if out != metrics.StoreOK && out != metrics.StoreBreakerOpen {
				o.errors[k] = m.storeErrors.WithLabelValues(op, out.String())
			}
		}
		return &o
	}
	m.degradeBy.New = func(policy string) *[metrics.StoreOutcomes]prometheus.Counter {
		var c [metrics.StoreOutcomes]prometheus.Counter
		for k := range c {
			if out := metrics.StoreOutcome(k); out != metrics.StoreOK {
				c[k] = m.storeDegrade.WithLabelValues(policy, out.String())
			}
		}
		return &c
	}
	return m, nil
}

// AttachGate makes the gauges sluice_gate_limit, sluice_gate_in_flight and
// sluice_gate_queue_length read g at every scrape. Until a gate is
// attached (and after AttachGate(nil)) they are not exported. Attach the
// gate whose observer is m, so the gauges and counters describe one gate.
// g is an *adaptive.Limiter, or anything else that implements
// metrics.GateState.
func (m *Metrics) AttachGate(g metrics.GateState) { m.gate.Store(g) }

// AttachShedder makes the gauge sluice_shed_cutoff_level read s at every
// scrape. Until a shedder is attached (and after AttachShedder(nil)) it is
// not exported.
// s is a *shed.Shedder, or anything else that implements metrics.ShedState.
func (m *Metrics) AttachShedder(s metrics.ShedState) { m.shedder.Store(s) }

// GateDecision counts an acquisition in sluice_gate_decisions_total.
func (m *Metrics) GateDecision(d metrics.GateDecision, partition string, _ time.Duration) {
	if int(d) < metrics.GateDecisions {
		m.partitions.Get(partition)[d].Inc()
		return
	}
	m.gateDecision.WithLabelValues(partition, d.String()).Inc() // a decision newer than this package
}

// GateRelease counts a release in sluice_gate_releases_total and, for
// Success, observes its round-trip time in sluice_gate_rtt_seconds.
func (m *Metrics) GateRelease(r metrics.GateRelease, rtt time.Duration) {
	if int(r) < metrics.GateReleases {
		m.release[r].Inc()
	} else {
		m.releases.WithLabelValues(r.String()).Inc()
	}
	if r == metrics.Success {
		m.rtt.Observe(rtt.Seconds())
	}
}

// GateLimit counts a change of the limit in sluice_gate_limit_changes_total.
func (m *Metrics) GateLimit(old, new int) {
	switch {
	case new > old:
		m.up.Inc()
	case new < old:
		m.down.Inc()
	}
}

// RateDecision counts a decision in sluice_ratelimit_decisions_total, and
// in sluice_ratelimit_degraded_total when a failed store's failure policy
// made it.
func (m *Metrics) RateDecision(limiter string, d metrics.RateDecision) {
	o := d.Outcome()
	m.limiters.Get(limiter)[o].Inc()
	if d.Degraded {
		(*m.degradedBy.Get(limiter)).Inc()
	}
}

// LeaseExpired counts an expired lease in
// sluice_ratelimit_lease_expiries_total.
func (m *Metrics) LeaseExpired(limiter string) {
	(*m.leases.Get(limiter)).Inc()
}

// ShedDecision counts a decision in sluice_shed_decisions_total.
func (m *Metrics) ShedDecision(d metrics.ShedDecision, priority string) {
	if int(d) < metrics.ShedDecisions {
		m.priorities.Get(priority)[d].Inc()
		return
	}
	m.shedDecision.WithLabelValues(priority, d.String()).Inc()
}

// StoreCall observes a store's call in sluice_store_call_seconds and, when
// it did not end ok, counts it in sluice_store_errors_total.
func (m *Metrics) StoreCall(op string, outcome metrics.StoreOutcome, d time.Duration) {
	if int(outcome) >= metrics.StoreOutcomes { // an outcome newer than this package
		m.storeCall.WithLabelValues(op, outcome.String()).Observe(d.Seconds())
		m.storeErrors.WithLabelValues(op, outcome.String()).Inc()
		return
	}
	o := m.storeOps.Get(op)
	o.seconds[outcome].Observe(d.Seconds())
	if e := o.errors[outcome]; e != nil {
		e.Inc()
	}
}

// StoreDegraded counts n requests in sluice_store_degraded_total.
func (m *Metrics) StoreDegraded(policy string, cause metrics.StoreOutcome, n int) {
	if int(cause) >= metrics.StoreOutcomes || cause == metrics.StoreOK {
		m.storeDegrade.WithLabelValues(policy, cause.String()).Add(float64(n))
		return
	}
	m.degradeBy.Get(policy)[cause].Add(float64(n))
}

// collector is the one prometheus.Collector New registers: the vectors,
// the histogram, and the gauges read from the attached gate and shedder.
type collector struct{ m *Metrics }

func (c collector) vectors() []prometheus.Collector {
	m := c.m
	return []prometheus.Collector{m.rtt, m.gateDecision, m.releases, m.limitChanges, m.rateDecision, m.leaseExpiry, m.degraded, m.shedDecision,
		m.storeCall, m.storeErrors, m.storeDegrade}
}

// Describe sends the descriptors of every metric, whether exported yet or
// not.
func (c collector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.m.limit
	ch <- c.m.inFlight
	ch <- c.m.queued
	ch <- c.m.cutoff
	for _, v := range c.vectors() {
		v.Describe(ch)
	}
}

// Collect sends the counters and histogram, and the gauges of the attached
// gate and shedder, each read once.
func (c collector) Collect(ch chan<- prometheus.Metric) {
	m := c.m
	if g, ok := m.gate.Load(); ok {
		ch <- prometheus.MustNewConstMetric(m.limit, prometheus.GaugeValue, float64(g.Limit()))
		ch <- prometheus.MustNewConstMetric(m.inFlight, prometheus.GaugeValue, float64(g.InFlight()))
		ch <- prometheus.MustNewConstMetric(m.queued, prometheus.GaugeValue, float64(g.Queued()))
	}
	if s, ok := m.shedder.Load(); ok {
		ch <- prometheus.MustNewConstMetric(m.cutoff, prometheus.GaugeValue, float64(s.Cutoff()))
	}
	for _, v := range c.vectors() {
		v.Collect(ch)
	}
}
