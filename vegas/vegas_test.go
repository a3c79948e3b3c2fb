package vegas

import (
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/adaptive"
)

const ms = time.Millisecond

func win(limit, maxIn, n int, rtt time.Duration, rej, drops int) adaptive.Sample {
	return adaptive.Sample{Limit: limit, MaxInFlight: maxIn, Count: n, RTT: rtt, AvgRTT: rtt, Rejected: rej, Dropped: drops}
}

// driver applies each returned limit as the gate would.
type driver struct {
	v     *Vegas
	limit int
}

func newDriver(opts ...Option) *driver {
	v := New(opts...)
	return &driver{v: v, limit: v.InitialLimit()}
}

func (d *driver) step(w func(limit int) adaptive.Sample) int {
	d.limit = d.v.Update(w(d.limit))
	return d.limit
}

// overloaded is a full window under heavy pressure with the given RTT.
func overloaded(rtt time.Duration) func(int) adaptive.Sample {
	return func(l int) adaptive.Sample { return win(l, l, 100, rtt, 100, 0) }
}

func idle(rtt time.Duration, inFlight int) func(int) adaptive.Sample {
	return func(l int) adaptive.Sample { return win(l, inFlight, 100, rtt, 0, 0) }
}

func TestQueue(t *testing.T) {
	if q := Queue(20, float64(5*ms), float64(10*ms)); q != 10 {
		t.Fatalf("Queue(20, 5ms, 10ms) = %v, want 10", q)
	}
	if q := Queue(20, float64(5*ms), 0); q != 0 {
		t.Fatalf("Queue with no RTT = %v", q)
	}
}

func TestRules(t *testing.T) {
	// Netflix defaults at L = 20: threshold 1, alpha 3, beta 6, increase 1.
	tests := []struct {
		name string
		rtt  time.Duration
		want int
	}{
		{"queue ≤ threshold: slow start doubles", 5 * ms, 40},
		{"queue < alpha: +log10", 5500 * time.Microsecond, 21},      // queue 1.8
		{"alpha ≤ queue ≤ beta: hold", 6500 * time.Microsecond, 20}, // queue 4.6
		{"queue > beta: remove the excess", 10 * ms, 16},            // queue 10 → 20 − (10 − 6)
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := newDriver()
			d.step(idle(5*ms, 5)) // learn the 5ms no-load RTT
			if tt.name != "queue ≤ threshold: slow start doubles" {
				d.v.slowStart = false
			}
			if got := d.step(overloaded(tt.rtt)); got != tt.want {
				t.Fatalf("limit %d, want %d", got, tt.want)
			}
		})
	}
}

func TestAppLimitedHold(t *testing.T) {
	d := newDriver()
	for _, rtt := range []time.Duration{5 * ms, 50 * ms, 1 * ms} {
		if got := d.step(idle(rtt, 5)); got != 20 {
			t.Fatalf("limit %d after a window below the limit (rtt %v)", got, rtt)
		}
	}
}

func TestDropsShrinkAndTeachNothing(t *testing.T) {
	d := newDriver()
	d.step(idle(5*ms, 5))
	got := d.step(func(l int) adaptive.Sample { return win(l, l, 80, 1*ms, 0, 20) })
	if got != 16 { // 20 · (1 − 0.2)
		t.Fatalf("limit %d after 20%% drops, want 16", got)
	}
	if d.v.NoLoadRTT() != 5*ms {
		t.Fatalf("no-load RTT %v: fast successes next to drops must not lower it", d.v.NoLoadRTT())
	}
	if got := d.step(func(l int) adaptive.Sample { return win(l, l, 0, 0, 0, 10) }); got != 8 {
		t.Fatalf("limit %d after an all-drop window from 16, want 8", got)
	}
}

