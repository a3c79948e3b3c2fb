package main

import (
	"bytes"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/sluicehq/sluice/sim"
)

// quickMatrix is the -quick subset: every model, 4 and 16 cores,
// exponential service, six scenarios, two seeds.
var quickMatrix = struct {
	cores, dists, scenarios string
	seeds                   int
}{"4,16", "exp", "cold-5x,steady-2x,halve-cores,halve-service,no-harm-0.95,bursts", 2}

// runMatrix is `sluice matrix`: the incident scenarios on every cell of the
// server zoo under every policy (sim.RunMatrix), written as a markdown
// report.
func runMatrix(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("matrix", flag.ContinueOnError)
	fs.SetOutput(stderr)
	models := fs.String("models", "", "comma-separated server models: ps, pool, fifo, fixed-wait, gc, or base+wait+gc (default: the five)")
	cores := fs.String("cores", "", "comma-separated core counts (default: 1,4,16,64)")
	dists := fs.String("dists", "", "comma-separated service distributions: exp, lognormal, bimodal (default: all)")
	scenarios := fs.String("scenarios", "", "comma-separated incident scenarios (default: all; -list names them)")
	policies := fs.String("policies", "", "comma-separated policies (default: none, static, gradient, vegas, aimd)")
	seeds := fs.Int("seeds", 5, "seeds per policy; a row is judged on the worst")
	seed := fs.Uint64("seed", 1, "first seed")
	sweepSeeds := fs.Int("sweep-seeds", 1, "seeds per candidate in the search for the best fixed limit")
	parallel := fs.Int("parallel", 0, "rows run at once (default: GOMAXPROCS)")
	scale := fs.Float64("scale", 1, "compress every scenario in time by this factor, for a quick look (the targets are meant for 1)")
	quick := fs.Bool("quick", false, "a small subset: cores "+quickMatrix.cores+", "+quickMatrix.dists+" service, scenarios "+
		quickMatrix.scenarios+", "+strconv.Itoa(quickMatrix.seeds)+" seeds (flags given explicitly win)")
	out := fs.String("out", "", "write the markdown report to this file (default: print it)")
	list := fs.Bool("list", false, "list the models, distributions and scenarios and exit")
	trace := fs.String("trace", "", "print one row's time series instead of the report: model/cores/dist/scenario, e.g. ps/16/bimodal/halve-cores (policies: -policies, default gradient-default; seed: -seed)")
	every := fs.Duration("every", 500*time.Millisecond, "with -trace, the length of each printed interval")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "sluice matrix: unexpected arguments %q\n", fs.Args())
		return 2
	}
	if *list {
		listMatrix(stdout)
		return 0
	}
	if *trace != "" {
		pols := "gradient-default"
		if *policies != "" {
			pols = *policies
		}
		return traceRow(stdout, stderr, *trace, pols, *seed, *every)
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if *quick {
		if !set["cores"] {
			*cores = quickMatrix.cores
		}
		if !set["dists"] {
			*dists = quickMatrix.dists
		}
		if !set["scenarios"] {
			*scenarios = quickMatrix.scenarios
		}
		if !set["seeds"] {
			*seeds = quickMatrix.seeds
		}
	}
	cfg := sim.MatrixConfig{Seeds: *seeds, Seed: *seed, SweepSeeds: *sweepSeeds, Parallel: *parallel, Scale: *scale}
	var err error
	if *models != "" {
		if cfg.Models, err = sim.FindZooModels(split(*models)); err != nil {
			fmt.Fprintln(stderr, err)
			return 2
		}
	}
	if *cores != "" {
		for _, c := range split(*cores) {
			n, err := strconv.Atoi(c)
			if err != nil || n < 1 {
				fmt.Fprintf(stderr, "sluice matrix: bad core count %q\n", c)
				return 2
			}
			cfg.Cores = append(cfg.Cores, n)
		}
	}
	if *dists != "" {
		if cfg.Dists, err = sim.FindZooDists(split(*dists)); err != nil {
			fmt.Fprintln(stderr, err)
			return 2
		}
	}
	if *scenarios != "" {
		cfg.Scenarios = split(*scenarios)
	}
	if *policies != "" {
		all := append(sim.BuiltinPolicies(), sim.ExtraPolicies()...)
		if cfg.Policies, err = sim.FindPolicies(all, split(*policies)); err != nil {
			fmt.Fprintln(stderr, err)
			return 2
		}
	}
	if *seeds < 1 || *sweepSeeds < 1 || *parallel < 0 || !(*scale > 0) {
		fmt.Fprintln(stderr, "sluice matrix: -seeds and -sweep-seeds must be at least 1, -parallel not negative, -scale positive")
		return 2
	}
	// The simulator allocates a request per arrival in flight: a lazier GC
	// saves about a tenth of the CPU at some tens of MB more.
	defer debug.SetGCPercent(debug.SetGCPercent(400))
	start := time.Now()
	if isTerminal(stderr) {
		cfg.Progress = func(done, total int) {
			fmt.Fprintf(stderr, "\rsluice matrix: %d/%d rows, %s", done, total, time.Since(start).Round(time.Second))
		}
	}
	m, err := sim.RunMatrix(cfg)
	if cfg.Progress != nil {
		fmt.Fprintln(stderr)
	}
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 2
	}
	took := time.Since(start)
	var b bytes.Buffer
	writeMatrix(&b, m, append([]string{"matrix"}, args...), took)
	code := 0
	if errs := matrixErrors(m); len(errs) > 0 {
		for _, e := range errs {
			fmt.Fprintln(stderr, "sluice matrix:", e)
		}
		code = 1
	}
	if *out == "" {
		stdout.Write(b.Bytes())
		return code
	}
	if err := os.MkdirAll(filepath.Dir(*out), 0o755); err != nil {
		fmt.Fprintln(stderr, "sluice matrix:", err)
		return 1
	}
	if err := os.WriteFile(*out, b.Bytes(), 0o644); err != nil {
		fmt.Fprintln(stderr, "sluice matrix:", err)
		return 1
	}
	for _, s := range m.Summary() {
		fmt.Fprintf(stdout, "%s: %d/%d rows pass\n", s.Policy, s.Passed, s.Rows)
	}
	fmt.Fprintf(stdout, "%d rows in %s; report: %s\n", len(m.Rows), took.Round(time.Second), *out)
	return code
}

