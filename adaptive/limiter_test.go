package adaptive

import (
	"context"
	"errors"
	"math/rand/v2"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice/clock"
	"github.com/sluicehq/sluice/metrics"
)

// t0 is far in the future so that contexts with deadlines taken from a
// manual clock never fire on the wall clock.
var t0 = time.Date(2100, 1, 1, 0, 0, 0, 0, time.UTC)

func mustNew(t testing.TB, alg Algorithm, opts ...Option) *Limiter {
	t.Helper()
	l, err := New(alg, opts...)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return l
}

// mustAcquire takes a slot of l, failing the test if it is refused.
func mustAcquire(t testing.TB, l *Limiter) Token {
	t.Helper()
	tok, ok := l.TryAcquire()
	if !ok {
		t.Fatal("refused")
	}
	return tok
}

func TestNewRejectsInvalidConfiguration(t *testing.T) {
	tests := []struct {
		name string
		alg  Algorithm
		opts []Option
		want string
	}{
		{"nil algorithm", nil, nil, "an algorithm is required"},
		{"fixed zero", Fixed(0), nil, "Fixed(0)"},
		{"min zero", Fixed(1), []Option{WithMinLimit(0)}, "min limit 0"},
		{"max zero", Fixed(1), []Option{WithMaxLimit(0)}, "max limit 0"},
		{"min above max", Fixed(5), []Option{WithMinLimit(10), WithMaxLimit(5)}, "exceeds max limit"},
		{"initial above max", Fixed(50), []Option{WithMaxLimit(10)}, "initial limit 50 is outside"},
		{"initial below min", Fixed(2), []Option{WithMinLimit(3)}, "initial limit 2 is outside"},
		{"window zero", Fixed(1), []Option{WithWindow(0, time.Second)}, "window"},
		{"window inverted", Fixed(1), []Option{WithWindow(time.Second, time.Millisecond)}, "window"},
		{"min samples", Fixed(1), []Option{WithMinSamples(0)}, "min samples 0"},
		{"percentile one", Fixed(1), []Option{WithPercentile(1)}, "percentile 1"},
		{"percentile negative", Fixed(1), []Option{WithPercentile(-0.5)}, "percentile -0.5"},
		{"nil clock", Fixed(1), []Option{WithClock(nil)}, "WithClock(nil)"},
		{"nil observer", Fixed(1), []Option{WithObserver(nil)}, "WithObserver(nil)"},
		{"aimd backoff", NewAIMD(WithAIMDBackoff(1.2)), nil, "backoff 1.2"},
		{"aimd initial", NewAIMD(WithAIMDInitial(0)), nil, "initial limit 0"},
		{"aimd increase", NewAIMD(WithAIMDIncrease(0)), nil, "increase 0"}, // see also TestReviewFixes,
		{"aimd timeout", NewAIMD(WithAIMDTimeout(0)), nil, "timeout 0s"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l, err := New(tt.alg, tt.opts...)
			if err == nil || l != nil {
				t.Fatalf("New = %v, %v; want an error", l, err)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error %q does not mention %q", err, tt.want)
			}
		})
	}
}

func TestNewReportsEveryProblem(t *testing.T) {
	_, err := New(Fixed(1), WithMinSamples(0), WithPercentile(2), WithWindow(-1, 0))
	for _, want := range []string{"min samples", "percentile", "window"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v does not mention %q", err, want)
		}
	}
}

func TestTryAcquireAdmitsUpToTheLimit(t *testing.T) {
	l := mustNew(t, Fixed(3))
	var toks []Token
	for i := range 3 {
		tok, ok := l.TryAcquire()
		if !ok {
			t.Fatalf("acquisition %d refused below the limit", i+1)
		}
		toks = append(toks, tok)
	}
	if _, ok := l.TryAcquire(); ok {
		t.Fatal("admitted beyond the limit")
	}
	if _, err := l.Acquire(context.Background()); !errors.Is(err, ErrLimitExceeded) {
		t.Fatalf("Acquire on a full gate without queue: %v, want ErrLimitExceeded", err)
	}
	if got := l.InFlight(); got != 3 {
		t.Fatalf("InFlight = %d, want 3", got)
	}
	toks[0].Success()
	toks[1].Dropped()
	toks[2].Ignore()
	if got := l.InFlight(); got != 0 {
		t.Fatalf("InFlight after releases = %d, want 0", got)
	}
	Token{}.Success() // the zero token does nothing
	if l.Overreleases() != 0 || l.InFlight() != 0 {
		t.Fatal("zero token changed the gate")
	}
}

