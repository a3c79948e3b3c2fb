package main

// failsafe-go on a virtual wall clock. failsafe-go's adaptivelimiter reads
// time.Now itself, so it can only run under sim.RunRealtime; inside a
// testing/synctest bubble the time package runs on a fake clock that jumps
// to the next timer whenever every goroutine of the bubble is blocked. There,
// RunRealtime at scale 1 plays a scenario in its own time with no timer
// lateness and no scheduling noise, as fast as the CPU allows: the full-length
// scenarios, not shortened copies, on as many seeds as wanted. Every policy,
// sluice's included, runs through the same path, so the comparison is like
// for like. (synctest.Test needs a *testing.T, which is why this part of the
// comparison is a test and not part of the command.)

import (
	"fmt"
	"math"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sluicehq/sluice/bench/internal/benchfmt"
	"github.com/sluicehq/sluice/bench/simpeers"
	"github.com/sluicehq/sluice/sim"
)

// runSynced runs sc under spec through sim.RunRealtime at scale 1 inside a
// synctest bubble: real goroutines and timers, a fake clock.
func runSynced(t *testing.T, sc sim.Scenario, spec sim.PolicySpec, seed uint64) *sim.Result {
	t.Helper()
	var r *sim.Result
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		res, err := sim.RunRealtime(sc, spec, seed, 1)
		if err != nil {
			t.Fatalf("%s under %s: %v", sc.Name, spec.Name, err)
		}
		// On the fake clock a run lasts exactly its scenario.
		if got := time.Since(start); got < sc.Duration {
			t.Fatalf("%s under %s: the bubble's clock moved %v, want at least %v", sc.Name, spec.Name, got, sc.Duration)
		}
		r = res
	})
	return r
}

func specs(t *testing.T, names ...string) []sim.PolicySpec {
	t.Helper()
	var out []sim.PolicySpec
	for _, n := range names {
		if n == "failsafe" {
			out = append(out, simpeers.Failsafe())
			continue
		}
		s, err := sim.FindPolicies(sim.BuiltinPolicies(), []string{n})
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, s...)
	}
	return out
}

// TestFailsafeOnAVirtualClock checks, on one full-length scenario (step-2x,
// seed 1), that the synced mode is faithful — sluice's gradient gate run
// through it measures what sim.Run measures — and that the gradient gate
// keeps its lead over failsafe-go there: no less goodput, lower p99.
func TestFailsafeOnAVirtualClock(t *testing.T) {
	scs, err := sim.FindScenarios(sim.Scenarios(), []string{"step-2x"})
	if err != nil {
		t.Fatal(err)
	}
	sc := scs[0]
	pols := specs(t, "gradient", "failsafe")
	grad := runSynced(t, sc, pols[0], 1)
	fs := runSynced(t, sc, pols[1], 1)
	virt, err := sim.Run(sc, pols[0], 1)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("gradient synced: phase goodput %.4f, p99 %.1f ms; virtual (sim.Run): %.4f, %.1f ms", grad.PhaseGoodput, grad.P99ms, virt.PhaseGoodput, virt.P99ms)
	t.Logf("failsafe synced: phase goodput %.4f, p99 %.1f ms", fs.PhaseGoodput, fs.P99ms)
	if d := math.Abs(grad.PhaseGoodput - virt.PhaseGoodput); d > 0.01 {
		t.Errorf("synced and virtual runs of the gradient gate differ by %.3f of phase goodput", d)
	}
	if d := math.Abs(grad.P99ms-virt.P99ms) / virt.P99ms; d > 0.1 {
		t.Errorf("synced and virtual runs of the gradient gate differ by %.0f%% of p99", 100*d)
	}
	if grad.PhaseGoodput < fs.PhaseGoodput-0.002 {
		t.Errorf("gradient phase goodput %.4f, failsafe-go %.4f", grad.PhaseGoodput, fs.PhaseGoodput)
	}
	if grad.P99ms > fs.P99ms {
		t.Errorf("gradient p99 %.1f ms, failsafe-go %.1f ms", grad.P99ms, fs.P99ms)
	}
}

