package ratelimit

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice/clock"
	"github.com/sluicehq/sluice/metrics"
)

// opaqueStore hides a MemoryStore behind the Store interface, so that a
// Limiter on it takes the generic path any other store takes.
type opaqueStore struct{ m *MemoryStore }

func (s opaqueStore) Apply(ctx context.Context, now time.Time, reqs []Request) error {
	return s.m.Apply(ctx, now, reqs)
}

// backend builds limiters on one kind of store.
type backend struct {
	name string
	opts func(t testing.TB) []Option
}

var backends = []backend{
	{"memory", func(testing.TB) []Option { return nil }},
	{"store", func(t testing.TB) []Option {
		m, err := NewMemoryStore(1000)
		if err != nil {
			t.Fatal(err)
		}
		return []Option{WithStore(opaqueStore{m})}
	}},
}

func mustNew(t testing.TB, alg Algorithm, lim Limit, opts ...Option) *Limiter {
	t.Helper()
	l, err := New(alg, lim, opts...)
	if err != nil {
		t.Fatalf("New(%v, %v): %v", alg, lim, err)
	}
	return l
}

// conformance is a behaviour every algorithm has, on every store.
type conformance struct {
	name string
	run  func(t *testing.T, alg Algorithm, newLim func(lim Limit, opts ...Option) (*Limiter, *clock.Manual))
}

