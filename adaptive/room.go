package adaptive

import "math"

// The room for the demand's peaks. A gate whose limit sits at the
// saturating limit (the knee and a request or two) keeps the service's
// queue short under overload, but a demand under the service's capacity
// has peaks too: on one core at 0.7 of its capacity a limit of 3 refuses
// 14% of the callers (M/M/1/3), all of them work the service had time
// for, and the RTT of those windows (queueing the limit cannot remove)
// keeps the algorithm there. Neither the RTT nor the window's counts tell
// that demand from an overload of 1.2× at the same limit. A bigger limit
// does: overloaded, the callers fill every slot added (the queue grows at
// the arrival rate less the service's until the limit stops it); under
// capacity they fill only the added peaks.
//
// So, when the gate refuses a few callers (under roomLoad of them, a
// quarter, in the window and over the last roomSpan) of a steady demand (see steady), the
// gate runs a room probe: it doubles the limit and measures, a round trip
// after the doubling, the concurrency held by Little's law (rate · mean
// RTT) over roomWindows windows and probeSamples completions, N', against
// what the limit held before, N (smoothed over a few windows):
//
//	fill = (N' − N) / (2L − L)
//
// On one core at 0.7 of capacity, L = 3 → 6 fills a fifth (M/M/1/L:
// N = 1.07 → 1.70); at twice the capacity, 93%; the fill crosses a half
// near a load of one. A fill under roomFill keeps the doubled limit as
// room for the peaks, and, while the level still refuses a few, doubles
// again; otherwise the probe ends, and the next waits probeEvery, twice
// that after two in a row, and so on. A level whose windows so far hold
// half the room added beyond the reference's noise (their mean), or
// refused roomLoad of their callers, ends the probe at once: an overload
// does not wait to be measured, and shows in the level's first window.
//
// The room is a floor under the algorithm's limit (see keepRoom) for as
// long as the demand is the one it was measured on: it ends when the
// arrivals rise above the rate it was measured at (smoothed, by three
// standard errors), when a window refuses roomLoad of its callers, or when
// the room fills (the smoothed concurrency held above N + roomFill·(room −
// L)): a demand that grew, or a service that slowed under it.
//
// What it costs, overloaded at under 4/3 of the capacity (above it the
// gate refuses more than roomLoad): one to four windows at twice the
// concurrency, every probeEvery or less often. A demand that ramps or
// comes in bursts gets no room: its peaks are what a limit is there for.
type room struct {
	limit int64   // the room in force; 0: none
	refL  int64   // the limit the room grew from,
	refN  float64 // the concurrency held there (Little's law),
	rate  float64 // and the arrival rate, per second, it holds for (the highest measured),
	rateN float64 // over about this many arrivals
	held  float64 // the concurrency held in the room, smoothed (roomAlpha)
	heldN float64 // the concurrency the room held when measured,
	heldZ float64 // and the standard deviation of held about it
	arr   float64 // the arrival rate in the room, smoothed (roomAlpha)
	next  int64   // ns: no room probe before this
	fails int     // room probes in a row that found an overload

	// The demand: arrivals over spans of at least roomSpan, the span under
	// way and the last whole one: arrivals, seconds, refusals, and, for
	// the dispersion of the span under way's windows, Σ count²/seconds and
	// the windows.
	// prevRej is the share of its callers the last whole span refused.
	spanN, spanT, spanRej, spanSq float64
	spanK                         int
	prevN, prevT, prevRej         float64
	bursty                        bool // the last whole span was overdispersed

	// The concurrency held (Little's law) at the limit heldL, smoothed
	// (roomAlpha) since the limit last moved, and its variance: a room
	// probe's reference.
	heldAvg, heldVar float64
	heldL            int // 0 before the first window: no limit is 0
}

// callersOf is window s's callers: served, dropped, and refused by the gate
// or by its front (see WithFrontSignal).
func callersOf(s *Sample) float64 {
	return float64(s.Count + s.Dropped + s.Rejected + s.FrontRefused)
}

// refusals is window s's callers refused, by the gate or by its front.
func refusals(s *Sample) float64 { return float64(s.Rejected + s.FrontRefused) }

// arrivals is window s's arrival rate, per second (see callersOf).
func arrivals(s *Sample) float64 {
	if s.Window <= 0 {
		return 0
	}
	return callersOf(s) / s.Window.Seconds()
}

// explained is the concurrency window s held by Little's law: its
// completion rate times its mean RTT (the concurrency its completions
// explain; Sample.Held is its peak instead).
func explained(s *Sample) float64 { return s.Rate() * s.AvgRTT.Seconds() }

