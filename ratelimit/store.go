package ratelimit

import (
	"context"
	"fmt"
	"hash/maphash"
	"math"
	"sync"
	"sync/atomic"
	"time"
)

// A Store keeps the per-key state of rate limits and applies decisions to it
// atomically. The Limiter validates its input and does everything else:
// shadow mode, observers, waiting. A Store only decides and keeps state, so
// the same Limiter gives the same decisions on every Store.
//
// The decisions are those of Policy.Decide, Policy.Reserve and
// Policy.Refund (and, for SlidingLog, of a log of timestamps, see
// SlidingLog): a Store that keeps state elsewhere, such as a Redis script,
// must reproduce them exactly, in Unix nanoseconds; ratelimittest.Run checks
// that it does. now is the
// limiter's time; a Store may decide at its own time instead (a Redis store
// reads the server's clock, so that every client decides on one time base).
// The in-memory store uses now.
type Store interface {
	// Apply carries out reqs as one atomic step at time now and fills in
	// their results. Each request is decided against the state the requests
	// before it in reqs left. If an OpAllow request that is not Shadow is
	// refused, or an OpReserve request is refused, no request of the batch
	// changes any state (all or nothing). Apply must not keep reqs after it
	// returns: the caller reuses them.
	//
	// The error contract is the Limiter's: a nil error means every request
	// holds a decision, a non-nil one that none does (invalid requests, ctx
	// ending first, a failure with no policy to decide), and then nothing
	// has changed. A decision that is not the limit's carries its Source:
	// SourceFull for a key the store cannot hold (a refusal, which refuses
	// the batch), SourceFailClosed, SourceFailOpen or SourceFailLocal for a
	// failure policy's; a Result left with SourceNone is read as the
	// limit's (SourceLimit).
	Apply(ctx context.Context, now time.Time, reqs []Request) error
}

// Op is what a Request does to its key.
type Op uint8

// The operations of a Request.
const (
	// OpAllow takes N units if the limit admits them now; a refused request
	// takes nothing. N = 0 reports the key's state without taking anything.
	OpAllow Op = iota
	// OpReserve takes N units now even if the bucket does not hold them yet
	// (TokenBucket and GCRA only), unless the caller would have to wait
	// longer than MaxWait. Delay is how long the caller must wait, and Mark
	// identifies the reservation for OpRefund.
	OpReserve
	// OpRefund gives back a reservation of N units identified by Mark,
	// minus what reservations made after it rely on, unless its delay has
	// passed. It always succeeds.
	OpRefund
)

// A Request is one decision for one key, for Store.Apply.
type Request struct {
	Key    string
	Policy *Policy
	Op     Op
	N      int
	// Shadow: a refusal of this request does not refuse the batch.
	Shadow bool
	// MaxWait bounds the Delay of an OpReserve: 0 means no bound, a
	// negative MaxWait admits no delay at all.
	MaxWait time.Duration

	// Mark identifies a reservation: set by OpReserve, read by OpRefund.
	Mark State
	// Delay is set by OpReserve: how long the caller must wait before it
	// may go (the delay it would have had when refused).
	Delay time.Duration
	// Result is set by Apply. A request admitted in a batch that another
	// request refused reports Allowed and the remaining units of its
	// unchanged state.
	Result Result
}

// MemoryStore is the in-memory Store, and the default one. Keys are spread
// over 256 shards, each an open-addressing table under its own mutex; a
// decision on a held key takes one lock and allocates nothing. It is safe for
// concurrent use.
//
// Memory: for FixedWindow, SlidingWindow, TokenBucket and GCRA a held key
// costs one 32-byte slot without pointers (hash bits, the key itself when it
// has at most 12 bytes, its 16-byte state) in a table kept 53–81% full,
// about 40–60 bytes with the key (44 measured at a million keys); a longer
// key adds its bytes, in its shard's byte arena. A SlidingLog key costs its
// bytes, a slot and up to Rate 8-byte stamps (at most 512 KiB, see
// MaxLogRate).
//
// Only a key whose state is back to a fresh key's is ever dropped, so
// forgetting a key never resets an active limit. Such keys are dropped
// incrementally, as traffic passes through their shard, sparing keys in
// steady use (a second chance: a key under its limit may be fresh at every
// visit, and dropping it would only cost an insert at the next); nothing
// sweeps the whole store at once.
//
// The store holds at most maxKeys keys. At the cap, a request for a key it
// does not hold is refused (a Result with Source SourceFull, and a nil
// error: a decision, not a failure) unless a fresh key can be dropped to make room: in the key's shard or in
// a few others, looking at a bounded number of slots. Keys already held are
// decided as always. A key spray therefore costs at most maxKeys keys of
// memory and can never make a limit silently unlimited; while the store is
// full of keys that are still limited, new callers are refused.
//
// Limiters with equal Policies on one store share their keys' state, as they
// would on a shared Redis; limiters with different Policies never do.
type MemoryStore struct {
	seed    maphash.Seed
	maxKeys int64
	keys    atomic.Int64
	mu      sync.Mutex
	tables  map[Policy]table
}

