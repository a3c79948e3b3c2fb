package ratelimit

import (
	"errors"
	"fmt"
	"math"
	"math/bits"
	"time"
)

// Algorithm is the way a limit counts. The five differ in what they keep per
// key and in what they admit at the edges of a period; all of them admit on
// average at most Rate units per Period.
type Algorithm uint8

const (
	// FixedWindow counts the units admitted in each calendar window of
	// length Period, aligned to the Unix epoch of the limiter's clock (a
	// 100-per-minute window resets at every minute), and admits while the
	// count stays at most Rate. State: a window number and a count. At a
	// window boundary it admits up to 2·Rate within a moment.
	FixedWindow Algorithm = iota + 1
	// SlidingLog remembers the instant of every admitted unit and admits
	// while the units of the last Period (the half-open interval
	// (now−Period, now]) stay at most Rate: exact in every rolling window.
	// State: one 8-byte timestamp per unit admitted in the last Period, so at
	// most 8·Rate bytes per key; Rate may be at most MaxLogRate.
	SlidingLog
	// SlidingWindow keeps two counters, for the current calendar window
	// and the one before, and estimates the units of the last Period as the
	// previous count weighted by its overlap with the rolling window plus the
	// current count (Cloudflare's sliding window counter). State: a window
	// number and two counts. Rate may be at most MaxWindowRate.
	SlidingWindow
	// TokenBucket holds up to Burst tokens and refills at Rate per Period; a
	// request of cost n takes n tokens or is refused. State: the tokens
	// missing from a full bucket and the instant they were counted.
	TokenBucket
	// GCRA is the generic cell rate algorithm, the leaky bucket as a meter.
	// State: one timestamp, the theoretical arrival time (TAT), kept exactly
	// (in nanoseconds plus a fraction). With emission interval
	// T = Period/Rate and tolerance τ = (Burst−1)·T it admits exactly what
	// TokenBucket admits for the same Limit, as long as time does not read
	// earlier than a key's last decision; when it does, GCRA is the
	// stricter (see Policy.Decide).
	GCRA
)

var algorithmNames = [...]string{"", "fixed_window", "sliding_log", "sliding_window", "token_bucket", "gcra"}

// String returns the algorithm's name in snake case, fit for a metric label.
func (a Algorithm) String() string {
	if a >= FixedWindow && a <= GCRA {
		return algorithmNames[a]
	}
	return fmt.Sprintf("Algorithm(%d)", uint8(a))
}

// reserves reports whether the algorithm supports Reserve and Wait (the
// leaky bucket as a queue): only the buckets can lend against the future.
func (a Algorithm) reserves() bool { return a == TokenBucket || a == GCRA }

// Bounds of a Limit.
const (
	// MaxPeriod is the longest Period: about 36.5 years, which keeps every
	// instant the algorithms compute within int64 nanoseconds until 2190.
	MaxPeriod = time.Duration(1 << 60)
	// MaxWindowRate is the largest Rate of a SlidingWindow, whose two counts
	// share one 64-bit word.
	MaxWindowRate = math.MaxUint32
	// MaxLogRate is the largest Rate of a SlidingLog (8 bytes per unit
	// admitted in the last Period: at most 512 KiB per key).
	MaxLogRate = 1 << 16
)

// maxUnits bounds the buckets' arithmetic: a bucket's capacity in units
// (Burst·Period/g, see Policy) and any debt reservations run up stay below
// it, so no sum of two of them overflows an int64.
const maxUnits = 1 << 61

// Limit is a rate: at most Rate units per Period, on average and, for the
// window algorithms, per window.
//
// Burst is how many units a bucket (TokenBucket, GCRA) admits at once after
// being idle: its capacity. Zero means the default, Burst = Rate. The window
// algorithms (FixedWindow, SlidingWindow, SlidingLog) have no separate burst:
// their Burst must be 0 or equal to Rate. A request may cost at most Burst
// units; a larger one could never be admitted and is an error.
type Limit struct {
	Rate   int
	Period time.Duration
	Burst  int
}

// String returns the limit as "rate/period burst b", e.g. "100/1s burst 500".
func (l Limit) String() string {
	return fmt.Sprintf("%d/%v burst %d", l.Rate, l.Period, l.Burst)
}

