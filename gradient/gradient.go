// Package gradient is a Gradient2-style adaptive concurrency algorithm for
// sluice's gate (adaptive.Limiter): it compares each window's round-trip time
// with the service's floor and moves the limit by their ratio, so the limit
// settles where queueing starts to add latency.
//
// It fixes the known weaknesses of Netflix's Gradient2 and its ports:
//
//   - slow start: the limit doubles per window while the gate is full and
//     latency is flat, until the first congestion signal;
//   - drops count: a window with dropped (timed-out) requests is congested,
//     however fast its successful requests were;
//   - no baseline drift: the baseline is the gate's measured floor
//     (adaptive.Sample.Floor), learnt only at low concurrency and raised
//     only when a probe of the gate confirms that the service got slower;
//     WithMaxRTT adds an absolute bound from the latency objective;
//   - never below the knee: when the gate is saturated the limit stays at
//     or above the least limit that keeps the service saturated
//     (adaptive.Sample.SaturatingLimit), whatever the bound asks, so an
//     objective the service cannot meet refuses no work it could do;
//   - no creep: the headroom term is added only when there is no queueing, so
//     steady moderate overload does not push the limit up window by window;
//   - no needless queue under heavy overload: while most callers have been
//     refused for a couple of seconds the gate is always full, and the
//     bound is tightened by 15% (lower latency, the same throughput);
//   - no inflation: the limit grows only while the gate is (nearly) full —
//     its peak in flight at ¾ of the limit or more — so it never runs far
//     ahead of the demand it has seen (at most about 4/3 of its peaks).
package gradient

import (
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/sluicehq/sluice/adaptive"
)

// Gradient is the algorithm. Build it with New and pass it to adaptive.New;
// like every adaptive.Algorithm it belongs to one gate.
type Gradient struct {
	adaptive.Binding // one gate per Gradient: adaptive.New refuses a second

	initial   int
	tol       float64
	slack     float64
	smoothing float64
	minGrad   float64
	baseAlpha float64 // EMA factor of the baseline
	maxRTT    time.Duration
	headroom  func(limit float64) float64
	err       error

	limit     float64
	floor     float64 // ns: the no-load RTT in use, the gate's (Sample.Floor) or, without one, own
	own       float64 // ns: the fallback estimate, for a gate that reports no floor; 0 until the first sample
	smoothed  float64 // ns: EMA of the window RTTs, factor 1/2
	slow      float64 // ns: EMA of the window RTTs, factor 1/5
	pressure  float64 // EMA of the share of refused callers, factor 0.3
	sustained float64 // the same, factor 0.05 (about 2 s of 100 ms windows)
	seen      int     // windows with samples
	slowStart bool
	dropTol   float64
}

// Option configures a Gradient.
type Option func(*Gradient)

// WithInitialLimit sets the starting limit (default 20).
func WithInitialLimit(n int) Option { return func(g *Gradient) { g.initial = n } }

// WithTolerance sets how much slower than the baseline a window may be before
// the limit shrinks (default 1.6: RTT up to 1.6 times the floor is
// acceptable queueing; must be ≥ 1).
func WithTolerance(t float64) Option { return func(g *Gradient) { g.tol = t } }

// WithDropTolerance sets the share of dropped requests in a window that is
// not read as congestion (default 0.01: a few requests always time out; in
// [0, 1)).
func WithDropTolerance(x float64) Option { return func(g *Gradient) { g.dropTol = x } }

// WithSlack sets how much more queueing is tolerated while few callers are
// refused (default 0.4: bounds 1.4× looser when nobody is refused, none
// looser once 5% are; in [0, 1]).
func WithSlack(x float64) Option { return func(g *Gradient) { g.slack = x } }

// WithSmoothing sets the weight of each window's proposal in the new limit
// (default 0.5; in (0, 1]).
func WithSmoothing(s float64) Option { return func(g *Gradient) { g.smoothing = s } }

