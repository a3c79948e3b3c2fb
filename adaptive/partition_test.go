package adaptive

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// ptShares is the partitioning used by most tests: on a limit of 10, "a" is
// owed 5 slots, "b" 3, and 2 are owed to nobody.
var ptShares = map[string]float64{"a": 0.5, "b": 0.3}

// ptNew builds a partitioned Fixed(limit) gate on a manual clock.
func ptNew(t testing.TB, limit int, shares map[string]float64, opts ...Option) *Limiter {
	t.Helper()
	lim, _ := qtNew(t, Fixed(limit), append([]Option{WithPartitions(shares)}, opts...)...)
	return lim
}

// ptTry is TryAcquire in the named partition; "" is the Limiter's own
// TryAcquire (the unnamed remainder).
func ptTry(lim *Limiter, name string) (Token, bool) {
	if name == "" {
		return lim.TryAcquire()
	}
	return lim.Partition(name).TryAcquire()
}

// ptModel is the test's account of the tokens held per partition name.
type ptModel struct {
	lim    *Limiter
	shares map[string]float64
	held   map[string][]Token
}

func newPTModel(lim *Limiter, shares map[string]float64) *ptModel {
	return &ptModel{lim: lim, shares: shares, held: map[string][]Token{}}
}

// canonical maps unknown names to the unnamed remainder.
func (m *ptModel) canonical(name string) string {
	if _, ok := m.shares[name]; ok {
		return name
	}
	return ""
}

func (m *ptModel) count(name string) int { return len(m.held[m.canonical(name)]) }

func (m *ptModel) total() int {
	n := 0
	for _, h := range m.held {
		n += len(h)
	}
	return n
}

// owed is Σ over named partitions other than except of
// max(0, floor(share·L) − inFlight).
func (m *ptModel) owed(except string) int {
	lim := m.lim.Limit()
	o := 0
	for name, s := range m.shares {
		if name == except {
			continue
		}
		g := int(math.Floor(s*float64(lim) + 1e-9))
		o += max(0, g-m.count(name))
	}
	return o
}

// admits is the rule documented on WithPartitions / admitPartition:
// admit p ⇔ n < L ∧ (inFlight_p < floor(share_p·L) ∨ n + 1 + Σ_{q≠p} owed(q) ≤ L).
func (m *ptModel) admits(name string) bool {
	name = m.canonical(name)
	n, lim := m.total(), m.lim.Limit()
	if n >= lim {
		return false
	}
	if s, ok := m.shares[name]; ok && m.count(name) < int(math.Floor(s*float64(lim)+1e-9)) {
		return true
	}
	return n+1+m.owed(name) <= lim
}

func (m *ptModel) try(t testing.TB, name string) bool {
	t.Helper()
	want := m.admits(name)
	tok, ok := ptTry(m.lim, name)
	if ok != want {
		t.Fatalf("TryAcquire(%q) = %v, want %v (in flight %d, a %d, b %d, unnamed %d)",
			name, ok, want, m.total(), m.count("a"), m.count("b"), m.count(""))
	}
	if ok {
		c := m.canonical(name)
		m.held[c] = append(m.held[c], tok)
	}
	return ok
}

func (m *ptModel) release(t testing.TB, name string, how int) {
	t.Helper()
	c := m.canonical(name)
	h := m.held[c]
	if len(h) == 0 {
		t.Fatalf("release(%q): nothing held", name)
	}
	tok := h[len(h)-1]
	m.held[c] = h[:len(h)-1]
	switch how % 3 {
	case 0:
		tok.Success()
	case 1:
		tok.Dropped()
	default:
		tok.Ignore()
	}
}

func (m *ptModel) releaseAll() {
	for name, h := range m.held {
		for _, tok := range h {
			tok.Ignore()
		}
		delete(m.held, name)
	}
}

