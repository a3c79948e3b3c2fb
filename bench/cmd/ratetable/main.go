// Command ratetable reads the output of the keyed rate-limiter benchmarks
// (BenchmarkKeyed and BenchmarkBytesPerKey in package bench) on stdin and
// prints Markdown tables: the median ns/op of every implementation in every
// cell (key count × serial/parallel × -cpu) with its ratio to the reference
// implementation, the allocations, whether sluice meets its speed target
// against the reference peer in every cell, and the bytes per key.
//
// Usage:
//
//	go test -run '^$' -bench 'BenchmarkKeyed|BenchmarkBytesPerKey' -benchmem . | ratetable
//
// Rows are implementations in the order they first appear. Rows whose name
// starts with -sluice are sluice's; -ref is the row the others are compared
// with, -peer the row sluice must be -target times faster than, and
// -maxbytes the bytes per key sluice's rows must stay within.
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
	ref := flag.String("ref", "sluice.token_bucket", "row the others are compared with")
	sluice := flag.String("sluice", "sluice.", "name prefix of sluice's rows")
	peer := flag.String("peer", "sethvargo", "row sluice's rows must beat by -target")
	target := flag.Float64("target", 2, "how many times faster than -peer sluice's rows must be")
	maxBytes := flag.Float64("maxbytes", 64, "bytes per key sluice's rows must stay within")
	flag.Parse()

	res, err := parse(os.Stdin)
	if err != nil {
		fmt.Fprintln(os.Stderr, "ratetable:", err)
		os.Exit(1)
	}
	if len(res.rows) == 0 && len(res.memRows) == 0 {
		fmt.Fprintln(os.Stderr, "ratetable: no BenchmarkKeyed or BenchmarkBytesPerKey results on stdin")
		os.Exit(1)
	}
	cfg := config{ref: *ref, sluice: *sluice, peer: *peer, target: *target, maxBytes: *maxBytes}
	render(os.Stdout, res, cfg)
	if res.failed {
		fmt.Fprintln(os.Stderr, "ratetable: input contains FAIL lines; the tables may be incomplete")
		os.Exit(1)
	}
}

type config struct {
	ref, sluice, peer string
	target, maxBytes  float64
}

// cell is one column of the speed tables.
type cell struct {
	keys     int    // number of keys
	keyLabel string // as in the benchmark name, e.g. "100k"
	mode     string // "serial" or "parallel"
	cpu      int    // -cpu (GOMAXPROCS; the goroutines of a parallel run)
}

func (c cell) less(d cell) int {
	if c.keys != d.keys {
		return c.keys - d.keys
	}
	if c.mode != d.mode {
		return modeRank(c.mode) - modeRank(d.mode)
	}
	return c.cpu - d.cpu
}

func modeRank(m string) int {
	switch m {
	case "serial":
		return 0
	case "parallel":
		return 1
	}
	return 2
}

// mem is one BenchmarkBytesPerKey result line.
type mem struct{ perKey, keyBytes float64 }

type results struct {
	header  []string
	rows    []string // implementations, first-seen order
	cells   []cell
	runs    map[string]map[cell][]benchfmt.Measure
	memRows []string
	mems    map[string][]mem
	failed  bool
}

func parse(r io.Reader) (*results, error) {
	res := &results{runs: map[string]map[cell][]benchfmt.Measure{}, mems: map[string][]mem{}}
	var err error
	res.header, res.failed, err = benchfmt.Scan(r, res.add)
	slices.SortFunc(res.cells, cell.less)
	return res, err
}

