// Command redistable reads the output of the Redis rate-limit benchmarks
// (BenchmarkRedis, BenchmarkRedisCold and BenchmarkRedisFlood in package
// bench) on stdin and prints Markdown tables: round trips per decision
// (warm and cold), the Redis server's CPU time per decision, the client's
// allocations, the throughput of 64 goroutines with sluice's ratio to the
// reference peer, and the calls to Redis under a hot-key flood.
//
// Usage:
//
//	go test -run '^$' -bench '^BenchmarkRedis' -benchmem . | redistable
//
// A result line's n-th occurrence (of the same benchmark name) belongs to
// run n: the ratios are computed within each run, then their median is
// printed, so that `for i in 1 2 3; do bench.test ... -test.count 1; done`
// compares like with like even on a noisy machine. Rows are implementations
// in the order they first appear; those whose name starts with -sluice are
// sluice's; -ref is the peer they are compared with.
package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"sort"
	"strings"

	"github.com/sluicehq/sluice/bench/internal/benchfmt"
)

func main() {
	cfg := config{}
	flag.StringVar(&cfg.ref, "ref", "redis_rate", "peer sluice's rows are compared with")
	flag.StringVar(&cfg.sluice, "sluice", "sluice.", "name prefix of sluice's rows")
	flag.StringVar(&cfg.floor, "floor", "floor.fcall", "the row of the commands a limit cannot avoid (TIME, GET, SET)")
	flag.Float64Var(&cfg.maxRef, "maxref", 1, "Redis server time per decision of sluice's rows ÷ -ref's must stay within this (sliding_log: 1.5×)")
	flag.Float64Var(&cfg.maxFloor, "maxfloor", 1.3, "Redis server time per decision of sluice's rows ÷ -floor's must stay within this")
	flag.Float64Var(&cfg.minSpeed, "minspeed", 1, "least throughput of sluice's rows ÷ -ref's")
	flag.Float64Var(&cfg.minFewer, "minfewer", 5, "least ratio of -ref's flood calls to sluice's")
	flag.StringVar(&cfg.command, "command", "", "the command that reproduces the run, printed above the tables")
	flag.Parse()

	res, err := parse(os.Stdin)
	if err != nil {
		fmt.Fprintln(os.Stderr, "redistable:", err)
		os.Exit(1)
	}
	if len(res.rows) == 0 {
		fmt.Fprintln(os.Stderr, "redistable: no BenchmarkRedis results on stdin")
		os.Exit(1)
	}
	render(os.Stdout, res, cfg)
	if res.failed {
		fmt.Fprintln(os.Stderr, "redistable: input contains FAIL lines; the tables may be incomplete")
		os.Exit(1)
	}
}

type config struct {
	ref, sluice, command, floor          string
	maxRef, maxFloor, minSpeed, minFewer float64
}

// The cells of BenchmarkRedis, in table order.
var cells = []string{"serial", "distinct", "hot"}

var cellTitle = map[string]string{
	"serial":   "serial, distinct keys",
	"distinct": "64 goroutines, distinct keys",
	"hot":      "64 goroutines, one key",
}

// results holds every run's metrics by benchmark ("redis", "cold",
// "flood"), implementation and cell ("" for cold and flood).
type results struct {
	header []string
	rows   []string
	runs   map[key][]map[string]float64
	failed bool
}

type key struct{ bench, impl, cell string }

func parse(r io.Reader) (*results, error) {
	res := &results{runs: map[key][]map[string]float64{}}
	var err error
	res.header, res.failed, err = benchfmt.Scan(r, res.add)
	return res, err
}

// add records a line such as
//
//	BenchmarkRedis/redis_rate/hot-2   5811   41925 ns/op   9.49 srv-us/op   1 trips/op   685 B/op   22 allocs/op
//	BenchmarkRedisCold/ulule-2   355   677883 ns/op   1 first-trips   1 first.evalsha ...
//	BenchmarkRedisFlood/sluice.gcra-2   18   14467396 ns/op   10 admitted/flood   7.6 trips/kdec ...
func (res *results) add(line string) {
	name, _, vals, ok := benchfmt.ParseLine(line)
	if !ok {
		return
	}
	parts := strings.Split(name, "/")
	var k key
	switch {
	case parts[0] == "BenchmarkRedis" && len(parts) == 3 && slices.Contains(cells, parts[2]):
		k = key{"redis", parts[1], parts[2]}
	case parts[0] == "BenchmarkRedisCold" && len(parts) == 2:
		k = key{"cold", parts[1], ""}
	case parts[0] == "BenchmarkRedisFlood" && len(parts) == 2:
		k = key{"flood", parts[1], ""}
	default:
		return
	}
	if !slices.Contains(res.rows, k.impl) {
		res.rows = append(res.rows, k.impl)
	}
	res.runs[k] = append(res.runs[k], vals)
}