// WithMinGradient bounds how much one window may shrink the limit (default
// 0.5: at most halve it; in (0, 1)).
func WithMinGradient(m float64) Option { return func(g *Gradient) { g.minGrad = m } }

// WithBaselineWindows sets the length, in windows, of the moving average of
// the fallback floor estimate, used only while the gate reports no floor
// (adaptive.Sample.Floor) — Update driven by hand (default 20; at least 1).
func WithBaselineWindows(n int) Option {
	return func(g *Gradient) {
		if n < 1 {
			g.baseAlpha = math.NaN()
			return
		}
		g.baseAlpha = 2 / (float64(n) + 1)
	}
}

// WithMaxRTT sets an absolute bound: a window slower than d is congested
// whatever the baseline (default: none). Derive it from the latency
// objective and from the statistic the gate samples: about SLO/7 of the mean
// RTT, or SLO/10 of the median (adaptive.WithPercentile(0.5)), keeps p99
// within a p99 objective for exponential-like service times. Leave the
// service's own no-load RTT some room under d: a bound at or below it stops
// all growth (the limit then sits at the demand seen and refuses its
// peaks). It is what keeps the latency objective when the service itself
// gets slower (a relative tolerance alone would let the RTT grow with it).
func WithMaxRTT(d time.Duration) Option { return func(g *Gradient) { g.maxRTT = d } }

// WithHeadroom sets the queue allowance added when there is no queueing, as a
// function of the limit (default √limit, at least 1).
func WithHeadroom(f func(limit float64) float64) Option { return func(g *Gradient) { g.headroom = f } }

// New returns a Gradient algorithm. Invalid options are reported by Validate,
// which adaptive.New calls.
func New(opts ...Option) *Gradient {
	g := &Gradient{
		initial: defaultInitial, tol: defaultTolerance, slack: defaultSlack, dropTol: defaultDropTolerance,
		smoothing: defaultSmoothing, minGrad: defaultMinGradient, baseAlpha: 2.0 / (defaultBaselineWindows + 1),
		headroom: func(l float64) float64 { return max(1, math.Sqrt(l)) },
	}
	for _, o := range opts {
		if o != nil {
			o(g)
		}
	}
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf("sluice/gradient: "+format, args...)) }
	if g.initial < 1 {
		bad("initial limit %d: must be at least 1", g.initial)
	}
	if !(g.tol >= 1 && g.tol <= 100) {
		bad("tolerance %v: must be in [1, 100]", g.tol)
	}
	if !(g.dropTol >= 0 && g.dropTol < 1) {
		bad("drop tolerance %v: must be in [0, 1)", g.dropTol)
	}
	if !(g.slack >= 0 && g.slack <= 1) {
		bad("slack %v: must be in [0, 1]", g.slack)
	}
	if !(g.smoothing > 0 && g.smoothing <= 1) {
		bad("smoothing %v: must be in (0, 1]", g.smoothing)
	}
	if !(g.minGrad > 0 && g.minGrad < 1) {
		bad("min gradient %v: must be in (0, 1)", g.minGrad)
	}
	if !(g.baseAlpha > 0 && g.baseAlpha <= 1) {
		bad("baseline windows: must be at least 1")
	}
	if g.maxRTT < 0 {
		bad("max RTT %v: must not be negative", g.maxRTT)
	}
	if g.headroom == nil {
		bad("WithHeadroom(nil)")
	}
	g.err = errors.Join(errs...)
	g.limit = float64(g.initial)
	g.slowStart = true
	return g
}

// Validate reports the invalid options New was given.
func (g *Gradient) Validate() error {
	if g == nil {
		return errors.New("sluice/gradient: nil *Gradient: build it with New")
	}
	return g.err
}

// InitialLimit returns the starting limit.
func (g *Gradient) InitialLimit() int { return g.initial }

// Baseline returns the no-load RTT the algorithm works with: the gate's
// floor (adaptive.Sample.Floor) when the gate reports one, else its own
// estimate (0 before any sample).
func (g *Gradient) Baseline() time.Duration { return time.Duration(g.floor) }

