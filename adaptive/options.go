package adaptive

import (
	"errors"
	"fmt"
	"math"
	"sort"
	"time"

	"github.com/sluicehq/sluice/clock"
	"github.com/sluicehq/sluice/metrics"
)

// An Option configures a Limiter. Options are checked together by New, which
// reports every invalid one; none is ever clamped or repaired silently.
type Option interface {
	apply(*config)
}

type optionFunc func(*config)

func (f optionFunc) apply(c *config) { f(c) }

// QueueOrder is the order in which waiting callers are admitted.
type QueueOrder uint8

const (
	// FIFO admits the caller that has waited longest: fair, but under
	// sustained overload every caller waits the full queue.
	FIFO QueueOrder = iota
	// LIFO admits the newest caller: under overload the newest requests,
	// whose clients are most likely still waiting, are served quickly and the
	// oldest time out.
	LIFO
)

// String returns "fifo" or "lifo".
func (o QueueOrder) String() string {
	switch o {
	case FIFO:
		return "fifo"
	case LIFO:
		return "lifo"
	}
	return fmt.Sprintf("QueueOrder(%d)", uint8(o))
}

// maxLimitCap is the largest limit the gate can represent.
const maxLimitCap = math.MaxInt32

// Defaults of the options; each option's doc repeats its default.
const (
	DefaultMinWindow  = 100 * time.Millisecond
	DefaultMaxWindow  = time.Second
	DefaultMinSamples = 10
)

type config struct {
	clock         clock.Clock
	minLimit      int
	maxLimit      int
	minWindow     time.Duration
	maxWindow     time.Duration
	minSamples    int
	percentile    float64
	queueCap      int
	queued        bool
	queueOrder    QueueOrder
	queueTimeout  time.Duration
	codel         bool
	codelTarget   time.Duration
	codelInterval time.Duration
	partitions    map[string]float64
	partitioned   bool
	observer      metrics.GateObserver
	nilObserver   bool
	front         FrontSignal
	frontSet      bool
}

func defaultConfig() config {
	return config{
		clock:      clock.System(),
		minLimit:   1,
		maxLimit:   maxLimitCap,
		minWindow:  DefaultMinWindow,
		maxWindow:  DefaultMaxWindow,
		minSamples: DefaultMinSamples,
	}
}

// WithClock sets the clock the gate reads for round-trip times, windows and
// queue deadlines. The default is clock.System(). The simulator and tests pass
// a *clock.Manual; on it the queue's time bounds are checked whenever the
// queue is drained (a release, a new waiter) rather than by real timers.
func WithClock(c clock.Clock) Option {
	return optionFunc(func(cfg *config) { cfg.clock = c })
}

// WithMinLimit sets the smallest limit the algorithm may choose (default 1).
// It must be at least 1: a gate with limit 0 would admit nothing and so never
// learn again.
func WithMinLimit(n int) Option {
	return optionFunc(func(cfg *config) { cfg.minLimit = n })
}

// WithMaxLimit sets the largest limit the algorithm may choose. The default is
// 2³¹−1, no practical cap; learning algorithms should be given a real one.
func WithMaxLimit(n int) Option {
	return optionFunc(func(cfg *config) { cfg.maxLimit = n })
}

// WithWindow sets the sampling window. A window closes at the first release
// after it has lasted min and holds at least WithMinSamples samples, or after
// it has lasted max and holds any sample or drop. Defaults: 100ms and 1s.
// 0 < min ≤ max is required. For an algorithm that probes the floor
// (FloorProber: gradient, vegas) on a service slower than half of min, both
// stretch to two round trips at the measured floor (Floor's mean), so that
// a window is never shorter than the requests it measures; other
// algorithms keep exactly these lengths.
func WithWindow(min, max time.Duration) Option {
	return optionFunc(func(cfg *config) { cfg.minWindow, cfg.maxWindow = min, max })
}

