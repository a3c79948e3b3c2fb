package main

import (
	"bytes"
	"image/png"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"

	"github.com/sluicehq/sluice/sim"
)

func TestSimOut(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "report")
	var out, errb bytes.Buffer
	args := []string{"sim", "-scenario", "step-2x", "-policy", "none,static", "-out", dir}
	if code := run(args, &out, &errb); code != 0 {
		t.Fatalf("run(%q) = %d, stderr:\n%s", args, code, errb.String())
	}
	if !strings.Contains(out.String(), "step-2x") {
		t.Errorf("-out should still print the table; stdout:\n%s", out.String())
	}

	md, err := os.ReadFile(filepath.Join(dir, "report.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"## step-2x", "| step-2x | none |", "| step-2x | static |", "](step-2x.png)", "(step-2x.svg)", "Seed: 1"} {
		if !bytes.Contains(md, []byte(want)) {
			t.Errorf("report.md does not contain %q:\n%s", want, md)
		}
	}

	// One class: neither the per-priority table nor the success panel.
	if bytes.Contains(md, []byte("p1 success %")) {
		t.Errorf("report.md has a per-priority table for a one-class scenario:\n%s", md)
	}
	for _, name := range []string{"step-2x.png", "step-2x.svg"} {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		if len(b) == 0 {
			t.Fatalf("%s is empty", name)
		}
		switch filepath.Ext(name) {
		case ".png":
			img, err := png.Decode(bytes.NewReader(b))
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			if r := img.Bounds(); r.Dx() < 500 || r.Dy() < 500 {
				t.Errorf("%s is %v, want a readable size", name, r)
			}
			if got, want := img.Bounds().Dy(), pixels(figH); got != want {
				t.Errorf("%s is %d px high, want %d (three panels)", name, got, want)
			}
		case ".svg":
			if !bytes.Contains(b, []byte("<svg")) {
				t.Errorf("%s is not an SVG", name)
			}
			if bytes.Contains(b, []byte("goodput ÷ demand")) {
				t.Errorf("%s has the per-priority panel, but the scenario has one class", name)
			}
		}
	}
}

// pixels is the height of length l in the PNG figures.
func pixels(l vg.Length) int { return int(math.Ceil(float64(l/vg.Inch) * float64(figDPI))) }

// TestReportDeterministic draws the same short run twice: report.md and the
// figures must be byte-identical.
func TestReportDeterministic(t *testing.T) {
	s := sim.Scenario{
		Name: "tiny", Description: "a short step to 3× capacity",
		Duration: 3 * time.Second, Warmup: time.Second,
		Server:  sim.Server{Cores: 2, Service: sim.Exp(5 * time.Millisecond), Contention: 0.0002},
		Load:    []sim.Phase{{At: 0, Load: 0.5}, {At: 2 * time.Second, Load: 3}},
		Classes: []sim.Class{{Priority: 0, Share: 0.5}, {Priority: 2, Share: 0.5}},
		Change:  2 * time.Second,
		Targets: []sim.Target{sim.AtLeast("phase_goodput_ratio", 0.9)},
	}
	pols := sim.BuiltinPolicies()
	var dirs []string
	for range 2 {
		g := sim.RunGrid([]sim.Scenario{s}, pols, 7, 1, nil)
		for _, err := range g.Errs[0][0] {
			if err != nil {
				t.Fatal(err)
			}
		}
		dir := t.TempDir()
		if err := writeReport(dir, []string{"sim", "-out", "x"}, g); err != nil {
			t.Fatal(err)
		}
		dirs = append(dirs, dir)
	}
	for _, name := range []string{"report.md", "tiny.png", "tiny.svg"} {
		a, err := os.ReadFile(filepath.Join(dirs[0], name))
		if err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(filepath.Join(dirs[1], name))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(a, b) {
			t.Errorf("%s differs between two identical runs", name)
		}
	}
	// Two classes, priorities 0 and 2: the per-priority table (a row per
	// policy) and the fourth panel with its key.
	md, _ := os.ReadFile(filepath.Join(dirs[0], "report.md"))
	wantMD := []string{
		"| policy | p0 success % | p0 reject % | p2 success % | p2 reject % | inversions % |",
		"offered requests: 0 critical_plus ",
		", 2 sheddable_plus ",
		"the panels share the time axis",
		"Bottom: one panel per priority",
	}
	for _, p := range pols {
		wantMD = append(wantMD, "| "+p.Name+" | ")
	}
	for _, want := range wantMD {
		if !bytes.Contains(md, []byte(want)) {
			t.Errorf("report.md lacks %q:\n%s", want, md)
		}
	}
	// none's row: five numbers (success and reject % of two priorities,
	// inversions %).
	var row []string
	for line := range strings.Lines(string(md)) {
		cells := strings.Split(strings.Trim(strings.TrimSpace(line), "|"), "|")
		if len(cells) == 6 && strings.TrimSpace(cells[0]) == "none" {
			row = cells[1:]
		}
	}
	if row == nil {
		t.Errorf("report.md has no per-priority row for none:\n%s", md)
	}
	for _, c := range row {
		if _, err := strconv.ParseFloat(strings.TrimSpace(c), 64); err != nil {
			t.Errorf("per-priority row of none: cell %q is not a number", c)
		}
	}
	svg, _ := os.ReadFile(filepath.Join(dirs[0], "tiny.svg"))
	for _, want := range []string{"priority 0 critical_plus: goodput ÷ demand", "priority 2 sheddable_plus: goodput ÷ demand",
		"Bottom: one panel per priority", ">served %<", "capacity available"} {
		if !bytes.Contains(svg, []byte(want)) {
			t.Errorf("tiny.svg lacks %q", want)
		}
	}
	if bytes.Contains(svg, []byte("priority 1 critical:")) {
		t.Error("tiny.svg has a panel for priority 1, which no class has")
	}
	pngb, _ := os.ReadFile(filepath.Join(dirs[0], "tiny.png"))
	img, err := png.Decode(bytes.NewReader(pngb))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := img.Bounds().Dy(), pixels(figH+prioH+keyRowH); got != want {
		t.Errorf("tiny.png is %d px high, want %d (four panels)", got, want)
	}
}

