package sim_test

import (
	"fmt"
	"time"

	"github.com/sluicehq/sluice/sim"
)

// Run replays a scenario in virtual time against a policy built on the real
// gate; the same seed always gives the same numbers.
func ExampleRun() {
	sc := sim.Scenario{
		Name:     "surge",
		Duration: 20 * time.Second, Warmup: 5 * time.Second,
		Server: sim.Server{Cores: 4, Service: sim.Exp(10 * time.Millisecond), Contention: 0.0002},
		Load:   []sim.Phase{{At: 0, Load: 0.5}, {At: 10 * time.Second, Load: 3}},
	}
	for _, name := range []string{"none", "static"} {
		pol, _ := sim.FindPolicies(sim.BuiltinPolicies(), []string{name})
		r, err := sim.Run(sc, pol[0], 1)
		if err != nil {
			panic(err)
		}
		fmt.Printf("%-6s goodput %3.0f%% of capacity, rejected %2.0f%%\n", name, 100*r.GoodputRatio, 100*r.RejectRatio)
	}
	// Output:
	// none   goodput  19% of capacity, rejected  0%
	// static goodput  80% of capacity, rejected 62%
}

// RunMatrix runs incident scenarios on cells of the server zoo and judges
// each policy on the worst of its seeds, against targets relaxed to what
// the best fixed limit reaches where even it misses them. (Not run as a
// test: the sweeps for the best fixed limits take a few seconds.)
func ExampleRunMatrix() {
	models, _ := sim.FindZooModels([]string{"ps", "fifo"})
	pols, _ := sim.FindPolicies(sim.BuiltinPolicies(), []string{"static", "gradient", "vegas"})
	m, err := sim.RunMatrix(sim.MatrixConfig{
		Models: models, Cores: []int{1, 16}, Dists: sim.ZooDists()[:1],
		Scenarios: []string{"steady-2x", "no-harm-0.7"}, Policies: pols, Seeds: 3,
	})
	if err != nil {
		panic(err)
	}
	for _, r := range m.Rows {
		fmt.Printf("%s/%d/%s/%s: best fixed limit %d", r.Model, r.Cores, r.Dist, r.Scenario, r.Best.Limit)
		for _, v := range r.Policies {
			fmt.Printf(", %s %v", v.Policy, v.Pass)
		}
		fmt.Println()
	}
	for _, s := range m.Summary() {
		fmt.Printf("%s: %d/%d rows pass\n", s.Policy, s.Passed, s.Rows)
	}
}

// RunGrid runs scenarios under policies for several seeds in parallel;
// the Grid is the same whatever the parallelism.
func ExampleRunGrid() {
	sc := sim.Scenario{
		Name:     "surge",
		Duration: 20 * time.Second, Warmup: 5 * time.Second,
		Server: sim.Server{Cores: 4, Service: sim.Exp(10 * time.Millisecond), Contention: 0.0002},
		Load:   []sim.Phase{{At: 0, Load: 0.5}, {At: 10 * time.Second, Load: 3}},
	}
	pols, _ := sim.FindPolicies(sim.BuiltinPolicies(), []string{"none", "static"})
	g := sim.RunGrid([]sim.Scenario{sc}, pols, 1, 2, nil)
	for k := range g.Results {
		for j, p := range g.Policies {
			r := g.Results[k][0][j]
			fmt.Printf("seed %d %-6s goodput %3.0f%% of capacity\n", g.Seed+uint64(k), p.Name, 100*r.GoodputRatio)
		}
	}
	// Output:
	// seed 1 none   goodput  19% of capacity
	// seed 1 static goodput  80% of capacity
	// seed 2 none   goodput  19% of capacity
	// seed 2 static goodput  80% of capacity
}

// A scenario's events are the moments a report marks: here a ramp, the
// moment settling is measured from, and a slower dependency.
func ExampleScenario_Events() {
	sc := sim.Scenario{
		Load: []sim.Phase{{At: 0, Load: 0.5}, {At: 10 * time.Second, Load: 0.5}, {At: 20 * time.Second, Load: 3, Ramp: true}},
		Server: sim.Server{Changes: []sim.Change{
			{At: 30 * time.Second, ServiceFactor: 1, WaitFactor: 4},
		}},
		Change: 10 * time.Second,
	}
	for _, e := range sc.Events() {
		fmt.Printf("%v: %s (%s)\n", e.At, e.Label, e.Description)
	}
	// Output:
	// 10s: ramp to 3× (the offered load starts ramping from 0.5× to 3× capacity)
	// 20s: 3× reached (the ramp reaches 3× capacity and the load holds)
	// 30s: wait ×4 (the dependency wait is multiplied by 4)
}
