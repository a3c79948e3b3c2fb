// Command simcompare runs sluice's simulator scenarios under sluice's own
// policies and under its peers' (failsafe-go's adaptivelimiter, Netflix's
// VegasLimit and Gradient2Limit as published), and prints Markdown tables:
//
//  1. virtual time, every built-in scenario: sluice's gradient (and vegas,
//     when sim offers it) against netflix-vegas, netflix-gradient2 and
//     netflix-gradient2-1s;
//  2. virtual time, the same policies on the 4-core checks (package
//     simpeers' FourCore), with the claim about the classic formulas
//     checked line by line;
//  3. real time (sim.RunRealtime), a subset of the built-in scenarios with
//     their timeline shortened: failsafe against sluice's gradient, vegas
//     (when sim offers it) and static, side by side in the same run, with
//     virtual-time runs of sluice's policies on the same shortened
//     scenarios as a fidelity check.
//
// A fourth part is a test, because it needs testing/synctest: failsafe-go
// against sluice on the full-length scenarios, every run through
// sim.RunRealtime on a virtual wall clock (TestSyncedComparison in
// synced_test.go; `make simcompare` at the repository root writes all four
// parts to docs/simcompare.md).
//
// The virtual-time parts are deterministic for a given -seed; the real-time
// part is not (see sim.RunRealtime). With the defaults the whole command
// takes about three minutes of wall time on a 2-core machine: half a minute
// for parts 1 and 2 (virtual time, as many runs at once as there are CPUs),
// 2¼ minutes for part 3 (the scenarios' shortened durations times their
// scales: 13 s × 2 + 3 × 10 s × 2 + 7 s × 6.7).
//
// Usage:
//
//	go run ./cmd/simcompare [-seed 1] [-shorten 10] [-scale 2] [-parts 1,2,3]
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/sluicehq/sluice/bench/simpeers"
	"github.com/sluicehq/sluice/sim"
)

func main() {
	seed := flag.Uint64("seed", 1, "seed of every run")
	shorten := flag.Float64("shorten", 10, "part 3: divide the timeline of each real-time scenario by this factor")
	scale := flag.Float64("scale", 2, "part 3: least wall seconds per scenario second (raised per scenario so that scale·E[S] ≥ -fidelity)")
	fidelity := flag.Duration("fidelity", 10*time.Millisecond, "part 3: least wall time of a mean service time")
	parts := flag.String("parts", "1,2,3", "which tables to print")
	flag.Parse()
	cfg := config{seed: *seed, shorten: *shorten, scale: *scale, fidelity: *fidelity}
	for p := range strings.SplitSeq(*parts, ",") {
		switch strings.TrimSpace(p) {
		case "1":
			cfg.parts[0] = true
		case "2":
			cfg.parts[1] = true
		case "3":
			cfg.parts[2] = true
		default:
			fmt.Fprintf(os.Stderr, "simcompare: unknown part %q (want 1, 2 or 3)\n", p)
			os.Exit(2)
		}
	}
	if !(cfg.shorten >= 1) || !(cfg.scale > 0) || cfg.fidelity < 0 {
		fmt.Fprintln(os.Stderr, "simcompare: need -shorten ≥ 1, -scale > 0, -fidelity ≥ 0")
		os.Exit(2)
	}
	if err := run(os.Stdout, os.Stderr, cfg); err != nil {
		fmt.Fprintln(os.Stderr, "simcompare:", err)
		os.Exit(1)
	}
}

type config struct {
	seed     uint64
	shorten  float64
	scale    float64
	fidelity time.Duration
	parts    [3]bool
}

