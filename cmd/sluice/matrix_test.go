package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestMatrix runs `sluice matrix` on a tiny subset and checks the report.
func TestMatrix(t *testing.T) {
	out := filepath.Join(t.TempDir(), "docs", "matrix.md")
	args := []string{"matrix", "-models", "fifo", "-cores", "1", "-dists", "exp", "-scenarios", "no-harm-0.7,bursts",
		"-policies", "none,static", "-seeds", "1", "-scale", "0.1", "-out", out}
	var stdout, stderr bytes.Buffer
	if code := run(args, &stdout, &stderr); code != 0 {
		t.Fatalf("run(%q) = %d, stderr:\n%s", args, code, stderr.String())
	}
	for _, want := range []string{"none: 1/2 rows pass", "static: ", "2 rows in ", out} {
		if !strings.Contains(stdout.String(), want) {
			t.Errorf("stdout does not contain %q:\n%s", want, stdout.String())
		}
	}
	if stderr.Len() > 0 {
		t.Errorf("stderr is not a terminal, yet:\n%s", stderr.String())
	}
	md, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"# sluice server-zoo matrix", "- **none: 1/2 rows pass**", "## fifo",
		"| 1 | exp | no-harm-0.7 | refused ≤ ", "| L=", "| 1 | exp | bursts |", "**FAIL** loss over bound", "compressed in time by 0.1",
		"## Where even the best fixed limit misses the targets", "`fifo`: M/M/c"} {
		if !bytes.Contains(md, []byte(want)) {
			t.Errorf("the report does not contain %q:\n%s", want, md)
		}
	}
}

func TestMatrixFlags(t *testing.T) {
	tests := []struct {
		args []string
		code int
		out  string
	}{
		{[]string{"matrix", "-list"}, 0, "fixed-wait"},
		{[]string{"matrix", "-cores", "0"}, 2, "bad core count"},
		{[]string{"matrix", "-models", "heap"}, 2, `unknown zoo model "heap"`},
		{[]string{"matrix", "-dists", "pareto"}, 2, `unknown distribution "pareto"`},
		{[]string{"matrix", "-scenarios", "nope", "-cores", "1"}, 2, `unknown incident scenario "nope"`},
		{[]string{"matrix", "-policies", "nope"}, 2, `unknown policy "nope"`},
		{[]string{"matrix", "-seeds", "0"}, 2, "-seeds"},
		{[]string{"matrix", "-scale", "0"}, 2, "-scale"},
		{[]string{"matrix", "extra"}, 2, "unexpected arguments"},
		{[]string{"matrix", "-trace", "ps/4/exp"}, 2, "want model/cores/dist/scenario"},
		{[]string{"matrix", "-trace", "ps/0/exp/bursts"}, 2, "bad core count"},
		{[]string{"matrix", "-trace", "ps/4/exp/nope"}, 2, `unknown incident scenario "nope"`},
		{[]string{"matrix", "-trace", "ps/4/exp/bursts", "-every", "0s"}, 2, "must be positive"},
	}
	for _, tt := range tests {
		var out, errb bytes.Buffer
		if code := run(tt.args, &out, &errb); code != tt.code {
			t.Errorf("run(%q) = %d, want %d", tt.args, code, tt.code)
		}
		if got := out.String() + errb.String(); !strings.Contains(got, tt.out) {
			t.Errorf("run(%q) printed %q, want it to contain %q", tt.args, got, tt.out)
		}
	}
}

// TestMatrixTrace prints one row's series: its verdicts, then a line per
// interval with the limit and the floor the gate believed.
func TestMatrixTrace(t *testing.T) {
	args := []string{"matrix", "-trace", "fifo/4/exp/no-harm-0.7", "-policies", "static,gradient-default", "-every", "5s"}
	var stdout, stderr bytes.Buffer
	if code := run(args, &stdout, &stderr); code != 0 {
		t.Fatalf("run(%q) = %d, stderr:\n%s", args, code, stderr.String())
	}
	out := stdout.String()
	for _, want := range []string{"fifo/4/exp/no-harm-0.7, static, seed 1: reject_ratio ≤ 0.005 ",
		"fifo/4/exp/no-harm-0.7, gradient-default, seed 1:", "floor_error ≤ 0.3 ", "true floor ms", "  25.00  "} {
		if !strings.Contains(out, want) {
			t.Errorf("the trace does not contain %q:\n%s", want, out)
		}
	}
	if n := strings.Count(out, "\n"); n != 2*(1+1+5) {
		t.Errorf("%d lines, want per policy a verdict, a header and 5 intervals of 5 s:\n%s", n, out)
	}
}