// TestSyncedComparison writes the full comparison (part 4 of
// docs/simcompare.md) to the file named by SIMCOMPARE_SYNCED: every built-in
// scenario (or those named, comma-separated, in SIMCOMPARE_SCENARIOS), full
// length, seeds 1…SIMCOMPARE_SEEDS (default 5), under
// failsafe-go, sluice's gradient and sluice's vegas, each through the synced
// mode. About 5 minutes on 2 cores; skipped unless SIMCOMPARE_SYNCED is set:
//
//	cd bench && SIMCOMPARE_SYNCED=/tmp/part4.md go test -run TestSyncedComparison -count=1 -timeout 1h ./cmd/simcompare
func TestSyncedComparison(t *testing.T) {
	out := os.Getenv("SIMCOMPARE_SYNCED")
	if out == "" {
		t.Skip("set SIMCOMPARE_SYNCED to the file to write")
	}
	seeds := 5
	if s := os.Getenv("SIMCOMPARE_SEEDS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			t.Fatalf("SIMCOMPARE_SEEDS=%q: want a positive integer", s)
		}
		seeds = n
	}
	start := time.Now()
	pols := specs(t, "failsafe", "gradient", "vegas")
	scs := sim.Scenarios()
	if names := os.Getenv("SIMCOMPARE_SCENARIOS"); names != "" {
		var err error
		if scs, err = sim.FindScenarios(scs, strings.Split(names, ",")); err != nil {
			t.Fatal(err)
		}
	}
	type key struct{ sc, pol string }
	var mu sync.Mutex
	res := map[key][]*sim.Result{}
	t.Run("runs", func(t *testing.T) {
		for _, sc := range scs {
			for _, p := range pols {
				for seed := uint64(1); seed <= uint64(seeds); seed++ {
					t.Run(fmt.Sprintf("%s/%s/%d", sc.Name, p.Name, seed), func(t *testing.T) {
						t.Parallel()
						r := runSynced(t, sc, p, seed)
						mu.Lock()
						res[key{sc.Name, p.Name}] = append(res[key{sc.Name, p.Name}], r)
						mu.Unlock()
					})
				}
			}
		}
	})
	if t.Failed() {
		return
	}
	var b strings.Builder
	fmt.Fprintf(&b, "## 4. failsafe-go on a virtual wall clock: the full scenarios\n\n")
	fmt.Fprintf(&b, "Command: `cd bench && SIMCOMPARE_SYNCED=FILE go test -run TestSyncedComparison -count=1 -timeout 1h ./cmd/simcompare` (seeds 1…%d).\n\n", seeds)
	fmt.Fprintf(&b, "failsafe-go reads the wall clock, so it runs through sim.RunRealtime; here every run does so inside a `testing/synctest` bubble, whose fake clock jumps to the next timer whenever all of the run's goroutines wait. "+
		"A run then plays the built-in scenario at its full length, at scale 1, with no timer lateness, on any number of seeds (runs differ only in the order of goroutines at the same instant). "+
		"sluice's gates run through the same path (a CI test checks that they measure there what sim.Run measures). "+
		"Each cell: the median over the seeds, and the worst seed in brackets (lowest goodput, highest p99).\n\n")
	fmt.Fprintln(&b, "| scenario | policy | passed | goodput % | phase goodput % | p99 ms (SLO) | rejected % |")
	fmt.Fprintln(&b, "|---|---|--:|--:|--:|--:|--:|")
	type summary struct{ good, phase, p99 float64 }
	sum := map[key]summary{}
	for _, sc := range scs {
		for _, p := range pols {
			rs := res[key{sc.Name, p.Name}]
			pass := 0
			var good, phase, p99, rej []float64
			for _, r := range rs {
				if r.Pass {
					pass++
				}
				good = append(good, r.GoodputRatio)
				phase = append(phase, r.PhaseGoodput)
				p99 = append(p99, r.P99ms)
				rej = append(rej, r.RejectRatio)
			}
			sum[key{sc.Name, p.Name}] = summary{benchfmt.Median(good), benchfmt.Median(phase), benchfmt.Median(p99)}
			ph := "–"
			if sc.Change != 0 {
				ph = fmt.Sprintf("%s (%s)", pct(benchfmt.Median(phase)), pct(slices.Min(phase)))
			}
			fmt.Fprintf(&b, "| %s | %s | %d/%d | %s (%s) | %s | %.1f (%.1f) (%g) | %s |\n", sc.Name, p.Name, pass, len(rs),
				pct(benchfmt.Median(good)), pct(slices.Min(good)), ph, benchfmt.Median(p99), slices.Max(p99), rs[0].SLOms, pctFine(benchfmt.Median(rej)))
		}
	}
	fmt.Fprintf(&b, "\nsluice's gradient against failsafe-go, scenario by scenario (medians; goodput in points of capacity, over the change's phase where there is one). "+
		"Each figure is called better, equal (goodput within a quarter of a point, p99 within 1%%) or worse:\n\n")
	for _, sc := range scs {
		g, f := sum[key{sc.Name, "gradient"}], sum[key{sc.Name, "failsafe"}]
		dg := 100 * (g.good - f.good)
		if sc.Change != 0 {
			dg = 100 * (g.phase - f.phase)
		}
		fmt.Fprintf(&b, "- %s: goodput %+.2f points (%s), p99 %.1f against %.1f ms (%s).\n", sc.Name, dg, judge(dg, 0.25),
			g.p99, f.p99, judge(f.p99-g.p99, 0.01*f.p99))
	}
	fmt.Fprintf(&b, "\nWall time: %s on %d CPUs.\n", time.Since(start).Round(time.Second), runtime.GOMAXPROCS(0))
	if err := os.WriteFile(out, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("wrote %s", out)
}

// judge calls a difference d (positive: sluice better) better, equal
// (within tol) or worse.
func judge(d, tol float64) string {
	switch {
	case d > tol:
		return "better"
	case d >= -tol:
		return "equal"
	}
	return "worse"
}
