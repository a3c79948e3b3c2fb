package adaptive

import (
	"math"
	"slices"
	"testing"
	"time"
)

// fillServer is server with a fill: after the limit rises, the window's
// first round trip, and the time the callers take to fill the slots added,
// still complete the level before's requests. Its callers would hold
// demand requests in flight at svc each, arriving at demand/svc a second.
type fillServer struct {
	svc    time.Duration
	demand float64
	prev   float64 // the concurrency held in the window before
}

func (v *fillServer) window(limit int) Sample {
	held := min(float64(limit), v.demand)
	arrivals := v.demand / v.svc.Seconds()
	rate := held / v.svc.Seconds()
	n := rate * win100.Seconds()
	if v.prev > 0 && held > v.prev {
		fill := min(v.svc.Seconds()+(held-v.prev)/arrivals, win100.Seconds())
		n = v.prev/v.svc.Seconds()*fill + rate*(win100.Seconds()-fill)
	}
	v.prev = held
	s := Sample{Window: win100, Limit: limit, Count: int(math.Round(n)), RTT: v.svc, AvgRTT: v.svc, MinRTT: v.svc, MaxRTT: v.svc, MaxInFlight: int(held)}
	if float64(limit) < v.demand {
		s.Rejected = int(math.Round(arrivals*win100.Seconds())) - s.Count
	}
	return s
}

// A cold start's first step to the demand (20 → 300 at a flat 20 ms) is
// measured without its fill: the window at 300 completes at the old
// level's 1,000/s for its first round trip and the 19 ms the callers take
// to fill the 280 slots added, so taken whole it reads 9,600/s where the
// level completes 15,000 — under (1 − probeFell) of fifteen times the
// reference, and the startup would start again from 40. Without the fill
// it paid, and it doubles on (600 is not saturated: the demand fits).
func TestUpProbeMeasuresALevelWithoutItsFill(t *testing.T) {
	alg := &prober{initial: 20, propose: 20}
	l := newProbed(t, alg)
	var now int64
	v := &fillServer{svc: 20 * ms, demand: 300}
	got := run(l, v, &now, 4)
	if want := []int{20, 300, 600, 600}; !slices.Equal(got, want) {
		t.Fatalf("limits %v, want %v", got, want)
	}
	if f := l.Floor(); f != 20*ms || !l.mdl.confirmed {
		t.Fatalf("floor %v (confirmed %v), want 20ms confirmed", f, l.mdl.confirmed)
	}
}
