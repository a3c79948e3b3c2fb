// Package gometrics exports what sluice's guards decide as metrics in a
// github.com/rcrowley/go-metrics registry.
//
// New registers the metrics on a go-metrics Registry and returns a *Metrics,
// which is a metrics.GateObserver, a metrics.RateObserver, a
// metrics.ShedObserver and a metrics.StoreObserver at once: hand it to
// adaptive.WithObserver, ratelimit.WithObserver, shed.WithObserver and
// redisstore.WithObserver. The gauges read a gate and a
// shedder when the registry is read; attach them with AttachGate and
// AttachShedder.
//
//	m, err := gometrics.New(gm.DefaultRegistry)
//	...
//	gate, err := adaptive.New(alg, adaptive.WithObserver(m))
//	...
//	m.AttachGate(gate)
//
// The metrics are those of package metrics/prom, under dotted names: the
// Prometheus name with dots between guard and metric and without the _total
// suffix, and the round-trip time in nanoseconds (go-metrics' unit for
// durations) rather than seconds. Each label becomes a trailing name
// segment holding its value, in the order shown, with "_" for an empty
// value (the gate's unnamed partition, an unnamed limiter); Name builds
// these names.
//
//	name                                            type       meaning
//	sluice.gate.limit                               gauge      the gate's current concurrency limit; 0 until a gate is attached
//	sluice.gate.in_flight                           gauge      tokens of the gate held now
//	sluice.gate.queue_length                        gauge      callers waiting in the gate's Acquire now
//	sluice.gate.rtt_ns                              histogram  round-trip time, in ns, of each token released with Success
//	sluice.gate.decisions.<partition>.<outcome>     counter    acquisitions: admitted, rejected, queue_full, deadline_unmeetable, queue_timeout, canceled
//	sluice.gate.releases.<kind>                     counter    tokens released: success, dropped, ignored
//	sluice.gate.limit_changes.<direction>           counter    changes of the limit: up, down
//	sluice.ratelimit.decisions.<limiter>.<outcome>  counter    rate-limit decisions: allowed, refused, shadow_refused
//	sluice.ratelimit.lease_expiries.<limiter>       counter    concurrency leases taken back because they expired
//	sluice.ratelimit.degraded.<limiter>             counter    decisions made by a failed store's failure policy (ratelimit.Result.Degraded)
//	sluice.shed.decisions.<priority>.<outcome>      counter    shedder decisions: admitted, shed, gate_full
//	sluice.shed.cutoff_level                        gauge      the shedder's cutoff level (shed.Levels(): nothing shed); 0 until a shedder is attached
//	sluice.store.call_ns.<op>.<outcome>             histogram  duration, in ns, of each call of a rate-limit store to Redis
//	sluice.store.errors.<op>.<outcome>              counter    calls to Redis that did not end ok: failed, timed_out, canceled
//	sluice.store.degraded.<policy>.<cause>          counter    requests a store's failure policy decided
//
// The gauges are go-metrics functional gauges: they read the attached gate
// or shedder whenever they are read.
//
// For example sluice.gate.decisions._.rejected, sluice.ratelimit.decisions.per_ip.refused,
// sluice.shed.decisions.sheddable.shed. limiter is the name given with
// ratelimit.WithName, used verbatim (a name with dots adds segments);
// priority is one of critical_plus, critical, sheddable_plus, sheddable.
// A refusal that shadow mode turned into an admission counts as
// shadow_refused, not as allowed. op, policy and cause are as in
// metrics/prom.
//
// New registers the names without labels and fails if any is taken. The
// counters of a label value (a partition, a limiter, a priority) are
// registered, all outcomes at once, on its first event; if such a name is
// already registered as a counter, that counter is shared, and if it is
// registered as something else, the counts go to a counter outside the
// registry. Once a label value has been seen, reporting allocates nothing,
// except that the RTT sample (go-metrics' exponentially decaying reservoir by
// default, which reads the wall clock) may allocate while it rescales.
package gometrics

