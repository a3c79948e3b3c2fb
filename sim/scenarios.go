package sim

import (
	"fmt"
	"time"
)

// nominal is the server of most scenarios: 16 cores, exponential 5 ms of CPU
// per request (capacity 3,200 rps), contention κ = 0.0002 (the unbounded server stays stable at ρ = 0.95 and runs at half speed with 5,000 in flight), rejections costing
// 2% of a request, memory for 5,000 requests in flight. SLO = 10·E[S] = 50ms;
// clients give up at 2·SLO.
func nominal() Server {
	return Server{Cores: 16, Service: Exp(5 * time.Millisecond), Contention: 0.0002, RejectCost: 0.02, MaxInFlight: 5000}
}

func steps(loads ...float64) []Phase {
	var ph []Phase
	at := time.Duration(0)
	for i := 0; i < len(loads); i += 2 {
		ph = append(ph, Phase{At: at, Load: loads[i]})
		if i+1 < len(loads) {
			at += time.Duration(loads[i+1] * float64(time.Second))
		}
	}
	return ph
}

func step(name string, factor, goodput float64) Scenario {
	return Scenario{
		Name:        name,
		Description: fmt.Sprintf("load steps from 0.5× to %g× capacity for 60 s, then back", factor),
		Duration:    100 * time.Second, Warmup: 10 * time.Second,
		Server: nominal(),
		Load:   steps(0.5, 20, factor, 60, 0.5),
		Change: 20 * time.Second, Recover: 82 * time.Second,
		Targets: []Target{
			AtLeast("phase_goodput_ratio", goodput),
			AtMost("p99_over_slo", 1),
			AtMost("settle_intervals", 10),
			AtMost("peak_p99_over_slo", 3),
			AtMost("late_reject_ratio", 0),
		},
	}
}

// BurstsMargin is how much more than the least possible share of
// requests (Result.LossBound) a policy may refuse or serve late in a
// bursts scenario.
const BurstsMargin = 0.05

