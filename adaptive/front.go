package adaptive

import (
	"math"
	"runtime"
	"runtime/metrics"
	"sync"
	"sync/atomic"
	"time"
)

// FrontSignal measures the queue in front of a gate: the requests that wait
// before they reach it. A Go process that is out of CPU queues there, as
// goroutines waiting for a CPU, where no round-trip time the gate measures
// can see it (see WithFrontSignal).
type FrontSignal interface {
	// Queue returns how many wait in front of the gate now. The gate calls
	// it at most every 250 µs, and before each refusal of the drain rule
	// (see WithFrontSignal), from any goroutine, one at a time.
	Queue() int
	// Delay returns the mean time the requests that left the queue since
	// the previous call waited in it, and how many waits the mean covers
	// (0: none observed; the mean is then meaningless). The gate calls it
	// once per sampling window, from one goroutine at a time.
	Delay() (mean time.Duration, n int)
}

// SchedulerLatency is the FrontSignal of a Go process: the queue is the
// goroutines waiting for a CPU (runtime/metrics
// /sched/goroutines/runnable:goroutines), the delay the time they waited
// (/sched/latencies:seconds, as a difference between two reads). A CPU-bound
// request's goroutine waits there before any middleware runs; a process that
// waits on a slow dependency has idle CPUs, an empty run queue and a
// scheduler latency of microseconds.
//
// What it cannot see: bytes waiting in a socket buffer before the runtime's
// network poller notices them (while every CPU is busy the poller may run
// only every 10 ms), connections in the kernel's accept backlog, and queues
// outside the process (a load balancer, a proxy). It sees goroutines that
// are not requests too (a burst of timers, a batch job): they delay the
// requests behind them just the same.
//
// A Queue read costs about 0.2 µs, a Delay or Exceeds read about 0.5 µs. A
// SchedulerLatency is safe for concurrent use; Delay and Exceeds measure
// since the previous call of either, and Busy since its previous call, so
// give each consumer its own.
type SchedulerLatency struct {
	mu       sync.Mutex
	hist     [1]metrics.Sample
	prev     []uint64
	diff     []uint64
	mids     []float64 // bucket midpoints, seconds
	lows     []float64 // bucket lower bounds, seconds
	qmu      sync.Mutex
	runnable [1]metrics.Sample
	bmu      sync.Mutex
	cpu      time.Duration // the process's CPU time at the previous Busy call
	wall     time.Time     // and the wall time
}

// NewSchedulerLatency returns the Go scheduler's FrontSignal; its first
// Delay or Exceeds call measures from the moment it was created.
func NewSchedulerLatency() *SchedulerLatency {
	s := new(SchedulerLatency)
	s.hist[0].Name = "/sched/latencies:seconds"
	s.runnable[0].Name = "/sched/goroutines/runnable:goroutines"
	s.mu.Lock()
	s.readLocked()
	s.mu.Unlock()
	s.cpu, _ = processCPU()
	s.wall = time.Now()
	return s
}

// Busy returns the share of its processors (GOMAXPROCS) the process kept
// busy since the previous Busy call (or since NewSchedulerLatency): its CPU
// time, user and system, every thread, over the wall time × GOMAXPROCS. It
// may exceed 1 (the kernel's work for the process, threads outside the
// processors). false where the process's CPU time cannot be read (not a
// Unix system). One getrusage call, about 1 µs.
func (s *SchedulerLatency) Busy() (share float64, ok bool) {
	cpu, ok := processCPU()
	if !ok {
		return 0, false
	}
	now := time.Now()
	s.bmu.Lock()
	defer s.bmu.Unlock()
	cpu0, wall := s.cpu, now.Sub(s.wall)
	s.cpu, s.wall = cpu, now
	if wall <= 0 {
		return 0, false
	}
	return float64(cpu-cpu0) / (float64(wall) * float64(runtime.GOMAXPROCS(0))), true
}

