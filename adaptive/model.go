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
// probe, or to the least that keeps the service saturated
// (Sample.SaturatingLimit) if that is higher.
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
	confirmed        bool    // the floor was measured below a known knee, or by a probe

	rate     float64              // smoothed completion rate of saturated windows, per second
	rates    [rateWindows]float64 // the smoothed rates of the last saturated windows
	ratesN   int
	thr      float64 // X, per second; 0: never saturated
	satSince int64   // ns: since when the gate has been saturated without the floor shown; −1: not saturated
	hist     [slowLook]histPoint
	histN    int

	probe      probe
	probeEnd   int64 // ns: when the last probe ended; −1: none yet
	checkEvery int64 // ns: the saturation between checks that keeps their cost within checkBudget
	probeMinL  int64 // the gate's minimum limit
	probeMaxL  int64 // the gate's maximum limit
}

// histPoint is a saturated window: the concurrency it held and its RTT.
type histPoint struct {
	held int
	rtt  float64
	n    int // its completions
}

// probe is the state of a probe under way.
type probe struct {
	on       bool
	check    bool    // only check the floor at the knee (see checkOnly)
	base     int64   // the limit to return to
	level    int64   // the probe's limit now
	step     int     // levels below the reference so far; 0: the reference
	drains   int     // draining windows at this level
	windows  int     // measuring windows at this level
	cnt, dur float64 // successes and seconds measured at this level
	done     float64 // completions (successes and drops)
	rttSum   float64 // Σ Count·RTT of the measuring windows at this level
	avgSum   float64 // Σ Count·AvgRTT
	prevX    float64 // the throughput of the level above
	prevN    float64 // the completions it was measured over
	atKnee   bool    // the knee is crossed: measuring the floor at this level
	maxX     float64 // the highest throughput of the levels that kept it
}

