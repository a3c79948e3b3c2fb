package ratelimit

import (
	"encoding/binary"
	"hash/maphash"
	"math"
	"math/bits"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"
)

// The table of the constant-state algorithms (FixedWindow, SlidingWindow,
// TokenBucket, GCRA): one cache line per decision. It follows the rules of
// the generic table (table.go: 256 shards, open addressing with linear
// probing and backward-shift deletion, the second-chance sweep, the bounded
// reclaim at the key cap, nothing that sweeps a whole shard), with slots made
// for one memory access:
//
//	slot (32 bytes, no pointer, 32-byte aligned so it never straddles a cache line)
//	  meta  uint32   used<<31 | length class<<27 | 27 bits of the key's hash (0: empty)
//	  k0    uint32   a short key's bytes 0–3, or a long key's offset in its shard's arena
//	  k1    uint64   a short key's bytes 4–11, or a long key's length | its bytes 0–3 <<32
//	  val   State    16 bytes
//
// A key of at most shortKey bytes (an IPv4 address, "user:12345") is kept
// whole in its slot, zero-padded: a probe compares meta (hash bits and
// length), then two words, and never leaves the slot's cache line. A longer
// key's bytes go to its shard's arena, a []byte that the slot indexes; the
// probe compares the hash bits, the length and the first four bytes before
// it reads the arena, so the second access is paid only on a match. With no
// pointer in a slot or the arena, the garbage collector never scans the
// table: a million keys are a few large pointer-free allocations.
//
// The hash bits kept in meta are the top 27 of the key's 64-bit hash; they
// also give the key's home slot (scaled to the shard's size), so resizing and
// deleting never rehash a key. The shard comes from the low 8 bits.

const (
	// shortKey is the longest key kept inline: 32-byte slots leave 12
	// bytes beside meta and the 16-byte state.
	shortKey = 12
	// longClass is the length class of a key kept in the arena.
	longClass = shortKey + 1
	// tagBits of the hash are kept in meta: what the used bit and the
	// 4-bit length class leave of 32 bits. They also place a key in its
	// shard (homeOf): beyond 2^27 slots in one shard (2^35 keys in all,
	// far beyond any sensible key cap) some slots would be no key's home,
	// which only lengthens probes.
	tagBits   = 27
	tagMask   = 1<<tagBits - 1
	classMask = 0xf << tagBits
	// arenaSlack is the garbage (bytes of dropped long keys) a shard's
	// arena may hold before it is compacted, at least: compacting is a pass
	// over the shard, so it waits until the garbage is also half the arena,
	// which makes its cost O(1) per byte dropped; 4 KiB (a page) keeps
	// small arenas, whose garbage costs little, from being compacted at
	// every other deletion.
	arenaSlack = 4 << 10
)

// slot is an entry of a state table; see the comment above.
type slot struct {
	meta uint32
	k0   uint32
	k1   uint64
	val  State
}

// stateShard is one shard of a state table.
type stateShard struct {
	mu      sync.Mutex
	slots   []slot
	arena   []byte // long keys' bytes
	garbage int    // bytes of arena no slot uses
	n       int
	cursor  int
	ops     int
	held    atomic.Int32 // n, readable without the lock (a hint for reclaim)
	// hintBase and hintCap are the address and length of slots, written
	// with them and read without the lock, only to prefetch a key's home
	// slot (takeAt): never dereferenced by Go code.
	hintBase atomic.Uintptr
	hintCap  atomic.Int64
	_        [16]byte // 128 bytes: neighbouring shards never share a cache line's hot half
}

// stateTable is one table: all keys of one constant-state Policy in one
// MemoryStore.
type stateTable struct {
	seed    maphash.Seed
	mixSeed [3]uint64 // random, for the short keys' hash (probeOf)
	store   *MemoryStore
	pol     Policy
	next    atomic.Uint32 // the next shard reclaim looks at
	s       [numShards]stateShard
}

// newStateTable returns the empty table of p in m.
func newStateTable(m *MemoryStore, p Policy) *stateTable {
	t := &stateTable{pol: p, seed: m.seed, store: m}
	for i := range t.mixSeed {
		// Odd, so that no seed word is zero.
		t.mixSeed[i] = maphash.Comparable(m.seed, i) | 1
	}
	return t
}

