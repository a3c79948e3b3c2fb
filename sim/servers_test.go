package sim

import (
	"math"
	"testing"
	"time"
)

// open runs srv at load rho with no limit and every completion counted (a
// huge SLO), for dur.
func open(t *testing.T, srv Server, rho float64, dur time.Duration) *Result {
	t.Helper()
	sc := Scenario{Name: "open", Duration: dur, Warmup: dur / 10, Server: srv, Load: []Phase{{Load: rho}}, SLO: time.Hour}
	r, err := Run(sc, policy(t, "none"), 42)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func within(t *testing.T, what string, got, want, tol float64) {
	t.Helper()
	if math.Abs(got-want) > tol*math.Abs(want) {
		t.Errorf("%s = %.4g, want %.4g ±%g%%", what, got, want, 100*tol)
	}
}

// TestFIFOQueueingTheory: one FIFO core at ρ = 0.5 gives the M/M/1 mean
// sojourn E[S]/(1−ρ) = 2·E[S] with exponential service, and the M/D/1 one,
// E[S]·(1 + ρ/(2(1−ρ))) = 1.5·E[S], with constant service, where processor
// sharing (insensitive to the distribution) gives 2·E[S] again.
func TestFIFOQueueingTheory(t *testing.T) {
	const es = 10 * time.Millisecond
	ms := float64(es) / 1e6
	r := open(t, Server{Model: FIFO, Cores: 1, Service: Exp(es)}, 0.5, 600*time.Second)
	within(t, "M/M/1 FIFO mean sojourn (ms)", r.MeanMs, 2*ms, 0.04)
	r = open(t, Server{Model: FIFO, Cores: 1, Service: Const(es)}, 0.5, 300*time.Second)
	within(t, "M/D/1 FIFO mean sojourn (ms)", r.MeanMs, 1.5*ms, 0.03)
	r = open(t, Server{Cores: 1, Service: Const(es)}, 0.5, 300*time.Second)
	within(t, "M/D/1 PS mean sojourn (ms)", r.MeanMs, 2*ms, 0.04)
}

// TestMMcFIFO: with c cores FIFO is M/M/c; at ρ = 0.8 and c = 4 the
// Erlang C formula gives a mean sojourn of E[S]·(1 + C/(c(1−ρ))), C = P(wait)
// ≈ 0.5964.
func TestMMcFIFO(t *testing.T) {
	const es = 10 * time.Millisecond
	r := open(t, Server{Model: FIFO, Cores: 4, Service: Exp(es)}, 0.8, 250*time.Second)
	want := float64(es) / 1e6 * (1 + 0.5964/(4*0.2))
	within(t, "M/M/4 FIFO mean sojourn (ms)", r.MeanMs, want, 0.04)
}

// TestPoolOfOneIsFIFO: a pool with one worker on one core runs each
// request alone to completion, in order of admission: the same run as FIFO,
// to the bit.
func TestPoolOfOneIsFIFO(t *testing.T) {
	srv := Server{Cores: 1, Service: LogNormal(5*time.Millisecond, 1)}
	pool, fifo := srv, srv
	pool.Model, pool.Workers = Pool, 1
	fifo.Model = FIFO
	a, b := open(t, pool, 0.9, 60*time.Second), open(t, fifo, 0.9, 60*time.Second)
	if ga, gb := goldenFigures(a), goldenFigures(b); ga != gb {
		t.Fatalf("pool of one:\n%s\nFIFO:\n%s", ga, gb)
	}
}

// TestPoolQueuesPastItsWorkers: a pool of W threads that each hold a
// request through a 20 ms dependency wait carries at most W/(E[S]+20 ms)
// requests per second, whatever its cores could do; the wait in the accept
// queue is part of the latency.
func TestPoolQueuesPastItsWorkers(t *testing.T) {
	srv := Server{Model: Pool, Workers: 8, Cores: 4, Service: Const(time.Millisecond), Wait: Const(20 * time.Millisecond)}
	if got, want := srv.Capacity(), 8/0.021; math.Abs(got-want) > 1e-9 {
		t.Fatalf("capacity %v, want %v", got, want)
	}
	sc := Scenario{Name: "pool", Duration: 30 * time.Second, Warmup: 5 * time.Second, Server: srv, Load: []Phase{{Load: 2}}, SLO: time.Hour}
	r, err := Run(sc, policy(t, "none"), 1)
	if err != nil {
		t.Fatal(err)
	}
	// Count completions by the time series: those of the requests that
	// arrived in the warm-up come after it.
	var done float64
	for _, p := range r.Series[50:] {
		done += p.Completed / 250
	}
	within(t, "saturated pool throughput (rps)", done, 8/0.021, 0.01)
	if r.P50ms < 1000 {
		t.Errorf("median latency %.1f ms at 2× a pool's capacity: the accept queue should grow", r.P50ms)
	}
}

// TestGCPauseStallsProgress: a request on the CPU when a pause begins
// finishes the pause's length later; process time stands still during it.
func TestGCPauseStallsProgress(t *testing.T) {
	p := &pauses{length: int64(3 * time.Millisecond), at: []int64{int64(5 * time.Millisecond), int64(50 * time.Millisecond)}}
	srv := server{ps: ps{cores: 1}, pauses: p}
	r := &request{work: float64(10 * time.Millisecond), hidx: -1}
	srv.advance(0)
	srv.admit(r)
	if got, want := srv.next(), int64(13*time.Millisecond); got != want {
		t.Fatalf("a 10 ms request started at 0 with a 3 ms pause at 5 ms ends at %v, want %v", time.Duration(got), time.Duration(want))
	}
	for _, c := range []struct{ real, proc int64 }{{4e6, 4e6}, {5e6, 5e6}, {7e6, 5e6}, {8e6, 5e6}, {9e6, 6e6}, {60e6, 54e6}} {
		if got := p.proc(c.real); got != c.proc {
			t.Errorf("proc(%v) = %v, want %v", time.Duration(c.real), time.Duration(got), time.Duration(c.proc))
		}
	}
	// real is the first real time at a process time: a pause's start for
	// the process time at which it begins.
	for _, c := range []struct{ proc, real int64 }{{4e6, 4e6}, {5e6, 5e6}, {6e6, 9e6}, {47e6, 50e6}, {48e6, 54e6}, {54e6, 60e6}} {
		if got := p.real(c.proc); got != c.real {
			t.Errorf("real(%v) = %v, want %v", time.Duration(c.proc), time.Duration(got), time.Duration(c.real))
		}
	}
	// Brought up to a moment inside the pause (the engine does when an
	// event falls there), the cores stand at the pause's start: a CPU
	// phase that ends there ends when the pause does, not in the past.
	// (The matrix met it: gc/1/exp/cold-5x under none, seed 5, moved the
	// clock 5 ms back, the float work level of a request landing on the
	// pause's start.)
	srv = server{ps: ps{cores: 1}, pauses: p}
	r = &request{work: float64(5 * time.Millisecond), hidx: -1}
	srv.advance(0)
	srv.admit(r)
	srv.advance(int64(6 * time.Millisecond))
	if got := srv.next(); got != int64(8*time.Millisecond) {
		t.Fatalf("a CPU phase due at a pause's start, asked 1 ms into the pause: ends at %v, want 8ms", time.Duration(got))
	}
	srv.advance(int64(8 * time.Millisecond))
	if got := srv.next(); got != int64(8*time.Millisecond) {
		t.Fatalf("asked at the pause's end: ends at %v, want 8ms", time.Duration(got))
	}
	if got := p.until(6e6); got != 8e6 {
		t.Errorf("until(6ms) = %v, want 8ms", time.Duration(got))
	}
	if got := p.until(8e6); got != -1 {
		t.Errorf("until(8ms) = %v, want −1", time.Duration(got))
	}
}

// TestGCPausesTakeTheirShare: a saturated server loses the pauses' share of
// its time, and its capacity says so.
func TestGCPausesTakeTheirShare(t *testing.T) {
	gc := &GC{Every: 200 * time.Millisecond, Jitter: 50 * time.Millisecond, Pause: 20 * time.Millisecond}
	srv := Server{Cores: 4, Service: Const(10 * time.Millisecond), GC: gc}
	if got := srv.Capacity(); math.Abs(got-360) > 1e-9 {
		t.Fatalf("capacity with 10%% paused: %v, want 360", got)
	}
	sc := Scenario{Name: "gc", Duration: 30 * time.Second, Warmup: 5 * time.Second, Server: srv, Load: []Phase{{Load: 2}}, SLO: time.Hour}
	r, err := Run(sc, staticPolicy(16), 2)
	if err != nil {
		t.Fatal(err)
	}
	within(t, "saturated throughput with pauses (rps)", r.GoodputRPS, 360, 0.02)
}

// TestCapacityHalvings: halving the cores halves the throughput of a
// saturated server and leaves the floor; doubling the service time does
// the same to throughput and doubles the floor.
func TestCapacityHalvings(t *testing.T) {
	for _, model := range []Model{PS, Pool, FIFO} {
		for _, by := range []string{"cores", "service"} {
			ch := Change{At: 10 * time.Second, ServiceFactor: 1, CoreFactor: 0.5}
			if by == "service" {
				ch = Change{At: 10 * time.Second, ServiceFactor: 2}
			}
			srv := Server{Model: model, Cores: 4, Service: Const(10 * time.Millisecond), Changes: []Change{ch}}
			sc := Scenario{Name: "halve", Duration: 20 * time.Second, Warmup: 2 * time.Second, Server: srv,
				Load: []Phase{{Load: 2}}, SLO: time.Hour}
			r, err := Run(sc, staticPolicy(16), 1)
			if err != nil {
				t.Fatal(err)
			}
			var before, after float64
			for _, p := range r.Series {
				switch {
				case p.T > 2*time.Second && p.T <= 10*time.Second:
					before += p.Goodput / 80
				case p.T > 12*time.Second:
					after += p.Goodput / 80
				}
			}
			name := model.String() + " by " + by
			within(t, name+": throughput before (rps)", before, 400, 0.01)
			within(t, name+": throughput after (rps)", after, 200, 0.01)
			first, last := r.Series[0], r.Series[len(r.Series)-1]
			if first.Capacity != 400 || last.Capacity != 200 {
				t.Errorf("%s: capacity %v then %v, want 400 then 200", name, first.Capacity, last.Capacity)
			}
			wantFloor := 10 * time.Millisecond
			if by == "service" {
				wantFloor *= 2
			}
			if first.FloorTrue != 10*time.Millisecond || last.FloorTrue != wantFloor {
				t.Errorf("%s: true floor %v then %v, want 10ms then %v", name, first.FloorTrue, last.FloorTrue, wantFloor)
			}
		}
	}
}

// TestFluidBound: below capacity nothing need be lost; at twice capacity
// for long, half; and a policy never beats the bound by much.
func TestFluidBound(t *testing.T) {
	srv := Server{Cores: 4, Service: Exp(10 * time.Millisecond)}
	for _, c := range []struct {
		load, want, tol float64
	}{{0.7, 0, 0.001}, {2, 0.5, 0.02}} {
		sc := Scenario{Name: "bound", Duration: 30 * time.Second, Warmup: 5 * time.Second, Server: srv, Load: []Phase{{Load: c.load}}}
		r, err := Run(sc, policy(t, "static"), 1)
		if err != nil {
			t.Fatal(err)
		}
		if math.Abs(r.LossBound-c.want) > c.tol {
			t.Errorf("load %g: bound %.4f, want %.4f ±%g", c.load, r.LossBound, c.want, c.tol)
		}
		if r.LossRatio < r.LossBound-0.01 {
			t.Errorf("load %g: static lost %.4f, under the bound %.4f", c.load, r.LossRatio, r.LossBound)
		}
	}
}

// recorder is a policy that admits everything and records when it was
// asked and told, and reports a fixed floor.
type recorder struct {
	env   Env
	calls []time.Duration
	floor time.Duration
}

func (p *recorder) Admit(Request) (Ticket, bool) {
	p.calls = append(p.calls, p.env.Clock.Now().Sub(epoch))
	return Ticket{}, true
}
func (p *recorder) Done(Ticket, Outcome) { p.calls = append(p.calls, p.env.Clock.Now().Sub(epoch)) }
func (p *recorder) Limit() int           { return -1 }
func (p *recorder) Floor() time.Duration { return p.floor }

// TestGCPausesStopThePolicy: the process is stopped during a pause, so the
// policy is neither asked nor told anything then: arrivals wait for the
// pause to end, and so do the replies of dependencies.
func TestGCPausesStopThePolicy(t *testing.T) {
	gc := GC{Every: 100 * time.Millisecond, Jitter: 20 * time.Millisecond, Pause: 10 * time.Millisecond}
	sc := Scenario{Name: "gc", Duration: 5 * time.Second, Warmup: time.Second, Load: []Phase{{Load: 0.8}},
		Server: Server{Cores: 2, Service: Exp(2 * time.Millisecond), Wait: Exp(3 * time.Millisecond), GC: &gc}}
	var rec *recorder
	spec := PolicySpec{Name: "rec", New: func(e Env) (Policy, error) { rec = &recorder{env: e}; return rec, nil }}
	const seed = 5
	if _, err := Run(sc, spec, seed); err != nil {
		t.Fatal(err)
	}
	p := newServer(sc.Server, seed, int64(sc.Duration)).pauses
	if len(p.at) < 40 {
		t.Fatalf("%d pauses in 5 s, want about 50", len(p.at))
	}
	if len(rec.calls) < 1000 {
		t.Fatalf("%d calls to the policy", len(rec.calls))
	}
	for _, c := range rec.calls {
		if p.until(int64(c)) >= 0 {
			t.Fatalf("the policy was called at %v, during a pause", c)
		}
	}
}

// TestFloorIsJudgedAfterEachChange: the floor estimate is judged against
// the true floor only 10 s or more after each change; a constant estimate
// is exact until the (constant) service time doubles and 50% off from 10 s
// later.
func TestFloorIsJudgedAfterEachChange(t *testing.T) {
	sc := Scenario{Name: "floor", Duration: 40 * time.Second, Load: []Phase{{Load: 0.5}},
		Server: Server{Cores: 2, Service: Const(2 * time.Millisecond), Changes: []Change{{At: 20 * time.Second, ServiceFactor: 2}}}}
	spec := PolicySpec{Name: "rec", New: func(e Env) (Policy, error) { return &recorder{env: e, floor: 2 * time.Millisecond}, nil }}
	for _, c := range []struct {
		dur     time.Duration
		err     float64
		intervs int
	}{{20 * time.Second, 0, 101}, {40 * time.Second, 0.5, 202}} {
		sc.Duration = c.dur
		r, err := Run(sc, spec, 1)
		if err != nil {
			t.Fatal(err)
		}
		if r.FloorResult == nil || r.FloorError != c.err || r.FloorIntervals != c.intervs {
			t.Errorf("%v: floor result %+v, want error %v over %d intervals", c.dur, r.FloorResult, c.err, c.intervs)
		}
	}
	r, err := Run(sc, policy(t, "static"), 1)
	if err != nil {
		t.Fatal(err)
	}
	if r.FloorResult != nil {
		t.Errorf("static has no floor estimate, got %+v", r.FloorResult)
	}
	r, err = Run(sc, policy(t, "vegas"), 1)
	if err != nil {
		t.Fatal(err)
	}
	if r.FloorResult == nil || r.Series[len(r.Series)-1].Floor <= 0 {
		t.Errorf("vegas reports its no-load RTT as its floor, got %+v", r.FloorResult)
	}
}

// TestFloorError: the true floor is a distribution; an estimate between its
// median and its mean is right, one outside is off by its distance to the
// nearer one.
func TestFloorError(t *testing.T) {
	const ms = time.Millisecond
	for _, c := range []struct {
		est, mean, median time.Duration
		want              float64
	}{
		{3 * ms, 4 * ms, 2 * ms, 0}, {2 * ms, 4 * ms, 2 * ms, 0}, {1 * ms, 4 * ms, 2 * ms, 0.5},
		{6 * ms, 4 * ms, 2 * ms, 0.5}, {0, 4 * ms, 2 * ms, 1}, {3 * ms, 2 * ms, 4 * ms, 0},
	} {
		if got := floorError(c.est, c.mean, c.median); math.Abs(got-c.want) > 1e-12 {
			t.Errorf("floorError(%v, mean %v, median %v) = %v, want %v", c.est, c.mean, c.median, got, c.want)
		}
	}
	for _, c := range []struct {
		d    Dist
		want time.Duration
	}{
		{Exp(10 * ms), 6931472}, {Const(10 * ms), 10 * ms}, {LogNormal(10*ms, 1), 6065307},
		{TwoPoint(ms, 10*ms, 0.1), ms}, {TwoPoint(ms, 10*ms, 0.9), 10 * ms},
	} {
		if got := c.d.Median(); got != c.want {
			t.Errorf("%v: median %v, want %v", c.d, got, c.want)
		}
	}
}
