package adaptive

import (
	"context"
	"errors"
	"math/rand/v2"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice/clock"
)

// qtT0 is far in the future, so that context deadlines computed from the
// manual clock never fire on the wall clock.
var qtT0 = time.Date(2100, time.January, 1, 0, 0, 0, 0, time.UTC)

// qtGuard bounds every wait for another goroutine. It is not a timing
// assertion: reaching it means the code under test hangs.
const qtGuard = 30 * time.Second

// qtNew builds a gate on a manual clock reading qtT0.
func qtNew(t testing.TB, alg Algorithm, opts ...Option) (*Limiter, *clock.Manual) {
	t.Helper()
	clk := clock.NewManual(qtT0)
	lim, err := New(alg, append([]Option{WithClock(clk)}, opts...)...)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return lim, clk
}

// qtWaitQueued polls, yielding the processor, until lim.Queued() == want.
// early, if not nil, is checked on every round and ends the wait with a
// failure when it returns a non-empty reason.
func qtWaitQueued(t testing.TB, lim *Limiter, want int, early func() string) {
	t.Helper()
	start := time.Now()
	for i := 0; ; i++ {
		if lim.Queued() == want {
			return
		}
		if early != nil {
			if why := early(); why != "" {
				t.Fatalf("waiting for Queued() == %d: %s", want, why)
			}
		}
		if i%1024 == 0 && time.Since(start) > qtGuard {
			t.Fatalf("Queued() = %d, never reached %d", lim.Queued(), want)
		}
		runtime.Gosched()
	}
}

// qtTry takes a token with TryAcquire and fails the test if it cannot.
func qtTry(t testing.TB, lim *Limiter) Token {
	t.Helper()
	tok, ok := lim.TryAcquire()
	if !ok {
		t.Fatalf("TryAcquire refused (in flight %d, limit %d, queued %d)", lim.InFlight(), lim.Limit(), lim.Queued())
	}
	return tok
}

type qtResult struct {
	id  int
	tok Token
	err error
}

// qtWaiters runs callers of Acquire in goroutines and collects what they got.
// At the end of the test (t.Context() is cancelled by then) it waits for all of
// them and releases any token nobody collected.
type qtWaiters struct {
	t   *testing.T
	lim *Limiter
	wg  sync.WaitGroup
	res chan qtResult
}

func qtNewWaiters(t *testing.T, lim *Limiter) *qtWaiters {
	w := &qtWaiters{t: t, lim: lim, res: make(chan qtResult, 256)}
	t.Cleanup(func() {
		w.wg.Wait()
		for {
			select {
			case r := <-w.res:
				if r.err == nil {
					r.tok.Ignore()
				}
			default:
				return
			}
		}
	})
	return w
}

func (w *qtWaiters) start(id int, ctx context.Context, acq func(context.Context) (Token, error)) {
	if acq == nil {
		acq = w.lim.Acquire
	}
	w.wg.Add(1)
	go func() {
		defer w.wg.Done()
		tok, err := acq(ctx)
		w.res <- qtResult{id: id, tok: tok, err: err}
	}()
}

// enqueue starts a waiter with ctx (t.Context() if nil) and acq (the
// Limiter's Acquire if nil) and returns once it is queued.
func (w *qtWaiters) enqueue(id int, ctx context.Context, acq func(context.Context) (Token, error)) {
	w.t.Helper()
	if ctx == nil {
		ctx = w.t.Context()
	}
	before := w.lim.Queued()
	w.start(id, ctx, acq)
	qtWaitQueued(w.t, w.lim, before+1, func() string {
		if len(w.res) > 0 {
			return "a waiter returned instead of queueing"
		}
		return ""
	})
}

// next returns the next outcome of a waiter.
func (w *qtWaiters) next() qtResult {
	w.t.Helper()
	select {
	case r := <-w.res:
		return r
	case <-time.After(qtGuard):
		w.t.Fatalf("no waiter returned (queued %d, in flight %d)", w.lim.Queued(), w.lim.InFlight())
		return qtResult{}
	}
}