// Queue returns the number of goroutines waiting for a CPU (0 when the
// runtime does not report it).
func (s *SchedulerLatency) Queue() int {
	s.qmu.Lock()
	defer s.qmu.Unlock()
	metrics.Read(s.runnable[:])
	if s.runnable[0].Value.Kind() != metrics.KindUint64 {
		return 0
	}
	return int(min(s.runnable[0].Value.Uint64(), math.MaxInt32))
}

// readLocked reads the histogram and leaves in s.diff the counts observed
// since the previous read; false when there is nothing to compare (the
// first read, or a runtime without the metric).
func (s *SchedulerLatency) readLocked() bool {
	metrics.Read(s.hist[:])
	if s.hist[0].Value.Kind() != metrics.KindFloat64Histogram {
		return false
	}
	h := s.hist[0].Value.Float64Histogram()
	return s.observe(h.Counts, h.Buckets)
}

// observe takes a cumulative histogram (bucket i spans buckets[i] to
// buckets[i+1]) and leaves in s.diff the counts added since the previous
// one; false for the first, which only sets the baseline.
func (s *SchedulerLatency) observe(counts []uint64, buckets []float64) bool {
	if len(s.prev) != len(counts) {
		s.prev = make([]uint64, len(counts))
		s.diff = make([]uint64, len(counts))
		s.mids = make([]float64, len(counts))
		s.lows = make([]float64, len(counts))
		for i := range counts {
			lo, hi := buckets[i], buckets[i+1]
			if math.IsInf(lo, -1) {
				lo = min(hi, 0)
			}
			if math.IsInf(hi, 1) {
				hi = lo
			}
			s.lows[i], s.mids[i] = lo, (lo+hi)/2
		}
		copy(s.prev, counts)
		return false
	}
	for i, c := range counts {
		s.diff[i] = c - s.prev[i]
		s.prev[i] = c
	}
	return true
}

// Delay returns the mean time goroutines waited for a CPU since the
// previous Delay or Exceeds call, and how many waits it covers (the runtime
// times a sample of the waits, about one in eight).
func (s *SchedulerLatency) Delay() (mean time.Duration, n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.readLocked() {
		return 0, 0
	}
	return s.mean()
}

// mean is the mean wait and the number of waits in s.diff.
func (s *SchedulerLatency) mean() (time.Duration, int) {
	var total uint64
	var sum float64
	for i, c := range s.diff {
		total += c
		sum += float64(c) * s.mids[i]
	}
	if total == 0 {
		return 0, 0
	}
	return time.Duration(sum / float64(total) * 1e9), int(min(total, math.MaxInt32))
}

// Exceeds reports whether, since the previous Delay or Exceeds call, the
// q-quantile of the time goroutines waited for a CPU lay above threshold:
// whether more than (1 − q) of the waits fell in histogram buckets starting
// at or above it.
func (s *SchedulerLatency) Exceeds(q float64, threshold time.Duration) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.readLocked() && s.exceeds(q, threshold)
}

// exceeds reports whether more than (1 − q) of the waits in s.diff fell in
// buckets starting at or above threshold.
func (s *SchedulerLatency) exceeds(q float64, threshold time.Duration) bool {
	th := threshold.Seconds()
	var total, above uint64
	for i, c := range s.diff {
		total += c
		if s.lows[i] >= th {
			above += c
		}
	}
	return total > 0 && float64(above) > (1-q)*float64(total)
}

