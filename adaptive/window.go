package adaptive

import (
	"math"
	"math/bits"
	"sync/atomic"
	"time"
	"unsafe"
)

// Sample summarises one sampling window of the gate. The gate builds it when
// a window closes and hands it to Algorithm.Update; algorithms never see
// individual requests.
//
// Only tokens released with Success contribute round-trip times. Tokens
// released with Dropped are counted in Dropped and contribute no RTT, so a
// request that failed fast can never pass for a fast, healthy one.
type Sample struct {
	// At is when the window closed, measured from the gate's creation.
	At time.Duration
	// Window is how long the window lasted.
	Window time.Duration
	// Limit is the concurrency limit in force when the window closed.
	Limit int
	// Count is the number of successful requests sampled in the window.
	Count int
	// Dropped is the number of tokens released with Dropped in the window.
	Dropped int
	// RTT is the window's representative round-trip time: the mean of the
	// successful requests, or the percentile chosen with WithPercentile.
	// Zero when Count is zero.
	RTT time.Duration
	// MinRTT, AvgRTT and MaxRTT are the fastest, mean and slowest round-trip
	// times of the successful requests in the window (zero when Count is zero).
	MinRTT, AvgRTT, MaxRTT time.Duration
	// Rejected is the number of callers refused in the window (TryAcquire
	// failures, Acquire refusals); a sign of demand beyond the limit.
	Rejected int
	// MaxInFlight is the most requests in flight at once during the window.
	MaxInFlight int
	// Queued is the number of callers waiting in the queue when the window
	// closed (always zero without a queue).
	Queued int
	// FrontDelay is the mean time requests waited in front of the gate
	// during the window, as its FrontSignal measured it (zero without
	// one; see WithFrontSignal).
	FrontDelay time.Duration
	// FrontRefused is the number of callers refused in the window because
	// the queue in front of the gate was too long (not counted in
	// Rejected: the gate itself had room).
	FrontRefused int

	// The gate's model of the service, measured over all windows so far,
	// this one included (see FloorProber for how the gate measures it).

	// Floor is the service's floor: the round-trip time at low concurrency,
	// about what a request served alone takes, in the statistic of RTT (the
	// mean, or the WithPercentile quantile). It is learnt only from windows
	// in which the gate was not saturated and from probes; a saturated
	// window never raises it (its RTT is queueing). Zero until measured.
	Floor time.Duration
	// FloorCount is the number of requests the floor is an average of (at
	// most a few hundred: it follows the latest); the floor is known to
	// about its spread over √FloorCount. Zero until measured.
	FloorCount int
	// FloorMean is the floor as a mean round-trip time, whatever the
	// statistic of RTT: the one to compare with AvgRTT, and the one
	// Little's law needs (see Knee).
	FloorMean time.Duration
	// Throughput is the service's throughput in completions per second:
	// the highest smoothed completion rate of the saturated windows of the
	// last second. Zero until the gate has been saturated.
	Throughput float64
	// Knee is Throughput times the mean floor (Little's law): the
	// concurrency at which the service is just saturated. Below it the
	// service idles for want of requests; above it they queue. Zero while
	// Floor or Throughput is unknown.
	Knee float64
	// Probing reports that the window was part of a probe of the floor: the
	// gate, not the algorithm, chose its limit, and ignores what Update
	// returns for it (see FloorProber).
	Probing bool
}

// Held is the concurrency the window held: its peak in flight, but no more
// than the limit it closed under. Requests admitted under an earlier, higher
// limit and still running when the window began do not count, so a limit
// that was just cut does not read as concurrency that was cut without
// making the RTT faster.
func (s Sample) Held() int { return min(s.MaxInFlight, s.Limit) }

// hot is the gate's admission word alone on a 64-byte cache line (allocated
// on its own: the allocator's 64-byte size class is 64-byte aligned), so that
// admission and release contend on nothing else.
type hot struct {
	state atomic.Uint64 // inFlight<<32 | limit: admission swaps both at once
	_     [56]byte
}