// nextGranted returns the next outcome, which must be a token for waiter id.
func (w *qtWaiters) nextGranted(id int) Token {
	w.t.Helper()
	r := w.next()
	if r.err != nil || r.id != id {
		w.t.Fatalf("got waiter %d (err %v), want waiter %d granted", r.id, r.err, id)
	}
	return r.tok
}

func qtCheckCounts(t testing.TB, lim *Limiter, inFlight, queued int) {
	t.Helper()
	if got := lim.InFlight(); got != inFlight {
		t.Errorf("InFlight() = %d, want %d", got, inFlight)
	}
	if got := lim.Queued(); got != queued {
		t.Errorf("Queued() = %d, want %d", got, queued)
	}
}

func TestQueueNoQueueRefusesAtOnce(t *testing.T) {
	lim, _ := qtNew(t, Fixed(1))
	hold := qtTry(t, lim)
	tok, err := lim.Acquire(t.Context())
	if err != ErrLimitExceeded {
		t.Fatalf("Acquire on a full gate without queue: err %v, want ErrLimitExceeded", err)
	}
	if tok != (Token{}) {
		t.Errorf("refused Acquire returned a non-zero token %+v", tok)
	}
	qtCheckCounts(t, lim, 1, 0)
	hold.Success()
	tok, err = lim.Acquire(t.Context())
	if err != nil {
		t.Fatalf("Acquire on an empty gate: %v", err)
	}
	qtCheckCounts(t, lim, 1, 0)
	tok.Success()
	qtCheckCounts(t, lim, 0, 0)
}

func TestQueueRefusalErrorsAreLimitExceeded(t *testing.T) {
	refusals := []error{ErrLimitExceeded, ErrQueueFull, ErrDeadlineUnmeetable, ErrQueueTimeout}
	for i, err := range refusals {
		if !errors.Is(err, ErrLimitExceeded) {
			t.Errorf("errors.Is(%v, ErrLimitExceeded) = false", err)
		}
		for j, other := range refusals[1:] {
			if i != j+1 && errors.Is(err, other) {
				t.Errorf("errors.Is(%v, %v) = true: refusals must be told apart", err, other)
			}
		}
	}
	for _, err := range []error{context.Canceled, context.DeadlineExceeded} {
		if errors.Is(err, ErrLimitExceeded) {
			t.Errorf("errors.Is(%v, ErrLimitExceeded) = true", err)
		}
	}
}

func TestQueueAcquireWithEndedContext(t *testing.T) {
	lim, _ := qtNew(t, Fixed(1), WithQueue(4, FIFO))
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	// With room in the gate.
	if _, err := lim.Acquire(ctx); err != context.Canceled {
		t.Fatalf("Acquire(cancelled ctx) on an empty gate: err %v, want context.Canceled", err)
	}
	qtCheckCounts(t, lim, 0, 0)
	// On a full gate: not queued either.
	hold := qtTry(t, lim)
	defer hold.Success()
	if _, err := lim.Acquire(ctx); err != context.Canceled {
		t.Fatalf("Acquire(cancelled ctx) on a full gate: err %v, want context.Canceled", err)
	}
	qtCheckCounts(t, lim, 1, 0)
}

func TestQueueOrder(t *testing.T) {
	for _, tc := range []struct {
		order QueueOrder
		want  []int
	}{
		{FIFO, []int{0, 1, 2}},
		{LIFO, []int{2, 1, 0}},
	} {
		t.Run(tc.order.String(), func(t *testing.T) {
			lim, _ := qtNew(t, Fixed(1), WithQueue(3, tc.order))
			w := qtNewWaiters(t, lim)
			hold := qtTry(t, lim)
			for id := range 3 {
				w.enqueue(id, nil, nil)
			}
			// A newcomer's TryAcquire must not jump the queue.
			if _, ok := lim.TryAcquire(); ok {
				t.Fatal("TryAcquire admitted on a full gate with waiters")
			}
			hold.Success()
			for i, id := range tc.want {
				tok := w.nextGranted(id)
				qtCheckCounts(t, lim, 1, 2-i)
				tok.Success()
			}
			qtCheckCounts(t, lim, 0, 0)
		})
	}
}

