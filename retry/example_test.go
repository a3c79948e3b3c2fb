package retry_test

import (
	"fmt"
	"time"

	"github.com/sluicehq/sluice/clock"
	"github.com/sluicehq/sluice/retry"
	"github.com/sluicehq/sluice/shed"
)

// A client's retry loop: the throttle decides whether to send at all, the
// budget whether a refused request may be retried, the backoff how long to
// wait first. Four requests go through at once and earn a retry between
// them; the fifth is refused once and retried after the backoff.
func Example() {
	c := clock.NewManual(time.Unix(0, 0))
	throttle, err := retry.NewThrottle[shed.Priority](retry.WithThrottleClock(c), retry.WithThrottleSeed(1))
	if err != nil {
		panic(err)
	}
	budget, err := retry.NewBudget(0.25, 10) // retries at most a quarter of requests
	if err != nil {
		panic(err)
	}
	backoff := retry.Backoff{Base: 100 * time.Millisecond, Max: 2 * time.Second}

	serverRefuses := func(req, attempt int) bool { return req == 4 && attempt == 1 }
	for req := range 5 {
		if !throttle.Allow(shed.Critical) {
			fmt.Println("request", req, "refused locally")
			continue
		}
		budget.Request()
		for attempt := 1; ; attempt++ {
			if !serverRefuses(req, attempt) {
				throttle.Accepted(shed.Critical)
				fmt.Println("request", req, "accepted on attempt", attempt)
				break
			}
			if !budget.TryRetry() {
				fmt.Println("request", req, "refused; no retry in the budget")
				break
			}
			d := backoff.Delay(attempt, 0, 0.5)
			fmt.Println("request", req, "refused; retry in", d)
			c.Advance(d)
		}
	}
	// Output:
	// request 0 accepted on attempt 1
	// request 1 accepted on attempt 1
	// request 2 accepted on attempt 1
	// request 3 accepted on attempt 1
	// request 4 refused; retry in 50ms
	// request 4 accepted on attempt 2
}

// Once the server refuses most of what a client sends, the throttle refuses
// locally: here after 100 refusals in a row, almost every request.
func ExampleThrottle() {
	c := clock.NewManual(time.Unix(0, 0))
	th, err := retry.NewThrottle[shed.Priority](retry.WithThrottleClock(c), retry.WithThrottleSeed(1))
	if err != nil {
		panic(err)
	}
	for range 100 {
		th.Allow(shed.Sheddable) // sent, and refused by the server: never Accepted
	}
	fmt.Printf("sheddable: refuse %.2f of requests locally\n", th.RejectProbability(shed.Sheddable))
	fmt.Printf("critical: refuse %.2f\n", th.RejectProbability(shed.Critical))
	// Output:
	// sheddable: refuse 0.99 of requests locally
	// critical: refuse 0.00
}

// A budget of 25% lets one retry through per four first attempts.
func ExampleBudget() {
	b, err := retry.NewBudget(0.25, 10)
	if err != nil {
		panic(err)
	}
	fmt.Println("retry before any request:", b.TryRetry())
	for range 4 {
		b.Request()
	}
	fmt.Println("retry after four requests:", b.TryRetry())
	fmt.Println("and another:", b.TryRetry())
	// Output:
	// retry before any request: false
	// retry after four requests: true
	// and another: false
}

// Attempt k waits a uniform share u of min(Max, Base·2^(k−1)), but never
// less than the server asked for.
func ExampleBackoff_Delay() {
	b := retry.Backoff{Base: 100 * time.Millisecond, Max: time.Second}
	for k := 1; k <= 5; k++ {
		fmt.Println(k, b.Delay(k, 0, 0.5))
	}
	fmt.Println("server asks for 3s:", b.Delay(1, 3*time.Second, 0.5))
	// Output:
	// 1 50ms
	// 2 100ms
	// 3 200ms
	// 4 400ms
	// 5 500ms
	// server asks for 3s: 3s
}
