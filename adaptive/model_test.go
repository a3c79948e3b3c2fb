package adaptive

import (
	"math"
	"slices"
	"testing"
	"time"
)

// prober is a FloorProber that proposes a fixed limit (or the gate's, when
// propose is 0) and records the samples it was given.
type prober struct {
	initial, propose int
	samples          []Sample
}

func (p *prober) InitialLimit() int { return p.initial }
func (p *prober) ProbesFloor() bool { return true }
func (p *prober) Update(s Sample) int {
	p.samples = append(p.samples, s)
	if p.propose > 0 {
		return p.propose
	}
	return s.Limit
}

// server is an exact trace of a server of cores cores whose requests take
// svc alone, seen through 100 ms windows: with n in flight the RTT is
// svc·max(1, n/cores) (queueing past the cores) and the throughput n/RTT.
// demand is the concurrency the callers would fill (0: unbounded); when the
// limit is below it the gate is saturated and refuses some. The first
// window after a cut still holds the requests admitted under the old limit.
type server struct {
	cores float64
	svc   time.Duration
	// demand: concurrency the callers would fill; 0 means unbounded.
	demand float64
	prev   int // the limit of the previous window
}

const (
	ms     = time.Millisecond
	win100 = 100 * ms
)

func (v *server) window(limit int) Sample {
	held := float64(limit)
	if v.demand > 0 {
		held = min(held, v.demand)
	}
	rtt := time.Duration(float64(v.svc) * max(1, held/v.cores))
	n := int(math.Round(held / rtt.Seconds() * win100.Seconds()))
	s := Sample{Window: win100, Limit: limit, Count: n, RTT: rtt, AvgRTT: rtt, MinRTT: rtt, MaxRTT: rtt, MaxInFlight: int(held)}
	if v.prev > limit {
		s.MaxInFlight = v.prev // still draining the old limit's requests
	}
	if v.demand == 0 || v.demand > float64(limit) {
		s.Rejected = n
	}
	v.prev = limit
	return s
}

// windower is an exact trace of a service seen through 100 ms windows:
// the window it shows for a limit.
type windower interface{ window(limit int) Sample }

// drive drives the gate l with windows of v for n windows from time *now,
// exactly as maybeFlush would, and returns the windows.
func drive(l *Limiter, v windower, now *int64, n int) []Sample {
	var out []Sample
	for range n {
		*now += int64(win100)
		s := v.window(l.Limit())
		out = append(out, s)
		next := l.learn(&s, *now)
		l.setLimit(min(max(next, l.minLim), l.maxLim))
	}
	return out
}

// run is drive, returning the limits the windows ran at.
func run(l *Limiter, v windower, now *int64, n int) []int {
	var out []int
	for _, s := range drive(l, v, now, n) {
		out = append(out, s.Limit)
	}
	return out
}

func newProbed(t *testing.T, alg Algorithm) *Limiter {
	t.Helper()
	return mustNew(t, alg, WithMaxLimit(1000))
}

func near(got, want time.Duration, tol float64) bool {
	return math.Abs(float64(got-want)) <= tol*float64(want)
}

// The floor is seeded only from windows in which the gate was not
// saturated: a saturated window's RTT is queueing.
func TestFloorSeededOnlyFromUnsaturatedWindows(t *testing.T) {
	alg := &scripted{initial: 20} // not a FloorProber: the gate never probes
	l := mustNew(t, alg)
	var now int64
	v := &server{cores: 4, svc: 5 * ms}
	run(l, v, &now, 20) // saturated at 20 in flight: RTT 25ms
	if f := l.Floor(); f != 0 {
		t.Fatalf("floor %v learnt from saturated windows", f)
	}
	if x := l.Throughput(); math.Abs(x-800) > 1 {
		t.Fatalf("throughput %v, want the 4 cores' 800/s", x)
	}
	v.demand = 3 // the demand falls under the limit and the cores
	run(l, v, &now, 5)
	if f := l.Floor(); f != 5*ms {
		t.Fatalf("floor %v after unsaturated windows at 5ms, want 5ms", f)
	}
	if got := alg.samples[len(alg.samples)-1]; got.Floor != 5*ms || got.Knee != 4 || got.Probing {
		t.Fatalf("sample %+v: want the floor 5ms and the knee 800/s · 5ms = 4", got)
	}
}

// An unsaturated window slower than the floor by more than its noise is
// queueing: it does not raise the floor. A faster one lowers it.
func TestFloorRisesOnlyWithinItsNoise(t *testing.T) {
	l := mustNew(t, &scripted{initial: 100})
	var now int64
	v := &server{cores: 16, svc: 5 * ms, demand: 8}
	run(l, v, &now, 5)
	v.svc = 10 * ms // twice as slow, the gate still far from full
	run(l, v, &now, 50)
	if f := l.Floor(); f != 5*ms {
		t.Fatalf("floor %v: raised by unsaturated windows twice as slow", f)
	}
	v.svc = 4 * ms
	run(l, v, &now, 50)
	if f := l.Floor(); !near(f, 4*ms, 0.01) {
		t.Fatalf("floor %v after a faster service, want 4ms", f)
	}
}

