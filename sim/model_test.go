package sim

import (
	"math"
	"testing"
	"time"

	"github.com/sluicehq/sluice/adaptive"
)

// mm1 runs one core with exponential service at load rho and no limit.
func runModel(t *testing.T, cores int, svc Dist, rho float64, dur time.Duration) *Result {
	t.Helper()
	sc := Scenario{
		Name: "model", Duration: dur, Warmup: dur / 10,
		Server: Server{Cores: cores, Service: svc},
		Load:   []Phase{{At: 0, Load: rho}},
		SLO:    time.Hour,
	}
	r, err := Run(sc, BuiltinPolicies()[0], 42)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestMM1MeanResponseTime(t *testing.T) {
	// M/M/1-PS (same mean as FIFO): E[T] = 1/(μ−λ) = E[S]/(1−ρ).
	const es = 10 * time.Millisecond
	r := runModel(t, 1, Exp(es), 0.5, 2000*time.Second)
	want := float64(es) / (1 - 0.5) / 1e6
	mean := r.MeanMs
	if math.Abs(mean-want)/want > 0.05 {
		t.Fatalf("M/M/1 at ρ=0.5: mean response %.3f ms, want %.3f ms ±5%%", mean, want)
	}
}

func TestProcessorSharingThroughputBelowSaturation(t *testing.T) {
	// c cores, no contention, ρ = 0.7: every request completes, throughput
	// equals the offered rate, and the busy cores average c·ρ.
	r := runModel(t, 8, Exp(5*time.Millisecond), 0.7, 200*time.Second)
	if math.Abs(r.GoodputRPS-r.OfferedRPS)/r.OfferedRPS > 0.01 {
		t.Fatalf("throughput %.1f rps, offered %.1f rps", r.GoodputRPS, r.OfferedRPS)
	}
	capacity := 8 / 0.005
	if math.Abs(r.OfferedRPS-0.7*capacity)/(0.7*capacity) > 0.02 {
		t.Fatalf("offered %.1f rps, want 0.7·%.0f", r.OfferedRPS, capacity)
	}
}

func TestSaturatedServerRunsAtCapacity(t *testing.T) {
	// Far above capacity with no contention, PS throughput is c·μ: count
	// every completion (a huge SLO and deadline).
	sc := Scenario{
		Name: "sat", Duration: 40 * time.Second, Warmup: 10 * time.Second,
		Server: Server{Cores: 4, Service: Const(10 * time.Millisecond)},
		Load:   []Phase{{At: 0, Load: 1.5}},
		SLO:    time.Hour,
	}
	r, err := Run(sc, staticPolicy(64), 3)
	if err != nil {
		t.Fatal(err)
	}
	if math.Abs(r.GoodputRPS-400)/400 > 0.01 {
		t.Fatalf("saturated throughput %.1f rps, want c·μ = 400", r.GoodputRPS)
	}
}

func TestContentionCollapsesThroughput(t *testing.T) {
	// rate(n) = c/(1+κ(n−c)): with a static limit of 4c and κ = 0.05 the
	// server does c/(1+0.05·3c) of work.
	const c = 4
	sc := Scenario{
		Name: "contention", Duration: 40 * time.Second, Warmup: 10 * time.Second,
		Server: Server{Cores: c, Service: Const(10 * time.Millisecond), Contention: 0.05},
		Load:   []Phase{{At: 0, Load: 3}},
		SLO:    time.Hour,
	}
	r, err := Run(sc, staticPolicy(4*c), 3)
	if err != nil {
		t.Fatal(err)
	}
	want := 100 * c / (1 + 0.05*3*c)
	if math.Abs(r.GoodputRPS-want)/want > 0.02 {
		t.Fatalf("throughput with 4c in flight: %.1f rps, want %.1f", r.GoodputRPS, want)
	}
}

func staticPolicy(n int) PolicySpec {
	return PolicySpec{Name: "static", New: func(e Env) (Policy, error) {
		return NewGatePolicy(adaptive.Fixed(n), adaptive.WithClock(e.Clock))
	}}
}

// TestInversions: a refusal is an inversion when lower-priority work was
// admitted within a tenth of a control interval before it, and only then.
func TestInversions(t *testing.T) {
	var m metricsAcc
	m.init(&Scenario{Interval: 100 * time.Millisecond, SLO: 50 * time.Millisecond, Users: 1}, 1)
	at := func(prio int, ms int64, refused bool) {
		r := &request{prio: prio, start: ms * 1e6, counted: true}
		m.attempt(r)
		if refused {
			m.reject(r)
		}
	}
	at(2, 100, false) // admitted
	at(0, 105, true)  // refused 5 ms later: inversion
	at(3, 106, true)  // refused lower priority: never an inversion
	at(1, 111, true)  // 11 ms after the admission: not one
	at(2, 200, true)  // a refused attempt does not count as an admission
	at(0, 201, true)
	if m.inversions != 1 {
		t.Fatalf("%d inversions, want 1", m.inversions)
	}
}
