// Package gradient is a Gradient2-style adaptive concurrency algorithm for
// sluice's gate (adaptive.Limiter): it compares each window's round-trip time
// with a long-term baseline and moves the limit by their ratio, so the limit
// settles where queueing starts to add latency.
//
// It fixes the known weaknesses of Netflix's Gradient2 and its ports:
//
//   - slow start: the limit doubles per window while the gate is full and
//     latency is flat, until the first congestion signal;
//   - drops count: a window with dropped (timed-out) requests is congested,
//     however fast its successful requests were;
//   - no baseline drift: the baseline follows the RTT only while the server is
//     not congested and falls at once to a faster RTT; WithMaxRTT adds an
//     absolute bound from the latency objective; it is re-learnt when shrinking the limit stops lowering the
//     RTT (the service itself got slower), without pinning the limit low;
//   - no creep: the headroom term is added only when there is no queueing, so
//     steady moderate overload does not push the limit up window by window;
//   - no needless queue under heavy overload: while most callers have been
//     refused for a couple of seconds the gate is always full, and the
//     bound is tightened by 15% towards the knee (lower latency, the same
//     throughput);
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
	baseline  float64       // ns; 0 until the first sample
	smoothed  float64       // ns: EMA of the window RTTs, factor 1/2
	slow      float64       // ns: EMA of the window RTTs, factor 1/5
	pressure  float64       // EMA of the share of refused callers, factor 0.3
	sustained float64       // the same, factor 0.05 (about 2 s of 100 ms windows)
	seen      int           // windows with samples
	hist      [4][2]float64 // the last congested windows' (held, RTT)
	histN     int
	kneeRTT   float64 // ns: the lowest RTT while seeking the knee; 0 when not seeking
	probeRTT  float64 // ns: the smoothed RTT when a dead-band probe began; 0 when not probing
	probeWait int     // windows before the next dead-band probe
	deadBand  float64
	slowStart bool
	// stale-baseline detection: the RTT and limit when the current run of
	// congested windows began.
	dropFloor        float64 // drop share not caused by queueing
	dropTol          float64
	knee             float64 // ns: the service's own RTT, when shrinking stopped helping
	anchorAge        int     // windows since the run's anchor
	runStartShare    float64
	runMinRTT        float64
	congestedRun     int
	runStartRTT      float64
	runStartInFlight float64
}

// Option configures a Gradient.
type Option func(*Gradient)

// WithInitialLimit sets the starting limit (default 20).
func WithInitialLimit(n int) Option { return func(g *Gradient) { g.initial = n } }

// WithTolerance sets how much slower than the baseline a window may be before
// the limit shrinks (default 1.6: RTT up to 1.6 times the no-load RTT is
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

// WithBaselineWindows sets the length, in windows, of the baseline's moving
// average while the server is healthy (default 20; at least 1).
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
		initial: 20, tol: 1.6, slack: 0.4, dropTol: 0.01, deadBand: 0.9, smoothing: 0.5, minGrad: 0.5, baseAlpha: 2.0 / 21,
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

// Baseline returns the current no-load RTT estimate (0 before any sample).
func (g *Gradient) Baseline() time.Duration { return time.Duration(g.baseline) }

