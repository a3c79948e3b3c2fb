package ratelimit

import (
	"context"
	"errors"
	"fmt"
	"math"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice/clock"
	"github.com/sluicehq/sluice/metrics"
)

// Result is a rate limit's decision on one request, with everything a
// response needs to tell the caller (the HTTP RateLimit and Retry-After
// headers are built from it). Example, for a token bucket of Burst 10 refilled
// at 1 per second that holds 2 tokens and is asked for 3: Allowed false,
// Limit 10, Remaining 2, RetryAfter 1s (the third token), ResetAfter 8s
// (until the bucket is full), Source SourceLimit.
//
// The zero Result holds no decision: it is what comes with an error.
// Decided tells the two apart, and Source says who decided: the limit
// itself, or, when the store could not apply the limit, the store's
// refusal of a key it cannot hold or a failed store's failure policy.
type Result struct {
	// Allowed: the request was admitted and its cost counted. In shadow
	// mode it is always true.
	Allowed bool
	// Shadowed: the limit would have refused the request, but it is in
	// shadow mode (WithShadow), so it was admitted, and not counted.
	Shadowed bool
	// Source says what made the decision (see Source). SourceNone marks a
	// Result that holds no decision.
	Source Source
	// Limit is the most units the key can be granted at once: Burst (Rate
	// for the window algorithms).
	Limit int
	// Remaining is how many more units the key would be granted right now,
	// after this decision. It is 0, meaning unknown, when Source is
	// SourceFull, SourceFailClosed or SourceFailOpen: no state of the key
	// was read.
	Remaining int
	// RetryAfter is 0 when the request was admitted. When it was refused, it
	// is exactly how long until the same request would be admitted, if the
	// key sees no other traffic meanwhile; for SourceFull and
	// SourceFailClosed it is a hint instead (see Source).
	RetryAfter time.Duration
	// ResetAfter is how long until the key is back to a fresh key's state
	// (a full bucket, empty windows), if it sees no other traffic; 0 when
	// unknown.
	ResetAfter time.Duration
}

// Decided reports whether r holds a decision (Source is not SourceNone).
// Every Result returned with a nil error does; the zero Result returned with
// an error does not.
func (r Result) Decided() bool { return r.Source != SourceNone }

// Degraded reports whether a failed store's failure policy made the
// decision instead of the limit: Source is SourceFailClosed, SourceFailOpen
// or SourceFailLocal. Such a decision comes with a nil error; the store's
// own error reporting (for Redis, redisstore.Store.LastError and
// redisstore.WithErrorHandler) says what failed.
func (r Result) Degraded() bool {
	return r.Source == SourceFailClosed || r.Source == SourceFailOpen || r.Source == SourceFailLocal
}

// Source says what made a decision.
type Source uint8

// The sources of a decision.
const (
	// SourceNone: no decision. Only the zero Result, which comes with an
	// error, has it.
	SourceNone Source = iota
	// SourceLimit: the limit decided, on the key's state in the store. The
	// usual case.
	SourceLimit
	// SourceFull: the store holds its maximum of keys and could not make
	// room for this one (see WithMaxKeys), so the request was refused
	// without reading or counting anything for the key: a defence against
	// key sprays, not the key's own quota. RetryAfter is a hint: the time
	// the limit takes to grant the request's cost.
	SourceFull
	// SourceFailClosed: the store failed (a Redis down, slow or behind an
	// open circuit breaker) and its failure policy refused the request.
	// RetryAfter is the policy's hint (for Redis, the breaker's cool-down).
	SourceFailClosed
	// SourceFailOpen: the store failed and its failure policy admitted the
	// request, uncounted. Remaining and the times are unknown (0).
	SourceFailOpen
	// SourceFailLocal: the store failed and its failure policy decided with
	// a local fallback store (the limit then holds per process). The
	// numbers are the fallback's, as exact as the limit's.
	SourceFailLocal
)

// String returns the source's name: "none", "limit", "full",
// "fail_closed", "fail_open" or "fail_local".
func (s Source) String() string {
	switch s {
	case SourceNone:
		return "none"
	case SourceLimit:
		return "limit"
	case SourceFull:
		return "full"
	case SourceFailClosed:
		return "fail_closed"
	case SourceFailOpen:
		return "fail_open"
	case SourceFailLocal:
		return "fail_local"
	}
	return "Source(" + strconv.Itoa(int(s)) + ")"
}