func TestOverreleaseIsIgnoredAndCounted(t *testing.T) {
	l := mustNew(t, Fixed(2))
	tok, _ := l.TryAcquire()
	tok.Success()
	tok.Success() // a caller bug: released twice
	if l.InFlight() != 0 || l.Limit() != 2 || l.Overreleases() != 1 {
		t.Fatalf("after double release: in-flight %d, limit %d, overreleases %d",
			l.InFlight(), l.Limit(), l.Overreleases())
	}
	for range 2 {
		if _, ok := l.TryAcquire(); !ok {
			t.Fatal("double release corrupted the gate")
		}
	}
	if _, ok := l.TryAcquire(); ok {
		t.Fatal("double release let a third request in")
	}
}

func TestAcquireWithDoneContext(t *testing.T) {
	l := mustNew(t, Fixed(1))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := l.Acquire(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("Acquire(done ctx) = %v", err)
	}
	if l.InFlight() != 0 {
		t.Fatal("a cancelled Acquire took a slot")
	}
}

// scripted is an Algorithm whose limits come from a list, and which records
// the samples it was given.
type scripted struct {
	initial int
	next    []int
	samples []Sample
}

func (s *scripted) InitialLimit() int { return s.initial }
func (s *scripted) Update(x Sample) int {
	s.samples = append(s.samples, x)
	if len(s.next) == 0 {
		return x.Limit
	}
	n := s.next[0]
	s.next = s.next[1:]
	return n
}

func TestWindowClosesOnTheReleaseThatFindsItDue(t *testing.T) {
	c := clock.NewManual(t0)
	alg := &scripted{initial: 10, next: []int{4}}
	l := mustNew(t, alg, WithClock(c), WithWindow(100*time.Millisecond, time.Second), WithMinSamples(3))

	hold := func(d time.Duration) Token {
		tok := mustAcquire(t, l)
		c.Advance(d)
		return tok
	}
	// Three overlapping requests of 10, 20 and 30ms (max in flight 3) and
	// one drop.
	a, b, d := hold(0), hold(0), hold(0)
	c.Advance(10 * time.Millisecond)
	a.Success()
	c.Advance(10 * time.Millisecond)
	b.Success()
	c.Advance(10 * time.Millisecond)
	d.Success()
	x := hold(time.Millisecond)
	x.Dropped()
	if len(alg.samples) != 0 {
		t.Fatal("window closed before its minimum length")
	}
	c.Advance(100 * time.Millisecond)
	y := hold(5 * time.Millisecond)
	y.Ignore() // an ignore never closes a window
	if len(alg.samples) != 0 {
		t.Fatal("Ignore closed a window")
	}
	z := hold(5 * time.Millisecond)
	z.Success()
	if len(alg.samples) != 1 {
		t.Fatalf("window did not close: %d samples", len(alg.samples))
	}
	got := alg.samples[0]
	want := Sample{
		At: 141 * time.Millisecond, Window: 141 * time.Millisecond, Limit: 10,
		Count: 4, Dropped: 1, MaxInFlight: 3,
		RTT: 16250 * time.Microsecond, AvgRTT: 16250 * time.Microsecond,
		MinRTT: 5 * time.Millisecond, MaxRTT: 30 * time.Millisecond,
	}
	if got != want {
		t.Fatalf("sample\n got %+v\nwant %+v", got, want)
	}
	if l.Limit() != 4 {
		t.Fatalf("limit = %d, want 4 from the algorithm", l.Limit())
	}
}

