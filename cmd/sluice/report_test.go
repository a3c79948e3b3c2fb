package main

import (
	"bytes"
	"image/png"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

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
		case ".svg":
			if !bytes.Contains(b, []byte("<svg")) {
				t.Errorf("%s is not an SVG", name)
			}
		}
	}
}

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
		rs := &runSet{args: []string{"sim", "-out", "x"}, seed: 7, scs: []sim.Scenario{s}, pols: pols,
			results: [][]*sim.Result{make([]*sim.Result, len(pols))}, errs: [][]error{make([]error, len(pols))}}
		for j, p := range pols {
			r, err := sim.Run(s, p, rs.seed)
			if err != nil {
				t.Fatal(err)
			}
			rs.results[0][j] = r
		}
		dir := t.TempDir()
		if err := writeReport(dir, rs); err != nil {
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
	md, _ := os.ReadFile(filepath.Join(dirs[0], "report.md"))
	if !bytes.Contains(md, []byte("| none | 0 |")) || !bytes.Contains(md, []byte("| aimd | 2 |")) {
		t.Errorf("report.md lacks the per-priority rows:\n%s", md)
	}
}