// values returns metric m of every run of k.
func (res *results) values(k key, m string) []float64 {
	var vs []float64
	for _, run := range res.runs[k] {
		if v, ok := run[m]; ok {
			vs = append(vs, v)
		}
	}
	return vs
}

// median returns the median of metric m over the runs of k.
func (res *results) median(k key, m string) (float64, bool) {
	vs := res.values(k, m)
	if len(vs) == 0 {
		return 0, false
	}
	return benchfmt.Median(vs), true
}

// ratios returns, for every run present in both, f(a's metric, b's).
func (res *results) ratios(a, b key, m string, f func(x, y float64) float64) []float64 {
	ra, rb := res.runs[a], res.runs[b]
	var out []float64
	for i := range min(len(ra), len(rb)) {
		x, ok1 := ra[i][m]
		y, ok2 := rb[i][m]
		if ok1 && ok2 {
			out = append(out, f(x, y))
		}
	}
	return out
}

func (res *results) runCount(bench string) int {
	n := 0
	for k, runs := range res.runs {
		if k.bench == bench {
			n = max(n, len(runs))
		}
	}
	return n
}

func (res *results) hasBench(bench string) bool { return res.runCount(bench) > 0 }

func (res *results) isSluice(impl string, cfg config) bool {
	return strings.HasPrefix(impl, cfg.sluice)
}

func render(w io.Writer, res *results, cfg config) {
	if cfg.command != "" {
		fmt.Fprintf(w, "Reproduce: `%s`\n\n", cfg.command)
	}
	if len(res.header) > 0 {
		fmt.Fprintf(w, "%s\n\n", strings.Join(res.header, ", "))
	}
	renderTrips(w, res)
	if res.hasBench("redis") {
		renderServer(w, res, cfg)
		renderCPU(w, res)
		renderAllocs(w, res)
		renderThroughput(w, res, cfg)
	}
	if res.hasBench("flood") {
		renderFlood(w, res, cfg)
	}
}

func row(w io.Writer, cols ...string) { fmt.Fprintf(w, "| %s |\n", strings.Join(cols, " | ")) }

func num(v float64, ok bool) string {
	if !ok {
		return "—"
	}
	return benchfmt.FmtNum(float64(int64(v*100+0.5)) / 100)
}

// renderTrips prints round trips per decision: warm (BenchmarkRedis) and
// cold (BenchmarkRedisCold, with the commands sent).
func renderTrips(w io.Writer, res *results) {
	warm, cold := res.hasBench("redis"), res.hasBench("cold")
	if !warm && !cold {
		return
	}
	fmt.Fprintf(w, "**Round trips per decision** (commands or pipelines the client sent, counted by a go-redis hook; median). Warm: script cached, per decision. Cold: SCRIPT FLUSH, then the limiter is built (setup), makes its first and second decision; then SCRIPT FLUSH again (as after a Redis restart) and its next decision.\n\n")
	head := []string{"implementation"}
	if warm {
		for _, c := range cells {
			head = append(head, "warm, "+cellTitle[c])
		}
	}
	if cold {
		head = append(head, "setup", "first decision", "second decision", "first decision after a restart")
	}
	row(w, head...)
	fmt.Fprintf(w, "|---%s|\n", strings.Repeat("|--:", len(head)-1))
	for _, impl := range res.rows {
		cols := []string{impl}
		if warm {
			for _, c := range cells {
				cols = append(cols, num(res.median(key{"redis", impl, c}, "trips/op")))
			}
		}
		if cold {
			k := key{"cold", impl, ""}
			for _, step := range []string{"setup", "first", "second", "restart"} {
				v, ok := res.median(k, step+"-trips")
				s := num(v, ok)
				if cmds := res.commands(k, step); ok && cmds != "" {
					s += " (" + cmds + ")"
				}
				cols = append(cols, s)
			}
		}
		row(w, cols...)
	}
	fmt.Fprintln(w)
}

