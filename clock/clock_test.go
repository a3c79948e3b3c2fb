package clock_test

import (
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/clock"
)

var t0 = time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)

func TestManualAdvanceAndSet(t *testing.T) {
	c := clock.NewManual(t0)
	if got := c.Now(); !got.Equal(t0) {
		t.Fatalf("Now = %v, want %v", got, t0)
	}
	if got := c.Advance(1500 * time.Millisecond); !got.Equal(t0.Add(1500 * time.Millisecond)) {
		t.Fatalf("Advance returned %v", got)
	}
	c.Set(t0.Add(time.Hour))
	if got := clock.Since(c, t0); got != time.Hour {
		t.Fatalf("Since = %v, want 1h", got)
	}
	c.Set(t0.Add(time.Hour)) // setting the same instant is allowed
}

func TestManualRefusesToRunBackwards(t *testing.T) {
	c := clock.NewManual(t0)
	for name, f := range map[string]func(){
		"Advance": func() { c.Advance(-time.Nanosecond) },
		"Set":     func() { c.Set(t0.Add(-time.Second)) },
	} {
		t.Run(name, func(t *testing.T) {
			defer func() {
				if recover() == nil {
					t.Fatal("no panic")
				}
			}()
			f()
		})
	}
	if !c.Now().Equal(t0) {
		t.Fatalf("clock moved after refused calls: %v", c.Now())
	}
}

func TestManualStripsMonotonic(t *testing.T) {
	start := time.Now()
	c := clock.NewManual(start)
	if c.Now().String() != start.Round(0).String() {
		t.Fatalf("monotonic reading kept: %v", c.Now())
	}
}

func TestManualConcurrent(t *testing.T) {
	c := clock.NewManual(t0)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 1000 {
				c.Advance(time.Millisecond)
				_ = c.Now()
			}
		})
	}
	wg.Wait()
	if got := clock.Since(c, t0); got != 8*time.Second {
		t.Fatalf("after 8000 advances of 1ms: %v", got)
	}
}

func TestSystemSinceMatchesNow(t *testing.T) {
	c := clock.System()
	start := c.Now()
	d := clock.Since(c, start)
	if d < 0 || d > time.Minute {
		t.Fatalf("Since right after Now = %v", d)
	}
}

func BenchmarkSystemNow(b *testing.B) {
	c := clock.System()
	for b.Loop() {
		_ = c.Now()
	}
}

func BenchmarkSystemSince(b *testing.B) {
	c := clock.System()
	start := c.Now()
	for b.Loop() {
		_ = clock.Since(c, start)
	}
}

func TestElapsedOf(t *testing.T) {
	m := clock.NewManual(time.Unix(100, 0))
	e := clock.ElapsedOf(m)
	m.Advance(3 * time.Second)
	if got := e.Since(time.Unix(100, 0)); got != 3*time.Second {
		t.Fatalf("manual: %v", got)
	}
	if e, ok := clock.ElapsedOf(clock.System()).(clock.Clock); !ok || e != clock.System() {
		t.Fatal("the system clock's own Elapsed was not used")
	}
	n := clock.ElapsedOf(nowOnly{m})
	if got := n.Since(time.Unix(100, 0)); got != 3*time.Second {
		t.Fatalf("Now-only clock: %v", got)
	}
}

// nowOnly is a Clock without an Elapsed method.
type nowOnly struct{ c clock.Clock }

func (n nowOnly) Now() time.Time { return n.c.Now() }
