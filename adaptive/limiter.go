package adaptive

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice/clock"
	"github.com/sluicehq/sluice/metrics"
)

// Algorithm decides the concurrency limit from what the gate measured.
//
// The gate calls Update once per closed sampling window, from one goroutine
// at a time, so an Algorithm needs no locking of its own; it must not be
// shared between gates. Update returns the new limit; the gate keeps it
// within its [min, max] limits (WithMinLimit, WithMaxLimit).
//
// An Algorithm that also has a method Validate() error is validated by New,
// so an algorithm built with bad options makes New fail with its error
// (joined with those of the gate's options). An Algorithm that keeps state
// also implements Binder, so that New refuses to give it a second gate.
type Algorithm interface {
	// InitialLimit is the limit the gate starts with.
	InitialLimit() int
	// Update returns the limit for the next window, given the last one.
	Update(s Sample) int
}

// A Binder is an Algorithm that keeps state of its own and so can drive one
// gate only (Gradient, Vegas and AIMD are Binders; Fixed keeps none). New
// calls Bind once every option has passed, just before it returns the gate,
// and fails with Bind's error: an algorithm that already drives a gate
// cannot drive another. A New that fails for another reason does not bind
// the algorithm. Embed Binding to implement it.
type Binder interface {
	// Bind claims the algorithm for a new gate, or returns an error (wrapping
	// ErrAlgorithmBound) if a gate has claimed it before.
	Bind() error
}

// ErrAlgorithmBound is the error of New for an algorithm that already
// drives another gate (see Binder): build one algorithm per gate.
var ErrAlgorithmBound = errors.New("sluice/adaptive: the algorithm already drives another gate; build one per gate")

// Binding implements Binder for the Algorithm that embeds it: the first
// Bind succeeds, every later one fails with ErrAlgorithmBound. It is safe
// for concurrent use. The zero Binding is unbound.
type Binding struct{ bound atomic.Bool }

// Bind claims the algorithm for one gate; it fails with ErrAlgorithmBound
// if it was claimed before.
func (b *Binding) Bind() error {
	if !b.bound.CompareAndSwap(false, true) {
		return ErrAlgorithmBound
	}
	return nil
}

// The errors of Acquire. Every refusal wraps ErrLimitExceeded, so
// errors.Is(err, ErrLimitExceeded) tells a refusal from a cancelled context.
var (
	// ErrLimitExceeded: the gate was full and it has no queue.
	ErrLimitExceeded = errors.New("sluice: concurrency limit reached")
	// ErrQueueFull: the gate and its wait queue were both full.
	ErrQueueFull = fmt.Errorf("%w: wait queue full", ErrLimitExceeded)
	// ErrDeadlineUnmeetable: the caller's deadline would pass before the
	// request could wait its turn and be served, so it was refused at once.
	ErrDeadlineUnmeetable = fmt.Errorf("%w: deadline cannot be met at the current queueing delay", ErrLimitExceeded)
	// ErrQueueTimeout: the caller waited in the queue longer than allowed.
	ErrQueueTimeout = fmt.Errorf("%w: waited too long in the queue", ErrLimitExceeded)
	// ErrFrontQueue: requests wait too long before they reach the gate (the
	// process is out of CPU), and this one was among those refused to
	// shorten that queue (see WithFrontSignal).
	ErrFrontQueue = fmt.Errorf("%w: requests wait too long before reaching the gate", ErrLimitExceeded)
)