func run(out, log io.Writer, cfg config) error {
	start := time.Now()
	builtin := sim.BuiltinPolicies()
	sluice := []string{"gradient"}
	if hasPolicy(builtin, "vegas") {
		sluice = append(sluice, "vegas")
	}
	ours, err := sim.FindPolicies(builtin, sluice)
	if err != nil {
		return err
	}
	peers := []sim.PolicySpec{simpeers.NetflixVegas(), simpeers.NetflixGradient2(), simpeers.NetflixGradient2Windowed()}
	virtualPols := append(slices.Clone(ours), peers...)

	fmt.Fprintf(out, "# sluice against its peers in the simulator\n\n")
	fmt.Fprintf(out, "Command: `%s` (seed %d).\n\n", strings.Join(append([]string{"go run ./cmd/simcompare"}, os.Args[1:]...), " "), cfg.seed)
	fmt.Fprintf(out, "Policies:\n\n")
	for _, p := range append(slices.Clone(virtualPols), simpeers.Failsafe()) {
		fmt.Fprintf(out, "- `%s`: %s\n", p.Name, p.Description)
	}
	fmt.Fprintln(out)

	if cfg.parts[0] {
		t0 := time.Now()
		res, err := runVirtual(sim.Scenarios(), virtualPols, cfg.seed)
		if err != nil {
			return err
		}
		fmt.Fprintf(out, "## 1. Virtual time: the built-in scenarios\n\n")
		writeTable(out, res)
		fmt.Fprintf(out, "\nVirtual time (sim.Run), deterministic; wall time %s.\n\n", time.Since(t0).Round(100*time.Millisecond))
	}
	if cfg.parts[1] {
		t0 := time.Now()
		res, err := runVirtual(simpeers.FourCore(), virtualPols, cfg.seed)
		if err != nil {
			return err
		}
		fmt.Fprintf(out, "## 2. Virtual time: the 4-core checks\n\n")
		fmt.Fprintf(out, "Server: 4 cores, exponential 5 ms of CPU per request (800 rps), κ = 0.0002, rejections cost 2%%, cap 5,000 in flight; SLO 50 ms, clients give up at 100 ms.\n\n")
		writeTable(out, res)
		fmt.Fprintln(out)
		writeClaims(out, res)
		fmt.Fprintf(out, "\nVirtual time (sim.Run), deterministic; wall time %s.\n\n", time.Since(t0).Round(100*time.Millisecond))
	}
	if cfg.parts[2] {
		t0 := time.Now()
		sluiceRT, err := sim.FindPolicies(builtin, append(slices.Clone(sluice), "static"))
		if err != nil {
			return err
		}
		rtPols := append([]sim.PolicySpec{simpeers.Failsafe()}, sluiceRT...)
		scs, err := simpeers.RealtimeScenarios(cfg.shorten)
		if err != nil {
			return err
		}
		res, err := runRealtime(log, scs, rtPols, sluiceRT, cfg)
		if err != nil {
			return err
		}
		fmt.Fprintf(out, "## 3. Real time: failsafe-go against sluice\n\n")
		fmt.Fprintf(out, "Scenarios %s with their timelines shortened %g× (durations, warm-up, phases and changes divided by %g; service times, SLO and deadlines unchanged). "+
			"Each scenario runs under sim.RunRealtime at scale max(%g, %v / E[S]) (wall seconds per scenario second, shown per row); "+
			"the policies of one scenario run side by side, on the same seed (the same arrivals). "+
			"Rows marked virtual are the same shortened scenario in virtual time (sim.Run), for sluice's policies only: "+
			"how far a real-time row is from its virtual twin is the distortion of the real-time mode (timer lateness, scheduling).\n\n",
			strings.Join(simpeers.RealtimeNames, ", "), cfg.shorten, cfg.shorten, cfg.scale, cfg.fidelity)
		writeRealtimeTable(out, res)
		fmt.Fprintf(out, "\nWall time of part 3: %s.\n\n", time.Since(t0).Round(time.Second))
	}
	fmt.Fprintf(out, "Total wall time: %s.\n", time.Since(start).Round(time.Second))
	return nil
}

func hasPolicy(specs []sim.PolicySpec, name string) bool {
	return slices.ContainsFunc(specs, func(p sim.PolicySpec) bool { return p.Name == name })
}

