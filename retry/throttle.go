package retry

import (
	"errors"
	"fmt"
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
//
// P is the caller's priority type, a small integer where 0 is the most
// important (sluice's is shed.Priority, the SRE book's criticality ladder);
// the throttle keeps separate accounts for the priorities 0 … classes−1
// (WithThrottleClasses, default 4) and counts any higher one as the last.
// Safe for concurrent use.
type Throttle[P ~uint8] struct {
	mu      sync.Mutex
	clk     clock.Clock
	epoch   time.Time
	k       float64
	bucket  int64 // ns
	buckets int
	rnd     *rand.Rand
	// ring of per-bucket counts per priority; stamp is the bucket index each
	// slot holds
	req, acc [][]float64
	stamp    []int64
}

// ThrottleOption configures a Throttle.
type ThrottleOption func(*throttleConfig)

type throttleConfig struct {
	clock   clock.Clock
	k       float64
	window  time.Duration
	seed    uint64
	seeded  bool
	classes int
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

// WithThrottleClasses sets how many priorities, 0 … n−1, keep accounts of
// their own; higher priorities share the last one's (default 4, the rungs of
// the SRE book's criticality ladder; n in [1, 256]).
func WithThrottleClasses(n int) ThrottleOption {
	return func(t *throttleConfig) { t.classes = n }
}

// defaultClasses is the number of priorities a Throttle keeps accounts for
// unless WithThrottleClasses says otherwise.
const defaultClasses = 4

// NewThrottle returns a Throttle for priorities of type P, or an error
// naming every invalid option.
func NewThrottle[P ~uint8](opts ...ThrottleOption) (*Throttle[P], error) {
	cfg := throttleConfig{clock: clock.System(), k: 2, window: 10 * time.Second, classes: defaultClasses}
	for _, o := range opts {
		if o != nil {
			o(&cfg)
		}
	}
	var errs []error
	if cfg.clock == nil {
		errs = append(errs, errors.New("sluice/retry: WithThrottleClock(nil)"))
	}
	if !(cfg.k >= 1 && cfg.k <= 100) {
		errs = append(errs, fmt.Errorf("sluice/retry: throttle K %v: must be in [1, 100]", cfg.k))
	}
	if cfg.window < 20*time.Millisecond {
		errs = append(errs, fmt.Errorf("sluice/retry: throttle window %v: must be at least 20ms", cfg.window))
	}
	if cfg.classes < 1 || cfg.classes > 256 {
		errs = append(errs, fmt.Errorf("sluice/retry: throttle classes %d: must be in [1, 256]", cfg.classes))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	if !cfg.seeded {
		cfg.seed = rand.Uint64()
	}
	const n = 20
	t := &Throttle[P]{
		clk: cfg.clock, epoch: cfg.clock.Now(), k: cfg.k,
		bucket: int64(cfg.window) / n, buckets: n,
		rnd:   rand.New(rand.NewPCG(cfg.seed, 0x5eed)),
		req:   make([][]float64, cfg.classes),
		acc:   make([][]float64, cfg.classes),
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

// class returns the accounts' index of priority p.
func (t *Throttle[P]) class(p P) int { return min(int(p), len(t.req)-1) }

// slot returns the ring index for now, clearing slots that fell out of the
// window. Requires t.mu held.
func (t *Throttle[P]) slot() int {
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
func (t *Throttle[P]) RejectProbability(p P) float64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.probability(t.class(p))
}

// probability requires t.mu held.
func (t *Throttle[P]) probability(c int) float64 {
	t.slot()
	now := int64(clock.Since(t.clk, t.epoch)) / t.bucket
	var req, acc float64
	for i, s := range t.stamp {
		if s >= 0 && now-s < int64(t.buckets) {
			req += t.req[c][i]
			acc += t.acc[c][i]
		}
	}
	return max(0, (req-t.k*acc)/(req+1))
}

// Allow decides whether to send a request of priority p, and counts it as a
// request either way. A request refused here should fail at once (it is not
// sent).
func (t *Throttle[P]) Allow(p P) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	c := t.class(p)
	ok := t.rnd.Float64() >= t.probability(c) // from the history, before this request
	// Requests refused locally still count as requests: that is what keeps
	// the probability up while the server keeps refusing.
	t.req[c][t.slot()]++
	return ok
}

// Accepted records that the server accepted a request of priority p (any
// response that is not an overload refusal).
func (t *Throttle[P]) Accepted(p P) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.acc[t.class(p)][t.slot()]++
}
