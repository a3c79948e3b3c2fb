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
//     believed within a second. A full probe replaces it with what it
//     measured.
//
//   - the floor F: the round-trip time at low concurrency, about what a
//     request served alone takes, in the statistic of Sample.RTT (and as a
//     mean, for Little's law). It is a sample-weighted mean over the latest
//     floorMemory requests of the windows that show it: windows in which the
//     gate was not saturated (no one refused, the peak in flight under the
//     limit), and probes. An unsaturated window slower than F by more than
//     its noise (band) is queueing and is left out; a faster one counts. A
//     saturated window is never evidence that the floor rose: whatever the
//     floor, its RTT is its concurrency over the throughput (Little's law).
//     It lowers F only when it is faster than F by more than its noise (no
//     RTT can be faster than the floor). Nor is a window under a room
//     (room.go): the room lets a demand near the capacity queue.
//
//     Not saturated is not the same as low concurrency: at 0.8 of the
//     capacity of four cores, requests queue, and the floor those windows
//     show reads high by a third. So a floor only windows have shown is
//     unconfirmed, and weighs nothing against a probe; a probe confirms it.
//
//   - the knee K = X·F (with F the mean RTT): the concurrency at which the
//     service is just saturated, by Little's law. Below it cores idle; above
//     it requests queue. Sample.SaturatingLimit adds a little room to it.
//
// The probe. An algorithm that moves the limit on F (a FloorProber) needs F
// to be right, and a saturated gate never shows it. So the gate probes, in a
// window in which it is saturated, when
//
//   - it has no floor (a cold start into overload), or its floor is
//     unconfirmed and the service is overloaded: probeLoad of the callers
//     refused (smoothed over a few windows), or probeGap of continuous
//     saturation; or
//
//     A cold start probes up before it probes down (see stepUp): when the
//     window that triggers it is not censored (see censored), the limit
//     doubles once (or, in a window of several round trips, steps up to the
//     concurrency its callers would fill: see startupLevel); if the
//     throughput grows in proportion at the same RTT the floor is
//     measured at two concurrencies and the gate keeps the raised limit,
//     without the full probe's halvings (a service whose callers need more
//     than the initial limit but never queue — an I/O-bound one — is then
//     refused only in its first window or two). Otherwise the full probe
//     follows from the initial limit. An up-probe's level is measured from
//     a round trip after it was set (see upFill); a full probe's reference
//     never takes a window that closed within twice its slowest request of
//     the traffic's start (see young);
//
//   - the service may have slowed: in two saturated windows in a row,
//     cutting the concurrency did not make the RTT faster, or, over a run
//     of saturated windows at the saturating limit or under it, the mean
//     RTT was above what the model expects (see slowed);
//
// and not within probeGap of the end of the previous probe. A full probe
// measures the throughput at the current limit (or the algorithm's new one,
// if it is cutting) over probeSamples requests (the reference), then halves the limit and measures again, while the
// throughput holds. A window that starts with more in flight than the
// level drains (the requests admitted under the higher limit queued there),
// unless they are at most drainShare of its completions. The first level
// whose throughput is below the one above by more than probeFell and two
// standard errors (of the counts; or of the rates by Little's law, the
// level over its mean RTT, where the RTTs are tight: see littleRate) has
// crossed the knee: the service is no longer saturated there, so its RTT,
// measured over probeSamples requests, is the floor. (So is the RTT at the
// gate's minimum limit.) It replaces an unconfirmed floor, and a confirmed one when they
// differ by more than its noise; otherwise it is averaged in. The
// throughput the probe measured at the levels that kept it becomes X.
//
// The check. Every probeEvery of continuous saturation (BBR's ProbeRTT
// interval), a confirmed floor is checked: the limit holds ⌈checkDepth·K⌉,
// just under the knee, for probeSamples requests. An RTT there within the
// noise of F confirms it (and is averaged in, or replaces it if faster); one
// slower in its statistic and in its mean puts it in doubt, and a full probe
// follows at once. Checks come
// less often when they cost more than checkBudget of the throughput.
//
// During a probe or a check the algorithm is told (Sample.Probing) and its
// proposals are not applied; afterwards the limit returns to where the
// algorithm had it (its last proposal, or the window's limit if lower), or
// to Sample.SaturatingLimit if that is higher.
//
// The room. Where the gate refuses a few callers of a steady demand, they
// may be the peaks of a demand the service keeps up with, which a limit at
// the knee refuses for nothing: a room probe doubles the limit, keeps it
// if the callers do not fill the room added, and holds it under the
// algorithm's limit while the demand stays the one it was measured on (see
// room.go).
//
// The cost. Neither ever runs while the gate is not saturated: there the
// windows themselves show the floor. A full probe's reference holds the
// algorithm's limit; then at most probeSteps levels follow, each of at most
// probeDrains draining and probeWindows measuring windows. Every level but
// the last kept the throughput (the test asks a fall beyond probeFell and
// two standard errors): they cost no throughput, only the queueing they
// removed. The last one is the only one below the knee, and, half of a
// level that kept the throughput, it keeps at least half of it, for at most
// probeDrains + probeWindows windows. A check keeps about checkDepth of the
// throughput for as long, and checks are spaced to cost at most checkBudget.
// With 100 ms windows and a few hundred completions in each, a full probe
// costs one or two windows at half the throughput or better, and a check
// one window at nine tenths.
type model struct {
	floor, floorMean float64 // ns; 0: no floor yet
	floorW           float64 // requests behind the floor's average
	confirmed        bool    // a probe or a check measured the floor (else only unsaturated windows showed it)
	doubt            bool    // a check found the RTT at the knee slower than the floor: a full probe is due

	rate     float64              // smoothed completion rate of saturated windows, per second
	rates    [rateWindows]float64 // the smoothed rates of the last saturated windows
	ratesN   int
	thr      float64 // X, per second; 0: never saturated
	satSince int64   // ns: since when the gate has been saturated without a break or a probe; −1: not saturated
	refused  float64 // the share of callers refused, smoothed over about ten windows
	hist     [slowLook]histPoint
	histN    int
	flat     bool     // the last saturated window showed a cut that did not make the RTT faster
	above    evidence // the run of saturated windows at or under the saturating limit (see slowed)
	cutFrom  int      // the highest limit since the last cut (see noteCut)
	cutAt    int64    // ns: when the window of the last cut began

	probe      probe
	probeEnd   int64 // ns: when the last probe ended; −1: none yet
	checkEvery int64 // ns: the saturation between checks that keeps their cost within checkBudget
	born       int64 // ns: when the first window with completions began; −1: none yet
	probeMinL  int64 // the gate's minimum limit
	probeMaxL  int64 // the gate's maximum limit
	room       room  // the room for the demand's peaks (room.go)
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
	up       bool    // probing up: the level is twice the reference's (see upProbe)
	upOK     bool    // an up-probe's doubling grew at the floor's RTT: the floor is measured
	refL     int64   // an up-probe's reference: the limit of the window that triggered it,
	refX     float64 // its completion rate (a room probe's: its arrival rate),
	refN     float64 // its completions (a room probe's: the concurrency held),
	refRTT   float64 // and its RTT statistic and mean
	refAvg   float64
	since    int64         // ns: when an up-probe's (or a room probe's) level was set
	fill     float64       // seconds of an up-probe's measuring windows within its level's fill (see ownRate)
	maxRTT   time.Duration // the slowest request of the measuring windows at this level
	base     int64         // the limit to return to
	level    int64         // the probe's limit now
	step     int           // levels below the reference so far; 0: the reference
	drains   int           // draining windows at this level
	windows  int           // measuring windows at this level
	cnt, dur float64       // successes and seconds measured at this level
	done     float64       // completions (successes and drops)
	rttSum   float64       // Σ Count·RTT of the measuring windows at this level
	avgSum   float64       // Σ Count·AvgRTT
	avgSq    float64       // Σ Count·AvgRTT² (see littleRate)
	prevLx   float64       // the level above's rate by Little's law (0: not measured),
	prevLse  float64       // and that rate's relative standard error
	prevX    float64       // the throughput of the level above
	prevN    float64       // the completions it was measured over
	atKnee   bool          // the knee is crossed: measuring the floor at this level
	maxX     float64       // the highest throughput of the levels that kept it
	// A room probe (room.go): the reference's concurrency is refN, and
	// the variance of a window's about it refVar; the level's refused
	// callers, and Σ and Σ² of its windows' concurrency.
	room           bool
	refVar         float64
	rej, nSum, nSq float64
}