// The errors of the package. A non-nil error means there is no decision:
// the input can never be decided, the caller's context ended, or the store
// failed with no failure policy to decide for it. A refusal is not an error
// (see Result), and neither is a decision a store made by its failure
// policy or at its key cap: those come with a nil error and a Result whose
// Source says so. Wait, which has no Result, reports its refusals as errors
// (ErrWouldExceedDeadline, ErrTooManyKeys, ErrDegraded).
var (
	// ErrInvalidKey: the key is empty or longer than WithMaxKeyLen.
	ErrInvalidKey = errors.New("sluice/ratelimit: invalid key")
	// ErrInvalidCost: the cost n is below 1, or above the limit's Burst, so
	// that the request could never be admitted.
	ErrInvalidCost = errors.New("sluice/ratelimit: invalid cost")
	// ErrTooManyKeys: Wait could not reserve because the store holds its
	// maximum of keys and could not make room for the key (see
	// WithMaxKeys). Allow, AllowN, Tiers and Reserve report that case as a
	// refusal with Source SourceFull instead.
	ErrTooManyKeys = errors.New("sluice/ratelimit: too many keys")
	// ErrNoReserve: Reserve and Wait need TokenBucket or GCRA, which can
	// lend against the future; the window algorithms cannot.
	ErrNoReserve = errors.New("sluice/ratelimit: Reserve and Wait need TokenBucket or GCRA")
	// ErrWouldExceedDeadline: Wait would have to wait past its context's
	// deadline. It wraps context.DeadlineExceeded.
	ErrWouldExceedDeadline = fmt.Errorf("sluice/ratelimit: wait would exceed the context deadline: %w", context.DeadlineExceeded)
	// ErrDegraded marks a store failure that a failure policy decided. It
	// is never returned with a decision: AllowN and Tiers return such a
	// decision with a nil error and Result.Degraded(). Stores wrap it
	// around the cause where they report failures (redisstore.Store's
	// LastError), and Wait returns it when a failure policy refused.
	ErrDegraded = errors.New("sluice/ratelimit: store degraded, decided by its failure policy")
)

func costError(n int, burst int64) error {
	if n < 1 {
		return fmt.Errorf("%w %d: must be at least 1", ErrInvalidCost, n)
	}
	return fmt.Errorf("%w %d: exceeds the burst of %d, so it could never be admitted", ErrInvalidCost, n, burst)
}

// Limiter is a per-key rate limit: one Algorithm and one Limit applied to
// every key separately, with the keys' state in a Store (in memory by
// default).
//
// Allow and AllowN decide at once and never wait. For the buckets
// (TokenBucket, GCRA), Reserve and Wait treat the bucket as a queue: the
// caller is granted its tokens ahead of time and told how long to wait.
// Every decision is exact integer arithmetic in nanoseconds: at 100 per
// second, 100 requests per second pass forever, none more.
//
// A Limiter is safe for concurrent use. On the in-memory store, AllowN on a
// held key takes one shard lock and allocates nothing.
type Limiter struct {
	pol   Policy
	tab   *stateTable // in-memory fast path, constant-state algorithms
	logs  *logTable   // in-memory fast path, SlidingLog
	tbl   table       // holds tab or logs
	mem   *MemoryStore
	store Store // nil when mem is set
	timebase
	maxKeyLen int
	shadow    bool
	obs       metrics.RateObserver
	name      string
	timer     TimerFunc
}

// New returns a rate limiter applying lim with alg to every key. It returns
// an error naming every problem with lim and the options.
func New(alg Algorithm, lim Limit, opts ...Option) (*Limiter, error) {
	cfg := defaultConfig()
	for _, o := range opts {
		if o != nil {
			o.apply(&cfg)
		}
	}
	pol, perr := NewPolicy(alg, lim)
	if err := errors.Join(perr, cfg.validate(false)); err != nil {
		return nil, err
	}
	l := &Limiter{
		pol:       pol,
		timebase:  newTimebase(cfg.clock),
		maxKeyLen: cfg.maxKeyLen,
		shadow:    cfg.shadow,
		obs:       cfg.observer,
		name:      cfg.name,
		timer:     cfg.timer,
	}
	if cfg.storeSet {
		l.store = cfg.store
		if m, ok := cfg.store.(*MemoryStore); ok {
			l.store, l.mem = nil, m
		}
	} else {
		l.mem, _ = NewMemoryStore(cfg.maxKeys)
	}
	if l.mem != nil {
		l.tbl = l.mem.tableFor(pol)
		l.tab, l.logs = l.tbl.st, l.tbl.lt
	}
	return l, nil
}

