// Package vegas is a TCP-Vegas-style adaptive concurrency algorithm for
// sluice's gate (adaptive.Limiter). From each window it estimates how many
// requests are queued rather than served,
//
//	queue = L · (1 − floor / rtt)
//
// and keeps that queue between two thresholds, alpha and beta, that grow
// with the limit. The floor, the service's no-load RTT, is the gate's
// (adaptive.Sample.Floor): learnt only at low concurrency, and probed by
// the gate when it is in doubt.
//
// It fixes the known weaknesses of Netflix's VegasLimit and its ports:
//
//   - slow start: the limit doubles per window while the gate is full and the
//     queue is empty, until the first congestion signal (Netflix #35);
//   - drops count: a window with dropped (timed-out) requests shrinks the
//     limit by the drop share — when its successes queued too: successes at
//     the floor beside drops are a service that fails on its own (a
//     dependency timing out), which refusing callers would not cure;
//   - no baseline drift: the floor is the gate's, which a saturated window
//     never raises (it is never reset to the current, possibly overloaded,
//     RTT); when the service itself gets slower the gate's probe measures
//     the new floor at low concurrency, without pinning the limit to a tiny
//     value;
//   - never below the knee: when the gate is saturated the limit stays at or
//     above the least limit that keeps the service saturated
//     (adaptive.Sample.SaturatingLimit), and no RTT bound asks for less than
//     the floor, so an objective the service cannot meet refuses no work it
//     could do;
//   - no inflation: the limit grows only in windows where the gate was full,
//     or nearly (peak in flight ≥ ¾ of the limit) with an empty queue;
//   - fast decrease and recovery: a queue above beta is removed in one step
//     (L − (queue − beta)), not by log10(L) per window, and growth is
//     exponential again after a recovery (slow start re-arms when the queue
//     has stayed empty for a while);
//   - no noise read as a queue: the window's RTT is a mean of its n
//     requests and the gate's floor a mean of m (Sample.FloorCount), so
//     the estimate is known to about L·√(1/n + 1/m); where that exceeds
//     alpha the excess is taken off (a window of a few dozen requests on
//     many cores, or a floor a cold start measured over a few dozen, no
//     longer holds the limit at the mean demand).
package vegas

import (
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/sluicehq/sluice/adaptive"
)

// Vegas is the algorithm. Build it with New and pass it to adaptive.New; like
// every adaptive.Algorithm it belongs to one gate.
type Vegas struct {
	adaptive.Binding // one gate per Vegas: adaptive.New refuses a second

	initial   int
	alpha     func(limit float64) float64
	beta      func(limit float64) float64
	threshold func(limit float64) float64
	increase  func(limit float64) float64
	smoothing float64
	dropTol   float64
	slack     float64
	maxRTT    time.Duration
	err       error

	limit     float64
	floor     float64 // ns: the no-load RTT in use: the gate's (Sample.Floor) or, without one, own
	own       float64 // ns: the fallback estimate, for a gate that reports no floor
	smoothed  float64 // ns, EMA factor 1/5 of window RTTs: a minimum of noisy window RTTs would be biased low
	slowStart bool
	calm      int     // consecutive full windows with an empty queue
	seen      int     // windows with samples
	pressure  float64 // EMA of the share of refused callers
}

// Option configures a Vegas.
type Option func(*Vegas)

// Log10 returns max(1, ⌊log10 x⌋), the scale of Netflix's default thresholds.
func Log10(x float64) float64 { return max(1, math.Floor(math.Log10(x))) }

// WithInitialLimit sets the starting limit (default 20).
func WithInitialLimit(n int) Option { return func(v *Vegas) { v.initial = n } }

// WithAlpha sets the queue below which the limit grows (default 3·Log10(L)).
func WithAlpha(f func(limit float64) float64) Option { return func(v *Vegas) { v.alpha = f } }

// WithBeta sets the queue above which the limit shrinks (default 6·Log10(L)).
func WithBeta(f func(limit float64) float64) Option { return func(v *Vegas) { v.beta = f } }

// WithThreshold sets the queue at or below which the limit grows fast, by
// beta (default Log10(L)).
func WithThreshold(f func(limit float64) float64) Option { return func(v *Vegas) { v.threshold = f } }

// WithIncrease sets the additive step when the queue is below alpha (default
// Log10(L)).
func WithIncrease(f func(limit float64) float64) Option { return func(v *Vegas) { v.increase = f } }

// WithSmoothing sets the weight of each window's proposal (default 1: apply
// it whole; in (0, 1]).
func WithSmoothing(s float64) Option { return func(v *Vegas) { v.smoothing = s } }

