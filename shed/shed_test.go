package shed

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/adaptive"
	"github.com/sluicehq/sluice/clock"
	"github.com/sluicehq/sluice/metrics"
)

var t0 = time.Date(2100, 1, 1, 0, 0, 0, 0, time.UTC)

func newShedder(t *testing.T, limit int, opts ...Option) (*Shedder, *adaptive.Limiter, *clock.Manual) {
	t.Helper()
	c := clock.NewManual(t0)
	g, err := adaptive.New(adaptive.Fixed(limit), adaptive.WithClock(c))
	if err != nil {
		t.Fatal(err)
	}
	s, err := New(g, append([]Option{WithClock(c), WithCohortRotation(0)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	return s, g, c
}

// overload offers n requests per interval, a quarter per priority and 64
// users each, holding every admitted token for the interval, for k
// intervals; it returns the admitted count per priority in the last one.
func overload(s *Shedder, c *clock.Manual, n, k int) [Priorities]int {
	var got [Priorities]int
	for range k {
		got = [Priorities]int{}
		var toks []adaptive.Token
		for i := range n {
			p := Priority(i % int(Priorities))
			tok, d := s.TryAcquire(p, uint64(i/int(Priorities)%64))
			if d.Admitted {
				got[p]++
				toks = append(toks, tok)
			}
		}
		c.Advance(100 * time.Millisecond)
		for _, tok := range toks {
			tok.Success()
		}
	}
	return got
}

func TestLowerPrioritiesAreShedFirst(t *testing.T) {
	s, _, c := newShedder(t, 40)
	got := overload(s, c, 400, 30) // 10× the gate
	if got[CriticalPlus] < 40*8/10 && got[Critical] > 0 {
		t.Fatalf("admitted %v: critical-plus starved while critical got in", got)
	}
	for p := CriticalPlus; p < Sheddable; p++ {
		if got[p] < got[p+1] {
			t.Fatalf("admitted %v: %v got less than %v (inversion)", got, p, p+1)
		}
	}
	if got[Sheddable] != 0 || got[SheddablePlus] != 0 {
		t.Fatalf("admitted %v: sheddable work admitted under 10× overload", got)
	}
	if s.Cutoff() > 2*Cohorts {
		t.Fatalf("cutoff %d: sheddable levels still admitted", s.Cutoff())
	}
}

func TestTightensFastRelaxesSlowly(t *testing.T) {
	s, _, c := newShedder(t, 40)
	overload(s, c, 400, 1)
	overload(s, c, 400, 1)
	tight := s.Cutoff()
	if tight >= Levels() {
		t.Fatalf("cutoff %d after two overloaded intervals: did not tighten", tight)
	}
	// Load falls to a quarter of the gate: the cutoff relaxes, but not at
	// once — and within a few seconds it has let everyone back in.
	overload(s, c, 10, 1)
	if s.Cutoff() == Levels() {
		t.Fatal("relaxed completely in one interval (flapping)")
	}
	overload(s, c, 10, 50)
	if s.Cutoff() != Levels() {
		t.Fatalf("cutoff %d after 5 s of light load: stuck", s.Cutoff())
	}
}

func TestCohortsAreConsistentPerUserAndRotate(t *testing.T) {
	s, _, _ := newShedder(t, 10)
	for u := range uint64(1000) {
		if a, b := s.Level(Critical, u), s.Level(Critical, u); a != b {
			t.Fatalf("user %d: levels %d and %d", u, a, b)
		}
		if l := s.Level(Critical, u); l < int(Critical)*Cohorts || l >= int(Critical+1)*Cohorts {
			t.Fatalf("level %d outside critical's range", l)
		}
	}
	c := clock.NewManual(t0)
	g, _ := adaptive.New(adaptive.Fixed(10), adaptive.WithClock(c))
	r, err := New(g, WithClock(c), WithCohortRotation(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	for u := range uint64(1000) {
		before := r.Level(Sheddable, u)
		c.Advance(time.Millisecond)
		if r.Level(Sheddable, u) != before {
			t.Fatal("cohort changed within a rotation period")
		}
	}
	moved := 0
	for u := range uint64(1000) {
		if r.level(Sheddable, u, 0) != r.level(Sheddable, u, int64(time.Minute)) {
			moved++
		}
	}
	if moved < 900 {
		t.Fatalf("only %d of 1000 users changed cohort after a rotation", moved)
	}
}

// critical lets one CriticalPlus request come and go: a reserve keeps room
// only for more important work that arrives.
func critical(t *testing.T, s *Shedder) {
	t.Helper()
	tok, d := s.TryAcquire(CriticalPlus, 0)
	if !d.Admitted {
		t.Fatalf("critical-plus refused by an idle gate: %+v", d)
	}
	tok.Success()
}

func TestReserveKeepsRoomForCriticalWork(t *testing.T) {
	s, g, _ := newShedder(t, 10, WithReserve(0.2))
	critical(t, s)
	// Sheddable may fill half of the unreserved 8 slots, SheddablePlus all
	// of them; so whenever SheddablePlus is refused, Sheddable is too.
	for range 4 {
		if _, d := s.TryAcquire(Sheddable, 1); !d.Admitted {
			t.Fatal("sheddable refused below its share")
		}
	}
	if _, d := s.TryAcquire(Sheddable, 1); d.Admitted || !d.Shed {
		t.Fatalf("sheddable admitted past half the unreserved share: %+v", d)
	}
	for range 4 {
		if _, d := s.TryAcquire(SheddablePlus, 1); !d.Admitted {
			t.Fatal("sheddable-plus refused below the reserve")
		}
	}
	if _, d := s.TryAcquire(SheddablePlus, 1); d.Admitted || !d.Shed {
		t.Fatalf("sheddable-plus admitted into the reserve: %+v", d)
	}
	for range 2 {
		if _, d := s.TryAcquire(Critical, 1); !d.Admitted {
			t.Fatal("critical refused with the reserve free")
		}
	}
	if g.InFlight() != 10 {
		t.Fatalf("in flight %d", g.InFlight())
	}
}

func TestAcquireErrors(t *testing.T) {
	s, _, c := newShedder(t, 1)
	tok, err := s.Acquire(context.Background(), Critical, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer tok.Success()
	if _, err := s.Acquire(context.Background(), Critical, 2); !errors.Is(err, adaptive.ErrLimitExceeded) || errors.Is(err, ErrShed) {
		t.Fatalf("full gate: %v", err)
	}
	overload(s, c, 100, 3)
	var shed int
	for u := range uint64(100) {
		if _, err := s.Acquire(context.Background(), Sheddable, u); errors.Is(err, ErrShed) {
			shed++
		}
	}
	if shed == 0 {
		t.Fatal("nothing shed under overload")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := s.Acquire(ctx, CriticalPlus, 1); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled: %v", err)
	}
}

func TestRejectionsDoNotAllocate(t *testing.T) {
	s, _, c := newShedder(t, 4)
	overload(s, c, 200, 3)
	allocs := testing.AllocsPerRun(1000, func() {
		s.TryAcquire(Sheddable, 7)
		if tok, d := s.TryAcquire(CriticalPlus, 7); d.Admitted {
			tok.Success()
		}
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per decision", allocs)
	}
}

// tally counts the decisions reported to it, per priority name and decision.
type tally struct {
	metrics.ShedBase
	n map[string]*[3]int
}

func (c *tally) ShedDecision(d metrics.ShedDecision, priority string) { c.n[priority][d]++ }

func newTally() *tally {
	c := &tally{n: map[string]*[3]int{}}
	for p := range Priorities {
		c.n[p.String()] = new([3]int)
	}
	return c
}

func TestObserverSeesEveryDecision(t *testing.T) {
	obs := newTally()
	s, _, c := newShedder(t, 2, WithReserve(0.5), WithObserver(obs))
	want := newTally()
	critical(t, s)
	want.n[CriticalPlus.String()][metrics.ShedAdmitted]++
	check := func() {
		t.Helper()
		for name, got := range obs.n {
			if *got != *want.n[name] {
				t.Fatalf("%s: observed %v, want %v", name, *got, *want.n[name])
			}
		}
	}
	expect := func(p Priority, d metrics.ShedDecision) {
		t.Helper()
		want.n[p.String()][d]++
		check()
	}
	tok, d := s.TryAcquire(Sheddable, 1)
	if !d.Admitted {
		t.Fatal("sheddable refused by an idle gate")
	}
	expect(Sheddable, metrics.ShedAdmitted)
	s.TryAcquire(SheddablePlus, 1) // the other half is reserved
	expect(SheddablePlus, metrics.ShedRefused)
	crit, _ := s.TryAcquire(CriticalPlus, 1)
	expect(CriticalPlus, metrics.ShedAdmitted)
	if _, err := s.Acquire(context.Background(), Critical, 1); !errors.Is(err, adaptive.ErrLimitExceeded) || errors.Is(err, ErrShed) {
		t.Fatalf("full gate: %v", err)
	}
	expect(Critical, metrics.ShedGateFull)
	s.TryAcquire(Priorities+3, 1) // out of range: reported as sheddable
	expect(Sheddable, metrics.ShedRefused)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := s.Acquire(ctx, Critical, 1); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled: %v", err)
	}
	check() // no decision: nothing reported
	tok.Success()
	crit.Success()

	// Under overload, every request is reported exactly once.
	obs.n, want.n = newTally().n, newTally().n
	overload(s, c, 400, 5)
	var total int
	for _, n := range obs.n {
		total += n[0] + n[1] + n[2]
	}
	if total != 400*5 {
		t.Fatalf("%d decisions reported for %d requests", total, 400*5)
	}
	if obs.n["sheddable"][metrics.ShedRefused] == 0 {
		t.Fatal("no sheddable request reported shed under overload")
	}
}

func TestObservedDecisionsDoNotAllocate(t *testing.T) {
	obs := newTally()
	s, _, c := newShedder(t, 4, WithObserver(obs))
	overload(s, c, 200, 3)
	before := *obs.n["sheddable"]
	allocs := testing.AllocsPerRun(1000, func() {
		s.TryAcquire(Sheddable, 7)
		if tok, d := s.TryAcquire(CriticalPlus, 7); d.Admitted {
			tok.Success()
		}
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per observed decision", allocs)
	}
	if *obs.n["sheddable"] == before {
		t.Fatal("observer not called")
	}
}

func TestValidation(t *testing.T) {
	g, _ := adaptive.New(adaptive.Fixed(1))
	for _, tt := range []struct {
		opt  Option
		want string
	}{
		{WithInterval(0), "interval"},
		{WithCohortRotation(-1), "cohort rotation"},
		{WithTighten(0), "tighten"},
		{WithRelax(2), "relax"},
		{WithReserve(1), "reserve"},
		{WithClock(nil), "WithClock(nil)"},
		{WithObserver(nil), "WithObserver(nil)"},
	} {
		if _, err := New(g, tt.opt); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("error %v, want it to mention %q", err, tt.want)
		}
	}
	if _, err := New(nil); err == nil {
		t.Error("New(nil) accepted")
	}
}

// TestReserveKeepsTheLastSlotsForCriticalPlus: with a reserve, Critical work
// cannot take the last twentieth of the reserved share; CriticalPlus can.
func TestReserveKeepsTheLastSlotsForCriticalPlus(t *testing.T) {
	s, g, _ := newShedder(t, 100, WithReserve(0.4)) // CriticalPlus alone: the last 2 slots
	critical(t, s)
	for range 98 {
		if _, d := s.TryAcquire(Critical, 1); !d.Admitted {
			t.Fatalf("critical refused at %d in flight", g.InFlight())
		}
	}
	if _, d := s.TryAcquire(Critical, 1); d.Admitted || !d.Shed {
		t.Fatalf("critical took a slot kept for critical-plus: %+v", d)
	}
	for range 2 {
		if _, d := s.TryAcquire(CriticalPlus, 1); !d.Admitted {
			t.Fatal("critical-plus refused its reserved slot")
		}
	}
	if _, d := s.TryAcquire(Critical, 1); d.Admitted || d.Shed {
		t.Fatalf("full gate: %+v, want refused by the gate", d)
	}
}

// TestReserveFollowsCriticalDemand: on a gate whose limit is sized to the
// demand, a large reserve does not refuse sheddable work at low load (the
// critical work needs little room); once critical work is the bulk of the
// demand and is refused while sheddable work is admitted, the full reserve
// comes back at once, holds, and is lifted slowly once the load is low again.
func TestReserveFollowsCriticalDemand(t *testing.T) {
	s, g, c := newShedder(t, 54, WithReserve(0.75)) // 54 ≈ 4/3 of 40 in flight
	// offer sends crit Critical and shed Sheddable requests in one interval,
	// interleaved, holds every admitted token to the end of the interval,
	// and returns the admitted count per priority.
	offer := func(crit, shed int) [Priorities]int {
		var got [Priorities]int
		var toks []adaptive.Token
		for i := range max(crit, shed) {
			for _, r := range []struct {
				p Priority
				n int
			}{{Critical, crit}, {Sheddable, shed}} {
				if i >= r.n {
					continue
				}
				if tok, d := s.TryAcquire(r.p, uint64(i)); d.Admitted {
					got[r.p]++
					toks = append(toks, tok)
				}
			}
		}
		c.Advance(100 * time.Millisecond)
		for _, tok := range toks {
			tok.Success()
		}
		return got
	}
	// At first the reserve is its full share: Sheddable may fill only
	// (1 − 0.75)·54/2 ≈ 6.75 slots.
	if got := offer(20, 20); got[Sheddable] > 7 {
		t.Fatalf("admitted %v in the first interval: the reserve starts full", got)
	}
	// Low load (40 in flight of 54): within seconds all of it is admitted.
	var got [Priorities]int
	for range 50 {
		got = offer(20, 20)
	}
	if got[Critical] != 20 || got[Sheddable] != 20 {
		t.Fatalf("admitted %v at low load with a reserve of 0.75, want all 20 + 20", got)
	}
	// Critical work becomes the bulk of the demand (100 an interval against
	// 54 slots): within an interval Sheddable is back to its share of the
	// full reserve and Critical takes the rest, up to the slots kept for
	// CriticalPlus.
	offer(100, 20)
	for range 3 {
		got = offer(100, 20)
		if got[Sheddable] > 7 || got[Critical] < 45 {
			t.Fatalf("admitted %v under critical overload: want Sheddable ≤ 7, Critical ≥ 45 of %d slots", got, g.Limit())
		}
	}
	// Back to low load: the full reserve holds for guardHold, then lifts.
	for range int(guardHold/(100*time.Millisecond)) - 10 {
		if got = offer(20, 20); got[Sheddable] > 7 {
			t.Fatalf("admitted %v during the hold", got)
		}
	}
	for range 50 {
		got = offer(20, 20)
	}
	if got[Sheddable] != 20 {
		t.Fatalf("admitted %v 5 s after the hold: the reserve did not lift", got)
	}
}

// TestReserveOnlyForWorkThatComes: a reserve keeps nothing from a priority
// while nothing more important arrives; from the first more important
// arrival it keeps its full share; guardHold after the last, nothing again.
func TestReserveOnlyForWorkThatComes(t *testing.T) {
	s, g, c := newShedder(t, 10, WithReserve(0.2))
	fill := func() (admitted int) {
		var toks []adaptive.Token
		for range 10 {
			if tok, d := s.TryAcquire(Sheddable, 1); d.Admitted {
				admitted++
				toks = append(toks, tok)
			}
		}
		for _, tok := range toks {
			tok.Success()
		}
		c.Advance(100 * time.Millisecond)
		return admitted
	}
	if n := fill(); n != g.Limit() {
		t.Fatalf("sheddable alone got %d of the gate's %d", n, g.Limit())
	}
	critical(t, s)
	if n := fill(); n != 4 {
		t.Fatalf("sheddable after critical work: %d admitted, want 4 (half the unreserved 8)", n)
	}
	c.Advance(guardHold)
	fill() // the first interval after the lull measures it
	if n := fill(); n != g.Limit() {
		t.Fatalf("sheddable %v after the last critical work: %d admitted, want the whole gate (%d)", guardHold, n, g.Limit())
	}
}

// TestOnePriorityIsTheGate: with every request of one priority and one user
// (the interceptors' traffic when nothing is configured), the shedder
// refuses nothing the gate would have admitted, interval after interval of
// 2× overload: the gate alone decides.
func TestOnePriorityIsTheGate(t *testing.T) {
	for _, p := range []Priority{CriticalPlus, Critical, Sheddable} {
		s, _, c := newShedder(t, 40, WithReserve(0.2))
		bare, err := adaptive.New(adaptive.Fixed(40), adaptive.WithClock(c))
		if err != nil {
			t.Fatal(err)
		}
		for i := range 30 {
			var toks []adaptive.Token
			admitted, alone := 0, 0
			for range 80 {
				tok, d := s.TryAcquire(p, 0)
				if d.Shed {
					t.Fatalf("%v, interval %d: shed with no more important work arriving", p, i)
				}
				if d.Admitted {
					admitted++
					toks = append(toks, tok)
				}
				if tok, ok := bare.TryAcquire(); ok {
					alone++
					toks = append(toks, tok)
				}
			}
			if admitted < alone {
				t.Fatalf("%v, interval %d: admitted %d of 80, the gate alone %d", p, i, admitted, alone)
			}
			c.Advance(100 * time.Millisecond)
			for _, tok := range toks {
				tok.Success()
			}
		}
	}
}

// TestIdleRelaxes: after an overload the state decays with time, not with
// traffic: a lone sheddable request after a few seconds of silence is
// admitted, as it would be after the same time at light load.
func TestIdleRelaxes(t *testing.T) {
	s, _, c := newShedder(t, 40)
	overload(s, c, 400, 20)
	if s.Cutoff() > 2*Cohorts {
		t.Fatalf("cutoff %d: sheddable work not shed under 10× overload", s.Cutoff())
	}
	c.Advance(s.retryAfter()) // the Retry-After the refused clients were given
	tok, d := s.TryAcquire(Sheddable, 7)
	if !d.Admitted {
		t.Fatalf("a lone sheddable request after %v idle: %+v, cutoff %d", s.retryAfter(), d, s.Cutoff())
	}
	tok.Success()
	if s.Cutoff() != Levels() {
		t.Fatalf("cutoff %d after %v idle, want %d (nothing shed)", s.Cutoff(), s.retryAfter(), Levels())
	}
}

// gateTally counts a gate's decisions.
type gateTally struct {
	metrics.GateBase
	admitted, rejected int
}

func (g *gateTally) GateDecision(d metrics.GateDecision, _ string, _ time.Duration) {
	if d == metrics.Admitted {
		g.admitted++
	} else {
		g.rejected++
	}
}

// fullFront is a front signal whose queue the test sets.
type fullFront struct{ queue int }

func (f *fullFront) Queue() int                  { return f.queue }
func (f *fullFront) Delay() (time.Duration, int) { return 0, 0 }

// TestPassFrontDecidesAsTryAcquire: a caller that asks PassFront first and
// calls TryAcquire only when it passes sees the same decisions, and leaves
// the shedder in the same state (cutoff, observed decisions), as one that
// calls TryAcquire alone, while the gate's front limit refuses half the
// time; and PassFront counts nothing for what it lets pass.
func TestPassFrontDecidesAsTryAcquire(t *testing.T) {
	type side struct {
		s     *Shedder
		c     *clock.Manual
		front *fullFront
		obs   *tally
		gate  *gateTally
	}
	mk := func() side {
		c := clock.NewManual(t0)
		f := &fullFront{}
		gt := &gateTally{}
		g, err := adaptive.New(adaptive.Fixed(40), adaptive.WithClock(c), adaptive.WithFrontSignal(f), adaptive.WithObserver(gt))
		if err != nil {
			t.Fatal(err)
		}
		obs := newTally()
		s, err := New(g, WithClock(c), WithCohortRotation(0), WithReserve(0.2), WithObserver(obs))
		if err != nil {
			t.Fatal(err)
		}
		return side{s, c, f, obs, gt}
	}
	plain, tapped := mk(), mk()
	refusedByFront := 0
	for k := range 30 {
		var toks [2][]adaptive.Token
		for i := range 400 {
			if i%8 == 0 { // the queue is read at most every 250 µs
				for _, sd := range []side{plain, tapped} {
					sd.front.queue = 0
					if (i/8+k)%2 == 0 {
						sd.front.queue = 1 << 20
					}
					sd.c.Advance(250 * time.Microsecond)
				}
			}
			p, user := Priority(i%int(Priorities)), uint64(i/int(Priorities)%64)
			tok, d1 := plain.s.TryAcquire(p, user)
			if d1.Admitted {
				toks[0] = append(toks[0], tok)
			}
			d2, ok := tapped.s.PassFront(p, user)
			if ok {
				if d2 != (Decision{}) {
					t.Fatalf("PassFront passed with a decision %+v", d2)
				}
				tok, d2 = tapped.s.TryAcquire(p, user)
				if d2.Admitted {
					toks[1] = append(toks[1], tok)
				}
			} else {
				refusedByFront++
			}
			if d1 != d2 {
				t.Fatalf("interval %d, request %d: TryAcquire %+v, PassFront then TryAcquire %+v", k, i, d1, d2)
			}
		}
		for j, sd := range []side{plain, tapped} {
			sd.c.Advance(50 * time.Millisecond)
			for _, tok := range toks[j] {
				tok.Success()
			}
		}
		if plain.s.Cutoff() != tapped.s.Cutoff() {
			t.Fatalf("interval %d: cutoff %d, with PassFront %d", k, plain.s.Cutoff(), tapped.s.Cutoff())
		}
	}
	for name, n := range plain.obs.n {
		if *n != *tapped.obs.n[name] {
			t.Fatalf("%s: observed %v, with PassFront %v", name, *n, *tapped.obs.n[name])
		}
	}
	if *plain.gate != *tapped.gate {
		t.Fatalf("the gate observed %+v, with PassFront %+v (a request shed for its level must not count at the gate)", *plain.gate, *tapped.gate)
	}
	if refusedByFront == 0 || plain.s.Cutoff() == Levels() {
		t.Fatalf("PassFront refused %d, cutoff %d: the test did not exercise the front or the cutoff", refusedByFront, plain.s.Cutoff())
	}
	s, _, _ := newShedder(t, 1) // a gate without a front signal passes everything, full or not
	tok, _ := s.TryAcquire(Critical, 1)
	defer tok.Success()
	if _, ok := s.PassFront(Sheddable, 1); !ok {
		t.Fatal("PassFront refused on a gate without a front signal")
	}
	if allocs := testing.AllocsPerRun(100, func() { tapped.s.PassFront(Sheddable, 3) }); allocs != 0 {
		t.Fatalf("PassFront: %v allocations, want 0", allocs)
	}
}
