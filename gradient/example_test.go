package gradient_test

import (
	"fmt"
	"time"

	"github.com/sluicehq/sluice/adaptive"
	"github.com/sluicehq/sluice/gradient"
)

// The gate enforces, Gradient learns. WithMaxRTT ties the limit to a latency
// objective (here a 50ms p99 on exponential-like service: about SLO/5 on the
// mean).
func Example() {
	lim, err := adaptive.New(
		gradient.New(gradient.WithMaxRTT(10*time.Millisecond)),
		adaptive.WithMaxLimit(1000))
	if err != nil {
		panic(err)
	}
	tok, ok := lim.TryAcquire()
	fmt.Println(ok, lim.Limit())
	tok.Success()
	// Output: true 20
}
