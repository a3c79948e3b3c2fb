package simpeers

import (
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/sluicehq/sluice/adaptive"
	"github.com/sluicehq/sluice/sim"
)

// The real-time run must leave no goroutine behind (failsafe-go starts
// none of its own).
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestL10(t *testing.T) {
	for _, c := range []struct{ x, want int }{{0, 1}, {1, 1}, {9, 1}, {10, 1}, {99, 1}, {100, 2}, {999, 2}, {1000, 3}, {12345, 4}} {
		if got := l10(c.x); got != c.want {
			t.Errorf("l10(%d) = %d, want %d", c.x, got, c.want)
		}
	}
}

func ms(x float64) time.Duration { return time.Duration(x * float64(time.Millisecond)) }

// one is a one-request window, as the per-request gate produces.
func one(rtt time.Duration, inflight int) adaptive.Sample {
	return adaptive.Sample{Count: 1, RTT: rtt, MinRTT: rtt, AvgRTT: rtt, MaxRTT: rtt, MaxInFlight: inflight}
}

// TestVegasRules walks VegasLimit's rules on a deterministic trace, from
// L = 20 (L10 = 1: threshold 1, alpha 3, beta 6).
func TestVegasRules(t *testing.T) {
	v := NewVegas(1)
	v.jitter = 1 // probe after 30·L requests
	step := func(s adaptive.Sample, want float64, why string) {
		t.Helper()
		v.Update(s)
		if v.limit != want {
			t.Fatalf("%s: limit %v, want %v", why, v.limit, want)
		}
	}
	step(one(ms(10), 20), 20, "first sample sets rtt_noload and holds")
	if v.noLoad != ms(10) {
		t.Fatalf("rtt_noload %v, want 10ms", v.noLoad)
	}
	step(one(ms(10), 20), 26, "queue 0 ≤ threshold: L + beta")
	// L = 26: queue = ⌈26·(1 − 10/11)⌉ = 3: not < alpha 3, not > beta 6: hold.
	step(one(ms(11), 26), 26, "alpha ≤ queue ≤ beta: hold")
	// queue = ⌈26·(1 − 10/10.5)⌉ = 2: threshold < 2 < alpha: L + 1.
	step(one(ms(10.5), 26), 27, "queue < alpha: L + L10")
	// queue = ⌈27·(1 − 10/20)⌉ = 14 > beta: L − 1.
	step(one(ms(20), 27), 26, "queue > beta: L − L10")
	step(one(ms(20), 12), 26, "2·inflight < L: app-limited hold")
	step(adaptive.Sample{Dropped: 1, MaxInFlight: 26}, 25, "drop: L − L10")
	step(one(ms(8), 25), 25, "faster sample: new rtt_noload, hold")
	if v.noLoad != ms(8) {
		t.Fatalf("rtt_noload %v, want 8ms", v.noLoad)
	}
	// Probe: after 30·L requests since the last one, rtt_noload is reset to
	// the sample's RTT, even a slow one.
	v.probeCount = int(30*v.limit) - 1
	step(one(ms(30), 25), 25, "probe holds")
	if v.noLoad != ms(30) || v.probeCount != 0 {
		t.Fatalf("after the probe: rtt_noload %v, probe count %d; want 30ms, 0", v.noLoad, v.probeCount)
	}
	// A window of several requests is replayed request by request: three
	// requests with no queueing give three times + beta.
	v2 := NewVegas(1)
	v2.Update(one(ms(10), 20))
	v2.Update(adaptive.Sample{Count: 3, RTT: ms(10), MinRTT: ms(10), MaxInFlight: 30})
	if v2.limit != 20+6+6+6 {
		t.Fatalf("three-request window: limit %v, want 38", v2.limit)
	}
	// The limit stays within [1, 1000].
	v3 := NewVegas(1)
	for range 100 {
		v3.Update(adaptive.Sample{Dropped: 1})
	}
	if v3.limit != 1 {
		t.Fatalf("after 100 drops: limit %v, want 1", v3.limit)
	}
}