// WithDropTolerance sets the share of dropped requests in a window that is
// not read as congestion (default 0.01; in [0, 1)).
func WithDropTolerance(x float64) Option { return func(v *Vegas) { v.dropTol = x } }

// WithSlack sets how much beta and the RTT bound loosen while few callers are
// refused (default 0.4: 1.4× when nobody is refused, 1× once 5% are; in
// [0, 1]).
func WithSlack(x float64) Option { return func(v *Vegas) { v.slack = x } }

// WithMaxRTT sets an absolute bound: a window slower than d is treated as
// congested whatever the queue estimate, and the limit shrinks in proportion
// (default: none). Derive it from the latency objective.
func WithMaxRTT(d time.Duration) Option { return func(v *Vegas) { v.maxRTT = d } }

// WithProportional sets thresholds that keep the queue between lo·L and
// hi·L: alpha = lo·L, beta = hi·L (and threshold = lo·L/2), in one option.
// With lo = 0.25 and hi = 0.5 the RTT stays between 1.33 and 2 times the
// no-load RTT, which, unlike the log10 defaults, lets a busy but healthy
// server keep the queue its arrivals naturally form. Later WithAlpha,
// WithBeta or WithThreshold options override the part they set.
func WithProportional(lo, hi float64) Option {
	return func(v *Vegas) {
		v.alpha = func(l float64) float64 { return lo * l }
		v.beta = func(l float64) float64 { return hi * l }
		v.threshold = func(l float64) float64 { return lo * l / 2 }
	}
}

// Proportional returns WithProportional(lo, hi) as a slice.
//
// Deprecated: use WithProportional, one option.
func Proportional(lo, hi float64) []Option { return []Option{WithProportional(lo, hi)} }

// New returns a Vegas algorithm with Netflix's log10 thresholds by default.
// Invalid options are reported by Validate, which adaptive.New calls.
func New(opts ...Option) *Vegas {
	v := &Vegas{
		initial:   defaultInitial,
		alpha:     func(l float64) float64 { return defaultAlpha * Log10(l) },
		beta:      func(l float64) float64 { return defaultBeta * Log10(l) },
		threshold: Log10,
		increase:  Log10,
		smoothing: defaultSmoothing,
		dropTol:   defaultDropTolerance,
		slack:     defaultSlack,
	}
	for _, o := range opts {
		if o != nil {
			o(v)
		}
	}
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf("sluice/vegas: "+format, args...)) }
	if v.initial < 1 {
		bad("initial limit %d: must be at least 1", v.initial)
	}
	if v.alpha == nil || v.beta == nil || v.threshold == nil || v.increase == nil {
		bad("nil threshold or increase function")
	} else {
		for _, l := range []float64{1, 10, 100, 1000, 10000} {
			a, b, th, inc := v.alpha(l), v.beta(l), v.threshold(l), v.increase(l)
			if !(th >= 0 && th <= a && a < b && inc > 0) || math.IsNaN(a+b+th+inc) {
				bad("at limit %v: need 0 ≤ threshold ≤ alpha < beta and increase > 0 (got %v, %v, %v, %v)", l, th, a, b, inc)
				break
			}
		}
	}
	if !(v.smoothing > 0 && v.smoothing <= 1) {
		bad("smoothing %v: must be in (0, 1]", v.smoothing)
	}
	if !(v.dropTol >= 0 && v.dropTol < 1) {
		bad("drop tolerance %v: must be in [0, 1)", v.dropTol)
	}
	if !(v.slack >= 0 && v.slack <= 1) {
		bad("slack %v: must be in [0, 1]", v.slack)
	}
	if v.maxRTT < 0 {
		bad("max RTT %v: must not be negative", v.maxRTT)
	}
	v.err = errors.Join(errs...)
	v.limit = float64(v.initial)
	v.slowStart = true
	return v
}

// Validate reports the invalid options New was given.
func (v *Vegas) Validate() error {
	if v == nil {
		return errors.New("sluice/vegas: nil *Vegas: build it with New")
	}
	return v.err
}

// InitialLimit returns the starting limit.
func (v *Vegas) InitialLimit() int { return v.initial }

// NoLoadRTT returns the no-load RTT the algorithm works with: the gate's
// floor (adaptive.Sample.Floor) when the gate reports one, else its own
// estimate (0 before any sample).
func (v *Vegas) NoLoadRTT() time.Duration { return time.Duration(v.floor) }