// traceRow is `sluice matrix -trace`: one zoo row (model/cores/dist/
// scenario) run once per policy with the given seed, its targets judged
// and its series printed at intervals of every: what the policy did, and
// what the model believed (its floor against the true one).
func traceRow(stdout, stderr io.Writer, row, policies string, seed uint64, every time.Duration) int {
	sc, err := zooScenario(row)
	if err == nil && every <= 0 {
		err = fmt.Errorf("-every %v: must be positive", every)
	}
	var specs []sim.PolicySpec
	if err == nil {
		specs, err = sim.FindPolicies(append(sim.BuiltinPolicies(), sim.ExtraPolicies()...), split(policies))
	}
	if err != nil {
		fmt.Fprintln(stderr, "sluice matrix:", err)
		return 2
	}
	for _, spec := range specs {
		r, err := sim.Run(sc, spec, seed)
		if err != nil {
			fmt.Fprintln(stderr, "sluice matrix:", err)
			return 1
		}
		fmt.Fprintf(stdout, "%s, %s, seed %d:", row, spec.Name, seed)
		for _, t := range r.Targets {
			switch {
			case t.NA:
				fmt.Fprintf(stdout, " %s n/a;", t.Target)
			case t.Pass:
				fmt.Fprintf(stdout, " %s pass (%.3g);", t.Target, t.Value)
			default:
				fmt.Fprintf(stdout, " %s FAIL (%.3g);", t.Target, t.Value)
			}
		}
		fmt.Fprintln(stdout)
		tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "t s\toffered/s\tgoodput/s\trefused/s\tcapacity/s\tp99 ms\tlimit\tin flight\tfloor ms\ttrue floor ms\t")
		var acc sim.Point
		n := 0
		for i, p := range r.Series {
			acc.Offered += p.Offered
			acc.Goodput += p.Goodput
			acc.Rejected += p.Rejected
			acc.Capacity += p.Capacity
			acc.P99 = max(acc.P99, p.P99)
			n++
			if p.T%every != 0 && i < len(r.Series)-1 {
				continue
			}
			k := float64(n)
			fmt.Fprintf(tw, "%.2f\t%.0f\t%.0f\t%.0f\t%.0f\t%.1f\t%d\t%d\t%.2f\t%.2f\t\n", p.T.Seconds(), acc.Offered/k, acc.Goodput/k,
				acc.Rejected/k, acc.Capacity/k, ms(acc.P99), p.Limit, p.InFlight, ms(p.Floor), ms(p.FloorTrue))
			acc, n = sim.Point{}, 0
		}
		tw.Flush()
	}
	return 0
}

