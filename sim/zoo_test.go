package sim

import (
	"fmt"
	"math"
	"strings"
	"testing"
	"time"
)

// TestZooScenariosAreValid: every incident on every cell of the zoo is a
// valid scenario, with a capacity of ZooCapacity (a little less with GC)
// and the SLO and deadline of the zoo.
func TestZooScenariosAreValid(t *testing.T) {
	names := IncidentNames()
	if len(names) != 10 {
		t.Fatalf("%d incident scenarios: %v", len(names), names)
	}
	for _, m := range ZooModels() {
		for _, c := range ZooCores {
			for _, d := range ZooDists() {
				srv := m.Server(c, d)
				want := float64(ZooCapacity)
				if m.Name == "gc" {
					want *= 1 - 0.005
				}
				if got := srv.Capacity(); math.Abs(got-want) > 1e-5*want { // bimodal rounds to the ns
					t.Errorf("%s/%d/%s: capacity %v, want %v", m.Name, c, d.Name, got, want)
				}
				for i, sc := range Incidents(srv) {
					if err := sc.Validate(); err != nil {
						t.Error(err)
					}
					if sc.Name != names[i] {
						t.Errorf("scenario %d is %q, want %q", i, sc.Name, names[i])
					}
					if want := 10*srv.Service.MeanValue() + srv.Wait.MeanValue(); sc.SLO != want || sc.Deadline != 3*want {
						t.Errorf("%s: SLO %v, deadline %v, want %v and 3× that", sc.Name, sc.SLO, sc.Deadline, want)
					}
				}
			}
		}
	}
}

func TestFindZooModels(t *testing.T) {
	ms, err := FindZooModels([]string{"fifo", "pool+wait+gc", "gc"})
	if err != nil {
		t.Fatal(err)
	}
	srv := ms[1].Server(4, ZooDists()[0])
	if srv.Model != Pool || srv.Wait.MeanValue() != 80*time.Millisecond || srv.GC == nil || ms[0].Server(4, ZooDists()[0]).Model != FIFO {
		t.Errorf("pool+wait+gc built %+v", srv)
	}
	for _, bad := range []string{"heap", "ps+wait+wait", "pool+fast", ""} {
		if _, err := FindZooModels([]string{bad}); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
	if _, err := FindZooDists([]string{"exp", "pareto"}); err == nil || !strings.Contains(err.Error(), "pareto") {
		t.Errorf("unknown distribution: error %v", err)
	}
	if b := ZooDists()[2].New(19 * time.Millisecond); b.MeanValue() != 19*time.Millisecond || b.Long != 10*b.Short {
		t.Errorf("bimodal %v: mean %v", b, b.MeanValue())
	}
}

// TestRelax: a target the best fixed limit misses becomes 97% of its
// figure (from below) or the figure over 0.97 (from above).
func TestRelax(t *testing.T) {
	for _, c := range []struct {
		t       Target
		best    float64
		want    float64
		relaxed bool
	}{
		{AtLeast("g", 0.95), 0.99, 0.95, false},
		{AtLeast("g", 0.95), 0.9, 0.873, true},
		{AtMost("p", 1), 0.5, 1, false},
		{AtMost("p", 1), 1.94, 2, true},
	} {
		got, relaxed := relax(c.t, c.best)
		bound := got.Min
		if bound == nil {
			bound = got.Max
		}
		if math.Abs(*bound-c.want) > 1e-12 || relaxed != c.relaxed {
			t.Errorf("relax(%v, %v) = %v, %v; want %v, %v", c.t, c.best, got, relaxed, c.want, c.relaxed)
		}
	}
}

// TestRunMatrix runs a tiny matrix: the best fixed limit is found, the
// unbounded server fails a surge it cannot survive, and the outcome does
// not depend on how many rows run at once.
func TestRunMatrix(t *testing.T) {
	models, err := FindZooModels([]string{"fifo"})
	if err != nil {
		t.Fatal(err)
	}
	pols, err := FindPolicies(BuiltinPolicies(), []string{"none", "static"})
	if err != nil {
		t.Fatal(err)
	}
	cfg := MatrixConfig{Models: models, Cores: []int{1}, Dists: ZooDists()[:1],
		Scenarios: []string{"no-harm-0.7", "bursts"}, Policies: pols, Seeds: 1, Parallel: 1, Scale: 0.15}
	calls := 0
	cfg.Progress = func(done, total int) { calls++ }
	m1, err := RunMatrix(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if len(m1.Rows) != 2 || calls != 2 {
		t.Fatalf("%d rows, %d progress calls; want 2, 2", len(m1.Rows), calls)
	}
	for _, r := range m1.Rows {
		if r.Best.Limit < 1 || r.Best.Err != nil || len(r.Best.Figures) == 0 || r.Best.Runs < 5 {
			t.Errorf("%s: best fixed %+v", r.Scenario, r.Best)
		}
		if len(r.Policies) != 2 || r.Policies[0].Policy != "none" {
			t.Fatalf("%s: verdicts %+v", r.Scenario, r.Policies)
		}
		for _, c := range r.Policies[1].Checks {
			if c.Metric == "floor_error" && (!c.NA || !c.Pass) {
				t.Errorf("static has no floor estimate: %+v", c)
			}
		}
	}
	// No limit refuses nothing at 0.7×, and loses far more than the bound
	// allows in bursts on one FIFO core (the queue grows past the SLO).
	if v := m1.Rows[0].Policies[0]; !v.Pass {
		t.Errorf("none in no-harm-0.7: %+v", v)
	}
	if v := m1.Rows[1].Policies[0]; v.Pass {
		t.Errorf("none in bursts passed: %+v", v)
	}
	if s := m1.Summary(); len(s) != 2 || s[0].Rows != 2 || s[0].Passed != 1 {
		t.Errorf("summary %+v", s)
	}
	cfg.Parallel, cfg.Progress = 2, nil
	m2, err := RunMatrix(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if a, b := fmt.Sprintf("%+v", m1.Rows), fmt.Sprintf("%+v", m2.Rows); a != b {
		t.Errorf("parallel 1 and 2 differ:\n%s\n%s", a, b)
	}
	if _, err := RunMatrix(MatrixConfig{Scenarios: []string{"nope"}}); err == nil {
		t.Error("unknown scenario: no error")
	}
}