// A Policy is an algorithm and a validated Limit, with Burst filled in: what
// a Store needs to decide for one key. Policies are comparable values; two
// equal policies count the same way.
//
// For the buckets, the rate is reduced by g = gcd(Rate, Period in ns): a
// bucket of capacity Burst is kept as Burst·Period/g units, refilled by
// Rate/g units per nanosecond and emptied by Period/g units per token. All
// arithmetic is exact integer arithmetic on these numbers.
type Policy struct {
	alg    Algorithm
	rate   int64 // Rate
	period int64 // Period, ns
	burst  int64 // Burst (filled in)
	r      int64 // buckets: units refilled per ns, Rate/g
	p      int64 // buckets: units per token, Period/g
	cap    int64 // buckets: capacity in units, Burst·p

	// The reciprocals of the divisors of the hot path (see divisor):
	// Period for the windows, r and p for the buckets.
	dPeriod divisor
	dR, dP  divisor
}

// NewPolicy validates lim for alg and returns the Policy, or an error that
// names every problem with it.
func NewPolicy(alg Algorithm, lim Limit) (Policy, error) {
	var errs []error
	bad := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("sluice/ratelimit: "+format, args...))
	}
	if alg < FixedWindow || alg > GCRA {
		bad("unknown algorithm %v", alg)
	}
	if lim.Rate <= 0 {
		bad("rate %d: must be positive", lim.Rate)
	}
	if lim.Period <= 0 {
		bad("period %v: must be positive", lim.Period)
	} else if lim.Period > MaxPeriod {
		bad("period %v: must be at most %v", lim.Period, MaxPeriod)
	}
	if lim.Burst < 0 {
		bad("burst %d: must not be negative (0 means the default, Rate)", lim.Burst)
	}
	burst := lim.Burst
	if burst == 0 {
		burst = lim.Rate
	}
	switch alg {
	case FixedWindow, SlidingWindow, SlidingLog:
		if lim.Burst != 0 && lim.Burst != lim.Rate && lim.Rate > 0 {
			bad("%v has no separate burst: burst %d must be 0 or equal to rate %d", alg, lim.Burst, lim.Rate)
		}
	}
	switch {
	case alg == SlidingWindow && int64(lim.Rate) > MaxWindowRate:
		bad("rate %d: a sliding window counts at most %d per window", lim.Rate, int64(MaxWindowRate))
	case alg == SlidingLog && lim.Rate > MaxLogRate:
		bad("rate %d: a sliding log keeps at most %d timestamps per key; use SlidingWindow for large limits", lim.Rate, MaxLogRate)
	}
	if len(errs) > 0 {
		return Policy{}, errors.Join(errs...)
	}
	p := Policy{alg: alg, rate: int64(lim.Rate), period: int64(lim.Period), burst: int64(burst)}
	p.dPeriod = newDivisor(uint64(p.period))
	if alg.reserves() {
		g := gcd(p.rate, p.period)
		p.r, p.p = p.rate/g, p.period/g
		hi, lo := bits.Mul64(uint64(p.burst), uint64(p.p))
		if hi != 0 || lo >= maxUnits {
			return Policy{}, fmt.Errorf("sluice/ratelimit: %v %v: the bucket is too large to count exactly: burst·period/gcd(rate, period in ns) must be below 2^61", alg, lim)
		}
		p.cap = int64(lo)
		p.dR, p.dP = newDivisor(uint64(p.r)), newDivisor(uint64(p.p))
	}
	return p, nil
}

// Algorithm returns the policy's algorithm.
func (p Policy) Algorithm() Algorithm { return p.alg }

// Limit returns the policy's limit, with Burst filled in.
func (p Policy) Limit() Limit {
	return Limit{Rate: int(p.rate), Period: time.Duration(p.period), Burst: int(p.burst)}
}

// Units returns the bucket arithmetic of a TokenBucket or GCRA policy:
// capacity in units, units refilled per nanosecond and units per token
// (zeros for the window algorithms). A store that keeps bucket state
// elsewhere (a Redis script) does its arithmetic in these numbers.
func (p Policy) Units() (capacity, perNanosecond, perToken int64) { return p.cap, p.r, p.p }

// String returns e.g. "token_bucket 100/1s burst 500".
func (p Policy) String() string { return p.alg.String() + " " + p.Limit().String() }

func gcd(a, b int64) int64 {
	for b != 0 {
		a, b = b, a%b
	}
	return a
}
