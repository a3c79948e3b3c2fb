package main

import (
	"context"
	"fmt"
	"io"
	"slices"
	"sort"
	"time"

	vegeta "github.com/tsenart/vegeta/v12/lib"
)

// config is one server configuration: transport, cores (the server's
// GOMAXPROCS) and workload.
type config struct {
	transport string
	cores     int
	work      workload
}

func (c config) String() string { return fmt.Sprintf("%s/%d/%s", c.transport, c.cores, c.work.name) }

// The cases each contender is measured in.
const (
	caseSteady = "0.7x"    // 0.7× capacity
	caseWarm   = "2x-warm" // 0.5× capacity for the warm-up, then 2× on the same process
	caseCold   = "2x-cold" // 2× capacity from the first request
	caseIdle   = "0.1x"    // 0.1× capacity: the CPU mostly idle (not run by default)
)

var allCases = []string{caseSteady, caseWarm, caseCold}

// knownCases are the cases -cases accepts: the default ones and caseIdle.
var knownCases = []string{caseIdle, caseSteady, caseWarm, caseCold}

// options are the run's settings (the command's flags).
type options struct {
	matrix     []config
	contenders []contender
	cases      []string
	steady     time.Duration // length of the 0.7x case
	warmup     time.Duration // 0.5× before the 2x-warm case's overload
	overload   time.Duration // length of the 2× phase
	capDur     time.Duration // length of a capacity measurement
	costDur    time.Duration // length of a refusal-cost run
	timeout    time.Duration // client timeout of every request
	lone       int           // lone client's requests
	loneDelay  time.Duration // from the end of the load to the lone client
	calib      float64       // spin rounds per ms; 0: measure
	grpcConns  int
	costs      bool      // measure what a refusal costs the server
	trace      string    // a directory for every run's traces (traceName); "": none
	log        io.Writer // progress, one line per run
	began      time.Time // when the run began, for the progress lines
}

// capacityWorkers is the closed loop's size when measuring capacity: enough
// callers to keep every core busy for the CPU handlers (8 per core) and, for
// the I/O handler, enough that the 20 ms wait is not the limit.
func capacityWorkers(c config) int {
	if c.work.cpu > 0 {
		return 8 * c.cores
	}
	return 512
}

// capacity is a configuration's measured capacity.
type capacity struct {
	config
	workers int
	dur     time.Duration
	rate    float64       // successes per second
	p50     time.Duration // of the successes
	sent    int
	cpu     float64 // server CPU per request served over the whole run, µs; -1 if unknown
}

// refusalCost is what one kind of answer costs a one-core server, measured
// in a closed loop: a refusal path's 503s, or the bare handler's 200s
// without work.
type refusalCost struct {
	transport string
	path      string // a refusal path's name, or noop
	about     string
	workers   int
	dur       time.Duration
	rate      float64       // answers per second
	cpu       float64       // server CPU per answer, µs; -1 if unknown
	p50       time.Duration // of the answers
	wrong     int           // answers of the wrong kind (a refusal path that served, a bare server that refused)
}

// loneResult is what the lone client saw.
type loneResult struct {
	samples []sample
	err     error
}

// row is one line of the report: a contender in a case on a configuration.
type row struct {
	config
	contender string
	caseName  string
	cap       float64 // the configuration's capacity, successes/s
	offered   float64 // requests sent per second in the window
	target    float64 // the rate the profile asked for in the window
	tally
	lone     loneResult
	ownCalib float64
}

// report is a whole run.
type report struct {
	opts       options
	start, end time.Time
	loadStart  string
	loadEnd    string
	calib      float64
	calibOwn   []float64 // each server's own calibration
	caps       []capacity
	costs      []refusalCost
	rows       []row
}

