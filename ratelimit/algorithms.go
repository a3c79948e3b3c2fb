package ratelimit

import (
	"errors"
	"math/bits"
	"time"
)

// State is the per-key state of FixedWindow, SlidingWindow, TokenBucket and
// GCRA: two integers whose meaning depends on the algorithm.
//
//	FixedWindow    A: window number ⌊now/Period⌋   B: units admitted in it
//	SlidingWindow  A: window number ⌊now/Period⌋   B: previous count<<32 | current count
//	TokenBucket    A: units missing from a full bucket (see Policy)   B: when they were counted (Unix ns)
//	GCRA           A: theoretical arrival time, whole Unix ns          B: its fraction, in 1/(Rate/g) ns
//
// The zero State is a fresh key's, and Decide returns the zero State for a
// key that is back to a fresh key's state. A stored state also becomes a
// fresh key's over time (Decide with n = 0 then returns the zero State); a
// store may drop such a key at any moment without changing any decision, and
// must never drop any other.
type State struct{ A, B int64 }

// outcome is a decision in nanoseconds, before it becomes a Result. It has
// four fields of at most 8 bytes, so that the compiler keeps it in
// registers (a larger struct lives in memory and is copied with 16-byte
// moves of what was stored 8 bytes at a time, a store-forwarding stall per
// copy: measured at 5–13 ns of a 75 ns decision). A refusal because the
// store could not hold the key is marked by remaining = fullMark (see full).
type outcome struct {
	allowed    bool
	remaining  int64
	retryAfter int64 // ns; 0 when allowed
	resetAfter int64 // ns until the key's state is a fresh key's
}

// fullMark is the remaining of a full store's refusal; a limit's remaining
// is never negative.
const fullMark = -1

// fill writes the Result of o into r, field by field (see AllowN).
func (o outcome) fill(r *Result, limit int64) {
	r.Limit = int(limit)
	r.RetryAfter = time.Duration(o.retryAfter)
	if o.remaining == fullMark {
		r.Source = SourceFull
		return
	}
	r.Allowed = o.allowed
	r.Source = SourceLimit
	r.Remaining = int(o.remaining)
	r.ResetAfter = time.Duration(o.resetAfter)
}

func (o outcome) result(limit int64) Result {
	if o.remaining == fullMark {
		return Result{Source: SourceFull, Limit: int(limit), RetryAfter: time.Duration(o.retryAfter)}
	}
	return Result{
		Allowed:    o.allowed,
		Source:     SourceLimit,
		Limit:      int(limit),
		Remaining:  int(o.remaining),
		RetryAfter: time.Duration(o.retryAfter),
		ResetAfter: time.Duration(o.resetAfter),
	}
}

// errNoState: SlidingLog keeps a log, not a State.
var errNoState = errors.New("sluice/ratelimit: SlidingLog keeps a log per key, not a State; use a Store")

// Decide is the whole arithmetic of FixedWindow, SlidingWindow, TokenBucket
// and GCRA, as a pure function: for a key in state s, a request of cost n at
// now (Unix nanoseconds), it returns the state to keep and the decision. A
// refused request leaves the state as it was; n = 0 asks without taking. The
// zero State returned means the key is back to a fresh key's state and may be
// dropped. A Store that keeps State elsewhere must reproduce exactly these
// decisions. A now earlier than the instant s describes (a clock read before
// another decision on the key) is decided at that instant, so that no refill
// is counted twice and no newer window's count reset; the waits returned
// are measured from now. Decide returns an error for SlidingLog and for an n outside
// [0, Burst].
func (p Policy) Decide(s State, now int64, n int) (State, Result, error) {
	if p.alg == SlidingLog {
		return s, Result{}, errNoState
	}
	if p.alg == 0 {
		return s, Result{}, errors.New("sluice/ratelimit: zero Policy; use NewPolicy")
	}
	if n < 0 || int64(n) > p.burst {
		return s, Result{}, costError(n, p.burst)
	}
	next, o := p.take(s, now, int64(n))
	return next, o.result(p.burst), nil
}