// check compares the gate's counts with the model, checks the invariant
// n + Σ owed ≤ L that makes the guarantee hold, and probes the guarantee: a
// partition below its share is admitted whenever the gate is not full.
func (m *ptModel) check(t testing.TB) {
	t.Helper()
	lim := m.lim
	if got, want := lim.InFlight(), m.total(); got != want {
		t.Fatalf("InFlight() = %d, model %d", got, want)
	}
	if lim.InFlight() > lim.Limit() {
		t.Fatalf("InFlight() %d > Limit() %d", lim.InFlight(), lim.Limit())
	}
	for _, name := range append(ptSortedNames(m.shares), "") {
		if got, want := lim.Partition(name).InFlight(), m.count(name); got != want {
			t.Fatalf("Partition(%q).InFlight() = %d, model %d", name, got, want)
		}
	}
	if n, o := m.total(), m.owed(""); n+o > lim.Limit() {
		t.Fatalf("in flight %d + owed %d > limit %d: capacity owed to a partition was lent", n, o, lim.Limit())
	}
	for name := range m.shares {
		p := lim.Partition(name)
		if p.InFlight() < p.Guaranteed() && lim.InFlight() < lim.Limit() {
			tok, ok := p.TryAcquire()
			if !ok {
				t.Fatalf("partition %q below its share (%d < %d) refused with %d/%d in flight",
					name, p.InFlight(), p.Guaranteed(), lim.InFlight(), lim.Limit())
			}
			tok.Ignore()
		}
	}
}

func ptSortedNames(shares map[string]float64) []string {
	var names []string
	for name := range shares {
		names = append(names, name)
	}
	sort.Strings(names)
	return names
}

func TestPartitionGuarantee(t *testing.T) {
	type step struct {
		op   string // "fill": admit until refused, exactly n; "take": n admissions; "refuse"; "release": n tokens
		part string
		n    int
	}
	for _, tc := range []struct {
		name  string
		steps []step
	}{
		{"b alone takes its 3 plus the 2 owed to nobody", []step{
			{"fill", "b", 5},
			{"refuse", "", 0}, // the rest is owed to a
			{"fill", "a", 5},  // all of it still there for a
			{"refuse", "b", 0},
		}},
		{"a alone takes its 5 plus the 2 owed to nobody", []step{
			{"fill", "a", 7},
			{"fill", "b", 3},
			{"refuse", "", 0},
		}},
		{"the unnamed remainder gets only what is owed to nobody", []step{
			{"fill", "", 2},
			{"fill", "b", 3},
			{"fill", "a", 5},
			{"release", "", 2},
			{"fill", "b", 2}, // nothing owed any more: b borrows the 2
			{"refuse", "a", 0},
		}},
		{"a below its share is admitted while the gate has room", []step{
			{"fill", "", 2},
			{"fill", "b", 3},
			{"fill", "a", 5},
			{"release", "a", 1},
			{"refuse", "b", 0},
			{"refuse", "", 0},
			{"take", "a", 1},
			{"release", "a", 3},
			{"refuse", "b", 0},
			{"take", "a", 3},
		}},
		{"borrowed slots are not kept from their owner", []step{
			{"fill", "b", 5},
			{"take", "a", 3},
			{"refuse", "b", 0}, // a is still owed 2
			{"refuse", "", 0},
			{"take", "a", 2},
			{"release", "b", 1}, // b keeps 4 of its 3: nothing owed
			{"take", "", 1},     // the freed slot is owed to nobody
		}},
		{"release gives the partition its guarantee back", []step{
			{"fill", "a", 7},
			{"fill", "b", 3},
			{"release", "a", 7},
			{"fill", "b", 2}, // 3+2: a is owed 5 again
			{"fill", "", 0},
			{"fill", "a", 5},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lim := ptNew(t, 10, ptShares)
			m := newPTModel(lim, ptShares)
			defer m.releaseAll()
			for i, s := range tc.steps {
				switch s.op {
				case "fill":
					got := 0
					for m.try(t, s.part) {
						got++
						if got > lim.Limit() {
							t.Fatalf("step %d: fill %q never stops", i, s.part)
						}
					}
					if got != s.n {
						t.Fatalf("step %d: fill %q admitted %d, want %d", i, s.part, got, s.n)
					}
				case "take":
					for range s.n {
						if !m.try(t, s.part) {
							t.Fatalf("step %d: take %q refused", i, s.part)
						}
					}
				case "refuse":
					if m.try(t, s.part) {
						t.Fatalf("step %d: %q admitted", i, s.part)
					}
				case "release":
					for j := range s.n {
						m.release(t, s.part, j)
					}
				}
				m.check(t)
			}
		})
	}
}