// zooScenario finds the incident scenario of a zoo row named
// model/cores/dist/scenario.
func zooScenario(row string) (sim.Scenario, error) {
	parts := strings.Split(row, "/")
	if len(parts) != 4 {
		return sim.Scenario{}, fmt.Errorf("-trace %q: want model/cores/dist/scenario, e.g. ps/16/bimodal/halve-cores", row)
	}
	models, err := sim.FindZooModels(parts[:1])
	if err != nil {
		return sim.Scenario{}, err
	}
	cores, err := strconv.Atoi(parts[1])
	if err != nil || cores < 1 {
		return sim.Scenario{}, fmt.Errorf("-trace %q: bad core count %q", row, parts[1])
	}
	dists, err := sim.FindZooDists(parts[2:3])
	if err != nil {
		return sim.Scenario{}, err
	}
	for _, sc := range sim.Incidents(models[0].Server(cores, dists[0])) {
		if sc.Name == parts[3] {
			return sc, nil
		}
	}
	return sim.Scenario{}, fmt.Errorf("-trace %q: unknown incident scenario %q (-list names them)", row, parts[3])
}

// ms is d in milliseconds.
func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func split(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// isTerminal reports whether w is a character device (a terminal).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

func listMatrix(w io.Writer) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "MODEL\tDESCRIPTION")
	for _, m := range sim.ZooModels() {
		fmt.Fprintf(tw, "%s\t%s\n", m.Name, m.Description)
	}
	fmt.Fprintln(tw, "\nDISTRIBUTION\tDESCRIPTION")
	for _, d := range sim.ZooDists() {
		fmt.Fprintf(tw, "%s\t%s\n", d.Name, d.Description)
	}
	fmt.Fprintln(tw, "\nSCENARIO\tDESCRIPTION")
	for _, s := range sim.Incidents(sim.ZooModels()[0].Server(1, sim.ZooDists()[0])) {
		fmt.Fprintf(tw, "%s\t%s\n", s.Name, s.Description)
	}
	tw.Flush()
	fmt.Fprintf(w, "\ncores: %s (mean CPU time: cores × 1 ms, capacity %d requests/s)\n", joinInts(sim.ZooCores), sim.ZooCapacity)
}

func joinInts(xs []int) string {
	var s []string
	for _, x := range xs {
		s = append(s, strconv.Itoa(x))
	}
	return strings.Join(s, ",")
}

// matrixErrors lists the runs that failed.
func matrixErrors(m *sim.Matrix) []string {
	var out []string
	for _, r := range m.Rows {
		if r.Best.Err != nil {
			out = append(out, fmt.Sprintf("%s: best fixed limit: %v", rowName(r), r.Best.Err))
		}
		for _, v := range r.Policies {
			if v.Err != nil {
				out = append(out, fmt.Sprintf("%s: %s: %v", rowName(r), v.Policy, v.Err))
			}
		}
	}
	return out
}

func rowName(r sim.MatrixRow) string {
	return fmt.Sprintf("%s/%d/%s/%s", r.Model, r.Cores, r.Dist, r.Scenario)
}

// checkLabels name the figures of the checks in the report.
var checkLabels = map[string]string{
	"incident_goodput_ratio": "goodput",
	"incident_p99_over_slo":  "p99",
	"incident_served_ratio":  "served",
	"early_goodput_ratio":    "early goodput",
	"early_p99_over_slo":     "early p99",
	"late_reject_ratio":      "refused after restore",
	"reject_ratio":           "refused",
	"loss_over_bound":        "loss over bound",
	"p99_over_slo":           "p99",
	"floor_error":            "floor error",
}