// run measures every configuration of o.matrix: its capacity, then every
// contender in every case, each on a fresh server process; within a
// configuration the contenders take turns case by case, in an order rotated
// each case.
func run(o options) (*report, error) {
	o.began = time.Now()
	rep := &report{opts: o, start: o.began, loadStart: loadAverage()}
	rep.calib = o.calib
	if rep.calib <= 0 {
		c, err := measureCalibration()
		if err != nil {
			return nil, err
		}
		rep.calib = c
	}
	o.logf("calibration: %.0f SHA-256 rounds per ms", rep.calib)
	for _, cfg := range o.matrix {
		cp, err := measureCapacity(o, cfg, rep.calib)
		if err != nil {
			return nil, fmt.Errorf("%v: capacity: %w", cfg, err)
		}
		rep.caps = append(rep.caps, cp)
		o.logf("%v: capacity %.0f/s (%d requests, %d clients, %v)", cfg, cp.rate, cp.sent, cp.workers, cp.dur)
		if cp.rate < 1 {
			return nil, fmt.Errorf("%v: capacity %.2f/s: the bare server served (almost) nothing", cfg, cp.rate)
		}
		for i, cs := range o.cases {
			k := i % max(len(o.contenders), 1)
			order := append(slices.Clone(o.contenders[k:]), o.contenders[:k]...)
			for _, c := range order {
				r, err := runCase(o, cfg, c, cs, cp.rate, rep.calib)
				if err != nil {
					return nil, fmt.Errorf("%v %s %s: %w", cfg, c.name, cs, err)
				}
				rep.rows = append(rep.rows, r)
				rep.calibOwn = append(rep.calibOwn, r.ownCalib)
				o.logf("%v %-10s %-7s offered %6.0f/s goodput %5.1f%% refused %5.1f%% timeout %5.1f%% lone %s",
					cfg, c.name, cs, r.offered, 100*float64(r.good)/r.secs/r.cap, pct(r.refused, r.sent), pct(r.timeout, r.sent), formatLone(r.lone))
			}
		}
	}
	if o.costs {
		seen := map[string]bool{}
		for _, cfg := range o.matrix {
			if seen[cfg.transport] {
				continue
			}
			seen[cfg.transport] = true
			costs, err := measureRefusalCosts(o, cfg.transport, rep.calib)
			if err != nil {
				return nil, fmt.Errorf("%s: refusal costs: %w", cfg.transport, err)
			}
			rep.costs = append(rep.costs, costs...)
		}
	}
	order := map[string]int{}
	for i, c := range o.contenders {
		order[c.name] = i
	}
	caseOrder := map[string]int{}
	for i, c := range knownCases {
		caseOrder[c] = i
	}
	cfgOrder := map[string]int{}
	for i, c := range o.matrix {
		cfgOrder[c.String()] = i
	}
	sort.SliceStable(rep.rows, func(i, j int) bool {
		a, b := rep.rows[i], rep.rows[j]
		if x, y := cfgOrder[a.config.String()], cfgOrder[b.config.String()]; x != y {
			return x < y
		}
		if order[a.contender] != order[b.contender] {
			return order[a.contender] < order[b.contender]
		}
		return caseOrder[a.caseName] < caseOrder[b.caseName]
	})
	rep.end = time.Now()
	rep.loadEnd = loadAverage()
	return rep, nil
}

func (o options) logf(format string, args ...any) {
	if o.log != nil {
		fmt.Fprintf(o.log, "%6.1fs "+format+"\n", append([]any{time.Since(o.began).Seconds()}, args...)...)
	}
}

// measureCalibration starts a one-core server that calibrates with fifty
// trials of 20 ms (a second: on a shared machine, enough for a quiet
// moment), and returns its rate.
func measureCalibration() (float64, error) {
	p, err := startServer(serverConfig{Transport: "http", Work: "io", Contender: "none", CalibTrials: 50}, 1)
	if err != nil {
		return 0, err
	}
	p.stop()
	return p.hello.OwnCalib, nil
}

// measureCapacity runs a closed loop against the bare server and takes its
// successes per second in the best of three equal windows after the first
// fifth of the run.
func measureCapacity(o options, cfg config, calib float64) (capacity, error) {
	p, err := startServer(serverConfig{Transport: cfg.transport, Work: cfg.work.name, Contender: "none", ItersPerMs: calib}, cfg.cores)
	if err != nil {
		return capacity{}, err
	}
	defer p.stop()
	cp := capacity{config: cfg, workers: capacityWorkers(cfg), dur: o.capDur}
	samples, delta, err := closedLoop(o, p, cfg.transport, cp.workers, o.capDur)
	if err != nil {
		return cp, err
	}
	// Noise from other processes only ever lowers a throughput, so the
	// capacity is the best of three windows after the first fifth.
	from := o.capDur / 5
	step := (o.capDur - from) / 3
	for i := range 3 {
		w := window{from: from + time.Duration(i)*step, to: from + time.Duration(i+1)*step}
		t := count(samples, w, o.timeout)
		if r := float64(t.ok) / t.secs; r > cp.rate {
			cp.rate = r
		}
	}
	cp.p50 = count(samples, window{from, o.capDur}, o.timeout).p50
	cp.sent = len(samples)
	cp.cpu = perAnswer(delta, delta.Served)
	return cp, nil
}

// closedLoop runs workers clients in a closed loop against p for du and
// returns every request and the server's counters over the run (CPU
// -1 if they could not be read).
func closedLoop(o options, p *serverProc, transport string, workers int, du time.Duration) ([]sample, serverStats, error) {
	ctx := context.Background()
	before, errBefore := p.stats(ctx)
	var samples []sample
	var err error
	if transport == "grpc" {
		samples, err = grpcLoad{addr: p.hello.Addr, timeout: o.timeout, conns: o.grpcConns}.closedLoop(workers, du)
		if err != nil {
			return nil, serverStats{}, err
		}
	} else {
		samples = httpLoad{url: "http://" + p.hello.Addr + "/", timeout: o.timeout}.attack(vegeta.ConstantPacer{}, du, uint64(workers))
	}
	after, errAfter := p.stats(ctx)
	if errBefore != nil || errAfter != nil {
		return samples, serverStats{CPU: -1}, nil
	}
	return samples, serverStats{CPU: after.CPU - before.CPU, Served: after.Served - before.Served, Refused: after.Refused - before.Refused}, nil
}