var conformanceTests = []conformance{
	{"admits the burst then refuses", func(t *testing.T, alg Algorithm, newLim func(Limit, ...Option) (*Limiter, *clock.Manual)) {
		l, _ := newLim(Limit{Rate: 5, Period: time.Second})
		ctx := context.Background()
		for i := range 5 {
			res, err := l.Allow(ctx, "k")
			if err != nil || !res.Allowed || res.Remaining != 4-i || res.Limit != 5 || res.RetryAfter != 0 || res.ResetAfter <= 0 {
				t.Fatalf("request %d: %+v, %v", i, res, err)
			}
		}
		res, err := l.Allow(ctx, "k")
		if err != nil || res.Allowed || res.Remaining != 0 || res.Limit != 5 || res.RetryAfter <= 0 || res.ResetAfter < res.RetryAfter {
			t.Fatalf("sixth: %+v, %v", res, err)
		}
	}},
	{"admits exactly at RetryAfter", func(t *testing.T, alg Algorithm, newLim func(Limit, ...Option) (*Limiter, *clock.Manual)) {
		l, c := newLim(Limit{Rate: 3, Period: time.Second})
		ctx := context.Background()
		c.Advance(123456789 * time.Nanosecond) // not on a window boundary
		for i := range 20 {
			res, err := l.AllowN(ctx, "k", 1+i%3)
			if err != nil {
				t.Fatal(err)
			}
			if res.Allowed {
				continue
			}
			c.Advance(res.RetryAfter - 1)
			if again, _ := l.AllowN(ctx, "k", 1+i%3); again.Allowed {
				t.Fatalf("request %d: admitted 1ns before RetryAfter %v", i, res.RetryAfter)
			}
			c.Advance(1)
			if again, _ := l.AllowN(ctx, "k", 1+i%3); !again.Allowed {
				t.Fatalf("request %d: refused at RetryAfter %v: %+v", i, res.RetryAfter, again)
			}
		}
	}},
	{"is fresh at ResetAfter", func(t *testing.T, alg Algorithm, newLim func(Limit, ...Option) (*Limiter, *clock.Manual)) {
		l, c := newLim(Limit{Rate: 4, Period: time.Minute})
		ctx := context.Background()
		c.Advance(17 * time.Second)
		res, _ := l.AllowN(ctx, "k", 3)
		c.Advance(res.ResetAfter)
		if res, _ := l.AllowN(ctx, "k", 4); !res.Allowed {
			t.Fatalf("full allowance refused at ResetAfter: %+v", res)
		}
	}},
	{"keys are independent", func(t *testing.T, alg Algorithm, newLim func(Limit, ...Option) (*Limiter, *clock.Manual)) {
		l, _ := newLim(Limit{Rate: 2, Period: time.Second})
		ctx := context.Background()
		for _, k := range []string{"a", "b", "c"} {
			if res, _ := l.AllowN(ctx, k, 2); !res.Allowed {
				t.Fatalf("key %q refused", k)
			}
		}
		if res, _ := l.Allow(ctx, "a"); res.Allowed {
			t.Fatal("key a admitted beyond its limit")
		}
	}},
	{"rejects bad input with errors", func(t *testing.T, alg Algorithm, newLim func(Limit, ...Option) (*Limiter, *clock.Manual)) {
		l, _ := newLim(Limit{Rate: 5, Period: time.Second}, WithMaxKeyLen(8))
		ctx := context.Background()
		for _, tc := range []struct {
			key  string
			n    int
			want error
			msg  string
		}{
			{"k", 0, ErrInvalidCost, "must be at least 1"},
			{"k", -3, ErrInvalidCost, "must be at least 1"},
			{"k", 6, ErrInvalidCost, "could never be admitted"},
			{"", 1, ErrInvalidKey, "empty"},
			{"123456789", 1, ErrInvalidKey, "longer than the maximum of 8"},
		} {
			res, err := l.AllowN(ctx, tc.key, tc.n)
			if !errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.msg) || res.Allowed {
				t.Errorf("AllowN(%q, %d) = %+v, %v; want %v (%q)", tc.key, tc.n, res, err, tc.want, tc.msg)
			}
		}
		if res, err := l.AllowN(ctx, "12345678", 5); err != nil || !res.Allowed {
			t.Errorf("longest key, whole burst: %+v, %v", res, err)
		}
	}},
	{"shadow mode admits and reports", func(t *testing.T, alg Algorithm, newLim func(Limit, ...Option) (*Limiter, *clock.Manual)) {
		var obs countingObserver
		l, c := newLim(Limit{Rate: 2, Period: time.Second}, WithShadow(true), WithObserver(&obs), WithName("dark"))
		ctx := context.Background()
		l.AllowN(ctx, "k", 2)
		res, err := l.Allow(ctx, "k")
		if err != nil || !res.Allowed || !res.Shadowed || res.RetryAfter <= 0 || res.Remaining != 0 {
			t.Fatalf("over the limit in shadow mode: %+v, %v", res, err)
		}
		// The shadowed request was not counted: at RetryAfter one passes,
		// for real.
		c.Advance(res.RetryAfter)
		if res, _ := l.Allow(ctx, "k"); !res.Allowed || res.Shadowed {
			t.Fatalf("at RetryAfter: %+v", res)
		}
		if obs.decisions.Load() != 3 || obs.shadowed.Load() != 1 || obs.name.Load() != "dark" {
			t.Fatalf("observer saw %d decisions, %d shadowed, name %v", obs.decisions.Load(), obs.shadowed.Load(), obs.name.Load())
		}
	}},
	{"concurrent requests on one key admit exactly the limit", func(t *testing.T, alg Algorithm, newLim func(Limit, ...Option) (*Limiter, *clock.Manual)) {
		l, _ := newLim(Limit{Rate: 500, Period: time.Hour})
		ctx := context.Background()
		var ok atomic.Int64
		var wg sync.WaitGroup
		for range 8 {
			wg.Go(func() {
				for range 200 {
					res, err := l.Allow(ctx, "hot")
					if err != nil {
						t.Error(err)
						return
					}
					if res.Allowed {
						ok.Add(1)
					}
				}
			})
		}
		wg.Wait()
		if got := ok.Load(); got != 500 {
			t.Fatalf("admitted %d of 1600 requests, want exactly 500", got)
		}
	}},
}

type countingObserver struct {
	metrics.RateBase
	decisions, shadowed, expired atomic.Int64
	name                         atomic.Value
}

