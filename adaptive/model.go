package adaptive

import (
	"math"
	"time"
)

// FloorProber is an Algorithm that moves the limit on the service's floor
// (Sample.Floor, Sample.Knee) and so wants the gate to measure it by probing
// when no window shows it (see Sample.Probing). The gate probes only for an
// algorithm whose ProbesFloor returns true; for the others (Fixed, AIMD) the
// model is measured and reported all the same, but the limit is never moved
// by the gate.
type FloorProber interface {
	Algorithm
	ProbesFloor() bool
}

// The gate's model of the service. Once per window, from the goroutine that
// closes it, the gate measures:
//
//   - the throughput X: what the service completes per second when the gate
//     is saturated. Each saturated window's completion rate is smoothed over
//     about rateMemory requests (a window at 200 completions per second holds
//     only 20, whose count varies by ±22%), and X is the highest smoothed
//     rate of the last rateWindows saturated windows: the filter of BBR's
//     bottleneck bandwidth. A maximum, because a saturated window measures
//     the throughput or less (less when the limit was below the knee), never
//     more; over a few windows, so that a service that lost capacity is
//     believed within a second.
//   - the floor F: the round-trip time at low concurrency, about what a
//     request served alone takes (in the statistic of Sample.RTT). It is a
//     sample-weighted mean over the latest floorMemory requests of the
//     windows that show it: windows in which the gate was not saturated (no
//     one refused, the peak in flight under the limit — and, once the knee is
//     known, at most the knee), and the measuring windows of a probe. A
//     window slower than F by more than its noise (floorBand) is queueing and
//     is left out; a faster one always counts. A saturated window is never
//     evidence that the floor rose: whatever the floor, its RTT is its
//     concurrency over the throughput (Little's law), so only a measurement
//     at low concurrency — a probe — may raise F beyond its noise. (A
//     saturated window faster than F by more than the noise does lower it: no
//     RTT can be faster than the floor.)
//   - the knee K = X·F (with F the mean RTT): the concurrency at which the
//     service is just saturated, by Little's law. Below it cores idle; above
//     it requests queue.
//
// The probe. An algorithm that moves the limit on F (a FloorProber) needs F
// to be right, and a saturated gate never shows it. So the gate probes when
// it is saturated and
//
//   - it has no floor (a cold start into overload), or
//   - the service may have slowed: against one of the last slowLook
//     saturated windows, the concurrency held fell by a quarter (slowCut)
//     without making the RTT 10% faster (slowFlat), and the RTT is above F
//     by more than its noise; or
//   - probeEvery of continuous saturation passed without a probe or a window
//     that showed the floor (BBR's ProbeRTT cadence);
//
// and not within probeGap of the end of the previous probe. A probe first
// measures the throughput and RTT at the current limit over probeSamples
// requests (the reference), then halves the limit, waits for the requests
// admitted under the higher limit to drain (the first window after a cut,
// and any window that began with more in flight than the new limit, measure
// nothing), measures again over probeSamples requests, and so on, while the
// throughput holds. At the first level whose throughput is probeFell below
// the level above — the service is no longer saturated: the knee was crossed
// and the RTT there is the floor — or at the gate's minimum limit, F is set
// to the RTT measured there, up or down. At a level whose RTT is within the
// noise of F, F is confirmed (and averaged with it). During a probe the
// algorithm is told (Sample.Probing) and its proposals are not applied;
// afterwards the limit returns to the algorithm's last proposal before the
// probe, or to the knee if that is higher.
//
// The cost of a probe. It never runs while the gate is not saturated: there
// the windows themselves show the floor. A probe lasts at most probeSteps
// levels below the reference, each of at most probeDrains draining windows
// and probeWindows measuring ones. Every level but the last kept the
// throughput (to within probeFell): it cost only latency that was not
// there (less queueing). The last one is the only one below the knee, and,
// being half a level that kept the throughput, it keeps at least half of it,
// for at most probeDrains + probeWindows windows. With the defaults (100 ms
// windows, more than probeSamples completions per window) that is two
// windows at half throughput or better, every probeEvery at most: under 1% of
// the throughput.
type model struct {
	floor, floorMean float64 // ns; 0: no floor yet
	floorW           float64 // requests behind the floor's average

	rate     float64              // smoothed completion rate of saturated windows, per second
	rates    [rateWindows]float64 // the smoothed rates of the last saturated windows
	ratesN   int
	thr      float64 // X, per second; 0: never saturated
	satSince int64   // ns: since when the gate has been saturated without the floor shown; −1: not saturated
	hist     [slowLook]histPoint
	histN    int

	probe     probe
	probeEnd  int64 // ns: when the last probe ended; −1: none yet
	probeMinL int64 // the gate's minimum limit
	probeMaxL int64 // the gate's maximum limit
}