func TestQueueHandsEachReleaseToExactlyOneWaiter(t *testing.T) {
	for _, tc := range []struct {
		name    string
		limit   int
		waiters int
		order   QueueOrder
	}{
		{"limit1-fifo", 1, 6, FIFO},
		{"limit1-lifo", 1, 6, LIFO},
		{"limit3-fifo", 3, 7, FIFO},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lim, _ := qtNew(t, Fixed(tc.limit), WithQueue(tc.waiters, tc.order))
			w := qtNewWaiters(t, lim)
			var held []Token
			for range tc.limit {
				held = append(held, qtTry(t, lim))
			}
			for id := range tc.waiters {
				w.enqueue(id, nil, nil)
			}
			granted := map[int]bool{}
			for queued := tc.waiters; queued > 0; queued-- {
				qtCheckCounts(t, lim, tc.limit, queued)
				held[0].Success()
				held = held[1:]
				// The handoff is synchronous: one release, one waiter out of
				// the queue and into the gate, no more (no herd), no fewer
				// (no lost wakeup).
				qtCheckCounts(t, lim, tc.limit, queued-1)
				r := w.next()
				if r.err != nil {
					t.Fatalf("waiter %d: %v", r.id, r.err)
				}
				if granted[r.id] {
					t.Fatalf("waiter %d granted twice", r.id)
				}
				granted[r.id] = true
				held = append(held, r.tok)
				if len(w.res) != 0 {
					t.Fatalf("a release woke more than one waiter")
				}
			}
			for i, tok := range held {
				tok.Success()
				qtCheckCounts(t, lim, tc.limit-1-i, 0)
			}
		})
	}
}

func TestQueueStressNoLostWakeup(t *testing.T) {
	const (
		limit = 3
		G     = 16
		M     = 300
	)
	for _, tc := range []struct {
		name string
		opts []Option
	}{
		{"fifo", []Option{WithQueue(G, FIFO)}},
		{"lifo", []Option{WithQueue(G, LIFO)}},
		{"codel", []Option{WithQueue(G, FIFO), WithCoDel(5*time.Millisecond, 100*time.Millisecond)}},
		{"timeout", []Option{WithQueue(G, FIFO), WithQueueTimeout(time.Second)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lim, _ := qtNew(t, Fixed(limit), tc.opts...)
			var holders, maxHolders atomic.Int64
			var acquired atomic.Int64
			var wg sync.WaitGroup
			for g := range G {
				wg.Add(1)
				go func() {
					defer wg.Done()
					r := rand.New(rand.NewPCG(uint64(g), 7))
					for i := range M {
						var tok Token
						if i%5 == 0 {
							var ok bool
							if tok, ok = lim.TryAcquire(); !ok {
								continue
							}
						} else {
							var err error
							if tok, err = lim.Acquire(t.Context()); err != nil {
								t.Errorf("goroutine %d: Acquire: %v", g, err)
								return
							}
						}
						acquired.Add(1)
						h := holders.Add(1)
						atomicMax(&maxHolders, h)
						if h > limit {
							t.Errorf("%d holders at once, limit %d", h, limit)
						}
						if r.IntN(4) == 0 {
							runtime.Gosched()
						}
						holders.Add(-1)
						switch r.IntN(3) {
						case 0:
							tok.Success()
						case 1:
							tok.Dropped()
						default:
							tok.Ignore()
						}
					}
				}()
			}
			done := make(chan struct{})
			go func() { wg.Wait(); close(done) }()
			select {
			case <-done:
			case <-time.After(qtGuard):
				t.Fatalf("hang: %d in flight, %d queued, %d acquisitions so far", lim.InFlight(), lim.Queued(), acquired.Load())
			}
			qtCheckCounts(t, lim, 0, 0)
			if n := lim.Overreleases(); n != 0 {
				t.Errorf("Overreleases() = %d", n)
			}
			t.Logf("%d acquisitions, at most %d holders", acquired.Load(), maxHolders.Load())
		})
	}
}