// WithMinSamples sets how many successful samples a window needs before it
// may close early, at its minimum length (default 10; at least 1).
func WithMinSamples(n int) Option {
	return optionFunc(func(cfg *config) { cfg.minSamples = n })
}

// WithPercentile makes Sample.RTT the p-quantile of the window's round-trip
// times (0 < p < 1, e.g. 0.9) instead of their mean. The quantile comes from a
// lock-free log-linear histogram with about 3% resolution.
func WithPercentile(p float64) Option {
	return optionFunc(func(cfg *config) { cfg.percentile = p })
}

// WithQueue lets Acquire wait for a token when the gate is full, in a queue of
// at most capacity callers admitted in the given order. Without it, Acquire
// fails at once with ErrLimitExceeded when the gate is full. A released token
// is handed to exactly one waiter.
func WithQueue(capacity int, order QueueOrder) Option {
	return optionFunc(func(cfg *config) { cfg.queueCap, cfg.queueOrder, cfg.queued = capacity, order, true })
}

// WithQueueTimeout bounds how long a caller waits in the queue; past it,
// Acquire returns ErrQueueTimeout. Zero (the default) leaves the bound to the
// caller's context (and to WithCoDel, whose bounds it can only tighten).
// Requires WithQueue.
func WithQueueTimeout(d time.Duration) Option {
	return optionFunc(func(cfg *config) { cfg.queueTimeout = d })
}

// WithCoDel makes the queue adaptive, after Facebook's CoDel-style queue:
// while the queue has been empty at some moment in the last interval, callers
// are admitted first-in first-out and may wait up to interval; once it has
// not drained for a whole interval (a standing queue: overload), callers are
// admitted last-in first-out and anyone who has waited longer than target is
// turned away with ErrQueueTimeout. Typical values: 5ms and 100ms.
// Requires WithQueue (whose order it replaces); 0 < target < interval.
func WithCoDel(target, interval time.Duration) Option {
	return optionFunc(func(cfg *config) {
		cfg.codel, cfg.codelTarget, cfg.codelInterval = true, target, interval
	})
}

// WithPartitions divides the limit into named shares, each a fraction of the
// limit; the fractions must be positive and sum to at most 1. A partition with
// share s is guaranteed floor(s·limit) tokens: while it holds fewer, it is
// admitted whenever the gate is not full, and nobody else may take the
// capacity it is owed. Beyond its share a partition borrows capacity that no
// other partition is owed. Callers that name no partition, or an unknown one,
// get only the capacity owed to nobody. Partitioned admission takes a mutex.
func WithPartitions(shares map[string]float64) Option {
	return optionFunc(func(cfg *config) { cfg.partitions, cfg.partitioned = shares, true })
}

// WithObserver reports every decision, release and limit change to o (see
// package metrics). The default reports nothing.
func WithObserver(o metrics.GateObserver) Option {
	return optionFunc(func(cfg *config) {
		cfg.observer = o
		cfg.nilObserver = o == nil
	})
}

// WithFrontSignal sets what measures the queue in front of the gate, where
// requests wait before they reach it (see FrontSignal); nil turns the front
// limit off.
//
// The default, on a real clock (any clock but a *clock.Manual), is the Go
// scheduler (NewSchedulerLatency()). In a Go process that is out of CPU, a
// request that needs less CPU than a scheduler time slice runs to
// completion once it passes the gate, so the gate never holds more than a
// few requests and never sees a round-trip time grow: the queue forms in
// front of it, among goroutines waiting for a CPU. The gate refuses
// arrivals (ErrFrontQueue; counted in Sample.FrontRefused, not in Rejected)
// while that queue is at or above its front limit, read afresh at most
// every 250 µs (and before each refusal of the drain rule), and learns the front limit once per window from the mean
// wait there: it shrinks when the wait exceeds a few of the service's
// round-trip times (fewer under sustained overload; never under a
// millisecond) and grows while it refuses callers under that target (see
// FrontLimit). A service whose handlers wait on I/O has idle CPUs and an
// empty run queue, and is never refused by it; nor is one whose CPU is
// busy but whose requests hardly use it (the process's CPU time per
// arrival under a fiftieth of the service's floor, where a SchedulerLatency
// can read it): there a refusal costs about as much CPU as serving, and
// refusing frees none. On a *clock.Manual (tests,
// the simulator) the default is off: there is no process to measure.
func WithFrontSignal(sig FrontSignal) Option {
	return optionFunc(func(cfg *config) { cfg.front, cfg.frontSet = sig, true })
}

