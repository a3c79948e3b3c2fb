package shed

import (
	"fmt"
	"time"

	"github.com/sluicehq/sluice/adaptive"
)

// SchedulerLatency returns a saturation signal for WithSaturation that
// reads the Go scheduler's latency (adaptive.SchedulerLatency, the same
// measurement a gate's front limit learns from): the process is saturated
// when, since the previous call, the q-quantile of the time runnable
// goroutines waited for a CPU exceeded threshold (for example q = 0.99 and
// a few milliseconds). A process waiting on a slow dependency has idle CPUs
// and a low scheduler latency; one out of CPU has goroutines queueing for
// it. It returns an error for q outside (0, 1) or a threshold that is not
// positive.
//
// Each call reads one runtime histogram (about half a microsecond); the
// signal is safe for concurrent use.
func SchedulerLatency(q float64, threshold time.Duration) (func() bool, error) {
	if !(q > 0 && q < 1) || threshold <= 0 {
		return nil, fmt.Errorf("sluice/shed: SchedulerLatency(%v, %v): want a quantile in (0, 1) and a positive threshold", q, threshold)
	}
	l := adaptive.NewSchedulerLatency()
	return func() bool { return l.Exceeds(q, threshold) }, nil
}