// Limiter is an adaptive concurrency gate: at most Limit() requests hold a
// token at once, and an Algorithm moves the limit from the round-trip times,
// drops and in-flight counts the gate measures.
//
// The gate is exact: a token is granted only when fewer than Limit() tokens
// are held, decided in one atomic step on a word holding both numbers, so
// in-flight never exceeds the limit through admission, also while the limit
// moves. When the limit shrinks below the number in flight, nothing is
// admitted until enough tokens come back.
//
// Measurements are aggregated per sampling window with atomics; the release
// that finds the window due closes it and calls Algorithm.Update. There is no
// background goroutine or timer, so a gate on a clock.Manual is driven
// entirely by its callers. TryAcquire followed by a release takes no mutex
// and allocates nothing when the gate has no waiters and no partitions.
//
// A Limiter is safe for concurrent use.
type Limiter struct {
	h        *hot         // the admission word, alone on its cache line
	win      *shards      // the window's accumulators
	hist     *histogram   // nil unless WithPercentile
	waiters  atomic.Int64 // callers in the queue; read on every request, rarely written
	due      atomic.Int64 // when the window may close, ns since epoch; written once per window
	since    clock.Elapsed
	clk      clock.Clock
	sys      bool // clk is a real clock: queue bounds also arm timers
	sysClock bool // clk is clock.System(): read time.Since directly
	epoch    time.Time
	alg      Algorithm
	obs      metrics.GateObserver
	q        *queue
	parts    *partitions
	front    *front // nil: no front signal
	minLim   int64
	maxLim   int64
	minWin   int64
	maxWin   int64
	minSamp  int64
	pct      float64

	flushing     atomic.Bool
	winStart     atomic.Int64 // ns since epoch
	lastRTT      atomic.Int64 // mean RTT of the last window with samples, ns
	first        atomic.Int64 // 1 + the admission of the first request released; 0: none yet
	overreleases atomic.Int64

	// The model of the service (model.go): guarded by flushing, published
	// for Floor, Throughput and Probing.
	mdl      model
	prober   bool // the algorithm asked for probes (FloorProber)
	floorPub atomic.Int64
	thrPub   atomic.Uint64 // float64 bits
	probePub atomic.Bool
}

// The admission word holds in-flight in its high half and the limit in its
// low half. A release subtracts oneInFlight; releasing more than was
// acquired makes the word negative (in-flight never exceeds MaxInt32), which
// is detected and undone without ever touching the limit.
const (
	limitMask   = 1<<32 - 1
	oneInFlight = 1 << 32
	// minusOneInFlight is −oneInFlight in two's complement.
	minusOneInFlight = 1<<64 - oneInFlight
)

// unpack splits the admission word into limit and in-flight.
func unpack(s uint64) (limit, inFlight int64) {
	return int64(s & limitMask), int64(s) >> 32
}

// New returns a gate whose limit is driven by alg, starting at
// alg.InitialLimit(). It returns an error naming every invalid option, its
// own and those of alg when alg has a Validate method, joined (when alg is
// invalid, its initial limit is not checked against the gate's bounds); and
// an error wrapping ErrAlgorithmBound when alg is a Binder that already
// drives another gate.
func New(alg Algorithm, opts ...Option) (*Limiter, error) {
	if alg == nil {
		return nil, errors.New("sluice/adaptive: New(nil): an algorithm is required")
	}
	var algErr error
	if v, ok := alg.(interface{ Validate() error }); ok {
		algErr = v.Validate()
	}
	cfg := defaultConfig()
	for _, o := range opts {
		if o != nil {
			o.apply(&cfg)
		}
	}
	initial := -1 // unknown: an invalid algorithm's may be meaningless
	if algErr == nil {
		initial = alg.InitialLimit()
	}
	if err := errors.Join(algErr, cfg.validate(initial)); err != nil {
		return nil, err
	}
	if b, ok := alg.(Binder); ok {
		if err := b.Bind(); err != nil {
			return nil, err
		}
	}
	l := &Limiter{
		clk:      cfg.clock,
		sys:      !isManual(cfg.clock),
		sysClock: cfg.clock == clock.System(),
		alg:      alg,
		obs:      cfg.observer,
		minLim:   int64(cfg.minLimit),
		maxLim:   int64(cfg.maxLimit),
		minWin:   int64(cfg.minWindow),
		maxWin:   int64(cfg.maxWindow),
		minSamp:  int64(cfg.minSamples),
		pct:      cfg.percentile,
	}
	if p, ok := alg.(FloorProber); ok {
		l.prober = p.ProbesFloor()
	}
	l.mdl = newModel(l.minLim, l.maxLim)
	l.since = clock.ElapsedOf(cfg.clock)
	l.epoch = l.clk.Now()
	l.h = new(hot)
	l.h.state.Store(uint64(initial))
	l.win = new(shards)
	l.win.reset()
	l.due.Store(l.minWin)
	if cfg.percentile > 0 {
		l.hist = new(histogram)
	}
	if cfg.queueCap > 0 {
		l.q = newQueue(l, &cfg)
	}
	if cfg.partitioned {
		l.parts = newPartitions(cfg.partitions)
	}
	if sig := cfg.frontSignal(); sig != nil {
		l.front = newFront(sig, l.InFlight)
	}
	return l, nil
}