// A gate created before its traffic (or idle for a while) does not spread
// its first window over the gap: the window begins at the admission of its
// oldest completed request, so the traffic's first window reports its own
// length and rate (a 2 s window holding 100 ms of traffic read a rate
// twenty times too low, and a cold start's probe took it as the service's
// throughput).
func TestWindowAfterAnIdleGapStartsWithTheTraffic(t *testing.T) {
	// A gap of 2 s, over the maximum window (a server idle for a while),
	// and one of 80 ms, under it: the gate's first window begins at the
	// admission of its first completed request all the same (a gate made
	// shortly before its traffic: 100 ms and 5 requests, not 140 ms and 3).
	for _, idle := range []time.Duration{2 * time.Second, 80 * time.Millisecond} {
		c := clock.NewManual(t0)
		alg := &scripted{initial: 10}
		l := mustNew(t, alg, WithClock(c), WithWindow(100*time.Millisecond, time.Second), WithMinSamples(3))
		c.Advance(idle)
		var toks []Token
		for range 5 {
			toks = append(toks, mustAcquire(t, l))
			c.Advance(4 * time.Millisecond)
		}
		toks[0].Success() // 20 ms after the traffic began: the first release
		if len(alg.samples) != 0 {
			t.Fatalf("idle %v: a window closed over the gap: %+v", idle, alg.samples[0])
		}
		// Releases 40, 60, 80 and 100 ms after the traffic began: the last
		// one finds the window due, 100 ms after the first admission.
		for i := 1; i < len(toks); i++ {
			c.Advance(20 * time.Millisecond)
			toks[i].Success()
		}
		if len(alg.samples) != 1 {
			t.Fatalf("idle %v: %d windows closed, want 1", idle, len(alg.samples))
		}
		if s := alg.samples[0]; s.Window != 100*time.Millisecond || s.Count != 5 {
			t.Fatalf("idle %v: window of %v with %d samples, want the 100ms since the first admission, 5", idle, s.Window, s.Count)
		}
	}
}

func TestWindowWaitsForSamplesUntilItsMaximum(t *testing.T) {
	c := clock.NewManual(t0)
	alg := &scripted{initial: 5}
	l := mustNew(t, alg, WithClock(c), WithWindow(100*time.Millisecond, time.Second), WithMinSamples(10))
	for range 3 {
		tok, _ := l.TryAcquire()
		c.Advance(200 * time.Millisecond)
		tok.Success()
	}
	if len(alg.samples) != 0 {
		t.Fatal("closed with 3 of 10 samples before the maximum length")
	}
	tok, _ := l.TryAcquire()
	c.Advance(500 * time.Millisecond)
	tok.Success()
	if len(alg.samples) != 1 || alg.samples[0].Count != 4 {
		t.Fatalf("window past its maximum: %+v", alg.samples)
	}
}

func TestLimitIsClampedToMinAndMax(t *testing.T) {
	c := clock.NewManual(t0)
	alg := &scripted{initial: 5, next: []int{1000, -3}}
	l := mustNew(t, alg, WithClock(c), WithMinLimit(2), WithMaxLimit(8), WithMinSamples(1))
	for _, want := range []int{8, 2} {
		tok, _ := l.TryAcquire()
		c.Advance(DefaultMinWindow)
		tok.Success()
		if l.Limit() != want {
			t.Fatalf("limit = %d, want %d", l.Limit(), want)
		}
	}
}

func TestPercentileSample(t *testing.T) {
	c := clock.NewManual(t0)
	alg := &scripted{initial: 100}
	l := mustNew(t, alg, WithClock(c), WithPercentile(0.9), WithMinSamples(100), WithWindow(DefaultMinWindow, 10*time.Second))
	for i := 1; i <= 100; i++ {
		tok, _ := l.TryAcquire()
		c.Advance(time.Duration(i) * time.Millisecond)
		tok.Success()
	}
	c.Advance(DefaultMinWindow)
	tok, _ := l.TryAcquire()
	tok.Dropped()
	if len(alg.samples) != 1 {
		t.Fatalf("%d windows closed, want 1", len(alg.samples))
	}
	s := alg.samples[0]
	if s.RTT < 88*time.Millisecond || s.RTT > 93*time.Millisecond {
		t.Fatalf("p90 of 1..100ms = %v, want about 90ms", s.RTT)
	}
	if s.AvgRTT != 50500*time.Microsecond {
		t.Fatalf("mean = %v", s.AvgRTT)
	}
}

