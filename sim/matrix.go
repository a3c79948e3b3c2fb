package sim

import (
	"fmt"
	"math"
	"runtime"
	"time"

	"github.com/sluicehq/sluice/adaptive"
)

// MatrixConfig selects what RunMatrix runs: every incident scenario named
// in Scenarios on every zoo cell (model × cores × distribution), under
// every policy, with Seeds seeds. Zero fields take the defaults.
type MatrixConfig struct {
	Models    []ZooModel   // default: ZooModels()
	Cores     []int        // default: ZooCores
	Dists     []ZooDist    // default: ZooDists()
	Scenarios []string     // names of Incidents; default: all
	Policies  []PolicySpec // default: BuiltinPolicies()
	// Seeds is the number of seeds a policy runs with, Seed … Seed+Seeds−1
	// (default 5); a row is judged on the worst of them.
	Seeds int
	Seed  uint64 // default 1
	// SweepSeeds is the number of seeds, from Seed on, the search for the
	// best fixed limit runs each candidate with (default 1).
	SweepSeeds int
	// Parallel is the number of rows run at once (default GOMAXPROCS).
	Parallel int
	// Progress, if set, is called after each row with the rows done and
	// the rows in all, from one goroutine at a time.
	Progress func(done, total int)
	// Scale, if positive and not 1, compresses every scenario in time by
	// this factor: its length, warm-up, moments of change and load phases,
	// and its incident's transient (0.2: a fifth as long). For tests and
	// quick looks only: the targets are meant for full length, and the
	// floor estimate is still judged only 10 s after each change, so a
	// compressed run judges it on fewer intervals, or none.
	Scale float64
}

// MatrixRow is one row of the matrix, a scenario on a zoo cell: the best
// fixed limit found for it, and each policy's verdict.
type MatrixRow struct {
	Model    string        // the ZooModel's name
	Cores    int           // the server's cores
	Dist     string        // the ZooDist's name
	Scenario string        // the incident's name (Incidents)
	SLO      time.Duration // the scenario's latency objective
	Best     BestFixed
	// Policies holds the verdicts in the order of MatrixConfig.Policies.
	Policies []Verdict
}

// BestFixed is the fixed concurrency limit (the static policy at Limit)
// that gave the most goodput within the SLO, after warm-up, in a row,
// found by a sweep: limits L*/8 … 4·L* by doubling (L* the static
// policy's tuned limit, Env.TunedLimit; at most 10,000), then ×2^(±1/2)
// and ×2^(±1/4) around the best so far.
type BestFixed struct {
	Limit int // the best limit found
	// Figures are the figures of the row's checks at Limit, by metric
	// name, averaged over the sweep's seeds; a figure that does not apply
	// to a fixed limit (floor_error) is absent.
	Figures map[string]float64
	Runs    int   // runs the sweep took
	Err     error // the first run of the sweep that failed, if any
}

// Verdict is a policy's outcome in a row: its checks and whether it met
// all of them.
type Verdict struct {
	Policy string  // the PolicySpec's name
	Checks []Check // one per target of the scenario, in its order
	Pass   bool    // every check passed
	Err    error   // a run failed: no checks
}

// Check is one target of a row, judged on the worst of the seeds. The
// target is the scenario's own (Absolute) unless even the best fixed limit
// misses it: then it is 97% of what the best fixed limit achieves (for a
// bound from below; for a bound from above, that figure divided by 0.97).
type Check struct {
	Metric   string // the figure, a metric name of Result (see Target)
	Absolute Target // the scenario's target
	Target   Target // the target judged: Absolute, or relaxed
	Relaxed  bool   // the best fixed limit misses Absolute
	// Best is the best fixed limit's figure, NaN if it has none.
	Best float64
	// Worst is the worst figure over the seeds: the lowest for a bound from
	// below, the highest for a bound from above.
	Worst float64
	NA    bool // the figure does not apply to the policy (no floor estimate)
	Pass  bool
}

// Matrix is the outcome of RunMatrix.
type Matrix struct {
	Config MatrixConfig // with the defaults filled in
	Rows   []MatrixRow
}

// PolicySummary counts the rows a policy passed.
type PolicySummary struct {
	Policy       string // the PolicySpec's name
	Passed, Rows int    // rows passed, of rows run
}

