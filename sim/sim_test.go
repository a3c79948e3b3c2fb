package sim

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// short returns sc compressed in time by f (durations, phases, changes), so
// tests under -race stay fast.
func short(sc Scenario, f float64) Scenario {
	scale := func(d time.Duration) time.Duration { return time.Duration(float64(d) * f) }
	sc.Duration, sc.Warmup, sc.Change, sc.Recover = scale(sc.Duration), scale(sc.Warmup), scale(sc.Change), scale(sc.Recover)
	sc.Load = append([]Phase(nil), sc.Load...)
	for i := range sc.Load {
		sc.Load[i].At = scale(sc.Load[i].At)
	}
	sc.Server.Changes = append([]Change(nil), sc.Server.Changes...)
	for i := range sc.Server.Changes {
		sc.Server.Changes[i].At = scale(sc.Server.Changes[i].At)
	}
	return sc
}

func scenario(t testing.TB, name string) Scenario {
	t.Helper()
	s, err := FindScenarios(Scenarios(), []string{name})
	if err != nil {
		t.Fatal(err)
	}
	return s[0]
}

func policy(t *testing.T, name string) PolicySpec {
	t.Helper()
	p, err := FindPolicies(BuiltinPolicies(), []string{name})
	if err != nil {
		t.Fatal(err)
	}
	return p[0]
}

func TestSameSeedSameResultsToTheBit(t *testing.T) {
	sc := short(scenario(t, "priorities-retries"), 0.2)
	run := func(seed uint64) string {
		r, err := Run(sc, policy(t, "aimd"), seed)
		if err != nil {
			t.Fatal(err)
		}
		b, err := json.Marshal(struct {
			R *Result
			S []Point
		}{r, r.Series})
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	a, b, c := run(7), run(7), run(8)
	if a != b {
		t.Fatal("two runs with seed 7 differ")
	}
	if a == c {
		t.Fatal("seeds 7 and 8 gave identical runs")
	}
}

func TestBuiltinScenariosAreValid(t *testing.T) {
	names := map[string]bool{}
	for _, s := range Scenarios() {
		if err := s.Validate(); err != nil {
			t.Error(err)
		}
		names[s.Name] = true
	}
	for _, want := range []string{"no-harm", "step-2x", "step-5x", "ramp-3x", "capacity-drop",
		"dependency-spike", "bursts", "heavy-tail", "priorities-retries"} {
		if !names[want] {
			t.Errorf("scenario %q missing", want)
		}
	}
}

func TestInvalidScenariosAreRejected(t *testing.T) {
	good := scenario(t, "step-2x")
	tests := []struct {
		name   string
		mutate func(*Scenario)
		want   string
	}{
		{"no cores", func(s *Scenario) { s.Server.Cores = 0 }, "cores 0"},
		{"warm-up too long", func(s *Scenario) { s.Warmup = s.Duration }, "warm-up"},
		{"no load", func(s *Scenario) { s.Load = nil }, "load phases"},
		{"shares", func(s *Scenario) { s.Classes = []Class{{1, 0.5}} }, "shares sum"},
		{"priority", func(s *Scenario) { s.Classes = []Class{{9, 1}} }, "priority"},
		{"lognormal", func(s *Scenario) { s.Server.Service = LogNormal(0, 1) }, "lognormal"},
		{"bursts", func(s *Scenario) { s.Bursts = &Bursts{Load: 3, Length: time.Second, Period: time.Second} }, "bursts"},
		{"retry", func(s *Scenario) { s.Retry = Retry{Attempts: 3} }, "retry"},
		{"users", func(s *Scenario) { s.Users = -1 }, "users -1"},
	}
	for _, tt := range tests {
		s := good
		tt.mutate(&s)
		_, err := Run(s, policy(t, "none"), 1)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: error %v, want it to mention %q", tt.name, err, tt.want)
		}
	}
}