func (o *countingObserver) RateDecision(name string, d metrics.RateDecision) {
	o.decisions.Add(1)
	if d.Shadowed {
		o.shadowed.Add(1)
	}
	o.name.Store(name)
}

func (o *countingObserver) LeaseExpired(string) { o.expired.Add(1) }

// TestConformance runs every behaviour over every algorithm on every store.
func TestConformance(t *testing.T) {
	for _, be := range backends {
		for _, alg := range allAlgorithms {
			for _, ct := range conformanceTests {
				t.Run(be.name+"/"+alg.String()+"/"+ct.name, func(t *testing.T) {
					ct.run(t, alg, func(lim Limit, opts ...Option) (*Limiter, *clock.Manual) {
						c := clock.NewManual(t0)
						all := append([]Option{WithClock(c)}, be.opts(t)...)
						return mustNew(t, alg, lim, append(all, opts...)...), c
					})
				})
			}
		}
	}
}

// The in-memory store and the Store interface path decide identically on
// random traces, and both match the pure arithmetic.
func TestStorePathsAgree(t *testing.T) {
	for _, alg := range allAlgorithms {
		t.Run(alg.String(), func(t *testing.T) {
			c := clock.NewManual(t0)
			lim := Limit{Rate: 7, Period: 3 * time.Second}
			a := mustNew(t, alg, lim, WithClock(c))
			b := mustNew(t, alg, lim, append(backends[1].opts(t), WithClock(c))...)
			ctx := context.Background()
			for i := range 3000 {
				key := fmt.Sprint("k", i%5)
				n := 1 + i%3
				ra, ea := a.AllowN(ctx, key, n)
				rb, eb := b.AllowN(ctx, key, n)
				if ra != rb || (ea == nil) != (eb == nil) {
					t.Fatalf("request %d: memory %+v, %v; store %+v, %v", i, ra, ea, rb, eb)
				}
				c.Advance(time.Duration(i%7) * 97 * time.Millisecond)
			}
		})
	}
}

// Allow on a key the store holds allocates nothing, for every algorithm.
func TestAllowDoesNotAllocate(t *testing.T) {
	ctx := context.Background()
	for _, alg := range allAlgorithms {
		t.Run(alg.String(), func(t *testing.T) {
			l := mustNew(t, alg, Limit{Rate: 1000, Period: time.Hour}, WithClock(clock.NewManual(t0)))
			key := string([]byte("user:42")) // not a constant
			l.Allow(ctx, key)
			if n := testing.AllocsPerRun(500, func() {
				if _, err := l.Allow(ctx, key); err != nil {
					t.Fatal(err)
				}
			}); n != 0 {
				t.Fatalf("Allow allocates %v times", n)
			}
			sys := mustNew(t, alg, Limit{Rate: 1000, Period: time.Hour})
			sys.Allow(ctx, key)
			if n := testing.AllocsPerRun(500, func() { sys.Allow(ctx, key) }); n != 0 {
				t.Fatalf("Allow on the system clock allocates %v times", n)
			}
			long := string([]byte("tenant:acme/user:42/endpoint:/v1/orders")) // kept in the arena
			sys.Allow(ctx, long)
			if n := testing.AllocsPerRun(500, func() { sys.Allow(ctx, long) }); n != 0 {
				t.Fatalf("Allow on a long key allocates %v times", n)
			}
			co, err := clock.NewCoarse(time.Millisecond)
			if err != nil {
				t.Fatal(err)
			}
			defer co.Stop()
			cl := mustNew(t, alg, Limit{Rate: 1000, Period: time.Hour}, WithClock(co))
			cl.Allow(ctx, key)
			if n := testing.AllocsPerRun(500, func() { cl.Allow(ctx, key) }); n != 0 {
				t.Fatalf("Allow on a coarse clock allocates %v times", n)
			}
		})
	}
}

