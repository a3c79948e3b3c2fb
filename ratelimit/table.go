package ratelimit

import (
	"hash/maphash"
	"math/bits"
	"strings"
	"sync"
	"sync/atomic"
	"unsafe"
)

// The in-memory tables. Keys are spread over numShards shards by the low
// bits of their hash; each shard is an open-addressing hash table with
// linear probing, guarded by its own mutex. This generic table keeps
// SlidingLog's keys: a slot holds the key (its bytes' address and length),
// 31 bits of its hash, and a pointer to its log. A probe compares the hash
// bits first, so a decision on a held key is one hash, one lock, most often
// one slot's cache line and one look at the key's bytes, and allocates
// nothing. The constant-state algorithms have a table of their own, with
// pointer-free slots that hold short keys inline (statetable.go); both
// follow the rules below.
//
// Entries whose state is back to a fresh key's are dropped: at once when a
// decision leaves them fresh, by a cursor that each shard moves over its
// slots, two slots per insert and one per 8 decisions on held keys, and at
// the store's key cap by bounded passes of up to 64 slots over the shard and
// then over a few other shards whose locks are free (TryLock, so that no two
// shards' locks are ever waited for in an order that could deadlock).
// Nothing ever sweeps a whole shard, let alone all of them; a shard shrinks
// when a sweep leaves it less than 1/8 full.
//
// A key that is used again after it was dropped must be inserted again (an
// allocation), and a key under its limit that is visited less often than its
// bucket refills is fresh at every visit. So, except at the key cap, the
// cursor gives each key a second chance, as the CLOCK page-replacement
// algorithm does: inserting or deciding on a key sets a bit in its slot, and
// the cursor drops a fresh key only if its bit is clear, clearing the bit
// otherwise. A key in steady use is never dropped; an idle one is dropped on
// the cursor's second pass after it went fresh. Under a spray of new keys the
// cursor passes twice per insert, so the shards hold about the keys of the
// last two passes.

const (
	numShards = 256
	minCap    = 8
	// The incremental cleanup's pace: sweepPerInsert slots per insert, one
	// slot per sweepEvery decisions on held keys.
	sweepPerInsert = 2
	sweepEvery     = 8
	// reclaimBudget is how many slots an insert at the key cap may examine
	// for a fresh key to drop, in its own shard and then in each of up to
	// reclaimShards others.
	reclaimBudget = 64
	reclaimShards = 4
	// maxKeyLen is the longest key a table holds (WithMaxKeyLen's bound).
	maxKeyLen = 1 << 16
)

// entry is a slot. kp is nil in an empty slot.
type entry[V any] struct {
	kp   *byte  // the key's bytes (a private copy)
	kl   uint32 // the key's length
	meta uint32 // used<<31 | 31 bits of the key's hash
	val  V
}

const used = 1 << 31

func (e *entry[V]) key() string { return unsafe.String(e.kp, e.kl) }

type shard[V any] struct {
	mu     sync.Mutex
	slots  []entry[V]
	n      int
	cursor int
	ops    int
	held   atomic.Int32 // n, readable without the lock (a hint for reclaim)
	_      [68]byte     // 128 bytes: neighbouring shards never share a cache line's hot half
}

// shards is one table: all keys of one Policy in one MemoryStore.
type shards[V any] struct {
	seed  maphash.Seed
	store *MemoryStore
	// fresh reports whether an entry's state is a fresh key's at now; it may
	// also trim the state (expired stamps) but must not change its meaning.
	fresh func(v *V, now int64) bool
	next  atomic.Uint32 // the next shard reclaim looks at
	s     [numShards]shard[V]
}

func (t *shards[V]) hash(key string) uint64 { return maphash.String(t.seed, key) }

func (t *shards[V]) shardOf(h uint64) *shard[V] { return &t.s[h&(numShards-1)] }

// tagOf is the hash bits kept in a slot: bits 8–38, independent of both the
// shard (bits 0–7) and the home slot (the top bits, see home).
func tagOf(h uint64) uint32 { return uint32(h>>8) &^ used }

// home is the slot where a key with hash h belongs in a table of c slots: the
// high bits of h scaled to c.
func home(h uint64, c int) int {
	hi, _ := bits.Mul64(h, uint64(c))
	return int(hi)
}

// find returns the slot holding key, or the empty slot where it would be
// inserted (-1 when the shard has no slots yet). Requires sh.mu held.
func (sh *shard[V]) find(key string, h uint64) (int, bool) {
	c := len(sh.slots)
	if c == 0 {
		return -1, false
	}
	tag := tagOf(h)
	for i := home(h, c); ; {
		e := &sh.slots[i]
		if e.kp == nil {
			return i, false
		}
		if e.meta&^used == tag && e.key() == key {
			return i, true
		}
		if i++; i == c {
			i = 0
		}
	}
}

