package sim

import (
	"encoding/json"
	"math"
	"testing"
	"time"
)

// TestPrioSeriesCounts: each interval splits attempts, rejections and
// goodput by the request's priority, per second like the totals.
func TestPrioSeriesCounts(t *testing.T) {
	var m metricsAcc
	m.init(&Scenario{Interval: 100 * time.Millisecond, SLO: 50 * time.Millisecond, Users: 1}, 1)
	send := func(prio int, refused, good bool) {
		r := &request{prio: prio, counted: true}
		m.attempt(r)
		switch {
		case refused:
			m.reject(r)
		case good:
			m.complete(r, int64(10*time.Millisecond), true, true)
		default: // too slow
			m.complete(r, int64(80*time.Millisecond), true, false)
		}
	}
	send(0, false, true)
	send(0, false, true)
	send(1, false, false)
	send(3, true, false)
	send(3, true, false)
	send(3, false, true)
	m.roll(10, 2, 0)
	send(2, true, false)
	m.roll(10, 0, 0)

	if len(m.series) != 2 {
		t.Fatalf("%d points, want 2", len(m.series))
	}
	// ×10: 100 ms intervals, per second.
	want := [2][MaxPriorities]PrioPoint{
		{{Offered: 20, Goodput: 20}, {Offered: 10}, {}, {Offered: 30, Goodput: 10, Rejected: 20}},
		{{}, {}, {Offered: 10, Rejected: 10}, {}},
	}
	for i, p := range m.series {
		if p.Prio != want[i] {
			t.Errorf("interval %d: Prio = %+v, want %+v", i, p.Prio, want[i])
		}
	}
}

// TestPrioSeriesSumsToTotals runs a two-class scenario under the shedder:
// every interval's per-priority figures add up to its totals, and the
// priorities no class has stay at zero.
func TestPrioSeriesSumsToTotals(t *testing.T) {
	sc := short(scenario(t, "dependency-spike"), 0.1)
	pol, err := FindPolicies(ExtraPolicies(), []string{"shed-gradient"})
	if err != nil {
		t.Fatal(err)
	}
	r, err := Run(sc, pol[0], 1)
	if err != nil {
		t.Fatal(err)
	}
	used := map[int]bool{}
	for _, c := range sc.Classes {
		used[c.Priority] = true
	}
	near := func(a, b float64) bool { return math.Abs(a-b) <= 1e-9*max(1, math.Abs(b)) }
	var offered, rejected [MaxPriorities]float64
	for _, pt := range r.Series {
		var o, g, rj float64
		for p, pp := range pt.Prio {
			if !used[p] && pp != (PrioPoint{}) {
				t.Fatalf("t=%v: priority %d has no class but %+v", pt.T, p, pp)
			}
			o, g, rj = o+pp.Offered, g+pp.Goodput, rj+pp.Rejected
			offered[p] += pp.Offered
			rejected[p] += pp.Rejected
		}
		if !near(o, pt.Offered) || !near(g, pt.Goodput) || !near(rj, pt.Rejected) {
			t.Fatalf("t=%v: per-priority sums offered %v goodput %v rejected %v, totals %v %v %v",
				pt.T, o, g, rj, pt.Offered, pt.Goodput, pt.Rejected)
		}
	}
	for p := range used {
		if offered[p] == 0 {
			t.Errorf("priority %d: no attempts in the series", p)
		}
	}
	if rejected[1]+rejected[3] == 0 {
		t.Error("the shedder rejected nothing: the test no longer exercises Rejected")
	}
}

// TestTargetResultJSON: a settling time that never came (+Inf) encodes as
// null instead of failing the whole -json output.
func TestTargetResultJSON(t *testing.T) {
	b, err := json.Marshal([]TargetResult{{Target: "settle_intervals ≤ 10", Value: math.Inf(1)}, {Target: "x", Value: 0.5, Pass: true}})
	if err != nil {
		t.Fatal(err)
	}
	if want := `[{"target":"settle_intervals ≤ 10","value":null,"pass":false},{"target":"x","value":0.5,"pass":true}]`; string(b) != want {
		t.Fatalf("got %s, want %s", b, want)
	}
}

// shedStart reads the scheduled load where refusals of at least 1% begin
// and last (4 of the next 5 intervals); a lone refusing interval does not
// count, and a run that never sheds reports -1.
func TestShedStart(t *testing.T) {
	s := &Scenario{Interval: time.Second, Warmup: time.Second,
		Load: []Phase{{At: 0, Load: 0}, {At: 100 * time.Second, Load: 1, Ramp: true}}}
	var m metricsAcc
	for i := range 60 {
		p := Point{T: time.Duration(i+1) * time.Second, Offered: 100}
		switch {
		case i == 20: // a lone refusing interval
			p.Rejected = 5
		case i >= 40 && i != 42: // shedding from 40 s on (one quiet interval inside)
			p.Rejected = 2
		}
		m.series = append(m.series, p)
	}
	if got := m.shedStart(s); math.Abs(got-0.40) > 1e-9 {
		t.Fatalf("shedStart = %v, want 0.40 (the load at 40 s)", got)
	}
	m.series = m.series[:40]
	if got := m.shedStart(s); got != -1 {
		t.Fatalf("shedStart with no shedding = %v, want -1", got)
	}
}

// The limit against the optimum after a change: the first interval within
// ±20% of the core count, and the share of intervals within it from two
// seconds after the change on.
func TestLimitAgainstOptimum(t *testing.T) {
	s := &Scenario{Interval: time.Second, Change: 10 * time.Second, Server: Server{Cores: 10},
		Load: []Phase{{At: 0, Load: 1}}}
	var m metricsAcc
	limits := []int{40, 30, 20, 12, 11, 8, 9, 10, 13, 10}
	for i := range 20 {
		l := 40
		if i >= 10 {
			l = limits[i-10]
		}
		m.series = append(m.series, Point{T: time.Duration(i+1) * time.Second, Limit: l, Goodput: 1})
	}
	var r Result
	r.CapacityRPS = 1
	m.settle(s, &r)
	if r.LimitReachS != 4 {
		t.Errorf("LimitReachS = %v, want 4 (the fourth interval after the change)", r.LimitReachS)
	}
	// From 2 s on: 20 12 11 8 9 10 13 10 → 12, 11, 8, 9, 10, 10 within [8, 12].
	if want := 6.0 / 8; math.Abs(r.LimitNearOpt-want) > 1e-9 {
		t.Errorf("LimitNearOpt = %v, want %v", r.LimitNearOpt, want)
	}
	m.series = m.series[:10]
	for i := range 10 {
		m.series = append(m.series, Point{T: time.Duration(i+11) * time.Second, Limit: 40, Goodput: 1})
	}
	r = Result{CapacityRPS: 1}
	m.settle(s, &r)
	if r.LimitReachS != -1 {
		t.Errorf("LimitReachS with the limit never near = %v, want -1", r.LimitReachS)
	}
}