// isManual reports a virtual clock, on which the queue must not arm real
// timers (time there moves only when told).
func isManual(c clock.Clock) bool {
	_, ok := c.(*clock.Manual)
	return ok
}

// now returns the gate's time: nanoseconds since it was created. On the
// system clock that is one monotonic clock read.
func (l *Limiter) now() int64 {
	if l.sysClock {
		return int64(time.Since(l.epoch))
	}
	return int64(l.since.Since(l.epoch))
}

// An exporter reads the gate's gauges through metrics.GateState.
var _ metrics.GateState = (*Limiter)(nil)

// Limit returns the current concurrency limit.
func (l *Limiter) Limit() int { return int(l.h.state.Load() & limitMask) }

// InFlight returns the number of tokens currently held.
func (l *Limiter) InFlight() int {
	_, n := unpack(l.h.state.Load())
	return int(max(n, 0)) // negative only for an instant, while an over-release is undone
}

// Queued returns the number of callers waiting in Acquire.
func (l *Limiter) Queued() int { return int(l.waiters.Load()) }

// Overreleases returns how many releases found nothing in flight to release
// (a token released twice, a bug in the caller); they are ignored. A double
// release while other tokens are held cannot be told from a real release: it
// frees another holder's slot.
func (l *Limiter) Overreleases() int64 { return l.overreleases.Load() }

// Clock returns the clock the gate reads (WithClock), so that a caller
// driving it in virtual time, as package sim does, can check it is its own.
func (l *Limiter) Clock() clock.Clock { return l.clk }

// Token is the right to one slot of the gate, held from a successful
// TryAcquire or Acquire until exactly one of Success, Dropped or Ignore is
// called. A Token is a small value; copying it does not copy the right, so
// release it once. Methods on the zero Token do nothing.
type Token struct {
	l     *Limiter
	start int64 // ns since the gate's epoch
	part  int32 // partition index + 1; 0 for none
}

// Success releases the token and records the time it was held as a
// round-trip-time sample.
func (t Token) Success() {
	if t.l != nil {
		t.l.release(t, succeeded)
	}
}

// Dropped releases the token and records a drop: the request timed out, was
// shed downstream or otherwise failed because of overload. Drops are a
// congestion signal and never count as latency samples.
func (t Token) Dropped() {
	if t.l != nil {
		t.l.release(t, dropped)
	}
}

// Ignore releases the token without recording anything, for requests whose
// outcome says nothing about the gate's capacity (the client went away, the
// request was invalid).
func (t Token) Ignore() {
	if t.l != nil {
		t.l.release(t, ignored)
	}
}

// TryAcquire returns a token if the gate has room, and never waits. It fails
// when the gate is full or, so as not to jump the queue, when callers are
// waiting in Acquire. With partitions, it is TryAcquire of the unnamed
// partition, which gets only capacity owed to no partition.
func (l *Limiter) TryAcquire() (Token, bool) { return l.tryAcquire(0) }

func (l *Limiter) observeTry(ok bool, part int32) {
	d := metrics.Admitted
	if !ok {
		d = metrics.Rejected
	}
	l.obs.GateDecision(d, l.partitionName(part), 0)
}

// tryAcquire is TryAcquire into partition part (0: none): the front limit,
// then the gate, counted and observed.
func (l *Limiter) tryAcquire(part int32) (Token, bool) {
	var tok Token
	ok, now := l.passFront()
	if ok {
		if tok, ok = l.tryGate(part, now); !ok {
			l.win.of().rejected.Add(1)
		}
	}
	if l.obs != nil {
		l.observeTry(ok, part)
	}
	return tok, ok
}

