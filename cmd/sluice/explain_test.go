package main

import (
	"bytes"
	"math"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/sim"
)

// fakeRun builds a result of s whose targets measured values.
func fakeRun(s sim.Scenario, policy string, values ...float64) *sim.Result {
	r := &sim.Result{Scenario: s.Name, Policy: policy, SLOms: 50, GoodputRatio: 0.8, P99ms: 30, Pass: true}
	for i, t := range s.Targets {
		v := values[i]
		pass := (t.Min == nil || v >= *t.Min) && (t.Max == nil || v <= *t.Max)
		r.Targets = append(r.Targets, sim.TargetResult{Target: t.String(), Value: v, Pass: pass})
		r.Pass = r.Pass && pass
	}
	return r
}

func TestExplainedOutput(t *testing.T) {
	step := sim.Scenario{Name: "step-2x", Change: 1, Targets: []sim.Target{
		sim.AtLeast("phase_goodput_ratio", 0.95), sim.AtMost("p99_over_slo", 1),
		sim.AtMost("settle_intervals", 10), sim.AtMost("late_reject_ratio", 0)}}
	prio := sim.Scenario{Name: "priorities-retries", Classes: []sim.Class{{Priority: 0}, {Priority: 3}}, Targets: []sim.Target{
		sim.AtLeast("p0_success", 0.999), sim.AtMost("inversion_ratio", 0.001)}}
	res := map[[2]string]*sim.Result{
		{"step-2x", "none"}:                     fakeRun(step, "none", 0.011, 266, math.Inf(1), 0),
		{"step-2x", "gradient"}:                 fakeRun(step, "gradient", 0.969, 0.58, 8, 0),
		{"priorities-retries", "none"}:          fakeRun(prio, "none", 0.11, 0),
		{"priorities-retries", "gradient"}:      fakeRun(prio, "gradient", 0.384, 0.288),
		{"priorities-retries", "shed-gradient"}: fakeRun(prio, "shed-gradient", 0.9998, 0.00019),
	}
	var b bytes.Buffer
	if code := printExplained(&b, 1, []sim.Scenario{step, prio}, []string{"none", "gradient", "shed-gradient"}, res, nil); code != 0 {
		t.Fatalf("code %d", code)
	}
	out := b.String()
	for _, want := range []string{
		// One row per scenario for the recommended policy, its verdict and the deciding number.
		"step-2x             gradient       pass 4/4  closest: goodput after the change 96.9% (needs ≥ 95.0%)",
		"priorities-retries  shed-gradient  pass 2/2  closest: P0 success 99.98% (needs ≥ 99.90%)",
		// The shedder sits under its gate, on its own row.
		"  + shedder",
		// Every target named in words.
		"time to settle", "from the change until p99 stays within the SLO",
		"priority inversions", "refusals within 10 ms of an admission of lower priority",
		"Baselines, for comparison (they are expected to fail): none admits everything",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	for _, l := range strings.Split(out, "\n") {
		if n := len([]rune(l)); n > 120 {
			t.Errorf("line of %d columns: %q", n, l)
		}
	}

	b.Reset()
	printExplain(&b, step, []string{"none", "gradient"}, res, nil)
	out = b.String()
	for _, want := range []string{"≤ 1.0 s", "never ✗", "0.8 s", "FAIL 1/4", "13 s ✗"} {
		if !strings.Contains(out, want) {
			t.Errorf("-explain output lacks %q:\n%s", want, out)
		}
	}
}

func TestShareString(t *testing.T) {
	for v, want := range map[float64]string{1: "100%", 0: "0%", 0.9998: "99.98%", 0.995: "99.50%", 0.969: "96.9%", 0.00019: "0.019%", 0.0047: "0.47%"} {
		if got := shareString(v); got != want {
			t.Errorf("shareString(%v) = %q, want %q", v, got, want)
		}
	}
}