func TestNewRejectsInvalidConfiguration(t *testing.T) {
	tests := []struct {
		name string
		alg  Algorithm
		lim  Limit
		opts []Option
		want string
	}{
		{"unknown algorithm", Algorithm(9), Limit{Rate: 1, Period: time.Second}, nil, "unknown algorithm Algorithm(9)"},
		{"zero algorithm", 0, Limit{Rate: 1, Period: time.Second}, nil, "unknown algorithm"},
		{"zero rate", GCRA, Limit{Period: time.Second}, nil, "rate 0: must be positive"},
		{"negative rate", GCRA, Limit{Rate: -1, Period: time.Second}, nil, "rate -1"},
		{"zero period", GCRA, Limit{Rate: 1}, nil, "period 0s: must be positive"},
		{"huge period", GCRA, Limit{Rate: 1, Period: MaxPeriod + 1}, nil, "must be at most"},
		{"negative burst", TokenBucket, Limit{Rate: 1, Period: time.Second, Burst: -1}, nil, "burst -1"},
		{"window burst", FixedWindow, Limit{Rate: 10, Period: time.Second, Burst: 20}, nil, "no separate burst"},
		{"sliding window rate", SlidingWindow, Limit{Rate: 1 << 40, Period: time.Second}, nil, "counts at most"},
		{"sliding log rate", SlidingLog, Limit{Rate: MaxLogRate + 1, Period: time.Second}, nil, "use SlidingWindow"},
		{"bucket overflow", TokenBucket, Limit{Rate: 1, Period: MaxPeriod, Burst: 1 << 20}, nil, "too large to count exactly"},
		{"nil clock", GCRA, Limit{Rate: 1, Period: time.Second}, []Option{WithClock(nil)}, "WithClock(nil)"},
		{"nil store", GCRA, Limit{Rate: 1, Period: time.Second}, []Option{WithStore(nil)}, "WithStore(nil)"},
		{"nil memory store", GCRA, Limit{Rate: 1, Period: time.Second}, []Option{WithStore((*MemoryStore)(nil))}, "WithStore(nil)"},
		{"key length", GCRA, Limit{Rate: 1, Period: time.Second}, []Option{WithMaxKeyLen(1 << 20)}, "max key length 1048576"},
		{"nil observer", GCRA, Limit{Rate: 1, Period: time.Second}, []Option{WithObserver(nil)}, "WithObserver(nil)"},
		{"nil timer", GCRA, Limit{Rate: 1, Period: time.Second}, []Option{WithTimer(nil)}, "WithTimer(nil)"},
		{"max keys", GCRA, Limit{Rate: 1, Period: time.Second}, []Option{WithMaxKeys(0)}, "max keys 0"},
		{"max key len", GCRA, Limit{Rate: 1, Period: time.Second}, []Option{WithMaxKeyLen(0)}, "max key length 0"},
		{"store and max keys", GCRA, Limit{Rate: 1, Period: time.Second}, []Option{WithStore(opaqueStore{}), WithMaxKeys(5)}, "WithMaxKeys configures the default"},
		{"lease", GCRA, Limit{Rate: 1, Period: time.Second}, []Option{WithLease(time.Second)}, "WithLease is for Concurrency"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l, err := New(tt.alg, tt.lim, tt.opts...)
			if err == nil || l != nil {
				t.Fatalf("New = %v, %v; want an error", l, err)
			}
			if !strings.Contains(err.Error(), tt.want) || !strings.HasPrefix(err.Error(), "sluice/ratelimit: ") {
				t.Fatalf("error %q does not mention %q", err, tt.want)
			}
		})
	}
}

func TestNewReportsEveryProblem(t *testing.T) {
	_, err := New(GCRA, Limit{Rate: -1, Period: -1, Burst: -1}, WithMaxKeys(-1), WithClock(nil))
	for _, want := range []string{"rate -1", "period -1ns", "burst -1", "max keys -1", "WithClock(nil)"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v does not mention %q", err, want)
		}
	}
}