// nShards is the number of window accumulators. Releases spread over them so
// that concurrent releases rarely write the same cache line.
const (
	shardBits = 4
	nShards   = 1 << shardBits
)

// shard is one window accumulator, one cache line. Releases add to it
// concurrently; the goroutine that closes the window swaps all shards out. A
// sample that races with the swap may be counted in the next window instead.
type shard struct {
	acc         atomic.Uint64 // samples<<accSumBits | sum of their RTTs in ns
	min         atomic.Int64  // fastest RTT in ns; math.MaxInt64 when none
	max         atomic.Int64  // slowest RTT in ns
	maxInFlight atomic.Int64  // most in flight at once
	drops       atomic.Int64
	rejected    atomic.Int64
	_           [16]byte
}

type shards [nShards]shard

// of picks the calling goroutine's shard: Fibonacci hashing of an address on
// its stack, which is stable for the goroutine and differs between
// goroutines, so a goroutine keeps writing the same line and concurrent
// goroutines mostly write different ones.
func (ss *shards) of() *shard {
	var x byte
	return &ss[uint64(uintptr(unsafe.Pointer(&x))>>10)*0x9E3779B97F4A7C15>>(64-shardBits)]
}

func (ss *shards) reset() {
	for i := range ss {
		ss[i].min.Store(math.MaxInt64)
	}
}

// The sample count and the RTT sum share one word so that a sample costs one
// atomic add. A window closes early, whatever its length, once either half
// reaches its "full" mark, long before it could overflow.
const (
	accSumBits   = 42
	accSumMask   = 1<<accSumBits - 1
	accCountOne  = 1 << accSumBits
	accSumFull   = 1 << 41 // ns, about 37 minutes of summed RTT
	accCountFull = 1 << 21 // samples
	// maxMeanRTT caps one sample's contribution to the sum, so that even 32
	// racing samples cannot overflow it between "full" and the flush. Min,
	// max and percentiles see the exact value.
	maxMeanRTT = 1<<36 - 1 // about 68.7s
)

// add records one successful request's round-trip time and reports whether
// the shard is full and the window must close now.
func (h *shard) add(rtt int64, hist *histogram) (full bool) {
	rtt = max(rtt, 0)
	if rtt < h.min.Load() {
		atomicMin(&h.min, rtt)
	}
	if rtt > h.max.Load() {
		atomicMax(&h.max, rtt)
	}
	if hist != nil {
		hist.add(rtt)
	}
	a := h.acc.Add(accCountOne | uint64(min(rtt, maxMeanRTT)))
	return a&accSumMask >= accSumFull || a>>accSumBits >= accCountFull
}

// noteInFlight raises the window's maximum in-flight count to n.
func (h *shard) noteInFlight(n int64) {
	if n > h.maxInFlight.Load() {
		atomicMax(&h.maxInFlight, n)
	}
}

// full reports whether any shard is close enough to overflow that the window
// must close now.
func (ss *shards) full() bool {
	for i := range ss {
		a := ss[i].acc.Load()
		if a&accSumMask >= accSumFull || a>>accSumBits >= accCountFull {
			return true
		}
	}
	return false
}

// count returns the number of samples in the window so far.
func (ss *shards) count() int64 {
	var n int64
	for i := range ss {
		n += int64(ss[i].acc.Load() >> accSumBits)
	}
	return n
}

// slowest returns the slowest round-trip time in the window so far (0 when
// it has none).
func (ss *shards) slowest() int64 {
	var m int64
	for i := range ss {
		m = max(m, ss[i].max.Load())
	}
	return m
}

// drops returns the number of drops in the window so far.
func (ss *shards) drops() int64 {
	var n int64
	for i := range ss {
		n += ss[i].drops.Load()
	}
	return n
}