// Reserve is the arithmetic of OpReserve, as a pure function: the leaky
// bucket as a queue (TokenBucket and GCRA only). It takes n tokens from a
// key in state s at now even if the bucket does not hold them yet, unless
// the wait would exceed maxWait (then ok is false and s is returned as it
// was), and returns the state to keep, how long the caller must wait, and
// the mark that identifies the reservation for Refund.
func (p Policy) Reserve(s State, now int64, n int, maxWait time.Duration) (next State, ok bool, delay time.Duration, mark State, err error) {
	if !p.alg.reserves() {
		return s, false, 0, State{}, errNoReserve(p.alg)
	}
	if n < 1 || int64(n) > p.burst {
		return s, false, 0, State{}, costError(n, p.burst)
	}
	next, ok, d, mark := p.reserve(s, now, int64(n), int64(maxWait))
	return next, ok, time.Duration(d), mark, nil
}

// Refund is the arithmetic of OpRefund, as a pure function: it gives back a
// reservation of n tokens identified by mark, as far as no later
// reservation relies on them and only if it is not yet due, and returns the
// state to keep (TokenBucket and GCRA only).
func (p Policy) Refund(s State, now int64, n int, mark State) (State, error) {
	if !p.alg.reserves() {
		return s, errNoReserve(p.alg)
	}
	if n < 1 || int64(n) > p.burst {
		return s, costError(n, p.burst)
	}
	return p.refund(s, now, int64(n), mark), nil
}

// take dispatches to the algorithm. Requires 0 ≤ n ≤ burst and
// p.alg != SlidingLog.
func (p *Policy) take(s State, now, n int64) (State, outcome) {
	t := p.keyTime(s, now)
	var next State
	var o outcome
	switch p.alg {
	case FixedWindow:
		next, o = p.fixedWindow(s, t, n)
	case SlidingWindow:
		next, o = p.slidingWindow(s, t, n)
	default:
		next, o = p.bucket(s, t, n)
	}
	if lag := t - now; lag > 0 {
		o = o.later(lag)
	}
	return next, o
}

// keyTime is the time at which a request at now is decided for a key in
// state s: now, or the instant the state describes when that is later.
// Time can read earlier than a key's last decision: a goroutine that read
// the clock before another decided on the same key, a store whose clock was
// set back. Deciding at the earlier time would count a bucket's refill a
// second time or reset a newer window's count, admitting more than the
// limit; decided at the key's time, the request queues behind the decisions
// already made. GCRA needs no help: an earlier now only makes TAT − now
// larger, so it is decided at now.
//
//	FixedWindow, SlidingWindow:  max(now, A·Period)   (the start of the state's window)
//	TokenBucket:                 max(now, B) when A > 0 (when the units were counted)
//	SlidingLog:                  max(now, newest stamp) (see logTime)
func (p *Policy) keyTime(s State, now int64) int64 {
	switch {
	case s == State{}:
		return now
	case p.alg == FixedWindow || p.alg == SlidingWindow:
		if w, _ := p.dPeriod.floorDivMod(now); w < s.A {
			return s.A * p.period
		}
	case p.alg == TokenBucket:
		if s.A > 0 && s.B > now {
			return s.B
		}
	}
	return now
}

// later is the outcome o of a decision made lag after the caller's time
// (see keyTime), with its waits measured from the caller's time.
func (o outcome) later(lag int64) outcome {
	if o.retryAfter > 0 {
		o.retryAfter += lag
	}
	if o.resetAfter > 0 {
		o.resetAfter += lag
	}
	return o
}

// fixedWindow admits n units at now iff
//
//	c + n ≤ Rate,   where c is the count of window w = ⌊now/Period⌋ (0 if the state is of an older window)
//
// and then counts them: c' = c + n. Remaining = Rate − c'. A refused request
// is admitted when the window ends, RetryAfter = (w+1)·Period − now (n ≤ Rate),
// and so is the key's state fresh again (ResetAfter), unless c' = 0.
func (p *Policy) fixedWindow(s State, now, n int64) (State, outcome) {
	w, e := p.dPeriod.floorDivMod(now)
	toEnd := p.period - e
	c := s.B
	if s.A != w {
		c = 0
	}
	if n > p.burst-c { // c + n > Rate, without overflowing
		return s, outcome{remaining: p.burst - c, retryAfter: toEnd, resetAfter: toEnd}
	}
	c += n
	if c == 0 {
		return State{}, outcome{allowed: true, remaining: p.burst}
	}
	return State{A: w, B: c}, outcome{allowed: true, remaining: p.burst - c, resetAfter: toEnd}
}