import (
	"errors"
	"fmt"
	"strings"
	"time"

	gm "github.com/rcrowley/go-metrics"

	"github.com/sluicehq/sluice/metrics"
	"github.com/sluicehq/sluice/metrics/internal/attach"
	"github.com/sluicehq/sluice/metrics/internal/memo"
)

// Option configures New.
type Option func(*config)

type config struct {
	prefix string
	sample func() gm.Sample
}

// WithPrefix puts prefix in front of every name, for example "api." makes
// api.sluice.gate.limit, so that several Metrics can share a registry.
func WithPrefix(prefix string) Option { return func(c *config) { c.prefix = prefix } }

// WithSample sets the reservoir of the histograms: newSample is called by
// New for the RTT histogram, and once for each store call histogram on its
// first event. The default is gm.NewExpDecaySample(1028, 0.015), the
// reservoir go-metrics' own timers use.
func WithSample(newSample func() gm.Sample) Option {
	return func(c *config) { c.sample = newSample }
}

// Metrics reports the events of sluice's guards to a go-metrics registry. It
// implements metrics.GateObserver, metrics.RateObserver and
// metrics.ShedObserver; its methods are safe for concurrent use. Build it
// with New.
type Metrics struct {
	reg    gm.Registry
	prefix string

	gate    attach.Slot[metrics.GateState]
	shedder attach.Slot[metrics.ShedState]

	rtt      gm.Histogram
	release  [metrics.GateReleases]gm.Counter
	up, down gm.Counter

	partitions memo.Memo[[metrics.GateDecisions]gm.Counter]
	limiters   memo.Memo[[metrics.RateOutcomes]gm.Counter]
	leases     memo.Memo[gm.Counter]
	degraded   memo.Memo[gm.Counter]
	priorities memo.Memo[[metrics.ShedDecisions]gm.Counter]
	storeOps   memo.Memo[storeOp]
	degradeBy  memo.Memo[[metrics.StoreOutcomes]gm.Counter]
	newSample  func() gm.Sample
}

// storeOp holds the metrics of one store operation, by outcome.
type storeOp struct {
	ns     [metrics.StoreOutcomes]gm.Histogram
	errors [metrics.StoreOutcomes]gm.Counter // nil for StoreOK
}

var (
	_ metrics.GateObserver  = (*Metrics)(nil)
	_ metrics.RateObserver  = (*Metrics)(nil)
	_ metrics.ShedObserver  = (*Metrics)(nil)
	_ metrics.StoreObserver = (*Metrics)(nil)
)

