// Package benchfmt reads `go test -bench` output and formats the medians
// that the bench module's table commands (cmd/benchtable, cmd/ratetable)
// print.
package benchfmt

import (
	"bufio"
	"io"
	"slices"
	"strconv"
	"strings"
)

// Scan reads go test output, calling line for every line, and returns the
// first goos/goarch/pkg/cpu header lines and whether any test or benchmark
// failed (a "FAIL" line, or "--- FAIL" anywhere on a line: a failed
// sub-benchmark prints it after its name).
func Scan(r io.Reader, line func(string)) (header []string, failed bool, err error) {
	seen := map[string]bool{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64*1024), 1024*1024)
	for sc.Scan() {
		l := sc.Text()
		for _, key := range []string{"goos:", "goarch:", "pkg:", "cpu:"} {
			if strings.HasPrefix(l, key) && !seen[key] {
				seen[key] = true
				header = append(header, strings.TrimSpace(l))
			}
		}
		if strings.HasPrefix(l, "FAIL") || strings.Contains(l, "--- FAIL") {
			failed = true
		}
		line(l)
	}
	return header, failed, sc.Err()
}

// ParseLine parses a result line such as
//
//	BenchmarkAcquireRelease/sluice-2   123456   9.87 ns/op   0 B/op   0 allocs/op
//
// into the benchmark's full name without its -N suffix
// ("BenchmarkAcquireRelease/sluice"), the -cpu value (2; a name without a
// suffix ran at -cpu 1) and its metrics by unit.
func ParseLine(line string) (name string, cpu int, vals map[string]float64, ok bool) {
	f := strings.Fields(line)
	if len(f) < 4 || !strings.HasPrefix(f[0], "Benchmark") {
		return "", 0, nil, false
	}
	if _, err := strconv.ParseInt(f[1], 10, 64); err != nil {
		return "", 0, nil, false
	}
	name, cpu = f[0], 1
	if i := strings.LastIndexByte(name, '-'); i > 0 {
		if n, err := strconv.Atoi(name[i+1:]); err == nil && n > 0 {
			name, cpu = name[:i], n
		}
	}
	vals = map[string]float64{}
	for i := 2; i+1 < len(f); i += 2 {
		v, err := strconv.ParseFloat(f[i], 64)
		if err != nil {
			return "", 0, nil, false
		}
		vals[f[i+1]] = v
	}
	return name, cpu, vals, true
}

// Measure is one run's speed and memory figures.
type Measure struct {
	NS, Bytes, Allocs float64
	HasMem            bool // B/op and allocs/op were reported
}

// MeasureOf picks a Measure out of a line's metrics; false without ns/op.
func MeasureOf(vals map[string]float64) (Measure, bool) {
	ns, ok := vals["ns/op"]
	b, hasB := vals["B/op"]
	a, hasA := vals["allocs/op"]
	return Measure{NS: ns, Bytes: b, Allocs: a, HasMem: hasB && hasA}, ok
}

// Summary is the median (and range of ns/op) of several runs.
type Summary struct {
	NS, Lo, Hi, Bytes, Allocs float64
	HasMem                    bool
	Runs                      int
}

// Summarize returns the medians of ms, which must not be empty.
func Summarize(ms []Measure) Summary {
	var ns, bs, as []float64
	hasMem := true
	for _, m := range ms {
		ns = append(ns, m.NS)
		bs = append(bs, m.Bytes)
		as = append(as, m.Allocs)
		hasMem = hasMem && m.HasMem
	}
	return Summary{
		NS: Median(ns), Lo: slices.Min(ns), Hi: slices.Max(ns),
		Bytes: Median(bs), Allocs: Median(as), HasMem: hasMem, Runs: len(ms),
	}
}

// Median returns the median of xs (the mean of the middle two for an even
// count); xs must not be empty.
func Median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// FmtNs formats a time in ns with three significant digits or so.
func FmtNs(v float64) string {
	switch {
	case v >= 100:
		return strconv.FormatFloat(v, 'f', 0, 64)
	case v >= 10:
		return strconv.FormatFloat(v, 'f', 1, 64)
	default:
		return strconv.FormatFloat(v, 'f', 2, 64)
	}
}

// FmtNum formats v in the fewest digits that represent it.
func FmtNum(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) }