// PassFront reports whether an arrival may pass the front limit now
// (WithFrontSignal): false means TryAcquire and Acquire would refuse it with
// ErrFrontQueue before they look at the gate. It takes no token, so an
// arrival it lets pass must still call TryAcquire or Acquire, which check the
// front limit again; a refusal is counted and reported to the observer as
// theirs would be. A transport that can refuse before it spends anything on
// a request calls it there: gRPC's tap handle runs before the RPC has a
// goroutine or a decoded message (interceptors.GateInterceptors's Tap), and
// under CPU overload the front limit refuses most of the arrivals it sees. It
// is true when the gate has no front signal, and allocates nothing.
func (l *Limiter) PassFront() bool {
	ok, _ := l.passFront()
	if !ok && l.obs != nil {
		l.observeTry(false, 0)
	}
	return ok
}

// passFront applies the front limit (WithFrontSignal), if any, and returns
// the time it read, or −1 when it read none.
func (l *Limiter) passFront() (bool, int64) {
	if l.front == nil {
		return true, -1
	}
	now := l.now()
	return l.front.pass(now), now
}

// tryGate admits the caller into partition part (0: none) if the gate has
// room, and stamps the token with now (read afresh when negative).
func (l *Limiter) tryGate(part int32, now int64) (Token, bool) {
	var ok bool
	if l.parts != nil {
		ok = l.admitPartition(part)
	} else if l.waiters.Load() == 0 {
		ok = l.admit()
	}
	if !ok {
		return Token{}, false
	}
	if now < 0 {
		now = l.now()
	}
	return Token{l: l, start: now, part: part}, true
}

// admit takes a slot if in-flight is below the limit, in one compare-and-swap
// of the word that holds both.
func (l *Limiter) admit() bool {
	for {
		s := l.h.state.Load()
		if lim, n := unpack(s); n >= lim {
			return false
		}
		if l.h.state.CompareAndSwap(s, s+oneInFlight) {
			return true
		}
	}
}

// Acquire returns a token, waiting in the queue (WithQueue) while the gate is
// full. Without a queue it fails at once with ErrLimitExceeded. With one, it
// fails at once with ErrQueueFull when the queue is full, and with
// ErrDeadlineUnmeetable when ctx's deadline is sooner than the estimated wait
// plus the mean round-trip time (the wait is estimated by Little's law as
// (queued+1)·RTT/limit). While waiting it fails with ErrQueueTimeout past the
// queue's time bound, and with ctx.Err() when ctx ends; in both cases the gate
// is left as if the caller had never come.
func (l *Limiter) Acquire(ctx context.Context) (Token, error) {
	return l.acquire(ctx, 0)
}

func (l *Limiter) acquire(ctx context.Context, part int32) (Token, error) {
	if err := ctx.Err(); err != nil {
		return Token{}, err
	}
	ok, now := l.passFront()
	if !ok {
		if l.obs != nil {
			l.obs.GateDecision(metrics.Rejected, l.partitionName(part), 0)
		}
		return Token{}, ErrFrontQueue
	}
	if tok, ok := l.tryGate(part, now); ok {
		if l.obs != nil {
			l.obs.GateDecision(metrics.Admitted, l.partitionName(part), 0)
		}
		return tok, nil
	}
	if l.q == nil {
		l.win.of().rejected.Add(1)
		if l.obs != nil {
			l.obs.GateDecision(metrics.Rejected, l.partitionName(part), 0)
		}
		return Token{}, ErrLimitExceeded
	}
	return l.q.wait(ctx, part)
}

// outcome is how a token was given back, in the gate's own words: the
// request succeeded (its time held is a latency sample), was dropped (a
// congestion signal) or is ignored (no sample). Token's Success, Dropped and
// Ignore release with each; an observer sees it as a metrics.GateRelease.
type outcome uint8

const (
	succeeded outcome = iota
	dropped
	ignored
)

// label is the outcome as the observer's label.
func (o outcome) label() metrics.GateRelease {
	switch o {
	case succeeded:
		return metrics.Success
	case dropped:
		return metrics.Dropped
	}
	return metrics.Ignored
}

// release gives a token's slot back and records its outcome.
func (l *Limiter) release(t Token, kind outcome) {
	var now int64
	if kind != ignored || l.obs != nil {
		now = l.now()
	}
	sh := l.win.of()
	l.free(t.part, sh)
	full := false
	switch kind {
	case succeeded:
		full = sh.add(now-t.start, l.hist)
	case dropped:
		sh.drops.Add(1)
	}
	if l.obs != nil {
		l.obs.GateRelease(kind.label(), time.Duration(now-t.start))
	}
	if kind != ignored {
		if l.first.Load() == 0 {
			l.first.CompareAndSwap(0, t.start+1)
		}
		if now >= l.due.Load() || full {
			l.maybeFlush(now)
		}
	}
}