// New builds the metrics and registers those without labels on reg. It
// fails, leaving reg as it was, when reg is nil, an option is invalid, or
// one of the names is taken (a gm.DuplicateMetric, wrapped).
func New(reg gm.Registry, opts ...Option) (*Metrics, error) {
	cfg := config{sample: func() gm.Sample { return gm.NewExpDecaySample(1028, 0.015) }}
	for _, o := range opts {
		if o != nil {
			o(&cfg)
		}
	}
	var errs []error
	if reg == nil {
		errs = append(errs, errors.New("sluice/gometrics: New(nil): a Registry is required"))
	}
	if cfg.sample == nil {
		errs = append(errs, errors.New("sluice/gometrics: WithSample(nil)"))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	m := &Metrics{reg: reg, prefix: cfg.prefix, rtt: gm.NewHistogram(cfg.sample()), up: gm.NewCounter(), down: gm.NewCounter(), newSample: cfg.sample}
	fixed := []struct {
		name   string
		metric any
	}{
		{"sluice.gate.limit", gm.NewFunctionalGauge(func() int64 { return m.gateRead(metrics.GateState.Limit) })},
		{"sluice.gate.in_flight", gm.NewFunctionalGauge(func() int64 { return m.gateRead(metrics.GateState.InFlight) })},
		{"sluice.gate.queue_length", gm.NewFunctionalGauge(func() int64 { return m.gateRead(metrics.GateState.Queued) })},
		{"sluice.shed.cutoff_level", gm.NewFunctionalGauge(func() int64 {
			if s, ok := m.shedder.Load(); ok {
				return int64(s.Cutoff())
			}
			return 0
		})},
		{"sluice.gate.rtt_ns", m.rtt},
		{"sluice.gate.limit_changes.up", m.up},
		{"sluice.gate.limit_changes.down", m.down},
	}
	for r := range m.release {
		m.release[r] = gm.NewCounter()
		fixed = append(fixed, struct {
			name   string
			metric any
		}{"sluice.gate.releases." + metrics.GateRelease(r).String(), m.release[r]})
	}
	for i, f := range fixed {
		if err := reg.Register(m.prefix+f.name, f.metric); err != nil {
			for _, g := range fixed[:i] {
				reg.Unregister(m.prefix + g.name)
			}
			return nil, fmt.Errorf("sluice/gometrics: registering %s: %w", m.prefix+f.name, err)
		}
	}
	m.partitions.New = func(p string) *[metrics.GateDecisions]gm.Counter {
		var c [metrics.GateDecisions]gm.Counter
		for d := range c {
			c[d] = m.counter("sluice.gate.decisions", p, metrics.GateDecision(d).String())
		}
		return &c
	}
	m.limiters.New = func(l string) *[metrics.RateOutcomes]gm.Counter {
		var c [metrics.RateOutcomes]gm.Counter
		for o := range c {
			c[o] = m.counter("sluice.ratelimit.decisions", l, metrics.RateOutcome(o).String())
		}
		return &c
	}
	m.leases.New = func(l string) *gm.Counter {
		c := m.counter("sluice.ratelimit.lease_expiries", l)
		return &c
	}
	m.degraded.New = func(l string) *gm.Counter {
		c := m.counter("sluice.ratelimit.degraded", l)
		return &c
	}
	m.priorities.New = func(p string) *[metrics.ShedDecisions]gm.Counter {
		var c [metrics.ShedDecisions]gm.Counter
		for d := range c {
			c[d] = m.counter("sluice.shed.decisions", p, metrics.ShedDecision(d).String())
		}
		return &c
	}
	m.storeOps.New = func(op string) *storeOp {
		var o storeOp
		for k := range metrics.StoreOutcomes {
			out := metrics.StoreOutcome(k)
			o.ns[k] = m.histogram("sluice.store.call_ns", op, out.String())
			if out != metrics.StoreOK && out != metrics.StoreBreakerOpen {
				o.errors[k] = m.counter("sluice.store.errors", op, out.String())
			}
		}
		return &o
	}
	m.degradeBy.New = func(policy string) *[metrics.StoreOutcomes]gm.Counter {
		var c [metrics.StoreOutcomes]gm.Counter
		for k := range c {
			if out := metrics.StoreOutcome(k); out != metrics.StoreOK {
				c[k] = m.counter("sluice.store.degraded", policy, out.String())
			}
		}
		return &c
	}
	return m, nil
}

// Name returns the registered name of the metric base with the given label
// values, as the package doc describes: Name("sluice.gate.decisions", "",
// "admitted") is "sluice.gate.decisions._.admitted", preceded by the prefix
// of WithPrefix.
func (m *Metrics) Name(base string, labels ...string) string {
	var b strings.Builder
	b.WriteString(m.prefix)
	b.WriteString(base)
	for _, l := range labels {
		if l == "" {
			l = "_"
		}
		b.WriteByte('.')
		b.WriteString(l)
	}
	return b.String()
}

// counter returns the registered counter of base and labels, registering
// a new one if the name is free (see the package doc for a taken name).
func (m *Metrics) counter(base string, labels ...string) gm.Counter {
	if c, ok := m.reg.GetOrRegister(m.Name(base, labels...), gm.NewCounter()).(gm.Counter); ok {
		return c
	}
	return gm.NewCounter()
}

// histogram returns the registered histogram of base and labels, as
// counter does for counters.
func (m *Metrics) histogram(base string, labels ...string) gm.Histogram {
	h := gm.NewHistogram(m.newSample())
	if got, ok := m.reg.GetOrRegister(m.Name(base, labels...), h).(gm.Histogram); ok {
		return got
	}
	return h
}

func (m *Metrics) gateRead(f func(metrics.GateState) int) int64 {
	if g, ok := m.gate.Load(); ok {
		return int64(f(g))
	}
	return 0
}

// AttachGate makes the gauges sluice.gate.limit, sluice.gate.in_flight and
// sluice.gate.queue_length read g whenever they are read; nil detaches it
// and they read 0. Attach the gate whose observer is m, so the gauges and
// counters describe one gate.
// g is an *adaptive.Limiter, or anything else that implements
// metrics.GateState.
func (m *Metrics) AttachGate(g metrics.GateState) { m.gate.Store(g) }

// AttachShedder makes the gauge sluice.shed.cutoff_level read s whenever it
// is read; nil detaches it and it reads 0.
// s is a *shed.Shedder, or anything else that implements metrics.ShedState.
func (m *Metrics) AttachShedder(s metrics.ShedState) { m.shedder.Store(s) }

// GateDecision counts an acquisition in
// sluice.gate.decisions.<partition>.<outcome>.
func (m *Metrics) GateDecision(d metrics.GateDecision, partition string, _ time.Duration) {
	if int(d) < metrics.GateDecisions {
		m.partitions.Get(partition)[d].Inc(1)
		return
	}
	m.counter("sluice.gate.decisions", partition, d.String()).Inc(1) // a decision newer than this package
}

// GateRelease counts a release in sluice.gate.releases.<kind> and, for
// Success, records its round-trip time in sluice.gate.rtt_ns.
func (m *Metrics) GateRelease(r metrics.GateRelease, rtt time.Duration) {
	if int(r) < metrics.GateReleases {
		m.release[r].Inc(1)
	} else {
		m.counter("sluice.gate.releases", r.String()).Inc(1)
	}
	if r == metrics.Success {
		m.rtt.Update(int64(rtt))
	}
}

// GateLimit counts a change of the limit in
// sluice.gate.limit_changes.<direction>.
func (m *Metrics) GateLimit(old, new int) {
	switch {
	case new > old:
		m.up.Inc(1)
	case new < old:
		m.down.Inc(1)
	}
}

// RateDecision counts a decision in
// sluice.ratelimit.decisions.<limiter>.<outcome>.
func (m *Metrics) RateDecision(limiter string, d metrics.RateDecision) {
	o := d.Outcome()
	m.limiters.Get(limiter)[o].Inc(1)
	if d.Degraded {
		(*m.degraded.Get(limiter)).Inc(1)
	}
}

// LeaseExpired counts an expired lease in
// sluice.ratelimit.lease_expiries.<limiter>.
func (m *Metrics) LeaseExpired(limiter string) {
	(*m.leases.Get(limiter)).Inc(1)
}

// ShedDecision counts a decision in
// sluice.shed.decisions.<priority>.<outcome>.
func (m *Metrics) ShedDecision(d metrics.ShedDecision, priority string) {
	if int(d) < metrics.ShedDecisions {
		m.priorities.Get(priority)[d].Inc(1)
		return
	}
	m.counter("sluice.shed.decisions", priority, d.String()).Inc(1)
}

// StoreCall records a store's call in sluice.store.call_ns.<op>.<outcome>
// and, when it did not end ok, counts it in
// sluice.store.errors.<op>.<outcome>.
func (m *Metrics) StoreCall(op string, outcome metrics.StoreOutcome, d time.Duration) {
	if int(outcome) >= metrics.StoreOutcomes { // an outcome newer than this package
		m.histogram("sluice.store.call_ns", op, outcome.String()).Update(int64(d))
		m.counter("sluice.store.errors", op, outcome.String()).Inc(1)
		return
	}
	o := m.storeOps.Get(op)
	o.ns[outcome].Update(int64(d))
	if e := o.errors[outcome]; e != nil {
		e.Inc(1)
	}
}

// StoreDegraded counts n requests in sluice.store.degraded.<policy>.<cause>.
func (m *Metrics) StoreDegraded(policy string, cause metrics.StoreOutcome, n int) {
	if int(cause) >= metrics.StoreOutcomes || cause == metrics.StoreOK {
		m.counter("sluice.store.degraded", policy, cause.String()).Inc(int64(n))
		return
	}
	m.degradeBy.Get(policy)[cause].Inc(int64(n))
}
