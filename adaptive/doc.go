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