// The tuned numbers of the model and the probe, in one table.
const (
	// floorMemory: the floor is a mean over about this many requests: the
	// mean of n exponential times varies by ±1/√n, their median by
	// ±1.44/√n, so it is known to ±2.5–3% — enough for a check not to take
	// its own noise for a slower service. A faster service is followed
	// sooner: a measurement at low concurrency clearly faster than the
	// floor replaces it.
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
	// kneeRoom and kneeWide: the requests beyond the knee that
	// SaturatingLimit allows — kneeRoom below a knee of kneeWide, one from
	// there on. At the knee itself the service idles whenever a slot frees
	// and no caller happens to be there; the room bridges those gaps. With
	// Poisson arrivals at twice what c cores take (M/M/c/c+q), q = 0 serves
	// 67% on one core, 85% on four, 95% on sixteen; q = 1 serves 86%, 93%,
	// 97.5%; q = 2 serves 93%, 97%, 99%. So two below eight cores' worth
	// (one core: three would serve 97% but put its p99 at about ten
	// service times), one above, where a second would only hold a queue.
	kneeRoom = 2
	kneeWide = 8
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
	// probeEvery: the continuous saturation after which a confirmed floor
	// is checked (BBR's ProbeRTT interval): a service that slowed while
	// the gate was saturated shows it no other way when the algorithm
	// does not cut the concurrency.
	probeEvery = 10 * time.Second
	// probeLoad: a floor that no probe has confirmed (learnt from windows
	// in which the gate was not saturated, whose RTT may hold some
	// queueing) is probed once the gate refuses this share of the callers
	// (smoothed: refusedAlpha) — overload, where a wrong floor costs — or
	// after probeGap of continuous saturation; not on the Poisson peaks of
	// a busy server, which refuse a few.
	probeLoad = 0.1
	// refusedAlpha: the share of callers refused is smoothed with this
	// weight per window (about ten windows, a second of default ones), so
	// that a burst of a window or two does not read as overload.
	refusedAlpha = 0.1
	// probeGap: the least time between probes, so that evidence which keeps
	// pointing at a slower service cannot keep the gate probing.
	probeGap = 2 * time.Second
	// probeSamples: each level of a probe is measured over at least this
	// many completions (a rate to ±7%, and the differences of two such
	// rates to ±10%), or probeWindows windows, whichever comes first.
	probeSamples = 200
	probeWindows = 8
	// refWindows: a probe's reference (at the algorithm's limit) is
	// measured over at most this many windows: where they hold few
	// completions the test of the levels below (two standard errors of
	// the difference) accounts for it, and every window of the reference
	// holds the algorithm's limit, whatever it proposes.
	refWindows = 3
	// probeDecide: a level's throughput is judged early (before
	// probeSamples) only over at least this many completions: over a dozen
	// the count is too far from normal for two standard errors to mean
	// much (a dozen where 20 were due, against a reference 1.4σ high, read
	// as the knee on one core and made three times the floor the floor).
	probeDecide = 50
	// probeFell: a level whose throughput is this much below the level
	// above (two standard errors of their difference) has crossed the
	// knee: the service is no longer saturated, so its RTT is the floor.
	probeFell = 0.2
	// probeDrains: the most windows a level waits for the requests admitted
	// under the higher limit to finish; a probe that waits longer gives up.
	// drainShare: the first window after a cut (it starts with more in
	// flight than the new limit) measures the level only when the requests
	// in flight at its start, all admitted under the higher limit, are at
	// most this share of its completions: their queueing then moves its
	// mean by a few percent at most. Otherwise it drains, and the next
	// window measures.
	probeDrains = 3
	drainShare  = 0.05
	// upFill: an up-probe's level is measured from the first window of
	// which at most this share passed within a round trip (the
	// reference's mean RTT) of the level's start: requests admitted under
	// the doubled limit complete a round trip later, so the part before
	// reads the old level's rate. A quarter reads a doubled level's rate
	// at least 7/8 of itself (¾·2 + ¼·1 over 2), above the 1 − probeFell
	// the doubling is judged by. Where a round trip is half a window, the
	// first window reads it a quarter low (TestUpProbeMeasuresALevel-
	// ARoundTripAfterItsStart: 6,889/s for 8,889/s), and a cold start
	// under the knee halved its limit instead of doubling it.
	upFill = 0.25
	// littleWindows and littleZ: a level's rate by Little's law (see
	// littleRate) is judged once it has this many measuring windows, at
	// this many standard errors: the spread is estimated from the
	// windows' means, two degrees of freedom at the least, whose
	// Student's t at 97.5% is 4.3 (three: 3.2; ten: 2.2).
	littleWindows = 3
	littleZ       = 4.3
	// roomLoad and roomFill: a gate that refuses under roomLoad of its
	// callers (an overload of 4/3 refuses a quarter) may be refusing only
	// the peaks of a demand the service keeps up with (one core at 0.95
	// with a limit of 3 refuses a fifth); a room probe doubles the limit
	// and keeps it if under roomFill of the room added fills (on one core,
	// a load of one fills about half; see room.go). A third let sim's
	// heavy-tail overload (1.5×, 35% refused) pay for room probes: its
	// median p99 1.9 → 2.8 ms.
	roomLoad = 1.0 / 4
	roomFill = 0.5
	// roomOver: the least overload a room probe must tell from a demand
	// under the capacity: a tenth over it. Its queue grows at a tenth of
	// the arrival rate, so a level is measured long enough for that to
	// fill roomFill of the room added (see roomTime), and a room too big
	// for that within probeWindows is not tried: near a load of one a
	// doubling of hundreds of requests fills too slowly to be judged.
	roomOver = 0.1
	// roomAlpha: the concurrency a room holds, and its arrivals, are
	// smoothed with this weight per window (about four windows) before
	// they are judged: on one core at 0.7 of capacity a window of 70
	// requests holds anywhere from 0.7 to 3.5 for a mean of 2.
	roomAlpha = 0.25
	// roomWindows: a room probe's level is measured over at least this
	// many windows and probeSamples completions (the held concurrency of
	// one window of a few dozen requests varies by half).
	roomWindows = 4
	// roomSpan: the demand is steady when two spans this long brought
	// arrivals at the same rate, to three standard errors, and without
	// bursts (see room.steady): over two seconds at a thousand a second,
	// a rate known to ±2%, so that a ramp of a tenth of the capacity a
	// second shows.
	roomSpan = 2 * time.Second
	// roomBackoff: room probes that found an overload in a row double the
	// wait for the next, from probeEvery up to 2^roomBackoff times it
	// (about eleven minutes): an overload of under 1.5× that lasts costs
	// a probe a few times an hour.
	roomBackoff = 6
	// roomSlack: one request (or one caller) of slack on the room's
	// tests, which compare a few requests on a few cores: without it a
	// room whose concurrency showed no spread ends on the first request
	// more.
	roomSlack = 1
	// probeSteps: the most halvings of one probe (1/256 of the limit).
	probeSteps = 8
	// littleShare: a window whose completions (rate · mean RTT, Little's
	// law) explain less than this share of the concurrency it held is
	// censored (see censored). In a steady window the two agree to within
	// the noise of the mean (±17% over 70 requests of the zoo's bimodal
	// service, ±12% of an exponential's); the first window of a cold start
	// into 64 cores of it reads 0.59, the next, at twice the limit, 0.49.
	littleShare = 2.0 / 3
	// slowLook, slowCut and slowFlat: the service may have slowed when a
	// saturated window held at most slowCut of the concurrency of one of
	// the slowLook saturated windows before it, with an RTT no faster than
	// slowFlat of that window's: less concurrency no longer made it faster
	// (queueing would have made it faster in proportion).
	slowLook = 3
	slowCut  = 0.75
	slowFlat = 0.9
	// winRounds: a window lasts at least this many round trips at the
	// floor (its mean), when that is longer than WithWindow's minimum (and
	// its maximum then stretches to match). In a window shorter than the
	// requests it measures, the slow ones admitted in it complete only in
	// a later one and, after the limit moved, its completions are the old
	// limit's for a whole round trip: on a service with a 336 ms floor and
	// 100 ms windows, a probe's levels each read the level before. Two:
	// a request of the mean length admitted in the window's first half
	// completes in it. At the floor, not at the window's RTT: queueing
	// must not slow the gate's reactions to it.
	winRounds = 2
)

