package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"runtime/metrics"
	"sort"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice/adaptive"
)

// traceEvery is the period of a trace's rows, server side and client side.
const traceEvery = 50 * time.Millisecond

// tracedGate is the gate the server process's guard built (nil for a guard
// without one): the server's trace reads its state.
var tracedGate atomic.Pointer[adaptive.Limiter]

// keepGate records gate as the one the trace reads and returns it.
func keepGate(gate *adaptive.Limiter, err error) (*adaptive.Limiter, error) {
	if err == nil {
		tracedGate.Store(gate)
	}
	return gate, err
}

// traceServer writes to w, every traceEvery until stop closes, one row of
// the server's state: the process's CPU use over the period (% of one
// core), the requests served and refused in it, the requests inside the
// outermost wrapper, the gate's limit, in flight, front limit, floor,
// throughput and probe, and the Go scheduler's run queue and mean wait for
// a CPU over the period (a SchedulerLatency of its own, which also times
// the CPU use over the period as it really elapsed: a late tick still
// reads right). One write per row, unbuffered: the harness kills the
// server at the end of a run.
func traceServer(w io.Writer, n *counters, stop <-chan struct{}) {
	fmt.Fprintln(w, "t_ms\tcpu_pct\tserved\trefused\tinside\tlimit\tgate_inflight\tfront_limit\trunnable\tsched_wait_ms\tidle_pct\tfloor_ms\tthroughput\tprobing")
	sig := adaptive.NewSchedulerLatency()
	procs := float64(runtime.GOMAXPROCS(0))
	tick := time.NewTicker(traceEvery)
	defer tick.Stop()
	start := time.Now()
	last := n.stats()
	idle := []metrics.Sample{{Name: "/cpu/classes/idle:cpu-seconds"}, {Name: "/cpu/classes/total:cpu-seconds"}}
	metrics.Read(idle)
	lastIdle, lastTotal := idle[0].Value.Float64(), idle[1].Value.Float64()
	for {
		select {
		case <-stop:
			return
		case <-tick.C:
		}
		s := n.stats()
		wait, _ := sig.Delay()
		busy, _ := sig.Busy()
		metrics.Read(idle)
		idlePct := 0.0
		if dt := idle[1].Value.Float64() - lastTotal; dt > 0 {
			idlePct = 100 * (idle[0].Value.Float64() - lastIdle) / dt
		}
		lastIdle, lastTotal = idle[0].Value.Float64(), idle[1].Value.Float64()
		limit, inflight, front, floor, thr, probing := 0, 0, 0, time.Duration(0), 0.0, false
		if g := tracedGate.Load(); g != nil {
			limit, inflight, front, floor, thr, probing = g.Limit(), g.InFlight(), g.FrontLimit(), g.Floor(), g.Throughput(), g.Probing()
		}
		fmt.Fprintf(w, "%d\t%.0f\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%.3f\t%.0f\t%.3f\t%.0f\t%t\n",
			time.Since(start).Milliseconds(), 100*busy*procs, s.Served-last.Served, s.Refused-last.Refused, s.InFlight,
			limit, inflight, front, sig.Queue(), ms64(wait), idlePct, ms64(floor), thr, probing)
		last = s
	}
}

func ms64(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// traceName is the file a run's trace goes to in dir; side is "server" or
// "client".
func traceName(dir string, cfg config, contender, cs, side string) string {
	return filepath.Join(dir, fmt.Sprintf("%s-%d-%s-%s-%s.%s.tsv", cfg.transport, cfg.cores, cfg.work.name, contender, cs, side))
}

// writeClientTrace writes the client's view of a run to path: per
// traceEvery of send time, the requests sent, served within slo, served
// late, refused, timed out and failed, and the p50 and p99 of the served.
func writeClientTrace(path string, samples []sample, slo time.Duration) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	bw := bufio.NewWriter(f)
	fmt.Fprintln(bw, "t_ms\tsent\tgood\tlate\trefused\ttimeout\tfailed\tp50_ms\tp99_ms")
	sorted := append([]sample(nil), samples...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].at < sorted[j].at })
	for i := 0; i < len(sorted); {
		bin := sorted[i].at / traceEvery
		j := i
		for j < len(sorted) && sorted[j].at/traceEvery == bin {
			j++
		}
		t := count(sorted[i:j], window{bin * traceEvery, (bin + 1) * traceEvery}, slo)
		fmt.Fprintf(bw, "%d\t%d\t%d\t%d\t%d\t%d\t%d\t%.2f\t%.2f\n", (bin * traceEvery).Milliseconds(),
			t.sent, t.good, t.ok-t.good, t.refused, t.timeout, t.failed, ms64(t.p50), ms64(t.p99))
		i = j
	}
	if err := bw.Flush(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