// Update moves the limit for one window:
//
//	gradient = clamp(bound / rtt, minGradient, 1)   (drops: ≤ 1 − drop share)
//	bound    = bound(s)   (the RTT objective, relieved and tightened: see bound)
//	full     = MaxInFlight ≥ L or Rejected > 0
//	proposal = L + max(1, L/10)      gradient < 1 but shrinking stopped lowering
//	         or L − 1                the RTT: seek the knee (see futile)
//	         = L · gradient          full (or drops) and gradient < 1
//	         = L                     rtt within the dead band [0.9·bound, bound]
//	         or L + max(1, L/10)     ... while many are refused and no knee is
//	                                 set: probe (see probe)
//	         = 2L                    full, gradient = 1, slow start
//	         = L + headroom(L)       nearly full (MaxInFlight ≥ ¾L), gradient = 1
//	         = L                     demand well below the limit: neither
//	                                 growth nor shrinking would help
//	L'       = L + smoothing · (proposal − L)
func (g *Gradient) Update(s adaptive.Sample) int {
	if int(math.Round(g.limit)) != s.Limit {
		g.limit = float64(s.Limit) // the gate clamped it: follow
	}
	g.notePressure(s)
	drops := float64(s.Dropped)
	share := drops / (drops + float64(s.Count))
	if s.Count == 0 {
		if share > g.dropLevel() {
			g.slowStart = false
			g.limit = math.Floor(g.limit * g.minGrad)
		}
		return int(g.limit)
	}
	rtt := float64(s.RTT)
	full := s.MaxInFlight >= s.Limit || s.Rejected > 0
	g.updateBaseline(rtt, share, full, s)
	// Under real overload react to each window; while few are refused, react
	// only to slowness that persists (the smoothed RTT), not to the queue
	// spikes of a busy but healthy server.
	judged := rtt
	if g.relief(s) > 1 {
		judged = max(g.slow, min(rtt, g.bound(s)))
	}
	grad := min(1, g.bound(s)/judged)
	if share > g.dropLevel() {
		grad = min(grad, 1-(share-g.dropLevel()))
	}
	grad = max(grad, g.minGrad)
	if grad >= 1 {
		g.kneeRTT = 0 // the bound is met again
	}
	var proposal float64
	switch {
	case grad < 1 && (g.kneeRTT > 0 || g.futile(s, rtt)):
		// Shrinking the number in flight stopped making the RTT faster: the
		// service itself is slower and the bound cannot be met. Shrinking
		// further would only refuse work, so seek the knee instead: probe
		// up by a tenth while the RTT stays within 10% of the lowest seen,
		// step back by one when it rises by a fifth (queueing again).
		g.slowStart = false
		if g.kneeRTT == 0 || g.smoothed < g.kneeRTT {
			g.kneeRTT = g.smoothed
		}
		switch {
		case g.smoothed <= 1.1*g.kneeRTT && full:
			proposal = g.limit + max(1, kneeStep*g.limit)
		case g.smoothed > 1.2*g.kneeRTT:
			proposal = g.limit - 1
		default:
			proposal = g.limit
		}
	case grad < 1 && (full || share > g.dropLevel()):
		g.slowStart = false
		g.endProbe(true)
		proposal = g.limit * grad
	case grad >= 1 && full && g.knee == 0 && g.relief(s) == 1 && !g.growable(judged, s) && !g.growable(g.smoothed, s):
		// In the dead band while many callers are refused.
		proposal = g.probe()
	case !(full || float64(s.MaxInFlight) >= nearFull*g.limit) || grad < 1 || !g.growable(max(judged, g.smoothed), s):
		// Not full, or within the dead band just under the bound (judged
		// also by the smoothed RTT, so one lucky window does not grow it):
		// hold, rather than oscillate across the bound.
		g.endProbe(false)
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
	g.limit = max(1, next)
	return int(math.Round(g.limit))
}

// probe is the dead band's rule while many callers are refused (full, and
// at least 5% refused): the RTT sits just under the bound, but it may be the
// service's own (a dependency wait that no concurrency changes), in which
// case holding would refuse those callers for as long as it lasts. So
//
//	proposal = L + max(1, L/10)   while the smoothed RTT stays within 5% of
//	                              its value when the probe began
//	         = L / 1.1            when it rose (queueing): then no probe for
//	                              probePause windows
//
// A probe that takes the RTT over the bound ends in the gradient rule,
// which shrinks, and also pauses probing.
func (g *Gradient) probe() float64 {
	switch {
	case g.probeWait > 0:
		g.probeWait--
		return g.limit
	case g.probeRTT == 0:
		g.probeRTT = g.smoothed
	case g.smoothed > 1.05*g.probeRTT:
		g.endProbe(true)
		return g.limit / (1 + kneeStep)
	}
	return g.limit + max(1, kneeStep*g.limit)
}

// endProbe ends a dead-band probe, if one is under way; pause: it raised
// the RTT, so wait before the next.
func (g *Gradient) endProbe(pause bool) {
	if g.probeRTT > 0 && pause {
		g.probeWait = probePause
	}
	g.probeRTT = 0
}

// dropLevel is the drop share that is not read as congestion: the
// WithDropTolerance floor (some requests always time out), or more when
// shrinking was seen not to reduce the drops.
func (g *Gradient) dropLevel() float64 { return max(g.dropFloor, g.dropTol) }

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
	return 1 + g.slack*(1-min(1, g.pressure/0.05))
}

