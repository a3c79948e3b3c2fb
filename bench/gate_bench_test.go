package bench

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/failsafe-go/failsafe-go/adaptivelimiter"
	"github.com/go-kratos/aegis/ratelimit"
	"github.com/go-kratos/aegis/ratelimit/bbr"
	"github.com/zeromicro/go-zero/core/load"
	"github.com/zeromicro/go-zero/core/logx"
	"github.com/zeromicro/go-zero/core/stat"

	"github.com/sluicehq/sluice/adaptive"
)

// highLimit is a concurrency limit no benchmark comes near, so no gate
// ever rejects and every iteration measures the admit+release path.
const highLimit = 1 << 20

// neverOverloaded is a CPU threshold (in millicpu) above the 1000 that both
// go-zero and aegis clamp their CPU reading to, so their CPU gate never opens
// and they never drop. Their acquire/release bookkeeping (rolling windows,
// in-flight counter, RTT buckets) still runs on every call.
const neverOverloaded = 1001

func init() {
	// go-zero logs through logx (stdout) and prints CPU stats every minute
	// from the stat package's sampler goroutine; keep benchmark output clean.
	logx.Disable()
	stat.DisableLog()
}

// newSluice returns the sluice gate with a fixed limit far above anything
// the benchmark reaches.
func newSluice(tb testing.TB) *adaptive.Limiter {
	tb.Helper()
	lim, err := adaptive.New(adaptive.Fixed(highLimit))
	if err != nil {
		tb.Fatalf("adaptive.New: %v", err)
	}
	return lim
}

// newFailsafe returns a failsafe-go adaptive limiter whose limit is pinned
// at highLimit (min = max = initial), so it never rejects. Every Record
// still adds the RTT to its t-digest under its mutex and runs the periodic
// limit update; the update just clamps back to highLimit.
func newFailsafe() adaptivelimiter.AdaptiveLimiter[any] {
	return adaptivelimiter.NewBuilder[any]().
		WithLimits(highLimit, highLimit, highLimit).
		Build()
}

// newGoZero returns go-zero's adaptive shedder with a CPU threshold it can
// never reach.
func newGoZero() load.Shedder {
	return load.NewAdaptiveShedder(load.WithCpuThreshold(neverOverloaded))
}

// newAegis returns aegis' BBR limiter with a CPU threshold it can never
// reach.
func newAegis() *bbr.BBR {
	return bbr.NewLimiter(bbr.WithCPUThreshold(neverOverloaded))
}

// sink keeps floor's clock reads observable so the compiler cannot drop them.
var sink atomic.Int64

// BenchmarkAcquireRelease measures one admission followed at once by its
// release, through each gate's non-waiting path. Run with -cpu 1,2: each
// -cpu value is the number of goroutines hammering one shared gate.
func BenchmarkAcquireRelease(b *testing.B) {
	// floor: what any gate that samples RTT must at least do per request:
	// read the monotonic clock at admit and at release, and increment then
	// decrement one shared in-flight counter.
	b.Run("floor", func(b *testing.B) {
		b.ReportAllocs()
		epoch := time.Now()
		var inflight atomic.Int64
		b.RunParallel(func(pb *testing.PB) {
			var acc time.Duration
			for pb.Next() {
				start := time.Since(epoch)
				inflight.Add(1)
				end := time.Since(epoch)
				inflight.Add(-1)
				acc += end - start
			}
			sink.Add(int64(acc))
		})
	})

	b.Run("sluice", func(b *testing.B) {
		b.ReportAllocs()
		lim := newSluice(b)
		var rejected atomic.Int64
		b.RunParallel(func(pb *testing.PB) {
			var n int64
			for pb.Next() {
				tok, ok := lim.TryAcquire()
				if !ok {
					n++
					continue
				}
				tok.Success()
			}
			rejected.Add(n)
		})
		if n := rejected.Load(); n > 0 {
			b.Fatalf("sluice rejected %d of %d", n, b.N)
		}
	})

	b.Run("failsafe", func(b *testing.B) {
		b.ReportAllocs()
		lim := newFailsafe()
		var rejected atomic.Int64
		b.RunParallel(func(pb *testing.PB) {
			var n int64
			for pb.Next() {
				permit, ok := lim.TryAcquirePermit()
				if !ok {
					n++
					continue
				}
				permit.Record()
			}
			rejected.Add(n)
		})
		if n := rejected.Load(); n > 0 {
			b.Fatalf("failsafe rejected %d of %d", n, b.N)
		}
	})

	b.Run("gozero", func(b *testing.B) {
		b.ReportAllocs()
		shedder := newGoZero()
		var rejected atomic.Int64
		b.RunParallel(func(pb *testing.PB) {
			var n int64
			for pb.Next() {
				promise, err := shedder.Allow()
				if err != nil {
					n++
					continue
				}
				promise.Pass()
			}
			rejected.Add(n)
		})
		if n := rejected.Load(); n > 0 {
			b.Fatalf("gozero rejected %d of %d", n, b.N)
		}
	})

	b.Run("aegis", func(b *testing.B) {
		b.ReportAllocs()
		lim := newAegis()
		var rejected atomic.Int64
		b.RunParallel(func(pb *testing.PB) {
			var n int64
			for pb.Next() {
				done, err := lim.Allow()
				if err != nil {
					n++
					continue
				}
				done(ratelimit.DoneInfo{})
			}
			rejected.Add(n)
		})
		if n := rejected.Load(); n > 0 {
			b.Fatalf("aegis rejected %d of %d", n, b.N)
		}
	})
}
