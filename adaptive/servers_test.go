package adaptive_test

import (
	"container/heap"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/adaptive"
	"github.com/sluicehq/sluice/clock"
	"github.com/sluicehq/sluice/gradient"
	"github.com/sluicehq/sluice/vegas"
)

// This file is a small cross-model harness: the real gate, with the default
// constructors of gradient and vegas, in front of servers that are not the
// simulator's processor-sharing model — a FIFO c-server (M/M/c: each admitted
// request queues for one core and runs to completion on it), optionally with
// a dependency wait after the CPU that holds no core. It runs only with
// SLUICE_SERVERS=1 (it prints a table; see TestServers).

// srvPhase is a change of the server or of the load from At on.
type srvPhase struct {
	At    time.Duration
	Load  float64 // offered load, a multiple of the nominal capacity; 0: unchanged
	Cores int     // 0: unchanged
	SvcF  float64 // factor on the service time; 0: unchanged
}

// srvCase is one run of the harness.
type srvCase struct {
	Name    string
	Cores   int
	Svc     time.Duration // mean CPU time (exponential)
	Wait    time.Duration // constant dependency wait after the CPU (holds no core)
	Dur     time.Duration
	Phases  []srvPhase
	Measure time.Duration // the figures count from here
}

// srvResult is what a run measured, from Measure on.
type srvResult struct {
	goodput float64       // completions within the SLO per second, over the capacity of the moment
	p99     time.Duration // of the admitted requests that completed
	floor   time.Duration // the floor estimate at the end
	trueF   time.Duration // the true floor at the end: service + wait
	limit   int           // the limit at the end
}

type srvEvent struct {
	at   int64
	kind int // 0 arrival, 1 cpu done, 2 wait done
	job  *srvJob
}

type srvJob struct {
	start int64
	svc   int64
	tok   adaptive.Token
}

type srvHeap []srvEvent