// notePressure updates the smoothed shares of refused callers: pressure
// (EMA, factor 0.3: a single window with a queue spike must not look like
// overload) and sustained (factor 0.05: overload that lasts).
func (g *Gradient) notePressure(s adaptive.Sample) {
	total := float64(s.Rejected + s.Count + s.Dropped)
	if total > 0 {
		g.pressure += 0.3 * (float64(s.Rejected)/total - g.pressure)
		g.sustained += 0.05 * (float64(s.Rejected)/total - g.sustained)
	}
}

// objective is the RTT objective before relief and tightening:
//
//	objective = min(tol · baseline, maxRTT)   (maxRTT: when set)
func (g *Gradient) objective() float64 {
	b := g.tol * g.baseline
	if g.maxRTT > 0 {
		b = min(b, float64(g.maxRTT))
	}
	return b
}

// bound is the slowest acceptable window RTT:
//
//	bound(s) = relief(s) · max(tightening · objective, knee)
//	tightening = 0.85 under sustained heavy overload (see heavy), else 1
//
// where knee is the RTT below which less concurrency did not get (the
// service's own RTT, learnt when shrinking stopped helping): no bound can ask
// for less than the service itself takes.
func (g *Gradient) bound(s adaptive.Sample) float64 {
	b := g.objective()
	if g.sustained > heavy {
		b *= tight
	}
	return g.relief(s) * max(b, g.knee)
}

// futile records the congested window and reports whether, over the last
// three congested windows, the concurrency held (adaptive.Sample.Held) fell by a fifth
// or more while the window RTT fell by less than 10%: less concurrency no
// longer helps (the service itself is slower). The windows' own RTTs are
// compared, not the smoothed one, which lags a cut limit by a window or two
// and would make queueing look like the service's own slowness.
func (g *Gradient) futile(s adaptive.Sample, rtt float64) bool {
	g.hist[g.histN%len(g.hist)] = [2]float64{float64(s.Held()), rtt}
	g.histN++
	if g.histN <= len(g.hist) {
		return false
	}
	old := g.hist[g.histN%len(g.hist)] // the oldest of the ring
	return float64(s.Held()) <= 0.8*old[0] && rtt >= 0.9*old[1]
}

// growable reports whether rtt leaves room to grow: below the dead band
// under the bound, or — when the knee sets the bound — no slower than the
// knee itself (below the core count the RTT is the service time and cannot
// fall further, so a dead band there would hold a too-small limit forever).
//
// It is not tightened under sustained heavy overload (see heavy): there
// the bound falls to 0.85 of the objective, under the dead band's floor
// (0.9), so the dead band is off and the limit cycles by a step or two
// around the tightened bound instead of holding (measured: 19–21 in
// flight on a 16-core model at 80% refused). Tightening it too holds the
// limit and lowers p99 on the steps by another 2 ms, but the tighter hold
// misses settling and ramp goodput on more seeds.
func (g *Gradient) growable(rtt float64, s adaptive.Sample) bool {
	b := g.objective()
	return rtt <= g.relief(s)*max(g.deadBand*b, 1.03*g.knee)
}

