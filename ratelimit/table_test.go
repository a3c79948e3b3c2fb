package ratelimit

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"unsafe"
)

// The table agrees with a map through random inserts, updates, sweeps,
// growth and shrinking; every probe sequence stays intact (backward shift
// deletion leaves no holes in a cluster).
func TestTableMatchesMap(t *testing.T) {
	m, _ := NewMemoryStore(1 << 20)
	var tab shards[State]
	tab.seed, tab.store = m.seed, m
	tab.fresh = func(s *State, _ int64) bool { return s.A == 0 } // A = 0 marks an entry to drop
	want := map[string]int64{}
	r := rand.New(rand.NewPCG(1, 1))
	check := func(step int) {
		total := 0
		for i := range tab.s {
			sh := &tab.s[i]
			total += sh.n
			for j := range sh.slots {
				if sh.slots[j].kp == nil {
					continue
				}
				k := sh.slots[j].key()
				h := tab.hash(k)
				if got, ok := sh.find(k, h); !ok || got != j {
					t.Fatalf("step %d: key %q at slot %d is found at %d, %v", step, k, j, got, ok)
				}
				if h&(numShards-1) != uint64(i) {
					t.Fatalf("step %d: key %q in the wrong shard", step, k)
				}
			}
		}
		if total != len(want) || int(m.keys.Load()) != len(want) {
			t.Fatalf("step %d: table holds %d (store counts %d), map %d", step, total, m.keys.Load(), len(want))
		}
		for k, v := range want {
			h := tab.hash(k)
			sh := tab.shardOf(h)
			i, ok := sh.find(k, h)
			if !ok || sh.slots[i].val.A != v {
				t.Fatalf("step %d: key %q: found %v", step, k, ok)
			}
		}
	}
	for step := range 40000 {
		k := fmt.Sprint("k", r.IntN(3000))
		h := tab.hash(k)
		sh := tab.shardOf(h)
		i, ok := sh.find(k, h)
		switch op := r.IntN(10); {
		case op < 5: // insert or update
			v := 1 + r.Int64N(100)
			if ok {
				sh.slots[i].val.A = v
			} else if _, err := tab.insert(sh, k, h, State{A: v}, 0); err != nil {
				t.Fatal(err)
			}
			want[k] = v
		case op < 8: // mark for dropping; a sweep finds it
			if ok {
				sh.slots[i].val.A = 0
				sh.slots[i].meta &^= used
				delete(want, k)
			}
		default:
			for j := range sh.slots {
				sh.slots[j].meta &^= used
			}
			tab.sweep(sh, 0, len(sh.slots), true)
		}
		if step%500 == 0 {
			// Drop every marked entry, so the comparison is exact.
			for i := range tab.s {
				for tab.sweep(&tab.s[i], 0, len(tab.s[i].slots)+1, false) > 0 {
				}
			}
			check(step)
		}
	}
}

func TestShardSize(t *testing.T) {
	if s := unsafe.Sizeof(shard[State]{}); s != 128 {
		t.Fatalf("shard is %d bytes, want 128", s)
	}
	if s := unsafe.Sizeof(entry[State]{}); s != 32 {
		t.Fatalf("entry is %d bytes, want 32", s)
	}
}

// The memory of a held key, measured: about 40–60 bytes plus the key's own
// bytes for the constant-state algorithms. (BenchmarkBytesPerKey measures
// it at a million keys.)
func TestBytesPerKey(t *testing.T) {
	if testing.Short() || raceEnabled {
		t.Skip("allocates many keys")
	}
	const n = 1 << 17
	keys := benchKeys(n)
	for _, alg := range []Algorithm{FixedWindow, SlidingWindow, TokenBucket, GCRA} {
		perKey := bytesPerKey(t, alg, keys)
		t.Logf("%v: %.1f bytes per key at %d keys (key bytes excluded)", alg, perKey, n)
		if perKey > 64 {
			t.Errorf("%v: %.1f bytes per key, want at most 64", alg, perKey)
		}
	}
}

