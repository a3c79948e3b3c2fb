package shed

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/sluicehq/sluice/clock"
)

// Throttle is the SRE book's adaptive client-side throttling: a client keeps,
// per priority and over a sliding window, how many requests it sent and how
// many the server accepted, and refuses locally with probability
//
//	p = max(0, (requests − K·accepts) / (requests + 1))
//
// so that once the server refuses most of what a client sends, the client
// stops sending it — without a round trip, and without load on the server.
// K (default 2) sets how much more than the accepted rate may still be sent.
// Safe for concurrent use.
type Throttle struct {
	mu      sync.Mutex
	clk     clock.Clock
	epoch   time.Time
	k       float64
	bucket  int64 // ns
	buckets int
	rnd     *rand.Rand
	// ring of per-bucket counts per priority; stamp is the bucket index each
	// slot holds
	req, acc [Priorities][]float64
	stamp    []int64
}

// ThrottleOption configures a Throttle.
type ThrottleOption func(*throttleConfig)

type throttleConfig struct {
	clock  clock.Clock
	k      float64
	window time.Duration
	seed   uint64
	seeded bool
}

// WithThrottleClock sets the clock (default clock.System()).
func WithThrottleClock(c clock.Clock) ThrottleOption { return func(t *throttleConfig) { t.clock = c } }

// WithThrottleK sets K, the multiple of the accepted rate still sent (default 2;
// at least 1).
func WithThrottleK(k float64) ThrottleOption { return func(t *throttleConfig) { t.k = k } }

// WithThrottleWindow sets the sliding window (default 10 s, kept in 20
// buckets). The SRE book's throttle remembers 2 minutes; sluice's shedder
// lets refused work back in within about 3 s of the overload ending (its
// Retry-After), and a client that remembered the overload for minutes would
// go on refusing locally, on an idle server, long after that. Ten seconds
// is about three of the shedder's relax times, and holds enough requests
// at modest rates to estimate the accepted share.
func WithThrottleWindow(d time.Duration) ThrottleOption {
	return func(t *throttleConfig) { t.window = d }
}

// WithThrottleSeed makes the local refusals reproducible (default: random).
func WithThrottleSeed(seed uint64) ThrottleOption {
	return func(t *throttleConfig) { t.seed, t.seeded = seed, true }
}

// NewThrottle returns a Throttle.
func NewThrottle(opts ...ThrottleOption) (*Throttle, error) {
	cfg := throttleConfig{clock: clock.System(), k: 2, window: 10 * time.Second}
	for _, o := range opts {
		if o != nil {
			o(&cfg)
		}
	}
	var errs []error
	if cfg.clock == nil {
		errs = append(errs, errors.New("sluice/shed: WithThrottleClock(nil)"))
	}
	if !(cfg.k >= 1 && cfg.k <= 100) {
		errs = append(errs, fmt.Errorf("sluice/shed: throttle K %v: must be in [1, 100]", cfg.k))
	}
	if cfg.window < 20*time.Millisecond {
		errs = append(errs, fmt.Errorf("sluice/shed: throttle window %v: must be at least 20ms", cfg.window))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	if !cfg.seeded {
		cfg.seed = rand.Uint64()
	}
	const n = 20
	t := &Throttle{
		clk: cfg.clock, epoch: cfg.clock.Now(), k: cfg.k,
		bucket: int64(cfg.window) / n, buckets: n,
		rnd:   rand.New(rand.NewPCG(cfg.seed, 0x5eed)),
		stamp: make([]int64, n),
	}
	for p := range t.req {
		t.req[p] = make([]float64, n)
		t.acc[p] = make([]float64, n)
	}
	for i := range t.stamp {
		t.stamp[i] = -1
	}
	return t, nil
}

// slot returns the ring index for now, clearing slots that fell out of the
// window. Requires t.mu held.
func (t *Throttle) slot() int {
	b := int64(clock.Since(t.clk, t.epoch)) / t.bucket
	i := int(b % int64(t.buckets))
	if t.stamp[i] != b {
		t.stamp[i] = b
		for p := range t.req {
			t.req[p][i], t.acc[p][i] = 0, 0
		}
	}
	return i
}

// RejectProbability returns the current local refusal probability for p,
// max(0, (requests − K·accepts)/(requests + 1)) over the window.
func (t *Throttle) RejectProbability(p Priority) float64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.probability(p)
}

// probability requires t.mu held.
func (t *Throttle) probability(p Priority) float64 {
	p = min(p, Priorities-1)
	t.slot()
	now := int64(clock.Since(t.clk, t.epoch)) / t.bucket
	var req, acc float64
	for i, s := range t.stamp {
		if s >= 0 && now-s < int64(t.buckets) {
			req += t.req[p][i]
			acc += t.acc[p][i]
		}
	}
	return max(0, (req-t.k*acc)/(req+1))
}

// Allow decides whether to send a request of priority p, and counts it as
// sent if so. A request refused here should fail at once (it is not sent).
func (t *Throttle) Allow(p Priority) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	p = min(p, Priorities-1)
	ok := t.rnd.Float64() >= t.probability(p) // from the history, before this request
	// Requests refused locally still count as requests: that is what keeps
	// the probability up while the server keeps refusing.
	t.req[p][t.slot()]++
	return ok
}

// Accepted records that the server accepted a request of priority p (any
// response that is not an overload refusal).
func (t *Throttle) Accepted(p Priority) {
	t.mu.Lock()
	defer t.mu.Unlock()
	p = min(p, Priorities-1)
	t.acc[p][t.slot()]++
}

// Budget caps retries at a share of requests: each request earns Ratio of a
// retry (up to Max saved), each retry spends one. It keeps no history of
// the server's answers, only what first attempts have earned, so an idle
// spell after an overload never refuses a first attempt; retries come back
// as new requests earn them. Safe for concurrent use.
type Budget struct {
	mu     sync.Mutex
	ratio  float64
	max    float64
	tokens float64
}

// NewBudget returns a retry budget of ratio (e.g. 0.1: retries ≤ 10% of
// requests), saving at most max retries; ratio in (0, 1], max ≥ 1.
func NewBudget(ratio, max float64) (*Budget, error) {
	if !(ratio > 0 && ratio <= 1) || !(max >= 1) {
		return nil, fmt.Errorf("sluice/shed: budget ratio %v, max %v: need 0 < ratio ≤ 1 and max ≥ 1", ratio, max)
	}
	return &Budget{ratio: ratio, max: max}, nil
}

// Request records a first attempt, earning ratio of a retry.
func (b *Budget) Request() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.tokens = min(b.tokens+b.ratio, b.max)
}

// TryRetry spends one retry if the budget has one.
func (b *Budget) TryRetry() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.tokens < 1 {
		return false
	}
	b.tokens--
	return true
}

// Backoff is capped exponential backoff with full jitter: attempt k (1 for
// the first retry) waits
//
//	U(0, min(Max, Base·2^(k−1)))
//
// but never less than the server's retry-after hint, and never zero.
type Backoff struct {
	Base time.Duration
	Max  time.Duration
}

// Delay returns the wait before retry attempt k given the server's
// retry-after hint (0 if none) and u, a uniform random number in [0, 1).
func (b Backoff) Delay(k int, retryAfter time.Duration, u float64) time.Duration {
	ceil := float64(b.Base) * math.Pow(2, float64(max(k, 1)-1))
	if b.Max > 0 {
		ceil = min(ceil, float64(b.Max))
	}
	return max(time.Duration(u*ceil), retryAfter, time.Nanosecond)
}
