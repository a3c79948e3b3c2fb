package adaptive

import (
	"context"
	"crypto/sha256"
	"errors"
	"math"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice/clock"
	"github.com/sluicehq/sluice/metrics"
)

// fakeFront is a FrontSignal the test sets.
type fakeFront struct {
	queue atomic.Int64
	delay time.Duration
	n     int
}

func (f *fakeFront) Queue() int                  { return int(f.queue.Load()) }
func (f *fakeFront) Delay() (time.Duration, int) { return f.delay, f.n }

func newFrontGate(t *testing.T, sig FrontSignal) (*Limiter, *clock.Manual) {
	t.Helper()
	c := clock.NewManual(time.Unix(0, 0))
	g, err := New(&fixedRecorder{limit: 1000}, WithClock(c), WithFrontSignal(sig))
	if err != nil {
		t.Fatal(err)
	}
	return g, c
}

// frontWindow drives one sampling window: `refused` arrivals while the
// queue reads at the front limit, then 10 requests of 1 ms each with an
// empty queue, then the window closes. It returns the window's Sample as the
// gate's algorithm saw it.
func frontWindow(t *testing.T, g *Limiter, c *clock.Manual, f *fakeFront, refused int) Sample {
	t.Helper()
	start := c.Now()
	if refused > 0 {
		f.queue.Store(int64(g.FrontLimit()))
		c.Advance(frontInterval) // the next arrival reads the queue afresh
		for range refused {
			if _, ok := g.TryAcquire(); ok {
				t.Fatalf("admitted with the queue at the front limit %d", g.FrontLimit())
			}
		}
	}
	f.queue.Store(0)
	c.Advance(frontInterval)
	var toks []Token
	for range 10 {
		tok, ok := g.TryAcquire()
		if !ok {
			t.Fatalf("refused with an empty front queue (limit %d)", g.FrontLimit())
		}
		toks = append(toks, tok)
	}
	c.Advance(time.Millisecond)
	for _, tok := range toks {
		tok.Success()
	}
	// One more request of 1 ms whose release finds the window due (the
	// gate's first window began with its first admission, up to two reads
	// after start).
	rec := g.alg.(*fixedRecorder)
	before := len(rec.samples)
	c.Set(start.Add(DefaultMinWindow + 2*frontInterval))
	tok, ok := g.TryAcquire()
	if !ok {
		t.Fatal("refused with an empty front queue")
	}
	c.Advance(time.Millisecond)
	tok.Success()
	if len(rec.samples) != before+1 {
		t.Fatal("the window did not close")
	}
	return rec.samples[len(rec.samples)-1]
}

// fixedRecorder is Fixed that remembers the samples it saw.
type fixedRecorder struct {
	limit   int
	samples []Sample
}

func (r *fixedRecorder) InitialLimit() int { return r.limit }
func (r *fixedRecorder) Update(s Sample) int {
	r.samples = append(r.samples, s)
	return r.limit
}

