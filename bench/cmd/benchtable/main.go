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
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/sluicehq/sluice/bench/internal/benchfmt"
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

// results holds every run of every (implementation, -cpu) pair.
type results struct {
	header []string // goos, goarch, pkg, cpu lines
	rows   []string // implementation names, first-seen order
	cpus   []int    // -cpu values, ascending
	runs   map[string]map[int][]benchfmt.Measure
	failed bool
}

func parse(r io.Reader) (*results, error) {
	res := &results{runs: map[string]map[int][]benchfmt.Measure{}}
	var err error
	res.header, res.failed, err = benchfmt.Scan(r, func(line string) {
		name, cpu, vals, ok := benchfmt.ParseLine(line)
		if !ok {
			return
		}
		m, ok := benchfmt.MeasureOf(vals)
		if !ok {
			return
		}
		// Show the sub-benchmark name alone: "BenchmarkX/sluice" -> "sluice".
		if i := strings.IndexByte(name, '/'); i >= 0 {
			name = name[i+1:]
		} else {
			name = strings.TrimPrefix(name, "Benchmark")
		}
		if res.runs[name] == nil {
			res.runs[name] = map[int][]benchfmt.Measure{}
			res.rows = append(res.rows, name)
		}
		res.runs[name][cpu] = append(res.runs[name][cpu], m)
		if !slices.Contains(res.cpus, cpu) {
			res.cpus = append(res.cpus, cpu)
		}
	})
	slices.Sort(res.cpus)
	return res, err
}

// cell is the median of one (implementation, -cpu) pair.
func (r *results) cell(name string, cpu int) (benchfmt.Summary, bool) {
	ms := r.runs[name][cpu]
	if len(ms) == 0 {
		return benchfmt.Summary{}, false
	}
	return benchfmt.Summarize(ms), true
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
			if c.HasMem {
				allocs = benchfmt.FmtNum(c.Allocs)
				if c.Bytes != 0 {
					allocs += fmt.Sprintf(" (%s B)", benchfmt.FmtNum(c.Bytes))
				}
			}
			row = append(row, benchfmt.FmtNs(c.NS), allocs, ratio(r, name, cpu, c, floor, ref))
		}
		fmt.Fprintf(w, "| %s |\n", strings.Join(row, " | "))
	}
}

// ratio is sluice/floor for the reference row, row/sluice for every other row
// except the floor, which has none.
func ratio(r *results, name string, cpu int, c benchfmt.Summary, floor, ref string) string {
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
	if !ok || bc.NS == 0 {
		return "—"
	}
	return fmt.Sprintf("%.1f× %s", c.NS/bc.NS, base)
}
