package prom_test

import (
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicehq/sluice/adaptive"
	"github.com/sluicehq/sluice/clock"
	"github.com/sluicehq/sluice/metrics/prom"
)

// Register the metrics, hand them to a gate as its observer, attach the gate
// for the gauges, and scrape.
func Example() {
	reg := prometheus.NewRegistry()
	m, err := prom.New(reg)
	if err != nil {
		panic(err)
	}
	c := clock.NewManual(time.Date(2100, 1, 1, 0, 0, 0, 0, time.UTC))
	gate, err := adaptive.New(adaptive.Fixed(2), adaptive.WithClock(c), adaptive.WithObserver(m))
	if err != nil {
		panic(err)
	}
	m.AttachGate(gate)

	a, _ := gate.TryAcquire()
	b, _ := gate.TryAcquire()
	gate.TryAcquire() // full: rejected
	c.Advance(40 * time.Millisecond)
	a.Success()

	families, err := reg.Gather()
	if err != nil {
		panic(err)
	}
	for _, f := range families {
		for _, s := range f.GetMetric() {
			switch f.GetName() {
			case "sluice_gate_limit", "sluice_gate_in_flight":
				fmt.Println(f.GetName(), s.GetGauge().GetValue())
			case "sluice_gate_decisions_total":
				if v := s.GetCounter().GetValue(); v > 0 {
					fmt.Println(f.GetName(), s.GetLabel()[0].GetValue(), v)
				}
			case "sluice_gate_rtt_seconds":
				h := s.GetHistogram()
				fmt.Println(f.GetName(), "count", h.GetSampleCount(), "sum", h.GetSampleSum())
			}
		}
	}
	b.Success()
	// Output:
	// sluice_gate_decisions_total admitted 2
	// sluice_gate_decisions_total rejected 1
	// sluice_gate_in_flight 1
	// sluice_gate_limit 2
	// sluice_gate_rtt_seconds count 1 sum 0.04
}

// Two gates on one registry: each Metrics carries a const label telling
// them apart, with the same name on both.
func ExampleWithConstLabels() {
	reg := prometheus.NewRegistry()
	api, err := prom.New(reg, prom.WithConstLabels(prometheus.Labels{"gate": "api"}))
	if err != nil {
		panic(err)
	}
	batch, err := prom.New(reg, prom.WithConstLabels(prometheus.Labels{"gate": "batch"}))
	if err != nil {
		panic(err)
	}
	_, err = prom.New(reg, prom.WithConstLabels(prometheus.Labels{"gate": "api"}))
	fmt.Println("api twice:", err != nil)
	_, _ = adaptive.New(adaptive.Fixed(100), adaptive.WithObserver(api))
	_, _ = adaptive.New(adaptive.Fixed(10), adaptive.WithObserver(batch))
	// Output: api twice: true
}