func (h srvHeap) Len() int { return len(h) }
func (h srvHeap) Less(i, j int) bool {
	if h[i].at != h[j].at {
		return h[i].at < h[j].at
	}
	return h[i].kind > h[j].kind // completions before arrivals at one instant
}
func (h srvHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *srvHeap) Push(x any)   { *h = append(*h, x.(srvEvent)) }
func (h *srvHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// floorOf reads a policy's floor estimate: the gate's, if it has one, else
// the algorithm's own.
type floorFunc func() time.Duration

// runServer runs c with the gate g (whose algorithm's floor estimate floor
// reads) and the seed.
func runServer(c srvCase, g *adaptive.Limiter, clk *clock.Manual, floor floorFunc, seed uint64) srvResult {
	rArr := rand.New(rand.NewPCG(seed, 1))
	rSvc := rand.New(rand.NewPCG(seed, 2))
	t0 := clk.Now()
	slo := 10 * (c.Svc + c.Wait)
	deadline := 2 * slo
	cores, busy := c.Cores, 0
	svcF, load := 1.0, 0.0
	nominal := float64(c.Cores) / c.Svc.Seconds() // requests per second
	var queue []*srvJob
	var ev srvHeap
	var lats []int64
	good := 0.0
	capSum := 0.0 // ∫ capacity dt over the measured time, in requests
	phase := 0
	now := int64(0)
	apply := func() {
		for phase < len(c.Phases) && int64(c.Phases[phase].At) <= now {
			p := c.Phases[phase]
			if p.Load > 0 {
				load = p.Load
			}
			if p.Cores > 0 {
				cores = p.Cores
			}
			if p.SvcF > 0 {
				svcF = p.SvcF
			}
			phase++
		}
	}
	apply()
	nextArrival := func(t int64) int64 {
		return t + int64(rArr.ExpFloat64()/(load*nominal)*1e9) + 1
	}
	startCPU := func(j *srvJob) {
		busy++
		heap.Push(&ev, srvEvent{at: now + j.svc, kind: 1, job: j})
	}
	heap.Push(&ev, srvEvent{at: nextArrival(0), kind: 0})
	end := int64(c.Dur)
	// integrate adds the capacity of the moment from now to t (within the
	// measured time) to capSum.
	integrate := func(t int64) {
		from, to := max(now, int64(c.Measure)), min(t, end)
		if to > from {
			capSum += float64(to-from) / 1e9 * float64(cores) / (c.Svc.Seconds() * svcF)
		}
	}
	for len(ev) > 0 {
		e := heap.Pop(&ev).(srvEvent)
		if e.at >= end {
			break
		}
		integrate(e.at)
		now = e.at
		apply()
		clk.Set(t0.Add(time.Duration(now)))
		switch e.kind {
		case 0:
			if tok, ok := g.TryAcquire(); ok {
				j := &srvJob{start: now, svc: int64(rSvc.ExpFloat64() * float64(c.Svc) * svcF), tok: tok}
				if busy < cores {
					startCPU(j)
				} else {
					queue = append(queue, j)
				}
			}
			heap.Push(&ev, srvEvent{at: nextArrival(now), kind: 0})
		case 1:
			busy--
			for busy < cores && len(queue) > 0 {
				j := queue[0]
				queue = queue[1:]
				startCPU(j)
			}
			if c.Wait > 0 {
				heap.Push(&ev, srvEvent{at: now + int64(c.Wait), kind: 2, job: e.job})
				continue
			}
			fallthrough
		case 2:
			j := e.job
			lat := now - j.start
			if lat > int64(deadline) {
				j.tok.Dropped()
			} else {
				j.tok.Success()
			}
			if now >= int64(c.Measure) {
				lats = append(lats, lat)
				if lat <= int64(slo) {
					good++
				}
			}
		}
	}
	integrate(end)
	r := srvResult{trueF: time.Duration(float64(c.Svc)*svcF) + c.Wait, limit: g.Limit()}
	if floor != nil {
		r.floor = floor()
	}
	if capSum > 0 {
		r.goodput = good / capSum
	}
	if len(lats) > 0 {
		slices.Sort(lats)
		r.p99 = time.Duration(lats[int(math.Ceil(0.99*float64(len(lats))))-1])
	}
	return r
}

// srvCases are the harness's runs: FIFO c-servers of 1 and 4 cores with 5ms
// of exponential service (and one with 20ms of dependency wait), driven at
// 2× capacity from a cold start or after a calm warm-up, and incidents at
// 0.8× load: the cores halve, or the service time doubles.
func srvCases() []srvCase {
	const s = time.Second
	svc := 5 * time.Millisecond
	return []srvCase{
		{Name: "fifo1 cold 2x", Cores: 1, Svc: svc, Dur: 60 * s, Measure: 10 * s, Phases: []srvPhase{{Load: 2}}},
		{Name: "fifo4 cold 2x", Cores: 4, Svc: svc, Dur: 60 * s, Measure: 10 * s, Phases: []srvPhase{{Load: 2}}},
		{Name: "fifo16 cold 2x", Cores: 16, Svc: svc, Dur: 60 * s, Measure: 10 * s, Phases: []srvPhase{{Load: 2}}},
		{Name: "fifo4+20ms cold 2x", Cores: 4, Svc: svc, Wait: 20 * time.Millisecond, Dur: 60 * s, Measure: 10 * s, Phases: []srvPhase{{Load: 2}}},
		{Name: "fifo1 warm 2x", Cores: 1, Svc: svc, Dur: 70 * s, Measure: 30 * s, Phases: []srvPhase{{Load: 0.5}, {At: 20 * s, Load: 2}}},
		{Name: "fifo4 warm 2x", Cores: 4, Svc: svc, Dur: 70 * s, Measure: 30 * s, Phases: []srvPhase{{Load: 0.5}, {At: 20 * s, Load: 2}}},
		{Name: "fifo4 cores/2", Cores: 4, Svc: svc, Dur: 70 * s, Measure: 30 * s, Phases: []srvPhase{{Load: 0.8}, {At: 20 * s, Cores: 2}}},
		{Name: "fifo4 svc×2", Cores: 4, Svc: svc, Dur: 70 * s, Measure: 30 * s, Phases: []srvPhase{{Load: 0.8}, {At: 20 * s, SvcF: 2}}},
		{Name: "fifo16 cores/2", Cores: 16, Svc: svc, Dur: 70 * s, Measure: 30 * s, Phases: []srvPhase{{Load: 0.8}, {At: 20 * s, Cores: 8}}},
	}
}

// srvPolicies are the gates under test, with default constructors.
func srvPolicies() map[string]func(clk clock.Clock) (*adaptive.Limiter, floorFunc) {
	return map[string]func(clk clock.Clock) (*adaptive.Limiter, floorFunc){
		"gradient": func(clk clock.Clock) (*adaptive.Limiter, floorFunc) {
			a := gradient.New()
			g, _ := adaptive.New(a, adaptive.WithClock(clk), adaptive.WithMaxLimit(5000))
			return g, floorFrom(g, a.Baseline)
		},
		"vegas": func(clk clock.Clock) (*adaptive.Limiter, floorFunc) {
			a := vegas.New()
			g, _ := adaptive.New(a, adaptive.WithClock(clk), adaptive.WithMaxLimit(5000))
			return g, floorFrom(g, a.NoLoadRTT)
		},
	}
}

// floorFrom reads the gate's floor when it has one (a Floor method), else
// the algorithm's own estimate.
func floorFrom(g any, own func() time.Duration) floorFunc {
	if f, ok := g.(interface{ Floor() time.Duration }); ok {
		return f.Floor
	}
	return own
}

// TestServers prints, for each case and policy, the median over seeds of
// goodput (% of the capacity of the moment, from the case's Measure on), p99
// and the final floor estimate against the true floor. SLUICE_SERVERS=1 runs
// it (SLUICE_SEEDS sets the number of seeds, default 3).
func TestServers(t *testing.T) {
	if os.Getenv("SLUICE_SERVERS") == "" {
		t.Skip("SLUICE_SERVERS=1 runs the cross-model harness")
	}
	seeds := 3
	fmt.Sscan(os.Getenv("SLUICE_SEEDS"), &seeds)
	var b strings.Builder
	fmt.Fprintf(&b, "\n%-20s %-9s %9s %9s %9s %9s %8s %s\n", "case", "policy", "goodput%", "worst", "p99 ms", "worst", "limit", "floor/true (each seed)")
	for _, c := range srvCases() {
		if f := os.Getenv("SLUICE_CASE"); f != "" && !strings.Contains(c.Name, f) {
			continue
		}
		for _, name := range []string{"gradient", "vegas"} {
			var gp, p99 []float64
			var floors []string
			lim := 0
			for seed := range uint64(seeds) {
				clk := clock.NewManual(time.Date(2100, 1, 1, 0, 0, 0, 0, time.UTC))
				g, floor := srvPolicies()[name](clk)
				r := runServer(c, g, clk, floor, seed+1)
				gp = append(gp, 100*r.goodput)
				p99 = append(p99, float64(r.p99)/1e6)
				floors = append(floors, fmt.Sprintf("%.1f/%.1f", float64(r.floor)/1e6, float64(r.trueF)/1e6))
				lim = r.limit
			}
			fmt.Fprintf(&b, "%-20s %-9s %9.1f %9.1f %9.1f %9.1f %8d %s\n", c.Name, name,
				median(gp), slices.Min(gp), median(p99), slices.Max(p99), lim, strings.Join(floors, " "))
		}
	}
	t.Log(b.String())
}

func median(x []float64) float64 {
	y := slices.Clone(x)
	slices.Sort(y)
	return y[len(y)/2]
}