func TestAIMD(t *testing.T) {
	a := NewAIMD(WithAIMDTimeout(time.Second))
	if a.InitialLimit() != 20 || a.Validate() != nil {
		t.Fatalf("defaults: initial %d, err %v", a.InitialLimit(), a.Validate())
	}
	tests := []struct {
		name string
		s    Sample
		want int
	}{
		{"busy grows", Sample{Limit: 20, MaxInFlight: 10, Count: 5, RTT: time.Millisecond}, 21},
		{"idle holds", Sample{Limit: 20, MaxInFlight: 9, Count: 5, RTT: time.Millisecond}, 20},
		{"drop backs off", Sample{Limit: 20, MaxInFlight: 20, Count: 5, Dropped: 1}, 18},
		{"slow backs off", Sample{Limit: 20, MaxInFlight: 20, Count: 5, RTT: 2 * time.Second}, 18},
		{"rounds down", Sample{Limit: 5, Dropped: 1}, 4},
	}
	for _, tt := range tests {
		if got := a.Update(tt.s); got != tt.want {
			t.Errorf("%s: Update = %d, want %d", tt.name, got, tt.want)
		}
	}
}

func TestAIMDDrivesTheGate(t *testing.T) {
	c := clock.NewManual(t0)
	l := mustNew(t, NewAIMD(WithAIMDInitial(4)), WithClock(c), WithMinSamples(1), WithMaxLimit(6))
	window := func(inFlight int, drop bool) {
		var toks []Token
		for range inFlight {
			tok, ok := l.TryAcquire()
			if !ok {
				t.Fatal("refused below the limit")
			}
			toks = append(toks, tok)
		}
		c.Advance(DefaultMinWindow)
		for i, tok := range toks {
			if drop && i == 0 {
				tok.Dropped()
			} else {
				tok.Success()
			}
		}
	}
	var limits []int
	for _, step := range []struct {
		n    int
		drop bool
	}{{4, false}, {5, false}, {6, false}, {6, true}, {1, false}, {1, false}} {
		window(step.n, step.drop)
		limits = append(limits, l.Limit())
	}
	// A window closes on its first due release, so the tokens still out
	// then count as in flight in the next window: the step after the drop
	// still sees 5 in flight and grows; only the one after it is idle.
	want := []int{5, 6, 6, 5, 6, 6}
	for i := range want {
		if limits[i] != want[i] {
			t.Fatalf("limits %v, want %v", limits, want)
		}
	}
}

// TestGateIsExactWhileTheLimitMoves is the gate's safety property: no
// admission ever takes in-flight past the limit in force at that instant,
// also while the limit shrinks. A controller goroutine moves the limit at
// random and snapshots the (limit, in-flight) word; between two of its
// snapshots the limit does not move, so in-flight may exceed it only if it
// already did at the previous snapshot, and then must not have grown.
func TestGateIsExactWhileTheLimitMoves(t *testing.T) {
	const workers, maxLimit = 16, 12
	l := mustNew(t, Fixed(maxLimit))
	var stop atomic.Bool
	var held, maxHeld atomic.Int64
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(uint64(w), 1))
			for !stop.Load() {
				tok, ok := l.TryAcquire()
				if !ok {
					continue
				}
				atomicMax(&maxHeld, held.Add(1))
				for range r.IntN(50) {
					_ = r.Int() // hold for a moment
				}
				held.Add(-1)
				switch r.IntN(3) {
				case 0:
					tok.Success()
				case 1:
					tok.Dropped()
				default:
					tok.Ignore()
				}
			}
		})
	}
	r := rand.New(rand.NewPCG(7, 7))
	prev := l.h.state.Load()
	shrinks := 0
	for i := range 20000 {
		if i%50 == 0 {
			next := int64(1 + r.IntN(maxLimit))
			if prevLim, _ := unpack(prev); next < prevLim {
				shrinks++
			}
			l.setLimit(next)
		}
		cur := l.h.state.Load()
		lim, n := unpack(cur)
		prevLim, prevN := unpack(prev)
		_ = prevLim
		if n > lim && n > max(prevN, lim) {
			t.Fatalf("in-flight grew past the limit: %d/%d after %d/%d", n, lim, prevN, prevLim)
		}
		prev = cur
	}
	stop.Store(true)
	wg.Wait()
	if l.InFlight() != 0 {
		t.Fatalf("in-flight %d after all released", l.InFlight())
	}
	if maxHeld.Load() > maxLimit {
		t.Fatalf("%d held at once, limit never above %d", maxHeld.Load(), maxLimit)
	}
	if shrinks == 0 {
		t.Fatal("the limit never shrank")
	}
}

