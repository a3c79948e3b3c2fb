// Package vegas is a TCP-Vegas-style adaptive concurrency algorithm for
// sluice's gate (adaptive.Limiter). From each window it estimates how many
// requests are queued rather than served,
//
//	queue = L · (1 − rtt_noload / rtt)
//
// and keeps that queue between two thresholds, alpha and beta, that grow
// with the limit.
//
// It fixes the known weaknesses of Netflix's VegasLimit and its ports:
//
//   - slow start: the limit doubles per window while the gate is full and the
//     queue is empty, until the first congestion signal (Netflix #35);
//   - drops count: a window with dropped (timed-out) requests shrinks the
//     limit by the drop share, and its fast successes never lower the no-load
//     RTT — unless cutting the limit by a third did not reduce the drops:
//     then they are the service's own (a dependency timing out), and only
//     drops above that floor shrink it;
//   - no baseline drift: the no-load RTT only ever falls to a faster smoothed
//     RTT; it is never reset to the current (possibly overloaded) RTT by a
//     random probe. It is re-learnt only when shrinking the number in flight
//     by a third did not make the RTT faster, i.e. the service itself got
//     slower — which needs no pinning of the limit to a tiny value;
//   - no inflation: the limit grows only in windows where the gate was full,
//     or nearly (peak in flight ≥ ¾ of the limit) with an empty queue;
//   - fast decrease and recovery: a queue above beta is removed in one step
//     (L − (queue − beta)), not by log10(L) per window, and growth is
//     exponential again after a recovery (slow start re-arms when the queue
//     has stayed empty for a while).
//   - held at the knee: when the service itself is slower than WithMaxRTT
//     allows, the limit is held on mean RTTs over many windows against the
//     service's own RTT, measured by short probes below the knee, and moves
//     by one; single noisy windows no longer ratchet it down.
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
	noload    float64 // ns
	smoothed  float64 // ns, EMA factor 1/5 of window RTTs: a minimum of noisy window RTTs would be biased low
	slowStart bool
	calm      int     // consecutive full windows with an empty queue
	seen      int     // windows with samples
	pressure  float64 // EMA of the share of refused callers

	knee                float64 // ns: the service's own RTT, when shrinking stopped helping
	runRTT, runInFlight float64 // stale no-load detection anchor
	runMin              float64
	inRun               bool

	// Drops that are the service's own (see noteDrops).
	dropFloor               float64 // drop share not read as congestion; 0: none
	dropRun                 bool    // in a run of windows with drops over dropLevel
	dropShare, dropInFlight float64 // the run's anchor: share and concurrency held
	dropAvg                 float64 // EMA of the drop share, factor 0.2
	dropSum                 float64 // the drop shares of the run's windows, summed
	dropN                   int     // the run's windows

	// Holding the limit at the knee (see holdKnee).
	own        float64 // ns: the service's own mean RTT, from probes; 0 before the first
	ownW       float64 // requests behind own
	kneeN      int     // probes averaged into own
	far        bool    // the last window was over kneeFar
	ups        int     // steps up in a row
	rate       float64 // EMA of requests per window at the knee
	rateMax    float64 // the highest rate at the knee, slowly forgotten
	probe      int     // windows left in the current probe; 0 when not probing
	probeBase  float64 // the limit to return to after the probe
	sinceProbe int     // windows since the last probe
	acc        float64 // Σ (rtt/own − kneeMid) since the last step (see integrate)
	accN       int     // windows in acc; −1: skip the next window
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

// Proportional returns threshold functions that keep the queue between
// lo·L and hi·L: alpha = lo·L, beta = hi·L (and threshold = lo·L/2). With lo
// = 0.25 and hi = 0.5 the RTT stays between 1.33 and 2 times the no-load RTT,
// which, unlike the log10 defaults, lets a busy but healthy server keep the
// queue its arrivals naturally form.
func Proportional(lo, hi float64) []Option {
	return []Option{
		WithAlpha(func(l float64) float64 { return lo * l }),
		WithBeta(func(l float64) float64 { return hi * l }),
		WithThreshold(func(l float64) float64 { return lo * l / 2 }),
	}
}

