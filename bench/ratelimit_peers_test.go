package bench

import (
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/clock"
	"github.com/sluicehq/sluice/ratelimit"
)

// These tests keep the keyed benchmark honest: every adapter limits per key
// (admits up to the limit, then refuses, one key independently of another,
// and finds a key's state through an equal string that is not the same
// pointer), and with the benchmark's limit admits everything, also
// concurrently. They are fast and run under -race; nothing sleeps or times.

// rlSmall is the small limit of the refusal tests: 5 per hour, burst 5.
const rlSmall = 5

// rlSmallImpls returns every keyed adapter with a limit of rlSmall per hour.
// sluice's limiters run on a manual clock, so that a calendar window (fixed
// and sliding windows are aligned to the clock's epoch) cannot turn over in
// the middle of a test; the peers' windows and buckets start at their first
// request, so an hour is far away.
func rlSmallImpls(t *testing.T) map[string]keyed {
	t.Helper()
	impls := map[string]keyed{}
	c := clock.NewManual(time.Date(2026, 1, 1, 0, 30, 0, 0, time.UTC))
	for _, alg := range rlSluiceAlgorithms {
		impls["sluice."+alg.String()] = newSluiceKeyed(t, alg,
			ratelimit.Limit{Rate: rlSmall, Period: time.Hour}, ratelimit.WithClock(c))
	}
	impls["sethvargo"] = newSethvargo(t, rlSmall, time.Hour)
	impls["xtime"] = newXTime(rlSmall, time.Hour)
	impls["throttled"] = newThrottled(t, rlSmall, time.Hour)
	impls["ulule"] = newUlule(rlSmall, time.Hour)
	return impls
}

func TestKeyedAdaptersLimitPerKey(t *testing.T) {
	for name, k := range rlSmallImpls(t) {
		t.Run(name, func(t *testing.T) {
			defer k.close()
			a := "user:a"
			for i := range rlSmall {
				if o := k.allow(a); o != admitted {
					t.Fatalf("request %d of %d for %q not admitted (outcome %d)", i+1, rlSmall, a, o)
				}
			}
			// The same key, as an equal string with its own bytes.
			if o := k.allow(strings.Clone(a)); o != refused {
				t.Fatalf("request %d for %q past the limit of %d: outcome %d, want refused", rlSmall+1, a, rlSmall, o)
			}
			if o := k.allow("user:b"); o != admitted {
				t.Fatalf("first request for another key not admitted (outcome %d)", o)
			}
		})
	}
}

// TestKeyedAdaptersAdmitBenchLimit fills each limiter of the benchmark with
// keys through one copy and decides on them through the other from several
// goroutines at once, as BenchmarkKeyed does: nothing may be refused.
func TestKeyedAdaptersAdmitBenchLimit(t *testing.T) {
	const nkeys, goroutines, rounds = 500, 4, 3
	stored, lookup := rlKeys(nkeys)
	for _, impl := range rlImpls() {
		t.Run(impl.name, func(t *testing.T) {
			k := impl.new(t, rlRate, rlPeriod)
			defer k.close()
			keys, look := stored, lookup
			if impl.keyless {
				keys, look = stored[:1], lookup[:1]
			}
			for _, key := range keys {
				if o := k.allow(key); o != admitted {
					t.Fatalf("fill: %q not admitted (outcome %d)", key, o)
				}
			}
			var wg sync.WaitGroup
			tallies := make([]tally, goroutines)
			for g := range goroutines {
				wg.Go(func() {
					for r := range rounds * len(look) {
						tallies[g].add(k.allow(look[(g*len(look)/goroutines+r)%len(look)]))
					}
				})
			}
			wg.Wait()
			for g, n := range tallies {
				if n.refused > 0 || n.failed > 0 {
					t.Errorf("goroutine %d: of %d decisions, %d refused and %d failed", g, rounds*len(look), n.refused, n.failed)
				}
			}
			if impl.keyless {
				// Sequential Takes are always more than 1 ns apart, so
				// uber's limiter must not have slept; concurrent ones may
				// in principle meet within a nanosecond, so they are not
				// checked.
				before := rlSleeps(k)
				for range 1000 {
					k.allow("")
				}
				if n := rlSleeps(k) - before; n > 0 {
					t.Errorf("uber slept %d times in 1000 sequential Takes", n)
				}
			}
		})
	}
}

// TestKeyedSluiceZeroAllocs: a decision on a held key, found through an
// equal string with its own bytes, allocates nothing.
func TestKeyedSluiceZeroAllocs(t *testing.T) {
	stored, lookup := rlKeys(64)
	for _, alg := range rlSluiceAlgorithms {
		t.Run(alg.String(), func(t *testing.T) {
			k := newSluiceKeyed(t, alg, ratelimit.Limit{Rate: rlRate, Period: rlPeriod})
			for _, key := range stored {
				if k.allow(key) != admitted {
					t.Fatalf("fill: %q not admitted", key)
				}
			}
			i := 0
			allocs := testing.AllocsPerRun(1000, func() {
				if k.allow(lookup[i%len(lookup)]) != admitted {
					t.Fatal("not admitted")
				}
				i++
			})
			if allocs != 0 {
				t.Errorf("%v allocs per decision, want 0", allocs)
			}
		})
	}
}

// TestKeyedBytesPerKeySmall runs the bytes-per-key measurement on a few
// keys, to keep its code working. It asserts nothing about the numbers: at
// this size they are within the noise of other goroutines' allocations.
func TestKeyedBytesPerKeySmall(t *testing.T) {
	for _, impl := range rlImpls() {
		if impl.keyless {
			continue
		}
		t.Run(impl.name, func(t *testing.T) {
			perKey, keyCost := rlBytesPerKey(t, impl, 2000)
			t.Logf("%.1f B per key (less %.1f B of key)", perKey, keyCost)
		})
	}
}