// TestGradient2Rules walks Gradient2Limit's rules on a deterministic trace.
func TestGradient2Rules(t *testing.T) {
	g := NewGradient2(true)
	// Ten samples of 10 ms: long is their plain mean, 10 ms. Each has
	// gradient = clamp(1.5·10/10) = 1: L' = 0.8L + 0.2(L + 4) = L + 0.8.
	for i := range 10 {
		g.Update(one(ms(10), 100))
		if want := 20 + 0.8*float64(i+1); !near(g.limit, want) {
			t.Fatalf("sample %d: limit %v, want %v", i, g.limit, want)
		}
	}
	if !near(g.long, float64(ms(10))) {
		t.Fatalf("long RTT %v after warm-up, want 10ms", time.Duration(g.long))
	}
	// App-limited: in flight below L/2 holds the limit but still feeds long.
	l := g.limit
	g.Update(one(ms(10), 5))
	if g.limit != l {
		t.Fatalf("app-limited: limit %v, want %v", g.limit, l)
	}
	// A slow sample: long moves by 2/601 of the gap; gradient =
	// 1.5·long/40 < 0.5 → 0.5: L' = 0.8L + 0.2(0.5L + 4) = 0.9L + 0.8.
	long := g.long + (float64(ms(40))-g.long)*2/601
	g.Update(one(ms(40), 100))
	if !near(g.long, long) || !near(g.limit, 0.9*l+0.8) {
		t.Fatalf("slow sample: long %v limit %v, want %v %v", g.long, g.limit, long, 0.9*l+0.8)
	}
	// Within the tolerance (short ≤ 1.5·long) the gradient is 1: growth.
	l = g.limit
	g.Update(one(ms(14), 100))
	if !near(g.limit, l+0.8) {
		t.Fatalf("within tolerance: limit %v, want %v", g.limit, l+0.8)
	}
	// A much faster sample (long/short > 2) decays the stored long by 0.95.
	long = (g.long + (float64(ms(2))-g.long)*2/601) * 0.95
	g.Update(one(ms(2), 100))
	if !near(g.long, long) {
		t.Fatalf("fast sample: long %v, want %v", g.long, long)
	}
	// The limit stays within [20, 200]: a run of slow samples (long lags
	// far behind, gradient 0.5) pins it at 20; a run of fast ones at 200.
	for range 100 {
		g.Update(one(ms(1000), 1000))
	}
	if g.limit != 20 {
		t.Fatalf("after many slow samples: limit %v, want 20", g.limit)
	}
	for range 2000 {
		g.Update(one(ms(1), 1000))
	}
	if g.limit != 200 {
		t.Fatalf("after many fast samples: limit %v, want 200", g.limit)
	}
	// Windowed: one update per window whatever its count.
	w := NewGradient2(false)
	w.Update(adaptive.Sample{Count: 50, RTT: ms(10), MinRTT: ms(10), MaxInFlight: 100})
	if !near(w.limit, 20.8) || w.longN != 1 {
		t.Fatalf("windowed: limit %v after %d long samples, want 20.8 after 1", w.limit, w.longN)
	}
}

func near(a, b float64) bool { d := a - b; return d < 1e-9*max(1, b) && -d < 1e-9*max(1, b) }

// TestShorten checks that only the timeline shrinks and that the original
// scenario is left alone.
func TestShorten(t *testing.T) {
	all, err := sim.FindScenarios(sim.Scenarios(), []string{"capacity-drop"})
	if err != nil {
		t.Fatal(err)
	}
	orig := all[0]
	s := Shorten(orig, 10)
	if err := s.Validate(); err != nil {
		t.Fatal(err)
	}
	if s.Duration != orig.Duration/10 || s.Warmup != orig.Warmup/10 || s.Change != orig.Change/10 || s.Recover != orig.Recover/10 {
		t.Fatalf("timeline not divided by 10: %v %v %v %v", s.Duration, s.Warmup, s.Change, s.Recover)
	}
	for i := range s.Load {
		if s.Load[i].At != orig.Load[i].At/10 || s.Load[i].Load != orig.Load[i].Load {
			t.Fatalf("phase %d: %+v from %+v", i, s.Load[i], orig.Load[i])
		}
	}
	for i := range s.Server.Changes {
		if s.Server.Changes[i].At != orig.Server.Changes[i].At/10 || s.Server.Changes[i].ServiceFactor != orig.Server.Changes[i].ServiceFactor {
			t.Fatalf("change %d: %+v from %+v", i, s.Server.Changes[i], orig.Server.Changes[i])
		}
	}
	if s.Server.Service != orig.Server.Service || s.SLO != orig.SLO || s.Deadline != orig.Deadline {
		t.Fatal("the server or the clients changed")
	}
	if all2, _ := sim.FindScenarios(sim.Scenarios(), []string{"capacity-drop"}); all2[0].Load[1].At != orig.Load[1].At || orig.Server.Changes[0].At != 20*time.Second {
		t.Fatal("Shorten modified its argument")
	}
}

