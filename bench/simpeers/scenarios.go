package simpeers

import (
	"fmt"
	"slices"
	"time"

	"github.com/sluicehq/sluice/sim"
)

// Shorten returns a copy of sc whose timeline is divided by factor: the
// duration, warm-up, load phases, server changes and the Change and Recover
// marks. Everything that describes the server and its clients stays: service
// and wait times, SLO, deadline, retry backoffs, bursts and the metrics
// interval. The shape (warm-up, step, hold, step down) is kept; only the
// time the policy has to reach and hold its steady state shrinks. The name
// gets a suffix "/<factor>".
func Shorten(sc sim.Scenario, factor float64) sim.Scenario {
	d := func(x time.Duration) time.Duration { return time.Duration(float64(x) / factor) }
	s := sc
	s.Name = fmt.Sprintf("%s/%g", sc.Name, factor)
	s.Description = fmt.Sprintf("%s (timeline shortened %g×)", sc.Description, factor)
	s.Duration, s.Warmup, s.Change, s.Recover = d(sc.Duration), d(sc.Warmup), d(sc.Change), d(sc.Recover)
	s.Load = slices.Clone(sc.Load)
	for i := range s.Load {
		s.Load[i].At = d(s.Load[i].At)
	}
	s.Server.Changes = slices.Clone(sc.Server.Changes)
	for i := range s.Server.Changes {
		s.Server.Changes[i].At = d(s.Server.Changes[i].At)
	}
	s.Targets = slices.Clone(sc.Targets)
	s.Classes = slices.Clone(sc.Classes)
	return s
}

// RealtimeNames are the built-in scenarios of the real-time comparison.
var RealtimeNames = []string{"no-harm", "step-2x", "step-5x", "capacity-drop", "heavy-tail"}

// RealtimeScenarios returns the scenarios of the real-time comparison: the
// built-in RealtimeNames, each shortened by factor.
func RealtimeScenarios(factor float64) ([]sim.Scenario, error) {
	scs, err := sim.FindScenarios(sim.Scenarios(), RealtimeNames)
	if err != nil {
		return nil, err
	}
	for i := range scs {
		scs[i] = Shorten(scs[i], factor)
	}
	return scs, nil
}

// FourCoreServer is the nominal server of the built-in scenarios with 4
// cores instead of 16: exponential 5 ms of CPU per request (capacity 800
// rps), contention κ = 0.0002, rejections costing 2% of a request, memory
// for 5,000 requests in flight. SLO 50 ms, clients give up at 100 ms.
func FourCoreServer() sim.Server {
	return sim.Server{Cores: 4, Service: sim.Exp(5 * time.Millisecond), Contention: 0.0002, RejectCost: 0.02, MaxInFlight: 5000}
}

// FourCore returns the two scenarios that check the claim about the
// classic formulas on a small server:
//
//   - 4core-rho-0.7: a steady ρ = 0.7 for 100 s (after 10 s of warm-up): a
//     limiter must stay out of the way (rejects ≤ 0.1%, p99 ≤ SLO);
//   - 4core-step-3x: 0.5× capacity for 20 s, 3× for 60 s, then 0.5×, with
//     the targets of the built-in steps (phase goodput ≥ 90% of capacity,
//     p99 ≤ SLO, settling ≤ 10 intervals, worst interval p99 ≤ 3 SLO, no
//     rejections 2 s after the surge).
func FourCore() []sim.Scenario {
	return []sim.Scenario{
		{
			Name:        "4core-rho-0.7",
			Description: "4-core server at ρ = 0.7 for 100 s: a limiter must stay out of the way",
			Duration:    110 * time.Second, Warmup: 10 * time.Second,
			Server: FourCoreServer(),
			Load:   []sim.Phase{{At: 0, Load: 0.7}},
			Targets: []sim.Target{
				sim.AtMost("reject_ratio", 0.001),
				sim.AtLeast("throughput_ratio", 0.995),
				sim.AtMost("p99_over_slo", 1),
			},
		},
		{
			Name:        "4core-step-3x",
			Description: "4-core server: load steps from 0.5× to 3× capacity for 60 s, then back",
			Duration:    100 * time.Second, Warmup: 10 * time.Second,
			Server: FourCoreServer(),
			Load:   []sim.Phase{{At: 0, Load: 0.5}, {At: 20 * time.Second, Load: 3}, {At: 80 * time.Second, Load: 0.5}},
			Change: 20 * time.Second, Recover: 82 * time.Second,
			Targets: []sim.Target{
				sim.AtLeast("phase_goodput_ratio", 0.90),
				sim.AtMost("p99_over_slo", 1),
				sim.AtMost("settle_intervals", 10),
				sim.AtMost("peak_p99_over_slo", 3),
				sim.AtMost("late_reject_ratio", 0),
			},
		},
	}
}
