package bench

import (
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"runtime"
	"runtime/metrics"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/ratelimit"
)

// TestRateCompare is the keyed rate-limiter comparison of issue 18, with
// the contenders interleaved in one process so that a ratio compares like
// with like on a shared machine:
//
//   - cells: 1 key, 100k keys and 1M keys; for many keys three visiting
//     orders (insertion: the order the keys were inserted in, cyclically;
//     uniform: uniformly at random; zipf: Zipf with s = 1.1 over a random
//     permutation of the keys); serial (one goroutine) and parallel (two
//     goroutines, each with its own stream, sharing the limiter);
//   - every limiter is filled with all the keys first (one admission each,
//     from "user:0" … in insertion order) and then decides rcBatch requests
//     per round for keys it holds;
//   - the keys a round visits are fresh strings, built for the cell in
//     visiting order in one buffer, as a server's parsed keys are: hot in
//     the cache, never sharing bytes with the limiter's copy, so no
//     comparison can return early on equal pointers;
//   - a round times each contender once, on the same stream, in an order
//     rotated from round to round; the ratio of a round is sethvargo's time
//     ÷ the contender's (above 1: faster than sethvargo), and the table
//     reports the median of those ratios with their range, and the median ns
//     per decision;
//   - a contender that allocated during its batch is followed by an untimed
//     runtime.GC, so that no one pays for another's garbage.
//
// It runs only with -ratecompare (minutes; see run-ratelimit.sh) and prints
// Markdown tables on stdout.
func TestRateCompare(t *testing.T) {
	if !*rcEnabled {
		t.Skip("the interleaved comparison runs with -ratecompare (run-ratelimit.sh)")
	}
	var keyCounts []int
	for f := range strings.SplitSeq(*rcKeyCounts, ",") {
		n, err := strconv.Atoi(f)
		if err != nil || n < 1 {
			t.Fatalf("-ratecompare.keys: %q", f)
		}
		keyCounts = append(keyCounts, n)
	}
	impls := rcImpls()
	var cells []rcCell
	for _, n := range keyCounts {
		cells = append(cells, rcRunKeys(t, impls, n)...)
	}
	rcPrint(os.Stdout, impls, cells)
}

var (
	rcEnabled   = flag.Bool("ratecompare", false, "run TestRateCompare, the interleaved keyed rate-limiter comparison")
	rcKeyCounts = flag.String("ratecompare.keys", "1,100000,1000000", "key counts of TestRateCompare")
	rcRounds    = flag.Int("ratecompare.rounds", 7, "rounds per cell of TestRateCompare")
	rcBatch     = flag.Int("ratecompare.batch", 1<<17, "decisions per contender per round of TestRateCompare")
	rcOnly      = flag.String("ratecompare.impls", "", "comma-separated contenders of TestRateCompare (default: all)")
)

// rcImpls are the contenders: sluice's four constant-state algorithms on
// the system clock, its buckets on a 1 ms clock.Coarse, and the peers
// (sethvargo first among them: the reference of the ratios).
func rcImpls() []rlImpl {
	var out []rlImpl
	for _, impl := range rlImpls() {
		if impl.keyless {
			continue
		}
		if *rcOnly != "" && !slices.Contains(strings.Split(*rcOnly, ","), impl.name) && impl.name != "sethvargo" {
			continue
		}
		out = append(out, impl)
	}
	return out
}

// rcCell is one cell's results, per contender (in rcImpls order).
type rcCell struct {
	keys   int
	order  string
	mode   string // serial, parallel
	ns     []float64
	ratio  []float64 // median of the rounds' sethvargo ÷ contender
	lo, hi []float64
	allocs []float64 // per decision
}

// rcRunKeys fills every contender with n keys and runs the cells of n.
func rcRunKeys(t *testing.T, impls []rlImpl, n int) []rcCell {
	stored := make([]string, n)
	for i := range stored {
		stored[i] = "user:" + strconv.Itoa(i)
	}
	ks := make([]keyed, len(impls))
	for i, impl := range impls {
		ks[i] = impl.new(t, rlRate, rlPeriod)
		if c := ks[i].run(stored); c != (tally{}) {
			t.Fatalf("%s refused or failed while filling: %+v", impl.name, c)
		}
	}
	defer func() {
		for _, k := range ks {
			k.close()
		}
	}()
	runtime.GC()
	orders := []string{"insertion", "uniform", "zipf"}
	if n == 1 {
		orders = []string{"one"}
	}
	var cells []rcCell
	r := rand.New(rand.NewPCG(uint64(n), 18))
	for _, order := range orders {
		idx := rcVisits(r, n, order, *rcBatch)
		serial := rcStream(stored, idx)
		// Two goroutines: two streams of half the decisions each, from
		// the same order (a different stretch of it for insertion).
		half := *rcBatch / 2
		par := [2][]string{rcStream(stored, rcVisits(r, n, order, half)), rcStream(stored, rcVisits(r, n, order, half))}
		cells = append(cells,
			rcRun(t, impls, ks, rcCell{keys: n, order: order, mode: "serial"}, func(k keyed) tally { return k.run(serial) }, len(serial)),
			rcRun(t, impls, ks, rcCell{keys: n, order: order, mode: "parallel"}, func(k keyed) tally { return rcParallel(k, par) }, 2*half),
		)
	}
	return cells
}

// rcVisits returns m key indices in [0, n) in the given order.
func rcVisits(r *rand.Rand, n int, order string, m int) []int {
	idx := make([]int, m)
	switch order {
	case "one":
	case "insertion":
		start := r.IntN(n)
		for i := range idx {
			idx[i] = (start + i) % n
		}
	case "uniform":
		for i := range idx {
			idx[i] = r.IntN(n)
		}
	case "zipf":
		perm := r.Perm(n)
		z := rand.NewZipf(r, 1.1, 1, uint64(n-1))
		for i := range idx {
			idx[i] = perm[z.Uint64()]
		}
	}
	return idx
}

