package shed

import (
	"fmt"
	"runtime/metrics"
	"sync"
	"time"
)

// schedLatencies is the runtime metric of how long goroutines waited to
// run after becoming runnable.
const schedLatencies = "/sched/latencies:seconds"

// SchedulerLatency returns a saturation signal for WithSaturation that
// reads the Go scheduler's latency from runtime/metrics: the process is
// saturated when, since the previous call, the q-quantile of the time
// runnable goroutines waited for a CPU exceeded threshold (for example
// q = 0.99 and a few milliseconds). A process waiting on a slow dependency
// has idle CPUs and a low scheduler latency; one out of CPU has goroutines
// queueing for it. It returns an error for q outside (0, 1) or a threshold
// that is not positive.
//
// Each call reads one runtime histogram (a few microseconds); the signal is
// safe for concurrent use.
func SchedulerLatency(q float64, threshold time.Duration) (func() bool, error) {
	if !(q > 0 && q < 1) || threshold <= 0 {
		return nil, fmt.Errorf("sluice/shed: SchedulerLatency(%v, %v): want a quantile in (0, 1) and a positive threshold", q, threshold)
	}
	l := &schedLatency{q: q, threshold: threshold.Seconds()}
	l.sample[0].Name = schedLatencies
	return l.saturated, nil
}

type schedLatency struct {
	mu        sync.Mutex
	q         float64
	threshold float64 // seconds
	sample    [1]metrics.Sample
	prev      []uint64
}

func (l *schedLatency) saturated() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	metrics.Read(l.sample[:])
	if l.sample[0].Value.Kind() != metrics.KindFloat64Histogram {
		return false // not supported by this runtime
	}
	h := l.sample[0].Value.Float64Histogram()
	return l.exceeds(h.Counts, h.Buckets)
}

// exceeds updates the previous counts to counts and reports whether the
// q-quantile of the observations in between (bucket i spans buckets[i] to
// buckets[i+1]) lies above the threshold: whether more than (1 − q) of them
// fell in buckets starting at or above it.
func (l *schedLatency) exceeds(counts []uint64, buckets []float64) bool {
	if len(l.prev) != len(counts) {
		l.prev = make([]uint64, len(counts))
		copy(l.prev, counts)
		return false // the first call only sets the baseline
	}
	var total, above uint64
	for i, c := range counts {
		d := c - l.prev[i]
		l.prev[i] = c
		total += d
		if buckets[i] >= l.threshold {
			above += d
		}
	}
	return total > 0 && float64(above) > (1-l.q)*float64(total)
}
