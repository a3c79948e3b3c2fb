package metrics_test

import (
	"fmt"
	"time"

	"github.com/sluicehq/sluice/metrics"
)

// rejections counts refused acquisitions and ignores everything else.
type rejections struct {
	metrics.GateBase
	n int
}

func (r *rejections) GateDecision(d metrics.GateDecision, _ string, _ time.Duration) {
	if d != metrics.Admitted {
		r.n++
	}
}

// An observer embeds GateBase and overrides only the events it cares about.
func ExampleGateBase() {
	var o rejections
	var obs metrics.GateObserver = &o
	obs.GateDecision(metrics.Admitted, "", 0)
	obs.GateDecision(metrics.QueueFull, "batch", 0)
	obs.GateLimit(10, 12)
	fmt.Println(o.n, metrics.QueueFull)
	// Output: 1 queue_full
}

// shedCount counts shed requests per priority and ignores the rest.
type shedCount struct {
	metrics.ShedBase
	shed map[string]int
}

func (s *shedCount) ShedDecision(d metrics.ShedDecision, priority string) {
	if d == metrics.ShedRefused {
		s.shed[priority]++
	}
}

// A shedder's observer gets the decision and the priority's name, a
// bounded label; users are never reported.
func ExampleShedBase() {
	o := &shedCount{shed: map[string]int{}}
	var obs metrics.ShedObserver = o
	obs.ShedDecision(metrics.ShedRefused, "sheddable")
	obs.ShedDecision(metrics.ShedGateFull, "critical")
	obs.ShedDecision(metrics.ShedAdmitted, "critical_plus")
	fmt.Println(o.shed, metrics.ShedGateFull)
	// Output: map[sheddable:1] gate_full
}
