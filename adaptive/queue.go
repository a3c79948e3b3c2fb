package adaptive

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/sluicehq/sluice/metrics"
)

// queue holds the callers of Acquire that wait for a slot. All fields but
// the waiter channels are guarded by mu.
type queue struct {
	l        *Limiter
	mu       sync.Mutex
	head     *waiter // oldest
	tail     *waiter // newest
	n        int
	capacity int
	order    QueueOrder
	timeout  int64 // ns; 0: none
	codel    bool
	target   int64 // ns
	interval int64 // ns
	// lastEmpty is the last time the queue was seen empty (ns since epoch).
	lastEmpty int64
	pool      sync.Pool
}

type waiter struct {
	prev, next *waiter
	queued     bool
	part       int32
	enq        int64      // when it joined, ns since epoch
	ch         chan grant // buffered: a grant never blocks the granter
}

type grant struct {
	tok Token
	err error
}

func newQueue(l *Limiter, cfg *config) *queue {
	q := &queue{
		l:        l,
		capacity: cfg.queueCap,
		order:    cfg.queueOrder,
		timeout:  int64(cfg.queueTimeout),
		codel:    cfg.codel,
		target:   int64(cfg.codelTarget),
		interval: int64(cfg.codelInterval),
	}
	q.pool.New = func() any { return &waiter{ch: make(chan grant, 1)} }
	return q
}

// maxWait is how long a waiter may stay in the queue at time now (0: no
// bound): the queue timeout, and with CoDel the smaller of that and the
// interval while the queue drains now and then, or the short target once it
// has not been empty for a whole interval.
// Requires q.mu held.
func (q *queue) maxWait(now int64) int64 {
	if !q.codel {
		return q.timeout
	}
	bound := q.interval
	if q.overloaded(now) {
		bound = q.target
	}
	if q.timeout > 0 {
		bound = min(bound, q.timeout)
	}
	return bound
}

// overloaded reports a standing queue: not empty at any moment of the last
// interval. Requires q.mu held.
func (q *queue) overloaded(now int64) bool {
	return q.codel && q.n > 0 && now-q.lastEmpty > q.interval
}

func (q *queue) push(w *waiter) {
	w.queued = true
	w.prev, w.next = q.tail, nil
	if q.tail != nil {
		q.tail.next = w
	} else {
		q.head = w
	}
	q.tail = w
	q.n++
	q.l.waiters.Add(1)
}

func (q *queue) remove(w *waiter, now int64) {
	if w.prev != nil {
		w.prev.next = w.next
	} else {
		q.head = w.next
	}
	if w.next != nil {
		w.next.prev = w.prev
	} else {
		q.tail = w.prev
	}
	w.prev, w.next, w.queued = nil, nil, false
	q.n--
	q.l.waiters.Add(-1)
	if q.n == 0 {
		q.lastEmpty = now
	}
}

// wait queues the caller until it is granted a slot, refused, or ctx ends.
func (q *queue) wait(ctx context.Context, part int32) (Token, error) {
	l := q.l
	name := l.partitionName(part)
	if dl, ok := ctx.Deadline(); ok {
		if dl.Sub(l.clk.Now()) < l.estimatedWait() || !dl.After(l.clk.Now()) {
			l.observe(ErrDeadlineUnmeetable, name, 0)
			return Token{}, ErrDeadlineUnmeetable
		}
	}
	q.mu.Lock()
	// Read the time under the lock: a release that moved the clock and then
	// waited for this lock must not see this waiter stamped earlier, or be
	// drained by it with an older time.
	now := l.now()
	q.expireLocked(now) // waiters past their bound do not count against capacity
	if q.n >= q.capacity {
		q.mu.Unlock()
		l.observe(ErrQueueFull, name, 0)
		return Token{}, ErrQueueFull
	}
	if q.n == 0 {
		q.lastEmpty = now
	}
	w := q.pool.Get().(*waiter)
	w.part, w.enq = part, now
	q.push(w)
	q.drainLocked(now) // a slot may have freed since tryAcquire failed
	var timeout <-chan time.Time
	if l.sys {
		// On a real clock, also wake up when the bound passes, so a waiter
		// is told even if no slot frees. (On a clock.Manual bounds are
		// enforced whenever the queue is drained.)
		if d := q.maxWait(now); d > 0 && w.queued {
			t := time.NewTimer(time.Duration(d))
			defer t.Stop()
			timeout = t.C
		}
	}
	q.mu.Unlock()

	select {
	case g := <-w.ch:
		return q.finish(w, g, name)
	case <-ctx.Done():
		return q.abandon(w, ctx.Err(), name)
	case <-timeout:
		return q.abandon(w, ErrQueueTimeout, name)
	}
}

// finish reports a waiter's grant or refusal and recycles the waiter.
func (q *queue) finish(w *waiter, g grant, name string) (Token, error) {
	l := q.l
	if g.err != nil {
		l.win.of().rejected.Add(1)
	}
	if l.obs != nil {
		l.obs.GateDecision(decision(g.err), name, time.Duration(l.now()-w.enq))
	}
	q.pool.Put(w)
	return g.tok, g.err
}

