package clock

import (
	"math"
	"runtime"
	"sync"
	"testing"
	"time"
)

func TestCoarseRejectsResolution(t *testing.T) {
	for _, r := range []time.Duration{-time.Millisecond, 0, MinCoarseResolution - 1, MaxCoarseResolution + 1} {
		if c, err := NewCoarse(r); err == nil {
			c.Stop()
			t.Errorf("NewCoarse(%v) = nil error, want one", r)
		}
	}
	for _, r := range []time.Duration{MinCoarseResolution, time.Millisecond, MaxCoarseResolution} {
		c, err := NewCoarse(r)
		if err != nil {
			t.Fatalf("NewCoarse(%v): %v", r, err)
		}
		if c.Resolution() != r {
			t.Errorf("Resolution() = %v, want %v", c.Resolution(), r)
		}
		c.Stop()
	}
}

// The clock reads what was published, never runs backwards, and Since
// agrees with Now.
func TestCoarsePublishedReadings(t *testing.T) {
	c, err := newCoarse(time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	start := c.Now()
	if d := c.Since(start); d != 0 {
		t.Fatalf("Since(start) = %v before any refresh, want 0", d)
	}
	c.refresh(5 * time.Millisecond)
	if d := c.Since(start); d != 5*time.Millisecond {
		t.Fatalf("Since(start) = %v, want 5ms", d)
	}
	if got := c.Now().Sub(start); got != 5*time.Millisecond {
		t.Fatalf("Now().Sub(start) = %v, want 5ms", got)
	}
	c.refresh(3 * time.Millisecond) // a late refresh never moves the clock back
	if d := c.Since(start); d != 5*time.Millisecond {
		t.Fatalf("after an older refresh Since(start) = %v, want 5ms", d)
	}
	mid := c.Now()
	c.refresh(7 * time.Millisecond)
	if d := c.Since(mid); d != 2*time.Millisecond {
		t.Fatalf("Since(mid) = %v, want 2ms", d)
	}
	if !c.Now().After(mid) || c.Now().Before(start) {
		t.Fatal("readings out of order")
	}
}

// Concurrent refreshes and readers: every reader sees non-decreasing
// readings (run with -race).
func TestCoarseConcurrentMonotonic(t *testing.T) {
	c, err := newCoarse(time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	start := c.Now()
	var wg sync.WaitGroup
	for w := range 2 {
		wg.Go(func() {
			for i := range 2000 {
				c.refresh(time.Duration(i*2+w) * time.Microsecond)
			}
		})
	}
	for range 2 {
		wg.Go(func() {
			var last time.Duration
			for range 4000 {
				d := c.Since(start)
				if d < last {
					t.Errorf("reading went back from %v to %v", last, d)
					return
				}
				last = d
			}
		})
	}
	wg.Wait()
	if got, want := c.Since(start), 3999*time.Microsecond; got != want {
		t.Fatalf("final reading %v, want %v", got, want)
	}
}

// A stopped clock reads the system clock afresh: it is never frozen, and
// never earlier than a reading it already returned.
func TestCoarseStopped(t *testing.T) {
	c, err := NewCoarse(time.Second)
	if err != nil {
		t.Fatal(err)
	}
	c.refresh(time.Hour) // a reading ahead of the system clock
	start := c.base
	c.Stop()
	c.Stop() // idempotent
	if d := c.Now().Sub(start); d < time.Hour {
		t.Fatalf("after Stop the clock went back to %v", d)
	}
	c2, err := NewCoarse(time.Second)
	if err != nil {
		t.Fatal(err)
	}
	c2.Stop()
	a := c2.Now()
	deadline := time.Now().Add(10 * time.Second)
	for c2.Now().Equal(a) { // a fresh system reading moves on its own
		if time.Now().After(deadline) {
			t.Fatal("a stopped clock did not move in 10s: frozen")
		}
	}
}

func TestCoarseIsAClock(t *testing.T) {
	c, err := NewCoarse(time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Stop()
	var _ Clock = c
	if _, ok := any(c).(Elapsed); !ok {
		t.Fatal("Coarse does not implement Elapsed")
	}
}

// A running clock moves on its own and never reads ahead of the system
// clock (its lag is at least 0).
func TestCoarseAdvances(t *testing.T) {
	c, err := NewCoarse(MinCoarseResolution)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Stop()
	start := c.Now()
	deadline := time.Now().Add(10 * time.Second)
	for {
		r := c.Now()
		if sys := time.Now(); r.After(sys) {
			t.Fatalf("reading %v ahead of the system clock", r.Sub(sys))
		}
		if r.After(start) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("the clock did not move in 10s: frozen")
		}
		runtime.Gosched()
	}
}

// Since(t) equals Now().Sub(t) also for a t centuries away, where Sub
// saturates (a zero time.Time is the usual one).
func TestCoarseSinceFarTimes(t *testing.T) {
	c, err := newCoarse(time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	c.refresh(5 * time.Millisecond)
	for _, far := range []time.Time{
		{},
		c.base.Add(math.MinInt64 + 1),
		c.base.Add(-1 << 62),
		c.base.Add(math.MaxInt64),
		time.Unix(1<<40, 0),
		c.base.Add(-time.Hour),
	} {
		if got, want := c.Since(far), c.Now().Sub(far); got != want {
			t.Errorf("Since(%v) = %v, want Now().Sub = %v", far, got, want)
		}
	}
}

// Nanos is Now as nanoseconds since Start, running or stopped.
func TestCoarseNanos(t *testing.T) {
	c, err := newCoarse(time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range []time.Duration{0, 5 * time.Millisecond, 7*time.Millisecond + 3} {
		c.refresh(e)
		if got := c.Nanos(); got != int64(e) {
			t.Fatalf("Nanos() = %d after publishing %v", got, e)
		}
		if !c.Start().Add(time.Duration(c.Nanos())).Equal(c.Now()) {
			t.Fatalf("Start()+Nanos() = %v, Now() = %v", c.Start().Add(time.Duration(c.Nanos())), c.Now())
		}
	}
	c.Stop()
	a := c.Nanos()
	if b := c.Nanos(); b < a || a < int64(7*time.Millisecond+3) {
		t.Fatalf("stopped: Nanos() read %d then %d", a, b)
	}
	if n := testing.AllocsPerRun(100, func() { c.Nanos() }); n != 0 {
		t.Fatalf("Nanos allocates %v times", n)
	}
}
