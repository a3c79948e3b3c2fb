package bench

import (
	"testing"

	"github.com/go-kratos/aegis/ratelimit"
)

// These tests keep the benchmark honest: a gate that rejected would measure
// its (cheaper) refusal path, not admission. No goleak here on purpose:
// go-zero's stat package and aegis' bbr package each start a CPU-sampling
// goroutine from init() that never exits.

// sequential is how many acquire/release pairs each adapter must admit.
const sequential = 1000

// admitter acquires one permit without waiting and returns its release, or
// ok=false if the gate refused.
type admitter func() (release func(), ok bool)

func adapters(t *testing.T) map[string]admitter {
	t.Helper()
	sluice := newSluice(t)
	failsafe := newFailsafe()
	gozero := newGoZero()
	aegis := newAegis()
	return map[string]admitter{
		"sluice": func() (func(), bool) {
			tok, ok := sluice.TryAcquire()
			if !ok {
				return nil, false
			}
			return tok.Success, true
		},
		"failsafe": func() (func(), bool) {
			permit, ok := failsafe.TryAcquirePermit()
			if !ok {
				return nil, false
			}
			return permit.Record, true
		},
		"gozero": func() (func(), bool) {
			promise, err := gozero.Allow()
			if err != nil {
				return nil, false
			}
			return promise.Pass, true
		},
		"aegis": func() (func(), bool) {
			done, err := aegis.Allow()
			if err != nil {
				return nil, false
			}
			return func() { done(ratelimit.DoneInfo{}) }, true
		},
	}
}

func TestAdaptersAdmitSequential(t *testing.T) {
	for name, acquire := range adapters(t) {
		t.Run(name, func(t *testing.T) {
			for i := range sequential {
				release, ok := acquire()
				if !ok {
					t.Fatalf("acquire %d of %d rejected", i+1, sequential)
				}
				release()
			}
		})
	}
}

// TestAdaptersAdmitNested holds many permits at once, as -cpu N goroutines
// do, and checks that nothing is rejected while they are held.
func TestAdaptersAdmitNested(t *testing.T) {
	const held = 64
	for name, acquire := range adapters(t) {
		t.Run(name, func(t *testing.T) {
			releases := make([]func(), 0, held)
			for i := range held {
				release, ok := acquire()
				if !ok {
					t.Fatalf("acquire %d with %d in flight rejected", i+1, i)
				}
				releases = append(releases, release)
			}
			for _, release := range releases {
				release()
			}
		})
	}
}

func TestSluiceZeroAllocs(t *testing.T) {
	lim := newSluice(t)
	allocs := testing.AllocsPerRun(1000, func() {
		tok, ok := lim.TryAcquire()
		if !ok {
			t.Fatal("sluice rejected")
		}
		tok.Success()
	})
	if allocs != 0 {
		t.Fatalf("sluice TryAcquire+Success: %v allocs/op, want 0", allocs)
	}
}