// probe is what a lookup compares: a key's hash, meta without the used bit
// (want), and its words (k0 is unused for a long key).
type probe struct {
	h    uint64
	want uint32
	k0   uint32
	k1   uint64
}

// probeOf hashes and packs key. A short key is packed into k1 and k0 by a
// few loads (its length, in meta, makes the packing injective): bytes 0–7
// and the last 4 (overlapping) for 8–12 bytes, bytes 0–3 and the last 4 for
// 4–7, and bytes 0, n/2 and n−1 for 1–3. Its hash mixes those words with
// the table's random seed (two 64×64→128-bit multiplications, as the
// runtime's own fallback hash does) instead of hashing the bytes again; a
// long key is hashed by maphash.
func (t *stateTable) probeOf(key string) probe {
	n := len(key)
	b := unsafe.Slice(unsafe.StringData(key), n)
	var pr probe
	var tagh uint64
	switch {
	case n > shortKey:
		pr.h = maphash.String(t.seed, key)
		pr.want = longClass << tagBits
		pr.k1 = uint64(n) | uint64(binary.LittleEndian.Uint32(b[:4]))<<32
		tagh = pr.h
	default:
		switch {
		case n >= 8:
			pr.k1 = binary.LittleEndian.Uint64(b[:8])
			pr.k0 = binary.LittleEndian.Uint32(b[n-4:])
		case n >= 4:
			pr.k1 = uint64(binary.LittleEndian.Uint32(b[:4]))
			pr.k0 = binary.LittleEndian.Uint32(b[n-4:])
		case n > 0:
			pr.k0 = uint32(b[0]) | uint32(b[n>>1])<<8 | uint32(b[n-1])<<16
		}
		pr.h = mix(mix(pr.k1^t.mixSeed[0], uint64(pr.k0)^t.mixSeed[1]), uint64(n)^t.mixSeed[2])
		pr.want = uint32(n) << tagBits
		tagh = pr.h
	}
	pr.want |= uint32(tagh >> (64 - tagBits))
	return pr
}

// mix is the folded 128-bit product of a and b.
func mix(a, b uint64) uint64 {
	hi, lo := bits.Mul64(a, b)
	return hi ^ lo
}

func (t *stateTable) shardOf(h uint64) *stateShard { return &t.s[h&(numShards-1)] }

// homeOf is the slot where an entry with meta m belongs in a table of c
// slots: its hash bits scaled to c.
func homeOf(m uint32, c int) int { return int(uint64(m&tagMask) * uint64(c) >> tagBits) }

// isLong reports whether meta m is a long key's.
func isLong(m uint32) bool { return m&classMask == longClass<<tagBits }

// longKey returns the bytes of the long key in e, in the arena.
func (sh *stateShard) longKey(e *slot) string {
	return unsafe.String(&sh.arena[e.k0], int(uint32(e.k1)))
}

// key returns the key of the occupied slot e (a copy for short keys; see
// probeOf for their packing).
func (sh *stateShard) key(e *slot) string {
	if isLong(e.meta) {
		return sh.longKey(e)
	}
	n := int((e.meta & classMask) >> tagBits)
	var b [shortKey]byte
	switch {
	case n >= 8:
		binary.LittleEndian.PutUint64(b[:8], e.k1)
		binary.LittleEndian.PutUint32(b[n-4:n], e.k0)
	case n >= 4:
		binary.LittleEndian.PutUint32(b[n-4:n], e.k0) // overlaps: first 4 win
		binary.LittleEndian.PutUint32(b[:4], uint32(e.k1))
	default:
		b[0], b[n>>1], b[n-1] = byte(e.k0), byte(e.k0>>8), byte(e.k0>>16)
	}
	return string(b[:n])
}

// find returns the slot holding the key of pr, or the empty slot where it
// would be inserted (-1 when the shard has no slots yet). Requires sh.mu
// held.
func (sh *stateShard) find(key string, pr *probe) (int, bool) {
	c := len(sh.slots)
	if c == 0 {
		return -1, false
	}
	for i := homeOf(pr.want, c); ; {
		e := &sh.slots[i]
		m := e.meta &^ used
		if m == 0 {
			return i, false
		}
		if m == pr.want && e.k1 == pr.k1 {
			if !isLong(m) {
				if e.k0 == pr.k0 {
					return i, true
				}
			} else if sh.longKey(e) == key {
				return i, true
			}
		}
		if i++; i == c {
			i = 0
		}
	}
}