// rcStream returns fresh copies of the keys idx visits, laid out in one
// buffer in visiting order.
func rcStream(stored []string, idx []int) []string {
	var sb strings.Builder
	for _, i := range idx {
		sb.WriteString(stored[i])
	}
	buf := sb.String()
	out := make([]string, len(idx))
	off := 0
	for j, i := range idx {
		l := len(stored[i])
		out[j] = buf[off : off+l]
		off += l
	}
	return out
}

// rcParallel runs the two streams on two goroutines at once.
func rcParallel(k keyed, streams [2][]string) tally {
	var wg sync.WaitGroup
	var res [2]tally
	start := make(chan struct{})
	for g := range streams {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			res[g] = k.run(streams[g])
		}()
	}
	close(start)
	wg.Wait()
	return tally{refused: res[0].refused + res[1].refused, failed: res[0].failed + res[1].failed}
}

// rcAllocs reads the process's heap allocations so far.
func rcAllocs() uint64 {
	s := []metrics.Sample{{Name: "/gc/heap/allocs:objects"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

// rcRun times every contender on one cell: a warm-up pass each, then
// rcRounds rounds in rotated order.
func rcRun(t *testing.T, impls []rlImpl, ks []keyed, cell rcCell, run func(keyed) tally, decisions int) rcCell {
	ref := slices.IndexFunc(impls, func(i rlImpl) bool { return i.name == "sethvargo" })
	times := make([][]float64, len(ks))
	allocs := make([][]float64, len(ks))
	for i, k := range ks {
		run(k) // warm-up
		_ = i
	}
	runtime.GC()
	for round := range *rcRounds {
		for j := range ks {
			i := (j + round) % len(ks)
			a0 := rcAllocs()
			t0 := time.Now()
			c := run(ks[i])
			el := time.Since(t0)
			a := rcAllocs() - a0
			if c.refused > 0 {
				t.Fatalf("%s refused %d in %d keys/%s/%s", impls[i].name, c.refused, cell.keys, cell.order, cell.mode)
			}
			times[i] = append(times[i], float64(el.Nanoseconds())/float64(decisions))
			allocs[i] = append(allocs[i], float64(a)/float64(decisions))
			if a > 0 {
				runtime.GC()
			}
		}
	}
	for i := range ks {
		var ratios []float64
		for round := range times[i] {
			ratios = append(ratios, times[ref][round]/times[i][round])
		}
		cell.ns = append(cell.ns, median(times[i]))
		cell.ratio = append(cell.ratio, median(ratios))
		cell.lo = append(cell.lo, slices.Min(ratios))
		cell.hi = append(cell.hi, slices.Max(ratios))
		cell.allocs = append(cell.allocs, median(allocs[i]))
		fmt.Fprintf(os.Stderr, "ratecompare keys=%d order=%s mode=%s impl=%s ns/op=%.1f vs-sethvargo=%.2f [%.2f-%.2f] allocs/op=%.3f\n",
			cell.keys, cell.order, cell.mode, impls[i].name, cell.ns[i], cell.ratio[i], cell.lo[i], cell.hi[i], cell.allocs[i])
	}
	return cell
}

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// rcPrint writes the tables: ns per decision with the ratio to sethvargo,
// and the targets.
func rcPrint(w *os.File, impls []rlImpl, cells []rcCell) {
	fmt.Fprintf(w, "goos: %s, goarch: %s, %s, GOMAXPROCS %d; %d rounds of %d decisions per contender per cell\n\n",
		runtime.GOOS, runtime.GOARCH, runtime.Version(), runtime.GOMAXPROCS(0), *rcRounds, *rcBatch)
	fmt.Fprintf(w, "ns per decision, median of the rounds; in parentheses sethvargo's time ÷ the row's, median of the rounds' ratios [lowest–highest] (above 1: faster than sethvargo).\n\n")
	fmt.Fprintf(w, "| implementation |")
	for _, c := range cells {
		fmt.Fprintf(w, " %s |", rcCellName(c))
	}
	fmt.Fprintf(w, "\n|---|")
	for range cells {
		fmt.Fprintf(w, "--:|")
	}
	fmt.Fprintln(w)
	for i, impl := range impls {
		fmt.Fprintf(w, "| %s |", impl.name)
		for _, c := range cells {
			if impl.name == "sethvargo" {
				fmt.Fprintf(w, " %.0f |", c.ns[i])
				continue
			}
			fmt.Fprintf(w, " %.0f (%.2f× [%.2f–%.2f]) |", c.ns[i], c.ratio[i], c.lo[i], c.hi[i])
		}
		fmt.Fprintln(w)
	}
	fmt.Fprintf(w, "\nallocations per decision, median.\n\n| implementation |")
	for _, c := range cells {
		fmt.Fprintf(w, " %s |", rcCellName(c))
	}
	fmt.Fprintf(w, "\n|---|")
	for range cells {
		fmt.Fprintf(w, "--:|")
	}
	fmt.Fprintln(w)
	for i, impl := range impls {
		fmt.Fprintf(w, "| %s |", impl.name)
		for _, c := range cells {
			fmt.Fprintf(w, " %.2g |", c.allocs[i])
		}
		fmt.Fprintln(w)
	}
}

func rcCellName(c rcCell) string {
	mode := "serial"
	if c.mode == "parallel" {
		mode = "2 goroutines"
	}
	if c.keys == 1 {
		return "1 key, " + mode
	}
	return rlKeyLabel(c.keys) + " " + c.order + ", " + mode
}

var _ = ratelimit.TokenBucket
