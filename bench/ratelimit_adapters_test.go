package bench

// Adapters for the keyed rate-limiter benchmark (ratelimit_bench_test.go):
// sluice's ratelimit package and its peers behind one small interface, each
// with its own serial and parallel loops so that the hot loop calls the
// limiter directly (a method value or interface call in the loop would add
// the same couple of nanoseconds to everyone and flatten the ratios).

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	sethvargo "github.com/sethvargo/go-limiter"
	"github.com/sethvargo/go-limiter/memorystore"
	"github.com/throttled/throttled/v2"
	"github.com/throttled/throttled/v2/store/memstore"
	ulule "github.com/ulule/limiter/v3"
	ululemem "github.com/ulule/limiter/v3/drivers/store/memory"
	uber "go.uber.org/ratelimit"
	"golang.org/x/time/rate"

	"github.com/sluicehq/sluice/clock"
	"github.com/sluicehq/sluice/ratelimit"
)

// The benchmark's limit, the same for every keyed limiter: 2^30 per 2^30
// seconds (34 years), that is a burst of 2^30 refilled at one per second.
// Nothing a benchmark run does comes near the burst, so every decision
// admits and every implementation does the same work (look the key up,
// update its state, admit). And the refill is slow: a key's state never
// returns to a fresh key's between two visits (a bucket refilled at 2^30
// per hour is full again 3.4 µs after a request, and sluice's store drops
// keys whose state is a fresh key's, so at 100k keys it would be measuring
// re-insertions), and no calendar window turns over during a run.
const (
	rlRate   = 1 << 30
	rlPeriod = (1 << 30) * time.Second
)

// outcome is a decision: admitted, refused, or failed (an error).
type outcome uint8

const (
	admitted outcome = iota
	refused
	failed
)

// tally counts the decisions of a run that did not admit.
type tally struct{ refused, failed int64 }

func (t *tally) add(o outcome) {
	switch o {
	case refused:
		t.refused++
	case failed:
		t.failed++
	}
}

// keyed is one keyed rate limiter under test.
type keyed interface {
	// allow decides one request for key.
	allow(key string) outcome
	// serial runs b.Loop on one goroutine, cycling through keys, and
	// counts the decisions that did not admit.
	serial(b *testing.B, keys []string) tally
	// parallel runs b.RunParallel, each goroutine cycling through keys from
	// its own offset, and counts the decisions that did not admit.
	parallel(b *testing.B, keys []string) tally
	// run decides one request for each of keys, in order, and counts the
	// decisions that did not admit (TestRateCompare's timed loop).
	run(keys []string) tally
	// storedKeyLen is the length of the string the limiter keeps for key
	// (ulule keeps a prefixed copy), for the bytes-per-key measurement.
	storedKeyLen(key string) int
	// close releases background goroutines, if the limiter has any.
	close()
}

// rlImpl is a named constructor of a keyed limiter admitting n per period
// (with a burst of n). keyless implementations (uber) ignore the limit and
// are only run with one key.
type rlImpl struct {
	name    string
	keyless bool
	new     func(tb testing.TB, n int, per time.Duration) keyed
}

// rlSluiceAlgorithms are the constant-state algorithms. SlidingLog is left
// out: its Rate is at most ratelimit.MaxLogRate (65536), so a one-key run
// would be refusing within a millisecond, and its state grows with the
// units admitted.
var rlSluiceAlgorithms = []ratelimit.Algorithm{
	ratelimit.TokenBucket, ratelimit.GCRA, ratelimit.FixedWindow, ratelimit.SlidingWindow,
}