func checkLabel(metric string) string {
	if l, ok := checkLabels[metric]; ok {
		return l
	}
	return metric
}

// fmtCheck formats a figure of a check: ratios in percent, p99s in SLOs,
// the loss over the bound in points.
func fmtCheck(metric string, v float64) string {
	switch {
	case math.IsNaN(v):
		return "n/a"
	case strings.HasSuffix(metric, "_over_slo"):
		return fmt.Sprintf("%.2f×SLO", v)
	case metric == "loss_over_bound":
		return fmt.Sprintf("%+.1f pts", 100*v)
	case metric == "reject_ratio" || metric == "late_reject_ratio":
		return fmt.Sprintf("%.2f%%", 100*v)
	}
	return fmt.Sprintf("%.1f%%", 100*v)
}

// fmtTarget formats a check's target, e.g. "goodput ≥ 95.0%".
func fmtTarget(t sim.Target) string {
	s := checkLabel(t.Metric)
	if t.Min != nil {
		s += " ≥ " + fmtCheck(t.Metric, *t.Min)
	}
	if t.Max != nil {
		s += " ≤ " + fmtCheck(t.Metric, *t.Max)
	}
	return s
}

// writeMatrix writes the matrix report: the per-policy summary, pass counts
// by scenario, model and check, the rows where even the best fixed limit
// misses the targets, and a table per model with every row.
func writeMatrix(w io.Writer, m *sim.Matrix, args []string, took time.Duration) {
	cfg := m.Config
	fmt.Fprintf(w, "# sluice server-zoo matrix\n\n")
	fmt.Fprintf(w, "Command: `%s`  \n", commandLine(args))
	fmt.Fprintf(w, "Seeds %d…%d, each row judged on the worst of the %d; best fixed limit swept on %d seed(s); %d rows, %s of wall time on %d goroutines.\n\n",
		cfg.Seed, cfg.Seed+uint64(cfg.Seeds)-1, cfg.Seeds, cfg.SweepSeeds, len(m.Rows), took.Round(time.Second), cfg.Parallel)
	if cfg.Scale > 0 && cfg.Scale != 1 {
		fmt.Fprintf(w, "**The scenarios are compressed in time by %g (-scale): a quick look, not the matrix the targets are meant for.**\n\n", cfg.Scale)
	}
	fmt.Fprintf(w, "Every row is a server model × cores × service distribution × incident scenario, run in virtual time against the real limiter code "+
		"(`sim.RunMatrix`). Every zoo server has a capacity of %d requests/s: the mean CPU time is cores × 1 ms; "+
		"the SLO is 10× the mean CPU time plus the fixed wait, and clients give up at 3× the SLO; rejections cost nothing.\n\n", sim.ZooCapacity)

	fmt.Fprintf(w, "## Summary\n\n")
	sum := m.Summary()
	for _, s := range sum {
		fmt.Fprintf(w, "- **%s: %d/%d rows pass**\n", s.Policy, s.Passed, s.Rows)
	}
	fmt.Fprintln(w)
	writeMatrixCounts(w, m, "scenario", cfg.Scenarios, func(r sim.MatrixRow) string { return r.Scenario })
	var models []string
	for _, mod := range cfg.Models {
		models = append(models, mod.Name)
	}
	writeMatrixCounts(w, m, "model", models, func(r sim.MatrixRow) string { return r.Model })
	var cores []string
	for _, c := range cfg.Cores {
		cores = append(cores, strconv.Itoa(c))
	}
	writeMatrixCounts(w, m, "cores", cores, func(r sim.MatrixRow) string { return strconv.Itoa(r.Cores) })
	var dists []string
	for _, d := range cfg.Dists {
		dists = append(dists, d.Name)
	}
	writeMatrixCounts(w, m, "distribution", dists, func(r sim.MatrixRow) string { return r.Dist })
	writeMatrixMisses(w, m)

	fmt.Fprintf(w, "## Targets\n\n")
	fmt.Fprintf(w, "Each row's targets are the scenario's own, below, unless even the best fixed limit misses one: then the target is 97%% of what the best fixed limit achieves "+
		"(for a figure bounded from above, that figure ÷ 0.97), marked * in the tables. A row passes when every seed meets every target.\n\n")
	fmt.Fprintf(w, "- goodput: completions within the SLO, as a share of the capacity of the moment, from 5 s after the surge, cold start or capacity change "+
		"(until the capacity comes back); early goodput: the same over the first 5 s after a change of capacity.\n")
	fmt.Fprintf(w, "- p99, early p99: of the successes (completions before the client's deadline) over the same spans, in SLOs.\n")
	fmt.Fprintf(w, "- served (ramp-3x): goodput ÷ min(offered, capacity), interval by interval, from 5 s after the ramp starts.\n")
	fmt.Fprintf(w, "- refused: the share of attempts the policy refused after the warm-up (no-harm); refused after restore: from the moment capacity comes back.\n")
	fmt.Fprintf(w, "- loss over bound (bursts): the share of requests refused or not served within the SLO, less the least share any policy must lose on the same arrivals "+
		"(a fluid bound, see `sim/bound.go`); the margin is %.0f points.\n", 100*sim.BurstsMargin)
	fmt.Fprintf(w, "- floor error: the policy's estimate of the service's floor (`Floor()`, else gradient's `Baseline()` or vegas's `NoLoadRTT()`) against the true RTT "+
		"of a request served alone, at the end of every 100 ms interval at least 10 s after any change; 0 between the true median and mean, "+
		"else the relative distance to the nearer; n/a for a policy without an estimate (the target is then met).\n\n")
	fmt.Fprintf(w, "Scenarios:\n\n")
	for _, s := range sim.Incidents(sim.ZooModels()[0].Server(1, sim.ZooDists()[0])) {
		var ts []string
		for _, t := range s.Targets {
			ts = append(ts, fmtTarget(t))
		}
		fmt.Fprintf(w, "- `%s`: %s. Targets: %s.\n", s.Name, s.Description, strings.Join(ts, "; "))
	}
	fmt.Fprintf(w, "\nModels:\n\n")
	for _, mod := range cfg.Models {
		fmt.Fprintf(w, "- `%s`: %s\n", mod.Name, mod.Description)
	}
	fmt.Fprintf(w, "\nPolicies:\n\n")
	for _, p := range cfg.Policies {
		fmt.Fprintf(w, "- `%s`: %s\n", p.Name, p.Description)
	}
	fmt.Fprintln(w)

	for _, mod := range cfg.Models {
		fmt.Fprintf(w, "## %s\n\n", mod.Name)
		head := []string{"cores", "dist", "scenario", "targets", "best fixed limit"}
		for _, p := range cfg.Policies {
			head = append(head, p.Name)
		}
		mdRow(w, head...)
		mdAlign(w, "rllll"+strings.Repeat("l", len(cfg.Policies)))
		for _, r := range m.Rows {
			if r.Model != mod.Name {
				continue
			}
			row := []string{strconv.Itoa(r.Cores), r.Dist, r.Scenario, rowTargets(r), bestCell(r)}
			for _, v := range r.Policies {
				row = append(row, verdictCell(v))
			}
			mdRow(w, row...)
		}
		fmt.Fprintln(w)
	}
}

