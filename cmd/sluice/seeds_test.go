package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/sim/article"
)

const allSeedScenarios = "seed-boundary-attack,seed-token-bucket,seed-sliding-window,seed-gcra"

func runOK(t *testing.T, args ...string) string {
	t.Helper()
	var out, errb bytes.Buffer
	if code := run(args, &out, &errb); code != 0 {
		t.Fatalf("run(%q) = %d, stderr:\n%s", args, code, errb.String())
	}
	return out.String()
}

func TestSimSeedScenarios(t *testing.T) {
	out := runOK(t, "sim", "-scenario", allSeedScenarios)
	for _, want := range []string{
		"seed-boundary-attack", "fixed_window_peak_60s", "sliding_window_peak_60s",
		"seed-token-bucket", "205 of 500", "1000 of 1000",
		"seed-sliding-window", "mean_abs_error", "1 of 239",
		"seed-gcra", "11 of 20", "min_spacing_ms",
		"seed 1;", "pass",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output does not contain %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "FAIL") {
		t.Errorf("a seed scenario misses a target:\n%s", out)
	}
	if strings.Contains(out, "goodput") {
		t.Errorf("only seed scenarios were named, but the policy table is printed:\n%s", out)
	}
	if again := runOK(t, "sim", "-scenario", allSeedScenarios); again != out {
		t.Errorf("two runs print different tables:\n%s\n%s", out, again)
	}
	if other := runOK(t, "sim", "-scenario", allSeedScenarios, "-seed", "2"); other == out {
		t.Error("seeds 1 and 2 print the same table (seed-sliding-window is random)")
	}
}

func TestSimSeedScenariosJSON(t *testing.T) {
	out := runOK(t, "sim", "-scenario", "seed-gcra,seed-sliding-window", "-json", "-seeds", "2")
	var got []string
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		var r article.Result
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("%v: %s", err, sc.Text())
		}
		if !r.Pass || len(r.Figures) == 0 {
			t.Errorf("%s seed %d: pass %v, %d figures", r.Scenario, r.Seed, r.Pass, len(r.Figures))
		}
		got = append(got, fmt.Sprintf("%s/%d", r.Scenario, r.Seed))
	}
	if want := "seed-gcra/1 seed-sliding-window/1 seed-gcra/2 seed-sliding-window/2"; strings.Join(got, " ") != want {
		t.Errorf("JSON lines %v, want %s", got, want)
	}
}

func TestSimSeedScenariosSeeds(t *testing.T) {
	out := runOK(t, "sim", "-scenario", "seed-sliding-window,seed-token-bucket", "-seeds", "3")
	for _, want := range []string{"median", "3/3", "seeds 1…3;", "second_burst_admitted"} {
		if !strings.Contains(out, want) {
			t.Errorf("output does not contain %q:\n%s", want, out)
		}
	}
}

// Policy scenarios and seed scenarios together: the policy table first, then
// the seed table; -json gives both kinds of lines.
func TestSimSeedScenariosAfterPolicyScenarios(t *testing.T) {
	out := runOK(t, "sim", "-scenario", "seed-gcra,no-harm", "-policy", "none")
	i, j := strings.Index(out, "no-harm"), strings.Index(out, "burst_admitted")
	if i < 0 || j < 0 || i > j || !strings.Contains(out[i:j], "goodput: completions within the SLO") {
		t.Errorf("want the policy table, its note, then the seed table:\n%s", out)
	}
	out = runOK(t, "sim", "-scenario", "no-harm,seed-gcra", "-policy", "none", "-json")
	if lines := strings.Split(strings.TrimSpace(out), "\n"); len(lines) != 2 ||
		!strings.Contains(lines[0], `"policy":"none"`) || !strings.Contains(lines[1], `"scenario":"seed-gcra"`) {
		t.Errorf("JSON lines:\n%s", out)
	}
}

func TestSimSeedScenariosListedAndChecked(t *testing.T) {
	out := runOK(t, "sim", "-list")
	for _, s := range article.Scenarios() {
		if !strings.Contains(out, s.Name+" ") {
			t.Errorf("-list does not list %s:\n%s", s.Name, out)
		}
	}
	var o, e bytes.Buffer
	if code := run([]string{"sim", "-scenario", "seed-gcra,seed-bogus"}, &o, &e); code != 2 || !strings.Contains(e.String(), `"seed-bogus"`) {
		t.Errorf("unknown seed scenario: code %d, stderr %q", code, e.String())
	}
}