// slidingWindow is the sliding window counter. With w = ⌊now/Period⌋,
// elapsed e = now − w·Period, the count of window w (curr) and of window w−1
// (prev), the units of the rolling window are estimated, rounded up, as
//
//	est = curr + ⌈prev·(Period − e)/Period⌉
//
// and n units are admitted iff est + n ≤ Rate; then curr' = curr + n.
// Remaining = Rate − est'. A refused request is admitted at the first instant
// at which the same test passes, given no other traffic: later in this window
// (when prev's weight has shrunk enough), or in the next one (where curr
// becomes prev), or at the start of the one after (RetryAfter, exact). The
// key is fresh again when both counts have left the rolling window: at the
// end of the next window if curr' > 0, else at the end of this one.
func (p *Policy) slidingWindow(s State, now, n int64) (State, outcome) {
	const low = 1<<32 - 1
	w, e := p.dPeriod.floorDivMod(now)
	P, b := p.period, p.burst
	var prev, curr int64
	switch s.A {
	case w:
		prev, curr = int64(uint64(s.B)>>32), s.B&low
	case w - 1:
		prev = s.B & low
	}
	weight := p.dPeriod.mulDivCeil(prev, P-e)
	if curr+n+weight > b {
		o := outcome{remaining: max(0, b-curr-weight), resetAfter: P - e}
		if curr > 0 {
			o.resetAfter = 2*P - e
		}
		// Later in this window: need prev·(P−e') ≤ a·P, a = b − curr − n,
		// i.e. e' ≥ P − ⌊a·P/prev⌋. Refused now means a < prev, so the
		// quotient is below P.
		if a := b - curr - n; a >= 0 {
			if k := mulDiv(a, P, prev); k > 0 {
				o.retryAfter = P - k - e
				return s, o
			}
		}
		// In the next window curr becomes prev: need curr·(P−x) ≤ (b−n)·P.
		var x int64
		if a := b - n; curr > a {
			x = P - mulDiv(a, P, curr)
		}
		o.retryAfter = P - e + x
		return s, o
	}
	curr += n
	o := outcome{allowed: true, remaining: b - curr - weight}
	switch {
	case curr > 0:
		o.resetAfter = 2*P - e
	case prev > 0:
		o.resetAfter = P - e
	default:
		return State{}, o
	}
	return State{A: w, B: prev<<32 | curr}, o
}

// bucket is the arithmetic of TokenBucket and GCRA, which are one algorithm
// kept two ways. In units (see Policy: a token is p units, the bucket holds
// cap = Burst·p, time refills r units per nanosecond), let D be the units
// missing from a full bucket at now:
//
//	TokenBucket: D = max(0, A − (now − B)·r)           (A missing at instant B)
//	GCRA:        D = max(0, TAT − now)·r               (TAT = A + B/r; T = Period/Rate = p/r)
//
// A request of cost n is admitted iff
//
//	D + n·p ≤ cap         (TokenBucket: n tokens are in the bucket;
//	                       GCRA: TAT' − now ≤ τ + T with TAT' = max(TAT, now) + n·T, τ = (Burst−1)·T)
//
// and then D' = D + n·p (TAT' for GCRA). Remaining = ⌊(cap − D')/p⌋ tokens,
// ResetAfter = ⌈D'/r⌉ (until the bucket is full), and a refused request is
// admitted after RetryAfter = ⌈(D + n·p − cap)/r⌉.
func (p *Policy) bucket(s State, now, n int64) (State, outcome) {
	d := p.deficit(s, now)
	need := d + n*p.p
	if need > p.cap {
		return s, outcome{
			remaining:  p.dP.div(max(0, p.cap-d)),
			retryAfter: p.dR.ceil(need - p.cap),
			resetAfter: p.dR.ceil(d),
		}
	}
	return p.fromDeficit(need, now), outcome{
		allowed:    true,
		remaining:  p.dP.div(p.cap - need),
		resetAfter: p.dR.ceil(need),
	}
}

