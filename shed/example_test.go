package shed_test

import (
	"fmt"
	"time"

	"github.com/sluicehq/sluice/adaptive"
	"github.com/sluicehq/sluice/clock"
	"github.com/sluicehq/sluice/gradient"
	"github.com/sluicehq/sluice/shed"
)

// A shedder in front of the gate refuses low-priority work first; the
// decision says whether it was shed and when to come back.
func Example() {
	c := clock.NewManual(time.Unix(0, 0))
	gate, err := adaptive.New(adaptive.Fixed(2), adaptive.WithClock(c))
	if err != nil {
		panic(err)
	}
	s, err := shed.New(gate, shed.WithReserve(0.5), shed.WithClock(c))
	if err != nil {
		panic(err)
	}
	// Critical work comes and goes: from the next interval on, half the
	// gate is kept for it.
	crit, _ := s.TryAcquire(shed.CriticalPlus, 1)
	crit.Success()
	c.Advance(100 * time.Millisecond)

	tok, d := s.TryAcquire(shed.Sheddable, 42)
	fmt.Println("sheddable:", d.Admitted)
	_, d = s.TryAcquire(shed.Sheddable, 43) // the other half is reserved
	fmt.Println("sheddable again:", d.Admitted, "shed:", d.Shed)
	crit, d = s.TryAcquire(shed.CriticalPlus, 44)
	fmt.Println("critical-plus:", d.Admitted)
	tok.Success()
	crit.Success()
	// Output:
	// sheddable: true
	// sheddable again: false shed: true
	// critical-plus: true
}

// A shedder that also watches the Go scheduler: when runnable goroutines
// wait more than 5 ms for a CPU (p99 over the last interval), the process is
// out of CPU and the lowest priorities are shed before the gate even fills.
// A gate full of requests waiting on a slow dependency does not trigger it.
func ExampleSchedulerLatency() {
	gate, err := adaptive.New(gradient.New())
	if err != nil {
		panic(err)
	}
	sat, err := shed.SchedulerLatency(0.99, 5*time.Millisecond)
	if err != nil {
		panic(err)
	}
	s, err := shed.New(gate, shed.WithSaturation(sat))
	fmt.Println(err == nil, s.Cutoff() == shed.Levels())
	// Output: true true
}

// A user id hashed once per request gives the shedder the user's cohort:
// when the shedder must refuse some sheddable work, it refuses whole users
// (the same ones in every replica) rather than half of everyone's requests.
func ExampleUserHash() {
	gate, err := adaptive.New(adaptive.Fixed(10))
	if err != nil {
		panic(err)
	}
	shedder, err := shed.New(gate)
	if err != nil {
		panic(err)
	}
	user := shed.UserHash("account:4711")
	fmt.Println(user == shed.UserHash("account:4711"))
	tok, d := shedder.TryAcquire(shed.Sheddable, user)
	fmt.Println(d.Admitted)
	tok.Success()
	// Output:
	// true
	// true
}
