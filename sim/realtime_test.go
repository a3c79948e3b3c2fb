package sim

import (
	"errors"
	"math"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/goleak"
)

// Every real-time run must leave no goroutine behind.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// The real-time tests are the project's only tests that sleep: the issue
// asks that the two modes be shown to agree. Each plays its scenario in
// at most 2.5 s of wall time; all runs overlap (a run uses little CPU), and
// the tests are skipped with -short. They are also skipped, with the
// figures, when a run shows that the machine could not keep wall time (a
// mean lateness over maxMeanLateness: 0.6 ms on an idle 2-core machine, 3–9
// ms with both cores taken several times over, where the figures drift by
// up to 0.15): the comparison would then measure the machine's load, not
// the simulator, and make test must not fail for it.

// rtCase is one scenario and policy to run in both modes.
type rtCase struct {
	name   string
	sc     Scenario
	policy string
	seed   uint64

	virtual, realtime *Result
	stats             rtStats
}

// runBothModes runs every case in virtual time and, all at once, in real
// time at the given scale (a run sleeps most of the time, so they overlap
// without slowing each other; t.Parallel would run only GOMAXPROCS at once).
func runBothModes(t *testing.T, scale float64, cases []*rtCase) {
	t.Helper()
	for _, c := range cases {
		v, err := Run(c.sc, policy(t, c.policy), c.seed)
		if err != nil {
			t.Fatal(err)
		}
		c.virtual = v
	}
	errs := make([]error, len(cases))
	var wg sync.WaitGroup
	for i, c := range cases {
		pol := policy(t, c.policy)
		wg.Go(func() { c.realtime, c.stats, errs[i] = runRealtime(c.sc, pol, c.seed, scale) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	for _, c := range cases {
		for _, l := range []lagStats{c.stats.admit, c.stats.done} {
			if l.n > 0 && l.sum/time.Duration(l.n) > maxMeanLateness {
				for _, c := range cases {
					logBothModes(t, c)
				}
				t.Skipf("%s: the machine kept wall time only within %v (mean lateness over %v): too busy for a wall-clock comparison", c.name, l, maxMeanLateness)
			}
		}
	}
}

// maxMeanLateness is the mean lateness of a real-time run beyond which the
// comparison with virtual time is skipped (see the top of the file).
const maxMeanLateness = 2 * time.Millisecond

// rtStep is step-2x in small: 0.5× capacity for 4 s, then 2× for 6 s. The
// service time is long (160 ms, 40 ms of wall time at scale 0.25) so that
// the lateness of the real-time mode (0.6 ms of wall time on an idle
// machine, a few ms on a busy one) is small beside it; 32 cores keep the
// capacity at 200 rps, about 2,800 requests in all.
func rtStep() Scenario {
	return Scenario{
		Name:     "rt-step-2x",
		Duration: 10 * time.Second, Warmup: 2 * time.Second,
		Server: Server{Cores: 32, Service: Exp(160 * time.Millisecond), Contention: 0.0002, RejectCost: 0.02, MaxInFlight: 5000},
		Load:   steps(0.5, 4, 2),
		Change: 4 * time.Second,
	}
}

// TestRealtimeAgreesWithVirtualTime runs the same scenario, seed and
// policies in both modes. Both see the very same arrivals (the same PCG
// streams, so Poisson noise is shared, not compared); what differs is that in
// real time the gate reads the wall clock, requests reach the server and
// leave the gate late, and the gate's sampling window, unscaled, spans 4×
// more scenario time.
//
// Measured under -race: on an idle 2-core machine, goodput and reject ratios
// within 0.005 of virtual time and static's p50 within 1.5%; AIMD's p50 is
// 12% lower in real time, all of it from the unscaled window (with the
// window scaled by 0.25 it is within 1.5%). With both cores taken by other
// processes (mean lateness up to 4 ms, stalls of 100–150 ms): within 0.02,
// and p50 within 12%. The tolerances (±0.05, 1.5×) leave three times that.
func TestRealtimeAgreesWithVirtualTime(t *testing.T) {
	if testing.Short() {
		t.Skip("plays a scenario in wall-clock time")
	}
	t.Parallel()
	cases := []*rtCase{
		{name: "static", sc: rtStep(), policy: "static", seed: 1},
		{name: "aimd", sc: rtStep(), policy: "aimd", seed: 1},
	}
	runBothModes(t, 0.25, cases)
	for _, c := range cases {
		v, r := c.virtual, c.realtime
		logBothModes(t, c)
		if d := math.Abs(float64(r.Requests - v.Requests)); d > 0.01*float64(v.Requests) {
			t.Errorf("%s: %d attempts in real time, %d in virtual time: not the same arrivals", c.name, r.Requests, v.Requests)
		}
		if d := math.Abs(r.GoodputRatio - v.GoodputRatio); d > 0.05 {
			t.Errorf("%s: goodput ratio %.3f in real time, %.3f in virtual time", c.name, r.GoodputRatio, v.GoodputRatio)
		}
		if d := math.Abs(r.RejectRatio - v.RejectRatio); d > 0.05 {
			t.Errorf("%s: reject ratio %.3f in real time, %.3f in virtual time", c.name, r.RejectRatio, v.RejectRatio)
		}
		if q := r.P50ms / v.P50ms; !(q <= 1.5 && q >= 1/1.5) {
			t.Errorf("%s: p50 %.1f ms in real time, %.1f ms in virtual time", c.name, r.P50ms, v.P50ms)
		}
	}
}

func logBothModes(t *testing.T, c *rtCase) {
	t.Helper()
	t.Logf("%s: lateness in wall time: admit %v; done %v", c.name, c.stats.admit, c.stats.done)
	for _, x := range []struct {
		mode string
		r    *Result
	}{{"virtual", c.virtual}, {"real-time", c.realtime}} {
		t.Logf("  %-9s goodput %.3f, rejected %.3f, p50 %.1f ms, p99 %.1f ms, cap hits %d, wasted %.3f, retry amp %.3f, %d attempts",
			x.mode, x.r.GoodputRatio, x.r.RejectRatio, x.r.P50ms, x.r.P99ms, x.r.CapHits, x.r.WastedRatio, x.r.RetryAmp, x.r.Requests)
	}
}

// TestRealtimeExercisesEveryPath runs a hostile little scenario through the
// real-time mode — dependency waits, a capacity change, bursts, priorities,
// retries with a budget, the in-flight cap, rejection cost, and client
// deadlines both honoured (aborts in the CPU phase and in the wait) and not
// (the client retries while the server works on) — and checks that each
// path left its mark and that the result still roughly matches virtual
// time. Its service time is 20 ms of wall time and most of its goodput hangs
// on deadlines, so it is more sensitive to lateness than the test above:
// within 0.02 on an idle machine, up to 0.055 while the race-enabled tests
// of other packages were being built and run alongside; hence ±0.1.
func TestRealtimeExercisesEveryPath(t *testing.T) {
	if testing.Short() {
		t.Skip("plays a scenario in wall-clock time")
	}
	t.Parallel()
	mixed := func(honour bool) Scenario {
		return Scenario{
			Name:     "rt-mixed",
			Duration: 4 * time.Second, Warmup: 500 * time.Millisecond,
			Server: Server{Cores: 8, Service: Exp(80 * time.Millisecond), Wait: Const(80 * time.Millisecond),
				Contention: 0.0025, RejectCost: 0.05, MaxInFlight: 120, HonourDeadlines: honour,
				Changes: []Change{{At: 2 * time.Second, ServiceFactor: 2, WaitFactor: 3, WaitPriorities: []int{3}}}},
			Load:    []Phase{{At: 0, Load: 0.5}, {At: time.Second, Load: 3, Ramp: true}},
			Bursts:  &Bursts{Load: 4, Length: 100 * time.Millisecond, Period: time.Second},
			Classes: []Class{{Priority: 0, Share: 0.3}, {Priority: 3, Share: 0.7}},
			Retry:   Retry{Attempts: 3, Backoff: 80 * time.Millisecond, MaxBackoff: 800 * time.Millisecond, Budget: 0.2},
			SLO:     400 * time.Millisecond,
		}
	}
	cases := []*rtCase{
		{name: "honoured deadlines, no limit", sc: mixed(true), policy: "none", seed: 3},
		{name: "ignored deadlines, static", sc: mixed(false), policy: "static", seed: 3},
	}
	runBothModes(t, 0.25, cases)
	for _, c := range cases {
		v, r := c.virtual, c.realtime
		logBothModes(t, c)
		if want := int(c.sc.Duration / (100 * time.Millisecond)); len(r.Series) != want {
			t.Errorf("%s: %d points in the series, want %d", c.name, len(r.Series), want)
		}
		if r.RetryAmp <= 1 || r.WastedRatio <= 0 || len(r.PerPriority) != 2 {
			t.Errorf("%s: retry amplification %.3f, wasted %.3f, %d priorities: a path was not taken",
				c.name, r.RetryAmp, r.WastedRatio, len(r.PerPriority))
		}
		if c.policy == "none" && r.CapHits == 0 {
			t.Errorf("%s: no cap hits without a limit", c.name)
		}
		if c.policy != "none" && r.RejectRatio == 0 {
			t.Errorf("%s: no rejections at 3× capacity", c.name)
		}
		agree(t, c.name, 0.1, r, v, "goodput_ratio", "reject_ratio", "retry_amplification", "wasted_ratio")
	}
}

// agree reports each named figure (see Result.metric) on which the
// real-time result rt and the virtual-time one v differ by more than tol.
func agree(t *testing.T, what string, tol float64, rt, v *Result, names ...string) {
	t.Helper()
	for _, n := range names {
		x, _ := rt.metric(n)
		y, _ := v.metric(n)
		if math.Abs(x-y) > tol {
			t.Errorf("%s: %s %.4f in real time, %.4f in virtual time", what, n, x, y)
		}
	}
}

func TestRealtimeRefusesBadArguments(t *testing.T) {
	good := rtStep()
	bad := good
	bad.Server.Cores = 0
	failing := PolicySpec{Name: "broken", New: func(Env) (Policy, error) { return nil, errors.New("no policy") }}
	tests := []struct {
		name  string
		sc    Scenario
		spec  PolicySpec
		scale float64
		want  string
	}{
		{"zero scale", good, policy(t, "static"), 0, "scale"},
		{"negative scale", good, policy(t, "static"), -1, "scale"},
		{"NaN scale", good, policy(t, "static"), math.NaN(), "scale"},
		{"infinite scale", good, policy(t, "static"), math.Inf(1), "scale"},
		{"invalid scenario", bad, policy(t, "static"), 1, "cores 0"},
		{"policy fails", good, failing, 1, "no policy"},
	}
	for _, tt := range tests {
		r, err := RunRealtime(tt.sc, tt.spec, 1, tt.scale)
		if err == nil || r != nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: result %v, error %v; want no result and an error mentioning %q", tt.name, r, err, tt.want)
		}
	}
}

// TestRealtimeEnvIsInWallTime checks that the policy is built on the system
// clock with the server's figures converted to wall time.
func TestRealtimeEnvIsInWallTime(t *testing.T) {
	sc := rtStep()
	var got Env
	spec := PolicySpec{Name: "probe", New: func(e Env) (Policy, error) {
		got = e
		return nil, errors.New("probe only")
	}}
	if _, err := RunRealtime(sc, spec, 1, 0.25); err == nil {
		t.Fatal("want the probe's error")
	}
	if got.Clock == nil || got.Clock.Now().IsZero() || time.Since(got.Clock.Now()) > time.Minute {
		t.Errorf("clock %v does not read the wall clock", got.Clock)
	}
	if got.MeanService != 40*time.Millisecond || got.SLO != 400*time.Millisecond || got.Capacity != 800 || got.Cores != 32 {
		t.Errorf("env %+v: want 40ms service, 400ms SLO, 800 rps, 32 cores (scenario figures × 0.25)", got)
	}
	if got.TunedLimit() != 96 {
		t.Errorf("tuned limit %d, want 96 as in virtual time", got.TunedLimit())
	}
}

// On the fake clock of a testing/synctest bubble, RunRealtime at scale 1 has
// no timer lateness: it must measure what Run measures, clients' adaptive
// throttling included (it used to be left out, so priorities-retries sent a
// third more attempts in real time than in virtual time).
func TestRealtimeOnAFakeClockMatchesRun(t *testing.T) {
	sc := short(scenario(t, "priorities-retries"), 0.2)
	p := policy(t, "gradient")
	virt, err := Run(sc, p, 1)
	if err != nil {
		t.Fatal(err)
	}
	var rt *Result
	synctest.Test(t, func(t *testing.T) {
		if rt, err = RunRealtime(sc, p, 1, 1); err != nil {
			t.Error(err)
		}
	})
	if rt == nil {
		return
	}
	if virt.ThrottledRatio == 0 {
		t.Fatal("the scenario throttles nothing: no check")
	}
	agree(t, "priorities-retries on a fake clock", 0.02, rt, virt, "throttled_ratio", "reject_ratio", "goodput_ratio")
}