func newModel(minLimit, maxLimit int64) model {
	return model{satSince: -1, probeEnd: -1, born: -1, probeMinL: minLimit, probeMaxL: maxLimit}
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
// knee, rounded up, plus a little room (two requests below a knee of
// eight, one above); 0 while the knee is unknown. At the knee
// itself the service idles whenever a request ends and no caller happens to
// be there to take its slot; a few requests beyond it bridge the gaps
// between arrivals. Below it, a smaller limit no longer lowers the RTT (the
// service runs at its floor), it only refuses work the service could do.
func (s Sample) SaturatingLimit() int {
	if s.Knee <= 0 {
		return 0
	}
	room := 1
	if s.Knee < kneeWide {
		room = kneeRoom
	}
	return int(math.Ceil(s.Knee-1e-9)) + room
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
// measurement under the knee).
func (m *model) measured(rtt, avg, n float64) {
	if d := math.Abs(rtt - m.floor); m.confirmed && d <= band(int(n))*m.floor {
		m.blend(rtt, avg, int(n))
		return
	}
	m.floor, m.floorMean, m.floorW, m.confirmed = rtt, avg, min(n, floorMemory), true
}

// observe learns from a window that is not part of a probe: the floor from
// windows that show it, the throughput from saturated ones. It reports
// whether the window showed the floor.
func (m *model) observe(s *Sample, now int64) (shown bool) {
	if m.born < 0 && s.Count > 0 {
		m.born = now - int64(s.Window)
	}
	if all := s.Rejected + s.Count + s.Dropped; all > 0 {
		m.refused += refusedAlpha * (float64(s.Rejected)/float64(all) - m.refused)
	}
	if !dropsOK(s) {
		return false
	}
	rtt, avg := float64(s.RTT), float64(s.AvgRTT)
	switch {
	case !s.Saturated() && m.room.limit == 0:
		if m.floor == 0 || rtt <= m.floor*(1+band(s.Count)) {
			m.blend(rtt, avg, s.Count)
			return true
		}
	case m.floor > 0 && rtt < m.floor*(1-band(s.Count)):
		// Saturated, or under a room (room.go: a demand near the
		// capacity, let queue), yet faster than the floor: the floor is
		// lower.
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

// evidence is a run of windows' completions, the sum of their RTTs
// (count · mean RTT) and the sum of what the model expects of them.
type evidence struct{ n, obs, exp float64 }

// add adds n completions at mean RTT avg where the model expects exp, and
// reports whether the run, so far, is slower than expected by more than
// twice its noise (band of all its completions).
func (e *evidence) add(n int, avg, exp float64) bool {
	e.n += float64(n)
	e.obs += float64(n) * avg
	e.exp += float64(n) * exp
	return e.obs > e.exp*(1+2*band(int(e.n)))
}

// noteCut records when the limit was last cut: a window whose limit is at
// most slowCut of the highest since the previous cut (the quarter the flat
// sign calls a cut) began at a cut. A limit that creeps down a request at a
// time makes no cut: the few requests it leaves behind barely queue.
func (m *model) noteCut(s *Sample, now int64) {
	if float64(s.Limit) <= slowCut*float64(m.cutFrom) {
		m.cutAt, m.cutFrom = now-int64(s.Window), s.Limit
	}
	m.cutFrom = max(m.cutFrom, s.Limit)
}

// slowed reports whether the windows say the service may have slowed, and
// records the window if the gate was saturated. Two signs, each clear of
// the requests of any higher limit (the RTT of a window right after a cut
// may still be the old queue's: after a burst it falls a window later,
// after a slowdown it does not):
//
//   - flat: in two saturated windows in a row, the second clean (its peak
//     in flight within its limit): against one of the last slowLook
//     saturated windows, the concurrency held (Sample.Held) fell by a
//     quarter (slowCut) without making the RTT 10% faster (slowFlat) or
//     falling in proportion to within two standard errors; and the RTT
//     above F by more than its noise;
//   - above the model: over a run of clean saturated windows that held no
//     more than the saturating limit S = ⌈K⌉ + kneeRoom, each completing
//     only requests admitted after the last cut, where the model expects a
//     mean RTT of at most F·S/K (Little's law), the run's mean RTT was
//     above that by more than twice its noise. The run ends at the first
//     window that does not qualify, and is judged afresh every
//     probeSamples completions. A run, not a window: on 64 cores a window
//     completes a few dozen requests, whose mean is known to ±66%
//     (band(30)), and an algorithm whose guard holds the limit at S, or
//     creeps it down a request at a time, never shows a cut: a service
//     whose floor doubled was believed unchanged for 14 s (zoo ps/64,
//     halve-service: goodput 38% of capacity).
func (m *model) slowed(s *Sample, now int64) bool {
	m.noteCut(s, now)
	if !s.Saturated() || !dropsOK(s) {
		m.above = evidence{}
		return false
	}
	rtt, held := float64(s.RTT), float64(s.Held())
	clean := s.MaxInFlight <= s.Limit
	var k Sample
	m.fill(&k)
	// The window is evidence if it held no more than S and completed only
	// requests admitted after the last cut.
	sat := float64(k.SaturatingLimit())
	counts := clean && sat > 0 && held <= sat && now-int64(s.Window)-int64(s.MaxRTT) >= m.cutAt
	above := counts && m.above.add(s.Count, float64(s.AvgRTT), m.floorMean*sat/k.Knee)
	if !counts || above || m.above.n >= probeSamples {
		m.above = evidence{} // the run ends, or is judged afresh
	}
	flat := false
	if m.floor > 0 && rtt > m.floor*(1+band(s.Count)) {
		for i := range min(m.histN, slowLook) {
			h := m.hist[i]
			// Queueing would make the RTT fall in proportion to the
			// concurrency: it did not, by more than two standard errors
			// of the ratio of two window means.
			cut, ratio := held/float64(h.held), rtt/h.rtt
			noise := 2 * math.Sqrt(1/float64(s.Count)+1/float64(h.n))
			if cut <= slowCut && ratio >= max(slowFlat, cut+noise) {
				flat = true
			}
		}
	}
	m.hist[m.histN%slowLook] = histPoint{held: s.Held(), rtt: rtt, n: s.Count}
	m.histN++
	slow := clean && ((flat && m.flat) || above)
	m.flat = flat
	return slow
}

// The kinds of probe.
const (
	noProbe   = iota
	fullProbe // halve down to the knee
	checkOnly // hold the knee for one window
	upProbe   // double the limit once, then halve down if that did not pay
	roomProbe // double the limit while the room added does not fill (room.go)
)

// want returns the probe to start after window s, if any (see model).
func (m *model) want(s *Sample, now int64, slow bool) int {
	switch {
	case !s.Saturated():
		return noProbe
	case !dropsOK(s) && m.floor > 0:
		// Drops beside a floor: they may be the service's own failures (a
		// slow dependency), which a probe would not explain. Without a
		// floor they are the cold start's queue timing out: all the more
		// reason to find the floor (measured: 9 s without a probe on one
		// core, the limit held at 10 by its own RTT, when drops blocked it).
		return noProbe
	case m.confirmed && !slow && !m.doubt && m.wantsRoom(s, now):
		// Not held back by probeGap: a room probe measures no floor.
		return roomProbe
	case m.probeEnd >= 0 && now-m.probeEnd < int64(probeGap):
		return noProbe
	case !m.confirmed && m.floor == 0 && m.up(s, now):
		return upProbe
	case slow || m.doubt || (!m.confirmed && m.floor == 0):
		return fullProbe
	case !m.confirmed && (m.refused >= probeLoad || (m.satSince >= 0 && now-m.satSince >= int64(probeGap))):
		// A floor that only unsaturated windows showed is checked first, at
		// the knee it implies: its queueing, if any, makes that knee too
		// high, and the check reads a faster RTT there and lowers it (check
		// after check, towards the floor); a slower one puts it in doubt
		// and a full probe follows. One window or two at nine tenths of the
		// throughput, where a full probe halves the limit down to the knee
		// (measured on step-2x, seed 1: phase goodput 96.8% with the full
		// probe, 97.1% with the check).
		if m.thr > 0 {
			return checkOnly
		}
		return fullProbe
	case m.satSince >= 0 && now-m.satSince >= max(int64(probeEvery), m.checkEvery):
		return checkOnly
	}
	return noProbe
}

// start begins a probe of the given kind after window s, which triggered
// it; base is the limit to return to. A full probe's reference is measured
// at the window's limit, from that window on; a check holds ⌈knee⌉.
func (m *model) start(s *Sample, now, base int64, kind int) int64 {
	m.probe = probe{on: true, base: base, level: int64(s.Limit), check: kind == checkOnly, since: now}
	m.hist, m.histN = [slowLook]histPoint{}, 0
	m.above = evidence{}
	if kind == roomProbe {
		return m.startRoom(s)
	}
	if kind == upProbe && base >= int64(s.Limit) {
		p := &m.probe
		p.up, p.refL, p.refX, p.refN = true, int64(s.Limit), float64(s.Count+s.Dropped)/s.Window.Seconds(), float64(s.Count+s.Dropped)
		p.refRTT, p.refAvg = float64(s.RTT), float64(s.AvgRTT)
		p.level = min(startupLevel(s), m.probeMaxL)
		return p.level
	}
	if m.probe.check {
		if k := m.checkLevel(); k < m.probe.level {
			m.probe.level = max(k, m.probeMinL)
		}
	} else if base < int64(s.Limit) {
		// The algorithm is cutting: the reference is its new limit, once
		// drained, not the queue it is leaving.
		m.probe.level = base
	} else if s.MaxInFlight <= s.Limit && !m.young(s.MaxRTT, now) {
		m.probe.add(s) // the triggering window is the reference's first
	}
	return m.probe.level
}

// startupLevel is the level a cold start's up-probe raises the limit L of
// window s to:
//
//	level = max(2L, min(L·2^(window/rtt), arrivals/window · rtt))
//
// BBR's startup doubles once per round trip, and a window of several round
// trips holds as many doublings; but no more than the concurrency the
// window's callers would have filled at its RTT (their arrival rate, served
// and refused, times its mean RTT: Little's law). A service whose requests
// wait on I/O for a fifth of a window reaches its demand in one step instead
// of four or five; one whose requests take a window or more doubles, as
// before. The doubling's test is the same whatever the step: the rate must
// grow in proportion at the reference's RTT.
func startupLevel(s *Sample) int64 {
	L := float64(s.Limit)
	rtt, win := s.AvgRTT.Seconds(), s.Window.Seconds()
	if rtt <= 0 || win <= 0 {
		return 2 * int64(s.Limit)
	}
	demand := float64(s.Count+s.Dropped+s.Rejected) / win * rtt
	return int64(math.Ceil(max(2*L, min(L*math.Exp2(min(win/rtt, 30)), demand))))
}

// checkLevel is the limit a check holds: ⌈checkDepth·K⌉, or, where that
// rounds up to the knee itself (a knee of a few requests), the largest
// limit below it. A level at or above the believed knee cannot confirm a
// floor: on one core at half load the windows show twice the service time
// (requests queue), the knee then reads two, and a check at two requests
// sharing the core measures twice the service time again — a floor that
// confirms itself. Under the knee, a floor that holds queueing shows as an
// RTT faster than itself.
func (m *model) checkLevel() int64 {
	k := m.knee()
	c := int64(math.Ceil(checkDepth*k - 1e-9))
	if float64(c) >= k {
		c = int64(math.Ceil(k-1e-9)) - 1
	}
	return c
}

// filling reports whether more than upFill of window s, closed at now,
// passed within a round trip (the reference's mean RTT) of the raised
// level's start: its completions are still mostly the level before's
// (requests admitted under the new limit complete a round trip later), so
// the next window measures. For an up-probe and a room probe.
func (p *probe) filling(s *Sample, now int64) bool {
	return p.lag(s, now) > upFill*float64(s.Window)
}

// lag is how far into window s, closed at now, the level's first round
// trip (the reference's mean RTT from the level's start) reached, in ns;
// negative where it ended before the window began.
func (p *probe) lag(s *Sample, now int64) float64 {
	return float64(p.since) + p.refAvg - float64(now-int64(s.Window))
}

// newLevel forgets what was measured at the level before, for the next.
func (p *probe) newLevel() {
	p.drains, p.windows, p.cnt, p.done, p.dur, p.rttSum, p.avgSum, p.avgSq, p.maxRTT = 0, 0, 0, 0, 0, 0, 0, 0, 0
	p.fill = 0
}

// ownRate is the rate of n of an up-probe's level's completions (or
// successes) over its measuring windows, without its fill: the part of
// them within a round trip of the level's start, and the time its callers
// took to fill the slots added, still completed the level before's
// requests, at the reference's rate (see stepUp). A window of five
// round trips that began with a doubled level reads it a tenth low; one
// that began with a level many times the reference (a cold start's first
// step) a fifth and more: measured in a real process, 7,300/s at a level
// of 247 whose requests complete 11,700 a second.
func (p *probe) ownRate(n float64) float64 {
	if p.fill > 0 && p.dur > p.fill {
		return max(0, n-p.refX*p.fill) / (p.dur - p.fill)
	}
	return n / p.dur
}

// add counts a measuring window at the probe's level.
func (p *probe) add(s *Sample) {
	p.maxRTT = max(p.maxRTT, s.MaxRTT)
	p.windows++
	p.cnt += float64(s.Count)
	p.done += float64(s.Count + s.Dropped)
	p.dur += s.Window.Seconds()
	p.rttSum += float64(s.Count) * float64(s.RTT)
	p.avgSum += float64(s.Count) * float64(s.AvgRTT)
	p.avgSq += float64(s.Count) * float64(s.AvgRTT) * float64(s.AvgRTT)
}

// littleRate is the level's throughput by Little's law — its limit over
// the mean RTT of its measuring windows, the gate being saturated at it —
// and that rate's relative standard error, from the spread of the
// windows' means (each window's mean of n requests varies by σ/√n, so
// Σ n·(mean − overall)² / (windows − 1) estimates σ²); 0, 0 before
// littleWindows windows. Where the service time varies less than the
// exponential's, the mean RTT knows the rate far better than a count of
// the same requests (a service that waits 320 ms on a dependency for 16 of
// CPU: ±1% from 50 requests against ±14% for their count).
func (p *probe) littleRate() (x, se float64) {
	if p.windows < littleWindows || p.cnt <= 0 {
		return 0, 0
	}
	avg := p.avgSum / p.cnt
	v := max(0, (p.avgSq-p.cnt*avg*avg)/float64(p.windows-1))
	return float64(p.level) / (avg / 1e9), math.Sqrt(v/p.cnt) / avg
}

// stepProbe takes a window of the probe under way and returns the limit for
// the next one (the probe's, or the one it returns to when it ends).
func (m *model) stepProbe(s *Sample, now int64) int64 {
	p := &m.probe
	if (s.MaxInFlight > s.Limit && float64(s.MaxInFlight) > drainShare*float64(s.Count)) || s.Count == 0 {
		// Requests admitted under the higher limit are still in flight (or
		// the window says nothing): wait for them.
		if p.drains++; p.drains > probeDrains {
			if p.room {
				return m.roomFailed(now)
			}
			return m.end(now, 0)
		}
		return p.level
	}
	if p.room {
		return m.stepRoom(s, now)
	}
	if !s.Saturated() {
		// The demand fell below the probe's limit: it cannot find the knee
		// (the window itself, at low concurrency, shows the floor). Above
		// an up-probe's reference, at an RTT as flat as the reference's,
		// it also confirms the floor, and the demand fits under the level;
		// after a doubling that grew, the level below it is kept too.
		m.observe(s, now)
		if p.up && p.flat(float64(s.RTT), float64(s.AvgRTT), s.Count) && m.floor > 0 && !m.censored(s, now) {
			// The demand fitted under the level at the floor's RTT: the
			// level stays, room for the demand's peaks.
			m.confirmed = true
			p.base = max(p.base, p.level)
		}
		if p.upOK {
			p.base = max(p.base, p.refL)
		}
		return m.end(now, 0)
	}
	if p.up && p.filling(s, now) {
		return p.level
	}
	if !p.up && p.step == 0 && p.windows == 0 && m.young(s.MaxRTT, now) {
		// A full probe's reference is never a window that closed within
		// twice its slowest request of the traffic's start: the slow
		// requests are missing from it, and it reads the rate low.
		return p.level
	}
	p.add(s)
	if p.up {
		return m.stepUp(s, now)
	}
	if p.check || p.atKnee {
		return m.underKnee(s, now)
	}
	x := p.done / p.dur
	enough := p.done >= probeSamples || p.windows >= probeWindows || (p.step == 0 && p.windows >= refWindows)
	var fell bool
	if p.step > 0 && p.done >= probeDecide {
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
	// The fall alone is also judged on the rates by Little's law, from
	// littleWindows windows however few their completions, decisive first
	// where the RTTs are tight (see littleRate), at littleZ standard
	// errors: their spread is estimated from a few windows. Not the hold:
	// where the callers do not keep the gate full all the time (a burst
	// that ends), a level holds fewer than its limit, its rate by Little's
	// law reads high, and a fall is missed, never made up.
	if p.step > 0 && !fell && p.prevLx > 0 {
		if lx, se := p.littleRate(); lx > 0 && lx*(1+littleZ*math.Hypot(se, p.prevLse)) < (1-probeFell)*p.prevLx {
			fell, enough = true, true
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
	p.prevLx, p.prevLse = p.littleRate()
	p.step++
	p.level = max(m.probeMinL, p.level/2)
	p.newLevel()
	return p.level
}

// censored reports whether window s closed too soon after the first
// requests for its RTTs to be the service's: at a cold start only the
// requests faster than the time since the first one can have completed, so
// the slow ones are missing and the window reads fast (on 64 cores at a
// mean of 64 ms, the first two windows read 33 ms). Two signs, either of
// which marks it:
//
//   - its slowest request took more than half the time since the first
//     window began: requests twice as slow as any it saw could not have
//     completed yet;
//   - its completions explain less than littleShare of the concurrency it
//     held (Little's law: held ≈ rate · mean RTT): the rest is requests
//     slower than those it saw, still in flight (a service with a few very
//     slow requests, whose slowest seen is still the fast kind).
func (m *model) censored(s *Sample, now int64) bool {
	return m.censoredBy(s.MaxRTT, explained(s), s.Held(), now)
}

// censoredBy is censored on the figures themselves: the slowest RTT, the
// concurrency the completions explain (rate · mean RTT) and the concurrency
// held.
func (m *model) censoredBy(slowest time.Duration, explained float64, held int, now int64) bool {
	return m.young(slowest, now) || explained < littleShare*float64(held)
}

// young reports whether a window whose slowest request took slowest closed
// at now, within twice that of the traffic's start: the first sign of
// censored (its slow requests are missing).
func (m *model) young(slowest time.Duration, now int64) bool {
	return m.born < 0 || 2*float64(slowest) > float64(now-m.born)
}

// up reports whether a cold start may probe up from window s (see stepUp):
// the limit can double, the window is clean (no requests of a higher limit
// in flight, few drops) and its RTTs are not censored.
func (m *model) up(s *Sample, now int64) bool {
	return int64(s.Limit) < m.probeMaxL && s.MaxInFlight <= s.Limit && dropsOK(s) && !m.censored(s, now)
}

// flat reports whether an RTT measured over n requests at an up-probe's
// level is the reference's to within its noise, in its statistic and in its
// mean: the doubled concurrency added no queueing.
func (p *probe) flat(rtt, avg float64, n int) bool {
	b := 1 + band(n)
	return rtt <= p.refRTT*b && avg <= p.refAvg*b
}

// stepUp takes a saturated window of an up-probe: a cold start into a
// saturated gate doubles the limit before it halves it (BBR's order: probe
// for bandwidth at the same RTT first). Against the reference — the window
// at the limit L that triggered it — the level rL's completion rate (r = 2,
// or more on a cold start's first step: see startupLevel) is tested for the
// growth: clearly above halfway between the reference's rate and r times it
// (two standard errors of the difference of two Poisson
// counts), or clearly below, over probeDecide to probeSamples completions
// (undecided at probeSamples or probeWindows: by the point estimate).
//
//   - It grew, and its rate is at least 1 − probeFell of r times the
//     reference's, at an RTT as flat as the reference's: neither level queued,
//     and both measured the floor: it is confirmed, and the limit doubles
//     again, the doubled level now the reference and the floor its RTT
//     (BBR's startup: double while the throughput doubles).
//   - After a doubling that grew, one that did not grow, or grew at a
//     slower RTT, has passed the knee: the probe ends, the floor measured,
//     the throughput the new level's, and the limit at least the last level
//     that grew (the knee lies between the two).
//   - A first step of more than double did not pay in full: it may have
//     overshot a knee above L, so the startup starts again from L with a
//     doubling.
//   - The first doubling did not grow, or grew at a slower RTT: the
//     service was saturated at L, or L was near the knee. The probe halves
//     on from L, with the doubled level's rate as the level above.
//
// What it costs: the levels that grew refused fewer callers than L would
// have; the one past the knee holds at most twice the knee's concurrency,
// or, on a first step of more than double, at most the concurrency the
// callers would fill (more queueing, no more refusals), for at most
// probeWindows windows, once per cold start.
func (m *model) stepUp(s *Sample, now int64) int64 {
	p := &m.probe
	// The part of window s within the level's fill: its first round trip,
	// and the time the callers took to fill the slots added (see ownRate).
	fill := p.lag(s, now) / 1e9
	if a, added := arrivals(s), float64(p.level-p.refL); a > 0 && added > 0 {
		fill += added / a
	}
	p.fill += min(max(fill, 0), s.Window.Seconds())
	x := p.ownRate(p.done)
	r := float64(p.level) / float64(p.refL)
	mark := p.refX * (1 + (r-1)/2)
	z := 2 * math.Sqrt(1/p.done+1/max(p.refN, 1))
	grew := x*(1-z) >= mark
	decided := p.done >= probeDecide && (grew || x*(1+z) < mark)
	if !decided && p.done < probeSamples && p.windows < probeWindows {
		return p.level
	}
	if !decided {
		grew = x >= mark
	}
	rtt, avg := p.rttSum/p.cnt, p.avgSum/p.cnt
	upX, upN := x, p.done
	trusted := !m.censoredBy(p.maxRTT, p.ownRate(p.cnt)*avg/1e9, int(p.level), now)
	p.up = false
	p.newLevel()
	switch {
	case grew && trusted && x >= (1-probeFell)*r*p.refX && p.flat(rtt, avg, int(upN)):
		// The rate doubled (to within probeFell, as a probe's levels are
		// judged) at the reference's RTT: neither level queued.
		if p.upOK {
			m.measured(rtt, avg, upN)
		} else {
			n := p.refN + upN
			m.measured((p.refRTT*p.refN+rtt*upN)/n, (p.refAvg*p.refN+avg*upN)/n, n)
		}
		m.doubt = false
		if p.level >= m.probeMaxL {
			p.base = max(p.base, p.level)
			return m.end(now, upX)
		}
		// Double again, against the floor now measured (not the level
		// just passed: the band would compound level after level).
		p.up, p.upOK = true, true
		p.refL, p.refX, p.refN, p.refRTT, p.refAvg = p.level, upX, upN, m.floor, m.floorMean
		p.level = min(2*p.level, m.probeMaxL)
		p.since = now
		return p.level
	case p.upOK:
		// The knee lies between the last level and this one: the floor is
		// measured, and the last level is under the knee.
		p.base = max(p.base, p.refL)
		return m.end(now, max(upX, p.refX))
	case r > 2:
		// A first step of more than double (see startupLevel) is a
		// shortcut: where it did not pay in full it may have passed a
		// knee that a doubling would find, so the startup starts again
		// from L with one.
		p.up, p.since = true, now
		p.level = min(2*p.refL, m.probeMaxL)
		return p.level
	}
	// The first doubling did not pay at the floor's RTT: the probe halves
	// on from L. Even when it grew (L was under the knee), L may be just
	// under it, where requests queue (not saturated is not low
	// concurrency: one core at 95% with 20 ms of wait measured a floor of
	// 27–29 ms for 21), so the floor is measured where the halving finds
	// the throughput fallen. The level above is the doubled one: the
	// reference, the first window of a cold start, may read fast (its
	// short requests finish first) or slow (it began empty).
	p.step, p.maxX, p.prevX, p.prevN = 1, upX, upX, upN
	p.level = max(m.probeMinL, p.refL/2)
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
		// Slower in its statistic and in its mean: a slower service moves
		// both, the noise of a few hundred requests seldom does.
		b := 1 + band(int(p.cnt))
		if !dropsOK(s) || (rtt > m.floor*b && avg > m.floorMean*b) {
			m.confirmed, m.doubt = false, true
			next := m.end(now, 0)
			m.probeEnd = -1
			return next
		}
		if rtt < m.floor {
			// Faster: averaged in, or the floor replaced if faster by
			// more than the noise (the service sped up).
			m.measured(rtt, avg, p.cnt)
		}
		m.confirmed = true
		// Slower within the noise, the check confirms the floor and leaves
		// it as it is: averaged in, a level just under a soft knee (a few
		// percent of queueing) would raise it check after check (measured:
		// 3.38 to 3.94 ms over five checks of step-2x, seed 1); an upward
		// revision needs a full probe.
		// What the check cost: the throughput it lost while measuring.
		lost := max(0, m.thr*p.dur-p.done) / max(m.thr, 1)
		m.checkEvery = int64(lost / checkBudget * 1e9)
		return m.end(now, 0)
	}
	m.measured(rtt, avg, p.cnt)
	m.doubt = false
	// What the probe measured at the levels that kept the throughput is
	// the throughput now: the service may have changed (a probe runs when
	// the floor is in doubt), and what was measured before may be another
	// service's — fewer cores move the throughput, not the floor.
	m.ratesN = 0
	return m.end(now, p.maxX)
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
	s.FloorCount = int(m.floorW)
	s.Throughput = m.thr
	s.Knee = m.knee()
	s.Probing = m.probe.on
}