// histPoint is a saturated window: the concurrency it held and its RTT.
type histPoint struct {
	held int
	rtt  float64
}

// probe is the state of a probe under way.
type probe struct {
	on       bool
	base     int64 // the limit to return to
	level    int64 // the probe's limit now
	step     int   // levels below the reference so far; 0: the reference
	fresh    bool  // the level was just cut: the next window drains
	drains   int   // draining windows at this level
	windows  int   // measuring windows at this level
	cnt, dur float64
	rttSum   float64 // Σ Count·RTT of the measuring windows at this level
	avgSum   float64 // Σ Count·AvgRTT
	prevX    float64 // the throughput of the level above
	prevN    float64 // the completions it was measured over
}

// The tuned numbers of the model and the probe, in one table.
const (
	// floorMemory: the floor is a mean over about this many requests, so
	// that the noise of a window (±2.5/√n of a mean of n exponential
	// times) averages out, yet a faster service is followed within a few
	// hundred requests.
	floorMemory = 500
	// floorNoise and floorBand: a window's RTT within F·(1 + max(floorBand,
	// floorNoise/√n)) is the floor's noise (2.5 standard errors of a mean of
	// n requests of an exponential-like service; never less than a fifth,
	// for tails heavier than the exponential's); beyond it, queueing.
	floorNoise = 2.5
	floorBand  = 0.2
	// floorDrops: a window with more dropped requests than this share is
	// no evidence of the floor: its successes may be fast because the slow
	// ones were dropped.
	floorDrops = 0.01
	// rateMemory: the smoothed saturated rate averages about this many
	// completions (±10% for a Poisson count), whatever the window length.
	rateMemory = 100
	// rateWindows: X is the highest smoothed rate of the last rateWindows
	// saturated windows (BBR's ten round trips; a second of default
	// windows), so a service that lost capacity is believed within about
	// a second of saturation. Windows, not time: a probe or a calm spell
	// does not age the measurement.
	rateWindows = 10
	// probeEvery: continuous saturation without a window showing the floor
	// after which the floor is measured again (BBR's ProbeRTT interval).
	probeEvery = 10 * time.Second
	// probeGap: the least time between probes, so that evidence which keeps
	// pointing at a slower service cannot keep the gate probing.
	probeGap = 2 * time.Second
	// probeSamples: each level of a probe is measured over at least this
	// many completions (a rate to ±7%, and the differences of two such
	// rates to ±10%), or probeWindows windows, whichever comes first.
	probeSamples = 200
	probeWindows = 8
	// probeFell: a level whose throughput is this much below the level
	// above (two standard errors of their difference) has crossed the
	// knee: the service is no longer saturated, so its RTT is the floor.
	probeFell = 0.2
	// probeDrains: the most windows a level waits for the requests admitted
	// under the higher limit to finish; a probe that waits longer gives up.
	probeDrains = 3
	// probeSteps: the most halvings of one probe (1/256 of the limit).
	probeSteps = 8
	// slowLook, slowCut and slowFlat: the service may have slowed when a
	// saturated window held at most slowCut of the concurrency of one of
	// the slowLook saturated windows before it, with an RTT no faster than
	// slowFlat of that window's: less concurrency no longer made it faster
	// (queueing would have made it faster in proportion).
	slowLook = 3
	slowCut  = 0.75
	slowFlat = 0.9
)

func newModel(minLimit, maxLimit int64) model {
	return model{satSince: -1, probeEnd: -1, probeMinL: minLimit, probeMaxL: maxLimit}
}

// band is the relative noise of the mean RTT of n requests (see floorNoise).
func band(n int) float64 {
	return max(floorBand, floorNoise/math.Sqrt(float64(max(n, 1))))
}

// Saturated reports whether the gate was saturated in the window: someone
// was refused, or the peak in flight reached the limit. An unsaturated
// window's concurrency was chosen by the demand, not by the limit.
func (s Sample) Saturated() bool { return s.Rejected > 0 || s.MaxInFlight >= s.Limit }

