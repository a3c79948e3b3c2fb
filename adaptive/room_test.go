package adaptive

import (
	"math"
	"slices"
	"testing"
	"time"
)

// peaks is an exact trace of a demand seen through 100 ms windows: arrive(i)
// callers arrive in the i-th window; at limit L the gate holds held(L)
// requests on average (Little's law: the window's completions at a mean RTT
// of held/rate) and refuses refused(L) of the callers.
type peaks struct {
	i       int
	arrive  func(i int) int
	held    func(limit int) float64
	refused func(limit int) float64
	front   float64 // callers refused by the gate's front, as a share of those that passed
}

func (v *peaks) window(limit int) Sample {
	a := v.arrive(v.i)
	v.i++
	rej := int(math.Round(v.refused(limit) * float64(a)))
	n := a - rej
	h := v.held(limit)
	avg := time.Duration(h / (float64(n) / win100.Seconds()) * 1e9)
	s := Sample{Window: win100, Limit: limit, Count: n, Rejected: rej, RTT: avg, AvgRTT: avg, MinRTT: avg / 10, MaxRTT: 5 * avg,
		FrontRefused: int(v.front * float64(a))}
	s.MaxInFlight = min(limit, int(math.Ceil(3*h)))
	if rej > 0 {
		s.MaxInFlight = limit
	}
	return s
}

// m1 is one core at 0.7 of its capacity of 1,000 a second (M/M/1/L): 70
// callers a window; the concurrency held and the share refused at each
// limit.
func m1(limit int) (held, refused float64) {
	const rho = 0.7
	var sum, mean float64
	for n := range limit + 1 {
		p := math.Pow(rho, float64(n))
		sum += p
		mean += float64(n) * p
	}
	return mean / sum, math.Pow(rho, float64(limit)) / sum
}

func underCapacity() *peaks {
	return &peaks{
		arrive:  func(int) int { return 70 },
		held:    func(l int) float64 { h, _ := m1(l); return h },
		refused: func(l int) float64 { _, r := m1(l); return r },
	}
}

// confirmedGate is a probing gate whose algorithm proposes limit, with a
// floor of 1 ms already confirmed.
func confirmedGate(t *testing.T, limit int) *Limiter {
	t.Helper()
	l := newProbed(t, &prober{initial: limit, propose: limit})
	l.mdl.floor, l.mdl.floorMean, l.mdl.floorW, l.mdl.confirmed = 1e6, 1e6, floorMemory, true
	return l
}

// TestRoomKeptForTheDemandsPeaks: on one core at 0.7 of its capacity, the
// algorithm holding 3 refuses 14% of the callers. The room probe doubles
// the limit while the room added does not fill (3 → 6 fills a fifth, 6 →
// 12 a twelfth) and stops where it refuses no one; the room then holds the
// limit at 12 whatever the algorithm proposes.
func TestRoomKeptForTheDemandsPeaks(t *testing.T) {
	l := confirmedGate(t, 3)
	var now int64
	lims := run(l, underCapacity(), &now, 100)
	if got := lims[len(lims)-1]; got != 12 {
		t.Fatalf("limit %d after 10 s, want the room of 12: %v", got, lims)
	}
	if i := slices.Index(lims, 6); i < 20 || i > 40 {
		t.Errorf("first room probe at window %d, want after two spans of steady demand (3–4 s): %v", i, lims)
	}
	if l.mdl.room.limit != 12 || l.mdl.probe.on {
		t.Errorf("room %d, probing %v: want a room of 12, no probe", l.mdl.room.limit, l.mdl.probe.on)
	}
}

