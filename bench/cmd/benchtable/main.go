// Command benchtable reads `go test -bench` output on stdin and prints a
// Markdown table of the median ns/op and allocs/op (with B/op) of each
// sub-benchmark at each -cpu value, with two ratios taken within the same
// run: the reference gate against the cost floor, and every other
// implementation against the reference gate.
//
// Usage:
//
//	go test -run '^$' -bench BenchmarkAcquireRelease -count 5 -cpu 1,2 | benchtable
//
// Rows are implementations in the order they first appear; the row named by
// -floor is the cost floor and the row named by -ref is the gate the others
// are compared with.
package main

import (
	"bufio"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
)

func main() {
	floor := flag.String("floor", "floor", "name of the cost-floor row")
	ref := flag.String("ref", "sluice", "name of the reference implementation row")
	flag.Parse()

	res, err := parse(os.Stdin)
	if err != nil {
		fmt.Fprintln(os.Stderr, "benchtable:", err)
		os.Exit(1)
	}
	if len(res.rows) == 0 {
		fmt.Fprintln(os.Stderr, "benchtable: no benchmark results on stdin")
		os.Exit(1)
	}
	render(os.Stdout, res, *floor, *ref)
	if res.failed {
		fmt.Fprintln(os.Stderr, "benchtable: input contains FAIL lines; the table may be incomplete")
		os.Exit(1)
	}
}

// measure is one benchmark result line.
type measure struct {
	ns, bytes, allocs float64
	hasMem            bool
}

// results holds every run of every (implementation, -cpu) pair.
type results struct {
	header []string // goos, goarch, pkg, cpu lines
	rows   []string // implementation names, first-seen order
	cpus   []int    // -cpu values, ascending
	runs   map[string]map[int][]measure
	failed bool
}

func parse(r io.Reader) (*results, error) {
	res := &results{runs: map[string]map[int][]measure{}}
	seenHeader := map[string]bool{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64*1024), 1024*1024)
	for sc.Scan() {
		line := sc.Text()
		for _, key := range []string{"goos:", "goarch:", "pkg:", "cpu:"} {
			if strings.HasPrefix(line, key) && !seenHeader[key] {
				seenHeader[key] = true
				res.header = append(res.header, strings.TrimSpace(line))
			}
		}
		if strings.HasPrefix(line, "FAIL") || strings.HasPrefix(line, "--- FAIL") {
			res.failed = true
		}
		name, cpu, m, ok := parseLine(line)
		if !ok {
			continue
		}
		if res.runs[name] == nil {
			res.runs[name] = map[int][]measure{}
			res.rows = append(res.rows, name)
		}
		res.runs[name][cpu] = append(res.runs[name][cpu], m)
		if !slices.Contains(res.cpus, cpu) {
			res.cpus = append(res.cpus, cpu)
		}
	}
	slices.Sort(res.cpus)
	return res, sc.Err()
}

// parseLine parses a line such as
//
//	BenchmarkAcquireRelease/sluice-2   123456   9.87 ns/op   0 B/op   0 allocs/op
//
// into the implementation name ("sluice"), the -cpu value (2; a name without
// a -N suffix ran at -cpu 1) and the measurements.
func parseLine(line string) (name string, cpu int, m measure, ok bool) {
	f := strings.Fields(line)
	if len(f) < 4 || !strings.HasPrefix(f[0], "Benchmark") {
		return "", 0, m, false
	}
	if _, err := strconv.ParseInt(f[1], 10, 64); err != nil {
		return "", 0, m, false
	}
	name, cpu = f[0], 1
	if i := strings.LastIndexByte(name, '-'); i > 0 {
		if n, err := strconv.Atoi(name[i+1:]); err == nil && n > 0 {
			name, cpu = name[:i], n
		}
	}
	// Show the sub-benchmark name alone: "BenchmarkX/sluice" -> "sluice".
	if i := strings.IndexByte(name, '/'); i >= 0 {
		name = name[i+1:]
	} else {
		name = strings.TrimPrefix(name, "Benchmark")
	}
	var hasNs, hasB, hasAllocs bool
	for i := 2; i+1 < len(f); i += 2 {
		v, err := strconv.ParseFloat(f[i], 64)
		if err != nil {
			return "", 0, m, false
		}
		switch f[i+1] {
		case "ns/op":
			m.ns, hasNs = v, true
		case "B/op":
			m.bytes, hasB = v, true
		case "allocs/op":
			m.allocs, hasAllocs = v, true
		}
	}
	m.hasMem = hasB && hasAllocs
	return name, cpu, m, hasNs
}