func TestQueueFull(t *testing.T) {
	lim, _ := qtNew(t, Fixed(1), WithQueue(2, FIFO))
	w := qtNewWaiters(t, lim)
	hold := qtTry(t, lim)
	w.enqueue(0, nil, nil)
	w.enqueue(1, nil, nil)
	_, err := lim.Acquire(t.Context())
	if err != ErrQueueFull {
		t.Fatalf("third waiter: err %v, want ErrQueueFull", err)
	}
	if !errors.Is(err, ErrLimitExceeded) {
		t.Errorf("ErrQueueFull does not wrap ErrLimitExceeded")
	}
	qtCheckCounts(t, lim, 1, 2)
	// A place frees: the next caller queues again.
	hold.Success()
	tok := w.nextGranted(0)
	w.enqueue(2, nil, nil)
	qtCheckCounts(t, lim, 1, 2)
	tok.Success()
	w.nextGranted(1).Success()
	w.nextGranted(2).Success()
	qtCheckCounts(t, lim, 0, 0)
}

func TestQueueCancelledWaiterLeavesNoTrace(t *testing.T) {
	for _, tc := range []struct {
		name   string
		order  QueueOrder
		cancel int
		want   []int
	}{
		{"fifo-cancel-head", FIFO, 0, []int{1, 2}},
		{"fifo-cancel-middle", FIFO, 1, []int{0, 2}},
		{"fifo-cancel-tail", FIFO, 2, []int{0, 1}},
		{"lifo-cancel-newest", LIFO, 2, []int{1, 0}},
		{"lifo-cancel-middle", LIFO, 1, []int{2, 0}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lim, _ := qtNew(t, Fixed(1), WithQueue(3, tc.order))
			w := qtNewWaiters(t, lim)
			hold := qtTry(t, lim)
			cancels := make([]context.CancelFunc, 3)
			for id := range 3 {
				ctx, cancel := context.WithCancel(t.Context())
				t.Cleanup(cancel)
				cancels[id] = cancel
				w.enqueue(id, ctx, nil)
			}
			cancels[tc.cancel]()
			r := w.next()
			if r.id != tc.cancel || r.err != context.Canceled {
				t.Fatalf("after cancel of %d: got waiter %d err %v, want %d context.Canceled", tc.cancel, r.id, r.err, tc.cancel)
			}
			if errors.Is(r.err, ErrLimitExceeded) {
				t.Errorf("a cancelled wait must not look like a refusal")
			}
			qtCheckCounts(t, lim, 1, 2)
			hold.Success()
			for i, id := range tc.want {
				tok := w.nextGranted(id)
				qtCheckCounts(t, lim, 1, 1-i)
				tok.Success()
			}
			qtCheckCounts(t, lim, 0, 0)
		})
	}
}

// qtRaceCtx is a context whose Done method first runs onDone (which grants the
// waiter a slot) and then reports the context as cancelled, so that the waiter
// finds both its grant and its cancellation ready at once.
type qtRaceCtx struct {
	context.Context
	onDone func()
	fired  atomic.Bool
	done   chan struct{}
}

func (c *qtRaceCtx) Done() <-chan struct{} {
	if c.fired.CompareAndSwap(false, true) {
		c.onDone()
		close(c.done)
	}
	return c.done
}

func (c *qtRaceCtx) Err() error {
	if c.fired.Load() {
		return context.Canceled
	}
	return nil
}

func TestQueueGrantAndCancelCoincide(t *testing.T) {
	lim, _ := qtNew(t, Fixed(1), WithQueue(1, FIFO))
	var grantedN, cancelledN int
	for range 200 {
		hold := qtTry(t, lim)
		ctx := &qtRaceCtx{Context: t.Context(), done: make(chan struct{}), onDone: func() {
			hold.Success() // hands the slot to the waiter, which is queued by now
			if lim.Queued() != 0 || lim.InFlight() != 1 {
				t.Errorf("release did not hand the slot to the waiter: in flight %d, queued %d", lim.InFlight(), lim.Queued())
			}
		}}
		tok, err := lim.Acquire(ctx)
		switch err {
		case nil:
			grantedN++
			qtCheckCounts(t, lim, 1, 0)
			tok.Success()
		case context.Canceled:
			// The grant lost the race: its slot must have gone back.
			cancelledN++
		default:
			t.Fatalf("Acquire: %v", err)
		}
		qtCheckCounts(t, lim, 0, 0)
		if t.Failed() {
			return
		}
	}
	t.Logf("granted %d, cancelled %d", grantedN, cancelledN)
	if cancelledN == 0 || grantedN == 0 {
		t.Errorf("the race was not exercised both ways: granted %d, cancelled %d", grantedN, cancelledN)
	}
}