// timebase is a limiter's time: Unix nanoseconds, read as the Unix time of
// the limiter's creation plus the monotonic time elapsed since on its clock.
type timebase struct {
	clk      clock.Clock
	since    clock.Elapsed
	sysClock bool
	manual   bool
	base     time.Time
	baseNs   int64
	// coarse is clk when it is a *clock.Coarse, read directly; coarseNs
	// converts its Nanos to Unix nanoseconds of this time base.
	coarse   *clock.Coarse
	coarseNs int64
}

func newTimebase(c clock.Clock) timebase {
	tb := timebase{clk: c, sysClock: c == clock.System()}
	_, tb.manual = c.(*clock.Manual)
	tb.since = clock.ElapsedOf(c)
	tb.base = c.Now()
	tb.baseNs = tb.base.UnixNano()
	if co, ok := c.(*clock.Coarse); ok {
		tb.coarse = co
		tb.coarseNs = tb.baseNs - int64(tb.base.Sub(co.Start()))
	}
	return tb
}

// now returns the current time in Unix nanoseconds. On the system clock it
// is one monotonic clock read; on a Coarse clock one atomic load.
func (tb *timebase) now() int64 {
	if tb.sysClock {
		return tb.sysNow()
	}
	if tb.coarse != nil {
		return tb.coarseNs + tb.coarse.Nanos()
	}
	return tb.baseNs + int64(tb.since.Since(tb.base))
}

// sysNow is now on the system clock (sysClock): the one monotonic read Go
// offers, small enough to inline.
func (tb *timebase) sysNow() int64 { return tb.baseNs + int64(time.Since(tb.base)) }

// nsOf converts t to Unix nanoseconds of this time base.
func (tb *timebase) nsOf(t time.Time) int64 { return tb.baseNs + int64(t.Sub(tb.base)) }

// timeOf converts Unix nanoseconds of this time base to a time.Time (with a
// monotonic reading when the clock gives them).
func (tb *timebase) timeOf(ns int64) time.Time { return tb.base.Add(time.Duration(ns - tb.baseNs)) }

// Policy returns the limiter's algorithm and limit.
func (l *Limiter) Policy() Policy { return l.pol }

// Allow is shorthand for AllowN(ctx, key, 1).
//
//go:noinline
func (l *Limiter) Allow(ctx context.Context, key string) (res Result, err error) {
	err = l.allowN(ctx, key, 1, &res)
	return res, err
}

// AllowN decides whether key may spend n units now, and if so counts them.
// It never waits.
//
// A nil error comes with a decision: the limit's (Source SourceLimit), a
// refusal because the store cannot hold another key (SourceFull), or the
// decision of a failed store's failure policy (Result.Degraded). A non-nil
// error comes with the zero Result and means there is no decision: an
// empty or too long key (ErrInvalidKey), n < 1 or n > Burst (ErrInvalidCost:
// such a request could never be admitted), ctx ending before the store
// answered, or a store that failed without a failure policy to decide. So
//
//	res, err := lim.AllowN(ctx, key, n)
//	if err != nil || !res.Allowed { refuse }
//
// refuses exactly what the limit and the store's policies refuse, and
// never defeats a store configured to fail open. ctx is passed to the
// store; the in-memory store never blocks and ignores it.
//
// Allow and AllowN are not inlined: a Result is too large for the compiler
// to keep in registers, and an inlined call would hand it to the caller
// through a temporary that is copied with wide moves of what was stored
// field by field, a store-forwarding stall per decision (measured at 5–13
// ns); returned from a call, it arrives in registers.
//
//go:noinline
func (l *Limiter) AllowN(ctx context.Context, key string, n int) (res Result, err error) {
	err = l.allowN(ctx, key, n, &res)
	return res, err
}

// allowN is AllowN, writing the decision into *res field by field (the
// zero Result when it returns an error).
func (l *Limiter) allowN(ctx context.Context, key string, n int, res *Result) error {
	if err := l.check(key, n); err != nil {
		return err
	}
	if l.tab != nil && !l.shadow && l.obs == nil { // the hot path: nothing for finish to do
		l.tab.takeAt(key, &l.timebase, int64(n)).fill(res, l.pol.burst)
		return nil
	}
	now := l.now()
	var o outcome
	switch {
	case l.tab != nil:
		o = l.tab.take(key, now, int64(n))
	case l.logs != nil:
		o = l.logs.take(key, now, int64(n))
	default:
		// The request goes through the Store interface, so it would escape
		// to the heap: take it from a pool instead (a Store keeps no
		// request after Apply returns).
		req := requestPool.Get().(*[1]Request)
		req[0] = Request{Key: key, Policy: &l.pol, N: n}
		err := l.store.Apply(ctx, l.timeOf(now), req[:])
		r := req[0].Result
		req[0] = Request{}
		requestPool.Put(req)
		if err != nil {
			return err
		}
		*res = l.finish(storeResult(r), n)
		return nil
	}
	*res = l.finish(o.result(l.pol.burst), n)
	return nil
}