// rlImpls returns every implementation, sluice's algorithms first.
func rlImpls() []rlImpl {
	var impls []rlImpl
	for _, alg := range rlSluiceAlgorithms {
		impls = append(impls, rlImpl{name: "sluice." + alg.String(), new: func(tb testing.TB, n int, per time.Duration) keyed {
			return newSluiceKeyed(tb, alg, ratelimit.Limit{Rate: n, Period: per})
		}})
	}
	// The same two buckets on a coarse clock (clock.Coarse, refreshed every
	// millisecond): one atomic load per decision instead of a monotonic
	// clock read.
	for _, alg := range []ratelimit.Algorithm{ratelimit.TokenBucket, ratelimit.GCRA} {
		impls = append(impls, rlImpl{name: "sluice." + alg.String() + "+coarse", new: func(tb testing.TB, n int, per time.Duration) keyed {
			c, err := clock.NewCoarse(time.Millisecond)
			if err != nil {
				tb.Fatalf("clock.NewCoarse: %v", err)
			}
			k := newSluiceKeyed(tb, alg, ratelimit.Limit{Rate: n, Period: per}, ratelimit.WithClock(c))
			k.stop = c.Stop
			return k
		}})
	}
	// Take, which returns the 32-byte Decision instead of a Result, on the
	// system clock and on the coarse one.
	impls = append(impls,
		rlImpl{name: "sluice.token_bucket.take", new: func(tb testing.TB, n int, per time.Duration) keyed {
			return sluiceTakeKeyed{newSluiceKeyed(tb, ratelimit.TokenBucket, ratelimit.Limit{Rate: n, Period: per})}
		}},
		rlImpl{name: "sluice.token_bucket.take+coarse", new: func(tb testing.TB, n int, per time.Duration) keyed {
			c, err := clock.NewCoarse(time.Millisecond)
			if err != nil {
				tb.Fatalf("clock.NewCoarse: %v", err)
			}
			k := newSluiceKeyed(tb, ratelimit.TokenBucket, ratelimit.Limit{Rate: n, Period: per}, ratelimit.WithClock(c))
			k.stop = c.Stop
			return sluiceTakeKeyed{k}
		}},
	)
	return append(impls,
		rlImpl{name: "sethvargo", new: func(tb testing.TB, n int, per time.Duration) keyed { return newSethvargo(tb, uint64(n), per) }},
		rlImpl{name: "xtime", new: func(_ testing.TB, n int, per time.Duration) keyed { return newXTime(n, per) }},
		rlImpl{name: "throttled", new: func(tb testing.TB, n int, per time.Duration) keyed { return newThrottled(tb, n, per) }},
		rlImpl{name: "ulule", new: func(_ testing.TB, n int, per time.Duration) keyed { return newUlule(n, per) }},
		rlImpl{name: "uber", keyless: true, new: func(testing.TB, int, time.Duration) keyed { return newUber() }},
	)
}

// allower is what the shared benchmark loops call: one decision for a key.
type allower interface{ allow(key string) outcome }

// rlSerial runs b.Loop on one goroutine, cycling through keys, and counts
// the decisions of l that did not admit. It is generic so that every
// implementation's allow is called the same way (one dictionary call).
func rlSerial[L allower](b *testing.B, l L, keys []string) tally {
	var c tally
	i := 0
	for b.Loop() {
		if o := l.allow(keys[i]); o != admitted {
			c.add(o)
		}
		if i++; i == len(keys) {
			i = 0
		}
	}
	return c
}

// rlParallel runs b.RunParallel, each goroutine cycling through keys from
// its own offset (rlStart), and counts the decisions of l that did not
// admit.
func rlParallel[L allower](b *testing.B, l L, keys []string) tally {
	var seq atomic.Uint64
	var mu sync.Mutex
	var total tally
	b.RunParallel(func(pb *testing.PB) {
		var c tally
		i := rlStart(&seq, len(keys))
		for pb.Next() {
			if o := l.allow(keys[i]); o != admitted {
				c.add(o)
			}
			if i++; i == len(keys) {
				i = 0
			}
		}
		mu.Lock()
		total.refused += c.refused
		total.failed += c.failed
		mu.Unlock()
	})
	return total
}

// rlRun decides one request of l for each of keys, in order, and counts
// the decisions that did not admit.
func rlRun[L allower](l L, keys []string) tally {
	var c tally
	for _, k := range keys {
		if o := l.allow(k); o != admitted {
			c.add(o)
		}
	}
	return c
}