// front is the gate's limit on the queue in front of it: an arrival is
// refused while Queue() is at or above the front limit, and the limit is
// learnt, once per window, from the mean wait in that queue by the gradient
// rule:
//
//	limit' = limit · max(target / delay, ½)      delay > target
//	       = limit · min(0.9·target / delay, 2)  delay < 0.9·target and the limit refused
//	         (at least limit + 1, at most        callers
//	         twice the longest queue read)
//	       = limit                               otherwise
//	target = max(frontMinTarget, k · RTT)
//	k      = frontLoose − (frontLoose − frontTight) · min(1, pressure / frontHeavy)
//
// where RTT is the window's mean round-trip time (the service's own time:
// a CPU-bound request runs to completion once past the gate) and pressure
// the smoothed share of arrivals the front limit refused. While few are
// refused a queue of a few service times is the normal jitter of a busy
// process and refusing would cost goodput; under real overload a queue buys
// no throughput, only latency, and it is held to about one service time.
// The limit counts goroutines, not work: a service whose many goroutines
// each need microseconds (handlers waking from I/O) may have a long run
// queue and a short wait, and the limit then doubles per window until the
// wait, not the count, binds.
// The queue is read afresh at most every frontInterval, so a burst is
// refused as soon as it queues, without waiting for a window.
//
// A second rule bounds what no reading can see: while goroutines wait for
// a CPU (the last window's mean wait over frontMinTarget, until it falls
// under a quarter of it while the process keeps less than frontBusy of its
// processors busy), arrivals are also refused while the queue has
// not drained (no reading under frontMin goroutines per processor) for
// frontDrain plus floor/GOMAXPROCS (the running requests' own share); a
// spell of more than frontDrain without a reading in which the process
// kept less than frontIdle of its processors busy is a spell without
// work, and counts as drained. A processor polls the network only when it
// runs out of goroutines, else sysmon does, about every 10 ms; a queue that never
// drains keeps requests waiting unseen in their sockets (see frontDrain).
// Its refusals are what drain the queue, so before each one it reads the
// queue afresh, not a reading up to frontInterval old (two alternated pairs,
// 2x warm / cold: HTTP on one core 74–86 → 87–90%, on two 63–78 → 77–86%;
// gRPC 77–86 → 70–84%, a loss within its run-to-run spread). Measured with
// bench/cmd/realload, 1 ms of CPU per request at 2x, warm / cold, % of the
// capacity measured in the same run within a 10 ms SLO:
// HTTP on one core, gradient 34.7 / 34.4 without the rule (p50 11 ms: the
// poll period) and 97.0 / 91.4 with it (p50 3.5 ms), 0.3% refused at 0.7x;
// two cores 90.8 / 84.3. The rule counts goroutines: an I/O-heavy service at
// 70% of its CPU (10k requests/s sleeping 20 ms) seldom reads drained when a
// request arrives, in the batch the poller made runnable with it, and the
// rule ungated refused 96–99% there at 0.7x; gated by the wait, 59%,
// against 40% with no front limit at all (the rest is the gate's own
// limit). Gated by the wait alone the rule switched itself off: it keeps
// the queue draining, so the wait fell, and the next 50–100 ms of overload
// came in unseen (gRPC, one core, 2x: 50–56%); held on while the CPU is
// busy, 67–80% (bench/README.md). An I/O-heavy service whose CPU is busy
// too was refused more by that hold (the io row at 0.7x: 43% → 75%).
//
// Neither rule refuses anything while the requests hardly use a CPU (the
// process's CPU time per arrival under frontWork of the floor): a refusal
// then costs about what serving costs, so no refusal can drain a queue for
// the CPU; the front limit then reads math.MaxInt.
type front struct {
	sig   FrontSignal
	queue atomic.Int64 // the last reading
	limit atomic.Int64 // refuse while queue >= limit
	due   atomic.Int64 // ns since the gate's epoch: the next reading
	busy  atomic.Bool
	// drained: when a reading last found the queue drained, under
	// drainedAt = frontMin per processor: at most a request's own helper
	// goroutine beside each running one (ns since the gate's epoch).
	// drainedAt follows GOMAXPROCS, read once per window.
	drained   atomic.Int64
	drainedAt atomic.Int64
	// drainAfter: how long the queue may stay undrained before the drain
	// rule refuses (ns): frontDrain beyond the floor's share of a
	// processor (see frontDrain). Set once per window.
	drainAfter atomic.Int64
	// waiting: goroutines wait for a CPU (the last window's mean wait
	// over frontMinTarget; off again under a quarter of it): only then
	// does an undrained queue mean requests unseen in their sockets.
	waiting atomic.Bool

	refused atomic.Int64 // front refusals in the gate's current window
	peak    atomic.Int64 // the longest queue read in the gate's current window

	// cpu is sig's Busy, when it has one (a *SchedulerLatency does).
	cpu interface{ Busy() (float64, bool) }
	// inFlight is the gate's InFlight, read only where cpu cannot tell
	// (see idleSpell).
	inFlight func() int

	// Guarded by the gate's flush.
	limitF   float64
	pressure float64
	cpuBusy  float64 // the smoothed Busy share
	// work: the process's CPU time per arrival over the service's floor,
	// smoothed; −1 until measured (see frontWork).
	work float64
}