// deficit returns D, the units missing from a full bucket at now (see bucket).
func (p *Policy) deficit(s State, now int64) int64 {
	if p.alg == GCRA {
		if s.A < now {
			return 0 // TAT = A + B/r < A + 1 ≤ now
		}
		return (s.A-now)*p.r + s.B
	}
	d := s.A
	if d <= 0 {
		return 0
	}
	el := now - s.B
	if el <= 0 {
		return d // a store's clock stepped back: refill nothing
	}
	if el > p.dR.div(d) {
		return 0 // el·r > d, without overflowing
	}
	return d - el*p.r
}

// fromDeficit is the state of a bucket missing d units at now (the zero
// State when it is full).
func (p *Policy) fromDeficit(d, now int64) State {
	if d <= 0 {
		return State{}
	}
	if p.alg == GCRA {
		q, r := p.dR.divMod(d)
		return State{A: now + q, B: r}
	}
	return State{A: d, B: now}
}

// reserve is the leaky bucket as a queue: it takes n tokens at now even
// when the bucket does not hold them, running into debt, and returns the
// delay after which the request may go, ⌈(D + n·p − cap)/r⌉ (0 if the tokens
// are there; decided at keyTime, plus the lag when there is a delay). It refuses, changing nothing, when the delay would exceed
// maxWait or the debt would exceed the arithmetic's bound. The mark records
// D' and now, to refund the reservation later. Buckets only.
func (p *Policy) reserve(s State, now, n, maxWait int64) (next State, ok bool, delay int64, mark State) {
	t := p.keyTime(s, now)
	lag := t - now
	now = t
	d := p.deficit(s, now)
	need := d + n*p.p
	if need > maxUnits {
		return s, false, p.dR.ceil(need-p.cap) + lag, State{}
	}
	if need > p.cap {
		delay = p.dR.ceil(need-p.cap) + lag
	}
	if delay > maxWait {
		return s, false, delay, State{}
	}
	return p.fromDeficit(need, now), true, delay, State{A: need, B: now}
}

// refund gives back a reservation of n tokens whose mark is m, as far as
// nothing reserved after it relies on them: it returns n·p units minus the
// units taken since the reservation, and nothing once the reservation's
// delay has passed (its tokens are spent). Buckets only.
func (p *Policy) refund(s State, now, n int64, m State) State {
	now = p.keyTime(s, now)
	if m.A <= p.cap {
		return p.settled(s, now) // it went at once: spent
	}
	el := max(0, now-m.B)
	if el >= p.dR.ceil(m.A-p.cap) {
		return p.settled(s, now) // its delay has passed: spent
	}
	md := m.A - el*p.r // what the reservation alone would still leave missing
	d := p.deficit(s, now)
	give := n*p.p - max(0, d-md)
	if give <= 0 {
		return p.settled(s, now)
	}
	return p.fromDeficit(d-give, now)
}

// settled returns s, or the zero State if the bucket is full at now: a
// refund that gives nothing back still leaves a fresh key's state as the
// zero State, as every other decision does.
func (p *Policy) settled(s State, now int64) State {
	if p.deficit(s, now) <= 0 {
		return State{}
	}
	return s
}

// stampLog is a SlidingLog key's state: the instants of the units admitted
// in the last Period, oldest first, in a ring that grows to at most Rate
// entries.
type stampLog struct {
	ts   []int64
	head int
	n    int
}

func (l *stampLog) at(i int) int64 {
	j := l.head + i
	if j >= len(l.ts) {
		j -= len(l.ts)
	}
	return l.ts[j]
}