// TestPartitionRandomSequenceFollowsTheRule drives a partitioned gate with a
// random sequence of acquisitions and releases from one goroutine and checks
// every decision against the documented rule, the invariant and the guarantee.
func TestPartitionRandomSequenceFollowsTheRule(t *testing.T) {
	for _, tc := range []struct {
		limit  int
		shares map[string]float64
	}{
		{10, ptShares},
		{7, map[string]float64{"a": 0.5, "b": 0.3}},
		{20, map[string]float64{"a": 0.4, "b": 0.3, "c": 0.1}},
		{6, map[string]float64{"a": 0.5, "b": 0.5}},
		{3, map[string]float64{"a": 0.2}},
	} {
		t.Run(fmt.Sprintf("L%d-%v", tc.limit, tc.shares), func(t *testing.T) {
			lim := ptNew(t, tc.limit, tc.shares)
			m := newPTModel(lim, tc.shares)
			defer m.releaseAll()
			names := append(ptSortedNames(tc.shares), "", "unknown")
			r := rand.New(rand.NewPCG(uint64(tc.limit), 99))
			for range 3000 {
				name := names[r.IntN(len(names))]
				if r.IntN(2) == 0 || m.count(name) == 0 {
					m.try(t, name)
				} else {
					m.release(t, name, r.IntN(3))
				}
				m.check(t)
			}
		})
	}
}

func TestPartitionUnknownNamesAndTryAcquireUseTheRemainder(t *testing.T) {
	lim := ptNew(t, 10, ptShares, WithQueue(4, FIFO))
	unknown := lim.Partition("nope")
	if got := unknown.Name(); got != "" {
		t.Errorf("Partition(%q).Name() = %q, want \"\"", "nope", got)
	}
	if got := lim.Partition("").Name(); got != "" {
		t.Errorf("Partition(\"\").Name() = %q", got)
	}
	if got := unknown.Guaranteed(); got != 0 {
		t.Errorf("unknown partition Guaranteed() = %d, want 0", got)
	}
	t1, ok1 := lim.TryAcquire()
	t2, ok2 := unknown.TryAcquire()
	if !ok1 || !ok2 {
		t.Fatalf("the remainder's 2 slots: TryAcquire %v, unknown.TryAcquire %v", ok1, ok2)
	}
	for _, p := range []Partition{unknown, lim.Partition("")} {
		if got := p.InFlight(); got != 2 {
			t.Errorf("remainder InFlight() = %d, want 2", got)
		}
	}
	if _, ok := lim.TryAcquire(); ok {
		t.Fatal("TryAcquire took capacity owed to a partition")
	}
	if _, ok := lim.Partition("other").TryAcquire(); ok {
		t.Fatal("unknown partition took capacity owed to a partition")
	}
	// Acquire waits in the queue for the remainder, though the gate has room.
	w := qtNewWaiters(t, lim)
	w.enqueue(0, nil, unknown.Acquire)
	qtCheckCounts(t, lim, 2, 1)
	for name, want := range map[string]int{"a": 0, "b": 0, "": 2} {
		if got := lim.Partition(name).InFlight(); got != want {
			t.Errorf("Partition(%q).InFlight() = %d, want %d", name, got, want)
		}
	}
	t1.Success()
	tok := w.nextGranted(0)
	if got := unknown.InFlight(); got != 2 {
		t.Errorf("remainder InFlight() = %d, want 2", got)
	}
	tok.Success()
	t2.Success()
	qtCheckCounts(t, lim, 0, 0)
}

func TestPartitionAcquireWithoutQueue(t *testing.T) {
	lim := ptNew(t, 10, ptShares)
	ctx := t.Context()
	var held []Token
	defer func() {
		for _, tok := range held {
			tok.Ignore()
		}
	}()
	for range 2 {
		tok, err := lim.Acquire(ctx)
		if err != nil {
			t.Fatalf("Acquire in the remainder: %v", err)
		}
		held = append(held, tok)
	}
	// Gate not full (2/10), but the rest is owed: refused at once.
	if _, err := lim.Acquire(ctx); err != ErrLimitExceeded {
		t.Fatalf("Acquire beyond the remainder: err %v, want ErrLimitExceeded", err)
	}
	if _, err := lim.Partition("zzz").Acquire(ctx); err != ErrLimitExceeded {
		t.Fatalf("unknown partition Acquire: err %v, want ErrLimitExceeded", err)
	}
	for range 5 {
		tok, err := lim.Partition("a").Acquire(ctx)
		if err != nil {
			t.Fatalf("Acquire in a below its share: %v", err)
		}
		held = append(held, tok)
	}
	if got := lim.Partition("a").InFlight(); got != 5 {
		t.Errorf("a InFlight() = %d, want 5", got)
	}
}