func TestQueueCancelWhileReleasing(t *testing.T) {
	const (
		limit   = 4
		waiters = 48
		rounds  = 20
	)
	lim, _ := qtNew(t, Fixed(limit), WithQueue(waiters, FIFO))
	for round := range rounds {
		var held []Token
		for range limit {
			held = append(held, qtTry(t, lim))
		}
		var wg sync.WaitGroup
		cancels := make([]context.CancelFunc, waiters)
		var granted, cancelled atomic.Int64
		for i := range waiters {
			ctx, cancel := context.WithCancel(t.Context())
			cancels[i] = cancel
			wg.Add(1)
			go func() {
				defer wg.Done()
				tok, err := lim.Acquire(ctx)
				switch err {
				case nil:
					granted.Add(1)
					tok.Success()
				case context.Canceled:
					cancelled.Add(1)
				default:
					t.Errorf("waiter %d: %v", i, err)
				}
			}()
		}
		qtWaitQueued(t, lim, waiters, nil)
		var cwg sync.WaitGroup
		cwg.Add(1)
		go func() {
			defer cwg.Done()
			for _, c := range cancels {
				c()
			}
		}()
		for _, tok := range held {
			tok.Success()
		}
		cwg.Wait()
		done := make(chan struct{})
		go func() { wg.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(qtGuard):
			t.Fatalf("round %d: waiters hang: %d in flight, %d queued", round, lim.InFlight(), lim.Queued())
		}
		if granted.Load()+cancelled.Load() != waiters {
			t.Fatalf("round %d: %d granted + %d cancelled != %d", round, granted.Load(), cancelled.Load(), waiters)
		}
		qtCheckCounts(t, lim, 0, 0)
		if t.Failed() {
			return
		}
	}
}