func TestFrontLimitLearnsFromTheDelay(t *testing.T) {
	f := &fakeFront{n: 100}
	g, c := newFrontGate(t, f)
	l0 := float64(frontInitial * runtime.GOMAXPROCS(0))
	if g.FrontLimit() != int(l0) {
		t.Fatalf("initial front limit %d, want %v (%d per processor)", g.FrontLimit(), l0, frontInitial)
	}
	want := l0
	check := func(step string) {
		t.Helper()
		if got := g.FrontLimit(); got != int(math.Round(want)) {
			t.Fatalf("%s: front limit %d, want %v", step, got, math.Round(want))
		}
	}
	// RTT 1 ms, nobody refused: the target is frontLoose RTTs (4 ms).
	// A mean wait of 8 ms halves the limit.
	f.delay = 8 * time.Millisecond
	s := frontWindow(t, g, c, f, 0)
	if s.AvgRTT != time.Millisecond || s.FrontDelay != 8*time.Millisecond || s.FrontRefused != 0 {
		t.Fatalf("sample RTT %v, front delay %v, refused %d; want 1ms, 8ms, 0", s.AvgRTT, s.FrontDelay, s.FrontRefused)
	}
	want *= 0.5
	check("8 ms against 4 ms")
	// A wait far over the target never cuts by more than half.
	f.delay = time.Second
	frontWindow(t, g, c, f, 0)
	want = max(want*0.5, frontMin)
	check("1 s against 4 ms")
	// Under the target with nobody refused: the limit did not bind, hold.
	f.delay = 100 * time.Microsecond
	frontWindow(t, g, c, f, 0)
	check("under the target, nobody refused")
	// Far under the target while it refused callers: double.
	s = frontWindow(t, g, c, f, 5)
	if s.FrontRefused != 5 || s.Rejected != 0 {
		t.Fatalf("front refusals %d, gate rejections %d; want 5 and 0 (the gate had room)", s.FrontRefused, s.Rejected)
	}
	want *= 2
	check("far under the target, 5 refused")
	// With 5 of 16 arrivals refused (EMA 0.3 over three windows
	// again), the target tightens towards frontTight RTTs.
	// Just under it: grow by the ratio, 0.9·target/delay (the target is now
	// tighter: 5 of 16 refused, twice).
	p := 0.0
	for range 2 {
		p += 0.3 * (5.0/16 - p)
	}
	k := frontLoose - (frontLoose-frontTight)*min(1, p/frontHeavy)
	target := max(float64(frontMinTarget), k*float64(time.Millisecond))
	f.delay = time.Duration(0.8 * target)
	frontWindow(t, g, c, f, 5)
	want = max(want*0.9*target/float64(f.delay), want+1)
	check("just under the target")
	p += 0.3 * (5.0/16 - p) // 5 refused, 11 passed: the third such window
	k = frontLoose - (frontLoose-frontTight)*min(1, p/frontHeavy)
	target = max(float64(frontMinTarget), k*float64(time.Millisecond))
	f.delay = time.Duration(1.5 * target)
	frontWindow(t, g, c, f, 5)
	want = max(want*target/float64(f.delay), frontMin)
	check("over the tightened target")
	// The limit never falls below frontMin.
	f.delay = time.Minute
	for range 10 {
		frontWindow(t, g, c, f, 0)
	}
	want = frontMin
	check("floor")
}

func TestFrontRefusalIsAnOverloadError(t *testing.T) {
	f := &fakeFront{}
	g, c := newFrontGate(t, f)
	f.queue.Store(int64(g.FrontLimit()))
	c.Advance(frontInterval)
	_, err := g.Acquire(context.Background())
	if !errors.Is(err, ErrFrontQueue) || !errors.Is(err, ErrLimitExceeded) {
		t.Fatalf("Acquire with a long front queue: %v, want ErrFrontQueue (an ErrLimitExceeded)", err)
	}
	// The reading is kept for frontInterval: a shorter queue is seen after it.
	f.queue.Store(0)
	if _, ok := g.TryAcquire(); ok {
		t.Fatal("admitted before the queue was read again")
	}
	c.Advance(frontInterval)
	tok, ok := g.TryAcquire()
	if !ok {
		t.Fatal("refused after the queue emptied")
	}
	tok.Success()
}

