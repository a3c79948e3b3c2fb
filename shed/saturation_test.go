package shed

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice/adaptive"
)

// TestSaturationShedsBeforeTheGateRefuses: with a gate that still has room
// (a slow dependency would look the same), a saturated process makes the
// shedder shed the lowest levels first, more each interval, and it never
// relaxes while saturated; once the signal clears, it relaxes again.
func TestSaturationShedsBeforeTheGateRefuses(t *testing.T) {
	var saturated atomic.Bool
	s, _, c := newShedder(t, 1000, WithSaturation(saturated.Load))
	round := func() (shed [Priorities]int) {
		var toks []adaptive.Token
		for i := range 400 {
			p := Priority(i % int(Priorities))
			tok, d := s.TryAcquire(p, uint64(i))
			if d.Admitted {
				toks = append(toks, tok)
			} else if d.Shed {
				shed[p]++
			}
		}
		for _, tok := range toks {
			tok.Success()
		}
		c.Advance(100 * time.Millisecond)
		return shed
	}
	round()
	if got := round(); got != [Priorities]int{} {
		t.Fatalf("shed %v with the process idle and the gate far from full", got)
	}
	saturated.Store(true)
	var got [Priorities]int
	for range 5 {
		got = round()
	}
	if got[Sheddable] == 0 || got[CriticalPlus] != 0 || got[Critical] != 0 {
		t.Fatalf("after 5 saturated intervals shed %v: want Sheddable shed and CriticalPlus, Critical untouched", got)
	}
	cut := s.Cutoff()
	round()
	if s.Cutoff() > cut {
		t.Fatalf("cutoff relaxed from %d to %d while saturated", cut, s.Cutoff())
	}
	saturated.Store(false)
	for range 60 {
		round()
	}
	if s.Cutoff() != Levels() {
		t.Fatalf("cutoff %d long after saturation cleared, want %d (nothing shed)", s.Cutoff(), Levels())
	}
}

func TestSchedulerLatencyValidation(t *testing.T) {
	if _, err := SchedulerLatency(1, time.Millisecond); err == nil {
		t.Fatal("q = 1 accepted")
	}
	if _, err := SchedulerLatency(0.99, 0); err == nil {
		t.Fatal("threshold 0 accepted")
	}
	sat, err := SchedulerLatency(0.99, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	sat() // reads the real runtime histogram
	if sat() {
		t.Fatal("a test process saturated at a one-second scheduler p99")
	}
	if _, err := New(mustGate(t), WithSaturation(nil)); err == nil {
		t.Fatal("WithSaturation(nil) accepted")
	}
}

func mustGate(t *testing.T) *adaptive.Limiter {
	g, err := adaptive.New(adaptive.Fixed(10))
	if err != nil {
		t.Fatal(err)
	}
	return g
}