// NewMemoryStore returns an empty in-memory store that holds at most maxKeys
// keys (at least 1) over all the limits that use it.
func NewMemoryStore(maxKeys int) (*MemoryStore, error) {
	if maxKeys < 1 {
		return nil, fmt.Errorf("sluice/ratelimit: max keys %d: must be at least 1", maxKeys)
	}
	return &MemoryStore{seed: maphash.MakeSeed(), maxKeys: int64(maxKeys), tables: make(map[Policy]table)}, nil
}

// Len returns the number of keys the store holds.
func (m *MemoryStore) Len() int { return int(m.keys.Load()) }

func (m *MemoryStore) addKey() bool {
	if m.keys.Add(1) > m.maxKeys {
		m.keys.Add(-1)
		return false
	}
	return true
}

var tableOrder atomic.Uint64

// table is the store's table for one Policy: exactly one of st and lt is
// set. order ranks tables for taking several shard locks at once.
type table struct {
	st    *stateTable
	lt    *logTable
	order uint64
}

type logTable struct {
	shards[*stampLog]
	pol Policy
}

// tableFor returns the table of p, creating it on first use.
func (m *MemoryStore) tableFor(p Policy) table {
	m.mu.Lock()
	defer m.mu.Unlock()
	if t, ok := m.tables[p]; ok {
		return t
	}
	t := table{order: tableOrder.Add(1)}
	if p.alg == SlidingLog {
		lt := &logTable{pol: p}
		lt.seed, lt.store = m.seed, m
		lt.fresh = func(l **stampLog, now int64) bool {
			lt.pol.slidingLog(*l, now, 0)
			return (*l).n == 0
		}
		t.lt = lt
	} else {
		st := newStateTable(m, p)
		t.st = st
	}
	m.tables[p] = t
	return t
}

// take is the decision of one SlidingLog OpAllow request.
func (t *logTable) take(key string, now, n int64) outcome {
	h := t.hash(key)
	sh := t.shardOf(h)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	i, found := sh.find(key, h)
	if !found {
		var l stampLog
		o := t.pol.slidingLog(&l, now, n)
		if o.allowed && l.n > 0 {
			if _, err := t.insert(sh, key, h, &l, now); err != nil {
				return t.pol.full(n)
			}
		}
		return o
	}
	l := sh.slots[i].val
	o := t.pol.slidingLog(l, now, n)
	if l.n == 0 {
		t.remove(sh, i)
	} else {
		sh.touch(i)
		t.tick(sh, now)
	}
	return o
}

// full is the refusal of a request for a key a full store cannot hold: a
// retry is worth it no sooner than the limit takes to grant n units.
func (p *Policy) full(n int64) outcome {
	return outcome{remaining: fullMark, retryAfter: max(1, mulDivCeil(n, p.period, p.rate))}
}

// Apply carries out reqs as one atomic step (see Store). The shards of all
// the keys involved are locked together, in a fixed order, for the whole
// batch: the requests are decided in order, and if one refuses, the changes
// of the others are undone before anyone else can see them.
func (m *MemoryStore) Apply(ctx context.Context, now time.Time, reqs []Request) error {
	return m.apply(now.UnixNano(), reqs)
}

// lockRef is a shard lock of a batch.
type lockRef struct {
	order uint64
	shard uint64
	mu    *sync.Mutex
}

// undo restores one request's key after a refused batch.
type undo struct {
	done    bool  // the request changed state
	existed bool  // the key was held before
	prev    State // its state before (stateTable)
	taken   int   // stamps pushed (logTable)
}

func (m *MemoryStore) apply(now int64, reqs []Request) error {
	if err := checkRequests(reqs); err != nil {
		return err
	}
	var tabBuf [8]table
	tabs := tabBuf[:0]
	for i := range reqs {
		tabs = append(tabs, m.tableFor(*reqs[i].Policy))
	}
	return applyTables(now, reqs, tabs)
}

