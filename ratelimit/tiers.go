package ratelimit

import (
	"context"
	"errors"
	"fmt"
)

// Tiers checks one request against several limits, each on its own key (per
// IP, per API key, per tenant, per endpoint). Build it with All.
//
// The request is admitted only if every tier admits it, and a tier that
// admits spends nothing when another refuses. All tiers are decided in one
// atomic step, so concurrent requests can never see one tier's allowance
// spent on a request another tier refused. On in-memory stores (also
// different ones) the shards of all the request's keys are locked together,
// in one global order, while the tiers are decided and the spending is
// committed or undone; on another store, all tiers go to that store in one
// Store.Apply batch, which is all or nothing.
//
// A tier in shadow mode (WithShadow) is decided and counted but never
// refuses the request. A Tiers is safe for concurrent use.
type Tiers struct {
	lims  []*Limiter
	tabs  []table // every tier's in-memory table, when all are in memory
	store Store   // the tiers' one store, otherwise
}

// All returns the tiers of limiters, decided in the order given. Either
// every limiter keeps its state in memory (a MemoryStore, the default), or
// all share one Store. All decisions are made at one instant, read from the
// first limiter's clock.
func All(limiters ...*Limiter) (*Tiers, error) {
	if len(limiters) == 0 {
		return nil, errors.New("sluice/ratelimit: All(): at least one limiter is required")
	}
	t := &Tiers{lims: limiters}
	var errs []error
	for i, l := range limiters {
		if l == nil {
			errs = append(errs, fmt.Errorf("sluice/ratelimit: All: limiter %d is nil", i))
			continue
		}
		for _, o := range limiters[:i] {
			if o == l {
				errs = append(errs, fmt.Errorf("sluice/ratelimit: All: limiter %d appears twice", i))
			}
		}
		if l.mem != nil {
			t.tabs = append(t.tabs, l.tbl)
		}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	if len(t.tabs) != len(limiters) {
		t.tabs = nil
		t.store = limiters[0].store
		for _, l := range limiters {
			if l.store == nil || l.store != t.store {
				return nil, errors.New("sluice/ratelimit: All: the limiters must all keep their state in memory, or all share one Store")
			}
		}
	}
	return t, nil
}

// Len returns the number of tiers.
func (t *Tiers) Len() int { return len(t.lims) }

// Allow is shorthand for AllowN(ctx, keys, 1, nil): keys[i] is the key of
// tier i.
func (t *Tiers) Allow(ctx context.Context, keys ...string) (Result, error) {
	return t.AllowN(ctx, keys, 1, nil)
}

// AllowN decides a request of cost n whose key in tier i is keys[i], and
// counts it in every tier if, and only if, every tier admits it. If each is
// not nil it must have one element per tier, and receives each tier's own
// decision. A tier that admitted a refused request reports Allowed and its
// unchanged Remaining.
//
// The returned Result combines the tiers that enforce (all tiers, if every
// one is in shadow mode): Allowed if none refused; Limit and Remaining of
// the tier with the fewest units remaining; RetryAfter, the longest wait of a
// refusing tier (exactly when the request would pass every tier, since a
// waiting tier's capacity only grows); ResetAfter, the longest of all;
// Shadowed if a tier in shadow mode would have refused; and Source
// SourceLimit if every such tier's limit decided, else the Source of the
// first that was decided otherwise (a key the store cannot hold, a failed
// store's policy). AllowN follows the error contract of Limiter.AllowN, and
// returns an error when keys (or each) does not have one element per tier.
func (t *Tiers) AllowN(ctx context.Context, keys []string, n int, each []Result) (Result, error) {
	if len(keys) != len(t.lims) || (each != nil && len(each) != len(t.lims)) {
		return Result{}, fmt.Errorf("sluice/ratelimit: Tiers.AllowN: %d keys and %d results for %d tiers", len(keys), len(each), len(t.lims))
	}
	for i, l := range t.lims {
		if err := l.check(keys[i], n); err != nil {
			return Result{}, fmt.Errorf("tier %d: %w", i, err)
		}
	}
	if t.tabs != nil {
		return t.allowMem(keys, n, each), nil
	}
	return t.allowStore(ctx, keys, n, each)
}

func (t *Tiers) allowMem(keys []string, n int, each []Result) Result {
	var buf [8]Request
	reqs := t.requests(buf[:0], keys, n)
	_ = applyTables(t.lims[0].now(), reqs, t.tabs) // in memory: always decided
	return t.combine(reqs, n, each)
}

func (t *Tiers) allowStore(ctx context.Context, keys []string, n int, each []Result) (Result, error) {
	var buf [8]Request
	reqs := t.requests(buf[:0], keys, n)
	l := t.lims[0]
	if err := t.store.Apply(ctx, l.timeOf(l.now()), reqs); err != nil {
		return Result{}, err
	}
	return t.combine(reqs, n, each), nil
}

func (t *Tiers) requests(reqs []Request, keys []string, n int) []Request {
	for i, l := range t.lims {
		reqs = append(reqs, Request{Key: keys[i], Policy: &l.pol, N: n, Shadow: l.shadow})
	}
	return reqs
}

// combine applies shadow mode to each tier's decision, reports it and
// combines the tiers' decisions into the request's.
func (t *Tiers) combine(reqs []Request, n int, each []Result) Result {
	enforcing := false
	for _, l := range t.lims {
		enforcing = enforcing || !l.shadow
	}
	out := Result{Allowed: true, Source: SourceLimit, Remaining: -1}
	for i, l := range t.lims {
		res := l.finish(storeResult(reqs[i].Result), n)
		if each != nil {
			each[i] = res
		}
		if res.Shadowed {
			out.Shadowed = true
		}
		if enforcing && l.shadow {
			continue
		}
		if !res.Allowed {
			out.Allowed = false
		}
		if out.Source == SourceLimit {
			out.Source = res.Source
		}
		if res.Shadowed || !res.Allowed {
			out.RetryAfter = max(out.RetryAfter, res.RetryAfter)
		}
		out.ResetAfter = max(out.ResetAfter, res.ResetAfter)
		if out.Remaining < 0 || res.Remaining < out.Remaining {
			out.Limit, out.Remaining = res.Limit, res.Remaining
		}
	}
	return out
}