// writeMatrixCounts writes the pass counts of each policy by one attribute
// of the rows (scenario, model, ...).
func writeMatrixCounts(w io.Writer, m *sim.Matrix, what string, keys []string, key func(sim.MatrixRow) string) {
	if len(keys) < 2 {
		return
	}
	head := []string{what}
	for _, p := range m.Config.Policies {
		head = append(head, p.Name)
	}
	mdRow(w, head...)
	mdAlign(w, "l"+strings.Repeat("r", len(m.Config.Policies)))
	for _, k := range keys {
		row := []string{k}
		for j := range m.Config.Policies {
			pass, n := 0, 0
			for _, r := range m.Rows {
				if key(r) == k {
					n++
					if r.Policies[j].Pass {
						pass++
					}
				}
			}
			row = append(row, fmt.Sprintf("%d/%d", pass, n))
		}
		mdRow(w, row...)
	}
	fmt.Fprintln(w)
}

// writeMatrixMisses writes, per policy and figure, how many rows failed
// on it, and then the rows where even the best fixed limit misses the
// scenario's own target.
func writeMatrixMisses(w io.Writer, m *sim.Matrix) {
	var metrics []string
	seen := map[string]bool{}
	for _, r := range m.Rows {
		for _, v := range r.Policies {
			for _, c := range v.Checks {
				if !seen[c.Metric] {
					seen[c.Metric] = true
					metrics = append(metrics, c.Metric)
				}
			}
		}
	}
	fmt.Fprintf(w, "Rows failed, by the figure that failed (a row may fail on several):\n\n")
	head := []string{"figure"}
	for _, p := range m.Config.Policies {
		head = append(head, p.Name)
	}
	mdRow(w, head...)
	mdAlign(w, "l"+strings.Repeat("r", len(m.Config.Policies)))
	for _, metric := range metrics {
		row := []string{metric}
		for j := range m.Config.Policies {
			n := 0
			for _, r := range m.Rows {
				for _, c := range r.Policies[j].Checks {
					if c.Metric == metric && !c.Pass {
						n++
					}
				}
			}
			row = append(row, strconv.Itoa(n))
		}
		mdRow(w, row...)
	}
	fmt.Fprintln(w)

	fmt.Fprintf(w, "## Where even the best fixed limit misses the targets\n\n")
	var lines []string
	for _, r := range m.Rows {
		var miss []string
		for _, c := range refChecks(r) {
			if c.Relaxed {
				miss = append(miss, fmt.Sprintf("%s %s (target %s)", checkLabel(c.Metric), fmtCheck(c.Metric, c.Best), fmtTarget(c.Absolute)))
			}
		}
		if len(miss) > 0 {
			lines = append(lines, fmt.Sprintf("- %s, limit %d: %s", rowName(r), r.Best.Limit, strings.Join(miss, "; ")))
		}
	}
	if len(lines) == 0 {
		fmt.Fprintf(w, "None: the best fixed limit meets every target of every row.\n\n")
		return
	}
	fmt.Fprintf(w, "%d of %d rows; their targets are relaxed to 97%% of the best fixed limit's figure:\n\n%s\n\n", len(lines), len(m.Rows), strings.Join(lines, "\n"))
}