func TestBurstDefaultsToRate(t *testing.T) {
	for _, alg := range allAlgorithms {
		l := mustNew(t, alg, Limit{Rate: 7, Period: time.Second})
		if got := l.Policy().Limit(); got.Burst != 7 {
			t.Errorf("%v: burst %d, want 7", alg, got.Burst)
		}
	}
	l := mustNew(t, SlidingLog, Limit{Rate: 7, Period: time.Second, Burst: 7})
	if l.Policy().Limit().Burst != 7 {
		t.Error("explicit burst equal to rate refused")
	}
}

// At the key cap, new keys are refused (never silently admitted) and held
// keys keep their limits; a key whose state is back to fresh makes room.
func TestMaxKeys(t *testing.T) {
	for _, alg := range allAlgorithms {
		t.Run(alg.String(), func(t *testing.T) {
			c := clock.NewManual(t0)
			l := mustNew(t, alg, Limit{Rate: 2, Period: time.Second}, WithClock(c), WithMaxKeys(3))
			ctx := context.Background()
			for _, k := range []string{"a", "b", "c"} {
				if res, err := l.AllowN(ctx, k, 2); err != nil || !res.Allowed {
					t.Fatalf("key %q: %+v, %v", k, res, err)
				}
			}
			for i := range 100 { // a spray of new keys
				res, err := l.Allow(ctx, fmt.Sprint("spray", i))
				if err != nil || res.Allowed || res.Source != SourceFull || res.RetryAfter <= 0 || !res.Decided() || res.Degraded() {
					t.Fatalf("spray key %d: %+v, %v", i, res, err)
				}
			}
			if res, _ := l.Allow(ctx, "a"); res.Allowed {
				t.Fatal("held key a admitted beyond its limit while the store was full")
			}
			if n := l.mem.Len(); n != 3 {
				t.Fatalf("store holds %d keys, want 3", n)
			}
			// Once the keys are fresh again, they make room.
			c.Advance(3 * time.Second)
			for i := range 3 {
				if res, err := l.Allow(ctx, fmt.Sprint("new", i)); err != nil || !res.Allowed {
					t.Fatalf("new key %d after the old ones went fresh: %+v, %v", i, res, err)
				}
			}
		})
	}
}

// Shadow mode turns a full store's refusal into a shadowed admission too,
// and the Result still says why.
func TestMaxKeysShadow(t *testing.T) {
	l := mustNew(t, GCRA, Limit{Rate: 2, Period: time.Second}, WithClock(clock.NewManual(t0)), WithMaxKeys(1), WithShadow(true))
	ctx := context.Background()
	l.Allow(ctx, "a")
	res, err := l.Allow(ctx, "b")
	if err != nil || !res.Allowed || !res.Shadowed || res.Source != SourceFull {
		t.Fatalf("%+v, %v", res, err)
	}
}

// The keys a spray leaves behind are dropped once they are fresh, as
// traffic passes through their shards; keys in steady use keep their state.
func TestIdleKeysAreDropped(t *testing.T) {
	c := clock.NewManual(t0)
	l := mustNew(t, TokenBucket, Limit{Rate: 10, Period: time.Second}, WithClock(c), WithMaxKeys(5000))
	ctx := context.Background()
	for i := range 1000 {
		l.Allow(ctx, fmt.Sprint("spray", i))
	}
	if n := l.mem.Len(); n != 1000 {
		t.Fatalf("%d keys after the spray", n)
	}
	c.Advance(time.Second) // every spray key is fresh again
	// 1000 live keys touch nearly every shard; each decision moves its
	// shard's cleanup cursor.
	for round := range 300 {
		for i := range 1000 {
			res, err := l.Allow(ctx, fmt.Sprint("live", i))
			if err != nil {
				t.Fatal(err)
			}
			if round > 0 && res.Remaining != 9 {
				t.Fatalf("live key %d lost its state: %+v", i, res)
			}
		}
		c.Advance(time.Second / 10) // one token back per round: each live key stays at 9
	}
	// Shards no live key hashes to (about e⁻⁴ of them) keep their spray
	// keys: about 20.
	if n := l.mem.Len(); n > 1100 {
		t.Fatalf("%d keys held after the spray went idle, want about 1020", n)
	}
}