// Cold start into overload: no floor, the gate saturated from the first
// window. The probe first doubles the limit (40): the throughput stays at
// the 4 cores' 800/s, so the service was saturated at 20 already. It then
// halves from 20 while the throughput holds (the RTT falls in proportion:
// queueing), and stops at the first level whose throughput fell (2 < 4
// cores): its RTT is the floor. Then the limit goes back to the algorithm's.
func TestProbeFindsTheFloorOnAColdStart(t *testing.T) {
	alg := &prober{initial: 20, propose: 20}
	l := newProbed(t, alg)
	var now int64
	v := &server{cores: 4, svc: 5 * ms}
	got := run(l, v, &now, 17)
	// Window 1 (20 in flight, 25ms, 80 completions) triggers the probe and
	// is the up-probe's reference. Window 2 at 40 (50ms, 80 completions):
	// clearly under halfway to twice the reference's rate, so the probe
	// halves on from 20 with 800/s as the level above. 10: one draining
	// window, three measuring (800/s, the RTT halved to 12.5ms: queueing);
	// 5: the same at 6.25ms; 2: one draining window; after one measuring
	// window, 400/s is clearly below 800 — the knee is crossed — and four
	// more measure its RTT, the floor, over probeSamples requests; then the
	// limit returns to 20.
	want := []int{20, 40, 10, 10, 10, 10, 5, 5, 5, 5, 2, 2, 2, 2, 2, 2, 20}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("limits %v, want %v", got, want)
		}
	}
	if f := l.Floor(); f != 5*ms {
		t.Fatalf("floor %v, want 5ms", f)
	}
	if l.Limit() != 20 || l.Probing() {
		t.Fatalf("limit %d (probing %v) after the probe, want the algorithm's 20", l.Limit(), l.Probing())
	}
	probing := 0
	for _, s := range alg.samples {
		if s.Probing {
			probing++
		}
	}
	if probing != 15 {
		t.Fatalf("%d windows marked Probing, want the 15 after the first", probing)
	}
}

// Cold start of a gate whose initial limit is under the knee (64 cores):
// doubling the limit doubles the throughput at the same RTT, so neither
// level queued: the floor is confirmed at two concurrencies, and the limit
// doubles again (BBR's startup) until a doubling passes the knee — here 80,
// where the RTT rises to 6.25ms. The limit then returns to the knee the
// probe measured, 12,800/s · 5ms = 64, plus one; nothing was refused beyond
// what the initial limit refused, and there was no halving.
func TestUpProbeConfirmsTheFloorWhenTheThroughputDoubles(t *testing.T) {
	alg := &prober{initial: 20, propose: 20}
	l := newProbed(t, alg)
	var now int64
	v := &server{cores: 64, svc: 5 * ms}
	got := run(l, v, &now, 3)
	// This server has no fill (a window at a new limit completes at its
	// rate at once), so the probe, which takes a round trip of each level's
	// first window for the level before's (probe.ownRate), reads 80 a few
	// percent high.
	if x := l.Throughput(); x < 12800 || x > 12800*1.03 {
		t.Fatalf("throughput %v, want the 12,800/s measured at 80 (up to 3%% high)", x)
	}
	got = append(got, run(l, v, &now, 1)...)
	if want := []int{20, 40, 80, 67}; !slices.Equal(got, want) { // 65 with a fill
		t.Fatalf("limits %v, want %v", got, want)
	}
	if f := l.Floor(); f != 5*ms || !l.mdl.confirmed || l.Probing() {
		t.Fatalf("floor %v (confirmed %v, probing %v), want 5ms confirmed", f, l.mdl.confirmed, l.Probing())
	}
}

// A service whose callers fit under the doubled limit (an I/O service: 26 in
// flight at a flat 20ms, over an initial limit of 20): the doubled level is
// not saturated, at the reference's RTT, so the floor is confirmed and the
// limit stays where the demand fits. Nothing is refused after the first
// window.
func TestUpProbeStopsWhereTheDemandFits(t *testing.T) {
	alg := &prober{initial: 20, propose: 20}
	l := newProbed(t, alg)
	var now int64
	v := &server{cores: 1000, svc: 20 * ms, demand: 26}
	got := run(l, v, &now, 3)
	if want := []int{20, 40, 40}; !slices.Equal(got, want) {
		t.Fatalf("limits %v, want %v", got, want)
	}
	if f := l.Floor(); f != 20*ms || !l.mdl.confirmed {
		t.Fatalf("floor %v (confirmed %v), want 20ms confirmed", f, l.mdl.confirmed)
	}
}

// callers is server with a bounded demand whose refusals are what the
// limit leaves out of it: the callers beyond the limit, at the rate the
// service would have served them alone (svc), so that a window's arrivals
// (served and refused) over its length, times svc, are the demand
// (Little's law). A cut drains within its window (requests of a few tens
// of milliseconds): no window holds more than the limit.
type callers struct{ server }

func (v *callers) window(limit int) Sample {
	s := v.server.window(limit)
	s.MaxInFlight = int(min(float64(limit), v.demand))
	s.Rejected = int(math.Round(max(0, v.demand-float64(limit)) * win100.Seconds() / v.svc.Seconds()))
	return s
}