// ProbesFloor reports that Gradient moves the limit on the gate's floor, so
// the gate probes it (adaptive.FloorProber).
func (g *Gradient) ProbesFloor() bool { return true }

// Update moves the limit for one window:
//
//	gradient = clamp(bound / rtt, minGradient, 1)   (drops: ≤ 1 − drop share)
//	bound    = bound(s)   (the RTT objective, relieved and tightened: see bound)
//	full     = the gate saturated (adaptive.Sample.Saturated)
//	proposal = L · gradient          full (or drops) and gradient < 1
//	         = L                     rtt within the dead band [0.9·bound, bound]
//	         = 2L                    full, gradient = 1, slow start
//	         = L + headroom(L)       nearly full (MaxInFlight ≥ ¾L), gradient = 1
//	         = L                     demand well below the limit: neither
//	                                 growth nor shrinking would help
//	L'       = L + smoothing · (proposal − L), and, when full, at least the
//	           least limit that keeps the service saturated
//	           (adaptive.Sample.SaturatingLimit): below it the RTT is the
//	           service's own and a smaller limit only refuses work.
//
// Windows of the gate's probe (adaptive.Sample.Probing) teach nothing and
// move nothing.
func (g *Gradient) Update(s adaptive.Sample) int {
	if s.Probing {
		return int(math.Round(g.limit))
	}
	if int(math.Round(g.limit)) != s.Limit {
		g.limit = float64(s.Limit) // the gate clamped it: follow
	}
	g.notePressure(s)
	drops := float64(s.Dropped)
	share := drops / (drops + float64(s.Count))
	if s.Count == 0 {
		if share > g.dropTol {
			g.slowStart = false
			g.limit = math.Floor(g.limit * g.minGrad)
		}
		return int(g.limit)
	}
	rtt := float64(s.RTT)
	full := s.Saturated()
	g.updateFloor(rtt, share, full, s)
	// Under real overload react to each window; while few are refused, react
	// only to slowness that persists (the smoothed RTT), not to the queue
	// spikes of a busy but healthy server.
	judged := rtt
	if g.relief(s) > 1 {
		judged = max(g.slow, min(rtt, g.bound(s)))
	}
	grad := min(1, g.bound(s)/judged)
	// Drops are congestion when the successes queued too: queueing delays
	// every request admitted at the same time. Successes near the floor
	// with drops beside them are a service that fails on its own (a
	// dependency timing out), which refusing callers would not cure.
	dropped := share > g.dropTol && g.queued(s)
	if dropped {
		grad = min(grad, 1-(share-g.dropTol))
	}
	grad = max(grad, g.minGrad)
	var proposal float64
	switch {
	case grad < 1 && (full || dropped):
		g.slowStart = false
		proposal = g.limit * grad
	case !(full || float64(s.MaxInFlight) >= nearFull*g.limit) || grad < 1 || !g.growable(max(judged, g.smoothed), s):
		// Not full, or within the dead band just under the bound (judged
		// also by the smoothed RTT, so one lucky window does not grow it):
		// hold, rather than oscillate across the bound.
		proposal = g.limit
	case g.slowStart && full:
		proposal = 2 * g.limit
	default:
		proposal = g.limit + g.headroom(g.limit)
	}
	next := g.limit + g.smoothing*(proposal-g.limit)
	if proposal > g.limit {
		next = max(next, g.limit+1) // always make progress when growing
	} else if proposal < g.limit-0.5 {
		next = min(next, g.limit-1) // and when shrinking
	}
	if full {
		next = max(next, float64(s.SaturatingLimit()))
	}
	g.limit = max(1, next)
	return int(math.Round(g.limit))
}

// queued reports whether the window's successes queued: their mean RTT
// above the floor's (adaptive.Sample.FloorMean) by more than a quarter of
// the tolerance. The mean, not the window's RTT statistic: a median hardly
// moves when a few requests queue behind slow ones. Without a floor from
// the gate, every window may have queued.
func (g *Gradient) queued(s adaptive.Sample) bool {
	return s.FloorMean <= 0 || float64(s.AvgRTT) > (1+queuedShare*(g.tol-1))*float64(s.FloorMean)
}