// TestGateIsExactUnderItsOwnAlgorithm runs many goroutines through a gate
// whose algorithm moves the limit on every window, and checks with an
// external count that holders never outnumber the largest limit.
func TestGateIsExactUnderItsOwnAlgorithm(t *testing.T) {
	alg := &wobble{}
	l := mustNew(t, alg, WithWindow(time.Microsecond, time.Microsecond), WithMinSamples(1))
	var held, over atomic.Int64
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 3000 {
				tok, ok := l.TryAcquire()
				if !ok {
					continue
				}
				if held.Add(1) > wobbleMax {
					over.Add(1)
				}
				held.Add(-1)
				tok.Success()
			}
		})
	}
	wg.Wait()
	if over.Load() != 0 || l.InFlight() != 0 {
		t.Fatalf("over %d, in-flight %d", over.Load(), l.InFlight())
	}
	if alg.updates.Load() == 0 {
		t.Fatal("the algorithm never ran")
	}
}

const wobbleMax = 6

type wobble struct{ updates atomic.Int64 }

func (*wobble) InitialLimit() int { return wobbleMax }
func (w *wobble) Update(Sample) int {
	return 1 + int(w.updates.Add(1)%wobbleMax)
}

func TestHotPathDoesNotAllocate(t *testing.T) {
	l := mustNew(t, Fixed(100))
	allocs := testing.AllocsPerRun(1000, func() {
		tok, _ := l.TryAcquire()
		tok.Success()
		tok, _ = l.TryAcquire()
		tok.Dropped()
	})
	if allocs != 0 {
		t.Fatalf("TryAcquire+release allocates %v times", allocs)
	}
	c := clock.NewManual(t0)
	lp := mustNew(t, NewAIMD(), WithClock(c), WithPercentile(0.99), WithMinSamples(1), WithMaxLimit(1000))
	allocs = testing.AllocsPerRun(1000, func() {
		tok, _ := lp.TryAcquire()
		c.Advance(DefaultMinWindow) // every release closes a window
		tok.Success()
	})
	if allocs != 0 {
		t.Fatalf("release that closes a window allocates %v times", allocs)
	}
}

type recorder struct {
	mu        sync.Mutex
	decisions []metrics.GateDecision
	releases  []metrics.GateRelease
	limits    [][2]int
}

func (r *recorder) GateDecision(d metrics.GateDecision, _ string, _ time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.decisions = append(r.decisions, d)
}
func (r *recorder) GateRelease(k metrics.GateRelease, _ time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.releases = append(r.releases, k)
}
func (r *recorder) GateLimit(old, new int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.limits = append(r.limits, [2]int{old, new})
}

func TestObserverSeesDecisionsReleasesAndLimits(t *testing.T) {
	c := clock.NewManual(t0)
	var rec recorder
	l := mustNew(t, &scripted{initial: 1, next: []int{3}}, WithClock(c), WithObserver(&rec), WithMinSamples(1))
	tok, _ := l.TryAcquire()
	l.TryAcquire()
	l.Acquire(context.Background())
	c.Advance(DefaultMinWindow)
	tok.Success()
	tok, _ = l.TryAcquire()
	tok.Ignore()
	wantD := []metrics.GateDecision{metrics.Admitted, metrics.Rejected, metrics.Rejected, metrics.Admitted}
	wantR := []metrics.GateRelease{metrics.Success, metrics.Ignored}
	if len(rec.decisions) != len(wantD) || len(rec.releases) != len(wantR) {
		t.Fatalf("decisions %v releases %v", rec.decisions, rec.releases)
	}
	for i := range wantD {
		if rec.decisions[i] != wantD[i] {
			t.Fatalf("decisions %v, want %v", rec.decisions, wantD)
		}
	}
	for i := range wantR {
		if rec.releases[i] != wantR[i] {
			t.Fatalf("releases %v, want %v", rec.releases, wantR)
		}
	}
	if len(rec.limits) != 1 || rec.limits[0] != [2]int{1, 3} {
		t.Fatalf("limit changes %v, want [[1 3]]", rec.limits)
	}
}