// ProbesFloor reports that Vegas moves the limit on the gate's floor, so the
// gate probes it (adaptive.FloorProber).
func (v *Vegas) ProbesFloor() bool { return true }

// Queue is the Vegas queue estimate: how many of the L requests in flight
// are waiting rather than being served, L·(1 − noload/rtt).
func Queue(limit, noload, rtt float64) float64 {
	if rtt <= 0 {
		return 0
	}
	return limit * (1 - noload/rtt)
}

// queue is the window's queue estimate, read no finer than its noise:
//
//	queue = Queue(L, floor, rtt) − max(0, L·√(1/n + 1/m) − alpha(L)),  at least 0
//
// The window's RTT is a mean of its n successes, and the gate's floor a
// mean of m requests (adaptive.Sample.FloorCount; without it, only the
// window's noise counts): their ratio is known to about one standard error
// of the two, and so the estimate to about L·√(1/n + 1/m) requests (see
// queueNoise); the part of that noise beyond alpha, the least queue Vegas
// holds, would read a window with no queue as one to hold or cut on.
func (v *Vegas) queue(L, rtt float64, n, floorN int) float64 {
	inv := 1 / float64(n)
	if floorN > 0 {
		inv += 1 / float64(floorN)
	}
	noise := L * queueNoise * math.Sqrt(inv)
	return max(0, Queue(L, v.floor, rtt)-max(0, noise-v.alpha(L)))
}

// Update moves the limit for one window:
//
//	drop share d > dropTol, queued    →  L·(1 − (d − dropTol))
//	peak in flight < ¾L, none refused →  L        (no growth beyond demand, no shrinking either)
//	nearly full (peak ≥ ¾L), queue    →  L
//	  above threshold(L)
//	rtt' > r·bound                    →  L·r·bound/rtt'   (1.03·floor when the floor sets the bound)
//	rtt' in (0.9, 1]·r·bound          →  L   (dead band; none when the floor sets the bound)
//	queue ≤ threshold(L), floor sets  →  L + increase(L)
//	  the bound, L at the knee
//	queue ≤ threshold(L), slow start  →  2L       (re-armed after 10 calm windows)
//	queue ≤ threshold(L) 3+ windows   →  L + beta(L)
//	queue ≤ threshold(L)              →  L + increase(L)
//	queue ≤ beta(L), few refused      →  L + max(alpha(L), increase(L))
//	queue < alpha(L)                  →  L + increase(L)
//	queue > r·beta(L)                 →  max(L/2, L − (queue − r·beta(L)))
//	otherwise                         →  L
//
// with queue the window's estimate (see queue: Queue(L, floor, rtt), read
// no finer than its noise), bound = max(WithMaxRTT, floor) (no bound
// without WithMaxRTT), r = relief(s), rtt' = rtt under real overload
// (r = 1) and max(smoothed RTT, min(rtt, r·bound)) while few are refused
// (only slowness that persists counts), "queued" = the successes' mean RTT
// shows a queue (see queued), and
//
//	L' = L + smoothing·(proposal − L),  at least Sample.SaturatingLimit when the gate is saturated.
//
// Windows of the gate's probe (adaptive.Sample.Probing) teach nothing and
// move nothing.
func (v *Vegas) Update(s adaptive.Sample) int {
	if s.Probing {
		return int(math.Round(v.limit))
	}
	if int(math.Round(v.limit)) != s.Limit {
		v.limit = float64(s.Limit) // the gate clamped it: follow
	}
	L := v.limit
	v.notePressure(s)
	share := float64(s.Dropped) / float64(s.Dropped+s.Count)
	if s.Count == 0 {
		if share > v.dropTol {
			v.slowStart = false
			v.limit = max(1, math.Floor(L/2))
		}
		return int(v.limit)
	}
	rtt := float64(s.RTT)
	full := s.Saturated()
	v.learn(rtt, share, full, s)
	q := v.queue(L, rtt, s.Count, s.FloorCount)
	relief := v.relief(s)
	bound := v.bound()
	// Under real overload judge each window; while few are refused, only
	// slowness that persists (the smoothed RTT), not the queue spike of a
	// busy but healthy server: one slow window must not cut the limit by a
	// third at 0.9× capacity.
	judged := rtt
	if relief > 1 && bound > 0 {
		judged = max(v.smoothed, min(rtt, relief*bound))
	}
	dropped := share > v.dropTol && v.queued(s, L)
	var p float64
	switch {
	case dropped:
		v.slowStart = false
		p = L * (1 - (share - v.dropTol))
	case !full && (float64(s.MaxInFlight) < nearFull*L || q > v.threshold(L)):
		p = L
	case bound > 0 && judged > relief*v.cutAt(bound):
		v.slowStart = false
		p = L * relief * v.cutAt(bound) / judged
	case bound > 0 && bound > v.floor && judged > deadBand*relief*bound:
		p = L // dead band just under the bound: hold rather than oscillate
	case q <= v.threshold(L):
		switch {
		case bound > 0 && bound <= v.floor && L >= float64(s.SaturatingLimit()):
			// At the knee of a service slower than the objective: the
			// RTT there is its noise around the floor; one step at a time.
			p = L + v.increase(L)
		case v.slowStart && full:
			p = 2 * L
		case v.calm >= calmBeta:
			p = L + v.beta(L) // the queue has stayed empty: grow fast
		default:
			p = L + v.increase(L) // one quiet window may be noise
		}
	case relief > 1 && q <= v.beta(L):
		// While only a few are refused, anywhere up to beta: the refusals
		// show demand just above the limit and the latency is acceptable, so
		// make room quickly.
		p = L + max(v.alpha(L), v.increase(L))
	case q < v.alpha(L):
		p = L + v.increase(L)
	case q > relief*v.beta(L):
		v.slowStart = false
		p = max(L/2, L-(q-relief*v.beta(L)))
	default:
		p = L
	}
	// Slow start re-arms after a calm spell, so that growing back after a
	// recovery is exponential again.
	if full && q <= v.threshold(L) && !dropped {
		v.calm++
		if v.calm >= calmRearm {
			v.slowStart = true
		}
	} else {
		v.calm = 0
	}
	next := L + v.smoothing*(p-L)
	if p > L {
		next = max(next, L+1)
	} else if p < L-0.5 {
		next = min(next, L-1)
	}
	if full {
		next = max(next, float64(s.SaturatingLimit()))
	}
	v.limit = max(1, next)
	return int(math.Round(v.limit))
}