// relief is the factor by which the bounds loosen while few callers are
// refused:
//
//	relief(s) = 1 + slack · (1 − min(1, pressure / 5%))
//
// where pressure is the smoothed share of refused callers.
//
// Under real overload (5% or more refused) it is 1; when hardly anyone is
// refused, the queueing is the normal jitter of a busy but healthy server,
// and shrinking would only refuse callers the server could have served.
func (g *Gradient) relief(s adaptive.Sample) float64 {
	return 1 + g.slack*(1-min(1, g.pressure/reliefAt))
}

// notePressure updates the smoothed shares of refused callers: pressure
// (EMA, factor 0.3: a single window with a queue spike must not look like
// overload) and sustained (factor 0.05: overload that lasts).
func (g *Gradient) notePressure(s adaptive.Sample) {
	total := float64(s.Rejected + s.Count + s.Dropped)
	if total > 0 {
		g.pressure += pressureAlpha * (float64(s.Rejected)/total - g.pressure)
		g.sustained += sustainedAlpha * (float64(s.Rejected)/total - g.sustained)
	}
}

// objective is the RTT objective before relief and tightening:
//
//	objective = min(tol · floor, maxRTT)   (maxRTT: when set)
func (g *Gradient) objective() float64 {
	b := g.tol * g.floor
	if g.maxRTT > 0 {
		b = min(b, float64(g.maxRTT))
	}
	return b
}

// bound is the slowest acceptable window RTT:
//
//	bound(s) = relief(s) · max(tightening · objective, floor)
//	tightening = 0.85 under sustained heavy overload (see heavy), else 1
//
// No bound asks for less than the service itself takes, its floor (the
// gate's, probed: adaptive.Sample.Floor): a window at the floor has no
// queue to remove. A bound the service cannot meet otherwise does not take
// the limit below adaptive.Sample.SaturatingLimit either (see Update).
func (g *Gradient) bound(s adaptive.Sample) float64 {
	return g.relief(s) * max(g.tightened(), g.floor)
}

// tightened is the objective, tightened under sustained heavy overload
// (see heavy).
func (g *Gradient) tightened() float64 {
	if g.sustained > heavy {
		return tight * g.objective()
	}
	return g.objective()
}

// growable reports whether rtt leaves room to grow: below the dead band
// under the bound, or — when the floor sets the bound — no slower than the
// floor itself (3% for the histogram's resolution): at the floor there is no
// queue, and a dead band there would hold a limit too small for good.
//
// It is not tightened under sustained heavy overload (see heavy): there
// the bound falls to 0.85 of the objective, under the dead band's floor
// (0.9), so the dead band is off and the limit cycles by a step or two
// around the tightened bound instead of holding (measured: 19–21 in
// flight on a 16-core model at 80% refused). Tightening it too holds the
// limit and lowers p99 on the steps by another 2 ms, but the tighter hold
// misses settling and ramp goodput on more seeds.
func (g *Gradient) growable(rtt float64, s adaptive.Sample) bool {
	if g.floor > g.tightened() {
		return rtt <= g.relief(s)*floorRes*g.floor
	}
	return rtt <= g.relief(s)*deadBand*g.objective()
}