// The tuned numbers of the front limit, in one table.
const (
	// frontInterval: the queue is read at most this often (a read is
	// ~0.2 µs: at most 0.1% of a core), so a burst is seen within a
	// fraction of a 1 ms request; and before each refusal of the drain
	// rule, which costs a hundred times more than the read.
	frontInterval = 250 * time.Microsecond
	// frontMinTarget: waits for a CPU below this are the scheduling noise
	// of a healthy process and never shrink the limit.
	frontMinTarget = time.Millisecond
	// frontLoose, frontTight, frontHeavy: the mean wait tolerated, in
	// round-trip times, from few refused to frontHeavy of the arrivals
	// refused (see front).
	frontLoose = 4.0
	frontTight = 1.0
	frontHeavy = 0.3
	// frontInitial: the starting limit, per processor (GOMAXPROCS);
	// frontMin: the least limit (a request's own helper goroutines, such
	// as net/http's background reader, may be runnable beside it).
	frontInitial = 4
	frontMin     = 2
	// frontDrain: the longest the queue may go without draining (a
	// reading under frontMin per processor, or a spell without readings
	// without work: see idleSpell), beyond the floor's share of a
	// processor, before arrivals are refused until it does.
	// The runtime polls the network when a processor finds no goroutine
	// to run, and otherwise only from sysmon, about every 10 ms: while
	// the run queue never empties, a request's bytes wait in the socket
	// for up to 10 ms before any goroutine — and so any gate — can see
	// them (bench/cmd/netpollwait: a ping's median 14 ms against 1 ms when
	// the same CPU load lets the queue empty every millisecond), and no
	// signal inside the process measures that wait. Half the poll period
	// keeps the processors going idle, and so polling, more often than
	// sysmon would.
	// It counts beyond the running requests' own time: a queue cannot
	// drain before one of them ends, on average a floor divided by the
	// processors (GOMAXPROCS), so the rule waits frontDrain plus that.
	// With frontDrain alone, a request of 10 ms of CPU on one core made
	// every arrival during its second half a refusal (gRPC's readers wait
	// runnable behind it): the process used 88–89% of its CPU at 2x from
	// a cold start (HTTP, whose readers are not runnable: 99%). Two alternated
	// pairs of realload against frontDrain alone (gradient, vegas and
	// shed, 2x warm and cold, medians of 12 cells): gRPC one core 10 ms
	// 84.6 → 92.1% of capacity, 1 ms 87.9 → 90.1%; HTTP one core 1 ms
	// 87.5 → 89.7%, two cores 1 ms 83.9 → 86.0% (bench/README.md).
	frontDrain = 5 * time.Millisecond
	// frontBusy: the drain rule, once on, stays on while the process
	// keeps this share of its processors busy (SchedulerLatency.Busy,
	// smoothed), however short the waits for a CPU. The rule itself keeps
	// the run queue draining, so the wait it was switched on by falls
	// under frontMinTarget/4 while it works: switched off by the wait
	// alone it let the next 50–100 ms of overload in unseen (gRPC on one
	// core: p50 of the served 30–55 ms in those spells, goodput 55–65%).
	// A CPU-bound process at 0.7× uses 60–75% of its CPU (realload's
	// traces, the kernel's work included); at 2× with the rule working,
	// 85–100%. An I/O-heavy one near its CPU capacity is busy too, and the
	// hold then refuses it more (bench/README.md: the io row).
	frontBusy = 0.85
	// frontIdle: a spell without readings of the queue in which the
	// process kept less than this share of its processors busy had idle
	// processors, which poll the network: it counts as drained. Half,
	// between an overloaded process with starved readers (85–100%, see
	// frontBusy) and the quiet after an overload.
	frontIdle = 0.5
	// frontSmooth: the weight of a window in the smoothed pressure and
	// Busy share (about the last three windows).
	frontSmooth = 0.3
	// frontWork: the front refuses nothing while the process's CPU time
	// per arrival (served or refused, GC and runtime included) is under
	// this share of the service's floor: the requests hardly use a CPU (an
	// I/O-bound service: 40 µs of HTTP for a 20 ms wait, 0.002), a refusal
	// costs about as much CPU as serving one (realload's io traces: 40–60
	// µs either way), so refusing cannot drain a queue for the CPU, only
	// fail requests: measured, 72–99.5% refused at 0.7× its capacity in
	// three runs. The CPU-bound services of the same traces showed 0.1 to 1
	// (1 ms and 10 ms of work, from 0.7× to 2×, refusals included), so a
	// fiftieth is ten times under the least of those and ten times over
	// the I/O service. Until the floor is known, the window's fastest
	// request stands in for it.
	frontWork = 0.02
)