// abandon takes a waiter out of the queue when its context ended or its time
// bound passed. If a grant raced in first, a timed-out waiter keeps it; a
// cancelled one gives the slot back, so the gate is as if it never came.
func (q *queue) abandon(w *waiter, err error, name string) (Token, error) {
	l := q.l
	now := l.now()
	q.mu.Lock()
	if w.queued {
		q.remove(w, now)
		q.mu.Unlock()
		l.observe(err, name, time.Duration(now-w.enq))
		q.pool.Put(w)
		return Token{}, err
	}
	q.mu.Unlock()
	g := <-w.ch // sent under q.mu before the waiter was dequeued
	if g.err != nil || err == ErrQueueTimeout {
		return q.finish(w, g, name)
	}
	l.free(g.tok.part, l.win.of()) // cancelled: give the slot back, to the next waiter
	l.observe(err, name, time.Duration(now-w.enq))
	q.pool.Put(w)
	return Token{}, err
}

// drain admits waiters while the gate has room.
func (q *queue) drain() {
	now := q.l.now()
	q.mu.Lock()
	q.drainLocked(now)
	q.mu.Unlock()
}

// drainLocked turns away waiters past their time bound, then hands free
// slots to waiters in queue order, one slot each. Without partitions it stops
// at the first waiter that cannot be admitted; with partitions it looks for
// the first waiter whose partition can be. Requires q.mu held.
func (q *queue) drainLocked(now int64) {
	q.expireLocked(now)
	lifo := q.order == LIFO && !q.codel || q.overloaded(now)
	for q.n > 0 {
		w := q.head
		if lifo {
			w = q.tail
		}
		granted := false
		for ; w != nil; w = q.next(w, lifo) {
			if tok, ok := q.admitWaiter(w, now); ok {
				// The slot may have been freed after now was read (a
				// release does not take q.mu to free it): judge the grant
				// by the time it is made, so a waiter past its bound is
				// turned away rather than served late.
				t := q.l.now()
				if mw := q.maxWait(t); mw > 0 && t-w.enq > mw {
					q.l.unadmit(w.part)
					q.remove(w, t)
					w.ch <- grant{err: ErrQueueTimeout}
					granted = true // the slot is free again: look again
					break
				}
				tok.start = t
				q.remove(w, t)
				w.ch <- grant{tok: tok}
				granted = true
				break
			}
			if q.l.parts == nil {
				break
			}
		}
		if !granted {
			return
		}
	}
}

// expireLocked turns away the waiters past their time bound; the oldest are
// the first to pass it. Requires q.mu held.
func (q *queue) expireLocked(now int64) {
	if mw := q.maxWait(now); mw > 0 {
		for w := q.head; w != nil && now-w.enq > mw; w = q.head {
			q.remove(w, now)
			w.ch <- grant{err: ErrQueueTimeout}
		}
	}
}

func (q *queue) next(w *waiter, lifo bool) *waiter {
	if lifo {
		return w.prev
	}
	return w.next
}

// admitWaiter takes a slot for w, bypassing the no-queue-jumping rule of
// TryAcquire (w is the queue). Requires q.mu held.
// unadmit gives back a slot that admitWaiter took for partition part.
func (l *Limiter) unadmit(part int32) {
	if part > 0 {
		l.parts.inFlight[part-1].Add(-1)
	}
	l.h.state.Add(minusOneInFlight)
}

func (q *queue) admitWaiter(w *waiter, now int64) (Token, bool) {
	l := q.l
	var ok bool
	if l.parts != nil {
		ok = l.admitPartition(w.part)
	} else {
		ok = l.admit()
	}
	if !ok {
		return Token{}, false
	}
	return Token{l: l, start: now, part: w.part}, true
}

// observe counts a refusal of the gate (not a caller that gave up) in the
// window and reports the acquisition that ended with err to the observer.
func (l *Limiter) observe(err error, partition string, wait time.Duration) {
	if errors.Is(err, ErrLimitExceeded) { // every refusal of the gate wraps it
		l.win.of().rejected.Add(1)
	}
	if l.obs != nil {
		l.obs.GateDecision(decision(err), partition, wait)
	}
}

// decision is how an observer sees an acquisition that ended with err: the
// gate decides in its own words (a token, one of its errors, or the end of
// the caller's context) and turns them into a metrics.GateDecision only to
// report.
func decision(err error) metrics.GateDecision {
	switch err {
	case nil:
		return metrics.Admitted
	case ErrQueueFull:
		return metrics.QueueFull
	case ErrDeadlineUnmeetable:
		return metrics.DeadlineUnmeetable
	case ErrQueueTimeout:
		return metrics.QueueTimeout
	case ErrLimitExceeded, ErrFrontQueue:
		return metrics.Rejected
	}
	return metrics.Canceled // the caller's context ended
}