// Summary returns, per policy in the order of the config, the rows it
// passed.
func (m *Matrix) Summary() []PolicySummary {
	out := make([]PolicySummary, len(m.Config.Policies))
	for j, p := range m.Config.Policies {
		out[j].Policy = p.Name
	}
	for _, r := range m.Rows {
		for j, v := range r.Policies {
			out[j].Rows++
			if v.Pass {
				out[j].Passed++
			}
		}
	}
	return out
}

// withDefaults fills in the defaults and checks the scenario names.
func (c MatrixConfig) withDefaults() (MatrixConfig, error) {
	if c.Models == nil {
		c.Models = ZooModels()
	}
	if c.Cores == nil {
		c.Cores = ZooCores
	}
	if c.Dists == nil {
		c.Dists = ZooDists()
	}
	all := IncidentNames()
	if c.Scenarios == nil {
		c.Scenarios = all
	}
	if _, err := findByName(all, c.Scenarios, func(s string) string { return s }, "incident scenario"); err != nil {
		return c, err
	}
	if c.Policies == nil {
		c.Policies = BuiltinPolicies()
	}
	if c.Seeds == 0 {
		c.Seeds = 5
	}
	if c.Seed == 0 {
		c.Seed = 1
	}
	if c.SweepSeeds == 0 {
		c.SweepSeeds = 1
	}
	if c.Parallel == 0 {
		c.Parallel = runtime.GOMAXPROCS(0)
	}
	for _, n := range c.Cores {
		if n < 1 {
			return c, fmt.Errorf("sim: matrix cores %d: need at least 1", n)
		}
	}
	if c.Scale < 0 {
		return c, fmt.Errorf("sim: matrix scale %v: must not be negative", c.Scale)
	}
	if c.Seeds < 1 || c.SweepSeeds < 1 || c.Parallel < 1 {
		return c, fmt.Errorf("sim: matrix seeds %d, sweep seeds %d, parallel %d: need at least 1 each", c.Seeds, c.SweepSeeds, c.Parallel)
	}
	return c, nil
}

// RunMatrix runs the matrix: for each row (model × cores × distribution ×
// scenario, in that order of nesting) the sweep for the best fixed limit,
// then every policy with every seed, and judges each policy on the worst of
// its seeds against the scenario's targets, relaxed where the best fixed
// limit misses them. Rows run in parallel; the result depends only on the
// config, not on the parallelism.
func RunMatrix(cfg MatrixConfig) (*Matrix, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	m := &Matrix{Config: cfg}
	var scs []Scenario
	for _, mod := range cfg.Models {
		for _, c := range cfg.Cores {
			for _, d := range cfg.Dists {
				srv := mod.Server(c, d)
				all := Incidents(srv)
				for _, name := range cfg.Scenarios {
					for _, sc := range all {
						if sc.Name == name {
							if cfg.Scale > 0 && cfg.Scale != 1 {
								sc = sc.scaled(cfg.Scale)
							}
							scs = append(scs, sc)
							m.Rows = append(m.Rows, MatrixRow{Model: mod.Name, Cores: c, Dist: d.Name, Scenario: name, SLO: sc.SLO})
						}
					}
				}
			}
		}
	}
	parallel(len(m.Rows), cfg.Parallel, func(i int) { runRow(&m.Rows[i], scs[i], &cfg) }, cfg.Progress)
	return m, nil
}

// runRow fills in row: the best fixed limit, then the policies' verdicts.
func runRow(row *MatrixRow, sc Scenario, cfg *MatrixConfig) {
	row.Best = bestFixed(sc, cfg)
	for _, spec := range cfg.Policies {
		v := Verdict{Policy: spec.Name}
		var rs []*Result
		for k := range cfg.Seeds {
			r, err := safeRun(sc, spec, cfg.Seed+uint64(k))
			if err != nil {
				v.Err = err
				break
			}
			r.Series = nil
			rs = append(rs, r)
		}
		if v.Err == nil {
			v.Checks, v.Pass = judge(sc.Targets, rs, &row.Best)
		}
		row.Policies = append(row.Policies, v)
	}
}

// safeRun is Run with a panic (a bug, in the simulator or a policy) turned
// into an error, so that one run cannot take down the matrix.
func safeRun(sc Scenario, spec PolicySpec, seed uint64) (r *Result, err error) {
	defer func() {
		if p := recover(); p != nil {
			r, err = nil, fmt.Errorf("sim: %s under %s, seed %d: panic: %v", sc.Name, spec.Name, seed, p)
		}
	}()
	return Run(sc, spec, seed)
}

