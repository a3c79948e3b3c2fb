package bench

import (
	"runtime"
	"strconv"
	"testing"
	"time"
)

// The keyed rate-limiter benchmark (issue 5): one decision for one key per
// iteration, serial (b.Loop on one goroutine) and parallel (b.RunParallel:
// GOMAXPROCS goroutines, so -cpu 2 means two), over 1 key and over 100k keys,
// for sluice's constant-state algorithms and the peers of
// ratelimit_adapters_test.go. `./run-ratelimit.sh` runs it and prints the
// tables; see README.md.

// rlKeyCounts are the key counts of BenchmarkKeyed.
var rlKeyCounts = []int{1, 100_000}

// rlMemKeys is how many keys BenchmarkBytesPerKey inserts, under a limit of
// rlMemRate per rlMemPeriod: one request takes a token that comes back only
// after a day, so no key is back to a fresh key's state (which sluice's store
// may drop) before the measurement ends, and no calendar window turns over.
const (
	rlMemKeys   = 1_000_000
	rlMemRate   = 1000
	rlMemPeriod = 1000 * 24 * time.Hour
)

func rlKeyLabel(n int) string {
	if n >= 1000 && n%1000 == 0 {
		return strconv.Itoa(n/1000) + "k"
	}
	return strconv.Itoa(n)
}

// BenchmarkKeyed measures Allow (or the peer's equivalent) on a key the
// limiter already holds. Every limiter is filled with all the keys before
// it is timed, through one copy of the keys, and looked up through an equal
// copy (see rlKeys). A limiter is built once per key count and shared by its
// serial and parallel runs (and their -count repetitions); the limit is so
// high that nothing is refused, and a sub-benchmark fails if anything was.
func BenchmarkKeyed(b *testing.B) {
	for _, nkeys := range rlKeyCounts {
		stored, lookup := rlKeys(nkeys)
		b.Run("keys="+rlKeyLabel(nkeys), func(b *testing.B) {
			for _, impl := range rlImpls() {
				if impl.keyless && nkeys > 1 {
					continue
				}
				b.Run(impl.name, func(b *testing.B) {
					k := impl.new(b, rlRate, rlPeriod)
					defer k.close()
					for _, key := range stored {
						if o := k.allow(key); o != admitted {
							b.Fatalf("%s did not admit %q while filling (outcome %d)", impl.name, key, o)
						}
					}
					runtime.GC() // the fill's garbage is not the benchmark's
					b.Run("serial", func(b *testing.B) {
						b.ReportAllocs()
						sleeps := rlSleeps(k)
						rlReport(b, impl.name, k.serial(b, lookup))
						rlReportSleeps(b, k, sleeps)
					})
					b.Run("parallel", func(b *testing.B) {
						b.ReportAllocs()
						sleeps := rlSleeps(k)
						rlReport(b, impl.name, k.parallel(b, lookup))
						rlReportSleeps(b, k, sleeps)
					})
				})
			}
		})
	}
}

// rlReport fails the benchmark if a decision refused: the limit is set so
// that none may, and a refusal is a cheaper path than an admission. Errors
// are reported as errors/op instead: throttled's GCRA gives up with an error
// after 10 lost compare-and-swaps, which two goroutines on one key provoke
// now and then, and that is its behaviour under contention, not a mistake
// of the harness.
func rlReport(b *testing.B, name string, t tally) {
	if t.refused > 0 {
		b.Fatalf("%s refused %d of %d", name, t.refused, b.N)
	}
	if t.failed > 0 {
		b.ReportMetric(float64(t.failed)/float64(b.N), "errors/op")
	}
}

// rlSleeps returns how many times uber's limiter has slept so far (0 for
// the others).
func rlSleeps(k keyed) int64 {
	if u, ok := k.(uberKeyed); ok {
		return u.clock.sleeps.Load()
	}
	return 0
}

// rlReportSleeps reports uber's sleeps per Take since before.
func rlReportSleeps(b *testing.B, k keyed, before int64) {
	if u, ok := k.(uberKeyed); ok {
		b.ReportMetric(float64(u.clock.sleeps.Load()-before)/float64(b.N), "sleeps/op")
	}
}

// BenchmarkBytesPerKey reports the heap each key costs in each keyed
// limiter once it holds rlMemKeys keys, less the bytes of the key string
// the limiter keeps (see rlBytesPerKey). Run it with -benchtime 1x; it takes
// a few seconds per limiter.
func BenchmarkBytesPerKey(b *testing.B) {
	for _, impl := range rlImpls() {
		if impl.keyless {
			continue
		}
		b.Run(impl.name, func(b *testing.B) {
			var perKey, keyCost float64
			for b.Loop() {
				perKey, keyCost = rlBytesPerKey(b, impl, rlMemKeys)
			}
			b.ReportMetric(perKey, "B/key")
			b.ReportMetric(keyCost, "keyB/key")
		})
	}
}

// rlHeap returns the live heap after two full collections.
func rlHeap() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// rlMemKey is the i-th key of the memory measurement, the same as rlKeys'.
func rlMemKey(i int) string { return "user:" + strconv.Itoa(i) }

// rlBytesPerKey inserts n distinct keys into a new limiter of impl, one
// admitted request each, and returns the growth of the live heap per key
// less keyCost, and keyCost: what the key strings the limiter keeps cost on
// their own, measured by allocating the same strings (same lengths, same
// order) into a slice and subtracting the slice. Every limiter keeps exactly
// one string per key: sluice its own clone, ulule a prefixed copy, the
// others the caller's string; the keys are built inside the measured span
// and not kept by the caller, so each counts once, wherever it came from.
func rlBytesPerKey(tb testing.TB, impl rlImpl, n int) (perKey, keyCost float64) {
	tb.Helper()
	k := impl.new(tb, rlMemRate, rlMemPeriod)
	defer k.close()
	keyCost = rlKeyCost(k, n)

	before := rlHeap()
	for i := range n {
		if o := k.allow(rlMemKey(i)); o != admitted {
			tb.Fatalf("%s did not admit key %d (outcome %d)", impl.name, i, o)
		}
	}
	after := rlHeap()
	runtime.KeepAlive(k)
	return float64(int64(after)-int64(before))/float64(n) - keyCost, keyCost
}

// rlKeyCost is the heap cost per key of n strings of the lengths k keeps.
func rlKeyCost(k keyed, n int) float64 {
	before := rlHeap()
	keys := make([]string, n)
	for i := range keys {
		keys[i] = string(make([]byte, k.storedKeyLen(rlMemKey(i))))
	}
	after := rlHeap()
	runtime.KeepAlive(keys)
	slice := float64(cap(keys)) * 16
	return (float64(int64(after)-int64(before)) - slice) / float64(n)
}