func TestNoLoadRTTDoesNotDriftUnderQueueing(t *testing.T) {
	d := newDriver(WithInitialLimit(40))
	d.step(idle(5*ms, 5))
	// Long overload where the RTT follows the in-flight count (queueing on
	// 8 cores): the no-load RTT must stay put and the limit settle.
	for range 300 {
		d.step(func(l int) adaptive.Sample {
			return win(l, l, 100, time.Duration(float64(5*ms)*max(1, float64(l)/8)), 100, 0)
		})
	}
	if d.v.NoLoadRTT() != 5*ms {
		t.Fatalf("no-load RTT drifted to %v", d.v.NoLoadRTT())
	}
	if d.limit < 8 || d.limit > 16 {
		t.Fatalf("limit %d, want it where the queue is between alpha and beta", d.limit)
	}
}

func TestSlowerServiceIsRelearntWithoutPinning(t *testing.T) {
	d := newDriver(WithInitialLimit(64))
	d.step(idle(5*ms, 5))
	for range 50 {
		d.step(overloaded(20 * ms)) // the service itself got 4× slower
	}
	if d.limit < 8 {
		t.Fatalf("limit collapsed to %d although less concurrency did not help", d.limit)
	}
	if nl := d.v.NoLoadRTT(); nl < 15*ms || nl > 20*ms {
		t.Fatalf("no-load RTT %v, want it re-learnt near 20ms", nl)
	}
}

func TestFastRecovery(t *testing.T) {
	d := newDriver(WithInitialLimit(64))
	d.step(idle(5*ms, 5))
	for range 50 {
		d.step(overloaded(20 * ms))
	}
	low := d.limit
	for range 20 {
		d.step(overloaded(5 * ms)) // capacity is back: queue empty, gate full
	}
	if d.limit < 4*low {
		t.Fatalf("limit %d twenty windows after recovery from %d: slow start did not re-arm", d.limit, low)
	}
}

func TestMaxRTT(t *testing.T) {
	d := newDriver(WithMaxRTT(8 * ms))
	d.step(idle(5*ms, 5))
	d.v.slowStart = false
	if got := d.step(overloaded(16 * ms)); got > 10 {
		t.Fatalf("limit %d above the 8ms bound at 16ms, want about halved", got)
	}
}

func TestValidation(t *testing.T) {
	for _, tt := range []struct {
		opts []Option
		want string
	}{
		{[]Option{WithInitialLimit(0)}, "initial limit"},
		{[]Option{WithAlpha(nil)}, "nil threshold"},
		{[]Option{WithBeta(func(float64) float64 { return 1 })}, "threshold ≤ alpha < beta"},
		{[]Option{WithSmoothing(2)}, "smoothing"},
		{[]Option{WithDropTolerance(-1)}, "drop tolerance"},
		{[]Option{WithSlack(3)}, "slack"},
		{[]Option{WithMaxRTT(-ms)}, "max RTT"},
	} {
		_, err := adaptive.New(New(tt.opts...))
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("error %v, want it to mention %q", err, tt.want)
		}
	}
	if _, err := adaptive.New((*Vegas)(nil)); err == nil {
		t.Error("nil *Vegas accepted")
	}
	if _, err := adaptive.New(New(Proportional(0.25, 0.5)...)); err != nil {
		t.Errorf("Proportional thresholds rejected: %v", err)
	}
}

// TestHeadroomOverPeaks: peaks of demand near the limit with an empty queue
// earn headroom up to about 4/3 of the peaks, and no further; a queue at
// those peaks earns nothing.
func TestHeadroomOverPeaks(t *testing.T) {
	d := newDriver(WithInitialLimit(20), WithSmoothing(1))
	d.step(idle(5*ms, 10)) // the no-load RTT
	var got int
	for range 50 {
		got = d.step(idle(5*ms, 18))
	}
	if got < 24 || got > 25 {
		t.Fatalf("limit %d: want growth over peaks of 18 to about 18/0.75 = 24, then hold", got)
	}
	q := newDriver(WithInitialLimit(20), WithSmoothing(1))
	q.step(idle(5*ms, 10))
	if got := q.step(idle(15*ms, 18)); got != 20 {
		t.Fatalf("limit %d: grew over peaks that queued", got)
	}
}

