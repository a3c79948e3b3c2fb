package clock

import (
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// The bounds of a Coarse clock's resolution.
const (
	MinCoarseResolution = 100 * time.Microsecond
	MaxCoarseResolution = time.Second
)

// Coarse is a clock that trades resolution for speed: a background goroutine
// reads the system's monotonic clock once per resolution and publishes the
// reading, and Now and Since return the last published reading, one atomic
// load instead of a clock read (31 ns on a KVM guest, where the clock is the
// biggest cost of a rate-limit decision). nginx and Envoy keep their time the
// same way, once per event-loop turn.
//
// Its promises: readings never run backwards; each lags the system clock by
// at least 0 and, while the process is scheduled normally, by at most about
// one resolution (a goroutine that is not scheduled in time makes the lag
// longer, never the clock faster); and Since(t) equals Now().Sub(t).
//
// A rate limiter on a Coarse clock decides exactly on the clock's time, as
// if each request had arrived at the last tick. Measured in real time, a
// limit of Rate per Period over any span of length t admits at most what
// it admits over t plus the lag: Burst + Rate·(t + resolution)/Period for a
// token bucket, instead of Burst + Rate·t/Period. Use it where that is
// acceptable and decisions are many (an API gateway), not to time latencies:
// an adaptive gate needs fresh readings.
//
// Stop ends the goroutine; from then on the clock reads the system clock on
// every call, so a stopped clock is slower but never frozen. A Coarse clock
// is safe for concurrent use.
type Coarse struct {
	base    time.Time    // a system reading with a monotonic part
	elapsed atomic.Int64 // the published reading: nanoseconds since base
	stopped atomic.Bool
	res     time.Duration

	stopOnce sync.Once
	done     chan struct{}
	exited   chan struct{} // closed when the goroutine ends; nil without one
}

// NewCoarse starts a Coarse clock refreshed every resolution, which must lie
// within [MinCoarseResolution, MaxCoarseResolution]. Call Stop when done
// with it, or its goroutine runs until the process exits.
func NewCoarse(resolution time.Duration) (*Coarse, error) {
	c, err := newCoarse(resolution)
	if err != nil {
		return nil, err
	}
	c.exited = make(chan struct{})
	go c.run()
	return c, nil
}

// newCoarse returns a Coarse clock without its goroutine (tests publish
// readings with refresh).
func newCoarse(resolution time.Duration) (*Coarse, error) {
	if resolution < MinCoarseResolution || resolution > MaxCoarseResolution {
		return nil, fmt.Errorf("sluice/clock: coarse resolution %v: must be between %v and %v",
			resolution, MinCoarseResolution, MaxCoarseResolution)
	}
	return &Coarse{
		base: time.Now(),
		res:  resolution,
		done: make(chan struct{}),
	}, nil
}

func (c *Coarse) run() {
	defer close(c.exited)
	t := time.NewTicker(c.res)
	defer t.Stop()
	for {
		select {
		case <-t.C:
			c.refresh(time.Since(c.base))
		case <-c.done:
			return
		}
	}
}

// refresh publishes the reading e unless a later one is already published,
// so that readings never run backwards.
func (c *Coarse) refresh(e time.Duration) {
	for {
		old := c.elapsed.Load()
		if int64(e) <= old || c.elapsed.CompareAndSwap(old, int64(e)) {
			return
		}
	}
}

// Resolution returns the interval at which the clock is refreshed.
func (c *Coarse) Resolution() time.Duration { return c.res }

// read returns the clock's reading as the time since base.
func (c *Coarse) read() time.Duration {
	if c.stopped.Load() {
		e := time.Since(c.base)
		c.refresh(e)
		return time.Duration(c.elapsed.Load())
	}
	return time.Duration(c.elapsed.Load())
}

// Now returns the last published reading (with a monotonic part, so that
// Sub and Since on it measure monotonic time).
func (c *Coarse) Now() time.Time { return c.base.Add(c.read()) }

// Since returns Now().Sub(t), without building the time.Time of Now.
func (c *Coarse) Since(t time.Time) time.Duration {
	d := t.Sub(c.base)
	if d < -1<<62 || d > 1<<62 {
		// t is centuries away: let Sub saturate, as Now().Sub(t) does,
		// rather than overflow the subtraction below.
		return c.Now().Sub(t)
	}
	return c.read() - d
}

// Start returns the instant Nanos counts from: Now equals
// Start().Add(time.Duration(Nanos())).
func (c *Coarse) Start() time.Time { return c.base }

// Nanos returns the clock's reading as nanoseconds since Start, without
// building a time.Time: one atomic load while the clock runs. A limiter
// that holds a *Coarse reads it through Nanos on its hot path, with no
// interface call. Its promises are Now's: never backwards, lagging the
// system clock by about one resolution at most.
func (c *Coarse) Nanos() int64 {
	if c.stopped.Load() {
		return int64(c.read())
	}
	return c.elapsed.Load()
}

// Stop ends the clock's goroutine and waits for it to exit. Afterwards every
// reading is a fresh system reading (never earlier than one already
// returned). Stop may be called more than once.
func (c *Coarse) Stop() {
	c.stopOnce.Do(func() {
		c.stopped.Store(true)
		close(c.done)
	})
	if c.exited != nil {
		<-c.exited
	}
}