// push appends k copies of t, growing the ring up to limit entries.
func (l *stampLog) push(t int64, k, limit int) {
	if l.n+k > len(l.ts) {
		size := min(limit, max(4, 2*len(l.ts), l.n+k))
		ts := make([]int64, size)
		for i := range l.n {
			ts[i] = l.at(i)
		}
		l.ts, l.head = ts, 0
	}
	for range k {
		j := l.head + l.n
		if j >= len(l.ts) {
			j -= len(l.ts)
		}
		l.ts[j] = t
		l.n++
	}
}

// pop removes the k newest entries (an undone admission).
func (l *stampLog) pop(k int) { l.n -= k }

// drop removes the k oldest entries.
func (l *stampLog) drop(k int) {
	l.head += k
	if l.head >= len(l.ts) {
		l.head -= len(l.ts)
	}
	l.n -= k
}

// before returns how many entries are at or before t (they are in order).
func (l *stampLog) before(t int64) int {
	lo, hi := 0, l.n
	for lo < hi {
		if m := int(uint(lo+hi) >> 1); l.at(m) <= t {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo
}

// logTime is keyTime for a log: max(now, its newest stamp), so that stamps
// stay in order and a request with an earlier time is decided behind them.
func (p *Policy) logTime(l *stampLog, now int64) int64 {
	if l.n > 0 {
		return max(now, l.at(l.n-1))
	}
	return now
}

// slidingLog admits n units at now iff, with c the units admitted in the
// half-open window (now − Period, now],
//
//	c + n ≤ Rate
//
// and records n stamps of now. Remaining = Rate − c'. A refused request is
// admitted when the (c + n − Rate)-th oldest stamp t leaves the window,
// RetryAfter = t + Period − now; the key is fresh when its newest stamp t
// leaves, ResetAfter = t + Period − now.
//
// It is decided at logTime (a later time when now reads earlier than the
// newest stamp), its waits measured from now. The stamps that have left the
// window are dropped only when all have (the log is then a fresh key's) or
// when units are admitted (their stamp, now, becomes the newest): a request
// that admits nothing keeps them, so that one whose time reads earlier, and
// is decided at the newest stamp, still counts them.
func (p *Policy) slidingLog(l *stampLog, now, n int64) outcome {
	t := p.logTime(l, now) // the decision's time; the waits count from now
	old := l.before(t - p.period)
	if old == l.n {
		l.head, l.n, old = 0, 0, 0
	}
	c := int64(l.n - old)
	if c+n > p.burst {
		return outcome{
			remaining:  p.burst - c,
			retryAfter: l.at(old+int(c+n-p.burst-1)) + p.period - now,
			resetAfter: l.at(l.n-1) + p.period - now,
		}
	}
	if n > 0 {
		l.drop(old)
		l.push(t, int(n), int(p.burst))
	}
	o := outcome{allowed: true, remaining: p.burst - c - n}
	if l.n > 0 {
		o.resetAfter = l.at(l.n-1) + p.period - now
	}
	return o
}

// floorDivMod returns ⌊a/b⌋ and a − b·⌊a/b⌋ for b > 0 (also for a < 0,
// instants before 1970).
func floorDivMod(a, b int64) (q, r int64) {
	q, r = a/b, a%b
	if r < 0 {
		q, r = q-1, r+b
	}
	return q, r
}

// ceilDiv returns ⌈a/b⌉ for a ≥ 0, b > 0.
func ceilDiv(a, b int64) int64 {
	q := a / b
	if q*b != a {
		q++
	}
	return q
}

// mulDiv returns ⌊a·b/c⌋ for non-negative a, b and c > 0 with a·b/c < 2^63,
// through a 128-bit product.
func mulDiv(a, b, c int64) int64 {
	hi, lo := bits.Mul64(uint64(a), uint64(b))
	q, _ := bits.Div64(hi, lo, uint64(c))
	return int64(q)
}

// mulDivCeil returns ⌈a·b/c⌉ under the conditions of mulDiv.
func mulDivCeil(a, b, c int64) int64 {
	hi, lo := bits.Mul64(uint64(a), uint64(b))
	q, r := bits.Div64(hi, lo, uint64(c))
	if r != 0 {
		q++
	}
	return int64(q)
}