func TestReserve(t *testing.T) {
	for _, be := range backends {
		for _, alg := range []Algorithm{TokenBucket, GCRA} {
			t.Run(be.name+"/"+alg.String(), func(t *testing.T) {
				c := clock.NewManual(t0)
				l := mustNew(t, alg, Limit{Rate: 10, Period: time.Second, Burst: 2}, append(be.opts(t), WithClock(c))...)
				ctx := context.Background()
				r1, err := l.Reserve(ctx, "k", 2)
				if err != nil || !r1.OK() || r1.Delay() != 0 {
					t.Fatalf("first: %v %v %v", r1.OK(), r1.Delay(), err)
				}
				r2, _ := l.Reserve(ctx, "k", 1)
				if !r2.OK() || r2.Delay() != 100*time.Millisecond || !r2.ReadyAt().Equal(t0.Add(100*time.Millisecond)) {
					t.Fatalf("second: %v %v %v", r2.OK(), r2.Delay(), r2.ReadyAt())
				}
				if d := r2.DelayFrom(t0.Add(30 * time.Millisecond)); d != 70*time.Millisecond {
					t.Fatalf("DelayFrom = %v", d)
				}
				// Allow refuses while the bucket is in debt.
				if res, _ := l.Allow(ctx, "k"); res.Allowed || res.RetryAfter != 200*time.Millisecond {
					t.Fatalf("Allow during debt: %+v", res)
				}
				// A deadline that cannot be met takes nothing.
				dctx, cancel := context.WithDeadline(ctx, t0.Add(150*time.Millisecond))
				defer cancel()
				if r3, _ := l.Reserve(dctx, "k", 1); r3.OK() || r3.Delay() != 200*time.Millisecond {
					t.Fatalf("third: %v %v", r3.OK(), r3.Delay())
				}
				c.Advance(50 * time.Millisecond)
				if err := r2.Cancel(); err != nil {
					t.Fatal(err)
				}
				r2.Cancel() // twice: nothing more
				if res, _ := l.Allow(ctx, "k"); res.Allowed || res.RetryAfter != 50*time.Millisecond {
					t.Fatalf("after Cancel: %+v", res)
				}
				if _, err := l.Reserve(ctx, "k", 3); !errors.Is(err, ErrInvalidCost) {
					t.Fatalf("n above burst: %v", err)
				}
			})
		}
	}
	l := mustNew(t, FixedWindow, Limit{Rate: 1, Period: time.Second})
	if _, err := l.Reserve(context.Background(), "k", 1); !errors.Is(err, ErrNoReserve) {
		t.Fatalf("Reserve on a fixed window: %v", err)
	}
	if err := l.Wait(context.Background(), "k", 1); !errors.Is(err, ErrNoReserve) {
		t.Fatalf("Wait on a fixed window: %v", err)
	}
}

// fakeTimer hands the delays Wait asks for to the test, which fires them.
type fakeTimer struct {
	asked chan time.Duration
	fire  chan time.Time
}

func newFakeTimer() *fakeTimer {
	return &fakeTimer{asked: make(chan time.Duration, 1), fire: make(chan time.Time)}
}

func (f *fakeTimer) timer(d time.Duration) (<-chan time.Time, func() bool) {
	f.asked <- d
	return f.fire, func() bool { return true }
}