// Once the service is known to be slower (the knee is set), a calm spell at
// the knee's RTT grows the limit one step at a time: no slow start, no jump
// by beta, which would overshoot and breach the bound the next window.
func TestNoJumpsAtTheKnee(t *testing.T) {
	d := newDriver(WithInitialLimit(64), WithMaxRTT(8*ms))
	d.step(idle(5*ms, 5))
	for range 30 {
		d.step(overloaded(16 * ms)) // the service itself got slower than the bound
	}
	if d.v.knee == 0 {
		t.Fatal("knee not learnt")
	}
	// Windows at the no-load RTT (learnt while the service was slow): no
	// queue, the gate full.
	noJumps(t, d, overloaded(time.Duration(d.v.noload)), 40, 2)
}

// noJumps steps d through n windows w and fails if the limit ever rises
// by more than max(least, a tenth) over the highest so far — not the last
// one: a probe below the knee (see holdKnee) returns to the limit it left,
// which is no jump.
func noJumps(t *testing.T, d *driver, w func(int) adaptive.Sample, n, least int) {
	t.Helper()
	prev := d.limit
	for i := range n {
		got := d.step(w)
		if got > prev+max(least, prev/10) {
			t.Fatalf("window %d at the knee: limit jumped from %d to %d", i, prev, got)
		}
		prev = max(prev, got)
	}
}

// A knee learnt while slow start is still armed (no window was ever over
// the bound by the relief, so nothing disarmed it) ends slow start: at the
// knee's RTT the queue estimate reads empty, and doubling would overshoot.
func TestNoSlowStartOnceTheKneeIsSet(t *testing.T) {
	d := newDriver(WithInitialLimit(20), WithMaxRTT(8*ms))
	for range 5 {
		d.step(idle(7900*time.Microsecond, 5)) // no-load RTT just under the bound
	}
	// Nobody refused, so the bound is loosened (relief 1.4): a full window
	// at 8.5ms is over WithMaxRTT but grows by alpha, and slow start stays
	// armed.
	slow := func(l int) adaptive.Sample { return win(l, l, 100, 8500*time.Microsecond, 0, 0) }
	d.step(slow)
	if !d.v.slowStart {
		t.Fatal("slow start disarmed before the knee: the trace no longer tests the rule")
	}
	// Half as many in flight, the same RTT: the service got slower.
	d.step(func(l int) adaptive.Sample { return win(l, l/2, 100, 8500*time.Microsecond, 0, 0) })
	if d.v.knee == 0 {
		t.Fatal("knee not learnt")
	}
	noJumps(t, d, slow, 10, 3)
}

// While hardly anyone is refused (a busy but healthy server near capacity),
// one window with a queue spike over WithMaxRTT must not cut the limit: it
// cut 55 to 29 at 0.93× capacity in the simulator's ramp (seed 3) and
// started shedding there. Slowness that persists still cuts it.
func TestOneSlowWindowIsNotOverloadWhileFewAreRefused(t *testing.T) {
	d := newDriver(WithInitialLimit(55), WithMaxRTT(6*ms))
	for range 10 {
		d.step(idle(3*ms, 30))
	}
	// The spike: the gate fills and a few callers are refused, the window
	// median is twice the bound.
	spike := func(l int) adaptive.Sample { return win(l, l, 300, 12*ms, 20, 0) }
	if got := d.step(spike); got != 55 {
		t.Fatalf("limit %d after one slow window with 6%% refused; want it held at 55", got)
	}
	d.step(idle(3*ms, 30))
	var got int
	for range 8 {
		got = d.step(spike)
	}
	if got >= 40 {
		t.Fatalf("limit %d after eight slow windows in a row; want it cut", got)
	}
}