// insert adds key, absent from the shard, with state v, making room as
// needed; at the store's key cap it first tries to drop fresh keys, and
// fails with ErrTooManyKeys if it finds none. It returns the new slot.
// Requires sh.mu held.
func (t *shards[V]) insert(sh *shard[V], key string, h uint64, v V, now int64) (int, error) {
	t.sweep(sh, now, sweepPerInsert, true)
	if !t.store.addKey() && !t.reclaim(sh, now) {
		return -1, ErrTooManyKeys
	}
	if c := len(sh.slots); sh.n+1 > maxLoad(c) {
		t.resize(sh, max(minCap, c+c/2))
	}
	i, _ := sh.find(key, h)
	k := strings.Clone(key) // the caller's key may share a larger string's memory
	sh.slots[i] = entry[V]{kp: unsafe.StringData(k), kl: uint32(len(k)), meta: tagOf(h) | used, val: v}
	sh.n++
	sh.held.Store(int32(sh.n))
	return i, nil
}

// reclaim makes room for one key at the store's cap by dropping fresh keys,
// second chance or not: in sh first, then in other shards (reclaimOthers).
// It reports whether the key was counted. Requires sh.mu held.
func (t *shards[V]) reclaim(sh *shard[V], now int64) bool {
	sweep := func(o *shard[V]) int { return t.sweep(o, now, reclaimBudget, false) }
	return sweep(sh) > 0 && t.store.addKey() || reclaimOthers(sh, &t.s, &t.next, sweep, t.store.addKey)
}

// lockable is a shard as reclaimOthers sees it: its lock, and the number of
// keys it holds, readable without the lock.
type lockable[S any] interface {
	*S
	lockAndHeld() (*sync.Mutex, *atomic.Int32)
}

func (sh *shard[V]) lockAndHeld() (*sync.Mutex, *atomic.Int32) { return &sh.mu, &sh.held }

// reclaimOthers makes room for one key at a key cap after a sweep of the
// caller's own shard sh found none: it sweeps up to reclaimShards other
// shards of all, taken in turn from next, that hold keys and whose locks are
// free, until a sweep frees a key and add counts the new one. It reports
// whether add succeeded. sh's lock is held by the caller; another shard's
// lock is only ever tried (TryLock), never waited for, so no two shard locks
// are waited for together and no order of them can deadlock.
func reclaimOthers[S any, P lockable[S]](sh P, all *[numShards]S, next *atomic.Uint32, sweep func(P) int, add func() bool) bool {
	tried := 0
	for range numShards {
		if tried == reclaimShards {
			break
		}
		o := P(&all[next.Add(1)%numShards])
		mu, held := o.lockAndHeld()
		if o == sh || held.Load() == 0 || !mu.TryLock() {
			continue
		}
		tried++
		freed := sweep(o)
		mu.Unlock()
		if freed > 0 && add() {
			return true
		}
	}
	return false
}

// maxLoad is the most entries a table of c slots holds (13/16 full).
func maxLoad(c int) int { return c * 13 / 16 }

// remove deletes slot i by backward shifting, so that probing never needs
// tombstones. Requires sh.mu held.
func (t *shards[V]) remove(sh *shard[V], i int) {
	c := len(sh.slots)
	j := i
	for {
		if j++; j == c {
			j = 0
		}
		if sh.slots[j].kp == nil {
			break
		}
		k := home(t.hash(sh.slots[j].key()), c)
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
	sh.slots[i] = entry[V]{}
	sh.n--
	sh.held.Store(int32(sh.n))
	t.store.keys.Add(-1)
}

// touch marks slot i used, for the second chance. Requires sh.mu held.
func (sh *shard[V]) touch(i int) {
	if e := &sh.slots[i]; e.meta&used == 0 {
		e.meta |= used
	}
}

// tick counts a decision on a held key and moves the cleanup cursor one
// slot every sweepEvery of them. Requires sh.mu held.
func (t *shards[V]) tick(sh *shard[V], now int64) {
	if sh.ops++; sh.ops%sweepEvery == 0 {
		t.sweep(sh, now, 1, true)
	}
}

// sweep moves the shard's cleanup cursor over up to steps slots, dropping
// entries whose state is a fresh key's (only those not used since the last
// pass, with secondChance), and returns how many it dropped. It shrinks the
// shard if that leaves it less than 1/8 full. Requires sh.mu held.
func (t *shards[V]) sweep(sh *shard[V], now int64, steps int, secondChance bool) int {
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
		case e.kp == nil:
		case secondChance && e.meta&used != 0:
			e.meta &^= used
		case t.fresh(&e.val, now):
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

// resize rehashes the shard into c slots. Requires sh.mu held.
func (t *shards[V]) resize(sh *shard[V], c int) {
	old := sh.slots
	sh.slots = make([]entry[V], c)
	sh.cursor = 0
	for i := range old {
		e := &old[i]
		if e.kp == nil {
			continue
		}
		j := home(t.hash(e.key()), c)
		for sh.slots[j].kp != nil {
			if j++; j == c {
				j = 0
			}
		}
		sh.slots[j] = *e
	}
}