// median returns the median of xs (the mean of the middle two for an even
// count); xs must not be empty.
func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// cell is the median of one (implementation, -cpu) pair.
type cell struct {
	ns, bytes, allocs float64
	hasMem            bool
	runs              int
}

func (r *results) cell(name string, cpu int) (cell, bool) {
	ms := r.runs[name][cpu]
	if len(ms) == 0 {
		return cell{}, false
	}
	var ns, bs, as []float64
	hasMem := true
	for _, m := range ms {
		ns = append(ns, m.ns)
		bs = append(bs, m.bytes)
		as = append(as, m.allocs)
		hasMem = hasMem && m.hasMem
	}
	return cell{ns: median(ns), bytes: median(bs), allocs: median(as), hasMem: hasMem, runs: len(ms)}, true
}

func render(w io.Writer, r *results, floor, ref string) {
	if len(r.header) > 0 {
		fmt.Fprintf(w, "%s\n\n", strings.Join(r.header, ", "))
	}
	minRuns, maxRuns := 0, 0
	for _, name := range r.rows {
		for _, cpu := range r.cpus {
			n := len(r.runs[name][cpu])
			if n == 0 {
				continue
			}
			if minRuns == 0 || n < minRuns {
				minRuns = n
			}
			maxRuns = max(maxRuns, n)
		}
	}
	runs := strconv.Itoa(minRuns)
	if minRuns != maxRuns {
		runs = fmt.Sprintf("%d–%d", minRuns, maxRuns)
	}
	fmt.Fprintf(w, "Median of %s runs per cell. Ratio: %s row = %s / %s; other rows = row / %s (times slower than %s, same run).\n\n",
		runs, ref, ref, floor, ref, ref)

	head := []string{"implementation"}
	align := []string{"---"}
	for _, cpu := range r.cpus {
		head = append(head,
			fmt.Sprintf("-cpu %d ns/op", cpu),
			fmt.Sprintf("-cpu %d allocs/op", cpu),
			fmt.Sprintf("-cpu %d ratio", cpu))
		align = append(align, "--:", "--:", "--:")
	}
	fmt.Fprintf(w, "| %s |\n", strings.Join(head, " | "))
	fmt.Fprintf(w, "|%s|\n", strings.Join(align, "|"))

	for _, name := range r.rows {
		row := []string{name}
		for _, cpu := range r.cpus {
			c, ok := r.cell(name, cpu)
			if !ok {
				row = append(row, "—", "—", "—")
				continue
			}
			allocs := "—"
			if c.hasMem {
				allocs = fmtNum(c.allocs)
				if c.bytes != 0 {
					allocs += fmt.Sprintf(" (%s B)", fmtNum(c.bytes))
				}
			}
			row = append(row, fmtNs(c.ns), allocs, ratio(r, name, cpu, c, floor, ref))
		}
		fmt.Fprintf(w, "| %s |\n", strings.Join(row, " | "))
	}
}

// ratio is sluice/floor for the reference row, row/sluice for every other row
// except the floor, which has none.
func ratio(r *results, name string, cpu int, c cell, floor, ref string) string {
	var base string
	switch name {
	case floor:
		return ""
	case ref:
		base = floor
	default:
		base = ref
	}
	bc, ok := r.cell(base, cpu)
	if !ok || bc.ns == 0 {
		return "—"
	}
	return fmt.Sprintf("%.1f× %s", c.ns/bc.ns, base)
}

func fmtNs(v float64) string {
	switch {
	case v >= 100:
		return strconv.FormatFloat(v, 'f', 0, 64)
	case v >= 10:
		return strconv.FormatFloat(v, 'f', 1, 64)
	default:
		return strconv.FormatFloat(v, 'f', 2, 64)
	}
}

func fmtNum(v float64) string {
	return strconv.FormatFloat(v, 'f', -1, 64)
}