// TestPassFrontIsTheFrontCheckAlone: PassFront refuses what Acquire would
// refuse with ErrFrontQueue, counts the refusal as the window's front
// refusal and reports it to the observer, takes no token, and passes
// everything on a gate without a front signal.
func TestPassFrontIsTheFrontCheckAlone(t *testing.T) {
	f := &fakeFront{}
	c := clock.NewManual(time.Unix(0, 0))
	var rec recorder
	rf := &fixedRecorder{limit: 1}
	g, err := New(rf, WithClock(c), WithFrontSignal(f), WithObserver(&rec), WithMinSamples(1))
	if err != nil {
		t.Fatal(err)
	}
	if !g.PassFront() || g.InFlight() != 0 {
		t.Fatalf("an empty front queue: PassFront false or a token taken (in flight %d)", g.InFlight())
	}
	f.queue.Store(int64(g.FrontLimit()))
	c.Advance(frontInterval)
	for range 3 {
		if g.PassFront() {
			t.Fatal("PassFront true with the queue at the front limit")
		}
	}
	if _, err := g.Acquire(context.Background()); !errors.Is(err, ErrFrontQueue) {
		t.Fatalf("Acquire after PassFront refused: %v, want ErrFrontQueue", err)
	}
	if len(rec.decisions) != 4 || rec.decisions[0] != metrics.Rejected || rec.decisions[3] != metrics.Rejected {
		t.Fatalf("observed %v, want four refusals", rec.decisions)
	}
	f.queue.Store(0)
	c.Advance(frontInterval)
	if !g.PassFront() {
		t.Fatal("PassFront false after the queue emptied")
	}
	tok, ok := g.TryAcquire()
	if !ok {
		t.Fatal("TryAcquire refused after PassFront let the arrival through")
	}
	c.Advance(DefaultMinWindow)
	tok.Success()
	if len(rf.samples) != 1 || rf.samples[0].FrontRefused != 4 || rf.samples[0].Count != 1 {
		t.Fatalf("window samples %+v, want one with 4 front refusals and 1 served", rf.samples)
	}
	if allocs := testing.AllocsPerRun(100, func() { g.PassFront() }); allocs != 0 {
		t.Fatalf("PassFront: %v allocations, want 0", allocs)
	}
	none, err := New(Fixed(1), WithClock(c))
	if err != nil {
		t.Fatal(err)
	}
	tok, _ = none.TryAcquire()
	defer tok.Ignore()
	if !none.PassFront() {
		t.Fatal("PassFront false on a gate without a front signal (and full)")
	}
}

func TestFrontSignalDefault(t *testing.T) {
	g, err := New(Fixed(10))
	if err != nil {
		t.Fatal(err)
	}
	if g.FrontLimit() == 0 {
		t.Fatal("no front limit on the system clock by default")
	}
	g, err = New(Fixed(10), WithFrontSignal(nil))
	if err != nil {
		t.Fatal(err)
	}
	if g.FrontLimit() != 0 {
		t.Fatal("WithFrontSignal(nil) left a front limit")
	}
	g, err = New(Fixed(10), WithClock(clock.NewManual(time.Unix(0, 0))))
	if err != nil {
		t.Fatal(err)
	}
	if g.FrontLimit() != 0 {
		t.Fatal("a front limit on a manual clock by default")
	}
}

func TestFrontAllocatesNothing(t *testing.T) {
	g, err := New(Fixed(10)) // the system clock and the scheduler's signal
	if err != nil {
		t.Fatal(err)
	}
	allocs := testing.AllocsPerRun(1000, func() {
		if tok, ok := g.TryAcquire(); ok {
			tok.Success()
		}
	})
	if allocs != 0 {
		t.Fatalf("TryAcquire+Success with the front limit: %v allocations, want 0", allocs)
	}
}

// TestSchedulerLatencyQueueSkipsBlockedGoroutines: goroutines waiting on
// I/O or a channel are not in the front queue, however many there are.
func TestSchedulerLatencyQueueSkipsBlockedGoroutines(t *testing.T) {
	s := NewSchedulerLatency()
	block := make(chan struct{})
	var wg sync.WaitGroup
	var started sync.WaitGroup
	for range 1000 {
		wg.Add(1)
		started.Add(1)
		go func() {
			defer wg.Done()
			started.Done()
			<-block
		}()
	}
	started.Wait()
	runtime.Gosched()
	if q := s.Queue(); q >= 100 {
		t.Errorf("Queue() = %d with 1000 goroutines blocked on a channel", q)
	}
	close(block)
	wg.Wait()
	if _, n := s.Delay(); n < 0 {
		t.Fatal("negative count")
	}
}