// prefetchCap is the least shard size, in slots, whose home slots takeAt
// prefetches.
const prefetchCap = 64

// takeAt is take at the time tb reads once the key's home slot is being
// fetched: the clock read (and the lock) then overlap the cache miss of a
// key visited in no particular order, which a load could not do (the
// vDSO's clock read begins with LFENCE, which waits for earlier loads, not
// for prefetches). A shard of fewer than prefetchCap slots is not
// prefetched: the table (about numShards·prefetchCap slots, 512 KiB) then
// stays in the caches, and the prefetch would only cost its call. The
// prefetch and the system clock's read are written out here rather than
// called: two calls fewer, 2–4% faster on one key (medians of paired
// A/B runs whose single pairs ranged 0.6–1.9).
func (t *stateTable) takeAt(key string, tb *timebase, n int64) outcome {
	pr := t.probeOf(key)
	sh := t.shardOf(pr.h)
	if c := sh.hintCap.Load(); c >= prefetchCap {
		prefetch(sh.hintBase.Load() + uintptr(homeOf(pr.want, int(c)))*unsafe.Sizeof(slot{}))
	}
	var now int64
	if tb.sysClock {
		now = tb.sysNow()
	} else {
		now = tb.now()
	}
	return t.takeProbe(key, &pr, sh, now, n)
}

// take is the decision of one OpAllow request: the hot path.
func (t *stateTable) take(key string, now, n int64) outcome {
	pr := t.probeOf(key)
	return t.takeProbe(key, &pr, t.shardOf(pr.h), now, n)
}

// takeProbe is take of the key of pr, in its shard sh.
func (t *stateTable) takeProbe(key string, pr *probe, sh *stateShard, now, n int64) outcome {
	sh.mu.Lock()
	i, found := sh.find(key, pr)
	var s State
	if found {
		s = sh.slots[i].val
	}
	next, o := t.pol.take(s, now, n)
	if o.allowed {
		switch {
		case !found:
			if next != (State{}) {
				if err := t.insert(sh, key, pr, next, now); err != nil {
					o = t.pol.full(n)
				}
			}
		case next == (State{}):
			t.remove(sh, i)
		default:
			e := &sh.slots[i]
			e.val = next
			e.meta |= used
			if sh.ops++; sh.ops%sweepEvery == 0 {
				t.sweep(sh, now, 1, true)
			}
		}
	}
	sh.mu.Unlock()
	return o
}

// reserve is the decision of one OpReserve request; full reports that the
// store could not hold the key (and nothing was reserved).
func (t *stateTable) reserve(key string, now, n, maxWait int64) (ok bool, delay int64, mark State, full bool) {
	pr := t.probeOf(key)
	sh := t.shardOf(pr.h)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	i, found := sh.find(key, &pr)
	var s State
	if found {
		s = sh.slots[i].val
	}
	next, ok, delay, mark := t.pol.reserve(s, now, n, maxWait)
	if !ok {
		return false, delay, State{}, false
	}
	if err := t.store1(sh, i, found, key, &pr, next, now); err != nil {
		return false, delay, State{}, true
	}
	return true, delay, mark, false
}

// refund carries out one OpRefund request.
func (t *stateTable) refund(key string, now, n int64, mark State) {
	pr := t.probeOf(key)
	sh := t.shardOf(pr.h)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	i, found := sh.find(key, &pr)
	if !found {
		return // fresh: nothing to give back
	}
	next := t.pol.refund(sh.slots[i].val, now, n, mark)
	_ = t.store1(sh, i, true, key, &pr, next, now)
}

// store1 writes next as key's state: in place, by inserting, or by
// dropping the key when next is a fresh key's. Requires sh.mu held.
func (t *stateTable) store1(sh *stateShard, i int, found bool, key string, pr *probe, next State, now int64) error {
	switch {
	case !found:
		if next != (State{}) {
			return t.insert(sh, key, pr, next, now)
		}
	case next == (State{}):
		t.remove(sh, i)
	default:
		sh.slots[i].val = next
	}
	return nil
}

