package main

import (
	"bytes"
	"strings"
	"testing"
)

func TestRun(t *testing.T) {
	tests := []struct {
		args []string
		code int
		out  string
	}{
		{[]string{"sim", "-scenario", "no-harm", "-policy", "static"}, 0, "no-harm"},
		{[]string{"sim", "-list"}, 0, "priorities-retries"},
		{[]string{"sim", "-policy", "bogus"}, 2, `unknown policy "bogus"`},
		{[]string{"demo", "-h"}, 0, "adaptive"},
		{[]string{"sim", "-h"}, 0, "sluice sim -explain capacity-drop"},
		{[]string{"sim", "-explain", "no-harm", "-policy", "static"}, 0, "completed in time"},
		{[]string{"sim", "stray"}, 2, `unexpected argument "stray"`},
		{[]string{"sim", "-targets"}, 0, "time to the new optimum ≤ 2.0 s: from the capacity drop"},
		{nil, 2, "usage"},
		{[]string{"bogus"}, 2, `unknown command "bogus"`},
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
