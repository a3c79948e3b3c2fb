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
