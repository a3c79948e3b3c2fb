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

// A Coarse clock for limiters that decide very often: readings are at most
// about a millisecond old and cost one atomic load.
func ExampleNewCoarse() {
	c, err := clock.NewCoarse(time.Millisecond)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer c.Stop()
	start := c.Now()
	fmt.Println(c.Since(start) >= 0, c.Resolution())
	// Output: true 1ms
}
