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
