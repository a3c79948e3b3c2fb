package clock_test

import (
	"fmt"
	"time"

	"github.com/sluicehq/sluice/clock"
)

// A Manual clock makes time-dependent code deterministic: it moves only when
// the test says so.
func ExampleManual() {
	c := clock.NewManual(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	start := c.Now()
	c.Advance(250 * time.Millisecond)
	fmt.Println(clock.Since(c, start))
	// Output: 250ms
}