// rlStart is a parallel goroutine's first key index: spread over the keys so
// that goroutines do not walk in lockstep.
func rlStart(seq *atomic.Uint64, n int) int { return int(seq.Add(7919) % uint64(n)) }

// rlKeys returns n distinct keys and an equal copy whose strings do not
// share their bytes with the first (strings.Clone), so that a limiter that
// stored the first copy cannot find the second by pointer equality and must
// compare the bytes, as it would for keys read from requests.
func rlKeys(n int) (stored, lookup []string) {
	stored = make([]string, n)
	lookup = make([]string, n)
	for i := range stored {
		stored[i] = "user:" + strconv.Itoa(i)
		lookup[i] = strings.Clone(stored[i])
	}
	return stored, lookup
}

// ---- sluice ----

type sluiceKeyed struct {
	l    *ratelimit.Limiter
	ctx  context.Context
	stop func() // stops the limiter's clock, if it has one to stop
}

func newSluiceKeyed(tb testing.TB, alg ratelimit.Algorithm, lim ratelimit.Limit, opts ...ratelimit.Option) sluiceKeyed {
	tb.Helper()
	l, err := ratelimit.New(alg, lim, opts...)
	if err != nil {
		tb.Fatalf("ratelimit.New: %v", err)
	}
	return sluiceKeyed{l: l, ctx: context.Background()}
}

func (s sluiceKeyed) allow(key string) outcome {
	res, err := s.l.Allow(s.ctx, key)
	switch {
	case err != nil:
		return failed
	case !res.Allowed:
		return refused
	}
	return admitted
}

func (s sluiceKeyed) serial(b *testing.B, keys []string) tally   { return rlSerial(b, s, keys) }
func (s sluiceKeyed) parallel(b *testing.B, keys []string) tally { return rlParallel(b, s, keys) }
func (s sluiceKeyed) run(keys []string) tally                    { return rlRun(s, keys) }

// storedKeyLen: sluice keeps a key of up to 12 bytes inside its slot (no
// string), a longer one in its shard's byte arena.
func (sluiceKeyed) storedKeyLen(key string) int {
	if len(key) <= 12 {
		return 0
	}
	return len(key)
}
func (s sluiceKeyed) close() {
	if s.stop != nil {
		s.stop()
	}
}

// sluiceTakeKeyed decides with Limiter.Take (a Decision) instead of Allow
// (a Result).
type sluiceTakeKeyed struct{ sluiceKeyed }

func (s sluiceTakeKeyed) allow(key string) outcome {
	d, err := s.l.Take(s.ctx, key, 1)
	switch {
	case err != nil:
		return failed
	case !d.Allowed():
		return refused
	}
	return admitted
}

func (s sluiceTakeKeyed) serial(b *testing.B, keys []string) tally   { return rlSerial(b, s, keys) }
func (s sluiceTakeKeyed) parallel(b *testing.B, keys []string) tally { return rlParallel(b, s, keys) }
func (s sluiceTakeKeyed) run(keys []string) tally                    { return rlRun(s, keys) }

// ---- sethvargo/go-limiter, memorystore ----

// sethvargoKeyed is go-limiter's in-memory store, a token bucket per key in
// a map under one RWMutex plus a mutex per bucket. Take is called through
// the limiter.Store interface that memorystore.New returns.
type sethvargoKeyed struct {
	s   sethvargo.Store
	ctx context.Context
}

func newSethvargo(tb testing.TB, tokens uint64, interval time.Duration) sethvargoKeyed {
	tb.Helper()
	s, err := memorystore.New(&memorystore.Config{Tokens: tokens, Interval: interval})
	if err != nil {
		tb.Fatalf("memorystore.New: %v", err)
	}
	return sethvargoKeyed{s: s, ctx: context.Background()}
}

func (s sethvargoKeyed) allow(key string) outcome {
	_, _, _, ok, err := s.s.Take(s.ctx, key)
	switch {
	case err != nil:
		return failed
	case !ok:
		return refused
	}
	return admitted
}