// relief loosens beta and the RTT bound while few callers are refused:
//
//	relief(s) = 1 + slack · (1 − min(1, pressure / 5%))
//
// where pressure is the smoothed share of refused callers.
//
// Under real overload (5% or more refused) it is 1; when hardly anyone is
// refused, the queue is the normal jitter of a busy but healthy server, and
// shrinking would only refuse callers the server could have served.
func (v *Vegas) relief(s adaptive.Sample) float64 {
	return 1 + v.slack*(1-min(1, v.pressure/reliefAt))
}

// notePressure updates the smoothed share of refused callers (EMA, factor
// 0.3): a single window with a queue spike must not look like overload.
func (v *Vegas) notePressure(s adaptive.Sample) {
	total := float64(s.Rejected + s.Count + s.Dropped)
	if total > 0 {
		v.pressure += pressureAlpha * (float64(s.Rejected)/total - v.pressure)
	}
}

// bound is the WithMaxRTT bound, raised to the floor when the service itself
// is slower (no bound can ask for less than the service takes: a window at
// the floor has no queue to remove). 0: no bound.
func (v *Vegas) bound() float64 {
	if v.maxRTT == 0 {
		return 0
	}
	return max(float64(v.maxRTT), v.floor)
}

// cutAt is the RTT above which the bound cuts the limit: the bound, or, when
// the floor sets it (the service is slower than WithMaxRTT allows), 3% above
// the floor — the histogram's resolution — with no dead band under it: at the
// floor there is no queue, and the queue rules decide (a dead band there would
// hold a limit too small for good).
func (v *Vegas) cutAt(bound float64) float64 {
	if bound <= v.floor {
		return floorRes * v.floor
	}
	return bound
}

// queued reports whether the window's successes queued: the Vegas queue
// estimate on their mean RTT against the floor's (adaptive.Sample.FloorMean)
// above threshold(L). The mean, not the window's RTT statistic: a median
// hardly moves when a few requests queue behind slow ones. Without a floor
// from the gate, every window may have queued.
func (v *Vegas) queued(s adaptive.Sample, L float64) bool {
	return s.FloorMean <= 0 || Queue(L, float64(s.FloorMean), float64(s.AvgRTT)) > v.threshold(L)
}