// TestRoomProbeFindsAnOverload: at 1.2 times the capacity the callers fill
// whatever room is added; the limit at 3 refuses a sixth of them (under
// roomLoad), so a room probe comes, ends at its first measured window, and
// the next one waits probeEvery, then twice that.
func TestRoomProbeFindsAnOverload(t *testing.T) {
	l := confirmedGate(t, 3)
	var now int64
	v := &peaks{
		arrive:  func(int) int { return 120 },
		held:    func(l int) float64 { return float64(l) },
		refused: func(int) float64 { return 1.0 / 6 },
	}
	lims := run(l, v, &now, 400)
	var probes []int
	for i := 1; i < len(lims); i++ {
		if lims[i] > 3 && lims[i-1] == 3 {
			probes = append(probes, i)
		}
		if lims[i] > 6 {
			t.Fatalf("window %d: limit %d, an overload's room probe doubled past 6: %v", i, lims[i], lims)
		}
	}
	if len(probes) != 3 {
		t.Fatalf("room probes at windows %v, want three in 40 s (waits of 10 s, then 20 s)", probes)
	}
	for i, p := range probes {
		if n := slices.IndexFunc(lims[p:], func(x int) bool { return x == 3 }); n > 2 {
			t.Errorf("room probe %d held 6 for %d windows, want at most two (a round trip, then the overload seen)", i, n)
		}
	}
	if gap := probes[2] - probes[1]; gap < 200 {
		t.Errorf("second wait %d windows, want 20 s (200)", gap)
	}
	if l.mdl.room.limit != 0 {
		t.Errorf("room %d kept for an overload", l.mdl.room.limit)
	}
}

// TestRoomEndsWhenTheDemandChanges: a room held for a demand at 0.7 of the
// capacity ends, and the algorithm's limit returns, when the arrivals rise
// by a half, and, in another gate, when the service slows under the same
// arrivals so that the room fills.
func TestRoomEndsWhenTheDemandChanges(t *testing.T) {
	for _, tc := range []struct {
		name string
		next func(v *peaks)
	}{
		{"arrivals rise", func(v *peaks) { v.arrive = func(int) int { return 105 } }},
		{"room fills", func(v *peaks) {
			v.held = func(l int) float64 { return 0.9 * float64(l) }
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := confirmedGate(t, 3)
			var now int64
			v := underCapacity()
			run(l, v, &now, 100)
			if l.Limit() != 12 {
				t.Fatalf("limit %d, want the room of 12 first", l.Limit())
			}
			tc.next(v)
			lims := run(l, v, &now, 10)
			if i := slices.Index(lims, 3); i < 0 || i > 5 {
				t.Fatalf("limits after the change %v: want back to 3 within half a second", lims)
			}
			if l.mdl.room.limit != 0 {
				t.Errorf("room %d still in force", l.mdl.room.limit)
			}
		})
	}
}

// TestNoRoomForARampOrBursts: a demand that ramps (by a tenth of the
// capacity a second) or comes in bursts (a window at three times the
// rate every second), or one whose callers the gate's front refuses by
// the half, gets no room probe, though the gate itself refuses a few of
// its callers at the algorithm's limit.
func TestNoRoomForARampOrBursts(t *testing.T) {
	for _, tc := range []struct {
		name   string
		arrive func(i int) int
		front  float64
	}{
		{"front refuses", func(int) int { return 70 }, 1},
		{"ramp", func(i int) int { return 50 + i/10*10 }, 0},
		{"bursts", func(i int) int {
			if i%10 == 0 {
				return 210
			}
			return 55
		}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := confirmedGate(t, 3)
			var now int64
			v := underCapacity()
			v.arrive, v.front = tc.arrive, tc.front
			for i, lim := range run(l, v, &now, 60) {
				if lim != 3 {
					t.Fatalf("window %d: limit %d, want the algorithm's 3 (no room probe)", i, lim)
				}
			}
		})
	}
}

// TestRoomProbeOutlastsOneClumpOfRefusals: the level's refusals so far,
// not one window's, end a room probe early. Here the level of 6 refuses
// 5% of its callers but a third in one window (19% over the level so
// far): the probe goes on and keeps the room, as without the clump.
func TestRoomProbeOutlastsOneClumpOfRefusals(t *testing.T) {
	l := confirmedGate(t, 3)
	var now int64
	// Near a load of one refusals come in clumps: one window of the
	// level of 6 refuses a third of its callers.
	v := underCapacity()
	refused, at6 := v.refused, 0
	v.refused = func(l int) float64 {
		if l == 6 {
			if at6++; at6 == 3 {
				return 0.34
			}
		}
		return refused(l)
	}
	lims := run(l, v, &now, 100)
	if at6 < 3 {
		t.Fatalf("the probe held 6 for %d windows, want at least 3: %v", at6, lims)
	}
	if got := lims[len(lims)-1]; got != 12 {
		t.Fatalf("limit %d after 10 s, want the room of 12: %v", got, lims)
	}
}