func TestSchedulerLatencyArithmetic(t *testing.T) {
	s := new(SchedulerLatency)
	buckets := []float64{math.Inf(-1), 0, 0.001, 0.005, 0.01, math.Inf(1)}
	if s.observe([]uint64{0, 10, 10, 0, 0}, buckets) {
		t.Fatal("the first histogram only sets the baseline")
	}
	// 1000 new waits, 5 of them at 5 ms or more: 0.5% ≤ 1%.
	if !s.observe([]uint64{0, 510, 505, 5, 0}, buckets) || s.exceeds(0.99, 5*time.Millisecond) {
		t.Fatal("p99 over 5 ms with 0.5% of the waits there")
	}
	// Mean: 500 at 0.5 ms, 495 at 3 ms, 5 at 7.5 ms.
	mean, n := s.mean()
	if wantMean := (500*0.0005 + 495*0.003 + 5*0.0075) / 1000; n != 1000 || math.Abs(mean.Seconds()-wantMean) > 1e-9 {
		t.Fatalf("mean %v over %d, want %vs over 1000", mean, n, wantMean)
	}
	// 100 more, 20 of them at 10 ms or more (the open last bucket counts
	// at its lower bound): 20% > 1%.
	s.observe([]uint64{0, 550, 545, 5, 20}, buckets)
	if !s.exceeds(0.99, 5*time.Millisecond) {
		t.Fatal("p99 not over 5 ms with 20% of the waits at 10 ms or more")
	}
	s.observe([]uint64{0, 550, 545, 5, 20}, buckets)
	if s.exceeds(0.99, 5*time.Millisecond) {
		t.Fatal("over the threshold with no new waits")
	}
	if _, n := s.mean(); n != 0 {
		t.Fatalf("%d waits counted with none new", n)
	}
}

// A queue under the front limit that has not drained (read under frontMin
// per processor) for frontDrain refuses arrivals until a reading finds it drained: while
// the run queue never empties, the runtime polls the network only every
// ~10 ms, and requests wait unseen in their sockets.
func TestFrontRefusesAQueueThatDoesNotDrain(t *testing.T) {
	f := &fakeFront{}
	g, c := newFrontGate(t, f)
	try := func() bool { return tryFront(g, c) }
	if !try() {
		t.Fatal("refused with an empty queue")
	}
	drainedAt := int64(frontMin * runtime.GOMAXPROCS(0))
	f.queue.Store(drainedAt) // short, under the front limit, but not drained
	// Goroutines that do not wait for a CPU (a busy I/O service whose run
	// queue is seldom empty when a request arrives, in the batch the
	// network poller made runnable with it): no refusal.
	for range 3 * int(frontDrain/frontInterval) {
		if !try() {
			t.Fatal("refused an undrained queue while nothing waits for a CPU")
		}
	}
	f.queue.Store(0)
	try()
	f.queue.Store(drainedAt)
	// A window whose mean wait for a CPU is over frontMinTarget: waiting
	// (the window's outcome itself is take's, read directly here).
	f.delay, f.n = 2*frontMinTarget, 100
	g.front.take(&Sample{Count: 10, AvgRTT: time.Millisecond}, 0)
	if !g.front.waiting.Load() {
		t.Fatalf("not waiting after a window with a mean wait of %v", f.delay)
	}
	f.queue.Store(0)
	try() // drained now
	f.queue.Store(drainedAt)
	var admitted int
	for range int(frontDrain / frontInterval) {
		if try() {
			admitted++
		}
	}
	if admitted != int(frontDrain/frontInterval) {
		t.Fatalf("admitted %d of %d within frontDrain of the last drained reading", admitted, frontDrain/frontInterval)
	}
	if try() {
		t.Fatalf("admitted with a queue that has not drained for %v", frontDrain+frontInterval)
	}
	// The queue drains before the next reading is due: an arrival the
	// drain rule would refuse reads it afresh, and is admitted.
	f.queue.Store(drainedAt - 1)
	c.Advance(frontInterval / 10)
	tok, ok := g.TryAcquire()
	if !ok {
		t.Fatal("refused on a reading older than the drained queue")
	}
	tok.Success()
	if !try() {
		t.Fatal("refused after the queue drained")
	}
	// Under a quarter of frontMinTarget, no longer waiting.
	f.delay = frontMinTarget / 5
	g.front.take(&Sample{Count: 10, AvgRTT: time.Millisecond}, 0)
	if g.front.waiting.Load() {
		t.Fatalf("still waiting after a window with a mean wait of %v", f.delay)
	}
}

// busyFront is a fakeFront that also reports the process's CPU share.
type busyFront struct {
	fakeFront
	busy float64
}

func (f *busyFront) Busy() (float64, bool) { return f.busy, true }