func (s sethvargoKeyed) serial(b *testing.B, keys []string) tally   { return rlSerial(b, s, keys) }
func (s sethvargoKeyed) parallel(b *testing.B, keys []string) tally { return rlParallel(b, s, keys) }
func (s sethvargoKeyed) run(keys []string) tally                    { return rlRun(s, keys) }

func (sethvargoKeyed) storedKeyLen(key string) int { return len(key) }

// close stops the store's sweeper goroutine (and empties the store).
func (s sethvargoKeyed) close() { _ = s.s.Close(context.Background()) }

// ---- golang.org/x/time/rate in a sync.Map ----

// xtimeKeyed is the usual hand-rolled keyed limiter: a *rate.Limiter per
// key in a sync.Map, found with Load and created with LoadOrStore only when
// Load misses (so a held key allocates no limiter).
type xtimeKeyed struct {
	m     *sync.Map
	limit rate.Limit
	burst int
}

func newXTime(n int, per time.Duration) xtimeKeyed {
	return xtimeKeyed{m: new(sync.Map), limit: rate.Limit(float64(n) / per.Seconds()), burst: n}
}

func (x xtimeKeyed) allow(key string) outcome {
	v, ok := x.m.Load(key)
	if !ok {
		v, _ = x.m.LoadOrStore(key, rate.NewLimiter(x.limit, x.burst))
	}
	if !v.(*rate.Limiter).Allow() {
		return refused
	}
	return admitted
}

func (x xtimeKeyed) serial(b *testing.B, keys []string) tally   { return rlSerial(b, x, keys) }
func (x xtimeKeyed) parallel(b *testing.B, keys []string) tally { return rlParallel(b, x, keys) }
func (x xtimeKeyed) run(keys []string) tally                    { return rlRun(x, keys) }

func (xtimeKeyed) storedKeyLen(key string) int { return len(key) }
func (xtimeKeyed) close()                      {}

// ---- throttled/v2, memstore + GCRA ----

// throttledKeyed is throttled's GCRARateLimiterCtx on its memstore without
// an LRU bound (memstore.NewCtx(0): a map[string]*int64 under one RWMutex;
// with maxKeys > 0 it uses hashicorp/golang-lru, whose Get takes an
// exclusive lock). Each decision is GetWithTime then CompareAndSwapWithTTL,
// retried on a lost CAS (at most 10 times, then an error).
type throttledKeyed struct {
	l   *throttled.GCRARateLimiterCtx
	ctx context.Context
}

func newThrottled(tb testing.TB, n int, per time.Duration) throttledKeyed {
	tb.Helper()
	st, err := memstore.NewCtx(0)
	if err != nil {
		tb.Fatalf("memstore.NewCtx: %v", err)
	}
	// throttled admits MaxBurst+1 at once and one per MaxRate period.
	l, err := throttled.NewGCRARateLimiterCtx(st, throttled.RateQuota{MaxRate: throttled.PerDuration(n, per), MaxBurst: n - 1})
	if err != nil {
		tb.Fatalf("throttled.NewGCRARateLimiterCtx: %v", err)
	}
	return throttledKeyed{l: l, ctx: context.Background()}
}

func (t throttledKeyed) allow(key string) outcome {
	limited, _, err := t.l.RateLimitCtx(t.ctx, key, 1)
	switch {
	case err != nil:
		return failed
	case limited:
		return refused
	}
	return admitted
}

func (t throttledKeyed) serial(b *testing.B, keys []string) tally   { return rlSerial(b, t, keys) }
func (t throttledKeyed) parallel(b *testing.B, keys []string) tally { return rlParallel(b, t, keys) }
func (t throttledKeyed) run(keys []string) tally                    { return rlRun(t, keys) }

func (throttledKeyed) storedKeyLen(key string) int { return len(key) }
func (throttledKeyed) close()                      {}

// ---- ulule/limiter v3, memory store ----

