package ratelimit

// The arithmetic of FixedWindow, SlidingWindow, TokenBucket and GCRA as it
// was before the division-free rewrite (issue 18), with every division a
// division instruction: the reference the differential tests compare the
// current code with (TestArithmeticMatchesReference, FuzzArithmeticMatchesReference).
// Do not edit it to follow the current code: its purpose is to stay what it was.

// take dispatches to the algorithm. Requires 0 ≤ n ≤ burst and
// p.alg != SlidingLog.
func (p *Policy) refTake(s State, now, n int64) (State, outcome) {
	t := p.refKeyTime(s, now)
	var next State
	var o outcome
	switch p.alg {
	case FixedWindow:
		next, o = p.refFixedWindow(s, t, n)
	case SlidingWindow:
		next, o = p.refSlidingWindow(s, t, n)
	default:
		next, o = p.refBucket(s, t, n)
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
func (p *Policy) refKeyTime(s State, now int64) int64 {
	switch {
	case s == State{}:
		return now
	case p.alg == FixedWindow || p.alg == SlidingWindow:
		if w, _ := floorDivMod(now, p.period); w < s.A {
			return s.A * p.period
		}
	case p.alg == TokenBucket:
		if s.A > 0 && s.B > now {
			return s.B
		}
	}
	return now
}

// fixedWindow admits n units at now iff
//
//	c + n ≤ Rate,   where c is the count of window w = ⌊now/Period⌋ (0 if the state is of an older window)
//
// and then counts them: c' = c + n. Remaining = Rate − c'. A refused request
// is admitted when the window ends, RetryAfter = (w+1)·Period − now (n ≤ Rate),
// and so is the key's state fresh again (ResetAfter), unless c' = 0.
func (p *Policy) refFixedWindow(s State, now, n int64) (State, outcome) {
	w, e := floorDivMod(now, p.period)
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
func (p *Policy) refSlidingWindow(s State, now, n int64) (State, outcome) {
	const low = 1<<32 - 1
	w, e := floorDivMod(now, p.period)
	P, b := p.period, p.burst
	var prev, curr int64
	switch s.A {
	case w:
		prev, curr = int64(uint64(s.B)>>32), s.B&low
	case w - 1:
		prev = s.B & low
	}
	weight := mulDivCeil(prev, P-e, P)
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
func (p *Policy) refBucket(s State, now, n int64) (State, outcome) {
	d := p.refDeficit(s, now)
	need := d + n*p.p
	if need > p.cap {
		return s, outcome{
			remaining:  max(0, p.cap-d) / p.p,
			retryAfter: ceilDiv(need-p.cap, p.r),
			resetAfter: ceilDiv(d, p.r),
		}
	}
	return p.refFromDeficit(need, now), outcome{
		allowed:    true,
		remaining:  (p.cap - need) / p.p,
		resetAfter: ceilDiv(need, p.r),
	}
}

// deficit returns D, the units missing from a full bucket at now (see bucket).
func (p *Policy) refDeficit(s State, now int64) int64 {
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
	if el > d/p.r {
		return 0 // el·r > d, without overflowing
	}
	return d - el*p.r
}

// fromDeficit is the state of a bucket missing d units at now (the zero
// State when it is full).
func (p *Policy) refFromDeficit(d, now int64) State {
	if d <= 0 {
		return State{}
	}
	if p.alg == GCRA {
		return State{A: now + d/p.r, B: d % p.r}
	}
	return State{A: d, B: now}
}

// reserve is the leaky bucket as a queue: it takes n tokens at now even
// when the bucket does not hold them, running into debt, and returns the
// delay after which the request may go, ⌈(D + n·p − cap)/r⌉ (0 if the tokens
// are there; decided at keyTime, plus the lag when there is a delay). It refuses, changing nothing, when the delay would exceed
// maxWait or the debt would exceed the arithmetic's bound. The mark records
// D' and now, to refund the reservation later. Buckets only.
func (p *Policy) refReserve(s State, now, n, maxWait int64) (next State, ok bool, delay int64, mark State) {
	t := p.refKeyTime(s, now)
	lag := t - now
	now = t
	d := p.refDeficit(s, now)
	need := d + n*p.p
	if need > maxUnits {
		return s, false, ceilDiv(need-p.cap, p.r) + lag, State{}
	}
	if need > p.cap {
		delay = ceilDiv(need-p.cap, p.r) + lag
	}
	if delay > maxWait {
		return s, false, delay, State{}
	}
	return p.refFromDeficit(need, now), true, delay, State{A: need, B: now}
}

// refund gives back a reservation of n tokens whose mark is m, as far as
// nothing reserved after it relies on them: it returns n·p units minus the
// units taken since the reservation, and nothing once the reservation's
// delay has passed (its tokens are spent). Buckets only.
func (p *Policy) refRefund(s State, now, n int64, m State) State {
	now = p.refKeyTime(s, now)
	if m.A <= p.cap {
		return p.refSettled(s, now) // it went at once: spent
	}
	el := max(0, now-m.B)
	if el >= ceilDiv(m.A-p.cap, p.r) {
		return p.refSettled(s, now) // its delay has passed: spent
	}
	md := m.A - el*p.r // what the reservation alone would still leave missing
	d := p.refDeficit(s, now)
	give := n*p.p - max(0, d-md)
	if give <= 0 {
		return p.refSettled(s, now)
	}
	return p.refFromDeficit(d-give, now)
}

// settled returns s, or the zero State if the bucket is full at now: a
// refund that gives nothing back still leaves a fresh key's state as the
// zero State, as every other decision does.
func (p *Policy) refSettled(s State, now int64) State {
	if p.refDeficit(s, now) <= 0 {
		return State{}
	}
	return s
}