func TestQueueTimeoutOnManualClock(t *testing.T) {
	const bound = 50 * time.Millisecond
	t.Run("expired-waiter-refused-slot-to-next", func(t *testing.T) {
		lim, clk := qtNew(t, Fixed(1), WithQueue(4, FIFO), WithQueueTimeout(bound))
		w := qtNewWaiters(t, lim)
		hold := qtTry(t, lim)
		w.enqueue(0, nil, nil) // at t0
		clk.Advance(30 * time.Millisecond)
		w.enqueue(1, nil, nil) // at t0+30ms
		clk.Advance(30 * time.Millisecond)
		// Nothing happens until the queue is drained: no timers on a manual clock.
		qtCheckCounts(t, lim, 1, 2)
		hold.Success() // at t0+60ms: waiter 0 waited 60ms, waiter 1 30ms
		qtCheckCounts(t, lim, 1, 0)
		got := map[int]qtResult{}
		for range 2 {
			r := w.next()
			got[r.id] = r
		}
		if err := got[0].err; err != ErrQueueTimeout || !errors.Is(err, ErrLimitExceeded) {
			t.Errorf("expired waiter: err %v, want ErrQueueTimeout", err)
		}
		if err := got[1].err; err != nil {
			t.Fatalf("waiter within its bound: %v", err)
		}
		got[1].tok.Success()
		qtCheckCounts(t, lim, 0, 0)
	})
	t.Run("expired-waiter-refused-slot-to-gate", func(t *testing.T) {
		lim, clk := qtNew(t, Fixed(1), WithQueue(4, FIFO), WithQueueTimeout(bound))
		w := qtNewWaiters(t, lim)
		hold := qtTry(t, lim)
		w.enqueue(0, nil, nil)
		clk.Advance(60 * time.Millisecond)
		hold.Success()
		qtCheckCounts(t, lim, 0, 0)
		if r := w.next(); r.err != ErrQueueTimeout {
			t.Fatalf("expired waiter: err %v, want ErrQueueTimeout", r.err)
		}
		qtTry(t, lim).Success() // the slot went back to the gate
	})
	t.Run("at-the-bound-still-served", func(t *testing.T) {
		lim, clk := qtNew(t, Fixed(1), WithQueue(4, FIFO), WithQueueTimeout(bound))
		w := qtNewWaiters(t, lim)
		hold := qtTry(t, lim)
		w.enqueue(0, nil, nil)
		clk.Advance(bound) // waited exactly the bound, not longer
		hold.Success()
		w.nextGranted(0).Success()
		qtCheckCounts(t, lim, 0, 0)
	})
	t.Run("newcomer-drains-expired", func(t *testing.T) {
		lim, clk := qtNew(t, Fixed(1), WithQueue(4, FIFO), WithQueueTimeout(bound))
		w := qtNewWaiters(t, lim)
		hold := qtTry(t, lim)
		w.enqueue(0, nil, nil)
		clk.Advance(60 * time.Millisecond)
		w.start(1, t.Context(), nil)
		if r := w.next(); r.id != 0 || r.err != ErrQueueTimeout {
			t.Fatalf("got waiter %d err %v, want waiter 0 ErrQueueTimeout", r.id, r.err)
		}
		qtWaitQueued(t, lim, 1, nil)
		hold.Success()
		w.nextGranted(1).Success()
		qtCheckCounts(t, lim, 0, 0)
	})
	t.Run("lifo-expires-oldest", func(t *testing.T) {
		lim, clk := qtNew(t, Fixed(1), WithQueue(4, LIFO), WithQueueTimeout(bound))
		w := qtNewWaiters(t, lim)
		hold := qtTry(t, lim)
		w.enqueue(0, nil, nil)
		w.enqueue(1, nil, nil)
		clk.Advance(30 * time.Millisecond)
		w.enqueue(2, nil, nil)
		clk.Advance(30 * time.Millisecond) // 0 and 1 expired, 2 not
		hold.Success()
		qtCheckCounts(t, lim, 1, 0)
		got := map[int]qtResult{}
		for range 3 {
			r := w.next()
			got[r.id] = r
		}
		for _, id := range []int{0, 1} {
			if got[id].err != ErrQueueTimeout {
				t.Errorf("waiter %d: err %v, want ErrQueueTimeout", id, got[id].err)
			}
		}
		if got[2].err != nil {
			t.Fatalf("waiter 2: %v", got[2].err)
		}
		got[2].tok.Success()
		qtCheckCounts(t, lim, 0, 0)
	})
}

func TestQueueDeadlineUnmeetable(t *testing.T) {
	const rtt = 20 * time.Millisecond
	lim, clk := qtNew(t, Fixed(2), WithQueue(4, FIFO),
		WithWindow(10*time.Millisecond, time.Second), WithMinSamples(3))
	w := qtNewWaiters(t, lim)
	deadline := func(d time.Duration) context.Context {
		ctx, cancel := context.WithDeadline(t.Context(), clk.Now().Add(d))
		t.Cleanup(cancel)
		return ctx
	}

	// Before any RTT is known the estimate is 0: a short deadline queues.
	h1, h2 := qtTry(t, lim), qtTry(t, lim)
	w.enqueue(0, deadline(time.Nanosecond), nil)
	// A deadline already passed on the gate's clock is refused at once, even
	// though it is still in the future on the wall clock.
	if _, err := lim.Acquire(deadline(-time.Millisecond)); err != ErrDeadlineUnmeetable {
		t.Fatalf("past deadline: err %v, want ErrDeadlineUnmeetable", err)
	}
	// Ignore: these releases must not feed the window.
	h1.Ignore()
	w.nextGranted(0).Ignore()
	h2.Ignore()
	qtCheckCounts(t, lim, 0, 0)

	// Learn an RTT of 20ms: three samples close a window of at least 10ms.
	for range 3 {
		tok := qtTry(t, lim)
		clk.Advance(rtt)
		tok.Success()
	}
	// Little's law: (queued+1)·RTT/limit + RTT = 1·20/2 + 20 = 30ms.
	h1, h2 = qtTry(t, lim), qtTry(t, lim)
	if _, err := lim.Acquire(deadline(25 * time.Millisecond)); err != ErrDeadlineUnmeetable {
		t.Fatalf("deadline 25ms < estimate 30ms: err %v, want ErrDeadlineUnmeetable (was the RTT learned?)", err)
	}
	qtCheckCounts(t, lim, 2, 0) // refused at once, never queued
	w.enqueue(1, deadline(35*time.Millisecond), nil)
	// Now one waits: the estimate is 2·20/2 + 20 = 40ms.
	if _, err := lim.Acquire(deadline(35 * time.Millisecond)); err != ErrDeadlineUnmeetable {
		t.Fatalf("deadline 35ms < estimate 40ms behind one waiter: err %v, want ErrDeadlineUnmeetable", err)
	}
	qtCheckCounts(t, lim, 2, 1)
	w.enqueue(2, deadline(time.Hour), nil)
	qtCheckCounts(t, lim, 2, 2)
	h1.Success()
	w.nextGranted(1).Success()
	h2.Success()
	w.nextGranted(2).Success()
	qtCheckCounts(t, lim, 0, 0)
}