func TestWaitWithTimer(t *testing.T) {
	c := clock.NewManual(t0)
	ft := newFakeTimer()
	l := mustNew(t, GCRA, Limit{Rate: 10, Period: time.Second, Burst: 1}, WithClock(c), WithTimer(ft.timer))
	ctx := context.Background()
	if err := l.Wait(ctx, "k", 1); err != nil { // the bucket's token: no wait
		t.Fatal(err)
	}
	done := make(chan error)
	go func() { done <- l.Wait(ctx, "k", 1) }()
	if d := <-ft.asked; d != 100*time.Millisecond {
		t.Fatalf("Wait asked for %v", d)
	}
	c.Advance(100 * time.Millisecond)
	ft.fire <- c.Now()
	if err := <-done; err != nil {
		t.Fatal(err)
	}

	// Cancelled while waiting: the tokens go back.
	cctx, cancel := context.WithCancel(ctx)
	go func() { done <- l.Wait(cctx, "k", 1) }()
	<-ft.asked
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled Wait: %v", err)
	}
	if res, _ := l.Allow(ctx, "k"); res.Allowed || res.RetryAfter != 100*time.Millisecond {
		t.Fatalf("after the cancelled Wait: %+v", res)
	}

	// A deadline before the delay: refused at once, nothing taken.
	dctx, dcancel := context.WithDeadline(ctx, c.Now().Add(50*time.Millisecond))
	defer dcancel()
	if err := l.Wait(dctx, "k", 1); !errors.Is(err, ErrWouldExceedDeadline) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Wait past the deadline: %v", err)
	}
	if err := l.Wait(cctx, "k", 1); !errors.Is(err, context.Canceled) {
		t.Fatalf("Wait on a cancelled context: %v", err)
	}
}

// On a manual clock without WithTimer, Wait returns once the clock has been
// moved far enough, and never sleeps on the wall clock.
func TestWaitOnManualClock(t *testing.T) {
	c := clock.NewManual(t0)
	l := mustNew(t, TokenBucket, Limit{Rate: 10, Period: time.Second, Burst: 1}, WithClock(c))
	ctx := context.Background()
	l.Allow(ctx, "k")
	done := make(chan error)
	go func() { done <- l.Wait(ctx, "k", 1) }()
	for deficit(l, "k") <= l.pol.cap { // until the goroutine has reserved
		runtime.Gosched()
	}
	c.Advance(99 * time.Millisecond)
	select {
	case err := <-done:
		t.Fatalf("Wait returned before its delay: %v", err)
	default:
	}
	c.Advance(time.Millisecond)
	if err := <-done; err != nil {
		t.Fatal(err)
	}

	cctx, cancel := context.WithCancel(ctx)
	go func() { done <- l.Wait(cctx, "k", 1) }()
	for deficit(l, "k") <= l.pol.cap {
		runtime.Gosched()
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled Wait: %v", err)
	}
}

// A limiter on a Coarse clock reads it directly (Nanos) and decides at the
// clock's time: its time base agrees with the clock's Now, tick by tick.
func TestCoarseClockTimeBase(t *testing.T) {
	co, err := clock.NewCoarse(time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	defer co.Stop()
	l := mustNew(t, TokenBucket, Limit{Rate: 10, Period: time.Second}, WithClock(co))
	if l.coarse != co {
		t.Fatal("the limiter does not read the coarse clock directly")
	}
	for range 3 {
		// The clock's goroutine may publish between the two reads; they
		// agree when read back to back around an unchanged reading.
		for {
			before := co.Nanos()
			got, want := l.now(), l.nsOf(co.Now())
			if co.Nanos() != before {
				continue
			}
			if got != want {
				t.Fatalf("now() = %d, the clock's time %d", got, want)
			}
			break
		}
	}
}

// deficit reads a bucket key's missing units from the in-memory store.
func deficit(l *Limiter, key string) int64 {
	pr := l.tab.probeOf(key)
	sh := l.tab.shardOf(pr.h)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	i, ok := sh.find(key, &pr)
	if !ok {
		return 0
	}
	return l.pol.deficit(sh.slots[i].val, l.now())
}

// Wait on the system clock uses a real timer (a short one).
func TestWaitOnSystemClock(t *testing.T) {
	l := mustNew(t, GCRA, Limit{Rate: 1000, Period: time.Second, Burst: 1})
	ctx := context.Background()
	for range 3 {
		if err := l.Wait(ctx, "k", 1); err != nil {
			t.Fatal(err)
		}
	}
}