// judge checks each target on the worst of rs, relaxed where the best
// fixed limit misses it.
func judge(targets []Target, rs []*Result, best *BestFixed) ([]Check, bool) {
	pass := true
	var out []Check
	for _, t := range targets {
		c := Check{Metric: t.Metric, Absolute: t, Target: t, Best: math.NaN()}
		if b, ok := best.Figures[t.Metric]; ok {
			c.Best = b
			c.Target, c.Relaxed = relax(t, b)
		}
		c.NA = !rs[0].applies(t.Metric)
		if c.NA {
			c.Worst, c.Pass = math.NaN(), true
			out = append(out, c)
			continue
		}
		c.Pass = true
		for k, r := range rs {
			v, ok := r.metric(t.Metric)
			if !ok {
				v = math.NaN()
			}
			if k == 0 || worse(t, v, c.Worst) {
				c.Worst = v
			}
			if !ok || (c.Target.Min != nil && !(v >= *c.Target.Min)) || (c.Target.Max != nil && !(v <= *c.Target.Max)) {
				c.Pass = false
			}
		}
		pass = pass && c.Pass
		out = append(out, c)
	}
	return out, pass
}

// worse reports whether v is worse than w for target t (NaN is worst).
func worse(t Target, v, w float64) bool {
	switch {
	case math.IsNaN(v):
		return true
	case math.IsNaN(w):
		return false
	case t.Min != nil:
		return v < w
	}
	return v > w
}

// relax returns the target for a figure the best fixed limit reaches as b:
// t itself if b meets it, else 97% of b (a bound from below) or b/0.97 (a
// bound from above); and whether it relaxed t.
func relax(t Target, b float64) (Target, bool) {
	const share = 0.97
	out, relaxed := t, false
	if t.Min != nil && b < *t.Min {
		v := share * b
		out.Min, relaxed = &v, true
	}
	if t.Max != nil && b > *t.Max {
		v := b / share
		out.Max, relaxed = &v, true
	}
	return out, relaxed
}

// fixedPolicy is the static policy at limit n.
func fixedPolicy(n int) PolicySpec {
	return PolicySpec{Name: fmt.Sprintf("fixed-%d", n), Description: "fixed limit", New: func(e Env) (Policy, error) {
		return NewGatePolicy(adaptive.Fixed(n), adaptive.WithClock(e.Clock))
	}}
}

// bestFixed sweeps the fixed limits of sc for the one with the most
// goodput within the SLO after warm-up (see BestFixed).
func bestFixed(sc Scenario, cfg *MatrixConfig) BestFixed {
	const maxLimit = 10000
	s := sc.withDefaults()
	tuned := Env{Cores: s.Server.Cores, MeanService: s.Server.Service.MeanValue(), MeanWait: s.Server.Wait.MeanValue()}.TunedLimit()
	type eval struct {
		goodput float64
		figures map[string]float64
	}
	memo := map[int]eval{}
	var firstErr error
	run := func(n int) eval {
		if e, ok := memo[n]; ok {
			return e
		}
		e := eval{figures: map[string]float64{}}
		for k := range cfg.SweepSeeds {
			r, err := safeRun(sc, fixedPolicy(n), cfg.Seed+uint64(k))
			if err != nil {
				if firstErr == nil {
					firstErr = err
				}
				e.goodput = math.Inf(-1)
				break
			}
			e.goodput += r.GoodputRPS / float64(cfg.SweepSeeds)
			for _, t := range sc.Targets {
				if v, ok := r.metric(t.Metric); ok && r.applies(t.Metric) {
					e.figures[t.Metric] += v / float64(cfg.SweepSeeds)
				}
			}
		}
		memo[n] = e
		return e
	}
	best := 0
	try := func(n int) {
		n = min(max(n, 1), maxLimit)
		if e := run(n); best == 0 || e.goodput > memo[best].goodput {
			best = n
		}
	}
	lo, hi := max(1, tuned/8), min(maxLimit, tuned*4)
	for n := lo; n < hi; n *= 2 {
		try(n)
	}
	try(hi)
	for _, f := range []float64{math.Sqrt2, math.Pow(2, 0.25)} {
		b := float64(best)
		try(int(math.Round(b / f)))
		try(int(math.Round(b * f)))
	}
	return BestFixed{Limit: best, Figures: memo[best].figures, Runs: len(memo) * cfg.SweepSeeds, Err: firstErr}
}