// do carries out one request of a batch. A key the store cannot hold is
// refused (SourceFull). Requires its shard locked.
func (t *stateTable) do(r *Request, now int64) undo {
	pr := t.probeOf(r.Key)
	sh := t.shardOf(pr.h)
	i, found := sh.find(r.Key, &pr)
	var s State
	if found {
		s = sh.slots[i].val
	}
	u := undo{existed: found, prev: s}
	n := int64(r.N)
	var next State
	switch r.Op {
	case OpAllow:
		var o outcome
		next, o = t.pol.take(s, now, n)
		r.Result = o.result(t.pol.burst)
		if !o.allowed {
			return u
		}
	case OpReserve:
		var ok bool
		var delay int64
		next, ok, delay, r.Mark = t.pol.reserve(s, now, n, durationNs(r.MaxWait))
		r.Delay = time.Duration(delay)
		_, o := t.pol.take(next, now, 0)
		r.Result = o.result(t.pol.burst)
		r.Result.Allowed = ok
		if !ok {
			return u
		}
	case OpRefund:
		next = t.pol.refund(s, now, n, r.Mark)
		_, o := t.pol.take(next, now, 0)
		r.Result = o.result(t.pol.burst)
	}
	if err := t.store1(sh, i, found, r.Key, &pr, next, now); err != nil {
		r.Result = t.pol.full(n).result(t.pol.burst)
		r.Delay, r.Mark = 0, State{}
		return u
	}
	u.done = true
	return u
}

// revert undoes a request of a refused batch and reports its unchanged
// state. Requires its shard locked.
func (t *stateTable) revert(r *Request, u undo, now int64) {
	pr := t.probeOf(r.Key)
	sh := t.shardOf(pr.h)
	i, found := sh.find(r.Key, &pr)
	if u.existed {
		_ = t.store1(sh, i, found, r.Key, &pr, u.prev, now)
	} else if found {
		t.remove(sh, i)
	}
	_, o := t.pol.take(u.prev, now, 0)
	allowed := r.Result.Allowed
	r.Result = o.result(t.pol.burst)
	r.Result.Allowed = allowed
}

// insert adds key, absent from the shard, with state v, making room as
// needed; at the store's key cap it first tries to drop fresh keys, and
// fails with ErrTooManyKeys if it finds none. Requires sh.mu held.
func (t *stateTable) insert(sh *stateShard, key string, pr *probe, v State, now int64) error {
	t.sweep(sh, now, sweepPerInsert, true)
	long := len(key) > shortKey
	if long && uint64(len(sh.arena))+uint64(len(key)) > math.MaxUint32 {
		return ErrTooManyKeys // offsets are 32 bits: 4 GiB of long keys per shard
	}
	if !t.store.addKey() && !t.reclaim(sh, now) {
		return ErrTooManyKeys
	}
	if c := len(sh.slots); sh.n+1 > maxLoad(c) {
		t.resize(sh, max(minCap, c+c/2))
	}
	i, _ := sh.find(key, pr)
	e := slot{meta: pr.want | used, k0: pr.k0, k1: pr.k1, val: v}
	if long {
		e.k0 = uint32(len(sh.arena))
		sh.arena = append(sh.arena, key...) // a copy: the caller's key may share a larger string's memory
	}
	sh.slots[i] = e
	sh.n++
	sh.held.Store(int32(sh.n))
	return nil
}

// reclaim makes room for one key at the store's cap by dropping fresh keys,
// second chance or not: in sh first, then in other shards (reclaimOthers).
// It reports whether the key was counted. Requires sh.mu held.
func (t *stateTable) reclaim(sh *stateShard, now int64) bool {
	sweep := func(o *stateShard) int { return t.sweep(o, now, reclaimBudget, false) }
	return sweep(sh) > 0 && t.store.addKey() || reclaimOthers(sh, &t.s, &t.next, sweep, t.store.addKey)
}

func (sh *stateShard) lockAndHeld() (*sync.Mutex, *atomic.Int32) { return &sh.mu, &sh.held }