// free returns one slot (of partition part) and hands it to a waiter if any.
// sh is the window shard that records the in-flight peak.
func (l *Limiter) free(part int32, sh *shard) {
	if part > 0 {
		// Partition count first: between the two steps the partition looks
		// less used, which only makes admission of others more cautious.
		if l.parts.inFlight[part-1].Add(-1) < 0 {
			l.parts.inFlight[part-1].Add(1)
			l.overreleases.Add(1)
			return
		}
	}
	s := l.h.state.Add(minusOneInFlight)
	if int64(s) < 0 {
		// Released more than acquired: undo and count the misuse.
		l.h.state.Add(oneInFlight)
		l.overreleases.Add(1)
		return
	}
	// The in-flight count peaks right after an admission, so the next
	// release sees every peak: the window's maximum is tracked here, in the
	// release's shard, and never on the admission path.
	_, n := unpack(s)
	sh.noteInFlight(n + 1)
	// The decrement above and the enqueue's increment of waiters are both
	// sequentially consistent, so either the waiter sees the free slot or
	// this load sees the waiter: no lost wakeup.
	if l.waiters.Load() > 0 {
		l.q.drain()
	}
}

// maybeFlush closes the current window if it is due (or full) and feeds it
// to the algorithm. At most one goroutine flushes at a time; the others go on.
func (l *Limiter) maybeFlush(now int64) {
	if l.flushing.Load() || !l.flushing.CompareAndSwap(false, true) {
		return
	}
	defer l.flushing.Store(false)
	start := l.winStart.Load()
	minWin, maxWin := l.span()
	elapsed := now - start
	count, drops := l.win.count(), l.win.drops()
	if f := l.first.Load() - 1; l.mdl.born < 0 && f > start {
		// The gate's first window begins with its traffic: at the
		// admission of its first completed request, not when the gate
		// was made (a server made before its traffic would read a rate
		// spread over the wait: measured in a real process, 115/s for
		// 950/s, and the cold start's probe halved an I/O service's
		// limit against it).
		start, elapsed = f, now-f
		l.winStart.Store(f)
		l.due.Store(f + minWin)
	}
	if !l.win.full() {
		if elapsed < minWin {
			return // another goroutine closed it just now
		}
		if act := l.activeSince(now, elapsed, count, maxWin); act-start >= maxWin {
			// An idle gap: the window's oldest completed request was
			// admitted a whole maximum window after it began (a server
			// started before its traffic, or idle for a while). The
			// window begins at that admission instead, so that its rate
			// is the traffic's and not spread over the gap.
			l.winStart.Store(act)
			l.due.Store(act + minWin)
			return
		}
		if count+drops < l.minSamp && elapsed < maxWin {
			// Not enough yet: look again a little later rather than on
			// every release.
			l.due.Store(min(start+maxWin, now+max(minWin/16, 1)))
			return
		}
	}
	if count == 0 && drops == 0 {
		// A long window with no samples (only ignores): start afresh.
		l.winStart.Store(now)
		l.due.Store(now + minWin)
		return
	}
	s := Sample{At: time.Duration(now), Window: time.Duration(elapsed), Queued: int(l.waiters.Load())}
	st := l.h.state.Load()
	lim, n := unpack(st)
	s.Limit = int(lim)
	l.win.take(&s, l.hist, l.pct, max(n, 0))
	if l.front != nil {
		l.front.take(&s, time.Duration(l.mdl.floorMean))
	}
	l.winStart.Store(now)
	l.due.Store(now + minWin)
	if s.Count > 0 {
		l.lastRTT.Store(int64(s.AvgRTT))
	}
	next := l.learn(&s, now)
	l.setLimit(min(max(next, l.minLim), l.maxLim))
}

