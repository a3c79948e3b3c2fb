package gometrics_test

import (
	"context"
	"fmt"
	"time"

	gm "github.com/rcrowley/go-metrics"

	"github.com/sluicehq/sluice/adaptive"
	"github.com/sluicehq/sluice/clock"
	"github.com/sluicehq/sluice/metrics/gometrics"
	"github.com/sluicehq/sluice/ratelimit"
)

// Register the metrics, hand them to a gate and a rate limiter as their
// observer, attach the gate for the gauges, and read the registry.
func Example() {
	reg := gm.NewRegistry()
	m, err := gometrics.New(reg)
	if err != nil {
		panic(err)
	}
	c := clock.NewManual(time.Date(2100, 1, 1, 0, 0, 0, 0, time.UTC))
	gate, err := adaptive.New(adaptive.Fixed(2), adaptive.WithClock(c), adaptive.WithObserver(m))
	if err != nil {
		panic(err)
	}
	m.AttachGate(gate)
	perIP, err := ratelimit.New(ratelimit.TokenBucket, ratelimit.Limit{Rate: 1, Period: time.Second},
		ratelimit.WithClock(c), ratelimit.WithName("per_ip"), ratelimit.WithObserver(m))
	if err != nil {
		panic(err)
	}

	a, _ := gate.TryAcquire()
	b, _ := gate.TryAcquire()
	gate.TryAcquire() // full: rejected
	c.Advance(40 * time.Millisecond)
	a.Success()
	perIP.Allow(context.Background(), "10.0.0.1")
	perIP.Allow(context.Background(), "10.0.0.1") // refused

	fmt.Println("in flight:", reg.Get("sluice.gate.in_flight").(gm.Gauge).Value())
	fmt.Println("rejected:", reg.Get("sluice.gate.decisions._.rejected").(gm.Counter).Count())
	fmt.Println("rtt:", time.Duration(reg.Get("sluice.gate.rtt_ns").(gm.Histogram).Max()))
	fmt.Println("refused per ip:", reg.Get(m.Name("sluice.ratelimit.decisions", "per_ip", "refused")).(gm.Counter).Count())
	b.Success()
	// Output:
	// in flight: 1
	// rejected: 1
	// rtt: 40ms
	// refused per ip: 1
}