// refusingUndrained turns the drain rule of gate g (front signal f) on, with
// no more waits observed after that, and keeps its queue undrained, at
// drainedAt (returned), for twice frontDrain of arrivals, until the rule
// refuses.
func refusingUndrained(t *testing.T, g *Limiter, c *clock.Manual, f *fakeFront) (drainedAt int64) {
	t.Helper()
	f.delay, f.n = 2*frontMinTarget, 100
	g.front.take(&Sample{Count: 10, AvgRTT: time.Millisecond}, 0)
	if !g.front.waiting.Load() {
		t.Fatal("the drain rule is not on")
	}
	f.n = 0 // no more waits observed: the rule stays on, the front limit where it is
	drainedAt = int64(frontMin * runtime.GOMAXPROCS(0))
	f.queue.Store(drainedAt)
	for range 2 * int(frontDrain/frontInterval) {
		tryFront(g, c)
	}
	if tryFront(g, c) {
		t.Fatal("admitted after an undrained queue for twice frontDrain")
	}
	return drainedAt
}

// TestFrontDrainRuleCountsAnIdleSpellAsDrained: the first arrival after a
// spell without arrivals longer than frontDrain, the gate holding no
// token, is not refused by the drain rule for an undrained queue (the
// goroutines its own connection made runnable), though the rule is on and
// the last reading before the spell was undrained; arrivals that keep
// finding it undrained are refused again after frontDrain. A spell as
// long while the gate holds tokens (the readers starved behind long
// requests) is not taken for a drained queue.
func TestFrontDrainRuleCountsAnIdleSpellAsDrained(t *testing.T) {
	f := &fakeFront{}
	g, c := newFrontGate(t, f)
	drainedAt := refusingUndrained(t, g, c, f)
	c.Advance(200 * time.Millisecond) // the overload ends; nothing arrives
	var admitted int
	within := int(frontDrain/frontInterval) + 1 // the first arrival's reading, then one every frontInterval
	for range within {
		if tryFront(g, c) {
			admitted++
		}
	}
	if admitted != within {
		t.Fatalf("admitted %d of the %d arrivals within frontDrain of an idle spell", admitted, within)
	}
	if tryFront(g, c) {
		t.Fatal("admitted after the queue stayed undrained for longer than frontDrain after the spell")
	}
	if _, ok := g.TryAcquire(); ok {
		t.Fatal("admitted with the drain rule refusing")
	}
	f.queue.Store(0)
	held, ok := g.TryAcquire()
	if !ok { // the fresh reading finds it drained
		t.Fatal("refused with a drained queue")
	}
	f.queue.Store(drainedAt)
	c.Advance(3 * frontDrain) // a request in flight, and no reading
	if tryFront(g, c) {
		t.Fatal("a spell without readings while the gate held a token was taken for a drained queue")
	}
	held.Success()
}

// TestFrontDrainRuleJudgesASpellByTheCPU: with a signal that measures the
// process's CPU, a spell without readings counts as drained only if the
// processors were mostly idle in it, whether or not the gate holds a token
// (requests shorter than the spell may all have just ended while the
// readers were starved).
func TestFrontDrainRuleJudgesASpellByTheCPU(t *testing.T) {
	f := &busyFront{busy: 0.95}
	g, c := newFrontGate(t, f)
	refusingUndrained(t, g, c, &f.fakeFront)
	c.Advance(200 * time.Millisecond) // busy, no token held, no reading
	if tryFront(g, c) {
		t.Fatalf("a spell with the processors %v busy was taken for a drained queue", f.busy)
	}
	f.busy = 0.1
	c.Advance(200 * time.Millisecond) // idle
	if !tryFront(g, c) {
		t.Fatalf("a spell with the processors %v busy was not taken for a drained queue", f.busy)
	}
}