func newFront(sig FrontSignal, inFlight func() int) *front {
	procs := runtime.GOMAXPROCS(0)
	f := &front{sig: sig, inFlight: inFlight, limitF: float64(frontInitial * procs), work: -1}
	f.cpu, _ = sig.(interface{ Busy() (float64, bool) })
	f.limit.Store(int64(f.limitF))
	f.drainedAt.Store(int64(frontMin * procs))
	f.drainAfter.Store(int64(frontDrain))
	return f
}

// pass reports whether an arrival at time now may go on to the gate: not
// while the queue is at the front limit, nor while it has not drained
// (under frontMin goroutines per processor) for frontDrain.
func (f *front) pass(now int64) bool {
	if now >= f.due.Load() {
		f.read(now, false)
	}
	q := f.queue.Load()
	if q >= f.limit.Load() {
		f.refused.Add(1)
		return false
	}
	if q >= f.drainedAt.Load() && f.waiting.Load() && now-f.drained.Load() > f.drainAfter.Load() {
		// The drain rule would refuse on a reading up to frontInterval
		// old; the queue may have drained since, and the refusals it
		// makes are what drains it: read afresh (a read is ~0.2 µs, a
		// refusal tens of µs).
		f.read(now, true)
		if f.queue.Load() >= f.drainedAt.Load() {
			f.refused.Add(1)
			return false
		}
	}
	return true
}

// read refreshes the queue reading when it is due (or now, if force); one
// goroutine at a time, the others go on with the last one.
func (f *front) read(now int64, force bool) {
	if f.busy.Load() || !f.busy.CompareAndSwap(false, true) {
		return
	}
	defer f.busy.Store(false)
	if now < f.due.Load() && !force {
		return
	}
	prev := f.due.Load() - int64(frontInterval) // the previous reading
	f.due.Store(now + int64(frontInterval))
	q := int64(f.sig.Queue())
	f.queue.Store(q)
	if q > f.peak.Load() {
		f.peak.Store(q)
	}
	if q < f.drainedAt.Load() || now-prev > int64(frontDrain) && f.idleSpell() {
		// A reading comes with every arrival that finds one due, so a gap
		// of more than frontDrain between two is either a spell without
		// arrivals or one in which the goroutines that read the queue
		// were starved of a CPU (behind requests that each need a time
		// slice, or while the run queue never drains). Only the first is
		// a drained queue: counting it as undrained refused the first
		// request after an overload on the goroutines its own new
		// connection had just made runnable (gRPC's tap handle reads the
		// queue while they are); counting the second as drained switched
		// the rule off where it was needed most (see idleSpell).
		f.drained.Store(now)
	}
}