// updateBaseline keeps the no-load RTT estimate. It falls at once to the
// smoothed RTT when that is faster, and rises (slowly, over the baseline
// windows) only in windows that show no queueing: the gate not full and the
// RTT within a fifth of the baseline. So a long incident can never teach it
// that overload is normal. If congested windows cut the number in flight by
// a quarter, over at least three windows, without making the RTT (or the
// drop share) 10% better, the slowness is the service's own, not queueing:
// the baseline is re-learnt from the current RTT and the knee from the
// fastest window since, without pinning the limit low to measure it. A run
// whose RTT rose by 30% starts again: the service changed under it.
func (g *Gradient) updateBaseline(rtt, share float64, full bool, s adaptive.Sample) {
	if g.smoothed == 0 {
		g.smoothed = rtt
	}
	g.seen++
	g.smoothed += 0.5 * (rtt - g.smoothed)
	if g.slow == 0 {
		g.slow = rtt
	}
	g.slow += 0.2 * (rtt - g.slow)
	if g.smoothed < 0.7*g.knee {
		g.knee = 0 // the service got faster again
	}
	if share < g.dropFloor/2 {
		g.dropFloor = 0 // the drops that were not queueing have gone
	}
	switch {
	case share > g.dropLevel():
		// A window with drops teaches the baseline nothing: its successes
		// may be fast precisely because the slow requests were dropped.
	case g.baseline == 0 || (g.seen <= 5 && !full) || g.smoothed < g.baseline:
		// The first uncongested windows only seed the average: a minimum
		// taken over them would keep the luck of the first few samples.
		g.baseline = g.smoothed
	case !full && rtt <= 1.2*g.baseline:
		g.baseline += g.baseAlpha * (rtt - g.baseline)
	}
	congested := rtt > g.bound(s) || share > g.dropLevel()
	if !congested {
		g.congestedRun = 0
	} else {
		if g.congestedRun == 0 {
			g.runStartRTT, g.runStartInFlight, g.runStartShare = rtt, float64(s.Held()), share
			g.runMinRTT = rtt
			g.anchorAge = 0
		}
		g.congestedRun++
		g.runMinRTT = min(g.runMinRTT, rtt)
		if rtt < 0.9*g.runStartRTT || share < 0.9*g.runStartShare || rtt > 1.3*g.runStartRTT {
			// Less in flight made it faster: queueing. Or it got much
			// slower: the service changed under the run (a capacity
			// drop), and the windows so far say nothing about its knee.
			// Re-anchor.
			g.runStartRTT, g.runStartInFlight, g.runStartShare = rtt, float64(s.Held()), share
			g.runMinRTT = rtt
			g.anchorAge = 0
		} else if g.anchorAge++; g.anchorAge >= kneeAge && float64(s.Held()) <= g.runStartInFlight*kneeCut {
			// Not queueing: hold the limit here, at the edge of tolerance,
			// and stop reading these drops as congestion.
			g.baseline = rtt / (g.tol * g.relief(s))
			g.knee = g.runMinRTT
			g.dropFloor = share
			g.congestedRun = 0
		}
	}
}

// The constants of the rules above.
const (
	// nearFull: a window whose peak in flight reached this share of the
	// limit asks for headroom, so that Poisson peaks over a limit sized
	// to the mean demand are not refused (growth stays bounded by the
	// demand seen: the limit stops at about peak/nearFull).
	nearFull = 0.75
	// kneeCut and kneeAge: the service's own slowness is recognised when,
	// for kneeAge windows after the run's anchor, cutting in flight to
	// kneeCut of the anchor's did not make the RTT 10% faster.
	kneeCut = 0.75
	kneeAge = 3
	// kneeStep: seeking the knee, the limit probes up by this share of
	// itself (at least one) per window while the RTT stays near the
	// lowest seen, and steps back by one when it rises: it climbs back
	// quickly from an undershoot and settles by single steps.
	kneeStep = 0.1
	// probePause: after a dead-band probe raised the RTT, this many
	// windows in the dead band pass before the next (see probe).
	probePause = 20
	// heavy and tight: under sustained heavy overload (a share of
	// refused callers above heavy, smoothed over about 2 seconds of
	// windows) the gate is always full and its queue buys no throughput,
	// only latency: the bound is tightened to tight of itself, towards
	// the knee. Not below it: the RTT's noise would then take the limit
	// under the core count and idle them. Only heavy overload, because
	// near capacity a queue does absorb the Poisson peaks a short limit
	// would refuse.
	heavy = 0.45
	tight = 0.85
)