func TestPartitionNotPartitionedGate(t *testing.T) {
	lim, _ := qtNew(t, Fixed(2))
	p := lim.Partition("a")
	if p.Name() != "" || p.Guaranteed() != 0 {
		t.Errorf("Partition on a gate without partitions: Name %q Guaranteed %d", p.Name(), p.Guaranteed())
	}
	t1, ok1 := p.TryAcquire()
	t2, ok2 := lim.TryAcquire()
	if !ok1 || !ok2 {
		t.Fatalf("TryAcquire: %v %v", ok1, ok2)
	}
	if _, ok := p.TryAcquire(); ok {
		t.Fatal("admitted beyond the limit")
	}
	if got := p.InFlight(); got != 2 {
		t.Errorf("InFlight() = %d, want 2", got)
	}
	t1.Success()
	t2.Success()
	if got := p.InFlight(); got != 0 {
		t.Errorf("InFlight() = %d, want 0", got)
	}
}

func TestPartitionGuaranteedAndInFlight(t *testing.T) {
	for _, tc := range []struct {
		limit  int
		shares map[string]float64
		want   map[string]int
	}{
		{10, ptShares, map[string]int{"a": 5, "b": 3, "": 0, "x": 0}},
		{7, ptShares, map[string]int{"a": 3, "b": 2}},
		{1, ptShares, map[string]int{"a": 0, "b": 0}},
		{100, map[string]float64{"a": 0.29, "b": 0.71}, map[string]int{"a": 29, "b": 71}},
		{10, map[string]float64{"a": 0.7, "b": 0.3}, map[string]int{"a": 7, "b": 3}},
		{3, map[string]float64{"only": 1}, map[string]int{"only": 3}},
	} {
		t.Run(fmt.Sprintf("L%d-%v", tc.limit, tc.shares), func(t *testing.T) {
			lim := ptNew(t, tc.limit, tc.shares)
			for name, want := range tc.want {
				if got := lim.Partition(name).Guaranteed(); got != want {
					t.Errorf("Partition(%q).Guaranteed() = %d, want %d", name, got, want)
				}
			}
			sum := 0
			for name := range tc.shares {
				if got := lim.Partition(name).Name(); got != name {
					t.Errorf("Partition(%q).Name() = %q", name, got)
				}
				sum += lim.Partition(name).Guaranteed()
			}
			if sum > tc.limit {
				t.Errorf("guarantees sum to %d > limit %d", sum, tc.limit)
			}
		})
	}

	t.Run("releases", func(t *testing.T) {
		lim := ptNew(t, 10, ptShares)
		a, b := lim.Partition("a"), lim.Partition("b")
		var toks []Token
		for range 4 {
			tok, ok := a.TryAcquire()
			if !ok {
				t.Fatal("a refused")
			}
			toks = append(toks, tok)
		}
		tb, ok := b.TryAcquire()
		if !ok {
			t.Fatal("b refused")
		}
		tu, ok := lim.TryAcquire()
		if !ok {
			t.Fatal("remainder refused")
		}
		check := func(wantA, wantB, wantU int) {
			t.Helper()
			if a.InFlight() != wantA || b.InFlight() != wantB || lim.Partition("").InFlight() != wantU {
				t.Fatalf("in flight a %d b %d remainder %d, want %d %d %d",
					a.InFlight(), b.InFlight(), lim.Partition("").InFlight(), wantA, wantB, wantU)
			}
			if lim.InFlight() != wantA+wantB+wantU {
				t.Fatalf("InFlight() = %d, want %d", lim.InFlight(), wantA+wantB+wantU)
			}
		}
		check(4, 1, 1)
		toks[0].Success()
		check(3, 1, 1)
		toks[1].Dropped()
		check(2, 1, 1)
		toks[2].Ignore()
		check(1, 1, 1)
		tb.Success()
		check(1, 0, 1)
		tu.Dropped()
		check(1, 0, 0)
		toks[3].Success()
		check(0, 0, 0)
		if n := lim.Overreleases(); n != 0 {
			t.Errorf("Overreleases() = %d", n)
		}
	})
}

