package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"
)

// loadAverage returns the 1-, 5- and 15-minute load averages from
// /proc/loadavg, or "?" where there is none.
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}

// busy reports whether a loadAverage line's 1-minute figure exceeds the
// number of CPUs.
func busy(load string) bool {
	f := strings.Fields(load)
	if len(f) == 0 {
		return false
	}
	v, err := strconv.ParseFloat(f[0], 64)
	return err == nil && v > float64(runtime.NumCPU())
}

// cpuModel returns the first "model name" of /proc/cpuinfo, or "".
func cpuModel() string {
	f, err := os.Open("/proc/cpuinfo")
	if err != nil {
		return ""
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

// ms formats a duration in milliseconds with three significant figures;
// a negative one (no value) is "–".
func ms(d time.Duration) string {
	if d < 0 {
		return "–"
	}
	v := float64(d) / float64(time.Millisecond)
	switch {
	case v < 10:
		return fmt.Sprintf("%.2f", v)
	case v < 100:
		return fmt.Sprintf("%.1f", v)
	}
	return fmt.Sprintf("%.0f", v)
}

func pct(n, of int) float64 {
	if of == 0 {
		return 0
	}
	return 100 * float64(n) / float64(of)
}

// formatLone says what the lone client saw: how many of its requests
// succeeded, what became of the others, and the first and slowest
// latencies.
func formatLone(l loneResult) string {
	if l.err != nil {
		return "error: " + l.err.Error()
	}
	if len(l.samples) == 0 {
		return "–"
	}
	var n [4]int
	var slowest time.Duration
	for _, s := range l.samples {
		n[s.out]++
		slowest = max(slowest, s.lat)
	}
	out := fmt.Sprintf("%d/%d ok", n[ok], len(l.samples))
	for o, name := range []string{refused: "refused", timeout: "timed out", failed: "failed"} {
		if o != int(ok) && n[o] > 0 {
			out += fmt.Sprintf(", %d %s", n[o], name)
		}
	}
	return out + fmt.Sprintf("; first %s ms, max %s ms", ms(l.samples[0].lat), ms(slowest))
}

// write renders the report as Markdown.
func (r *report) write(w io.Writer) {
	o := r.opts
	fmt.Fprintf(w, "# realload: a real server process under real load\n\n")
	model := cpuModel()
	if model != "" {
		model = ", " + model
	}
	fmt.Fprintf(w, "- machine: %d CPUs (runtime.NumCPU)%s, %s/%s, %s; load average %s at the start, %s at the end; run took %v\n",
		runtime.NumCPU(), model, runtime.GOOS, runtime.GOARCH, runtime.Version(), r.loadStart, r.loadEnd, r.end.Sub(r.start).Round(time.Second))
	if busy(r.loadStart) || busy(r.loadEnd) {
		fmt.Fprintf(w, "- **busy machine**: the load average exceeded the number of CPUs; other processes took CPU from the server and the load generator, so every figure below is noisy (capacity measured at one moment is not the capacity of the next)\n")
	}
	own := slices.Clone(r.calibOwn)
	slices.Sort(own)
	calibNote := ""
	if len(own) > 0 {
		calibNote = fmt.Sprintf("; each server process also measured its own rate (best of 3 × 20 ms) at start: %.0f–%.0f, median %.0f — they all spin the harness's number",
			own[0], own[len(own)-1], own[len(own)/2])
	}
	how := "the best of 50 trials of 20 ms of wall time each, divided by the CPU time the process used (getrusage), in a GOMAXPROCS=1 server process"
	if o.calib > 0 {
		how = "given with -calib"
	}
	fmt.Fprintf(w, "- calibration: %.0f SHA-256 rounds (32 bytes, chained) per ms of CPU, %s%s\n", r.calib, how, calibNote)
	fmt.Fprintf(w, "- server: this binary re-executed as a separate process with GOMAXPROCS = cores, a fresh process for every row (and for every capacity measurement); the handler spins the rounds for its CPU work, or sleeps %v (io)\n", ioSleep)
	fmt.Fprintf(w, "- load: HTTP by vegeta v12.13.0 as a library (HTTP/1.1, keep-alive), gRPC by grpc-go in open loop (one goroutine per call at the target rate, %d connections); client timeout %v for every request\n", o.grpcConns, o.timeout)
	var cases []string
	for _, c := range o.cases {
		switch c {
		case caseIdle:
			cases = append(cases, fmt.Sprintf("%s = %v at 0.1× capacity", c, o.steady))
		case caseSteady:
			cases = append(cases, fmt.Sprintf("%s = %v at 0.7× capacity", c, o.steady))
		case caseWarm:
			cases = append(cases, fmt.Sprintf("%s = %v at 0.5× then %v at 2× on the same process, judged on the 2× part only", c, o.warmup, o.overload))
		case caseCold:
			cases = append(cases, fmt.Sprintf("%s = %v at 2× from the first request", c, o.overload))
		}
	}
	fmt.Fprintf(w, "- cases: %s\n", strings.Join(cases, "; "))
	fmt.Fprintf(w, "- lone client: %d requests one at a time on a fresh connection, starting %v after the load's last request was sent\n", o.lone, o.loneDelay)
	fmt.Fprintf(w, "- goodput: successes within the SLO (10× the work; %v for io) per second of the judged window, as %% of capacity; p50/p99 over the successes; refused = 503/429 or UNAVAILABLE/RESOURCE_EXHAUSTED; timed out = no answer within %v\n\n", ioSleep*10, o.timeout)

	fmt.Fprintf(w, "## Capacity\n\nThe bare server (contender none), closed loop: N clients each sending its next request when the previous one is answered; capacity is the successes per second in the best of three equal windows after the first fifth of the run (another process on the machine can only lower it), p50 is over the last four fifths.\n\n")
	fmt.Fprintf(w, "| transport | cores | work | SLO | clients | run | capacity/s | p50 ms | server µs CPU per request |\n|---|--:|---|--:|--:|--:|--:|--:|--:|\n")
	for _, c := range r.caps {
		cpu := "–"
		if c.cpu >= 0 {
			cpu = fmt.Sprintf("%.0f", c.cpu)
		}
		fmt.Fprintf(w, "| %s | %d | %s | %v | %d | %v | %.0f | %s | %s |\n", c.transport, c.cores, c.work.name, c.work.slo(), c.workers, c.dur, c.rate, ms(c.p50), cpu)
	}

	fmt.Fprintf(w, "\n## Contenders\n\n")
	for _, c := range o.contenders {
		fmt.Fprintf(w, "- `%s`: %s\n", c.name, c.about)
	}

	fmt.Fprintf(w, "\n## Results\n\n")
	fmt.Fprintf(w, "| transport | cores | work | contender | case | offered/s | goodput %% of cap | p50 ms | p99 ms | refused %% | timed out %% | failed %% | lone client |\n")
	fmt.Fprintf(w, "|---|--:|---|---|---|--:|--:|--:|--:|--:|--:|--:|---|\n")
	short, over := false, false
	for _, x := range r.rows {
		goodput := fmt.Sprintf("%.1f", 100*float64(x.good)/x.secs/x.cap)
		if float64(x.good)/x.secs > 1.05*x.cap {
			goodput = "**" + goodput + "**"
			over = true
		}
		offered := fmt.Sprintf("%.0f", x.offered)
		if x.offered < 0.95*x.target {
			offered = fmt.Sprintf("**%.0f of %.0f**", x.offered, x.target)
			short = true
		}
		fmt.Fprintf(w, "| %s | %d | %s | %s | %s | %s | %s | %s | %s | %.1f | %.1f | %.1f | %s |\n",
			x.transport, x.cores, x.work.name, x.contender, x.caseName, offered, goodput,
			ms(x.p50), ms(x.p99), pct(x.refused, x.sent), pct(x.timeout, x.sent), pct(x.failed, x.sent), formatLone(x.lone))
	}
	if over {
		fmt.Fprintf(w, "\n**x** goodput above 105%% of capacity: the capacity measurement of that configuration came out low (the machine was busier then than during the row), so its 2× was less than twice what the server can do.\n")
	}
	if short {
		fmt.Fprintf(w, "\n**x of y** offered: the load generator sent less than 95%% of the target rate y (it shares the machine with the server); such a row is not the overload its case names.\n")
	}
	r.writeCost(w)
}

// writeCost renders what an answer costs the server: each refusal path's
// 503 against the bare handler's 200 without work, and the capacity runs'
// cost per request served.
func (r *report) writeCost(w io.Writer) {
	if len(r.costs) == 0 {
		return
	}
	fmt.Fprintf(w, "\n## What a refusal costs the server\n\n")
	fmt.Fprintf(w, "A one-core server (GOMAXPROCS=1) whose guard is held full, so that it refuses every request, under a closed loop of %d clients for %v; ", refusalWorkers, r.opts.costDur)
	fmt.Fprintf(w, "µs CPU per answer is the server process's user+system CPU (getrusage, read from an admin endpoint before and after) divided by the requests it answered. ")
	fmt.Fprintf(w, "`noop` is the bare handler answering 200 without work: the transport's own cost of a request. ")
	fmt.Fprintf(w, "For comparison, µs CPU per request served at capacity (closed loop, work included):")
	for _, c := range r.caps {
		if c.cpu >= 0 {
			fmt.Fprintf(w, " %v %.0f;", c.config, c.cpu)
		}
	}
	fmt.Fprintf(w, "\n\n| transport | answer | what | answers/s | µs CPU per answer | p50 ms | wrong answers |\n|---|---|---|--:|--:|--:|--:|\n")
	for _, c := range r.costs {
		cpu := "–"
		if c.cpu >= 0 {
			cpu = fmt.Sprintf("%.1f", c.cpu)
		}
		answer := "503"
		if c.path == noop {
			answer = "200"
		}
		if c.transport == "grpc" {
			answer = map[string]string{"503": "UNAVAILABLE", "200": "OK"}[answer]
		}
		fmt.Fprintf(w, "| %s | %s %s | %s | %.0f | %s | %s | %d |\n", c.transport, c.path, answer, c.about, c.rate, cpu, ms(c.p50), c.wrong)
	}
}