// ululeKeyed is ulule/limiter's Limiter.Get on its memory store, a fixed
// window counter per key in a sync.Map. The store prefixes every key
// ("limiter:" + key, built with a strings.Builder on every call, which is
// its allocation per decision) and returns a limiter.Context struct.
type ululeKeyed struct {
	l   *ulule.Limiter
	ctx context.Context
}

func newUlule(n int, per time.Duration) ululeKeyed {
	// NewStore: default prefix "limiter" and a cleaner goroutine every 30 s
	// (stopped by a finalizer when the store is collected).
	return ululeKeyed{l: ulule.New(ululemem.NewStore(), ulule.Rate{Period: per, Limit: int64(n)}), ctx: context.Background()}
}

func (u ululeKeyed) allow(key string) outcome {
	c, err := u.l.Get(u.ctx, key)
	switch {
	case err != nil:
		return failed
	case c.Reached:
		return refused
	}
	return admitted
}

func (u ululeKeyed) serial(b *testing.B, keys []string) tally   { return rlSerial(b, u, keys) }
func (u ululeKeyed) parallel(b *testing.B, keys []string) tally { return rlParallel(b, u, keys) }
func (u ululeKeyed) run(keys []string) tally                    { return rlRun(u, keys) }

// storedKeyLen: the store keeps "limiter:" + key.
func (ululeKeyed) storedKeyLen(key string) int { return len(ulule.DefaultPrefix) + 1 + len(key) }
func (ululeKeyed) close()                      {}

// ---- go.uber.org/ratelimit ----

// uberKeyed is uber-go/ratelimit, a single unkeyed limiter (one atomic
// int64 and a CAS loop) whose Take blocks until the next slot: the key is
// ignored. It runs at 10^9 per second (1 ns per Take) with a slack of 1000
// (up to 1 µs of unused permits carried over). Its Take reads the clock
// before it loads the state, so under contention a goroutine can find a
// slot issued after its own clock reading and sleep for the difference:
// with the default slack of 10 (or WithoutSlack) that happened on 2–3% of
// the parallel Takes here, and each sleep also took that goroutine out of
// the contention, flattering ns/op; with 1000 it is a few in 100,000.
// sleepClock counts the sleeps, reported as sleeps/op.
type uberKeyed struct {
	l     uber.Limiter
	clock *sleepClock
}

// uberRate is uber's rate per second: the largest that still has a
// non-zero interval (1 ns) between permits.
const uberRate = 1_000_000_000

// uberSlack is how many unused permits uber's limiter carries over.
const uberSlack = 1000

func newUber() uberKeyed {
	c := new(sleepClock)
	return uberKeyed{l: uber.New(uberRate, uber.WithClock(c), uber.WithSlack(uberSlack)), clock: c}
}

// sleepClock is what uber's default clock does (time.Now, time.Sleep),
// plus a count of the sleeps.
type sleepClock struct{ sleeps atomic.Int64 }

func (*sleepClock) Now() time.Time { return time.Now() }

func (c *sleepClock) Sleep(d time.Duration) {
	c.sleeps.Add(1)
	time.Sleep(d)
}

func (u uberKeyed) allow(string) outcome {
	u.l.Take()
	return admitted
}

func (u uberKeyed) serial(b *testing.B, keys []string) tally {
	i := 0
	for b.Loop() {
		u.l.Take()
		if i++; i == len(keys) {
			i = 0
		}
	}
	return tally{}
}

func (u uberKeyed) parallel(b *testing.B, keys []string) tally {
	var seq atomic.Uint64
	b.RunParallel(func(pb *testing.PB) {
		i := rlStart(&seq, len(keys))
		for pb.Next() {
			u.l.Take()
			if i++; i == len(keys) {
				i = 0
			}
		}
	})
	return tally{}
}

func (uberKeyed) storedKeyLen(string) int { return 0 }
func (uberKeyed) close()                  {}

func (u uberKeyed) run(keys []string) tally {
	for range keys {
		u.l.Take()
	}
	return tally{}
}
