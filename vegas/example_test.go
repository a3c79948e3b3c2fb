package vegas_test

import (
	"fmt"

	"github.com/sluicehq/sluice/adaptive"
	"github.com/sluicehq/sluice/vegas"
)

// Vegas with thresholds proportional to the limit keeps the queue between a
// quarter and a half of the limit (RTT between 1.33 and 2 times no-load).
func Example() {
	lim, err := adaptive.New(vegas.New(vegas.WithProportional(0.25, 0.5)), adaptive.WithMaxLimit(1000))
	if err != nil {
		panic(err)
	}
	fmt.Println(lim.Limit(), vegas.Queue(40, 5, 10))
	// Output: 20 20
}