func BenchmarkTryAcquireSuccess(b *testing.B) {
	l := mustNew(b, Fixed(1<<20))
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			tok, _ := l.TryAcquire()
			tok.Success()
		}
	})
}

// TestConcurrentOverreleasesNeverLockTheGate: a caller that releases its
// token twice, racing correct callers, must not corrupt the limit; once all
// are done the gate is whole again.
func TestConcurrentOverreleasesNeverLockTheGate(t *testing.T) {
	l := mustNew(t, Fixed(5), WithMinSamples(1), WithWindow(time.Microsecond, time.Microsecond))
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for range 20000 {
				tok, ok := l.TryAcquire()
				if !ok {
					continue
				}
				tok.Success()
				if g == 0 {
					tok.Success() // the bug under test
				}
			}
		})
	}
	wg.Wait()
	if l.Limit() != 5 || l.InFlight() != 0 {
		t.Fatalf("after concurrent over-releases: limit %d, in flight %d", l.Limit(), l.InFlight())
	}
	for i := range 5 {
		if _, ok := l.TryAcquire(); !ok {
			t.Fatalf("acquisition %d refused on an idle gate", i+1)
		}
	}
	if _, ok := l.TryAcquire(); ok {
		t.Fatal("admitted past the limit")
	}
	if l.Overreleases() == 0 {
		t.Fatal("no over-release was detected")
	}
}

func TestReviewFixes(t *testing.T) {
	t.Run("nil AIMD", func(t *testing.T) {
		if _, err := New((*AIMD)(nil)); err == nil {
			t.Fatal("New accepted a nil *AIMD")
		}
	})
	t.Run("AIMD increase cannot overflow", func(t *testing.T) {
		a := NewAIMD(WithAIMDIncrease(maxLimitCap))
		if a.Validate() != nil {
			t.Fatal(a.Validate())
		}
		if got := a.Update(Sample{Limit: maxLimitCap - 1, MaxInFlight: maxLimitCap}); got != maxLimitCap {
			t.Fatalf("Update = %d, want the cap", got)
		}
	})
	t.Run("sample stays consistent when a release races the swap", func(t *testing.T) {
		var ss shards
		ss.reset()
		// The racing release's count and sum landed in this window, its
		// min and max in the previous one.
		ss[2].acc.Store(accCountOne | uint64(100*time.Millisecond))
		var s Sample
		ss.take(&s, new(histogram), 0.9, 0)
		if s.Count != 1 || s.RTT <= 0 || s.MinRTT > s.AvgRTT || s.AvgRTT > s.MaxRTT {
			t.Fatalf("inconsistent sample %+v", s)
		}
	})
	t.Run("partition shrink drains", func(t *testing.T) {
		l := mustNew(t, Fixed(10), WithPartitions(map[string]float64{"a": 0.5, "b": 0.5}),
			WithQueue(4, FIFO), WithClock(clock.NewManual(t0)))
		a, _ := l.Partition("a").TryAcquire()
		defer a.Success()
		got := make(chan error, 1)
		go func() {
			tok, err := l.Acquire(context.Background()) // owed to nobody: none free at limit 10
			if err == nil {
				tok.Success()
			}
			got <- err
		}()
		for l.Queued() == 0 {
			runtime.Gosched()
		}
		// At limit 9 the shares are owed 4 each: a holds 1, so 9−1−3−4 = 1
		// slot is owed to nobody, and the waiter must get it now.
		l.setLimit(9)
		if err := <-got; err != nil {
			t.Fatalf("waiter: %v", err)
		}
	})
	t.Run("expired waiters do not fill the queue", func(t *testing.T) {
		c := clock.NewManual(t0)
		l := mustNew(t, Fixed(1), WithQueue(1, FIFO), WithQueueTimeout(10*time.Millisecond), WithClock(c))
		tok, _ := l.TryAcquire()
		first := make(chan error, 1)
		go func() { _, err := l.Acquire(context.Background()); first <- err }()
		for l.Queued() == 0 {
			runtime.Gosched()
		}
		c.Advance(time.Second)
		ctx, cancel := context.WithCancel(context.Background())
		second := make(chan error, 1)
		go func() { _, err := l.Acquire(ctx); second <- err }()
		if err := <-first; !errors.Is(err, ErrQueueTimeout) {
			t.Fatalf("expired waiter: %v", err)
		}
		for l.Queued() == 0 {
			runtime.Gosched()
		}
		cancel()
		if err := <-second; !errors.Is(err, context.Canceled) {
			t.Fatalf("newcomer: %v, want it queued (then cancelled)", err)
		}
		tok.Success()
	})
	t.Run("queue bound uses a timer on real clocks", func(t *testing.T) {
		l := mustNew(t, Fixed(1), WithQueue(1, FIFO), WithQueueTimeout(time.Millisecond), WithClock(wallClock{}))
		tok, _ := l.TryAcquire()
		defer tok.Success()
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if _, err := l.Acquire(ctx); !errors.Is(err, ErrQueueTimeout) {
			t.Fatalf("Acquire on a wrapped real clock: %v, want ErrQueueTimeout from the timer", err)
		}
	})
}