// The drain rule keeps the run queue draining, so the waits that switched
// it on fall while it works: it stays on while the process keeps frontBusy
// of its processors busy, and goes off when the waits are short and the
// CPU has room.
func TestFrontDrainRuleStaysOnWhileTheProcessIsBusy(t *testing.T) {
	f := &busyFront{busy: 1}
	g, _ := newFrontGate(t, f)
	window := func(delay time.Duration) bool {
		f.delay, f.n = delay, 100
		g.front.take(&Sample{Count: 10, AvgRTT: time.Millisecond}, 0)
		return g.front.waiting.Load()
	}
	for range 5 { // the smoothed share approaches 1
		if !window(2 * frontMinTarget) {
			t.Fatalf("not waiting after a window with a mean wait of %v", 2*frontMinTarget)
		}
	}
	for i := range 20 {
		if !window(frontMinTarget / 10) {
			t.Fatalf("window %d: the rule went off with the process busy (smoothed share %.2f)", i, g.front.cpuBusy)
		}
	}
	// The CPU has room: off within a few windows, by the wait alone.
	f.busy = 0.5
	off := -1
	for i := range 10 {
		if !window(frontMinTarget / 10) {
			off = i
			break
		}
	}
	if off < 0 {
		t.Fatalf("still waiting after 10 windows at half the CPU (smoothed share %.2f)", g.front.cpuBusy)
	}
	if want := 1 + int(math.Ceil(math.Log((1-frontBusy)/(1-0.5))/math.Log(1-frontSmooth))); off+1 > want {
		t.Fatalf("went off after %d windows at half the CPU, want at most %d", off+1, want)
	}
	// A busy process whose waits are long was never in doubt; one whose
	// waits are between the thresholds keeps its state.
	if !window(2*frontMinTarget) || !window(frontMinTarget/2) {
		t.Fatal("the rule went off with waits between the thresholds")
	}
}

// The front limit grows only as far as the queue it read: refusals by the
// drain rule under the limit do not raise it.
func TestFrontLimitGrowsNoFurtherThanTheQueue(t *testing.T) {
	f := &fakeFront{n: 100}
	g, c := newFrontGate(t, f)
	l0 := g.FrontLimit()
	f.delay = 100 * time.Microsecond
	for range 10 {
		// Refused by another rule with the queue at 1: far under the
		// target, callers refused, but the limit did not bind.
		c.Advance(frontInterval)
		f.queue.Store(1)
		g.front.read(int64(c.Now().Sub(time.Unix(0, 0))), false)
		g.front.refused.Add(5)
		g.front.take(&Sample{Count: 10, AvgRTT: time.Millisecond}, 0)
	}
	if got := g.FrontLimit(); got != l0 {
		t.Fatalf("front limit %d after refusals under it, want %d", got, l0)
	}
}

// Busy reads the process's CPU time: after this goroutine has burnt some,
// the share is positive (Unix systems; elsewhere it reports false).
func TestSchedulerLatencyBusy(t *testing.T) {
	s := NewSchedulerLatency()
	start, ok := processCPU()
	if !ok {
		if _, ok := s.Busy(); ok {
			t.Fatal("Busy reports a share where the process's CPU time cannot be read")
		}
		t.Skip("no process CPU time on this platform")
	}
	var sink [32]byte
	for cpu := start; cpu-start < 20*time.Millisecond; cpu, _ = processCPU() {
		for range 1000 {
			sink = sha256.Sum256(sink[:])
		}
	}
	share, ok := s.Busy()
	if !ok || share <= 0 {
		t.Fatalf("Busy() = %v, %v after 20 ms of CPU", share, ok)
	}
}

// A service whose requests hardly use a CPU (an I/O-bound one) gains
// nothing from refusals at the front: a refusal costs about as much CPU as
// serving. While the process's CPU time per arrival stays under frontWork
// of the floor, the front refuses nothing, however long the run queue; once
// the requests cost CPU again, it refuses at its limit.
func TestFrontRefusesNothingForAnIOBoundService(t *testing.T) {
	f := &busyFront{busy: 0.9}
	f.delay, f.n = 5*frontMinTarget, 100
	g, c := newFrontGate(t, f)
	procs := float64(runtime.GOMAXPROCS(0))
	floor := 20 * time.Millisecond
	// 0.9 of the processors for 100 ms over `arrivals`, against the floor.
	window := func(arrivals int) {
		g.front.take(&Sample{Window: 100 * time.Millisecond, Count: arrivals, MinRTT: floor, AvgRTT: floor}, floor)
	}
	try := func() bool { return tryFront(g, c) }
	io := int(math.Ceil(0.9 * procs * 0.1 / (frontWork / 2 * floor.Seconds()))) // half of frontWork
	for range 3 {
		window(io)
	}
	f.queue.Store(1 << 20)
	for i := range 50 {
		if !try() {
			t.Fatalf("arrival %d refused at the front of an I/O-bound service (work %.4f, front limit %d)", i, g.front.work, g.FrontLimit())
		}
	}
	// The same process spending 20 ms of CPU per arrival: the front refuses.
	cpu := int(0.9 * procs * 0.1 / floor.Seconds())
	for range 10 {
		window(cpu)
	}
	if g.front.work < frontWork || try() {
		t.Fatalf("admitted with a run queue of %d (work %.3f, front limit %d)", f.queue.Load(), g.front.work, g.FrontLimit())
	}
}