// Rate is the window's completion rate: successful requests per second.
func (s Sample) Rate() float64 {
	if s.Window <= 0 {
		return 0
	}
	return float64(s.Count) / s.Window.Seconds()
}

// dropsOK reports whether the window's drops are few enough for its RTT to
// say something about the floor (see floorDrops).
func dropsOK(s *Sample) bool {
	return s.Count > 0 && float64(s.Dropped) <= floorDrops*float64(s.Count+s.Dropped)
}

// knee is X·F with F the mean floor: the concurrency at which the service is
// just saturated (Little's law); 0 while either is unknown.
func (m *model) knee() float64 { return m.thr * m.floorMean / 1e9 }

// blend averages a window of n requests with representative RTT rtt and mean
// RTT avg into the floor (see floorMemory).
func (m *model) blend(rtt, avg float64, n int) {
	if m.floor == 0 {
		m.floor, m.floorMean, m.floorW = rtt, avg, float64(n)
		return
	}
	m.floorW = min(m.floorW+float64(n), floorMemory)
	w := float64(n) / m.floorW
	m.floor += (rtt - m.floor) * w
	m.floorMean += (avg - m.floorMean) * w
}

// set replaces the floor with a probe's measurement over n requests.
func (m *model) set(rtt, avg, n float64) {
	m.floor, m.floorMean, m.floorW = rtt, avg, min(n, floorMemory)
}

// observe learns from a window that is not part of a probe: the floor from
// windows that show it, the throughput from saturated ones. It reports
// whether the window showed the floor.
func (m *model) observe(s *Sample, now int64) (shown bool) {
	if !dropsOK(s) {
		return false
	}
	rtt, avg := float64(s.RTT), float64(s.AvgRTT)
	switch {
	case !s.Saturated():
		if k := m.knee(); k > 0 && float64(s.MaxInFlight) > math.Ceil(k) {
			return false // above the knee: it may have queued
		}
		if m.floor == 0 || rtt <= m.floor*(1+band(s.Count)) {
			m.blend(rtt, avg, s.Count)
			return true
		}
	case m.floor > 0 && rtt < m.floor*(1-band(s.Count)):
		// Saturated, yet faster than the floor: the floor is lower.
		m.blend(rtt, avg, s.Count)
		return true
	}
	if s.Saturated() {
		m.noteRate(s)
	}
	return false
}

// noteRate smooths a saturated window's completion rate and keeps X (see
// rateMemory and rateWindows).
func (m *model) noteRate(s *Sample) {
	x := s.Rate()
	if x <= 0 {
		return
	}
	if m.rate == 0 {
		m.rate = x
	}
	m.rate += (x - m.rate) * min(1, float64(s.Count)/rateMemory)
	m.addRate(m.rate)
}

// addRate records x as a point of X's filter (see rateWindows) and sets X.
func (m *model) addRate(x float64) {
	m.rates[m.ratesN%rateWindows] = x
	m.ratesN++
	m.thr = 0
	for _, r := range m.rates[:min(m.ratesN, rateWindows)] {
		m.thr = max(m.thr, r)
	}
}

// slowed reports whether the windows say the service may have slowed (see
// slowLook), and records the window if the gate was saturated. The
// concurrency of a window is the one it held (Sample.Held): one that still
// drains a cut counts at its new limit, so a cut that did not make the RTT
// faster shows at once.
func (m *model) slowed(s *Sample) bool {
	if !s.Saturated() || !dropsOK(s) {
		return false
	}
	rtt := float64(s.RTT)
	slow := false
	if m.floor > 0 && rtt > m.floor*(1+band(s.Count)) {
		for i := range min(m.histN, slowLook) {
			h := m.hist[i]
			if float64(s.Held()) <= slowCut*float64(h.held) && rtt >= slowFlat*h.rtt {
				slow = true
			}
		}
	}
	m.hist[m.histN%slowLook] = histPoint{held: s.Held(), rtt: rtt}
	m.histN++
	return slow
}

// want reports whether a probe should start after window s (see model).
func (m *model) want(s *Sample, now int64, slow bool) bool {
	if !s.Saturated() || !dropsOK(s) {
		return false
	}
	if m.probeEnd >= 0 && now-m.probeEnd < int64(probeGap) {
		return false
	}
	return m.floor == 0 || slow || (m.satSince >= 0 && now-m.satSince >= int64(probeEvery))
}