// A cold start whose window holds several round trips (20 ms in 100 ms)
// and whose callers would fill 300: the startup's first step goes to the
// demand's 300 (not 40: four more windows of doublings, refusing most
// callers), the rate grows fifteenfold at the same RTT, the floor is
// confirmed, and the doubled level, unsaturated at the floor's RTT, stays.
// Nothing is refused after the first window.
func TestStartupStepsToTheDemand(t *testing.T) {
	alg := &prober{initial: 20, propose: 20}
	l := newProbed(t, alg)
	var now int64
	v := &callers{server{cores: 1000, svc: 20 * ms, demand: 300}}
	var got []int
	refused := 0
	for i, s := range drive(l, v, &now, 4) {
		got = append(got, s.Limit)
		if i > 0 {
			refused += s.Rejected
		}
	}
	if want := []int{20, 300, 600, 600}; !slices.Equal(got, want) {
		t.Fatalf("limits %v, want %v", got, want)
	}
	if refused != 0 {
		t.Fatalf("%d refused after the first window", refused)
	}
	if f := l.Floor(); f != 20*ms || !l.mdl.confirmed {
		t.Fatalf("floor %v (confirmed %v), want 20ms confirmed", f, l.mdl.confirmed)
	}
}

// The same callers in front of a service that queues past 40 in flight:
// the step to the demand's 300 grows the rate only twofold, not
// fifteenfold, so it passed a knee somewhere between; the startup starts
// again from 20 with a doubling (40: twice the rate at the same RTT), then
// 80 queues, and the limit settles at the knee the probe measured, 40,
// plus one. Without the fallback the probe would halve from 20, under a
// knee twice as high.
func TestStartupStepFallsBackToDoubling(t *testing.T) {
	alg := &prober{initial: 20, propose: 20}
	l := newProbed(t, alg)
	var now int64
	v := &callers{server{cores: 40, svc: 20 * ms, demand: 300}}
	// (41 on a server with a fill: this one's levels read a little high,
	// see TestUpProbeConfirmsTheFloorWhenTheThroughputDoubles.)
	if got, want := run(l, v, &now, 5), []int{20, 300, 40, 80, 47}; !slices.Equal(got, want) {
		t.Fatalf("limits %v, want %v", got, want)
	}
	if f := l.Floor(); f != 20*ms || !l.mdl.confirmed {
		t.Fatalf("floor %v (confirmed %v), want 20ms confirmed", f, l.mdl.confirmed)
	}
}

// lagged is an exact trace of a service with no queue (more cores than
// callers) whose requests take rtt, seen through 100 ms windows, in which a
// raised limit shows only a round trip later: the requests admitted under
// it complete then, so the window after a raise completes the old limit's
// rate for its first rtt. Every window refuses callers (unbounded demand).
type lagged struct {
	rtt  time.Duration
	prev int
}

func (v *lagged) window(limit int) Sample {
	rate := func(l int) float64 { return float64(l) / v.rtt.Seconds() }
	old := min(v.rtt, win100).Seconds()
	if v.prev == 0 || v.prev > limit {
		old = 0
	}
	n := int(math.Round(rate(v.prev)*old + rate(limit)*(win100.Seconds()-old)))
	v.prev = limit
	return Sample{Window: win100, Limit: limit, Count: n, Rejected: n, RTT: v.rtt, AvgRTT: v.rtt, MinRTT: v.rtt, MaxRTT: v.rtt, MaxInFlight: limit}
}

// An up-probe measures a level from the first window of which at most
// upFill passed within a round trip of the level's start. At 45 ms a window
// right after the doubling completes 200 requests for 45 ms and 400 for
// 55 ms: 6,889/s, under the 7,111/s (0.8 of twice 4,444/s) that says the
// rate doubled, and the cold start would halve a limit that is far under
// the knee. Measured from the next window (8,889/s), the doubling paid,
// and the limit doubles again.
func TestUpProbeMeasuresALevelARoundTripAfterItsStart(t *testing.T) {
	alg := &prober{initial: 200, propose: 200}
	l := newProbed(t, alg)
	v := &lagged{rtt: 45 * ms}
	var now int64
	if got, want := run(l, v, &now, 4), []int{200, 400, 400, 800}; !slices.Equal(got, want) {
		t.Fatalf("limits %v, want %v", got, want)
	}
	if f := l.Floor(); f != 45*ms || !l.mdl.confirmed {
		t.Fatalf("floor %v (confirmed %v), want 45ms confirmed", f, l.mdl.confirmed)
	}
}

// A full probe's reference never takes a window that closed within twice
// its slowest request of the traffic's start. A server made before its
// traffic: the first window of an I/O service (20 ms, no queue, 20 in
// flight, 1,000/s) began 80 ms before the callers did, so it completed 20
// requests, and its slowest (the very first) took 60 ms, the warm-up of a
// fresh process. Averaged into the reference it reads 733/s, and the level
// of 10 (500/s) then never falls clearly enough: the probe would halve on
// to 5, where the process measured above held it for 1.5 s at 0.7x its
// capacity. Without it, 10 falls clearly from 1,000/s, and its RTT is the
// floor.
func TestFullProbeReferenceSkipsAYoungWindow(t *testing.T) {
	alg := &prober{initial: 20, propose: 20}
	l := newProbed(t, alg)
	v := &server{cores: 1000, svc: 20 * ms}
	var now int64
	var got []int
	for i := range 12 {
		now += int64(win100)
		s := v.window(l.Limit())
		if i == 0 {
			s.Count, s.Rejected, s.MaxRTT = 20, 20, 60*ms
		}
		got = append(got, s.Limit)
		l.setLimit(min(max(l.learn(&s, now), l.minLim), l.maxLim))
	}
	if slices.Contains(got, 5) {
		t.Fatalf("limits %v: the probe halved past 10", got)
	}
	if f := l.Floor(); f != 20*ms || !l.mdl.confirmed {
		t.Fatalf("floor %v (confirmed %v), want 20ms confirmed (limits %v)", f, l.mdl.confirmed, got)
	}
}