// add records one line if it is a result of either benchmark, such as
//
//	BenchmarkKeyed/keys=100k/sethvargo/parallel-2   1000000   132.2 ns/op   0 B/op   0 allocs/op
//	BenchmarkBytesPerKey/sethvargo-2   1   2.1e9 ns/op   63.6 B/key   16.4 keyB/key
func (res *results) add(line string) {
	name, cpu, vals, ok := benchfmt.ParseLine(line)
	if !ok {
		return
	}
	parts := strings.Split(name, "/")
	switch {
	case parts[0] == "BenchmarkKeyed" && len(parts) == 4 && strings.HasPrefix(parts[1], "keys="):
		label := strings.TrimPrefix(parts[1], "keys=")
		keys, ok := parseCount(label)
		m, hasNs := benchfmt.MeasureOf(vals)
		if !ok || !hasNs {
			return
		}
		c := cell{keys: keys, keyLabel: label, mode: parts[3], cpu: cpu}
		impl := parts[2]
		if !slices.Contains(res.cells, c) {
			res.cells = append(res.cells, c)
		}
		if res.runs[impl] == nil {
			res.runs[impl] = map[cell][]benchfmt.Measure{}
			res.rows = append(res.rows, impl)
		}
		res.runs[impl][c] = append(res.runs[impl][c], m)
	case parts[0] == "BenchmarkBytesPerKey" && len(parts) == 2:
		perKey, ok := vals["B/key"]
		if !ok {
			return
		}
		impl := parts[1]
		if res.mems[impl] == nil {
			res.memRows = append(res.memRows, impl)
		}
		res.mems[impl] = append(res.mems[impl], mem{perKey: perKey, keyBytes: vals["keyB/key"]})
	}
}