// learn keeps the smoothed RTT and the floor: the gate's (Sample.Floor)
// when it reports one. Without one (a gate that has not measured it yet, or
// Update driven by hand) Vegas keeps its own estimate: it falls at once to a
// faster smoothed RTT (never from a window with drops, whose successes may
// be fast because the slow ones were dropped), and the first uncongested
// windows seed it.
func (v *Vegas) learn(rtt, share float64, full bool, s adaptive.Sample) {
	if v.smoothed == 0 {
		v.smoothed = rtt
	}
	v.smoothed += smoothAlpha * (rtt - v.smoothed)
	if share <= v.dropTol {
		v.seen++
		if v.own == 0 || (v.seen <= warmWindows && !full) || v.smoothed < v.own {
			// The first uncongested windows only seed the average: a minimum
			// taken over them would keep the luck of the first few samples.
			v.own = v.smoothed
		}
	}
	v.floor = v.own
	if s.Floor > 0 {
		v.floor = float64(s.Floor)
	}
}

// The tuned numbers of Vegas, in one table: the defaults of its options,
// then the constants of its rules.
const (
	// defaultInitial: the starting limit, for a service of unknown size
	// (the gate's probe finds the knee from there on a cold start).
	defaultInitial = 20
	// defaultAlpha and defaultBeta: Netflix's thresholds, 3 and 6 times
	// Log10(L) requests queued; threshold and increase are Log10(L).
	defaultAlpha = 3
	defaultBeta  = 6
	// defaultSmoothing: each window's proposal is applied whole (a queue
	// above beta is removed in one step).
	defaultSmoothing = 1
	// defaultDropTolerance: a few requests always time out.
	defaultDropTolerance = 0.01
	// defaultSlack: beta and the bound loosen by up to 1.4× while few
	// callers are refused (see relief).
	defaultSlack = 0.4

	// nearFull: a window whose peak in flight reached this share of the
	// limit may grow it, so that Poisson peaks over a limit sized to the
	// mean demand are not refused; growth stays bounded by the demand seen
	// (about 4/3 of its peaks).
	nearFull = 0.75
	// deadBand: an RTT within this share of the bound holds the limit,
	// rather than oscillate across it.
	deadBand = 0.9
	// floorRes: an RTT within 3% of the floor is the floor (the resolution
	// of the gate's percentile histogram).
	floorRes = 1.03
	// calmBeta and calmRearm: after calmBeta full windows in a row with an
	// empty queue the limit grows by beta (one quiet window may be noise);
	// after calmRearm, slow start re-arms (growing back after a recovery is
	// exponential again).
	calmBeta  = 3
	calmRearm = 10
	// smoothAlpha: the EMA factor of the smoothed RTT (about five windows:
	// "slowness that persists" while few are refused).
	smoothAlpha = 0.2
	// pressureAlpha and reliefAt: the share of refused callers is smoothed
	// over about three windows (a single window with a queue spike must not
	// look like overload), and relief is gone once it reaches reliefAt: at
	// 5% refused the demand is really above the limit.
	pressureAlpha = 0.3
	reliefAt      = 0.05
	// warmWindows: the fallback floor estimate (no floor from the gate) is
	// seeded by the first warmWindows unsaturated windows.
	warmWindows = 5
	// queueNoise: the window's RTT is a mean of its n successes, known to
	// about one standard error (its relative noise 1/√n for service times
	// whose spread is their mean, the exponential's), and so is the queue
	// estimate, to L/√n requests. Where that noise exceeds alpha, the
	// least queue Vegas holds, a window with no queue reads as one to hold
	// or cut on; the excess, L/√n − alpha, is taken off the estimate. On
	// 64 cores a window holds a few dozen requests (L/√n = 8 at L = 50 over
	// 40, alpha 5.1): the limit held at the mean demand and refused its
	// peaks. Where alpha is larger than the noise (WithProportional's
	// shares of L, or windows of hundreds), nothing changes. Measured on
	// the zoo matrix (worst of 5 seeds): vegas.New() 145 → 155 rows, the
	// matrix's recommended configuration 174 → 174, `sluice sim -seeds
	// 20` unchanged (714). Taking the whole noise off (the floor read as
	// floor·(1 + 1/√n)): 160 and 158 rows (the recommended configuration's
	// queue between 0.2 and 0.5 of L moved up by a tenth of L, and its p99
	// with it); two standard errors, 163 rows and 712 seed-passes.
	// The floor is a mean too, of m requests (a probe's few hundred, or
	// fewer after a cold start), and the ratio of two means is known to
	// √(1/n + 1/m): on 64 cores at lognormal service a cold start's floor
	// read 18% low, a queue of a fifth of L that was not there, and the
	// limit held at half the knee refusing 56% at 0.95× (gc/64/lognormal).
	// With the floor's noise: vegas.New() 155 → 158 rows, the recommended
	// configuration 174 → 174, `sluice sim -seeds 20 -policy vegas`
	// unchanged (122).
	queueNoise = 1
)