// New returns a Vegas algorithm with Netflix's log10 thresholds by default.
// Invalid options are reported by Validate, which adaptive.New calls.
func New(opts ...Option) *Vegas {
	v := &Vegas{
		initial:   20,
		alpha:     func(l float64) float64 { return 3 * Log10(l) },
		beta:      func(l float64) float64 { return 6 * Log10(l) },
		threshold: Log10,
		increase:  Log10,
		smoothing: 1,
		dropTol:   0.01,
		slack:     0.4,
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

// NoLoadRTT returns the current no-load RTT estimate (0 before any sample).
func (v *Vegas) NoLoadRTT() time.Duration { return time.Duration(v.noload) }

// warmWindows is how many windows seed the smoothed RTT before its minimum
// counts as the no-load RTT.
const warmWindows = 5

// Queue is the Vegas queue estimate: how many of the L requests in flight
// are waiting rather than being served, L·(1 − noload/rtt).
func Queue(limit, noload, rtt float64) float64 {
	if rtt <= 0 {
		return 0
	}
	return limit * (1 - noload/rtt)
}

// Update moves the limit for one window:
//
//	drop share d > dropLevel          →  L·(1 − (d − dropFloor))
//	peak in flight < ¾L, none refused →  L        (no growth beyond demand, no shrinking either)
//	nearly full (peak ≥ ¾L), queue    →  L
//	  above threshold(L)
//	rtt' > r·maxRTT                   →  L·r·maxRTT/rtt'
//	rtt' in (0.9, 1]·r·maxRTT         →  L   (dead band)
//	queue ≤ threshold(L), slow start  →  2L       (ended when a knee is learnt; re-armed after 10 calm windows, not while a knee is set)
//	queue ≤ threshold(L) 3+ windows,  →  L + beta(L)
//	  no knee set
//	queue ≤ threshold(L)              →  L + increase(L)
//	queue ≤ beta(L), few refused      →  L + max(alpha(L), increase(L))
//	queue < alpha(L)                  →  L + increase(L)
//	queue > r·beta(L)                 →  max(L/2, L − (queue − r·beta(L)))
//	otherwise                         →  L
//
// except while the knee binds (a WithMaxRTT bound and a knee: see
// holdKnee), where windows without drops follow holdKnee instead;
// with queue = Queue(L, noload, rtt), r = relief(s), rtt' = rtt under real
// overload (r = 1) and max(smoothed RTT, min(rtt, r·maxRTT)) while few are
// refused (only slowness that persists counts), and
// L' = L + smoothing·(proposal − L).
func (v *Vegas) Update(s adaptive.Sample) int {
	if int(math.Round(v.limit)) != s.Limit {
		// The gate clamped it: follow, and drop a probe (see holdKnee) —
		// unless the gate's minimum lifted the probe's limit: then probe at
		// that minimum (dropping it would leave the own RTT unmeasured and
		// the limit held at the minimum for good).
		if !(v.probe > 0 && float64(s.Limit) > v.limit && float64(s.Limit) <= v.probeBase) {
			v.probe = 0
		}
		v.limit = float64(s.Limit)
	}
	L := v.limit
	v.notePressure(s)
	share := float64(s.Dropped) / float64(s.Dropped+s.Count)
	v.noteDrops(share, s)
	if s.Count == 0 || share > v.dropLevel() {
		v.probe = 0 // a cut for drops must not be undone by a probe's return
	}
	if s.Count == 0 {
		if share > v.dropLevel() {
			v.slowStart = false
			v.limit = max(1, math.Floor(L/2))
		}
		return int(v.limit)
	}
	rtt := float64(s.RTT)
	full := s.MaxInFlight >= s.Limit || s.Rejected > 0
	v.learn(rtt, share, full, s)
	q := Queue(L, v.noload, rtt)
	relief := v.relief(s)
	maxRTT := v.maxRTTNow()
	// Under real overload judge each window; while few are refused, only
	// slowness that persists (the smoothed RTT), not the queue spike of a
	// busy but healthy server: one slow window must not cut the limit by a
	// third at 0.9× capacity.
	judged := rtt
	if relief > 1 && maxRTT > 0 {
		judged = max(v.smoothed, min(rtt, relief*maxRTT))
	}
	if v.kneeBinds() && share <= v.dropLevel() {
		v.limit = max(1, v.holdKnee(s, full, relief))
		return int(math.Round(v.limit))
	}
	var p float64
	switch {
	case share > v.dropLevel():
		v.slowStart = false
		p = L * (1 - (share - v.dropFloor))
	case !full && (float64(s.MaxInFlight) < nearFull*L || q > v.threshold(L)):
		p = L
	case maxRTT > 0 && judged > relief*maxRTT:
		v.slowStart = false
		p = L * relief * maxRTT / judged
	case maxRTT > 0 && judged > 0.9*relief*maxRTT:
		p = L // dead band just under the bound: hold rather than oscillate
	case q <= v.threshold(L):
		switch {
		case v.slowStart && full:
			p = 2 * L
		case v.calm >= 3 && v.knee == 0:
			// The queue has stayed empty: grow fast, unless the service
			// is known to be slower than it was (the knee is set): then
			// its no-load RTT is a loaded one, the queue estimate reads
			// low, and growing by beta would overshoot.
			p = L + v.beta(L)
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
	// recovery is exponential again; not while the service is known to be
	// slow (the knee is set: it is cleared when the RTT falls back).
	if full && q <= v.threshold(L) && share <= v.dropLevel() {
		v.calm++
		if v.calm >= 10 && v.knee == 0 {
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
	v.limit = max(1, next)
	return int(math.Round(v.limit))
}

// nearFull: a window whose peak in flight reached this share of the limit
// may grow it, so that Poisson peaks over a limit sized to the mean demand
// are not refused; growth stays bounded by the demand seen (about 4/3 of
// its peaks).
const nearFull = 0.75

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
	return 1 + v.slack*(1-min(1, v.pressure/0.05))
}

// notePressure updates the smoothed share of refused callers (EMA, factor
// 0.3): a single window with a queue spike must not look like overload.
func (v *Vegas) notePressure(s adaptive.Sample) {
	total := float64(s.Rejected + s.Count + s.Dropped)
	if total > 0 {
		v.pressure += 0.3 * (float64(s.Rejected)/total - v.pressure)
	}
}

// maxRTTNow is the WithMaxRTT bound, raised to the service's own RTT when
// shrinking was seen not to help (the knee): no bound can ask for less than
// the service itself takes. 0: no bound.
func (v *Vegas) maxRTTNow() float64 {
	if v.maxRTT == 0 {
		return 0
	}
	return max(float64(v.maxRTT), v.knee)
}

// dropLevel is the drop share of a window that is not read as congestion:
// the WithDropTolerance floor, or more when cutting the limit was seen not
// to reduce the drops (see noteDrops).
func (v *Vegas) dropLevel() float64 { return max(v.dropTol, v.dropFloor) }

// noteDrops learns drops that are the service's own: a dependency whose
// requests time out whatever the concurrency. If, over a run of windows
// with drops above dropLevel, the concurrency held (adaptive.Sample.Held)
// was cut by a third without the drop share falling by a tenth, the run's
// mean drop share becomes the floor (dropFloor) and only drops above it
// shrink the limit. The floor goes when the smoothed share (EMA, factor
// 0.2: a window holds few drops, so one window's share is noisy) falls
// under half of it. Without this, a dependency spike whose requests all
// time out halves the limit window after window, down to 1.
func (v *Vegas) noteDrops(share float64, s adaptive.Sample) {
	v.dropAvg += 0.2 * (share - v.dropAvg)
	if v.dropAvg < v.dropFloor/2 {
		v.dropFloor = 0 // the drops that were not queueing have gone
	}
	if share <= v.dropLevel() {
		v.dropRun = false
		return
	}
	held := float64(s.Held())
	if !v.dropRun || share < 0.9*v.dropShare {
		v.dropRun, v.dropShare, v.dropInFlight, v.dropSum, v.dropN = true, share, held, 0, 0
	}
	v.dropSum += share
	v.dropN++
	if held <= v.dropInFlight*2/3 {
		v.dropFloor, v.dropRun = v.dropSum/float64(v.dropN), false
	}
}

// learn keeps the no-load RTT: it falls at once to a faster smoothed RTT
// (never from a window with drops, whose successes may be fast because the
// slow ones were dropped), and is re-learnt from the current RTT only when
// cutting the number in flight by a third did not make the RTT faster.
func (v *Vegas) learn(rtt, share float64, full bool, s adaptive.Sample) {
	if v.smoothed == 0 {
		v.smoothed = rtt
	}
	v.smoothed += 0.2 * (rtt - v.smoothed)
	if share > v.dropLevel() {
		return
	}
	v.seen++
	if v.noload == 0 || (v.seen <= warmWindows && !full) || v.smoothed < v.noload {
		// The first uncongested windows only seed the average: a minimum
		// taken over them would keep the luck of the first few samples.
		v.noload = v.smoothed
	}
	if v.smoothed < 0.7*v.knee {
		v.setKnee(0) // the service got faster again
	}
	inFlight := float64(s.MaxInFlight)
	congested := Queue(v.limit, v.noload, rtt) > v.beta(v.limit) ||
		(v.maxRTTNow() > 0 && rtt > v.maxRTTNow())
	switch {
	case !congested:
		v.inRun = false
	case !v.inRun || rtt < 0.9*v.runRTT:
		v.inRun, v.runRTT, v.runInFlight, v.runMin = true, rtt, inFlight, rtt
	case inFlight <= v.runInFlight*2/3:
		// Less concurrency, same RTT: the service got slower, not queueing.
		v.noload = min(rtt, v.runMin)
		v.setKnee(v.noload)
		v.slowStart = false // no slow start while the knee is set (see Update)
		v.inRun = false
	default:
		v.runMin = min(v.runMin, rtt)
	}
}

// setKnee sets the knee (0: none) and restarts holding it (see holdKnee):
// the first probe comes at once.
func (v *Vegas) setKnee(k float64) {
	v.knee, v.own, v.ownW, v.kneeN, v.probe, v.acc, v.accN = k, 0, 0, 0, 0, 0, 0
	v.far, v.rate, v.rateMax, v.ups = false, 0, 0, 0
	v.sinceProbe = probeFirst
}

// kneeBinds reports whether the knee is set under a WithMaxRTT bound: the
// service's own RTT was seen not to fall with less concurrency, and the
// limit is held at the knee (see holdKnee).
func (v *Vegas) kneeBinds() bool { return v.maxRTT > 0 && v.knee > 0 }

const (
	// probeEvery: windows between probes at the knee (probeFirst until
	// probeWarm probes have been averaged).
	probeEvery, probeFirst, probeWarm = 16, 4, 4
	// probeDepth: a probe holds this share of the limit (at least 2 less).
	probeDepth = 0.85
	// probeMin: no probes below this limit.
	probeMin = 4
	// ownCap: the most requests the own RTT's average weighs (older probes
	// fade beyond it).
	ownCap = 2000
	// ownReset: a probe this much faster than the own RTT restarts it.
	ownReset = 0.8
	// rateLow, rateForget: below rateLow of the highest rate seen at the
	// knee (forgotten by rateForget per window) the limit grows.
	rateLow, rateForget = 0.85, 0.998
	// kneeMid: the mean RTT held at the knee, over the own RTT.
	kneeMid = 1.08
	// kneeDown, kneeUp: the integral of rtt/own − kneeMid that moves the
	// limit down, and up, by one.
	kneeDown, kneeUp = 0.3, 0.15
	// kneeFar: two windows in a row this much slower than the own RTT are
	// cut at once.
	kneeFar = 1.5
)

// holdKnee moves the limit while the knee is set. Single windows are too
// noisy there (a few requests each), and the knee's RTT, a minimum of
// window RTTs, is biased low: cutting by knee/rtt on every slow window
// ratcheted the limit down to a fraction of the knee. So the limit is held
// on the windows' mean RTTs (less noisy than a percentile, and in
// proportion to the number in flight beyond the knee):
//
//   - probe: every probeEvery windows the limit drops for two windows
//     (probeLimit); the second one measures the service's own RTT (addProbe);
//   - two windows in a row over kneeFar·r·own:  L·r·own/rtt
//   - rate < rateLow·rateMax (gate full):        L + 1   (below the knee, where the RTT is flat; see noteRate)
//   - no probe yet, rtt' > kneeFar·r·knee:       L·r·knee/rtt'   (rtt' the window's RTT)
//   - no probe yet, L < probeMin (gate full):    L + 1
//   - otherwise the integral of rtt/own (integrate).
//
// with r = relief(s).
func (v *Vegas) holdKnee(s adaptive.Sample, full bool, relief float64) float64 {
	L := v.limit
	v.slowStart = false
	rtt := float64(s.AvgRTT)
	if rtt <= 0 {
		rtt = float64(s.RTT)
	}
	switch v.probe {
	case 2:
		v.probe--
		return L
	case 1:
		v.probe = 0
		v.addProbe(rtt, float64(s.Count))
		v.acc, v.accN = 0, -1 // skip the first window back
		return v.probeBase
	}
	wasFar := v.far
	v.far = v.own > 0 && rtt > kneeFar*relief*v.own
	v.noteRate(float64(s.Count), s.Window)
	switch {
	case v.far && wasFar:
		v.acc, v.accN = 0, 0
		return L * relief * v.own / rtt
	case full && v.rate < rateLow*v.rateMax && v.accN >= 0:
		v.acc = 0
		return L + 1
	case v.own == 0 && float64(s.RTT) > kneeFar*relief*v.knee:
		return L * relief * v.knee / float64(s.RTT)
	}
	v.sinceProbe++
	every := probeEvery
	if v.kneeN < probeWarm {
		every = probeFirst
	}
	if v.sinceProbe >= every && full && L >= probeMin {
		v.sinceProbe, v.probe, v.probeBase = 0, 2, L
		return probeLimit(L)
	}
	switch {
	case v.own == 0 && L < probeMin && full:
		return L + 1 // too few in flight to probe below: make room
	case v.own == 0:
		return L
	case v.accN < 0:
		v.accN = 0 // the first window back from a probe
		return L
	}
	return v.integrate(rtt/v.own, full, relief)
}

// probeLimit is the limit during a probe below the knee:
//
//	min(L − 2, ⌊probeDepth·L⌋)
func probeLimit(L float64) float64 { return min(L-2, math.Floor(probeDepth*L)) }

// addProbe averages a probe's mean RTT into the service's own RTT, weighted
// by its n requests:
//
//	W' = min(W + n, ownCap),  own' = own + (rtt − own)·n/W'
//
// restarting (W = 0) when the probe is faster than ownReset·own: the
// earlier probes were above the knee.
func (v *Vegas) addProbe(rtt, n float64) {
	v.kneeN++
	if n <= 0 {
		return
	}
	if v.own == 0 || rtt < ownReset*v.own {
		v.own, v.ownW = rtt, 0
	}
	v.ownW = min(v.ownW+n, ownCap)
	v.own += (rtt - v.own) * n / v.ownW
}

// noteRate keeps the throughput at the knee — completions per second, n in
// a window of d (per window when the sample carries no length) — to tell a
// limit far below the knee (where the RTT is flat and says nothing) by its
// throughput:
//
//	rate' = rate + 0.2·(n/d − rate),  rateMax' = max(rateForget·rateMax, rate')
//
// Per second, not per window: the gate's windows last from 100 ms to 1 s,
// and a longer window is not more throughput.
func (v *Vegas) noteRate(n float64, d time.Duration) {
	if d > 0 {
		n /= d.Seconds()
	}
	if v.rate == 0 {
		v.rate = n
	}
	v.rate += 0.2 * (n - v.rate)
	v.rateMax = max(v.rateMax*rateForget, v.rate)
}

// integrate moves the limit by the integral of x = rtt/own since the last
// step, acc = Σ (x − kneeMid·r):
//
//	acc > kneeDown               →  L − max(1, ⌊L·(1 − kneeMid·r/m)⌋), m = kneeMid·r + acc/n
//	acc < −kneeUp/(1 + u), full  →  L + 1
//	otherwise                    →  L
//
// over the n windows since the last step, with u the steps up in a row
// (growing again and again grows faster) and r = relief(s). Noise averages
// out; only a quick crossing (m far above the band) steps by more than one.
func (v *Vegas) integrate(x float64, full bool, relief float64) float64 {
	L := v.limit
	v.acc += x - kneeMid*relief
	v.accN++
	up := kneeUp / float64(1+v.ups)
	switch {
	case v.acc > kneeDown:
		m := kneeMid*relief + v.acc/float64(v.accN)
		v.acc, v.accN, v.ups = 0, 0, 0
		return L - max(1, math.Floor(L*(1-kneeMid*relief/m)))
	case v.acc < -up && full:
		v.acc, v.accN = 0, 0
		v.ups++
		return L + 1
	case v.acc < -up:
		v.acc = -up
	}
	return L
}