// refChecks returns the checks of the row's first policy that ran: their
// targets and the best fixed limit's figures are the same for every policy.
func refChecks(r sim.MatrixRow) []sim.Check {
	for _, v := range r.Policies {
		if v.Err == nil {
			return v.Checks
		}
	}
	return nil
}

// rowTargets lists a row's targets as judged, relaxed ones marked *.
func rowTargets(r sim.MatrixRow) string {
	var ts []string
	for _, c := range refChecks(r) {
		s := fmtTarget(c.Target)
		if c.Relaxed {
			s += "*"
		}
		ts = append(ts, s)
	}
	return strings.Join(ts, "; ")
}

// bestCell shows the best fixed limit and its figures.
func bestCell(r sim.MatrixRow) string {
	if r.Best.Err != nil {
		return "error"
	}
	parts := []string{fmt.Sprintf("L=%d", r.Best.Limit)}
	for _, c := range refChecks(r) {
		if !math.IsNaN(c.Best) {
			parts = append(parts, checkLabel(c.Metric)+" "+fmtCheck(c.Metric, c.Best))
		}
	}
	return strings.Join(parts, ", ")
}

// verdictCell is "pass", or FAIL with the worst figures that missed.
func verdictCell(v sim.Verdict) string {
	if v.Err != nil {
		return "error"
	}
	if v.Pass {
		return "pass"
	}
	var miss []string
	for _, c := range v.Checks {
		if !c.Pass {
			miss = append(miss, checkLabel(c.Metric)+" "+fmtCheck(c.Metric, c.Worst))
		}
	}
	return "**FAIL** " + strings.Join(miss, ", ")
}