// psKnee is a deterministic trace of a service whose own mean RTT is own
// up to c in flight and grows in proportion beyond (processor sharing over
// c cores), with, if noisy, the window-to-window noise of a hundred-odd
// requests per window (uniform within ±15%, from a fixed seed); the gate
// is full and callers are refused. The window RTT is the median, 0.69 of
// the mean.
func psKnee(c int, own time.Duration, noisy bool) func(int) adaptive.Sample {
	rng := rand.New(rand.NewPCG(1, 2))
	return func(l int) adaptive.Sample {
		f := 1.0
		if noisy {
			f = 0.85 + 0.3*rng.Float64()
		}
		mean := float64(own) * max(1, float64(l)/float64(c)) * f
		n := int(float64(100*ms) / float64(own) * float64(min(l, c)))
		return adaptive.Sample{Limit: l, MaxInFlight: l, Count: n, Rejected: 100,
			RTT: time.Duration(0.69 * mean), AvgRTT: time.Duration(mean)}
	}
}

// kneeDriver is the simulator's vegas gate that learnt a 3.4ms median
// no-load RTT and then saw the service slow down to psKnee(16, 10ms),
// whose median (6.9ms) is over WithMaxRTT: the knee, learnt from a
// noise-free spell, binds. It returns the noisy trace.
func kneeDriver(t *testing.T) (*driver, func(int) adaptive.Sample) {
	d := newDriver(append(Proportional(0.3, 0.6), WithInitialLimit(64), WithMaxRTT(6250*time.Microsecond))...)
	for range 5 {
		d.step(idle(3400*time.Microsecond, 20))
	}
	for w := psKnee(16, 10*ms, false); d.v.knee == 0; {
		if d.step(w); d.v.seen > 100 {
			t.Fatal("knee not learnt")
		}
	}
	return d, psKnee(16, 10*ms, true)
}

// At the knee, window RTTs carry ±15% of noise: each slow window cut the
// limit by knee/rtt and each fast one added one, and the limit ratcheted
// down to a fraction of the knee (the simulator's capacity-drop lost 10%
// of its goodput so). Held on the mean of many windows against probes of
// the service's own RTT, it stays at the knee: 16 in flight, 17 at most
// for the latency objective.
func TestKneeHeldThroughNoise(t *testing.T) {
	d, w := kneeDriver(t)
	sum, lo, hi := 0, 1<<30, 0
	for i := range 300 {
		l := d.step(w)
		sum += l
		if i >= 50 { // from wherever the knee was learnt: up to the knee
			lo, hi = min(lo, l), max(hi, l)
		}
	}
	// Probes below the knee take it to 0.85·L for two windows.
	if mean := float64(sum) / 300; mean < 14 || mean > 18.5 || lo < 11 || hi > 21 {
		t.Fatalf("limit at the knee (16): mean %.1f, range %d…%d after 50 windows; want a mean in 14…18.5, and 11…21", mean, lo, hi)
	}
}

// Held at the knee, the limit dips below it for two windows now and then
// (at once after the knee is learnt): the second one measures the
// service's own mean RTT, the reference of the hold, and the limit returns
// to where it was.
func TestKneeProbe(t *testing.T) {
	d, _ := kneeDriver(t)
	w := psKnee(16, 10*ms, false)
	d.limit = 16 // as if the gate had it at the knee
	var got []int
	for range 8 {
		got = append(got, d.step(w))
	}
	i := 0
	for i < len(got) && got[i] > 13 {
		i++
	}
	if i+2 >= len(got) || got[i] < 12 || got[i+1] != got[i] || got[i+2] < 16 {
		t.Fatalf("limits %v from 16: want a probe at 0.85·L (13) for two windows, then back", got)
	}
	if own := time.Duration(d.v.own); own < 9900*time.Microsecond || own > 10100*time.Microsecond {
		t.Fatalf("own RTT %v after the probe, want the service's 10ms", own)
	}
}