// noteDemand records window s, outside a probe: its arrivals in the span
// under way, and the concurrency held at its limit. (A probe's windows
// hold limits of its own: its refusals are not the demand's.)
func (r *room) noteDemand(s *Sample) {
	if w := s.Window.Seconds(); w > 0 {
		c := callersOf(s)
		r.spanN, r.spanT, r.spanRej, r.spanSq, r.spanK = r.spanN+c, r.spanT+w, r.spanRej+refusals(s), r.spanSq+c*c/w, r.spanK+1
	}
	if r.spanT >= roomSpan.Seconds() {
		r.bursty = r.overdispersed()
		r.prevN, r.prevT, r.prevRej = r.spanN, r.spanT, r.spanRej/max(r.spanN, 1)
		r.spanN, r.spanT, r.spanRej, r.spanSq, r.spanK = 0, 0, 0, 0, 0
	}
	if s.MaxInFlight > s.Limit {
		return // still draining a higher limit's requests: not this limit's
	}
	if n := explained(s); s.Limit != r.heldL {
		r.heldL, r.heldAvg, r.heldVar = s.Limit, n, n*n // no spread known yet: as wide as the value
	} else {
		d := n - r.heldAvg
		r.heldAvg += roomAlpha * d
		r.heldVar = (1 - roomAlpha) * (r.heldVar + roomAlpha*d*d)
	}
}

// steady reports whether the demand has been steady: the arrival rates of
// the span under way (once half done) and of the last whole one within
// three standard errors of each other (Poisson counts), neither span's
// windows overdispersed. Over two seconds at a thousand arrivals a second
// the rate is known to ±2%, so a ramp of a tenth of the capacity a second
// shows.
func (r *room) steady() bool {
	if r.prevT <= 0 || r.spanT < roomSpan.Seconds()/2 || r.bursty || r.overdispersed() {
		// (Half a span is the least that tells a rate to within the
		// test: its standard error is then √2 times a whole span's.)
		return false
	}
	a, b := r.spanN/r.spanT, r.prevN/r.prevT
	return math.Abs(a-b) <= 3*math.Sqrt(r.spanN/(r.spanT*r.spanT)+r.prevN/(r.prevT*r.prevT))
}

// overdispersed reports whether the windows of the span under way counted
// arrivals more unevenly than a Poisson process would: with k windows of
// w_i seconds and c_i arrivals, N in all over T seconds (λ = N/T),
//
//	D = Σ (c_i − λ·w_i)² / (λ·w_i) / (k − 1) = (Σ c_i²/w_i / λ − N) / (k − 1)
//
// is about 1 for a Poisson process (a χ² over k − 1 degrees of freedom,
// divided by them), and overdispersed beyond 1 + 3·√(2/(k − 1)). A surge of
// a window or two makes it so.
func (r *room) overdispersed() bool {
	if r.spanK < 3 || r.spanN <= 0 {
		return false
	}
	k := float64(r.spanK - 1)
	return (r.spanSq*r.spanT/r.spanN-r.spanN)/k > 1+3*math.Sqrt(2/k)
}

// wantsRoom reports whether window s, outside a probe, calls for a room
// probe at time now: it refused a few of its callers (under roomLoad), as
// did the last whole span, of a steady demand, cleanly (no requests of a
// higher limit in flight, few drops), with no room in force, the limit
// under its maximum, a room of its size that can be judged (see resolves),
// and no overload found by the last room probe within its wait.
func (m *model) wantsRoom(s *Sample, now int64) bool {
	r := &m.room
	return r.limit == 0 && now >= r.next && s.Rejected > 0 && refusals(s) < roomLoad*callersOf(s) &&
		r.prevRej > 0 && r.prevRej < roomLoad && r.steady() &&
		s.MaxInFlight <= s.Limit && dropsOK(s) && int64(s.Limit) < m.probeMaxL && s.AvgRTT > 0 &&
		resolves(float64(s.Limit), arrivals(s), s.Window.Seconds())
}

// resolves reports whether a room of added requests can be told from an
// overload at arrivals per second within a room probe's level of at most
// probeWindows windows of win seconds (see roomTime).
func resolves(added, arrivals, win float64) bool {
	return arrivals > 0 && roomTime(added, arrivals) <= probeWindows*win
}

// roomTime is how long, in seconds, a level that added room for added
// requests is measured at arrivals per second: an overload of roomOver
// fills roomFill of the room in that time (its queue grows at roomOver of
// the arrival rate), so that the fill tells it from a demand under the
// capacity, which fills only its peaks.
//
//	time = roomFill · added / (roomOver · arrivals)
func roomTime(added, arrivals float64) float64 {
	return roomFill * added / (roomOver * arrivals)
}

// startRoom begins a room probe after window s: the reference is the
// concurrency held at its limit; the level twice the limit.
func (m *model) startRoom(s *Sample) int64 {
	p := &m.probe
	p.room, p.refL, p.refN, p.refX, p.refAvg = true, int64(s.Limit), m.room.heldAvg, arrivals(s), float64(s.AvgRTT)
	p.refVar = m.room.heldVar
	p.level = min(2*p.refL, m.probeMaxL)
	return p.level
}