// take swaps the window's accumulators out and fills s with them. p is the
// percentile (0 for the mean); inFlight seeds the next window's maximum.
func (ss *shards) take(s *Sample, hist *histogram, p float64, inFlight int64) {
	var n, sum, maxIn int64
	minRTT, maxRTT := int64(math.MaxInt64), int64(0)
	for i := range ss {
		h := &ss[i]
		a := h.acc.Swap(0)
		n += int64(a >> accSumBits)
		sum += int64(a & accSumMask)
		minRTT = min(minRTT, h.min.Swap(math.MaxInt64))
		maxRTT = max(maxRTT, h.max.Swap(0))
		s.Dropped += int(h.drops.Swap(0))
		s.Rejected += int(h.rejected.Swap(0))
		seed := int64(0)
		if i == 0 {
			seed = inFlight
		}
		maxIn = max(maxIn, h.maxInFlight.Swap(seed))
	}
	s.Count = int(n)
	s.MaxInFlight = int(maxIn)
	var pct int64
	if hist != nil {
		pct = hist.takePercentile(p)
	}
	if n == 0 {
		return
	}
	avg := sum / n
	// A release racing the swap may leave its min/max/histogram entry in
	// the previous window and its count in this one: keep the figures
	// consistent (MinRTT ≤ AvgRTT ≤ MaxRTT, RTT > 0 when Count > 0).
	minRTT = min(minRTT, avg)
	maxRTT = max(maxRTT, avg)
	s.MinRTT = time.Duration(minRTT)
	s.MaxRTT = time.Duration(maxRTT)
	s.AvgRTT = time.Duration(avg)
	s.RTT = s.AvgRTT
	if hist != nil && pct > 0 {
		// The histogram's resolution is about 3%; keep the result within the
		// exact bounds seen in the window.
		s.RTT = time.Duration(min(max(pct, minRTT), maxRTT))
	}
}

func atomicMin(a *atomic.Int64, v int64) {
	for {
		old := a.Load()
		if v >= old || a.CompareAndSwap(old, v) {
			return
		}
	}
}

func atomicMax(a *atomic.Int64, v int64) {
	for {
		old := a.Load()
		if v <= old || a.CompareAndSwap(old, v) {
			return
		}
	}
}

// histogram is a log-linear histogram of durations in nanoseconds with 16
// buckets per power of two: values below 32 ns have a bucket each; above,
// a value v with bit length e+5 falls in bucket 16·e + (v >> e), so every
// bucket is at most 1/16 of its lower bound wide (relative error ≤ 3.1% at the
// bucket's midpoint). Values at or above 2^40 ns (about 18 minutes) share the
// last bucket.
type histogram struct {
	buckets [histBuckets]atomic.Int64
}

const (
	histSubBits = 4
	histMaxBits = 40
	histBuckets = (histMaxBits-histSubBits)<<histSubBits + 2<<histSubBits
)

func histIndex(v int64) int {
	if v < 2<<histSubBits {
		return int(max(v, 0))
	}
	if v >= 1<<histMaxBits {
		return histBuckets - 1
	}
	e := bits.Len64(uint64(v)) - histSubBits - 1
	return e<<histSubBits + int(v>>e)
}

// histLower returns the smallest value that falls in bucket i, and the
// bucket's width.
func histLower(i int) (lower, width int64) {
	if i < 2<<histSubBits {
		return int64(i), 1
	}
	e := i>>histSubBits - 1
	m := int64(i - e<<histSubBits)
	return m << e, 1 << e
}

func (h *histogram) add(v int64) { h.buckets[histIndex(v)].Add(1) }

// takePercentile empties the histogram and returns the p-quantile
// (0 < p < 1) of what it held, as the midpoint of the bucket where the
// quantile falls; 0 when it held nothing.
func (h *histogram) takePercentile(p float64) int64 {
	var counts [histBuckets]int64
	var total int64
	for i := range h.buckets {
		c := h.buckets[i].Swap(0)
		counts[i] = c
		total += c
	}
	if total == 0 {
		return 0
	}
	rank := int64(math.Ceil(p * float64(total)))
	rank = min(max(rank, 1), total)
	var seen int64
	for i, c := range counts {
		seen += c
		if seen >= rank {
			lo, w := histLower(i)
			return lo + w/2
		}
	}
	return 0 // unreachable: seen reaches total
}