// wallClock is a real clock that is not clock.System().
type wallClock struct{}

func (wallClock) Now() time.Time { return time.Now() }

func TestSampleCountsRejections(t *testing.T) {
	c := clock.NewManual(t0)
	alg := &scripted{initial: 1}
	l := mustNew(t, alg, WithClock(c), WithMinSamples(1))
	tok, _ := l.TryAcquire()
	for range 3 {
		l.TryAcquire()
	}
	l.Acquire(context.Background())
	l.Partition("x").TryAcquire()
	c.Advance(DefaultMinWindow)
	tok.Success()
	if len(alg.samples) != 1 || alg.samples[0].Rejected != 5 {
		t.Fatalf("samples %+v, want one window with 5 rejections", alg.samples)
	}
}

// A service whose requests take 300 ms, seen through 100 ms windows: once
// the first window has shown the floor, every window of an algorithm that
// probes the floor lasts at least two round trips at it (600 ms), so that
// it holds whole requests. Another algorithm keeps its 100 ms windows.
func TestWindowSpansTwoRoundTripsOfASlowService(t *testing.T) {
	const rtt = 300 * time.Millisecond
	drive := func(alg Algorithm) {
		c := clock.NewManual(t0)
		l := mustNew(t, alg, WithClock(c), WithWindow(100*time.Millisecond, time.Second), WithMinSamples(3))
		var held []Token
		for range 200 { // one admission every 20 ms for 4 s, each released 300 ms later
			held = append(held, mustAcquire(t, l))
			if len(held) > int(rtt/(20*time.Millisecond)) {
				held[0].Success()
				held = held[1:]
			}
			c.Advance(20 * time.Millisecond)
		}
	}
	probing := &prober{initial: 50}
	drive(probing)
	if len(probing.samples) < 3 {
		t.Fatalf("%d windows closed, want several", len(probing.samples))
	}
	if f := probing.samples[0].FloorMean; f != rtt {
		t.Fatalf("first window's floor %v, want %v", f, rtt)
	}
	for i, s := range probing.samples[1:] {
		if s.Window < 2*rtt {
			t.Fatalf("window %d lasted %v, want at least two round trips (%v)", i+1, s.Window, 2*rtt)
		}
	}
	other := &scripted{initial: 50}
	drive(other)
	for i, s := range other.samples {
		if s.Window >= 2*rtt {
			t.Fatalf("window %d of an algorithm that does not probe lasted %v, want WithWindow's", i, s.Window)
		}
	}
}
