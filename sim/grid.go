package sim

import (
	"runtime"
	"slices"
	"strings"
	"sync"
)

// Grid is the outcome of running scenarios under policies for consecutive
// seeds: Results[k][i][j] is the Result of Scenarios[i] under Policies[j]
// with seed Seed+k, or nil. A nil Result comes with the run's error in
// Errs[k][i][j], or with a nil error where the policy was not run on the
// scenario (see Join).
type Grid struct {
	Seed      uint64
	Scenarios []Scenario
	Policies  []PolicySpec
	Results   [][][]*Result
	Errs      [][][]error
}

// RunGrid runs every scenario of scs under every policy of pols with the
// seeds seed … seed+seeds−1, in parallel (GOMAXPROCS runs at once).
// progress, if set, is called after each run with the runs done and the
// total, from one goroutine at a time. Each run is Run's, so the Grid
// depends only on the arguments, not on the parallelism.
func RunGrid(scs []Scenario, pols []PolicySpec, seed uint64, seeds int, progress func(done, total int)) *Grid {
	g := &Grid{Seed: seed, Scenarios: scs, Policies: pols,
		Results: make([][][]*Result, seeds), Errs: make([][][]error, seeds)}
	for k := range seeds {
		g.Results[k] = make([][]*Result, len(scs))
		g.Errs[k] = make([][]error, len(scs))
		for i := range scs {
			g.Results[k][i] = make([]*Result, len(pols))
			g.Errs[k][i] = make([]error, len(pols))
		}
	}
	n := len(scs) * len(pols)
	parallel(seeds*n, runtime.GOMAXPROCS(0), func(x int) {
		k, i, j := x/n, x%n/len(pols), x%len(pols)
		g.Results[k][i][j], g.Errs[k][i][j] = Run(scs[i], pols[j], seed+uint64(k))
	}, progress)
	return g
}

// parallel calls do(0) … do(n−1) on workers goroutines, handing out the
// indexes in order, and progress (if set) after each call with the calls
// done and n, from one goroutine at a time. It returns when every call has.
func parallel(n, workers int, do func(i int), progress func(done, total int)) {
	jobs := make(chan int)
	var wg sync.WaitGroup
	var mu sync.Mutex
	done := 0
	for range workers {
		wg.Go(func() {
			for i := range jobs {
				do(i)
				mu.Lock()
				done++
				if progress != nil {
					progress(done, n)
				}
				mu.Unlock()
			}
		})
	}
	for i := range n {
		jobs <- i
	}
	close(jobs)
	wg.Wait()
}

// Join returns a Grid with the policies of g followed by those of o, for
// the scenarios of g and the seeds both have: o's runs of a scenario of g
// (matched by name) fill its row, and the rows of the scenarios o did not
// run have nil results and nil errors for o's policies. A nil o gives g.
func (g *Grid) Join(o *Grid) *Grid {
	if o == nil {
		return g
	}
	seeds := min(len(g.Results), len(o.Results))
	out := &Grid{Seed: g.Seed, Scenarios: g.Scenarios, Policies: append(slices.Clone(g.Policies), o.Policies...),
		Results: make([][][]*Result, seeds), Errs: make([][][]error, seeds)}
	for k := range seeds {
		out.Results[k] = make([][]*Result, len(g.Scenarios))
		out.Errs[k] = make([][]error, len(g.Scenarios))
		for i, sc := range g.Scenarios {
			out.Results[k][i] = append(slices.Clone(g.Results[k][i]), make([]*Result, len(o.Policies))...)
			out.Errs[k][i] = append(slices.Clone(g.Errs[k][i]), make([]error, len(o.Policies))...)
			if m := slices.IndexFunc(o.Scenarios, func(x Scenario) bool { return x.Name == sc.Name }); m >= 0 {
				copy(out.Results[k][i][len(g.Policies):], o.Results[k][m])
				copy(out.Errs[k][i][len(g.Policies):], o.Errs[k][m])
			}
		}
	}
	return out
}

// PriorityShedders returns the scenarios of scs with more than one
// priority class, and the priority shedders of ExtraPolicies (named
// shed-…) to run on them, or nothing if no scenario has priorities. With
// its default policies `sluice sim` runs them too: on those scenarios the
// gates alone cannot meet the per-priority targets, and the shedder is what
// a service would use (on one priority it is the gate alone, figure for
// figure).
func PriorityShedders(scs []Scenario) ([]Scenario, []PolicySpec) {
	var out []Scenario
	for _, sc := range scs {
		if len(sc.Classes) > 1 {
			out = append(out, sc)
		}
	}
	if len(out) == 0 {
		return nil, nil
	}
	var pols []PolicySpec
	for _, p := range ExtraPolicies() {
		if strings.HasPrefix(p.Name, "shed-") {
			pols = append(pols, p)
		}
	}
	return out, pols
}