func TestPartitionOverreleaseIsIgnored(t *testing.T) {
	for _, tc := range []struct {
		name  string
		other string // a partition that holds one token meanwhile; "-": none
		wantA int    // what a can take afterwards: its 5 plus what nobody is owed
	}{
		{"gate empty", "-", 7},
		{"b holds one", "b", 7},
		{"remainder holds one", "", 6},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lim := ptNew(t, 10, ptShares)
			m := newPTModel(lim, ptShares)
			defer m.releaseAll()
			if tc.other != "-" && !m.try(t, tc.other) {
				t.Fatalf("%q refused", tc.other)
			}
			held := m.total()
			a := lim.Partition("a")
			tok, ok := a.TryAcquire()
			if !ok {
				t.Fatal("a refused")
			}
			tok.Success()
			tok.Success() // a caller bug: released twice
			if got := lim.Overreleases(); got != 1 {
				t.Errorf("Overreleases() = %d, want 1", got)
			}
			// Ignored means ignored by the partition's count and by the
			// gate's: the other holder's token is still counted.
			if got := lim.InFlight(); got != held {
				t.Errorf("InFlight() = %d, want %d", got, held)
			}
			if got := a.InFlight(); got != 0 {
				t.Fatalf("after an ignored over-release, a.InFlight() = %d, want 0", got)
			}
			m.check(t)
			// The partition's guarantee and borrowing are unchanged.
			for m.try(t, "a") {
			}
			if got := a.InFlight(); got != tc.wantA {
				t.Errorf("a admitted %d after the over-release, want %d", got, tc.wantA)
			}
			m.check(t)
		})
	}
}

func TestPartitionWithQueueUnderShareGoesFirst(t *testing.T) {
	// Limit 4: a is owed 2, b 1, one slot owed to nobody. a holds 3 (2 + the
	// free one), b holds 1: the gate is full.
	shares := map[string]float64{"a": 0.5, "b": 0.25}
	for _, tc := range []struct {
		order QueueOrder
		first string // the waiter that queues first
	}{
		{FIFO, "a"}, // a's waiter comes first in FIFO order
		{LIFO, "b"}, // a's waiter comes first in LIFO order
	} {
		t.Run(tc.order.String(), func(t *testing.T) {
			lim := ptNew(t, 4, shares, WithQueue(4, tc.order))
			w := qtNewWaiters(t, lim)
			a, b := lim.Partition("a"), lim.Partition("b")
			var aToks []Token
			for range 3 {
				tok, ok := a.TryAcquire()
				if !ok {
					t.Fatal("a refused")
				}
				aToks = append(aToks, tok)
			}
			bTok, ok := b.TryAcquire()
			if !ok {
				t.Fatal("b refused")
			}
			ids := map[string]int{"a": 0, "b": 1}
			acq := map[string]func(context.Context) (Token, error){"a": a.Acquire, "b": b.Acquire}
			second := map[string]string{"a": "b", "b": "a"}[tc.first]
			w.enqueue(ids[tc.first], nil, acq[tc.first])
			w.enqueue(ids[second], nil, acq[second])

			// b's release leaves b below its share and a above: the b
			// waiter is admitted ahead of a's, whatever the queue order.
			bTok.Success()
			qtCheckCounts(t, lim, 4, 1)
			bTok = w.nextGranted(ids["b"])
			if b.InFlight() != 1 || a.InFlight() != 3 {
				t.Fatalf("in flight a %d b %d, want 3 1", a.InFlight(), b.InFlight())
			}
			// One of a's releases: a at its share, one slot owed to nobody:
			// a's waiter borrows it.
			aToks[0].Success()
			aToks[0] = w.nextGranted(ids["a"])
			qtCheckCounts(t, lim, 4, 0)
			if b.InFlight() != 1 || a.InFlight() != 3 {
				t.Fatalf("in flight a %d b %d, want 3 1", a.InFlight(), b.InFlight())
			}
			for _, tok := range aToks {
				tok.Success()
			}
			bTok.Success()
			qtCheckCounts(t, lim, 0, 0)
		})
	}

	t.Run("remainder-waits-for-unowed", func(t *testing.T) {
		lim := ptNew(t, 4, shares, WithQueue(4, FIFO))
		w := qtNewWaiters(t, lim)
		a, b := lim.Partition("a"), lim.Partition("b")
		tu, ok := lim.TryAcquire() // the slot owed to nobody
		if !ok {
			t.Fatal("remainder refused")
		}
		w.enqueue(0, nil, nil) // the remainder's waiter: 1/4 in flight
		ta, ok := a.TryAcquire()
		if !ok {
			t.Fatal("a refused")
		}
		qtCheckCounts(t, lim, 2, 1)
		ta.Success() // frees a slot owed to a: the waiter stays
		qtCheckCounts(t, lim, 1, 1)
		tb, ok := b.TryAcquire()
		if !ok {
			t.Fatal("b refused")
		}
		tu.Success() // frees the slot owed to nobody
		tok := w.nextGranted(0)
		qtCheckCounts(t, lim, 2, 0)
		tok.Success()
		tb.Success()
		qtCheckCounts(t, lim, 0, 0)
	})
}