// TestBaselinesAreHonest checks that the model punishes what it should: no
// limit collapses at 5× (goodput near zero), a static limit tuned for
// nominal load holds a 2× step but breaks the SLO when capacity halves.
func TestBaselinesAreHonest(t *testing.T) {
	run := func(sc, pol string) *Result {
		r, err := Run(short(scenario(t, sc), 0.25), policy(t, pol), 1)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	if r := run("step-5x", "none"); r.PhaseGoodput > 0.05 {
		t.Errorf("none at 5×: phase goodput %.3f of capacity, want near zero", r.PhaseGoodput)
	}
	if r := run("no-harm", "none"); r.ThroughputRatio < 0.995 || r.RejectRatio != 0 {
		t.Errorf("none at ρ ≤ 0.95: throughput %.4f, rejects %.4f", r.ThroughputRatio, r.RejectRatio)
	}
	if r := run("step-2x", "static"); r.PhaseGoodput < 0.85 {
		t.Errorf("static at 2×: phase goodput %.3f, want it to hold (≥ 0.85)", r.PhaseGoodput)
	}
	if r := run("capacity-drop", "static"); r.P99ms <= r.SLOms {
		t.Errorf("static under a capacity drop: p99 %.1f ms within the %.0f ms SLO", r.P99ms, r.SLOms)
	}
}

func TestTargetsAreJudged(t *testing.T) {
	sc := short(scenario(t, "no-harm"), 0.2)
	sc.Targets = []Target{AtLeast("throughput_ratio", 0.9), AtMost("p99_ms", 0.001), AtLeast("no_such_metric", 0)}
	r, err := Run(sc, policy(t, "none"), 1)
	if err != nil {
		t.Fatal(err)
	}
	got := []bool{r.Targets[0].Pass, r.Targets[1].Pass, r.Targets[2].Pass}
	if got[0] != true || got[1] != false || got[2] != false || r.Pass {
		t.Fatalf("verdicts %v (pass %v), want [true false false] and overall fail", got, r.Pass)
	}
}

// BenchmarkSimulatedRequests reports simulated requests per second of wall
// time (target: at least 1M on one core).
func BenchmarkSimulatedRequests(b *testing.B) {
	sc := short(Scenarios()[2], 0.2) // step-5x
	pol := BuiltinPolicies()[1]      // static
	var n int64
	for b.Loop() {
		r, err := Run(sc, pol, 1)
		if err != nil {
			b.Fatal(err)
		}
		n += r.Requests
	}
	b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "req/s")
}

func TestJainOverUsers(t *testing.T) {
	// Nothing refused: every user succeeds as often as any other.
	r, err := Run(short(scenario(t, "no-harm"), 0.2), policy(t, "none"), 1)
	if err != nil {
		t.Fatal(err)
	}
	if r.Jain < 0.999 {
		t.Fatalf("Jain %.4f with nothing refused", r.Jain)
	}
	// Under a 5× surge a limiter refuses users at random, unevenly but not
	// by design: Jain stays high; the collapse of no limit fails everyone.
	r, err = Run(short(scenario(t, "step-5x"), 0.2), policy(t, "static"), 1)
	if err != nil {
		t.Fatal(err)
	}
	if r.Jain < 0.9 || r.Jain >= 1 {
		t.Fatalf("Jain %.4f under a surge", r.Jain)
	}
}

// TestGradientSurvivesAnEarlyCapacityDrop is a regression test: when
// capacity halved two seconds after start-up, the gradient gate used to take
// a lucky window for the service's own RTT and shrink its limit to almost
// nothing (phase goodput under 15%). It must seek the knee instead.
func TestGradientSurvivesAnEarlyCapacityDrop(t *testing.T) {
	sc := short(scenario(t, "capacity-drop"), 0.1)
	for seed := uint64(1); seed <= 5; seed++ {
		r, err := Run(sc, policy(t, "gradient"), seed)
		if err != nil {
			t.Fatal(err)
		}
		if r.PhaseGoodput < 0.3 {
			t.Errorf("seed %d: phase goodput %.3f of nominal capacity (the halved capacity is 0.5)", seed, r.PhaseGoodput)
		}
	}
}

// The gate policies take the server's memory bound as their maximum limit,
// as an operator would: in dependency-spike the slow path's requests would
// fill more than the 1,000 slots the server has, and a limit that grows
// with the flat RTT (the gradient's dead-band probe) used to run past it,
// so that the server failed requests the gate had admitted.
func TestGatesStayUnderTheServersBound(t *testing.T) {
	sc := short(scenario(t, "dependency-spike"), 0.3)
	for _, name := range []string{"gradient", "vegas", "aimd"} {
		r, err := Run(sc, policy(t, name), 1)
		if err != nil {
			t.Fatal(err)
		}
		if r.CapHits != 0 {
			t.Errorf("%s: the server's bound was hit %d times", name, r.CapHits)
		}
	}
}
