package ratelimit

import (
	"context"
	"time"
)

// Decision is a Result in 32 bytes: the same decision, in a value small
// enough for the compiler to keep in registers from the store to the
// caller's test of Allowed. A Result (seven fields, 40 bytes) lives in
// memory instead, and the code Go generates for a call that returns one
// stores it field by field and then copies it with 16-byte moves, a
// store-forwarding stall per decision (measured: 5–13 ns of a 50–75 ns
// decision on one key). Use Take and Decision where decisions are many and
// every nanosecond counts; Allow and Result are the same decision with
// every field at hand.
//
// The limit (Result.Limit) is not in a Decision: it is the limiter's
// Burst, the same for every decision (Limiter.Policy().Limit().Burst).
// The zero Decision holds no decision, as the zero Result does.
type Decision struct {
	info       uint64 // allowed | shadowed<<1 | Source<<8
	remaining  int64
	retryAfter int64
	resetAfter int64
}

const (
	decAllowed  = 1
	decShadowed = 2
)

// Allowed reports whether the request was admitted (Result.Allowed).
func (d Decision) Allowed() bool { return d.info&decAllowed != 0 }

// Shadowed reports whether a limiter in shadow mode admitted a request its
// limit refused (Result.Shadowed).
func (d Decision) Shadowed() bool { return d.info&decShadowed != 0 }

// Source says what made the decision (Result.Source).
func (d Decision) Source() Source { return Source(d.info >> 8) }

// Remaining is how many more units the key would be granted right now
// (Result.Remaining).
func (d Decision) Remaining() int { return int(d.remaining) }

// RetryAfter is 0 for an admission, else how long until the same request
// would be admitted (Result.RetryAfter).
func (d Decision) RetryAfter() time.Duration { return time.Duration(d.retryAfter) }

// ResetAfter is how long until the key is back to a fresh key's state
// (Result.ResetAfter).
func (d Decision) ResetAfter() time.Duration { return time.Duration(d.resetAfter) }

// Result returns the decision as a Result of a limiter whose Burst is
// limit.
func (d Decision) Result(limit int) Result {
	return Result{
		Allowed:    d.Allowed(),
		Shadowed:   d.Shadowed(),
		Source:     d.Source(),
		Limit:      limit,
		Remaining:  d.Remaining(),
		RetryAfter: d.RetryAfter(),
		ResetAfter: d.ResetAfter(),
	}
}

// decisionOf is the Decision of res.
func decisionOf(res Result) Decision {
	d := Decision{
		info:       uint64(res.Source) << 8,
		remaining:  int64(res.Remaining),
		retryAfter: int64(res.RetryAfter),
		resetAfter: int64(res.ResetAfter),
	}
	if res.Allowed {
		d.info |= decAllowed
	}
	if res.Shadowed {
		d.info |= decShadowed
	}
	return d
}

// decision is the Decision of o (see outcome.result).
func (o outcome) decision() Decision {
	if o.remaining == fullMark {
		return Decision{info: uint64(SourceFull) << 8, retryAfter: o.retryAfter}
	}
	d := Decision{info: uint64(SourceLimit) << 8, remaining: o.remaining, retryAfter: o.retryAfter, resetAfter: o.resetAfter}
	if o.allowed {
		d.info |= decAllowed
	}
	return d
}

// Take is AllowN returning a Decision: the same decision, the same errors,
// the same observers and shadow mode, in a value that stays in registers
// (see Decision). On the in-memory store, Take on a held key takes one
// shard lock and allocates nothing.
func (l *Limiter) Take(ctx context.Context, key string, n int) (Decision, error) {
	if l.tab == nil || l.shadow || l.obs != nil {
		res, err := l.AllowN(ctx, key, n)
		return decisionOf(res), err
	}
	if err := l.check(key, n); err != nil {
		return Decision{}, err
	}
	return l.tab.takeAt(key, &l.timebase, int64(n)).decision(), nil
}