func TestPartitionValidation(t *testing.T) {
	for _, tc := range []struct {
		name   string
		shares map[string]float64
		bad    int // problems New must report; 0: valid
	}{
		{"one", map[string]float64{"a": 0.5}, 0},
		{"whole", map[string]float64{"a": 1}, 0},
		{"sum exactly 1", map[string]float64{"a": 0.7, "b": 0.3}, 0},
		{"tenths", map[string]float64{"0": .1, "1": .1, "2": .1, "3": .1, "4": .1, "5": .1, "6": .1, "7": .1, "8": .1, "9": .1}, 0},
		{"sum over 1", map[string]float64{"a": 0.6, "b": 0.5}, 1},
		{"zero share", map[string]float64{"a": 0}, 1},
		{"negative share", map[string]float64{"a": -0.1, "b": 0.5}, 1},
		{"share over 1", map[string]float64{"a": 1.5}, 1},
		{"NaN share", map[string]float64{"a": math.NaN()}, 1},
		{"empty name", map[string]float64{"": 0.5}, 1},
		{"empty map", map[string]float64{}, 1},
		{"nil map", nil, 1},
		{"several", map[string]float64{"": 0.5, "b": 0, "c": 0.9}, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lim, err := New(Fixed(10), WithPartitions(tc.shares))
			if tc.bad == 0 {
				if err != nil {
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

// TestPartitionConcurrent hammers a partitioned gate with a queue from many
// goroutines (run it with -race) and checks that every count returns to zero.
func TestPartitionConcurrent(t *testing.T) {
	const (
		limit = 20
		G     = 16
		M     = 300
	)
	shares := map[string]float64{"a": 0.4, "b": 0.3, "c": 0.1}
	names := []string{"a", "b", "c", "", "zzz"}
	for _, withQueue := range []bool{false, true} {
		t.Run(fmt.Sprintf("queue=%v", withQueue), func(t *testing.T) {
			var opts []Option
			if withQueue {
				opts = append(opts, WithQueue(G, FIFO))
			}
			lim := ptNew(t, limit, shares, opts...)
			parts := make([]Partition, len(names))
			for i, n := range names {
				parts[i] = lim.Partition(n)
			}
			var holders atomic.Int64
			var admitted, refused atomic.Int64
			var wg sync.WaitGroup
			for g := range G {
				wg.Add(1)
				go func() {
					defer wg.Done()
					r := rand.New(rand.NewPCG(uint64(g), 42))
					var held []Token
					for range M {
						if len(held) > 0 && (r.IntN(2) == 0 || len(held) >= 3) {
							i := r.IntN(len(held))
							holders.Add(-1)
							switch r.IntN(3) {
							case 0:
								held[i].Success()
							case 1:
								held[i].Dropped()
							default:
								held[i].Ignore()
							}
							held = append(held[:i], held[i+1:]...)
							continue
						}
						p := parts[r.IntN(len(parts))]
						var tok Token
						var ok bool
						// Only goroutines holding nothing wait in Acquire,
						// so that waiters never hold the slots they wait for.
						if withQueue && len(held) == 0 && r.IntN(2) == 0 {
							var err error
							if tok, err = p.Acquire(t.Context()); err != nil {
								t.Errorf("Acquire(%q): %v", p.Name(), err)
								return
							}
							ok = true
						} else {
							tok, ok = p.TryAcquire()
						}
						if !ok {
							refused.Add(1)
							runtime.Gosched()
							continue
						}
						admitted.Add(1)
						if h := holders.Add(1); h > limit {
							t.Errorf("%d tokens held at once, limit %d", h, limit)
						}
						held = append(held, tok)
					}
					for _, tok := range held {
						holders.Add(-1)
						tok.Success()
					}
				}()
			}
			done := make(chan struct{})
			go func() { wg.Wait(); close(done) }()
			select {
			case <-done:
			case <-time.After(qtGuard):
				t.Fatalf("hang: %d in flight, %d queued", lim.InFlight(), lim.Queued())
			}
			qtCheckCounts(t, lim, 0, 0)
			for _, p := range parts {
				if n := p.InFlight(); n != 0 {
					t.Errorf("partition %q InFlight() = %d at the end", p.Name(), n)
				}
			}
			if n := lim.Overreleases(); n != 0 {
				t.Errorf("Overreleases() = %d", n)
			}
			t.Logf("%d admitted, %d refused", admitted.Load(), refused.Load())
		})
	}
}