// updateFloor keeps the smoothed RTTs and the floor: the gate's
// (adaptive.Sample.Floor) when it reports one. Without one (a gate that has
// not measured it yet, or Update driven by hand) the algorithm keeps its own
// estimate, which falls at once to the smoothed RTT when that is faster, and
// rises (slowly, over the baseline windows) only in windows that show no
// queueing: the gate not full and the RTT within a fifth of the estimate.
func (g *Gradient) updateFloor(rtt, share float64, full bool, s adaptive.Sample) {
	if g.smoothed == 0 {
		g.smoothed = rtt
	}
	g.seen++
	g.smoothed += smoothAlpha * (rtt - g.smoothed)
	if g.slow == 0 {
		g.slow = rtt
	}
	g.slow += slowAlpha * (rtt - g.slow)
	switch {
	case share > g.dropTol:
		// A window with drops teaches the estimate nothing: its successes
		// may be fast precisely because the slow requests were dropped.
	case g.own == 0 || (g.seen <= ownWarm && !full) || g.smoothed < g.own:
		// The first uncongested windows only seed the average: a minimum
		// taken over them would keep the luck of the first few samples.
		g.own = g.smoothed
	case !full && rtt <= ownRise*g.own:
		g.own += g.baseAlpha * (rtt - g.own)
	}
	g.floor = g.own
	if s.Floor > 0 {
		g.floor = float64(s.Floor)
	}
}

// The tuned numbers of Gradient, in one table: the defaults of its options,
// then the constants of its rules.
const (
	// defaultInitial: the starting limit, for a service of unknown size
	// (the gate's probe finds the knee from there on a cold start).
	defaultInitial = 20
	// defaultTolerance: an RTT up to 1.6 times the floor is acceptable
	// queueing when no objective is given (WithMaxRTT).
	defaultTolerance = 1.6
	// defaultSlack: the bounds loosen by up to 1.4× while few callers are
	// refused (see relief).
	defaultSlack = 0.4
	// defaultDropTolerance: a few requests always time out.
	defaultDropTolerance = 0.01
	// defaultSmoothing: half of each window's proposal is applied.
	defaultSmoothing = 0.5
	// defaultMinGradient: a window at most halves the limit.
	defaultMinGradient = 0.5
	// defaultBaselineWindows: the fallback floor estimate's moving average
	// (without the gate's floor) spans about this many windows.
	defaultBaselineWindows = 20

	// nearFull: a window whose peak in flight reached this share of the
	// limit asks for headroom, so that Poisson peaks over a limit sized
	// to the mean demand are not refused (growth stays bounded by the
	// demand seen: the limit stops at about peak/nearFull).
	nearFull = 0.75
	// deadBand: an RTT within this share of the bound holds the limit,
	// rather than oscillate across the bound.
	deadBand = 0.9
	// floorRes: an RTT within 3% of the floor is the floor (the resolution
	// of the gate's percentile histogram).
	floorRes = 1.03
	// queuedShare: a window's successes queued when their mean RTT is
	// above the floor's by this share of the tolerance (a quarter: a queue
	// that is a fraction of the one the tolerance allows).
	queuedShare = 0.25
	// smoothAlpha and slowAlpha: the EMA factors of the smoothed RTTs, the
	// fast one (about two windows: the fallback floor's seed) and the slow
	// one (about five: "slowness that persists" while few are refused).
	smoothAlpha = 0.5
	slowAlpha   = 0.2
	// pressureAlpha and reliefAt: the share of refused callers is smoothed
	// over about three windows (a single window with a queue spike must not
	// look like overload), and relief is gone once it reaches reliefAt:
	// at 5% refused the demand is really above the limit.
	pressureAlpha = 0.3
	reliefAt      = 0.05
	// sustainedAlpha, heavy and tight: under sustained heavy overload (a
	// share of refused callers above heavy, smoothed over about 2 seconds
	// of windows) the gate is always full and its queue buys no
	// throughput, only latency: the bound is tightened to tight of itself,
	// towards the knee. Not below it: the RTT's noise would then take the
	// limit under the core count and idle them. Only heavy overload,
	// because near capacity a queue does absorb the Poisson peaks a short
	// limit would refuse.
	sustainedAlpha = 0.05
	heavy          = 0.45
	tight          = 0.85
	// ownWarm and ownRise: the fallback floor estimate (no floor from the
	// gate) is seeded by the first ownWarm unsaturated windows, and rises
	// only in windows within ownRise of it.
	ownWarm = 5
	ownRise = 1.2
)