// stepRoom takes a window of a room probe (see room) and returns the limit
// for the next one.
func (m *model) stepRoom(s *Sample, now int64) int64 {
	p := &m.probe
	if p.filling(s, now) && p.drains < probeDrains {
		p.drains++
		return p.level
	}
	p.add(s)
	n := explained(s)
	p.rej += refusals(s)
	p.nSum, p.nSq = p.nSum+n, p.nSq+n*n
	added := float64(p.level - p.refL)
	// Filled already, or overflowing, over the level's windows so far: an
	// overload shows in its first window, while one window of a demand
	// under the capacity may refuse a quarter (on one core at 0.95, a
	// level of 6 whose windows refused 7% and 4% had a third at 34%).
	if p.rej >= roomLoad*(p.done+p.rej) || p.nSum/float64(p.windows) >= p.refN+roomFill*added+3*math.Sqrt(p.refVar) {
		return m.roomFailed(now)
	}
	if (p.cnt < probeSamples || p.windows < roomWindows || p.dur < roomTime(added, p.refX)) && p.windows < probeWindows {
		return p.level
	}
	n = p.avgSum / p.dur / 1e9 // over the level: Little's law
	w := float64(p.windows)
	arr := (p.done + p.rej) / p.dur
	rej := p.rej / (p.done + p.rej)
	v := max(0, p.nSq-p.nSum*p.nSum/w) / max(w-1, 1)
	if (n-p.refN)/added >= roomFill {
		return m.roomFailed(now)
	}
	r := &m.room
	r.fails = 0
	if r.limit == 0 {
		r.refL, r.refN = p.refL, p.refN
	}
	r.held = n
	r.limit, r.rate, r.rateN = p.level, max(r.rate, p.refX, arr, r.prevN/r.prevT), max(r.prevN, 1)
	r.heldN, r.heldZ = n, math.Sqrt(v*roomAlpha/(2-roomAlpha))
	r.arr = r.rate
	p.base = max(p.base, p.level)
	if rej == 0 || rej >= roomLoad || p.level >= m.probeMaxL || !resolves(float64(p.level), arr, s.Window.Seconds()) {
		return m.endRoom(now)
	}
	// Still refusing a few: double again, against this level.
	p.refL, p.refN, p.refVar, p.refX, p.refAvg, p.since = p.level, n, v, arr, float64(s.AvgRTT), now
	p.level = min(2*p.level, m.probeMaxL)
	p.newLevel()
	p.rej, p.nSum, p.nSq = 0, 0, 0
	return p.level
}

// roomFailed ends a room probe that found an overload: the next waits
// probeEvery, doubled for each failure in a row (see roomBackoff).
func (m *model) roomFailed(now int64) int64 {
	m.room.next = now + int64(probeEvery)<<min(m.room.fails, roomBackoff)
	m.room.fails++
	return m.endRoom(now)
}

// endRoom ends a room probe. It measured no floor, so it leaves the
// continuous saturation that times the next check, and probeGap, as they
// were.
func (m *model) endRoom(now int64) int64 {
	since, end := m.satSince, m.probeEnd
	next := m.end(now, 0)
	m.satSince, m.probeEnd = since, end
	return next
}

// keepRoom returns the least limit the room asks after window s, outside a
// probe (0: none), and ends the room when the demand is no longer the one
// it was measured on (see room). The next room probe may come as soon as
// the gate refuses a few again (a wait of probeGap after a room that ended
// cost the zoo's one-core no-harm rows: gradient 239 → 237, vegas 186 →
// 182, where a room ended on a noisy reading is found again at once).
func (m *model) keepRoom(s *Sample) int64 {
	r := &m.room
	if r.limit == 0 {
		return 0
	}
	// An EWMA of weight α over Poisson counts of mean μ varies by
	// √(α/(2 − α)) of one count's σ, √μ; the rate it is held against is
	// known to 1/√rateN of itself.
	mu := r.rate * s.Window.Seconds()
	r.arr += roomAlpha * (arrivals(s) - r.arr)
	risen := r.arr*s.Window.Seconds() > mu*(1+3/math.Sqrt(r.rateN))+3*math.Sqrt(roomAlpha/(2-roomAlpha)*mu)+roomSlack
	r.held += roomAlpha * (explained(s) - r.held)
	filled := r.held >= r.refN+roomFill*float64(r.limit-r.refL) || r.held > r.heldN+3*r.heldZ+roomSlack
	overflow := callersOf(s) > 0 && refusals(s) >= roomLoad*callersOf(s)
	if risen || overflow || filled {
		r.limit, r.rate = 0, 0
		return 0
	}
	return r.limit
}