// commands lists the commands of a cold step, "1 evalsha, 1 eval", from its
// metrics "<step>.<command>" (median; only whole counts, so a connection's
// handshake caught by one run in many does not show).
func (res *results) commands(k key, step string) string {
	names := map[string]bool{}
	for _, run := range res.runs[k] {
		for m := range run {
			if cmd, ok := strings.CutPrefix(m, step+"."); ok {
				names[cmd] = true
			}
		}
	}
	var sorted []string
	for n := range names {
		sorted = append(sorted, n)
	}
	sort.Strings(sorted)
	var out []string
	for _, n := range sorted {
		var vs []float64
		for _, run := range res.runs[k] {
			vs = append(vs, run[step+"."+n]) // 0 where a run did not send it
		}
		if m := benchfmt.Median(vs); m >= 0.5 {
			out = append(out, fmt.Sprintf("%s %s", benchfmt.FmtNum(float64(int64(m+0.5))), n))
		}
	}
	return strings.Join(out, ", ")
}

func renderServer(w io.Writer, res *results, cfg config) {
	fmt.Fprintf(w, "**Redis server time per decision**, µs: INFO commandstats usec of the commands the client sent (FCALL, EVALSHA and any other), reset by CONFIG RESETSTAT before each timed span, ÷ decisions; median of %d runs. In parentheses, the part spent in the commands the scripts call (TIME, GET, SET…; the rest is Lua), and for sluice's rows the row ÷ %s and ÷ %s in the same run (medians of the runs' ratios). Target for sluice's rows: ≤ %g× %s (sliding_log: ≤ 1.5×) and ≤ %g× %s in every cell.\n\n",
		res.runCount("redis"), cfg.ref, cfg.floor, cfg.maxRef, cfg.ref, cfg.maxFloor, cfg.floor)
	head := []string{"implementation"}
	for _, c := range cells {
		head = append(head, cellTitle[c])
	}
	head = append(head, "target")
	row(w, head...)
	fmt.Fprintf(w, "|---%s|:-:|\n", strings.Repeat("|--:", len(cells)))
	for _, impl := range res.rows {
		cols := []string{impl}
		met := true
		sluice := res.isSluice(impl, cfg)
		maxRef := cfg.maxRef
		if strings.Contains(impl, "sliding_log") {
			maxRef = 1.5
		}
		for _, c := range cells {
			k := key{"redis", impl, c}
			v, ok := res.median(k, "srv-us/op")
			s := num(v, ok)
			var notes []string
			if in, ok2 := res.median(k, "inner-us/op"); ok && ok2 {
				notes = append(notes, num(in, true))
			}
			if sluice {
				div := func(x, y float64) float64 { return x / y }
				rr := res.ratios(k, key{"redis", cfg.ref, c}, "srv-us/op", div)
				fr := res.ratios(k, key{"redis", cfg.floor, c}, "srv-us/op", div)
				if len(rr) > 0 {
					notes = append(notes, fmt.Sprintf("%.2f× %s", benchfmt.Median(rr), cfg.ref))
					met = met && benchfmt.Median(rr) <= maxRef
				}
				if len(fr) > 0 {
					notes = append(notes, fmt.Sprintf("%.2f× floor", benchfmt.Median(fr)))
					met = met && benchfmt.Median(fr) <= cfg.maxFloor
				}
				met = met && ok && len(rr) > 0 && len(fr) > 0
			}
			if len(notes) > 0 {
				s += " (" + strings.Join(notes, ", ") + ")"
			}
			cols = append(cols, s)
		}
		mark := ""
		if sluice {
			mark = "✗"
			if met {
				mark = "✓"
			}
		}
		row(w, append(cols, mark)...)
	}
	fmt.Fprintln(w)
}

// renderCPU prints the CPU time of both processes per decision, where the
// benchmark reported it.
func renderCPU(w io.Writer, res *results) {
	if len(res.values(key{"redis", res.rows[0], cells[0]}, "cli-us/op")) == 0 {
		return
	}
	fmt.Fprintf(w, "**CPU per decision, whole processes**, µs: the benchmark process (getrusage: the limiter, go-redis, the kernel's loopback TCP) / the redis-server process (INFO cpu, user + sys: also reading, parsing and answering); median of %d runs.\n\n",
		res.runCount("redis"))
	cellsHeader(w)
	for _, impl := range res.rows {
		cols := []string{impl}
		for _, c := range cells {
			k := key{"redis", impl, c}
			cols = append(cols, num(res.median(k, "cli-us/op"))+" / "+num(res.median(k, "srvcpu-us/op")))
		}
		row(w, cols...)
	}
	fmt.Fprintln(w)
}

