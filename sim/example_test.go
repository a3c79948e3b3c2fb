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