// span returns the window's least and greatest length: WithWindow's, or,
// for an algorithm that probes the floor (FloorProber), winRounds round
// trips at the floor when that is longer (see winRounds): the probe's
// levels are measured over whole requests. Other algorithms keep their
// windows exactly (per-request windows stay per request). It reads the
// model, so only the flushing goroutine calls it.
func (l *Limiter) span() (minWin, maxWin int64) {
	if !l.prober {
		return l.minWin, l.maxWin
	}
	r := winRounds * int64(l.mdl.floorMean)
	return max(l.minWin, r), max(l.maxWin, r)
}

// activeSince returns, for a window that lasted at least its maximum and
// completed count > 0 requests, the admission of its oldest completed
// request (now minus its slowest RTT); otherwise the window's start (no
// scan of the shards). A window of drops alone is never moved: its drops
// must reach the algorithm.
func (l *Limiter) activeSince(now, elapsed, count, maxWin int64) int64 {
	if elapsed < maxWin || count == 0 {
		return now - elapsed
	}
	return now - l.win.slowest()
}

// learn feeds the window to the model and the algorithm, runs the probe
// (model.go), and returns the next limit.
func (l *Limiter) learn(s *Sample, now int64) int64 {
	m := &l.mdl
	defer l.publish()
	if m.probe.on {
		next := m.stepProbe(s, now)
		m.fill(s)
		s.Probing = true
		l.alg.Update(*s) // told, not obeyed
		return next
	}
	m.observe(s, now)
	m.room.noteDemand(s)
	slow := m.slowed(s, now)
	switch {
	case !s.Saturated():
		m.satSince = -1
	case m.satSince < 0:
		m.satSince = now - int64(s.Window)
	}
	m.fill(s)
	next := min(max(int64(l.alg.Update(*s)), l.minLim), l.maxLim)
	if l.prober {
		next = max(next, m.keepRoom(s))
		if kind := m.want(s, now, slow); kind != noProbe {
			// Back, afterwards, to where the algorithm had the limit: the
			// window's, or less if it is cutting.
			next = m.start(s, now, min(next, int64(s.Limit)), kind)
		}
	}
	return next
}

// publish makes the model readable by Floor, Throughput and Probing.
func (l *Limiter) publish() {
	l.floorPub.Store(int64(l.mdl.floor))
	l.thrPub.Store(math.Float64bits(l.mdl.thr))
	l.probePub.Store(l.mdl.probe.on)
}

// Floor returns the service's floor as the gate measured it (see
// Sample.Floor): 0 until measured.
func (l *Limiter) Floor() time.Duration { return time.Duration(l.floorPub.Load()) }

// Throughput returns the service's throughput, in completions per second,
// as the gate measured it while saturated (see Sample.Throughput): 0 until
// the gate has been saturated.
func (l *Limiter) Throughput() float64 { return math.Float64frombits(l.thrPub.Load()) }

// Probing reports whether the gate is probing the service's floor, and so
// holds a limit of its own choosing (see FloorProber).
func (l *Limiter) Probing() bool { return l.probePub.Load() }

// setLimit moves the limit, keeping the in-flight count, and admits waiters
// if it grew.
func (l *Limiter) setLimit(limit int64) {
	var old int64
	for {
		s := l.h.state.Load()
		old, _ = unpack(s)
		if old == limit {
			return
		}
		if l.h.state.CompareAndSwap(s, s&^limitMask|uint64(limit)) {
			break
		}
	}
	if l.obs != nil {
		l.obs.GateLimit(int(old), int(limit))
	}
	// A larger limit frees slots; with partitions a smaller one can too (the
	// floors of the shares may drop by more than the limit), so drain.
	if (limit > old || l.parts != nil) && l.waiters.Load() > 0 {
		l.q.drain()
	}
}

// estimatedWait is Little's law applied to the queue: a caller joining behind
// queued others waits about (queued+1)·RTT/limit for a slot, where RTT is the
// mean round-trip time of the last window; then it needs RTT to be served.
// The result is that wait plus RTT, or 0 before any RTT was measured.
func (l *Limiter) estimatedWait() time.Duration {
	rtt := l.lastRTT.Load()
	lim := max(int64(l.Limit()), 1)
	q := l.waiters.Load()
	if rtt == 0 {
		return 0
	}
	wait := float64(q+1) * float64(rtt) / float64(lim)
	return time.Duration(math.Min(wait+float64(rtt), math.MaxInt64))
}