// Doubling gives more throughput but a slower RTT (32 cores, 20 then 40 in
// flight: 6.25ms against 5ms): the initial limit is under the knee, but
// perhaps just under it, where requests queue, so the floor is measured
// where halving finds the throughput fallen: at 10 (one window draining the
// doubled level, one measuring), not taken from a window that may queue.
func TestUpProbeMeasuresTheFloorUnderTheKnee(t *testing.T) {
	alg := &prober{initial: 20, propose: 20}
	l := newProbed(t, alg)
	var now int64
	v := &server{cores: 32, svc: 5 * ms}
	got := run(l, v, &now, 5)
	// 40, then 10: one window draining, one measuring (2,000/s, clearly
	// under 6,400: the floor, over probeSamples requests); then the knee
	// of 6,400/s (at 40) · 5ms = 32, plus one.
	// (The knee reads 34, not 33: this server has no fill, see
	// TestUpProbeConfirmsTheFloorWhenTheThroughputDoubles.)
	if want := []int{20, 40, 10, 10, 34}; !slices.Equal(got, want) {
		t.Fatalf("limits %v, want %v", got, want)
	}
	if f := l.Floor(); f != 5*ms || !l.mdl.confirmed || l.Probing() {
		t.Fatalf("floor %v (confirmed %v, probing %v), want 5ms confirmed", f, l.mdl.confirmed, l.Probing())
	}
}

// The probe's cost: one level below the knee (4 cores), for one draining
// and at most probeWindows measuring windows; the levels above it keep the
// throughput. A probe never starts while the gate is not saturated.
func TestProbeCostIsBounded(t *testing.T) {
	for _, cores := range []float64{1, 4, 16} {
		alg := &prober{initial: 40, propose: 40}
		l := newProbed(t, alg)
		var now int64
		v := &server{cores: cores, svc: 5 * ms}
		got := run(l, v, &now, 100)
		below, levels := 0, map[int]bool{}
		for i, s := range alg.samples {
			if s.Probing && float64(got[i]) < cores {
				below++
				levels[got[i]] = true
			}
		}
		if len(levels) > 1 || below > probeDrains+probeWindows {
			t.Errorf("%v cores: %d windows at %d levels below the knee (limits %v)", cores, below, len(levels), got)
		}
		if f := l.Floor(); f != 5*ms {
			t.Errorf("%v cores: floor %v, want 5ms", cores, f)
		}
	}
	// Unsaturated for a minute: never a probe, whatever the floor.
	alg := &prober{initial: 40, propose: 40}
	l := newProbed(t, alg)
	var now int64
	v := &server{cores: 4, svc: 5 * ms, demand: 30} // queueing, but the gate is not full
	run(l, v, &now, 600)
	for _, s := range alg.samples {
		if s.Probing {
			t.Fatal("probed while the gate was not saturated")
		}
	}
}

// While the gate stays saturated the floor is measured again at most every
// probeEvery (and not more often): six probes in a minute, each of which
// confirms the floor.
func TestProbeEveryTenSecondsOfSaturation(t *testing.T) {
	alg := &prober{initial: 20, propose: 20}
	l := newProbed(t, alg)
	var now int64
	v := &server{cores: 4, svc: 5 * ms, demand: 3}
	run(l, v, &now, 5) // the floor, 5ms
	v.demand = 0
	run(l, v, &now, 600)
	probes := 0
	for i, s := range alg.samples {
		if s.Probing && !alg.samples[i-1].Probing {
			probes++
		}
	}
	if probes < 5 || probes > 6 {
		t.Fatalf("%d probes in 60 s of saturation, want one per 10 s", probes)
	}
	if f := l.Floor(); f != 5*ms {
		t.Fatalf("floor %v, want 5ms", f)
	}
}