func TestCoDelIsFIFOWhileTheQueueDrains(t *testing.T) {
	for _, base := range []QueueOrder{FIFO, LIFO} {
		// WithCoDel replaces the queue's order, so the base order must not
		// matter.
		t.Run("base-"+base.String(), func(t *testing.T) {
			lim, clk := qtNew(t, Fixed(1), WithQueue(8, base), WithCoDel(5*time.Millisecond, 100*time.Millisecond))
			w := qtNewWaiters(t, lim)
			hold := qtTry(t, lim)
			for id := range 3 {
				w.enqueue(id, nil, nil)
			}
			// Older than the target, but the queue was empty within the
			// interval: no standing queue, nobody is turned away.
			clk.Advance(10 * time.Millisecond)
			hold.Success()
			for i := range 3 {
				r := w.next()
				if r.err != nil {
					t.Fatalf("waiter %d: %v", r.id, r.err)
				}
				if r.id != i {
					t.Errorf("grant %d went to waiter %d, want %d (FIFO while the queue drains)", i, r.id, i)
				}
				clk.Advance(time.Millisecond)
				r.tok.Success()
			}
			qtCheckCounts(t, lim, 0, 0)
		})
	}
}

func TestCoDelStandingQueueTurnsLIFOAndSheds(t *testing.T) {
	lim, clk := qtNew(t, Fixed(1), WithQueue(8, FIFO), WithCoDel(5*time.Millisecond, 100*time.Millisecond))
	w := qtNewWaiters(t, lim)
	hold := qtTry(t, lim)
	w.enqueue(0, nil, nil) // t0: the queue stops being empty
	clk.Advance(98 * time.Millisecond)
	for id := 1; id <= 3; id++ {
		w.enqueue(id, nil, nil) // t0+98ms: nobody turned away yet
	}
	qtCheckCounts(t, lim, 1, 4)
	clk.Advance(3 * time.Millisecond) // t0+101ms: not empty for > interval
	hold.Success()
	// Waiter 0 (101ms > target) is turned away, the newest (3) is served.
	qtCheckCounts(t, lim, 1, 2)
	got := map[int]qtResult{}
	for range 2 {
		r := w.next()
		got[r.id] = r
	}
	if r, ok := got[0]; !ok || r.err != ErrQueueTimeout {
		t.Fatalf("oldest waiter: %+v, want ErrQueueTimeout", r)
	}
	r3, ok := got[3]
	if !ok || r3.err != nil {
		t.Fatalf("newest waiter: %+v, want granted (LIFO under a standing queue)", r3)
	}
	// Still standing: LIFO goes on, 2 then 1 (both 3ms old, within target).
	r3.tok.Success()
	tok2 := w.nextGranted(2)
	qtCheckCounts(t, lim, 1, 1)
	tok2.Success()
	tok1 := w.nextGranted(1) // the queue is empty now
	qtCheckCounts(t, lim, 1, 0)

	// Drained: back to FIFO.
	for id := 4; id <= 6; id++ {
		w.enqueue(id, nil, nil)
	}
	tok1.Success()
	for id := 4; id <= 6; id++ {
		w.nextGranted(id).Success()
	}
	qtCheckCounts(t, lim, 0, 0)
}

