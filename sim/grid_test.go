package sim

import (
	"errors"
	"reflect"
	"slices"
	"testing"
	"time"
)

// RunGrid's results are Run's, seed by seed, whatever the parallelism, and
// progress counts every run once.
func TestRunGrid(t *testing.T) {
	scs := []Scenario{short(scenario(t, "step-2x"), 0.05), short(scenario(t, "priorities-retries"), 0.05)}
	pols := []PolicySpec{policy(t, "none"), policy(t, "static")}
	var calls []int
	g := RunGrid(scs, pols, 3, 2, func(done, total int) {
		if total != 8 {
			t.Errorf("progress total %d, want 8", total)
		}
		calls = append(calls, done)
	})
	if want := []int{1, 2, 3, 4, 5, 6, 7, 8}; !slices.Equal(calls, want) {
		t.Errorf("progress %v, want %v", calls, want)
	}
	if g.Seed != 3 || len(g.Results) != 2 || len(g.Errs) != 2 {
		t.Fatalf("grid of seed %d with %d seeds of results, %d of errors", g.Seed, len(g.Results), len(g.Errs))
	}
	for k := range 2 {
		for i, sc := range scs {
			for j, p := range pols {
				want, err := Run(sc, p, 3+uint64(k))
				if err != nil || g.Errs[k][i][j] != nil {
					t.Fatalf("%s/%s seed %d: %v, grid %v", sc.Name, p.Name, 3+k, err, g.Errs[k][i][j])
				}
				if got := g.Results[k][i][j]; !reflect.DeepEqual(got, want) {
					t.Errorf("%s/%s seed %d: grid and Run differ", sc.Name, p.Name, 3+k)
				}
			}
		}
	}
}

// Join adds the policies of another grid to the rows of the scenarios it
// ran; the other rows get nothing for them.
func TestGridJoin(t *testing.T) {
	a, b, c := &Result{Policy: "a"}, &Result{Policy: "b"}, &Result{Policy: "c"}
	fail := errors.New("failed")
	g := &Grid{Seed: 5, Scenarios: []Scenario{{Name: "x"}, {Name: "y"}}, Policies: []PolicySpec{{Name: "p"}},
		Results: [][][]*Result{{{a}, {b}}}, Errs: [][][]error{{{nil}, {nil}}}}
	o := &Grid{Seed: 5, Scenarios: []Scenario{{Name: "y"}}, Policies: []PolicySpec{{Name: "q"}, {Name: "r"}},
		Results: [][][]*Result{{{c, nil}}}, Errs: [][][]error{{{nil, fail}}}}
	j := g.Join(o)
	if names := []string{j.Policies[0].Name, j.Policies[1].Name, j.Policies[2].Name}; !slices.Equal(names, []string{"p", "q", "r"}) {
		t.Errorf("policies %v", names)
	}
	if want := [][]*Result{{a, nil, nil}, {b, c, nil}}; !reflect.DeepEqual(j.Results[0], want) {
		t.Errorf("results %v, want %v", j.Results[0], want)
	}
	if want := [][]error{{nil, nil, nil}, {nil, nil, fail}}; !reflect.DeepEqual(j.Errs[0], want) {
		t.Errorf("errors %v, want %v", j.Errs[0], want)
	}
	if len(g.Policies) != 1 || len(g.Results[0][0]) != 1 {
		t.Error("Join changed its receiver")
	}
	if g.Join(nil) != g {
		t.Error("Join(nil) is not the grid itself")
	}
}

func TestPriorityShedders(t *testing.T) {
	scs, pols := PriorityShedders(Scenarios())
	if len(scs) == 0 || len(pols) == 0 {
		t.Fatalf("%d scenarios with priorities, %d shedders", len(scs), len(pols))
	}
	for _, s := range scs {
		if len(s.Classes) < 2 {
			t.Errorf("%s has %d classes", s.Name, len(s.Classes))
		}
	}
	for _, p := range pols {
		if len(p.Name) < 5 || p.Name[:5] != "shed-" {
			t.Errorf("policy %s is not a shedder", p.Name)
		}
	}
	if scs, pols := PriorityShedders([]Scenario{{Name: "one", Classes: []Class{{Priority: 1, Share: 1}}}}); scs != nil || pols != nil {
		t.Errorf("one class: %v, %v", scs, pols)
	}
}

func TestScenarioEvents(t *testing.T) {
	for _, tt := range []struct {
		scenario string
		want     []Event
	}{
		{"step-5x", []Event{
			{20 * time.Second, "load 5×", "the offered load steps to 5× capacity"},
			{80 * time.Second, "load 0.5×", "the offered load steps to 0.5× capacity"},
		}},
		{"capacity-drop", nil}, // only in order
	} {
		s := scenario(t, tt.scenario)
		got := s.Events()
		if tt.want != nil && !reflect.DeepEqual(got, tt.want) {
			t.Errorf("%s: %+v, want %+v", tt.scenario, got, tt.want)
		}
		if !slices.IsSortedFunc(got, func(a, b Event) int { return int(a.At - b.At) }) {
			t.Errorf("%s: events out of order: %+v", tt.scenario, got)
		}
	}
	// Two changes at one moment are one event; the change moment is marked
	// when nothing else happens then.
	s := Scenario{
		Load:   []Phase{{At: 0, Load: 1}, {At: 5 * time.Second, Load: 2}},
		Server: Server{Changes: []Change{{At: 5 * time.Second, ServiceFactor: 2}, {At: 9 * time.Second, ServiceFactor: 1}}},
		Change: 7 * time.Second,
	}
	want := []Event{
		{5 * time.Second, "load 2×, service ×2", "the offered load steps to 2× capacity; the service time is multiplied by 2 (capacity 0.5× nominal)"},
		{7 * time.Second, "change", "settling time is measured from here"},
		{9 * time.Second, "service ×1", "the service time is back to nominal"},
	}
	if got := s.Events(); !reflect.DeepEqual(got, want) {
		t.Errorf("events\n%+v\nwant\n%+v", got, want)
	}
}

func TestScenarioPrioritiesAndDemand(t *testing.T) {
	s := Scenario{
		Load:    []Phase{{At: 0, Load: 1}, {At: 2 * time.Second, Load: 3, Ramp: true}},
		Classes: []Class{{Priority: 2, Share: 3}, {Priority: 0, Share: 1}, {Priority: 2, Share: 0}},
	}
	if got := s.Priorities(); !slices.Equal(got, []int{0, 2}) {
		t.Errorf("priorities %v, want [0 2]", got)
	}
	for _, tt := range []struct {
		q    int
		t    time.Duration
		want float64
	}{
		{0, 0, 25}, {2, 0, 75}, {0, time.Second, 50}, {2, 3 * time.Second, 225}, {1, time.Second, 0},
	} {
		if got := s.Demand(tt.q, tt.t, 100); got != tt.want {
			t.Errorf("demand of priority %d at %v: %v, want %v", tt.q, tt.t, got, tt.want)
		}
	}
	if got := (Scenario{Load: s.Load}).Demand(0, 0, 100); got != 0 {
		t.Errorf("no classes: demand %v, want 0", got)
	}
}