// The service gets twice as slow while the gate is saturated: saturated
// windows never raise the floor, however slow. When cutting the concurrency
// stops making the RTT faster, a probe measures the floor again and raises
// it; the limit then returns to at least the knee the probe measured.
func TestUpwardRevisionIsConfirmedByAProbe(t *testing.T) {
	alg := &prober{initial: 80, propose: 80}
	l := newProbed(t, alg)
	var now int64
	v := &server{cores: 16, svc: 5 * ms}
	run(l, v, &now, 20) // a cold start: the probe measures the floor
	if f := l.Floor(); f != 5*ms || l.Probing() {
		t.Fatalf("floor %v (probing %v) after a cold start, want 5ms", f, l.Probing())
	}
	v.svc = 10 * ms
	run(l, v, &now, 80) // 8 s at 80 in flight: 50ms
	if f := l.Floor(); f != 5*ms {
		t.Fatalf("floor %v raised by saturated windows", f)
	}
	// The algorithm cuts: the RTT falls in proportion (queueing) down to
	// the 16 cores, then no more.
	for _, p := range []int{48, 32, 16, 8} {
		alg.propose = p
		run(l, v, &now, 1)
		if l.Probing() {
			t.Fatalf("probe when cutting to %d: the RTT still fell in proportion", p)
		}
	}
	// The windows at 8: 10ms, as at 16. The first still holds the
	// requests admitted under 16; the second confirms it.
	run(l, v, &now, 1)
	if l.Probing() {
		t.Fatal("probe on one window's evidence")
	}
	run(l, v, &now, 1)
	if !l.Probing() {
		t.Fatal("no probe although halving the concurrency left the RTT where it was")
	}
	got := run(l, v, &now, 20)
	if f := l.Floor(); f != 10*ms {
		t.Fatalf("floor %v after the probe, want 10ms (limits %v)", f, got)
	}
	// The floor moved: the service changed, and the throughput measured
	// before (1600/s, at 80 in flight) is forgotten for the probe's own:
	// its reference held 8, already under the knee, at 800/s. So the
	// first window after the probe runs at 800/s · 10ms = 8, plus
	// kneeRoom (the algorithm still says 8); then the algorithm decides.
	for i := len(alg.samples) - len(got); i < len(alg.samples); i++ {
		if s := alg.samples[i]; alg.samples[i-1].Probing && !s.Probing {
			if s.Limit != 8+kneeRoom {
				t.Fatalf("the first window after the probe ran at %d, want 8 + %d (limits %v)", s.Limit, kneeRoom, got)
			}
			return
		}
	}
	t.Fatalf("the probe never ended (limits %v)", got)
}

// The operating point's lower end: the knee rounded up, plus kneeRoom below
// a knee of kneeWide, one above.
func TestSaturatingLimit(t *testing.T) {
	for _, tt := range []struct {
		knee float64
		want int
	}{{0, 0}, {0.4, 1 + kneeRoom}, {1, 1 + kneeRoom}, {4, 4 + kneeRoom}, {7.5, 8 + kneeRoom}, {8, 9}, {15.2, 17}} {
		if got := (Sample{Knee: tt.knee}).SaturatingLimit(); got != tt.want {
			t.Errorf("knee %v: SaturatingLimit %d, want %d", tt.knee, got, tt.want)
		}
	}
}

// The first windows of surges, recorded from the simulator (step-5x; 16
// cores, 5ms of service, the window median; the floor 3.4ms from the calm
// before). The limit is cut hard while the requests admitted under the old
// one still run, and the RTT of the next windows is noisy: a window a
// little slower than an earlier one with more in flight is not "less
// concurrency stopped making it faster". Cutting did make the RTT faster —
// queueing — so these windows must not start a probe.
func TestCutLimitIsNotASlowerService(t *testing.T) {
	w := func(limit, maxIn, n int, rtt time.Duration, rej int) Sample {
		return Sample{Window: win100, Limit: limit, MaxInFlight: maxIn, Count: n, RTT: rtt, AvgRTT: rtt, Rejected: rej}
	}
	for name, surge := range map[string][]Sample{
		"seed 3": {
			w(33, 33, 181, 5111808, 395),
			w(32, 32, 302, 7733248, 1319),
			w(26, 31, 329, 5636096, 1273),
			w(25, 25, 304, 5636096, 1328),
			w(23, 24, 278, 4849664, 1361),
			w(24, 24, 294, 5636096, 1324),
			w(25, 25, 292, 5636096, 1280),
		},
		"seed 5": {
			w(30, 30, 211, 3997696, 381),
			w(45, 45, 301, 9699328, 1229),
			w(34, 44, 273, 9175040, 1325),
			w(26, 33, 295, 6160384, 1362),
			w(24, 25, 279, 6422528, 1256),
			w(21, 23, 287, 5111808, 1371),
			w(21, 21, 253, 5636096, 1368),
			w(22, 22, 276, 5111808, 1299),
		},
	} {
		m := newModel(1, 1000)
		m.floor, m.floorMean, m.floorW, m.confirmed = 3.4e6, 3.4e6, floorMemory, true
		for i := range surge {
			if m.slowed(&surge[i], int64(i+1)*int64(win100)) {
				t.Errorf("%s, window %d of the surge: a cut limit read as a slower service", name, i)
			}
		}
	}
}

// "Less concurrency, the same RTT" is read as a slower service only when it
// is beyond the noise of the windows (over 20 requests each a window mean
// varies by a fifth or more, over 400 by a twentieth), and in two windows
// in a row.
func TestSlowerServiceNeedsSignificance(t *testing.T) {
	for _, tt := range []struct {
		n    int
		want bool
	}{{20, false}, {400, true}} {
		m := newModel(1, 1000)
		m.floor, m.floorMean, m.floorW, m.confirmed = 4e6, 4e6, floorMemory, true
		before := Sample{Window: win100, Limit: 8, MaxInFlight: 8, Count: tt.n, RTT: 10 * ms, AvgRTT: 10 * ms, Rejected: 1}
		after := before
		after.Limit, after.MaxInFlight = 6, 6
		m.slowed(&before, int64(win100))
		m.slowed(&after, 2*int64(win100)) // one window is not enough
		if got := m.slowed(&after, 3*int64(win100)); got != tt.want {
			t.Errorf("%d requests a window: slowed %v, want %v", tt.n, got, tt.want)
		}
	}
}