// idleSpell reports whether a spell of more than frontDrain without a
// reading of the queue was one without work: the process kept less than
// frontIdle of its processors busy since the last measurement of its CPU
// (the last window's close, or the last such spell), or, with a signal
// that cannot measure it, the gate holds no token now. The token alone is
// weak evidence: with requests shorter than the spell, the last one may
// have just ended (HTTP on two cores with 1 ms of work at 2x lost 3–8
// points of goodput to it).
func (f *front) idleSpell() bool {
	if f.cpu != nil {
		if b, ok := f.cpu.Busy(); ok {
			return b < frontIdle
		}
	}
	return f.inFlight() == 0
}

// take moves the window's front figures into s and learns the next limit
// (see front); floor is the gate's floor (its mean; 0 while unknown).
func (f *front) take(s *Sample, floor time.Duration) {
	s.FrontRefused = int(f.refused.Swap(0))
	peak := float64(f.peak.Swap(0))
	lat, n := f.sig.Delay()
	s.FrontDelay = lat
	procs := runtime.GOMAXPROCS(0)
	f.drainedAt.Store(int64(frontMin * procs))
	f.drainAfter.Store(int64(frontDrain + floor/time.Duration(procs)))
	// The arrivals that passed are the window's other outcomes: counted
	// already, so the admission path writes no counter of its own.
	passed := s.Count + s.Dropped + s.Rejected
	if all := float64(s.FrontRefused + passed); all > 0 {
		f.pressure += frontSmooth * (float64(s.FrontRefused)/all - f.pressure)
	}
	if f.cpu != nil {
		if b, ok := f.cpu.Busy(); ok {
			f.cpuBusy += frontSmooth * (b - f.cpuBusy)
			f.noteWork(b, s, floor, procs)
		}
	}
	if 0 <= f.work && f.work < frontWork {
		// An I/O-bound service: refusing frees no CPU (see frontWork).
		f.waiting.Store(false)
		f.limit.Store(math.MaxInt)
		return
	}
	if n > 0 {
		switch {
		case lat > frontMinTarget:
			f.waiting.Store(true)
		case lat < frontMinTarget/4 && f.cpuBusy < frontBusy:
			f.waiting.Store(false)
		}
	}
	if s.Count == 0 || n == 0 {
		return
	}
	k := frontLoose - (frontLoose-frontTight)*min(1, f.pressure/frontHeavy)
	target := max(float64(frontMinTarget), k*float64(s.AvgRTT))
	switch d := float64(lat); {
	case d > target:
		f.limitF *= max(target/d, 0.5)
	case d < 0.9*target && s.FrontRefused > 0:
		grow := 2.0
		if d > 0 {
			grow = min(grow, 0.9*target/d)
		}
		f.limitF = min(max(f.limitF*grow, f.limitF+1), max(f.limitF, 2*peak))
	}
	f.limitF = max(f.limitF, frontMin)
	f.limit.Store(int64(math.Round(f.limitF)))
}

// noteWork smooths the process's CPU time per arrival over the floor (see
// frontWork), from the window's Busy share b of procs processors.
func (f *front) noteWork(b float64, s *Sample, floor time.Duration, procs int) {
	if floor <= 0 {
		floor = s.MinRTT
	}
	all := s.FrontRefused + s.Count + s.Dropped + s.Rejected
	if floor <= 0 || all == 0 || s.Window <= 0 {
		return
	}
	cpu := b * float64(procs) * s.Window.Seconds()
	w := cpu / (float64(all) * floor.Seconds())
	if f.work < 0 {
		f.work = w
	}
	f.work += frontSmooth * (w - f.work)
}

// FrontLimit returns the limit on the queue in front of the gate: arrivals
// are refused while the FrontSignal's Queue() is at or above it (see
// WithFrontSignal). It is 0 when the gate has no front signal, and
// math.MaxInt while the service's requests hardly use a CPU, so that
// refusing them would free none.
func (l *Limiter) FrontLimit() int {
	if l.front == nil {
		return 0
	}
	return int(l.front.limit.Load())
}