// parseCount parses a key count such as "1", "100k" or "1M".
func parseCount(s string) (int, bool) {
	mul := 1
	switch {
	case strings.HasSuffix(s, "k"):
		s, mul = s[:len(s)-1], 1000
	case strings.HasSuffix(s, "M"):
		s, mul = s[:len(s)-1], 1000_000
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 {
		return 0, false
	}
	return n * mul, true
}

// stats is the median and range of one (implementation, cell).
func (res *results) stats(impl string, c cell) (benchfmt.Summary, bool) {
	ms := res.runs[impl][c]
	if len(ms) == 0 {
		return benchfmt.Summary{}, false
	}
	return benchfmt.Summarize(ms), true
}

func (res *results) cellTitle(c cell) string {
	keys := "1 key"
	if c.keys != 1 {
		keys = c.keyLabel + " keys"
	}
	cpus := map[int]bool{}
	for _, d := range res.cells {
		cpus[d.cpu] = true
	}
	switch {
	case c.mode == "parallel":
		g := "goroutines"
		if c.cpu == 1 {
			g = "goroutine"
		}
		return fmt.Sprintf("%s, parallel (%d %s)", keys, c.cpu, g)
	case len(cpus) > 1:
		return fmt.Sprintf("%s, %s (-cpu %d)", keys, c.mode, c.cpu)
	}
	return keys + ", " + c.mode
}

func render(w io.Writer, res *results, cfg config) {
	if len(res.header) > 0 {
		fmt.Fprintf(w, "%s\n\n", strings.Join(res.header, ", "))
	}
	if len(res.rows) > 0 {
		renderSpeed(w, res, cfg)
		renderAllocs(w, res)
		renderTarget(w, res, cfg)
	}
	if len(res.memRows) > 0 {
		renderMem(w, res, cfg)
	}
}

func (res *results) runsLabel() string {
	lo, hi := 0, 0
	for _, impl := range res.rows {
		for _, ms := range res.runs[impl] {
			if lo == 0 || len(ms) < lo {
				lo = len(ms)
			}
			hi = max(hi, len(ms))
		}
	}
	if lo == hi {
		return strconv.Itoa(lo)
	}
	return fmt.Sprintf("%d–%d", lo, hi)
}

func tableHead(w io.Writer, first string, res *results) {
	head := []string{first}
	align := []string{"---"}
	for _, c := range res.cells {
		head = append(head, res.cellTitle(c))
		align = append(align, "--:")
	}
	fmt.Fprintf(w, "| %s |\n|%s|\n", strings.Join(head, " | "), strings.Join(align, "|"))
}

func renderSpeed(w io.Writer, res *results, cfg config) {
	fmt.Fprintf(w, "ns per decision, median of %s runs; in parentheses, the row's median ÷ %s's in the same cell (times slower; below 1: faster).\n\n",
		res.runsLabel(), cfg.ref)
	tableHead(w, "implementation", res)
	for _, impl := range res.rows {
		row := []string{impl}
		for _, c := range res.cells {
			s, ok := res.stats(impl, c)
			if !ok {
				row = append(row, "—")
				continue
			}
			v := benchfmt.FmtNs(s.NS)
			if impl != cfg.ref {
				if r, ok := res.stats(cfg.ref, c); ok && r.NS > 0 {
					v += fmt.Sprintf(" (%.2f×)", s.NS/r.NS)
				}
			}
			row = append(row, v)
		}
		fmt.Fprintf(w, "| %s |\n", strings.Join(row, " | "))
	}
	fmt.Fprintln(w)
}

func renderAllocs(w io.Writer, res *results) {
	fmt.Fprintf(w, "allocs per decision (bytes per decision), median.\n\n")
	tableHead(w, "implementation", res)
	for _, impl := range res.rows {
		row := []string{impl}
		for _, c := range res.cells {
			s, ok := res.stats(impl, c)
			if !ok || !s.HasMem {
				row = append(row, "—")
				continue
			}
			v := benchfmt.FmtNum(s.Allocs)
			if s.Bytes != 0 {
				v += fmt.Sprintf(" (%s B)", benchfmt.FmtNum(s.Bytes))
			}
			row = append(row, v)
		}
		fmt.Fprintf(w, "| %s |\n", strings.Join(row, " | "))
	}
	fmt.Fprintln(w)
}

// renderTarget prints, for each of sluice's rows and each cell, how many
// times faster it is than the peer: the ratio of the medians, met (✓) when
// at least the target, and in brackets the range over all pairs of runs
// (slowest sluice run against fastest peer run, and the reverse).
func renderTarget(w io.Writer, res *results, cfg config) {
	var rows []string
	for _, impl := range res.rows {
		if strings.HasPrefix(impl, cfg.sluice) {
			rows = append(rows, impl)
		}
	}
	if len(rows) == 0 || res.runs[cfg.peer] == nil {
		return
	}
	fmt.Fprintf(w, "Target: %s ÷ sluice ≥ %g in every cell. Ratio of medians, ✓ when met; in brackets, the worst and best pair of runs.\n\n",
		cfg.peer, cfg.target)
	tableHead(w, "sluice row", res)
	met, total := 0, 0
	for _, impl := range rows {
		row := []string{impl}
		for _, c := range res.cells {
			s, ok1 := res.stats(impl, c)
			p, ok2 := res.stats(cfg.peer, c)
			if !ok1 || !ok2 || s.NS == 0 || s.Hi == 0 {
				row = append(row, "—")
				continue
			}
			r := p.NS / s.NS
			mark := "✗"
			if r >= cfg.target {
				mark = "✓"
				met++
			}
			total++
			row = append(row, fmt.Sprintf("%.2f× %s [%.2f–%.2f]", r, mark, p.Lo/s.Hi, p.Hi/s.Lo))
		}
		fmt.Fprintf(w, "| %s |\n", strings.Join(row, " | "))
	}
	fmt.Fprintf(w, "\nMet in %d of %d (row, cell) pairs.\n\n", met, total)
}

func renderMem(w io.Writer, res *results, cfg config) {
	fmt.Fprintf(w, "Heap per key once the limiter holds the keys (live heap growth ÷ keys, less the bytes of the key string the limiter keeps), median of %d run(s); target for sluice's rows: ≤ %g B.\n\n",
		len(res.mems[res.memRows[0]]), cfg.maxBytes)
	fmt.Fprintln(w, "| implementation | bytes per key | key string kept (subtracted) | target |")
	fmt.Fprintln(w, "|---|--:|--:|:-:|")
	for _, impl := range res.memRows {
		var per, key []float64
		for _, m := range res.mems[impl] {
			per = append(per, m.perKey)
			key = append(key, m.keyBytes)
		}
		p := benchfmt.Median(per)
		mark := ""
		if strings.HasPrefix(impl, cfg.sluice) {
			mark = "✗"
			if p <= cfg.maxBytes {
				mark = "✓"
			}
		}
		fmt.Fprintf(w, "| %s | %.1f | %.1f | %s |\n", impl, p, benchfmt.Median(key), mark)
	}
	fmt.Fprintln(w)
}