// row is one run of a scenario under a policy.
type row struct {
	sc    sim.Scenario
	pol   string
	mode  string // "virtual" or "real-time ×scale"
	res   *sim.Result
	scale float64
}

// runVirtual runs every scenario under every policy in virtual time, as many
// at once as there are CPUs, and returns the rows scenario by scenario.
func runVirtual(scs []sim.Scenario, pols []sim.PolicySpec, seed uint64) ([]row, error) {
	rows := make([]row, len(scs)*len(pols))
	errs := make([]error, len(rows))
	sem := make(chan struct{}, runtime.GOMAXPROCS(0))
	var wg sync.WaitGroup
	for i, sc := range scs {
		for j, p := range pols {
			k := i*len(pols) + j
			wg.Go(func() {
				sem <- struct{}{}
				defer func() { <-sem }()
				r, err := sim.Run(sc, p, seed)
				rows[k] = row{sc: sc, pol: p.Name, mode: "virtual", res: r}
				if err != nil {
					errs[k] = fmt.Errorf("%s under %s: %w", sc.Name, p.Name, err)
				}
			})
		}
	}
	wg.Wait()
	return rows, errors.Join(errs...)
}

// rtScale is the scale of a scenario's real-time runs: at least cfg.scale,
// and enough that a mean service time lasts cfg.fidelity of wall time.
func rtScale(sc sim.Scenario, cfg config) float64 {
	mean := sc.Server.Service.MeanValue() + sc.Server.Wait.MeanValue()
	return max(cfg.scale, float64(cfg.fidelity)/float64(mean))
}

// runRealtime runs each scenario under every policy of pols in real time,
// all policies of a scenario at once (a run sleeps most of the time: the
// five-scenario comparison uses under a tenth of one CPU per run, so runs
// side by side barely delay each other, and they share whatever delay the
// machine adds), then under each policy of virt in virtual time.
func runRealtime(log io.Writer, scs []sim.Scenario, pols, virt []sim.PolicySpec, cfg config) ([]row, error) {
	var total time.Duration
	for _, sc := range scs {
		total += time.Duration(float64(sc.Duration) * rtScale(sc, cfg))
	}
	fmt.Fprintf(log, "simcompare: part 3 plays %s of wall time\n", total.Round(time.Second))
	var rows []row
	for _, sc := range scs {
		s := rtScale(sc, cfg)
		fmt.Fprintf(log, "simcompare: %s in real time (×%.3g, %s)\n", sc.Name, s, time.Duration(float64(sc.Duration)*s).Round(time.Second))
		rt := make([]row, len(pols))
		errs := make([]error, len(pols))
		var wg sync.WaitGroup
		for i, p := range pols {
			wg.Go(func() {
				r, err := sim.RunRealtime(sc, p, cfg.seed, s)
				rt[i] = row{sc: sc, pol: p.Name, mode: fmt.Sprintf("real time ×%.3g", s), res: r, scale: s}
				if err != nil {
					errs[i] = fmt.Errorf("%s under %s in real time: %w", sc.Name, p.Name, err)
				}
			})
		}
		wg.Wait()
		if err := errors.Join(errs...); err != nil {
			return nil, err
		}
		rows = append(rows, rt...)
	}
	// The virtual twins run after every real-time run, so that their CPU
	// use does not make the real-time runs late.
	var out []row
	for _, sc := range scs {
		for _, r := range rows {
			if r.sc.Name == sc.Name {
				out = append(out, r)
			}
		}
		for _, p := range virt {
			r, err := sim.Run(sc, p, cfg.seed)
			if err != nil {
				return nil, fmt.Errorf("%s under %s: %w", sc.Name, p.Name, err)
			}
			out = append(out, row{sc: sc, pol: p.Name, mode: "virtual", res: r})
		}
	}
	return out, nil
}

func pct(x float64) string { return fmt.Sprintf("%.1f", 100*x) }

func pctFine(x float64) string {
	if x > 0 && x < 0.001 {
		return fmt.Sprintf("%.3f", 100*x)
	}
	return fmt.Sprintf("%.2f", 100*x)
}