func TestQueueOptionValidation(t *testing.T) {
	ms := time.Millisecond
	for _, tc := range []struct {
		name string
		opts []Option
		bad  int // number of problems New must report; 0: valid
	}{
		{"zero capacity", []Option{WithQueue(0, FIFO)}, 1}, // a queue of nothing is a mistake, not "no queue"
		{"fifo", []Option{WithQueue(1, FIFO)}, 0},
		{"lifo with timeout", []Option{WithQueue(1, LIFO), WithQueueTimeout(ms)}, 0},
		{"codel", []Option{WithQueue(1, FIFO), WithCoDel(5*ms, 100*ms)}, 0},
		{"negative capacity", []Option{WithQueue(-1, FIFO)}, 1},
		{"unknown order", []Option{WithQueue(1, QueueOrder(2))}, 1},
		{"negative timeout", []Option{WithQueue(1, FIFO), WithQueueTimeout(-ms)}, 1},
		{"timeout without queue", []Option{WithQueueTimeout(ms)}, 1},
		{"codel without queue", []Option{WithCoDel(5*ms, 100*ms)}, 1},
		{"codel target = interval", []Option{WithQueue(1, FIFO), WithCoDel(100*ms, 100*ms)}, 1},
		{"codel target > interval", []Option{WithQueue(1, FIFO), WithCoDel(200*ms, 100*ms)}, 1},
		{"codel zero target", []Option{WithQueue(1, FIFO), WithCoDel(0, 100*ms)}, 1},
		{"all reported", []Option{WithQueue(-1, QueueOrder(9)), WithQueueTimeout(-ms), WithCoDel(ms, ms)}, 4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lim, err := New(Fixed(1), tc.opts...)
			if tc.bad == 0 {
				if err != nil || lim == nil {
					t.Fatalf("New: %v", err)
				}
				return
			}
			if err == nil || lim != nil {
				t.Fatalf("New = %v, %v; want an error", lim, err)
			}
			if n := len(strings.Split(err.Error(), "\n")); n != tc.bad {
				t.Errorf("New reported %d problems, want %d:\n%v", n, tc.bad, err)
			}
		})
	}
}

func TestQueueOrderString(t *testing.T) {
	for o, want := range map[QueueOrder]string{FIFO: "fifo", LIFO: "lifo", QueueOrder(7): "QueueOrder(7)"} {
		if got := o.String(); got != want {
			t.Errorf("QueueOrder(%d).String() = %q, want %q", uint8(o), got, want)
		}
	}
}

// TestCoDelWithQueueTimeout: New accepts WithQueueTimeout together with
// WithCoDel, so the queue timeout must still bound the wait (options are never
// dropped silently); rejecting the combination in New would do as well.
func TestCoDelWithQueueTimeout(t *testing.T) {
	clk := clock.NewManual(qtT0)
	lim, err := New(Fixed(1), WithClock(clk), WithQueue(4, FIFO),
		WithQueueTimeout(10*time.Millisecond), WithCoDel(5*time.Millisecond, 100*time.Millisecond))
	if err != nil {
		t.Logf("New rejects WithQueueTimeout with WithCoDel: %v", err)
		return
	}
	w := qtNewWaiters(t, lim)
	hold := qtTry(t, lim)
	w.enqueue(0, nil, nil)
	clk.Advance(50 * time.Millisecond) // 50ms > the 10ms queue timeout; no standing queue yet
	hold.Success()
	r := w.next()
	if r.err == nil {
		r.tok.Success()
		t.Fatalf("waiter served after 50ms in the queue; want ErrQueueTimeout (WithQueueTimeout(10ms) silently ignored under CoDel)")
	}
	if r.err != ErrQueueTimeout {
		t.Fatalf("err %v, want ErrQueueTimeout", r.err)
	}
	qtCheckCounts(t, lim, 0, 0)
}