// start begins a probe after window s, which triggered it; base is the
// limit to return to.
func (m *model) start(s *Sample, base int64) int64 {
	m.probe = probe{on: true, base: base, level: int64(s.Limit)}
	m.hist, m.histN = [slowLook]histPoint{}, 0
	if s.MaxInFlight <= s.Limit {
		m.probe.add(s) // the triggering window is the reference's first
	}
	return m.probe.level
}

func (p *probe) add(s *Sample) {
	p.windows++
	p.cnt += float64(s.Count)
	p.dur += s.Window.Seconds()
	p.rttSum += float64(s.Count) * float64(s.RTT)
	p.avgSum += float64(s.Count) * float64(s.AvgRTT)
}

// stepProbe takes a window of the probe under way and returns the limit for
// the next one (the probe's, or the one it returns to when it ends).
func (m *model) stepProbe(s *Sample, now int64) int64 {
	p := &m.probe
	if p.fresh || s.MaxInFlight > s.Limit || s.Count == 0 || !dropsOK(s) {
		// Requests admitted under the higher limit are still in flight (or
		// the window says nothing): wait for them.
		p.fresh = false
		if p.drains++; p.drains > probeDrains {
			return m.end(now, 0)
		}
		return p.level
	}
	if !s.Saturated() {
		// The demand fell below the probe's limit: it cannot find the knee
		// (the window itself, at low concurrency, shows the floor).
		m.observe(s, now)
		return m.end(now, 0)
	}
	p.add(s)
	x, rtt, avg := p.cnt/p.dur, p.rttSum/p.cnt, p.avgSum/p.cnt
	enough := p.cnt >= probeSamples || p.windows >= probeWindows
	var fell bool
	if p.step > 0 {
		// A sequential test: decide as soon as the throughput is clearly
		// (two standard errors of the difference of two Poisson counts)
		// above or below the mark, else at probeSamples.
		mark, z := (1-probeFell)*p.prevX, 2*math.Sqrt(1/p.cnt+1/p.prevN)
		switch {
		case x*(1+z) < mark:
			fell, enough = true, true
		case x*(1-z) >= mark:
			enough = true
		default:
			fell = x < mark
		}
	}
	if !enough {
		return p.level
	}
	switch {
	case p.step == 0:
		// The reference, at the algorithm's limit.
	case fell || p.level <= m.probeMinL:
		// The knee is crossed (or the limit cannot go lower): the RTT here
		// is the floor, whatever it was believed to be.
		m.set(rtt, avg, p.cnt)
		return m.end(now, p.prevX)
	case m.floor > 0 && rtt <= m.floor*(1+band(int(p.cnt))):
		// Still saturated, and as fast as the floor: confirmed.
		m.blend(rtt, avg, int(p.cnt))
		return m.end(now, x)
	case p.step >= probeSteps:
		return m.end(now, 0)
	}
	if p.step == 0 && m.floor > 0 && rtt <= m.floor*(1+band(int(p.cnt))) {
		// The reference itself shows the floor: nothing to probe.
		return m.end(now, x)
	}
	p.prevX, p.prevN = x, p.cnt
	p.step++
	p.level = max(m.probeMinL, p.level/2)
	p.fresh, p.drains, p.windows, p.cnt, p.dur, p.rttSum, p.avgSum = true, 0, 0, 0, 0, 0, 0
	return p.level
}

// end ends the probe and returns the limit to go back to: the algorithm's,
// or the knee if higher. x > 0 is the throughput measured by the probe above
// the knee, which replaces X.
func (m *model) end(now int64, x float64) int64 {
	p := &m.probe
	p.on = false
	m.probeEnd = now
	m.satSince = -1
	if x > 0 {
		m.addRate(x)
	}
	next := p.base
	if k := m.knee(); k > 0 {
		next = max(next, int64(math.Ceil(k)))
	}
	return min(max(next, m.probeMinL), m.probeMaxL)
}

// fill copies the model into the sample the algorithm gets.
func (m *model) fill(s *Sample) {
	s.Floor = time.Duration(m.floor)
	s.Throughput = m.thr
	s.Knee = m.knee()
	s.Probing = m.probe.on
}
