package adaptive_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"time"

	"github.com/sluicehq/sluice/adaptive"
	"github.com/sluicehq/sluice/clock"
)

// The gate admits up to its limit and refuses the rest at once.
func ExampleLimiter_TryAcquire() {
	lim, err := adaptive.New(adaptive.Fixed(2))
	if err != nil {
		panic(err)
	}
	a, _ := lim.TryAcquire()
	b, _ := lim.TryAcquire()
	_, ok := lim.TryAcquire()
	fmt.Println("third admitted:", ok, "in flight:", lim.InFlight())
	a.Success() // done: the time held is an RTT sample
	b.Dropped() // timed out downstream: a congestion signal
	fmt.Println("in flight:", lim.InFlight())
	// Output:
	// third admitted: false in flight: 2
	// in flight: 0
}

// With a queue, Acquire waits for a slot; a release hands its slot to exactly
// one waiter.
func ExampleLimiter_Acquire() {
	lim, _ := adaptive.New(adaptive.Fixed(1), adaptive.WithQueue(10, adaptive.FIFO))
	first, _ := lim.Acquire(context.Background())

	got := make(chan adaptive.Token)
	go func() {
		tok, err := lim.Acquire(context.Background())
		if err != nil {
			panic(err)
		}
		got <- tok
	}()
	for lim.Queued() == 0 {
		runtime.Gosched() // wait until the goroutine has queued
	}
	first.Success() // hands the slot to the waiter
	second := <-got
	fmt.Println("in flight:", lim.InFlight(), "queued:", lim.Queued())
	second.Success()
	// Output: in flight: 1 queued: 0
}

// Refusals are errors that wrap ErrLimitExceeded, so callers can tell them
// from a cancelled context.
func ExampleErrLimitExceeded() {
	lim, _ := adaptive.New(adaptive.Fixed(1), adaptive.WithQueue(1, adaptive.FIFO))
	tok, _ := lim.Acquire(context.Background())
	defer tok.Success()

	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		for lim.Queued() == 0 {
			runtime.Gosched()
		}
		_, err := lim.Acquire(context.Background()) // the queue holds one
		fmt.Println(err, errors.Is(err, adaptive.ErrLimitExceeded))
		cancel()
	}()
	_, err := lim.Acquire(ctx) // waits until cancelled
	fmt.Println(err)
	// Output:
	// sluice: concurrency limit reached: wait queue full true
	// context canceled
}

// AIMD grows the limit by one per busy window and backs off on drops. On a
// manual clock the gate is driven entirely by its callers.
func ExampleNewAIMD() {
	c := clock.NewManual(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	lim, _ := adaptive.New(adaptive.NewAIMD(adaptive.WithAIMDInitial(4)),
		adaptive.WithClock(c), adaptive.WithMinSamples(1), adaptive.WithMaxLimit(100))
	window := func(n int, drop bool) {
		toks := make([]adaptive.Token, n)
		for i := range toks {
			toks[i], _ = lim.TryAcquire()
		}
		c.Advance(adaptive.DefaultMinWindow)
		for i, tok := range toks {
			if drop && i == 0 { // the first release closes the window
				tok.Dropped()
			} else {
				tok.Success()
			}
		}
	}
	window(4, false)
	fmt.Println("busy:", lim.Limit())
	window(5, true)
	fmt.Println("after a drop:", lim.Limit())
	// Output:
	// busy: 5
	// after a drop: 4
}

// Partitions give named shares of the limit a guarantee.
func ExampleLimiter_Partition() {
	lim, _ := adaptive.New(adaptive.Fixed(10),
		adaptive.WithPartitions(map[string]float64{"live": 0.6, "batch": 0.2}))
	live, batch := lim.Partition("live"), lim.Partition("batch")
	n := 0
	for {
		if _, ok := batch.TryAcquire(); !ok {
			break
		}
		n++
	}
	fmt.Println("batch got", n, "slots; live is owed", live.Guaranteed())
	_, ok := live.TryAcquire()
	fmt.Println("live admitted:", ok)
	// Output:
	// batch got 4 slots; live is owed 6
	// live admitted: true
}

// On a real clock the gate also watches the queue in front of it: the
// goroutines waiting for a CPU, where a CPU-bound Go service queues when it
// is overloaded (every request runs to completion once past the gate, so
// in flight never grows). WithFrontSignal(nil) turns that off.
func ExampleWithFrontSignal() {
	gate, err := adaptive.New(adaptive.NewAIMD())
	if err != nil {
		panic(err)
	}
	fmt.Println("watches the run queue:", gate.FrontLimit() > 0)

	off, err := adaptive.New(adaptive.NewAIMD(), adaptive.WithFrontSignal(nil))
	if err != nil {
		panic(err)
	}
	fmt.Println("front limit when off:", off.FrontLimit())
	// Output:
	// watches the run queue: true
	// front limit when off: 0
}

// acceptQueue is a FrontSignal for a server with its own queue of accepted
// requests in front of the gate (a worker pool, say).
type acceptQueue struct {
	waiting int
	wait    time.Duration
}

func (q *acceptQueue) Queue() int                  { return q.waiting }
func (q *acceptQueue) Delay() (time.Duration, int) { return q.wait, 1 }

// Any queue in front of the gate can be its FrontSignal: arrivals are
// refused with ErrFrontQueue while it is at the front limit.
func ExampleFrontSignal() {
	q := &acceptQueue{}
	c := clock.NewManual(time.Unix(0, 0))
	gate, err := adaptive.New(adaptive.Fixed(100), adaptive.WithClock(c), adaptive.WithFrontSignal(q))
	if err != nil {
		panic(err)
	}
	tok, err := gate.Acquire(context.Background())
	fmt.Println("empty queue:", err)
	tok.Success()

	q.waiting = gate.FrontLimit()
	c.Advance(time.Millisecond) // the queue is read at most every 250 µs
	_, err = gate.Acquire(context.Background())
	fmt.Println("long queue:", err)
	fmt.Println("an overload refusal:", errors.Is(err, adaptive.ErrLimitExceeded))
	// Output:
	// empty queue: <nil>
	// long queue: sluice: concurrency limit reached: requests wait too long before reaching the gate
	// an overload refusal: true
}

// The gate measures the service's floor, the round-trip time at low
// concurrency, from windows in which it is not saturated: here requests of
// 5ms, two at a time under a limit of 10.
func ExampleLimiter_Floor() {
	clk := clock.NewManual(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
	lim, _ := adaptive.New(adaptive.Fixed(10), adaptive.WithClock(clk))
	for range 100 { // 500ms of traffic: five 100ms windows
		a, _ := lim.TryAcquire()
		b, _ := lim.TryAcquire()
		clk.Advance(5 * time.Millisecond)
		a.Success()
		b.Success()
	}
	fmt.Println("floor:", lim.Floor(), "throughput measured:", lim.Throughput() > 0)
	// Output: floor: 5ms throughput measured: false
}