// Scenarios returns the built-in scenarios, after the evaluation plan in
// prior-art-shedding.md §4.
func Scenarios() []Scenario {
	depServer := Server{Cores: 16, Service: Exp(time.Millisecond), Wait: Const(9 * time.Millisecond),
		Contention: 0.0002, RejectCost: 0.02, MaxInFlight: 1000,
		Changes: []Change{{At: 20 * time.Second, ServiceFactor: 1, WaitFactor: 200.0 / 9, WaitPriorities: []int{3}},
			{At: 80 * time.Second, ServiceFactor: 1, WaitFactor: 1}}}
	heavy := nominal()
	heavy.Service = TwoPoint(time.Millisecond, 100*time.Millisecond, 0.005)
	return []Scenario{
		{
			Name:        "no-harm",
			Description: "ρ = 0.5, 0.8, 0.95 for 40 s each: a limiter must stay out of the way",
			Duration:    130 * time.Second, Warmup: 10 * time.Second,
			Server: nominal(),
			Load:   steps(0.5, 50, 0.8, 40, 0.95),
			Targets: []Target{
				// 0.1% at ρ 0.5 and 0.8, 1% at 0.95, weighted by load.
				AtMost("reject_ratio", 0.0048),
				AtLeast("throughput_ratio", 0.995),
				AtMost("p99_over_slo", 1),
			},
		},
		step("step-2x", 2, 0.95),
		step("step-5x", 5, 0.90),
		{
			Name:        "ramp-3x",
			Description: "load ramps from 0.2× to 3× capacity over 120 s, then holds for 30 s",
			Duration:    160 * time.Second, Warmup: 10 * time.Second,
			Server: nominal(),
			Load:   []Phase{{At: 0, Load: 0.2}, {At: 10 * time.Second, Load: 0.2}, {At: 130 * time.Second, Load: 3, Ramp: true}},
			Change: 130 * time.Second,
			Targets: []Target{
				AtLeast("served_ratio", 0.95),
				AtLeast("phase_goodput_ratio", 0.95),
				AtMost("limit_cov", 0.10),
				AtMost("p99_over_slo", 1),
				// Shedding starts within ±5% of capacity.
				AtLeast("shed_start_load", 0.95),
				AtMost("shed_start_load", 1.05),
			},
		},
		{
			Name:        "capacity-drop",
			Description: "at 0.8× nominal load, service time doubles for 60 s (capacity halves), then recovers",
			Duration:    100 * time.Second, Warmup: 10 * time.Second,
			Server: func() Server {
				s := nominal()
				s.Changes = []Change{{At: 20 * time.Second, ServiceFactor: 2}, {At: 80 * time.Second, ServiceFactor: 1}}
				return s
			}(),
			Load:   steps(0.8, 20, 0.8, 60, 0.8),
			Change: 20 * time.Second, Recover: 85 * time.Second,
			Targets: []Target{
				AtLeast("phase_goodput_ratio", 0.45), // 90% of the halved capacity
				AtMost("p99_over_slo", 1),
				AtMost("late_reject_ratio", 0.01),
				// The limit within ±20% of the new optimum (the core count
				// in this model) within 2 s.
				AtMost("limit_reach_s", 2),
			},
		},
		{
			Name:        "dependency-spike",
			Description: "1 ms CPU + 9 ms dependency wait; the low-priority path's wait spikes to 200 ms for 60 s",
			Duration:    100 * time.Second, Warmup: 10 * time.Second,
			Server:  depServer,
			Load:    steps(0.7),
			Classes: []Class{{Priority: 1, Share: 0.5}, {Priority: 3, Share: 0.5}},
			Change:  20 * time.Second,
			Targets: []Target{
				AtLeast("p1_success", 0.999),
				AtMost("p99_over_slo", 1),
				AtMost("cap_hits", 0),
			},
		},
		{
			Name:        "bursts",
			Description: "mean 0.7× capacity: the rate triples in bursts of 100 ms about every second (MMPP)",
			Duration:    70 * time.Second, Warmup: 10 * time.Second,
			Server: nominal(),
			// Base b and bursts of 3b for a tenth of the time: 0.9b + 0.3b = 0.7.
			Load:   steps(0.7 / 1.2),
			Bursts: &Bursts{Load: 3 * 0.7 / 1.2, Length: 100 * time.Millisecond, Period: time.Second},
			// Bursts overload the server for a while (1.75× during a
			// burst): some requests must be refused or served late,
			// whatever the policy. loss_bound is the least share on the
			// run's own arrivals (a fluid bound, see fluidBound); it
			// ignores service-time variance and that a request runs on
			// one core, so the best fixed limit loses 4.1–4.7 points more
			// than it here (seeds 1–5, limits 16–200). The margin over the
			// bound is 5 points.
			Targets: []Target{
				AtMost("loss_over_bound", BurstsMargin),
				AtMost("p99_over_slo", 1),
			},
		},
		{
			Name:        "heavy-tail",
			Description: "bimodal service (99.5% 1 ms, 0.5% 100 ms) at 1.5× capacity",
			Duration:    70 * time.Second, Warmup: 10 * time.Second,
			Server: heavy,
			Load:   steps(0.5, 10, 1.5),
			Change: 10 * time.Second,
			Targets: []Target{
				AtLeast("phase_goodput_ratio", 0.90),
				AtMost("limit_cov", 0.15),
			},
		},
		{
			Name:        "priorities-retries",
			Description: "4 priority classes (10/20/30/40%) at 3× capacity for 60 s; clients retry 3 times with backoff, a 10% budget and adaptive throttling",
			Duration:    100 * time.Second, Warmup: 10 * time.Second,
			Server:  nominal(),
			Load:    steps(0.5, 20, 3, 60, 0.5),
			Classes: []Class{{0, 0.1}, {1, 0.2}, {2, 0.3}, {3, 0.4}},
			Retry:   Retry{Attempts: 4, Backoff: 50 * time.Millisecond, MaxBackoff: time.Second, Budget: 0.1, Throttle: 2},
			Change:  20 * time.Second, Recover: 85 * time.Second,
			Targets: []Target{
				AtLeast("p0_success", 0.999),
				AtLeast("p1_success", 0.99),
				AtMost("inversion_ratio", 0.001),
				AtLeast("jain", 0.95),
				AtMost("retry_amplification", 1.1),
				AtMost("late_reject_ratio", 0.01),
			},
		},
	}
}

// FindScenarios returns the named scenarios from all, in the order named.
func FindScenarios(all []Scenario, names []string) ([]Scenario, error) {
	return findByName(all, names, func(x Scenario) string { return x.Name }, "scenario")
}
