package main

import (
	"strings"
	"testing"
)

const sample = `goos: linux
goarch: amd64
pkg: github.com/sluicehq/sluice/bench
cpu: Some CPU
BenchmarkKeyed/keys=1/sluice.token_bucket/serial-2     1000   50.0 ns/op   0 B/op   0 allocs/op
BenchmarkKeyed/keys=1/sluice.token_bucket/serial-2     1000   40.0 ns/op   0 B/op   0 allocs/op
BenchmarkKeyed/keys=1/sluice.token_bucket/serial-2     1000   60.0 ns/op   0 B/op   0 allocs/op
BenchmarkKeyed/keys=1/sluice.token_bucket/parallel-2   1000   80.0 ns/op   0 B/op   0 allocs/op
BenchmarkKeyed/keys=1/sethvargo/serial-2               1000  110.0 ns/op   0 B/op   0 allocs/op
BenchmarkKeyed/keys=1/sethvargo/serial-2               1000  100.0 ns/op   0 B/op   0 allocs/op
BenchmarkKeyed/keys=1/sethvargo/serial-2               1000  120.0 ns/op   0 B/op   0 allocs/op
BenchmarkKeyed/keys=1/sethvargo/parallel-2             1000  120.0 ns/op   0 B/op   0 allocs/op
BenchmarkKeyed/keys=100k/sethvargo/serial-2            1000  300.0 ns/op   0 B/op   0 allocs/op
BenchmarkKeyed/keys=1/ulule/serial-2                   1000  400.0 ns/op  24 B/op   2 allocs/op
BenchmarkKeyed/keys=1/uber/parallel-2                  1000   70.0 ns/op   0.001 sleeps/op   0 B/op   0 allocs/op
BenchmarkBytesPerKey/sluice.token_bucket-2   1   2000000000 ns/op   44.0 B/key   16.0 keyB/key
BenchmarkBytesPerKey/sethvargo-2             1   2000000000 ns/op  120.0 B/key   16.0 keyB/key
`

func TestParse(t *testing.T) {
	res, err := parse(strings.NewReader(sample))
	if err != nil {
		t.Fatal(err)
	}
	if res.failed {
		t.Error("failed without FAIL lines")
	}
	wantRows := []string{"sluice.token_bucket", "sethvargo", "ulule", "uber"}
	if strings.Join(res.rows, ",") != strings.Join(wantRows, ",") {
		t.Errorf("rows %v, want %v", res.rows, wantRows)
	}
	if len(res.cells) != 3 {
		t.Fatalf("cells %v, want 3", res.cells)
	}
	// Sorted by key count, then serial before parallel.
	if c := res.cells[0]; c.keys != 1 || c.mode != "serial" || c.cpu != 2 {
		t.Errorf("first cell %+v", c)
	}
	if c := res.cells[2]; c.keys != 100_000 || c.keyLabel != "100k" {
		t.Errorf("last cell %+v", c)
	}
	s, ok := res.stats("sluice.token_bucket", res.cells[0])
	if !ok || s.NS != 50 || s.Lo != 40 || s.Hi != 60 || s.Runs != 3 {
		t.Errorf("stats %+v", s)
	}
	if got := res.mems["sethvargo"]; len(got) != 1 || got[0].perKey != 120 || got[0].keyBytes != 16 {
		t.Errorf("mems %+v", got)
	}
}

func TestRender(t *testing.T) {
	res, err := parse(strings.NewReader(sample))
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	render(&b, res, config{ref: "sluice.token_bucket", sluice: "sluice.", peer: "sethvargo", target: 2, maxBytes: 64})
	out := b.String()
	for _, want := range []string{
		"| 1 key, serial | 1 key, parallel (2 goroutines) | 100k keys, serial |",
		"| sethvargo | 110 (2.20×) | 120 (1.50×) | 300 |",
		"| ulule | 2 (24 B) | — | — |",
		"| sluice.token_bucket | 2.20× ✓ [1.67–3.00] | 1.50× ✗ [1.50–1.50] | — |",
		"Met in 1 of 2 (row, cell) pairs.",
		"| sluice.token_bucket | 44.0 | 16.0 | ✓ |",
		"| sethvargo | 120.0 | 16.0 |  |",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

func TestFailedRepetition(t *testing.T) {
	in := sample + "BenchmarkKeyed/keys=1/throttled/parallel-2 \t--- FAIL: BenchmarkKeyed/keys=1/throttled/parallel-2\n"
	res, err := parse(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	if !res.failed {
		t.Error("a failed repetition was not noticed")
	}
}
