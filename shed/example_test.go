package shed_test

import (
	"fmt"

	"github.com/sluicehq/sluice/adaptive"
	"github.com/sluicehq/sluice/shed"
)

// A shedder in front of the gate refuses low-priority work first; the
// decision says whether it was shed and when to come back.
func Example() {
	gate, _ := adaptive.New(adaptive.Fixed(2))
	s, err := shed.New(gate, shed.WithReserve(0.5))
	if err != nil {
		panic(err)
	}
	tok, d := s.TryAcquire(shed.Sheddable, 42)
	fmt.Println("sheddable:", d.Admitted)
	_, d = s.TryAcquire(shed.Sheddable, 43) // the other half is reserved
	fmt.Println("sheddable again:", d.Admitted, "shed:", d.Shed)
	crit, d := s.TryAcquire(shed.CriticalPlus, 44)
	fmt.Println("critical-plus:", d.Admitted)
	tok.Success()
	crit.Success()
	// Output:
	// sheddable: true
	// sheddable again: false shed: true
	// critical-plus: true
}