// frontSignal is the front signal the gate uses: the one set, or the
// scheduler's latency on a real clock.
func (c *config) frontSignal() FrontSignal {
	if c.frontSet {
		return c.front
	}
	if c.clock == nil || isManual(c.clock) {
		return nil
	}
	return NewSchedulerLatency()
}

// validate checks the configuration together with the algorithm's initial
// limit (negative: unknown, not checked) and returns every problem found.
func (c *config) validate(initial int) error {
	var errs []error
	bad := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("sluice/adaptive: "+format, args...))
	}
	if c.clock == nil {
		bad("WithClock(nil): a clock is required")
	}
	if c.nilObserver {
		bad("WithObserver(nil): pass an observer or omit the option")
	}
	if c.minLimit < 1 {
		bad("min limit %d: must be at least 1", c.minLimit)
	}
	if c.maxLimit < 1 || c.maxLimit > maxLimitCap {
		bad("max limit %d: must be in [1, %d]", c.maxLimit, maxLimitCap)
	}
	if c.minLimit > c.maxLimit {
		bad("min limit %d exceeds max limit %d", c.minLimit, c.maxLimit)
	}
	if initial >= 0 && (initial < c.minLimit || initial > c.maxLimit) {
		bad("algorithm's initial limit %d is outside [min %d, max %d]", initial, c.minLimit, c.maxLimit)
	}
	if c.minWindow <= 0 || c.maxWindow < c.minWindow {
		bad("window [%v, %v]: need 0 < min ≤ max", c.minWindow, c.maxWindow)
	}
	if c.minSamples < 1 {
		bad("min samples %d: must be at least 1", c.minSamples)
	}
	if c.percentile != 0 && !(c.percentile > 0 && c.percentile < 1) {
		bad("percentile %v: must be in (0, 1)", c.percentile)
	}
	if c.queueCap < 0 || (c.queued && c.queueCap == 0) {
		bad("queue capacity %d: must be positive", c.queueCap)
	}
	if c.queueOrder > LIFO {
		bad("unknown queue order %d", c.queueOrder)
	}
	if c.queueTimeout < 0 {
		bad("queue timeout %v: must not be negative", c.queueTimeout)
	}
	if c.queueCap == 0 && (c.queueTimeout != 0 || c.codel) {
		bad("WithQueueTimeout and WithCoDel need WithQueue")
	}
	if c.codel && !(c.codelTarget > 0 && c.codelTarget < c.codelInterval) {
		bad("CoDel target %v, interval %v: need 0 < target < interval", c.codelTarget, c.codelInterval)
	}
	if c.partitioned {
		if len(c.partitions) == 0 {
			bad("WithPartitions: no partitions given")
		}
		names := make([]string, 0, len(c.partitions))
		for name := range c.partitions {
			names = append(names, name)
		}
		sort.Strings(names)
		sum := 0.0
		for _, name := range names {
			s := c.partitions[name]
			if name == "" {
				bad("partition with an empty name")
			}
			if !(s > 0 && s <= 1) {
				bad("partition %q share %v: must be in (0, 1]", name, s)
				continue
			}
			sum += s
		}
		if sum > 1+1e-9 {
			bad("partition shares sum to %v: must be at most 1", sum)
		}
	}
	return errors.Join(errs...)
}