// storeResult is a Store's decision as the Limiter reports it: a store that
// leaves Source unset decided by the limit.
func storeResult(res Result) Result {
	if res.Source == SourceNone {
		res.Source = SourceLimit
	}
	return res
}

// requestPool holds the one-request batches AllowN gives a Store.
var requestPool = sync.Pool{New: func() any { return new([1]Request) }}

// finish applies shadow mode to a decision and reports it.
func (l *Limiter) finish(res Result, n int) Result {
	if l.shadow && !res.Allowed {
		res.Allowed, res.Shadowed = true, true
	}
	if l.obs != nil {
		observe(l.obs, l.name, n, res)
	}
	return res
}

// check validates a key and a cost.
func (l *Limiter) check(key string, n int) error {
	if len(key) == 0 || len(key) > l.maxKeyLen {
		return keyError(key, l.maxKeyLen)
	}
	if n < 1 || int64(n) > l.pol.burst {
		return costError(n, l.pol.burst)
	}
	return nil
}

// A Reservation is a grant of tokens ahead of time by Reserve: the holder
// may act once its delay has passed, or give the tokens back with Cancel.
type Reservation struct {
	r        reservation
	canceled atomic.Bool
}

type reservation struct {
	lim   *Limiter
	key   string
	n     int
	ok    bool
	src   Source
	ready int64 // limiter time at which the holder may act
	mark  State
}

// OK reports whether the tokens were granted. A reservation is refused when
// the caller would have had to wait past its context's deadline, and, as
// Source then says, when the store cannot hold the key (SourceFull) or a
// failed store's policy refused (SourceFailClosed).
func (r *Reservation) OK() bool { return r.r.ok }

// Source says what decided the reservation, as Result.Source does for
// AllowN: SourceLimit, SourceFull, or a failed store's failure policy (a
// reservation granted by SourceFailOpen waits for nothing; one granted by
// SourceFailLocal holds in this process only).
func (r *Reservation) Source() Source { return r.r.src }

// Delay is shorthand for DelayFrom(now on the limiter's clock).
func (r *Reservation) Delay() time.Duration {
	return r.DelayFrom(r.r.lim.clk.Now())
}

// DelayFrom returns how long after t the holder must wait before acting: 0
// once the reservation is due. For a refused reservation it is the wait it
// would have needed.
func (r *Reservation) DelayFrom(t time.Time) time.Duration {
	return time.Duration(max(0, r.r.ready-r.r.lim.nsOf(t)))
}

// ReadyAt returns the instant at which the holder may act.
func (r *Reservation) ReadyAt() time.Time { return r.r.lim.timeOf(r.r.ready) }

// Cancel is shorthand for CancelAt(now on the limiter's clock).
func (r *Reservation) Cancel() error { return r.CancelAt(r.r.lim.clk.Now()) }

// CancelAt gives the reservation's tokens back at t, as far as no later
// reservation relies on them (those keep their place in the queue), and
// only if the reservation is not yet due: once its delay has passed its
// tokens count as spent. A refused reservation has nothing to give back, and
// a second Cancel does nothing.
func (r *Reservation) CancelAt(t time.Time) error {
	if !r.r.ok || !r.canceled.CompareAndSwap(false, true) {
		return nil
	}
	return r.r.lim.refund(context.Background(), &r.r, r.r.lim.nsOf(t))
}

// Reserve takes n tokens from key's bucket now, ahead of time if the bucket
// does not hold them yet (the leaky bucket as a queue), and returns a
// Reservation saying how long the caller must wait before acting. It never
// waits itself. If ctx has a deadline and the wait would pass it, nothing is
// taken and the Reservation is not OK. Reserve needs TokenBucket or GCRA
// (else ErrNoReserve) and, like AllowN, returns an error only when there
// is no decision; a store that cannot hold the key, or a failed store's
// policy, decides the Reservation (see Reservation.Source).
//
// Reservations may put a bucket into debt; while it is, Allow refuses and
// later reservations queue behind. Shadow mode does not apply: a reservation
// is the caller's own schedule, not a decision to refuse.
func (l *Limiter) Reserve(ctx context.Context, key string, n int) (*Reservation, error) {
	r, err := l.reserve(ctx, key, n)
	if err != nil {
		return nil, err
	}
	return &Reservation{r: r}, nil
}