// A floor learnt while the gate was not saturated is unconfirmed: it may
// hold queueing. A short burst of refusals does not probe it; overload
// that lasts (a tenth of the callers refused, smoothed over about a
// second) does.
func TestUnconfirmedFloorProbedUnderOverloadOnly(t *testing.T) {
	alg := &prober{initial: 20, propose: 20}
	l := newProbed(t, alg)
	var now int64
	v := &server{cores: 16, svc: 5 * ms, demand: 10}
	run(l, v, &now, 20)
	if l.Floor() != 5*ms || l.mdl.confirmed {
		t.Fatalf("floor %v (confirmed %v), want 5ms learnt unconfirmed from unsaturated windows", l.Floor(), l.mdl.confirmed)
	}
	v.demand = 0 // one window of overload
	run(l, v, &now, 1)
	v.demand = 10
	run(l, v, &now, 20)
	if l.mdl.probeEnd >= 0 || l.Probing() {
		t.Fatal("a single window of refusals probed the floor")
	}
	v.demand = 0 // overload that lasts
	got := run(l, v, &now, 10)
	if !l.Probing() && l.mdl.probeEnd < 0 {
		t.Fatalf("no probe after a second of overload (limits %v)", got)
	}
}

// A check every probeEvery of saturation holds ⌈0.9·knee⌉; when the RTT
// there is slower than the floor's noise in both its statistic and its
// mean, the floor is in doubt and a full probe follows at once.
func TestFailedCheckStartsAFullProbe(t *testing.T) {
	alg := &prober{initial: 24, propose: 24}
	l := newProbed(t, alg)
	var now int64
	v := &server{cores: 16, svc: 5 * ms}
	run(l, v, &now, 30) // cold start: the floor probed, 5ms
	if !l.mdl.confirmed || l.Floor() != 5*ms {
		t.Fatalf("floor %v (confirmed %v) after the cold start", l.Floor(), l.mdl.confirmed)
	}
	// The service slows by half while the algorithm keeps 24 in flight:
	// no cut, so nothing but the check can notice.
	v.svc = 7500 * time.Microsecond
	var levels []int
	for range 120 {
		levels = append(levels, run(l, v, &now, 1)...)
		if l.mdl.probe.on && !l.mdl.probe.check {
			break
		}
	}
	if !l.mdl.probe.on || l.mdl.probe.check {
		t.Fatalf("no full probe after the check (limits %v)", levels)
	}
	// The throughput is now 16/7.5ms = 2133/s: with the stale floor the
	// knee reads 10.7, and the check held ⌈0.9·10.7⌉ = 10, where the RTT
	// is the service's 7.5ms, not 5.
	if last := levels[len(levels)-2]; last != 10 {
		t.Fatalf("the check held %d, want ⌈0.9·10.7⌉ = 10 (limits %v)", last, levels[len(levels)-5:])
	}
	run(l, v, &now, 30)
	if f := l.Floor(); !near(f, 7500*time.Microsecond, 0.01) {
		t.Fatalf("floor %v after the full probe, want 7.5ms", f)
	}
}

// "The service may have slowed" without any cut: the algorithm's guard
// holds the saturating limit, and there the mean RTT is far above what the
// model expects (F·S/K = 5.625ms): twice the floor. Over 30 completions a
// window mean is known to ±66% (band(30)), so one window is not enough; the
// run of them is, once its noise is under half the excess: the third
// (band(90) = 0.38: 10ms > 5.625ms·1.76). An RTT the model expects never
// is, however long the run.
func TestAboveTheModelIsASlowerService(t *testing.T) {
	firesAt := func(rtt time.Duration, windows int) int {
		m := newModel(1, 1000)
		m.floor, m.floorMean, m.floorW, m.confirmed = 5e6, 5e6, floorMemory, true
		m.addRate(1600) // the knee 8, the saturating limit 9
		w := Sample{Window: win100, Limit: 9, MaxInFlight: 9, Count: 30, RTT: rtt, AvgRTT: rtt, MaxRTT: 3 * rtt, Rejected: 100}
		for i := range windows {
			if m.slowed(&w, int64(i+10)*int64(win100)) {
				return i + 1
			}
		}
		return 0
	}
	if got := firesAt(10*ms, 20); got != 3 {
		t.Errorf("twice the floor at the saturating limit: read as a slower service at window %d, want 3", got)
	}
	// Within the model (9 in flight at 5.6ms: 9/1600/s): never.
	if got := firesAt(5600*time.Microsecond, 100); got != 0 {
		t.Errorf("an RTT the model expects read as a slower service at window %d", got)
	}
}