func p99(r *sim.Result) string {
	s := fmt.Sprintf("%.1f", r.P99ms)
	if r.P99ms > r.SLOms {
		s = "**" + s + "**"
	}
	return s
}

func phase(r row) string {
	if r.sc.Change == 0 {
		return "–"
	}
	return pct(r.res.PhaseGoodput)
}

// verdict is "pass", or "fail:" and the missed targets with their values.
func verdict(r *sim.Result) string {
	var missed []string
	for _, t := range r.Targets {
		if !t.Pass {
			v := t.Value
			s := fmt.Sprintf("%.3g", v)
			if math.IsInf(v, 1) {
				s = "never"
			}
			missed = append(missed, fmt.Sprintf("%s (%s)", t.Target, s))
		}
	}
	if len(missed) == 0 {
		return "pass"
	}
	return "fail: " + strings.Join(missed, "; ")
}

func writeTable(w io.Writer, rows []row) {
	fmt.Fprintln(w, "| scenario | policy | goodput % | phase goodput % | p99 ms (SLO) | rejected % | verdict |")
	fmt.Fprintln(w, "|---|---|--:|--:|--:|--:|---|")
	for _, r := range rows {
		fmt.Fprintf(w, "| %s | %s | %s | %s | %s (%g) | %s | %s |\n", r.sc.Name, r.pol, pct(r.res.GoodputRatio), phase(r),
			p99(r.res), r.res.SLOms, pctFine(r.res.RejectRatio), verdict(r.res))
	}
	fmt.Fprintln(w, "\nGoodput: completions within the SLO after warm-up, as % of capacity; phase goodput: the same over the phase after the change (step, drop); p99 of admitted requests (bold: above the SLO); rejected: % of attempts the policy refused.")
}

func writeRealtimeTable(w io.Writer, rows []row) {
	fmt.Fprintln(w, "| scenario | policy | mode | goodput % | phase goodput % | p99 ms (SLO) | rejected % |")
	fmt.Fprintln(w, "|---|---|---|--:|--:|--:|--:|")
	for _, r := range rows {
		fmt.Fprintf(w, "| %s | %s | %s | %s | %s | %s (%g) | %s |\n", r.sc.Name, r.pol, r.mode, pct(r.res.GoodputRatio), phase(r),
			p99(r.res), r.res.SLOms, pctFine(r.res.RejectRatio))
	}
}

// writeClaims checks the claim about the classic formulas on the
// 4-core server: Vegas rejects about 5% of the traffic at ρ = 0.7, Gradient2
// lets p99 exceed the SLO under overload.
func writeClaims(w io.Writer, rows []row) {
	get := func(sc, pol string) *sim.Result {
		for _, r := range rows {
			if r.sc.Name == sc && r.pol == pol {
				return r.res
			}
		}
		return nil
	}
	fmt.Fprintf(w, "The issue's claim, checked (\"in a processor-sharing model with 4 cores they either reject ~5%% of traffic at 70%% load (Vegas) or let p99 exceed the SLO under overload (Gradient2)\"):\n\n")
	var pols []string
	for _, r := range rows {
		if !slices.Contains(pols, r.pol) {
			pols = append(pols, r.pol)
		}
	}
	for _, p := range pols {
		a, b := get("4core-rho-0.7", p), get("4core-step-3x", p)
		if a == nil || b == nil {
			continue
		}
		fmt.Fprintf(w, "- `%s`: rejects %s%% at ρ = 0.7 (p99 %.1f ms); under 3× overload p99 %.1f ms against an SLO of %g ms (%s), phase goodput %s%%, rejects %s%%.\n",
			p, pctFine(a.RejectRatio), a.P99ms, b.P99ms, b.SLOms, overUnder(b), pct(b.PhaseGoodput), pct(b.RejectRatio))
	}
}

func overUnder(r *sim.Result) string {
	if r.P99ms > r.SLOms {
		return "over"
	}
	return "within"
}