// The tuned numbers of the model and the probe, in one table.
const (
	// floorMemory: the floor is a mean over about this many requests: the
	// median of n exponential times varies by ±1/√n, the mean by about as
	// much, so it is known to ±2.5% — enough for a check (below) not to
	// take its own noise for a slower service. A faster service is
	// followed sooner: a measurement at low concurrency clearly faster
	// than the floor replaces it.
	floorMemory = 2000
	// floorNoise and floorBand: a window's RTT within F·(1 + max(floorBand,
	// floorNoise/√n)) is the floor's noise: 2.5 standard errors of the
	// median of n exponential times (1.44/√n; the mean's is 1/√n), never
	// less than a fifth, for tails heavier than the exponential's. Beyond
	// it, queueing.
	floorNoise = 3.6
	floorBand  = 0.2
	// floorDrops: a window with more dropped requests than this share is
	// no evidence of the floor: its successes may be fast because the slow
	// ones were dropped.
	floorDrops = 0.01
	// rateMemory: the smoothed saturated rate averages about this many
	// completions (±3% for a Poisson count, so that the maximum of
	// rateWindows of them reads only a few percent high), whatever the
	// window length: a second at 500 completions per second.
	rateMemory = 500
	// rateWindows: X is the highest smoothed rate of the last rateWindows
	// saturated windows (BBR's ten round trips; a second of default
	// windows), so a service that lost capacity is believed within about
	// a second of saturation. Windows, not time: a probe or a calm spell
	// does not age the measurement.
	rateWindows = 10
	// kneeRoom: the requests beyond the knee that SaturatingLimit allows.
	// With Poisson arrivals at twice what the service can take, a limit of
	// the knee plus q leaves it idle about 2^−(q+1) of the time when a slot
	// frees (M/M/c/K): 1/8 at q = 2 on one core, which still serves 93%,
	// against 67% at the knee itself; on more cores only one of them idles
	// then. More room would hold a queue that buys no throughput.
	kneeRoom = 2
	// checkDepth: a check holds the limit at this share of the knee:
	// below it as long as X reads less than 11% high (it reads a few
	// percent high), so that the RTT there is the floor and not a little
	// queueing that would creep into it check after check. It costs about
	// a tenth of the throughput for a window or two.
	checkDepth = 0.9
	// checkBudget: checks come less often than probeEvery when they cost
	// more than this share of the throughput (on a few cores the knee is
	// a handful of requests, and a check measures for longer).
	checkBudget = 0.01
	// probeEvery: continuous saturation without a window showing the floor
	// after which the floor is measured again (BBR's ProbeRTT interval).
	probeEvery = 10 * time.Second
	// probeLoad: a floor that no probe has confirmed (learnt from windows
	// in which the gate was not saturated, whose RTT may hold some
	// queueing) is probed in the first window that refuses this share of
	// the callers — overload, where a wrong floor costs — or after
	// probeGap of continuous saturation; not on the Poisson peaks of a
	// busy server, which refuse a few.
	probeLoad = 0.1
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
	// drainShare: a window measures its level when the requests still in
	// flight from the higher limit at its start are at most this share of
	// its completions: their extra queueing then moves the mean by about
	// 1% (on 16 cores a cut from 20 to 14 leaves 6 of 250).
	probeDrains = 3
	drainShare  = 0.05
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

// SaturatingLimit is the least limit that keeps the service saturated: the
// knee, rounded up, plus kneeRoom; 0 while the knee is unknown. At the knee
// itself the service idles whenever a request ends and no caller happens to
// be there to take its slot; a few requests beyond it bridge the gaps
// between arrivals. Below it, a smaller limit no longer lowers the RTT (the
// service runs at its floor), it only refuses work the service could do.
func (s Sample) SaturatingLimit() int {
	if s.Knee <= 0 {
		return 0
	}
	return int(math.Ceil(s.Knee-1e-9)) + kneeRoom
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

// measured takes a measurement of the floor at low concurrency (a probe's or
// a check's) over n requests: it is averaged into a confirmed floor when it
// agrees with it to within its noise, and replaces it otherwise (a floor no
// probe confirmed may hold queueing: it weighs nothing against a
// measurement under the knee). It reports whether a confirmed floor moved:
// the service changed.
func (m *model) measured(rtt, avg, n float64) (moved bool) {
	if d := math.Abs(rtt - m.floor); m.confirmed && d <= band(int(n))*m.floor {
		m.blend(rtt, avg, int(n))
		return false
	}
	moved = m.confirmed
	m.floor, m.floorMean, m.floorW, m.confirmed = rtt, avg, min(n, floorMemory), true
	return moved
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
	rtt, held := float64(s.RTT), float64(s.Held())
	slow := false
	if m.floor > 0 && rtt > m.floor*(1+band(s.Count)) {
		for i := range min(m.histN, slowLook) {
			h := m.hist[i]
			// Queueing would make the RTT fall in proportion to the
			// concurrency: it did not, by more than two standard errors
			// of the ratio of two window means.
			cut, flat := held/float64(h.held), rtt/h.rtt
			noise := 2 * math.Sqrt(1/float64(s.Count)+1/float64(h.n))
			if cut <= slowCut && flat >= max(slowFlat, cut+noise) {
				slow = true
			}
		}
	}
	m.hist[m.histN%slowLook] = histPoint{held: s.Held(), rtt: rtt, n: s.Count}
	m.histN++
	return slow
}

// The kinds of probe.
const (
	noProbe   = iota
	fullProbe // halve down to the knee
	checkOnly // hold the knee for one window
)

// want returns the probe to start after window s, if any (see model).
func (m *model) want(s *Sample, now int64, slow bool) int {
	switch {
	case !s.Saturated() || !dropsOK(s):
		return noProbe
	case m.probeEnd >= 0 && now-m.probeEnd < int64(probeGap):
		return noProbe
	case slow || (!m.confirmed && (m.floor == 0 || heavy(s) || (m.satSince >= 0 && now-m.satSince >= int64(probeGap)))):
		return fullProbe
	case m.satSince >= 0 && now-m.satSince >= max(int64(probeEvery), m.checkEvery):
		return checkOnly
	}
	return noProbe
}

// heavy reports a window in which the gate refused at least probeLoad of
// the callers: overload, not a peak of the arrivals.
func heavy(s *Sample) bool {
	return float64(s.Rejected) >= probeLoad*float64(s.Rejected+s.Count+s.Dropped)
}

// start begins a probe of the given kind after window s, which triggered
// it; base is the limit to return to. A full probe's reference is measured
// at the window's limit, from that window on; a check holds ⌈knee⌉.
func (m *model) start(s *Sample, base int64, kind int) int64 {
	m.probe = probe{on: true, base: base, level: int64(s.Limit), check: kind == checkOnly}
	m.hist, m.histN = [slowLook]histPoint{}, 0
	if m.probe.check {
		if k := int64(math.Ceil(checkDepth*m.knee() - 1e-9)); k < m.probe.level {
			m.probe.level = max(k, m.probeMinL)
		}
	} else if s.MaxInFlight <= s.Limit {
		m.probe.add(s) // the triggering window is the reference's first
	}
	return m.probe.level
}

// add counts a measuring window at the probe's level.
func (p *probe) add(s *Sample) {
	p.windows++
	p.cnt += float64(s.Count)
	p.done += float64(s.Count + s.Dropped)
	p.dur += s.Window.Seconds()
	p.rttSum += float64(s.Count) * float64(s.RTT)
	p.avgSum += float64(s.Count) * float64(s.AvgRTT)
}

// stepProbe takes a window of the probe under way and returns the limit for
// the next one (the probe's, or the one it returns to when it ends).
func (m *model) stepProbe(s *Sample, now int64) int64 {
	p := &m.probe
	if float64(s.MaxInFlight-s.Limit) > drainShare*float64(s.Count) || s.Count == 0 {
		// Requests admitted under the higher limit are still in flight (or
		// the window says nothing): wait for them.
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
	if p.check || p.atKnee {
		return m.underKnee(s, now)
	}
	x := p.done / p.dur
	enough := p.done >= probeSamples || p.windows >= probeWindows
	var fell bool
	if p.step > 0 {
		// A sequential test: decide as soon as the throughput is clearly
		// (two standard errors of the difference of two Poisson counts)
		// above or below the mark. Undecided at probeSamples, it held: a
		// fall taken for noise costs one more halving, but noise taken for
		// a fall would stop above the knee and make its queueing the floor.
		mark, z := (1-probeFell)*p.prevX, 2*math.Sqrt(1/p.done+1/p.prevN)
		switch {
		case x*(1+z) < mark:
			fell, enough = true, true
		case x*(1-z) >= mark:
			enough = true
		}
	}
	switch {
	case !enough:
		return p.level
	case p.step == 0:
		// The reference, at the algorithm's limit.
	case fell || p.level <= m.probeMinL:
		// The knee is crossed (or the limit cannot go lower): the RTT here
		// is the floor, whatever it was believed to be.
		p.atKnee = true
		return m.underKnee(s, now)
	case p.step >= probeSteps:
		return m.end(now, 0)
	}
	p.prevX, p.prevN, p.maxX = x, p.done, max(p.maxX, x)
	p.step++
	p.level = max(m.probeMinL, p.level/2)
	p.drains, p.windows, p.cnt, p.done, p.dur, p.rttSum, p.avgSum = 0, 0, 0, 0, 0, 0, 0
	return p.level
}

// underKnee measures the floor at a level under the knee (a check's, or the
// level at which a probe crossed it) over probeSamples requests, or
// probeWindows windows, and then ends the probe: the measurement is averaged
// into the floor, or replaces it if it differs by more than its noise. A
// check that finds the RTT slower than the floor puts the floor in doubt: a
// full probe follows at once.
func (m *model) underKnee(s *Sample, now int64) int64 {
	p := &m.probe
	if p.cnt < probeSamples && p.windows < probeWindows {
		return p.level
	}
	rtt, avg := p.rttSum/p.cnt, p.avgSum/p.cnt
	if p.check {
		if !dropsOK(s) || rtt > m.floor*(1+band(int(p.cnt))) {
			m.confirmed = false
			next := m.end(now, 0)
			m.probeEnd = -1
			return next
		}
		m.measured(rtt, avg, p.cnt)
		// What the check cost: the throughput it lost while measuring.
		lost := max(0, m.thr*p.dur-p.done) / max(m.thr, 1)
		m.checkEvery = int64(lost / checkBudget * 1e9)
		return m.end(now, 0)
	}
	if m.measured(rtt, avg, p.cnt) {
		// A service whose floor moved has changed: the throughput
		// measured before the probe may be that of another service. What
		// the probe measured at the levels that kept the throughput is the
		// throughput now.
		m.ratesN = 0
		return m.end(now, p.maxX)
	}
	return m.end(now, p.prevX)
}

// end ends the probe and returns the limit to go back to: the algorithm's,
// or Sample.SaturatingLimit if higher. x > 0 is a throughput the probe
// measured at a level that kept it: a point of X's filter.
func (m *model) end(now int64, x float64) int64 {
	p := &m.probe
	p.on = false
	m.probeEnd = now
	m.satSince = -1
	if x > 0 {
		m.addRate(x)
	}
	var s Sample
	m.fill(&s)
	next := max(p.base, int64(s.SaturatingLimit()))
	return min(max(next, m.probeMinL), m.probeMaxL)
}

// fill copies the model into the sample the algorithm gets.
func (m *model) fill(s *Sample) {
	s.Floor = time.Duration(m.floor)
	s.FloorMean = time.Duration(m.floorMean)
	s.Throughput = m.thr
	s.Knee = m.knee()
	s.Probing = m.probe.on
}