// applyTables carries out a valid batch whose request i is on table tabs[i]
// (see Apply). The tables may belong to different stores.
func applyTables(now int64, reqs []Request, tabs []table) error {
	var (
		hashBuf [8]uint64
		lockBuf [8]lockRef
		undoBuf [8]undo
	)
	hashes, locks, undos := hashBuf[:0], lockBuf[:0], undoBuf[:0]
	for i, t := range tabs {
		var h uint64
		var mu *sync.Mutex
		if t.st != nil {
			h = t.st.probeOf(reqs[i].Key).h
			mu = &t.st.shardOf(h).mu
		} else {
			h = t.lt.hash(reqs[i].Key)
			mu = &t.lt.shardOf(h).mu
		}
		hashes = append(hashes, h)
		locks = append(locks, lockRef{order: t.order, shard: h & (numShards - 1), mu: mu})
		undos = append(undos, undo{})
	}
	locks = sortLocks(locks)
	for _, l := range locks {
		l.mu.Lock()
	}
	defer func() {
		for _, l := range locks {
			l.mu.Unlock()
		}
	}()

	refused := false
	for i := range reqs {
		r := &reqs[i]
		if tabs[i].st != nil {
			undos[i] = tabs[i].st.do(r, now)
		} else {
			undos[i] = tabs[i].lt.do(r, hashes[i], now)
		}
		if (r.Op == OpAllow && !r.Shadow && !r.Result.Allowed) || (r.Op == OpReserve && !r.Result.Allowed) {
			refused = true
		}
	}
	if !refused {
		return nil
	}
	for i := len(reqs) - 1; i >= 0; i-- {
		if !undos[i].done {
			continue
		}
		r := &reqs[i]
		if tabs[i].st != nil {
			tabs[i].st.revert(r, undos[i], now)
		} else {
			tabs[i].lt.revert(r, hashes[i], undos[i], now)
		}
	}
	return nil
}

// CheckRequests validates a batch for Store.Apply: every request has a
// Policy, a key of 1 to 65536 bytes, a cost within [0, Burst] for OpAllow
// and [1, Burst] otherwise, and an Op its algorithm supports. Stores call it
// so that every store rejects the same input with the same errors.
func CheckRequests(reqs []Request) error { return checkRequests(reqs) }

// checkRequests validates a batch for Apply.
func checkRequests(reqs []Request) error {
	for i := range reqs {
		r := &reqs[i]
		if r.Policy == nil || r.Policy.alg == 0 {
			return fmt.Errorf("sluice/ratelimit: request %d: no policy", i)
		}
		if r.Key == "" || len(r.Key) > maxKeyLen {
			return fmt.Errorf("request %d: %w", i, keyError(r.Key, maxKeyLen))
		}
		min := 1
		if r.Op == OpAllow {
			min = 0
		}
		if r.N < min || int64(r.N) > r.Policy.burst {
			return fmt.Errorf("request %d: %w", i, costError(r.N, r.Policy.burst))
		}
		switch r.Op {
		case OpAllow:
		case OpReserve, OpRefund:
			if !r.Policy.alg.reserves() {
				return fmt.Errorf("request %d: %w", i, errNoReserve(r.Policy.alg))
			}
		default:
			return fmt.Errorf("sluice/ratelimit: request %d: unknown op %d", i, r.Op)
		}
	}
	return nil
}

// sortLocks sorts a batch's shard locks by (table, shard) and drops
// duplicates, so that batches lock in one global order and never deadlock.
func sortLocks(ls []lockRef) []lockRef {
	for i := 1; i < len(ls); i++ {
		for j := i; j > 0 && (ls[j].order < ls[j-1].order || ls[j].order == ls[j-1].order && ls[j].shard < ls[j-1].shard); j-- {
			ls[j], ls[j-1] = ls[j-1], ls[j]
		}
	}
	out := ls[:0]
	for i, l := range ls {
		if i == 0 || l.mu != ls[i-1].mu {
			out = append(out, l)
		}
	}
	return out
}

// do carries out one SlidingLog request of a batch. A key the store cannot
// hold is refused (SourceFull). Requires its shard locked.
func (t *logTable) do(r *Request, h uint64, now int64) undo {
	sh := t.shardOf(h)
	i, found := sh.find(r.Key, h)
	var l *stampLog
	if found {
		l = sh.slots[i].val
	} else {
		l = new(stampLog)
	}
	o := t.pol.slidingLog(l, now, int64(r.N))
	r.Result = o.result(t.pol.burst)
	u := undo{existed: found}
	if !o.allowed || r.N == 0 {
		if found && l.n == 0 {
			t.remove(sh, i)
		}
		return u
	}
	u.taken = r.N
	if !found {
		if _, err := t.insert(sh, r.Key, h, l, now); err != nil {
			r.Result = t.pol.full(int64(r.N)).result(t.pol.burst)
			return u
		}
	}
	u.done = true
	return u
}

// revert undoes a SlidingLog request of a refused batch. Requires its shard
// locked.
func (t *logTable) revert(r *Request, h uint64, u undo, now int64) {
	sh := t.shardOf(h)
	i, found := sh.find(r.Key, h)
	if !found {
		return
	}
	l := sh.slots[i].val
	l.pop(u.taken)
	allowed := r.Result.Allowed
	r.Result = t.pol.slidingLog(l, now, 0).result(t.pol.burst)
	r.Result.Allowed = allowed
	if l.n == 0 {
		t.remove(sh, i)
	}
}

// durationNs converts a wait bound, where 0 means none.
func durationNs(d time.Duration) int64 {
	if d == 0 {
		return math.MaxInt64
	}
	return max(0, int64(d))
}

var _ Store = (*MemoryStore)(nil)

// errNoReserve is the error of Reserve and Wait on a window algorithm.
func errNoReserve(a Algorithm) error {
	return fmt.Errorf("%w: %v", ErrNoReserve, a)
}