// remove deletes slot i by backward shifting, so that probing never needs
// tombstones; the homes come from the slots' hash bits. Requires sh.mu
// held.
func (t *stateTable) remove(sh *stateShard, i int) {
	if e := &sh.slots[i]; isLong(e.meta) {
		sh.garbage += int(uint32(e.k1))
	}
	c := len(sh.slots)
	j := i
	for {
		if j++; j == c {
			j = 0
		}
		m := sh.slots[j].meta
		if m == 0 {
			break
		}
		k := homeOf(m, c)
		// The entry at j may move back to i unless its home lies
		// cyclically in (i, j].
		if i <= j {
			if i < k && k <= j {
				continue
			}
		} else if i < k || k <= j {
			continue
		}
		sh.slots[i] = sh.slots[j]
		i = j
	}
	sh.slots[i] = slot{}
	sh.n--
	sh.held.Store(int32(sh.n))
	t.store.keys.Add(-1)
	if sh.garbage > arenaSlack && 2*sh.garbage > len(sh.arena) {
		sh.compact()
	}
}

// compact copies the live long keys into a new arena. Requires sh.mu held.
func (sh *stateShard) compact() {
	live := len(sh.arena) - sh.garbage
	var arena []byte
	if live > 0 {
		arena = make([]byte, 0, live+live/4)
	}
	for i := range sh.slots {
		e := &sh.slots[i]
		if e.meta == 0 || !isLong(e.meta) {
			continue
		}
		off := len(arena)
		arena = append(arena, sh.longKey(e)...)
		e.k0 = uint32(off)
	}
	sh.arena, sh.garbage = arena, 0
}

// fresh reports whether state s is a fresh key's at now.
func (t *stateTable) fresh(s State, now int64) bool {
	next, _ := t.pol.take(s, now, 0)
	return next == State{}
}

// sweep moves the shard's cleanup cursor over up to steps slots, dropping
// entries whose state is a fresh key's (only those not used since the last
// pass, with secondChance), and returns how many it dropped. It shrinks the
// shard if that leaves it less than 1/8 full. Requires sh.mu held.
func (t *stateTable) sweep(sh *stateShard, now int64, steps int, secondChance bool) int {
	freed := 0
	c := len(sh.slots)
	for range steps {
		if sh.n == 0 {
			break
		}
		i := sh.cursor
		if i >= c {
			i = 0
		}
		e := &sh.slots[i]
		switch {
		case e.meta == 0:
		case secondChance && e.meta&used != 0:
			e.meta &^= used
		case t.fresh(e.val, now):
			t.remove(sh, i) // an entry may shift into i: look at it next
			freed++
			continue
		}
		sh.cursor = i + 1
	}
	if freed > 0 && c > 8*minCap && sh.n < c/8 {
		t.resize(sh, max(minCap, 2*sh.n))
	}
	return freed
}

// resize rehashes the shard into c slots, by the hash bits the slots keep.
// Requires sh.mu held.
func (t *stateTable) resize(sh *stateShard, c int) {
	old := sh.slots
	sh.slots = makeSlots(c)
	sh.hintBase.Store(uintptr(unsafe.Pointer(unsafe.SliceData(sh.slots))))
	sh.hintCap.Store(int64(c))
	sh.cursor = 0
	for i := range old {
		e := &old[i]
		if e.meta == 0 {
			continue
		}
		j := homeOf(e.meta, c)
		for sh.slots[j].meta != 0 {
			if j++; j == c {
				j = 0
			}
		}
		sh.slots[j] = *e
	}
	if sh.n == 0 {
		sh.arena, sh.garbage = nil, 0
	}
}

// makeSlots returns c empty slots starting on a 32-byte boundary, so that
// no slot straddles two cache lines. The slots are carved out of a []uint64
// (the allocator aligns that to 8 bytes only); having no pointers, they are
// never scanned by the garbage collector, which keeps the allocation alive
// through the slice's interior pointer.
func makeSlots(c int) []slot {
	const words = int(unsafe.Sizeof(slot{}) / 8)
	buf := make([]uint64, words*c+words-1)
	skip := 0
	for uintptr(unsafe.Pointer(&buf[skip]))%unsafe.Sizeof(slot{}) != 0 {
		skip++
	}
	return unsafe.Slice((*slot)(unsafe.Pointer(&buf[skip])), c)
}