func renderAllocs(w io.Writer, res *results) {
	fmt.Fprintf(w, "**Client allocations per decision** (bytes per decision), -benchmem, median. The parallel cells include the harness's goroutines, a few per thousand decisions.\n\n")
	cellsHeader(w)
	for _, impl := range res.rows {
		cols := []string{impl}
		for _, c := range cells {
			k := key{"redis", impl, c}
			a, ok1 := res.median(k, "allocs/op")
			b, ok2 := res.median(k, "B/op")
			if !ok1 || !ok2 {
				cols = append(cols, "—")
				continue
			}
			cols = append(cols, fmt.Sprintf("%s (%s B)", benchfmt.FmtNum(a), benchfmt.FmtNum(b)))
		}
		row(w, cols...)
	}
	fmt.Fprintln(w)
}

// renderThroughput prints decisions per second and, for sluice's rows, the
// median over runs of the ratio to the reference peer in the same run.
func renderThroughput(w io.Writer, res *results, cfg config) {
	fmt.Fprintf(w, "**Throughput**, decisions per second (1e9 ÷ ns/op), median of %d runs; in parentheses, the row ÷ %s in the same run: median of the runs' ratios [lowest–highest], ✓ when the median is ≥ %g. Decisions that returned an error (sluice's 100 ms timeout on a busy machine) are shown where a run had any.\n\n",
		res.runCount("redis"), cfg.ref, cfg.minSpeed)
	cellsHeader(w)
	for _, impl := range res.rows {
		cols := []string{impl}
		for _, c := range cells {
			k := key{"redis", impl, c}
			ns, ok := res.median(k, "ns/op")
			if !ok || ns == 0 {
				cols = append(cols, "—")
				continue
			}
			s := fmt.Sprintf("%.0f", 1e9/ns)
			if impl != cfg.ref {
				rs := res.ratios(k, key{"redis", cfg.ref, c}, "ns/op", func(x, y float64) float64 { return y / x })
				if len(rs) > 0 {
					m := benchfmt.Median(rs)
					mark := ""
					if res.isSluice(impl, cfg) {
						mark = " ✗"
						if m >= cfg.minSpeed {
							mark = " ✓"
						}
					}
					s += fmt.Sprintf(" (%.2f×%s [%.2f–%.2f])", m, mark, slices.Min(rs), slices.Max(rs))
				}
			}
			if fs := res.values(k, "failed/op"); len(fs) > 0 && slices.Max(fs) > 0 {
				s += fmt.Sprintf(", up to %.2g%% failed", 100*slices.Max(fs))
			}
			cols = append(cols, s)
		}
		row(w, cols...)
	}
	fmt.Fprintln(w)
}

func renderFlood(w io.Writer, res *results, cfg config) {
	fmt.Fprintf(w, "**Hot-key flood**: one key limited to 10 per second, 10,000 decisions from 64 goroutines per flood; median of %d runs. Fewer calls: %s's calls ÷ the row's in the same run, median [lowest–highest], ✓ when ≥ %g.\n\n",
		res.runCount("flood"), cfg.ref, cfg.minFewer)
	row(w, "implementation", "Redis calls per 1000 decisions", "fewer calls than "+cfg.ref, "admitted per flood", "server µs per decision", "flood duration, ms", "decisions per second")
	fmt.Fprintln(w, "|---|--:|--:|--:|--:|--:|--:|")
	for _, impl := range res.rows {
		k := key{"flood", impl, ""}
		if len(res.runs[k]) == 0 {
			continue
		}
		fewer := ""
		if impl != cfg.ref {
			rs := res.ratios(k, key{"flood", cfg.ref, ""}, "trips/kdec", func(x, y float64) float64 { return y / x })
			if len(rs) > 0 {
				m := benchfmt.Median(rs)
				mark := ""
				if res.isSluice(impl, cfg) {
					mark = " ✗"
					if m >= cfg.minFewer {
						mark = " ✓"
					}
				}
				fewer = fmt.Sprintf("%.0f×%s [%.0f–%.0f]", m, mark, slices.Min(rs), slices.Max(rs))
			}
		}
		ns, nsOK := res.median(k, "ns/op")
		row(w, impl,
			num(res.median(k, "trips/kdec")),
			fewer,
			num(res.median(k, "admitted/flood")),
			num(res.median(k, "srv-us/dec")),
			num(ns/1e6, nsOK),
			num(res.median(k, "dec/s")))
	}
	fmt.Fprintln(w)
}

// cellsHeader prints the header of a table with one column per cell.
func cellsHeader(w io.Writer) {
	head := []string{"implementation"}
	for _, c := range cells {
		head = append(head, cellTitle[c])
	}
	row(w, head...)
	fmt.Fprintf(w, "|---%s|\n", strings.Repeat("|--:", len(cells)))
}