func (l *Limiter) reserve(ctx context.Context, key string, n int) (reservation, error) {
	if !l.pol.alg.reserves() {
		return reservation{}, errNoReserve(l.pol.alg)
	}
	if err := l.check(key, n); err != nil {
		return reservation{}, err
	}
	now := l.now()
	maxWait := int64(math.MaxInt64) // no deadline: no bound
	if dl, ok := ctx.Deadline(); ok {
		maxWait = max(0, l.nsOf(dl)-now)
	}
	r := reservation{lim: l, key: key, n: n, src: SourceLimit}
	var delay int64
	if l.tab != nil {
		var full bool
		r.ok, delay, r.mark, full = l.tab.reserve(key, now, int64(n), maxWait)
		if full {
			r.src, delay = SourceFull, l.pol.full(int64(n)).retryAfter
		}
	} else {
		wait := time.Duration(maxWait)
		switch maxWait {
		case math.MaxInt64:
			wait = 0 // Request.MaxWait: 0 means no bound
		case 0:
			wait = -1 // and a negative one, no wait at all
		}
		req := [1]Request{{Key: key, Policy: &l.pol, Op: OpReserve, N: n, MaxWait: wait}}
		if err := l.store.Apply(ctx, l.timeOf(now), req[:]); err != nil {
			return reservation{}, err
		}
		res := storeResult(req[0].Result)
		r.ok, r.src, delay, r.mark = res.Allowed, res.Source, int64(req[0].Delay), req[0].Mark
	}
	r.ready = now + delay
	return r, nil
}

// refund gives a reservation back at now.
func (l *Limiter) refund(ctx context.Context, r *reservation, now int64) error {
	if l.tab != nil {
		l.tab.refund(r.key, now, int64(r.n), r.mark)
		return nil
	}
	req := [1]Request{{Key: r.key, Policy: &l.pol, Op: OpRefund, N: r.n, Mark: r.mark}}
	return l.store.Apply(ctx, l.timeOf(now), req[:])
}

// Wait reserves n tokens of key's bucket and waits until they are due. If
// ctx ends first, it gives the tokens back (see Reservation.CancelAt) and
// returns ctx.Err(); if ctx's deadline would pass before they are due, it
// takes nothing and returns ErrWouldExceedDeadline at once. It needs
// TokenBucket or GCRA and returns the errors of Reserve. Wait has no Result
// to carry a refusal, so it returns nil only when the caller may go: a store
// that cannot hold the key refuses with ErrTooManyKeys, and a failed
// store's fail-closed policy with an error wrapping ErrDegraded (a
// fail-open or local policy's grant is waited out as any other).
//
// Wait uses a time.Timer, except on a *clock.Manual, where it returns once
// the clock has been moved past the delay by another goroutine, yielding the
// processor meanwhile; WithTimer replaces both.
func (l *Limiter) Wait(ctx context.Context, key string, n int) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	r, err := l.reserve(ctx, key, n)
	if err != nil {
		return err
	}
	if !r.ok {
		switch r.src {
		case SourceFull:
			return ErrTooManyKeys
		case SourceFailClosed:
			return fmt.Errorf("%w (%v)", ErrDegraded, r.src)
		}
		return ErrWouldExceedDeadline
	}
	delay := r.ready - l.now()
	if delay <= 0 {
		return nil
	}
	if l.timer == nil && l.manual {
		for l.now() < r.ready {
			select {
			case <-ctx.Done():
				_ = l.refund(context.WithoutCancel(ctx), &r, l.now())
				return ctx.Err()
			default:
				runtime.Gosched()
			}
		}
		return nil
	}
	newTimer := l.timer
	if newTimer == nil {
		newTimer = systemTimer
	}
	c, stop := newTimer(time.Duration(delay))
	defer stop()
	select {
	case <-c:
		return nil
	case <-ctx.Done():
		_ = l.refund(context.WithoutCancel(ctx), &r, l.now())
		return ctx.Err()
	}
}

func systemTimer(d time.Duration) (<-chan time.Time, func() bool) {
	t := time.NewTimer(d)
	return t.C, t.Stop
}