// The ratchet (zoo ps/64, halve-service): the service's floor doubled
// (65ms to 130ms) while the gate was saturated. The algorithm, taking the
// RTT for queueing, creeps the limit down a request at a time, its guard
// (the saturating limit of a stale knee) following it down; no window cuts
// by a quarter, so the flat sign never shows, and each window's 30
// completions are too few for the mean RTT, twice what the model expects,
// to be read as slower on its own. Before the run was judged as a whole,
// this trace never read as a slower service (the gate held a limit of
// half the knee for 14 s); now it does at its third window. A window that
// still completes requests admitted before a cut by a quarter is no
// evidence: its RTTs may be the old queue's.
func TestAboveTheModelOverARatchet(t *testing.T) {
	m := newModel(1, 1000)
	m.floor, m.floorMean, m.floorW, m.confirmed = 65e6, 65e6, floorMemory, true
	m.addRate(466) // the knee 30.3, the saturating limit 32
	now := int64(0)
	window := func(limit, peak int, rtt time.Duration) Sample {
		return Sample{Window: 130 * ms, Limit: limit, MaxInFlight: peak, Count: 30, RTT: rtt, AvgRTT: rtt, MaxRTT: 2 * rtt, Rejected: 80}
	}
	// The queue at 110, then the cut to 32 (the RTT falls: queueing), whose
	// first windows still drain and complete requests admitted under 110:
	// counted, they would make the run slower still and decide it sooner.
	for i, w := range []Sample{window(110, 110, 190*ms), window(32, 60, 150*ms), window(32, 32, 150*ms)} {
		now += int64(130 * ms)
		if m.slowed(&w, now) {
			t.Fatalf("window %d, right after the cut: read as a slower service", i)
		}
	}
	fired := 0
	for i, limit := range []int{32, 31, 31, 30, 30, 29, 29, 28} {
		now += int64(130 * ms)
		w := window(limit, limit, 128*ms)
		if m.slowed(&w, now) {
			fired = i + 1
			break
		}
	}
	if fired != 3 {
		t.Fatalf("the ratchet at twice the floor read as a slower service at window %d, want 3", fired)
	}
}

// When the algorithm is cutting, a full probe measures its reference at
// the algorithm's new limit (after draining), not in the queue it leaves.
func TestProbeReferenceAtTheAlgorithmsCut(t *testing.T) {
	alg := &prober{initial: 90, propose: 30}
	l := newProbed(t, alg)
	var now int64
	v := &server{cores: 16, svc: 5 * ms}
	got := run(l, v, &now, 4)
	// Window 1 at 90 triggers the probe (no floor); the algorithm said 30:
	// the next windows run at 30.
	if got[0] != 90 || got[1] != 30 || got[2] != 30 {
		t.Fatalf("limits %v, want 90 then the reference at the algorithm's 30", got)
	}
}

// On a cold start the queue's own timeouts do not keep the probe away: a
// saturated window with drops and no floor yet starts it.
func TestColdStartDropsDoNotBlockTheProbe(t *testing.T) {
	alg := &prober{initial: 20, propose: 20}
	l := newProbed(t, alg)
	var now int64
	v := &server{cores: 1, svc: 5 * ms}
	s := v.window(l.Limit())
	s.Dropped = s.Count / 10
	now += int64(win100)
	l.setLimit(l.learn(&s, now))
	if !l.Probing() {
		t.Fatalf("no probe after a saturated cold-start window with %d drops", s.Dropped)
	}
}

// A check that finds the RTT a little above the floor, within its noise (a
// soft knee: 8% of queueing just under it), confirms the floor and leaves it
// as it is: averaged in, check after check would raise it (an upward
// revision needs a full probe). A faster one is averaged in: here the
// service speeds up to 4ms, the stale floor puts the check at 18 in flight,
// past the 16 cores, where the RTT is 4.5ms, and the floor moves towards it.
func TestCheckDoesNotRaiseTheFloor(t *testing.T) {
	alg := &prober{initial: 24, propose: 24}
	l := newProbed(t, alg)
	var now int64
	v := &server{cores: 16, svc: 5 * ms}
	run(l, v, &now, 30) // cold start: the floor probed, 5ms
	if !l.mdl.confirmed || l.Floor() != 5*ms {
		t.Fatalf("floor %v (confirmed %v) after the cold start", l.Floor(), l.mdl.confirmed)
	}
	soft := func(n int) {
		for range n {
			now += int64(win100)
			s := v.window(l.Limit())
			if s.Limit < 16 { // just under the knee: 8% of queueing
				s.RTT = s.RTT * 108 / 100
				s.AvgRTT = s.RTT
			}
			next := l.learn(&s, now)
			l.setLimit(min(max(next, l.minLim), l.maxLim))
		}
	}
	soft(1200) // two minutes: about ten checks
	if f := l.Floor(); f != 5*ms || !l.mdl.confirmed {
		t.Fatalf("floor %v (confirmed %v) after checks 8%% above it, want 5ms kept", f, l.mdl.confirmed)
	}
	v.svc = 4 * ms // faster: the checks lower the floor
	run(l, v, &now, 1200)
	if f := l.Floor(); f > 4600*time.Microsecond {
		t.Fatalf("floor %v after a faster service, want at most 4.6ms", f)
	}
}