// TestNetflixPoliciesRun runs the Netflix policies through the simulator on
// a short 4-core step and checks that they produce sane results.
func TestNetflixPoliciesRun(t *testing.T) {
	sc := Shorten(FourCore()[1], 20) // 5 s: 0.5×, 3× from 1 s to 4 s, 0.5×
	for _, spec := range []sim.PolicySpec{NetflixVegas(), NetflixGradient2(), NetflixGradient2Windowed()} {
		t.Run(spec.Name, func(t *testing.T) {
			r, err := sim.Run(sc, spec, 1)
			if err != nil {
				t.Fatal(err)
			}
			if r.Requests < 5000 || r.GoodputRatio < 0.5 || r.PhaseGoodput < 0.5 || r.RejectRatio <= 0 || r.RejectRatio >= 1 {
				t.Fatalf("implausible: %d requests, goodput %.3f, phase goodput %.3f, rejects %.3f",
					r.Requests, r.GoodputRatio, r.PhaseGoodput, r.RejectRatio)
			}
			// The limit stays within the algorithm's bounds.
			lo, hi := g2Min, g2Max
			if spec.Name == "netflix-vegas" {
				lo, hi = 1, vegasMax
			}
			for _, p := range r.Series {
				if p.Limit < lo || p.Limit > hi {
					t.Fatalf("at %v: limit %d outside [%d, %d]", p.T, p.Limit, lo, hi)
				}
			}
			// The run is reproducible to the bit (Vegas' probe jitter
			// included).
			if spec.Name != "netflix-vegas" {
				return
			}
			r2, err := sim.Run(sc, spec, 1)
			if err != nil {
				t.Fatal(err)
			}
			if r2.GoodputRPS != r.GoodputRPS || r2.P99ms != r.P99ms || r2.RejectRatio != r.RejectRatio {
				t.Fatal("two runs with the same seed differ")
			}
		})
	}
}

// TestFailsafeAdmitRelease checks the adapter on failsafe-go's limiter
// directly: its initial limit of 20 admits 20, refuses the 21st, and both
// kinds of release free a slot.
func TestFailsafeAdmitRelease(t *testing.T) {
	p, err := Failsafe().New(sim.Env{})
	if err != nil {
		t.Fatal(err)
	}
	if p.Limit() != 20 {
		t.Fatalf("limit %d, want failsafe-go's initial 20", p.Limit())
	}
	var held []sim.Ticket
	for range 20 {
		tk, ok := p.Admit(sim.Request{Priority: 1})
		if !ok {
			t.Fatalf("refused with %d held", len(held))
		}
		held = append(held, tk)
	}
	if _, ok := p.Admit(sim.Request{Priority: 1}); ok {
		t.Fatal("admitted a 21st request at limit 20")
	}
	p.Done(held[0], sim.Success)
	p.Done(held[1], sim.Dropped)
	for range 2 {
		tk, ok := p.Admit(sim.Request{Priority: 1})
		if !ok {
			t.Fatal("a released slot was not reusable")
		}
		held = append(held, tk)
	}
	for _, tk := range held[2:] {
		p.Done(tk, sim.Success)
	}
	if n := p.(*failsafePolicy).lim.Inflight(); n != 0 {
		t.Fatalf("%d in flight after every release", n)
	}
}

// countingPolicy counts a policy's admissions and releases.
type countingPolicy struct {
	sim.Policy
	admitted, done atomic.Int64
}

func (c *countingPolicy) Admit(r sim.Request) (sim.Ticket, bool) {
	tk, ok := c.Policy.Admit(r)
	if ok {
		c.admitted.Add(1)
	}
	return tk, ok
}

func (c *countingPolicy) Done(t sim.Ticket, o sim.Outcome) {
	c.done.Add(1)
	c.Policy.Done(t, o)
}

// TestFailsafeRealtime plays a tiny scenario in real time (1 s of wall time)
// under the failsafe policy: light load, so every request is admitted and
// has ended, and been released, well before the end of the run.
func TestFailsafeRealtime(t *testing.T) {
	sc := sim.Scenario{
		Name:     "rt-tiny",
		Duration: 2 * time.Second, Warmup: 200 * time.Millisecond,
		// 40 ms of CPU (20 ms of wall time at scale 0.5) on 8 cores: 200 rps.
		Server: sim.Server{Cores: 8, Service: sim.Exp(40 * time.Millisecond)},
		// 100 rps for 1.5 s, then nothing: about 150 requests, all done by
		// the end (P(S > 500 ms) < 1e-5).
		Load: []sim.Phase{{At: 0, Load: 0.5}, {At: 1500 * time.Millisecond, Load: 0}},
	}
	var pol *countingPolicy
	spec := sim.PolicySpec{Name: "failsafe", New: func(e sim.Env) (sim.Policy, error) {
		p, err := Failsafe().New(e)
		if err != nil {
			return nil, err
		}
		pol = &countingPolicy{Policy: p}
		return pol, nil
	}}
	r, err := sim.RunRealtime(sc, spec, 1, 0.5)
	if err != nil {
		t.Fatal(err)
	}
	a, d := pol.admitted.Load(), pol.done.Load()
	if a < 50 || d != a || r.RejectRatio != 0 || r.GoodputRatio <= 0 {
		t.Fatalf("admitted %d, released %d, rejects %.3f, goodput %.3f; want ≥ 50 admitted, all released, none rejected",
			a, d, r.RejectRatio, r.GoodputRatio)
	}
	if n := pol.Policy.(*failsafePolicy).lim.Inflight(); n != 0 {
		t.Fatalf("failsafe-go reports %d in flight after the run", n)
	}
}
