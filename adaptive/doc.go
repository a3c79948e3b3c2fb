// Package adaptive is sluice's adaptive concurrency gate: it admits at most
// Limit() requests at once and lets an Algorithm learn that limit from the
// latency and drops it measures, so a process serves what it can and refuses
// the rest quickly instead of queueing itself to death.
//
// The gate (Limiter) does the enforcing: exact admission, per-window
// measurement, an optional bounded wait queue (FIFO, LIFO or CoDel-style
// adaptive LIFO), optional partitions with guaranteed shares, and a front
// limit on the queue in front of it: in a Go process out of CPU, requests
// wait as runnable goroutines before they reach any middleware, where no
// round-trip time can see them, so on a real clock the gate also reads the
// Go run queue and refuses while it is too long (WithFrontSignal). Algorithms do
// the learning: Fixed and AIMD live here; Vegas and Gradient live in the
// packages vegas and gradient.
//
// What every algorithm needs to know about the service is measured once, by
// the gate, and handed to it in each Sample: the throughput, the floor (the
// round-trip time at low concurrency, learnt only from windows in which the
// gate was not saturated and from probes) and the knee, their product. For
// an algorithm that moves the limit on the floor (a FloorProber), the gate
// also probes it while saturated: it lowers the limit step by step until the
// throughput falls, which costs at most one level below the knee; during a
// probe the algorithm is told (Sample.Probing) and its proposals wait.
// Limiter.Floor and Limiter.Throughput read the model for metrics.
//
// Typical use:
//
//	lim, err := adaptive.New(adaptive.NewAIMD(), adaptive.WithMaxLimit(1000))
//	...
//	tok, ok := lim.TryAcquire()
//	if !ok {
//		// refuse: 503, UNAVAILABLE, ...
//	}
//	err := handle(req)
//	if isOverload(err) {
//		tok.Dropped()
//	} else {
//		tok.Success()
//	}
package adaptive