// Under lasting overload, an unconfirmed floor is checked first, at the
// knee it implies, not probed by halving: a floor read high (queueing in
// the unsaturated windows: 6.5ms for a 5ms service) puts the knee too high
// (16 cores at 3200/s: 20.8), the check at ⌈0.9·20.8⌉ = 19 reads 5.9ms,
// faster, and confirms and lowers the floor; the checks that follow keep
// lowering it (each averaged in over its requests), and no level ever goes
// under the 16 cores.
func TestUnconfirmedFloorIsCheckedFirst(t *testing.T) {
	alg := &prober{initial: 24, propose: 24}
	l := newProbed(t, alg)
	var now int64
	v := &server{cores: 16, svc: 5 * ms, demand: 10}
	run(l, v, &now, 20)
	l.mdl.floor, l.mdl.floorMean = float64(6500*time.Microsecond), float64(6500*time.Microsecond) // read high
	v.demand = 0
	var levels []int
	for range 400 {
		levels = append(levels, run(l, v, &now, 1)...)
		if l.mdl.probe.on && !l.mdl.probe.check {
			t.Fatalf("a full probe (limits %v)", levels)
		}
	}
	if f := l.Floor(); f > 5600*time.Microsecond || !l.mdl.confirmed {
		t.Fatalf("floor %v (confirmed %v) after 40 s of checks, want it down from 6.5ms to 5.6ms or less", f, l.mdl.confirmed)
	}
	if m := slices.Min(levels); m < 16 {
		t.Fatalf("a check went down to %d, under the 16 cores (limits %v)", m, levels)
	}
}

// A cold start whose first window is censored — its slowest requests took
// most of the time since the first one began (a mean of 64ms seen through a
// 100ms window), or its completions explain too little of the concurrency it
// held (Little's law) — does not probe up: its RTT may be only the fast
// requests'. The full probe halves from the initial limit instead.
func TestCensoredColdStartDoesNotProbeUp(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(*Sample)
	}{
		{"slowest near the age", func(s *Sample) { s.MaxRTT = 60 * ms }},
		{"completions explain half the concurrency", func(s *Sample) { s.Count /= 2 }},
	} {
		alg := &prober{initial: 20, propose: 20}
		l := newProbed(t, alg)
		v := &server{cores: 64, svc: 5 * ms}
		s := v.window(l.Limit())
		tc.edit(&s)
		now := int64(win100)
		l.setLimit(l.learn(&s, now))
		if !l.Probing() || l.mdl.probe.up || l.Limit() != 20 {
			t.Errorf("%s: probing %v, up %v, limit %d: want a full probe's reference at 20", tc.name, l.Probing(), l.mdl.probe.up, l.Limit())
		}
	}
}

// One core at half load: the callers keep two requests in flight, which
// share the core, so the unsaturated windows show twice the service time
// (2ms) and the floor believed is 2ms, unconfirmed. In overload the knee it
// implies is 1,000/s · 2ms = 2; a check at two requests would measure 2ms
// again and confirm it. The check holds one, under that knee, reads 1ms and
// replaces the floor, and the knee with it.
func TestCheckHoldsALevelUnderTheKnee(t *testing.T) {
	alg := &prober{initial: 20}
	l := newProbed(t, alg)
	var now int64
	v := &server{cores: 1, svc: ms, demand: 2}
	run(l, v, &now, 10)
	if f := l.Floor(); f != 2*ms || l.mdl.confirmed {
		t.Fatalf("floor at half load %v (confirmed %v), want 2ms unconfirmed", f, l.mdl.confirmed)
	}
	v.demand = 0 // overload
	got := run(l, v, &now, 30)
	if !slices.Contains(got, 1) || slices.Contains(got, 2) {
		t.Fatalf("limits %v: want a check at 1, none at 2", got)
	}
	if f := l.Floor(); f != ms || !l.mdl.confirmed {
		t.Fatalf("floor %v (confirmed %v), want 1ms confirmed", f, l.mdl.confirmed)
	}
	if k := l.mdl.knee(); math.Abs(k-1) > 0.05 {
		t.Fatalf("knee %.2f, want 1", k)
	}
	for _, k := range []struct {
		knee float64
		want int64
	}{{1.68, 1}, {2, 1}, {3.5, 3}, {5, 4}, {20, 18}, {100, 90}} {
		m := model{thr: 1000, floorMean: k.knee * 1e6}
		if got := m.checkLevel(); got != k.want {
			t.Errorf("knee %v: check level %d, want %d", k.knee, got, k.want)
		}
	}
}

// A service that waits 330 ms on a dependency, with room for 1,000 in
// flight: a 100 ms window at 16 holds about five completions, so a full
// probe's count test cannot tell 8 from 16 within its windows (it would
// take 50 completions) and, undecided, would halve on. By Little's law the
// rates are 16 and 8 over the mean RTT, which these windows know exactly:
// the level of 8 falls, and the probe measures the floor there, never
// lower.
func TestFullProbeFallByLittlesLaw(t *testing.T) {
	alg := &prober{initial: 16}
	l := newProbed(t, alg)
	v := &server{cores: 1000, svc: 330 * ms}
	s := v.window(l.Limit())
	s.Count = 2 // censored: the cold start's full probe, from 16
	now := int64(win100)
	l.setLimit(l.learn(&s, now))
	if !l.Probing() || l.mdl.probe.up {
		t.Fatalf("probing %v, up %v: want a full probe", l.Probing(), l.mdl.probe.up)
	}
	got := run(l, v, &now, 30)
	if slices.Min(got) < 8 {
		t.Fatalf("limits %v: the probe halved past 8", got)
	}
	if l.Probing() {
		t.Fatalf("still probing after 30 windows: limits %v", got)
	}
	if f := l.Floor(); f != 330*ms || !l.mdl.confirmed {
		t.Fatalf("floor %v (confirmed %v), want 330ms confirmed (limits %v)", f, l.mdl.confirmed, got)
	}
}