// A dependency whose requests time out whatever the concurrency: half of
// every window's requests are dropped, at any limit. Shrinking does not
// reduce the drops, so they are not congestion: the limit must not be
// halved window after window down to 1 (it fell from 256 to 1 within a
// second in the simulator's dependency-spike, refusing two thirds of the
// callers while the CPU idled).
func TestOwnDropsDoNotCollapseTheLimit(t *testing.T) {
	d := newDriver(WithInitialLimit(200), WithMaxRTT(12*ms))
	for range 5 {
		d.step(idle(10*ms, 100))
	}
	half := func(l int) adaptive.Sample { return win(l, l, 100, 10*ms, 50, 100) }
	var got []int
	for range 60 {
		got = append(got, d.step(half))
	}
	if low := slices.Min(got[20:]); low < 40 {
		t.Fatalf("limit fell to %d with a constant 50%% drop share that shrinking does not change (limits %v)", low, got)
	}
}

// clamped steps v as a gate with the given minimum limit would: the limit
// Update returns, lifted to lo.
func clamped(v *Vegas, limit, lo int, w func(int) adaptive.Sample) int {
	return max(v.Update(w(limit)), lo)
}

// A cut for drops that comes during a probe below the knee must stay: the
// probe's end used to return to the limit it left, undoing the cut (a limit
// cut from 15 to 8 by a window with half its requests dropped came back to
// 18 two windows later).
func TestDropCutDuringAProbeStays(t *testing.T) {
	for _, allDropped := range []bool{false, true} {
		d, w := kneeDriver(t)
		for i := 0; d.v.probe == 0; i++ {
			if d.step(w); i > 200 {
				t.Fatal("no probe at the knee")
			}
		}
		base := d.v.probeBase
		s := w(d.limit)
		s.Dropped = s.Count
		if allDropped {
			s.Count, s.RTT, s.AvgRTT = 0, 0, 0
		}
		cut := d.step(func(int) adaptive.Sample { return s })
		got := []int{cut}
		for range 2 {
			got = append(got, d.step(w))
		}
		if slices.Max(got[1:]) >= int(base) {
			t.Fatalf("all dropped %v: probe from %.1f, cut to %d by drops, then %v: the probe's end undid the cut", allDropped, base, cut, got[1:])
		}
	}
}

// With a gate minimum above the probe's depth the gate lifts the probe's
// limit; the probe must go on at that minimum. Dropping it left the
// service's own RTT unmeasured, and without it the limit never moved off
// the minimum.
func TestProbeLiftedByTheGatesMinimum(t *testing.T) {
	d, w := kneeDriver(t)
	const lo = 15
	limit := max(d.limit, lo)
	var got []int
	for range 300 {
		limit = clamped(d.v, limit, lo, w)
		got = append(got, limit)
	}
	if d.v.own == 0 {
		t.Fatalf("own RTT never measured with a gate minimum of %d (limits %v)", lo, got[:40])
	}
	if hi := slices.Max(got[100:]); hi <= lo {
		t.Fatalf("limit held at the gate's minimum %d for good (limits %v)", lo, got[100:140])
	}
}

// The gate's windows last from 100 ms to 1 s. At the knee the limit grows
// while the throughput is well under the best seen; a long window is not
// more throughput: counted per window, a 1 s window's count made every
// 100 ms window look like a collapse, and the limit climbed past the knee.
func TestKneeRateIsPerSecond(t *testing.T) {
	d, w := kneeDriver(t)
	var got []int
	for i := range 300 {
		l := d.step(func(l int) adaptive.Sample {
			s := w(l)
			if s.Window = 100 * time.Millisecond; i%5 == 0 {
				s.Window, s.Count = time.Second, 10*s.Count
			}
			return s
		})
		got = append(got, l)
	}
	if hi := slices.Max(got[50:]); hi > 21 {
		t.Fatalf("limit reached %d at a knee of 16 with windows of 100 ms and 1 s at the same throughput (limits %v)", hi, got[50:100])
	}
}