// tryFront is one arrival frontInterval after the last (so that it reads the
// queue afresh), released at once if admitted.
func tryFront(g *Limiter, c *clock.Manual) bool {
	c.Advance(frontInterval)
	tok, ok := g.TryAcquire()
	if ok {
		tok.Success()
	}
	return ok
}

// TestFrontDrainRuleAllowsTheRunningRequestsTime: with a floor F, the
// drain rule refuses only once the queue has not drained for frontDrain
// plus F/GOMAXPROCS: a queue cannot drain before one of the running
// requests ends, and one of 10 ms on one core keeps every arrival behind it
// waiting for most of that.
func TestFrontDrainRuleAllowsTheRunningRequestsTime(t *testing.T) {
	f := &fakeFront{}
	g, c := newFrontGate(t, f)
	const floor = 12 * time.Millisecond
	f.delay, f.n = 2*frontMinTarget, 100
	g.front.take(&Sample{Count: 10, AvgRTT: floor}, floor)
	if !g.front.waiting.Load() {
		t.Fatal("the drain rule is not on")
	}
	f.n = 0
	f.queue.Store(0)
	tryFront(g, c) // drained now
	f.queue.Store(int64(frontMin * runtime.GOMAXPROCS(0)))
	allowed := frontDrain + floor/time.Duration(runtime.GOMAXPROCS(0))
	want := int(allowed / frontInterval)
	var admitted int
	for range want {
		if tryFront(g, c) {
			admitted++
		}
	}
	if admitted != want {
		t.Fatalf("admitted %d of the %d arrivals within %v of the last drained reading", admitted, want, allowed)
	}
	if tryFront(g, c) {
		t.Fatalf("admitted with a queue that has not drained for %v", allowed+frontInterval)
	}
}

// TestFrontDrainRuleFollowsGOMAXPROCS: the drained mark (frontMin
// goroutines per processor) follows GOMAXPROCS changed at run time, from
// the next window on: with twice the processors, a queue of frontMin per
// old processor is drained, and one of frontMin per new processor is not.
func TestFrontDrainRuleFollowsGOMAXPROCS(t *testing.T) {
	f := &fakeFront{}
	g, c := newFrontGate(t, f)
	procs := runtime.GOMAXPROCS(0)
	defer runtime.GOMAXPROCS(procs)
	runtime.GOMAXPROCS(2 * procs)
	f.delay, f.n = 2*frontMinTarget, 100
	g.front.take(&Sample{Count: 10, AvgRTT: time.Millisecond}, 0)
	if !g.front.waiting.Load() {
		t.Fatal("the drain rule is not on")
	}
	f.n = 0
	f.queue.Store(int64(frontMin * procs))
	for i := range 4 * int(frontDrain/frontInterval) {
		if !tryFront(g, c) {
			t.Fatalf("arrival %d refused with %d goroutines runnable on %d processors", i, frontMin*procs, 2*procs)
		}
	}
	f.queue.Store(int64(frontMin * 2 * procs))
	for range 2 * int(frontDrain/frontInterval) {
		tryFront(g, c)
	}
	if tryFront(g, c) {
		t.Fatalf("admitted after %v of %d goroutines runnable on %d processors", 2*frontDrain, frontMin*2*procs, 2*procs)
	}
}