// TestPrioServed: a priority's goodput as a share of the demand the
// scenario schedules for it (load × capacity × its share), pooled over the
// smoothing window, clipped at 100%.
func TestPrioServed(t *testing.T) {
	s := sim.Scenario{
		Load:    []sim.Phase{{At: 0, Load: 1}, {At: 2 * time.Second, Load: 2}},
		Classes: []sim.Class{{Priority: 0, Share: 1}, {Priority: 2, Share: 3}},
	}
	r := &sim.Result{CapacityRPS: 100}
	for i := 1; i <= 40; i++ { // 4 s of 100 ms intervals
		var p sim.Point
		p.T = time.Duration(i) * 100 * time.Millisecond
		p.Prio[0] = sim.PrioPoint{Goodput: 25}   // all of its 25/s at load 1, half of its 50/s at load 2
		p.Prio[2] = sim.PrioPoint{Goodput: 1000} // more than its demand: clipped
		r.Series = append(r.Series, p)
	}
	got := prioServed(s, r, 0)
	if len(got) != 40 || got[5].Y != 100 || got[35].Y != 50 {
		t.Errorf("priority 0: %d points, at 0.6 s %v, at 3.6 s %v; want 40, 100, 50", len(got), got[5].Y, got[35].Y)
	}
	if got := prioServed(s, r, 2); got[35].Y != 100 {
		t.Errorf("priority 2 at 3.6 s: %v, want 100 (clipped)", got[35].Y)
	}
	if got := prioServed(s, r, 1); len(got) != 0 {
		t.Errorf("a priority no class has: %v, want no points", got)
	}
}

// The capacity line follows the capacity the simulator measured, in steps.
func TestCapacityLine(t *testing.T) {
	r := &sim.Result{CapacityRPS: 100}
	for i, c := range []float64{100, 100, 50, 50, 100} {
		r.Series = append(r.Series, sim.Point{T: time.Duration(i+1) * time.Second, Capacity: c})
	}
	want := plotter.XYs{{X: 0, Y: 100}, {X: 2, Y: 100}, {X: 2, Y: 50}, {X: 4, Y: 50}, {X: 4, Y: 100}, {X: 5, Y: 100}}
	if got := capacityLine(r); !slices.Equal(got, want) {
		t.Errorf("capacityLine = %v, want %v", got, want)
	}
}