// The state table agrees with a map through random inserts, updates,
// sweeps, growth, shrinking and arena compaction, for short keys (inline)
// and long ones (in the arena); every probe sequence stays intact and the
// arena's garbage is accounted exactly.
func TestStateTableMatchesMap(t *testing.T) {
	m, _ := NewMemoryStore(1 << 20)
	// FixedWindow with a period of 1 ns: a state of a future window is
	// never fresh, one of a past window always is.
	pol, err := NewPolicy(FixedWindow, Limit{Rate: 1 << 20, Period: 1})
	if err != nil {
		t.Fatal(err)
	}
	tab := newStateTable(m, pol)
	live := func(v int64) State { return State{A: 1 << 50, B: v} }
	dead := State{A: -5, B: 1}
	want := map[string]int64{}
	r := rand.New(rand.NewPCG(1, 18))
	keyOf := func() string {
		i := r.IntN(3000)
		switch i % 3 {
		case 0:
			return fmt.Sprint("k", i) // short
		case 1:
			return fmt.Sprint("key:", i, "-", i*7) // 12 bytes or so, either side
		}
		return fmt.Sprint("a-much-longer-key/", i, strings.Repeat("x", i%2000)) // in the arena
	}
	check := func(step int) {
		total := 0
		for i := range tab.s {
			sh := &tab.s[i]
			total += sh.n
			longBytes := 0
			for j := range sh.slots {
				e := &sh.slots[j]
				if e.meta == 0 {
					continue
				}
				k := sh.key(e)
				if isLong(e.meta) {
					longBytes += len(k)
				}
				pr := tab.probeOf(k)
				if got, ok := sh.find(k, &pr); !ok || got != j {
					t.Fatalf("step %d: key %q at slot %d is found at %d, %v", step, k, j, got, ok)
				}
				if pr.h&(numShards-1) != uint64(i) {
					t.Fatalf("step %d: key %q in the wrong shard", step, k)
				}
			}
			if longBytes != len(sh.arena)-sh.garbage {
				t.Fatalf("step %d: shard %d: %d bytes of long keys, arena %d with %d garbage", step, i, longBytes, len(sh.arena), sh.garbage)
			}
		}
		if total != len(want) || int(m.keys.Load()) != len(want) {
			t.Fatalf("step %d: table holds %d (store counts %d), map %d", step, total, m.keys.Load(), len(want))
		}
		for k, v := range want {
			pr := tab.probeOf(k)
			sh := tab.shardOf(pr.h)
			i, ok := sh.find(k, &pr)
			if !ok || sh.slots[i].val != live(v) {
				t.Fatalf("step %d: key %q: found %v", step, k, ok)
			}
		}
	}
	for step := range 60000 {
		k := keyOf()
		pr := tab.probeOf(k)
		sh := tab.shardOf(pr.h)
		i, ok := sh.find(k, &pr)
		switch op := r.IntN(10); {
		case op < 5: // insert or update
			v := 1 + r.Int64N(100)
			if ok {
				sh.slots[i].val = live(v)
			} else if err := tab.insert(sh, k, &pr, live(v), 0); err != nil {
				t.Fatal(err)
			}
			want[k] = v
		case op < 8: // mark for dropping; a sweep finds it
			if ok {
				sh.slots[i].val = dead
				sh.slots[i].meta &^= used
				delete(want, k)
			}
		default:
			for j := range sh.slots {
				sh.slots[j].meta &^= used
			}
			tab.sweep(sh, 0, len(sh.slots), true)
		}
		if step%500 == 0 {
			// Drop every marked entry, so the comparison is exact.
			for i := range tab.s {
				for tab.sweep(&tab.s[i], 0, len(tab.s[i].slots)+1, false) > 0 {
				}
			}
			check(step)
		}
	}
}

func TestStateTableLayout(t *testing.T) {
	if s := unsafe.Sizeof(stateShard{}); s != 128 {
		t.Fatalf("stateShard is %d bytes, want 128", s)
	}
	if s := unsafe.Sizeof(slot{}); s != 32 {
		t.Fatalf("slot is %d bytes, want 32", s)
	}
	for c := range 100 {
		if s := makeSlots(c + 1); uintptr(unsafe.Pointer(&s[0]))%32 != 0 {
			t.Fatalf("makeSlots(%d) is not 32-byte aligned", c+1)
		}
	}
}