// perAnswer is the server's CPU per answer in µs, or -1.
func perAnswer(s serverStats, answers int64) float64 {
	if s.CPU < 0 || answers <= 0 {
		return -1
	}
	return float64(s.CPU) / float64(answers)
}

// refusalWorkers is the closed loop's size for the refusal costs.
const refusalWorkers = 16

// measureRefusalCosts measures, on one core, what the bare handler's 200
// without work and each refusal path's refusal cost the server.
func measureRefusalCosts(o options, transport string, calib float64) ([]refusalCost, error) {
	type run struct {
		path, about string
		cfg         serverConfig
	}
	runs := []run{{path: noop, about: "the bare handler doing no work (200)", cfg: serverConfig{Transport: transport, Work: noop, Contender: "none"}}}
	for _, r := range refusalPaths {
		runs = append(runs, run{path: r.name, about: r.about, cfg: serverConfig{Transport: transport, Work: "1ms", Refuse: r.name}})
	}
	var out []refusalCost
	for _, r := range runs {
		r.cfg.ItersPerMs = calib
		p, err := startServer(r.cfg, 1)
		if err != nil {
			return nil, err
		}
		samples, delta, err := closedLoop(o, p, transport, refusalWorkers, o.costDur)
		p.stop()
		if err != nil {
			return nil, err
		}
		t := count(samples, window{0, o.costDur}, o.timeout)
		c := refusalCost{transport: transport, path: r.path, about: r.about, workers: refusalWorkers, dur: o.costDur}
		answers, wrong := t.refused, t.ok
		if r.path == noop {
			answers, wrong = t.ok, t.refused
		}
		c.rate, c.wrong = float64(answers)/t.secs, wrong
		c.cpu = perAnswer(delta, delta.Served+delta.Refused)
		var lats []time.Duration
		for _, s := range samples {
			lats = append(lats, s.lat)
		}
		c.p50 = quantile(lats, 0.5)
		out = append(out, c)
		o.logf("%s: %s: %.0f answers/s, %.1f µs CPU each", transport, r.path, c.rate, c.cpu)
	}
	return out, nil
}

// runCase measures contender c in case cs on a fresh server process.
func runCase(o options, cfg config, c contender, cs string, capRate, calib float64) (row, error) {
	r := row{config: cfg, contender: c.name, caseName: cs, cap: capRate}
	var prof profile
	var w window
	switch cs {
	case caseIdle:
		prof = profile{{0.1 * capRate, o.steady}}
		w = window{0, o.steady}
	case caseSteady:
		prof = profile{{0.7 * capRate, o.steady}}
		w = window{0, o.steady}
	case caseWarm:
		prof = profile{{0.5 * capRate, o.warmup}, {2 * capRate, o.overload}}
		w = window{o.warmup, o.warmup + o.overload}
	case caseCold:
		prof = profile{{2 * capRate, o.overload}}
		w = window{0, o.overload}
	default:
		return r, fmt.Errorf("unknown case %q", cs)
	}
	sc := serverConfig{Transport: cfg.transport, Work: cfg.work.name, Contender: c.name, ItersPerMs: calib}
	if o.trace != "" {
		sc.Trace = traceName(o.trace, cfg, c.name, cs, "server")
	}
	p, err := startServer(sc, cfg.cores)
	if err != nil {
		return r, err
	}
	defer p.stop()
	r.ownCalib = p.hello.OwnCalib

	hl := httpLoad{url: "http://" + p.hello.Addr + "/", timeout: o.timeout}
	gl := grpcLoad{addr: p.hello.Addr, timeout: o.timeout, conns: o.grpcConns}

	t0 := time.Now()
	loneDone := make(chan loneResult, 1)
	go func() {
		time.Sleep(time.Until(t0.Add(prof.total() + o.loneDelay)))
		var lr loneResult
		if cfg.transport == "grpc" {
			lr.samples, lr.err = gl.lone(o.lone)
		} else {
			lr.samples = hl.lone(o.lone)
		}
		loneDone <- lr
	}()
	var samples []sample
	if cfg.transport == "grpc" {
		samples, err = gl.attack(prof)
		if err != nil {
			return r, err
		}
	} else {
		samples = hl.attack(prof, prof.total(), 0)
	}
	r.lone = <-loneDone
	if o.trace != "" {
		if err := writeClientTrace(traceName(o.trace, cfg, c.name, cs, "client"), samples, cfg.work.slo()); err != nil {
			return r, err
		}
	}
	r.tally = count(samples, w, cfg.work.slo())
	r.offered = float64(r.sent) / r.secs
	r.target = prof.Rate(w.from)
	return r, nil
}
