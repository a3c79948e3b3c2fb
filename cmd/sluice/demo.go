package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"sync"
	"time"

	"github.com/sluicehq/sluice/shed"
)

// demoConfig is what `sluice demo` runs: the service's virtual capacity,
// the guards' settings and the load.
type demoConfig struct {
	cores          int           // virtual cores of each copy
	service        time.Duration // mean work per request at no load
	kappa          float64       // contention penalty per request in flight past the cores
	timeout        time.Duration // the clients give up after this long
	phases         []demoPhase
	seed           uint64
	keys           int     // API keys sending traffic
	abuse          float64 // share of the traffic sent by the abusive key, demo-key-00
	keyRate        int     // per-key rate limit, requests per second (and burst)
	grpcShare      float64 // share of requests sent over gRPC; the rest is HTTP
	maxOutstanding int     // requests the generator keeps outstanding per copy, at most
	httpAddr       string  // the protected copy's listen addresses
	grpcAddr       string
}

// demoPhase is a stretch of constant offered load, in multiples of capacity.
type demoPhase struct {
	name string
	dur  time.Duration
	load float64
}

// capacity is the most requests per second a copy can complete: c/S,
// reached with exactly c requests in flight.
func (c *demoConfig) capacity() float64 { return float64(c.cores) / c.service.Seconds() }

func (c *demoConfig) duration() time.Duration {
	var d time.Duration
	for _, p := range c.phases {
		d += p.dur
	}
	return d
}

// surgeWindow returns the whole seconds [from, to) that lie within the
// surge phase.
func (c *demoConfig) surgeWindow() (from, to int) {
	var at time.Duration
	for _, p := range c.phases {
		if p.name == "surge" {
			from = int(math.Ceil(at.Seconds()))
			to = int((at + p.dur) / time.Second)
			return from, to
		}
		at += p.dur
	}
	return 0, 0
}

// phaseAt names the phase at offset t.
func (c *demoConfig) phaseAt(t time.Duration) demoPhase {
	var at time.Duration
	for _, p := range c.phases {
		at += p.dur
		if t < at {
			return p
		}
	}
	return c.phases[len(c.phases)-1]
}

// demoResult is what a run measured, for the summary and the tests.
type demoResult struct {
	capacity    float64
	surgeSecs   int
	protected   demoBucket // the surge's whole seconds
	unprotected demoBucket
	metricsURL  string
	metrics     string // the sluice_gate_limit line scraped from /metrics
}

func (r *demoResult) goodputShare(b *demoBucket) float64 {
	if r.surgeSecs == 0 {
		return 0
	}
	return float64(b.ok) / float64(r.surgeSecs) / r.capacity
}

const demoAbout = `usage: sluice demo [flags]

Runs two copies of one service side by side on loopback, each serving HTTP
(h2c) and gRPC (the standard health service) on a machine of fixed capacity,
simulated in real time: one copy protected by sluice's guards (per-key rate
limit, priority shedder, adaptive gate with the gradient algorithm, Prometheus
metrics on /metrics), one without. A built-in load generator drives both with
the same open-loop schedule: a baseline at half capacity, a surge to 3x
capacity, and back. Every second it prints what each copy delivered; at the
end, a summary of the surge.

flags:
`

// runDemo is `sluice demo`. Ctrl-C ends the run early, with its summary.
func runDemo(args []string, stdout, stderr io.Writer) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	_, code := demoMain(ctx, args, stdout, stderr)
	return code
}

// demoMain parses the flags and runs the demo until the load ends or ctx
// does.
func demoMain(ctx context.Context, args []string, stdout, stderr io.Writer) (*demoResult, int) {
	fs := flag.NewFlagSet("demo", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), demoAbout)
		fs.PrintDefaults()
	}
	duration := fs.Duration("duration", 60*time.Second, "length of the load: 1/12 baseline, 3/4 surge, 1/6 recovery")
	quick := fs.Bool("quick", false, "a short run of 10s (overrides -duration)")
	surge := fs.Float64("surge", 3, "surge load, in multiples of capacity")
	cores := fs.Int("cores", 4, "virtual cores of each copy")
	service := fs.Duration("service", 20*time.Millisecond, "mean service time of a request at no load")
	timeout := fs.Duration("timeout", 250*time.Millisecond, "clients give up on a request after this long")
	seed := fs.Uint64("seed", 1, "seed of the load schedule")
	httpAddr := fs.String("http", "127.0.0.1:0", "listen address of the protected copy's HTTP server (and /metrics)")
	grpcAddr := fs.String("grpc", "127.0.0.1:0", "listen address of the protected copy's gRPC server")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil, 0
		}
		return nil, 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "sluice demo: unexpected arguments %q\n", fs.Args())
		return nil, 2
	}
	if *quick {
		*duration = 10 * time.Second
	}
	switch {
	case *duration < 3*time.Second:
		fmt.Fprintln(stderr, "sluice demo: -duration must be at least 3s")
		return nil, 2
	case *cores < 1 || *service < time.Millisecond || *timeout <= 0 || *surge <= 0:
		fmt.Fprintln(stderr, "sluice demo: -cores, -service (≥ 1ms), -timeout and -surge must be positive")
		return nil, 2
	}
	d := *duration
	base, rec := d/12, d/6
	cfg := &demoConfig{
		cores: *cores, service: *service, kappa: 0.03, timeout: *timeout,
		phases: []demoPhase{
			{"base", base, 0.5},
			{"surge", d - base - rec, *surge},
			{"recover", rec, 0.5},
		},
		seed: *seed, keys: 20, abuse: 0.25, grpcShare: 0.2, maxOutstanding: 2000,
		httpAddr: *httpAddr, grpcAddr: *grpcAddr,
	}
	// Every other key sends (1−abuse)/(keys−1) of the surge; allow each twice
	// that, and the abusive key no more than the others.
	cfg.keyRate = max(1, int(math.Ceil(2**surge*cfg.capacity()*(1-cfg.abuse)/float64(cfg.keys-1))))
	res, err := runDemoConfig(ctx, cfg, stdout)
	if err != nil {
		fmt.Fprintln(stderr, "sluice demo:", err)
		return res, 1
	}
	return res, 0
}

func runDemoConfig(ctx context.Context, cfg *demoConfig, w io.Writer) (res *demoResult, err error) {
	guards, err := newDemoGuards(cfg)
	if err != nil {
		return nil, err
	}
	prot, err := newDemoService("protected", cfg, guards, cfg.httpAddr, cfg.grpcAddr)
	if err != nil {
		return nil, err
	}
	unprot, err := newDemoService("unprotected", cfg, nil, "127.0.0.1:0", "127.0.0.1:0")
	if err != nil {
		prot.closeListeners()
		return nil, err
	}
	prot.start()
	unprot.start()
	defer func() {
		err = errors.Join(err, prot.stop(), unprot.stop())
	}()

	d := cfg.duration()
	start := time.Now().Add(100 * time.Millisecond)
	pStats, uStats := newDemoStats(start, d), newDemoStats(start, d)
	pc, err := newDemoClient(prot, cfg, pStats)
	if err != nil {
		return nil, err
	}
	defer pc.close()
	uc, err := newDemoClient(unprot, cfg, uStats)
	if err != nil {
		return nil, err
	}
	defer uc.close()

	res = &demoResult{capacity: cfg.capacity(), metricsURL: prot.httpURL() + "/metrics"}
	demoHeader(w, cfg, prot, unprot, res.metricsURL)

	sched := demoSchedule(cfg)
	var wg sync.WaitGroup
	wg.Go(func() { pc.run(ctx, start, sched) })
	wg.Go(func() { uc.run(ctx, start, sched) })

	// One line per second and copy, a little after the second ends so that
	// its completions are in.
	secs := int((d + time.Second - 1) / time.Second)
	t := time.NewTimer(time.Hour)
	defer t.Stop()
	fmt.Fprintf(w, "\n%4s %-8s %7s │ %-11s %7s %6s %5s %8s %5s %5s %7s  %s\n",
		"t", "phase", "offered", "copy", "goodput", "p99ms", "limit", "inflight", "429", "503", "timeout", "ok% cp/c/sp/s")
loop:
	for k := range secs {
		t.Reset(time.Until(start.Add(time.Duration(k+1)*time.Second + 50*time.Millisecond)))
		select {
		case <-ctx.Done():
			break loop
		case <-t.C:
		}
		ph := cfg.phaseAt(time.Duration(k)*time.Second + time.Second/2)
		pb, ub := pStats.sum(k, k+1), uStats.sum(k, k+1)
		limit := fmt.Sprint(guards.gate.Limit())
		demoLine(w, fmt.Sprintf("%3ds %-8s %7d", k+1, ph.name, pb.offered), "protected", &pb, limit, guards.gate.InFlight())
		demoLine(w, strings.Repeat(" ", 21), "unprotected", &ub, "-", unprot.inFlight())
	}
	wg.Wait()

	from, to := cfg.surgeWindow()
	if done := int(time.Since(start) / time.Second); to > done {
		to = max(done, from) // ended early (Ctrl-C)
	}
	res.surgeSecs = to - from
	res.protected, res.unprotected = pStats.sum(from, to), uStats.sum(from, to)
	all := [2]demoBucket{pStats.sum(0, math.MaxInt), uStats.sum(0, math.MaxInt)}
	res.metrics, err = demoScrape(ctx, res.metricsURL)
	demoSummary(w, cfg, res, from, to, all)
	return res, err
}

func demoHeader(w io.Writer, cfg *demoConfig, prot, unprot *demoService, metricsURL string) {
	c := cfg.capacity()
	fmt.Fprintf(w, "sluice demo: two copies of one service, each on %d virtual cores with a mean service time of %v:\n", cfg.cores, cfg.service)
	fmt.Fprintf(w, "capacity C = %.0f requests/s; past %d requests in flight every request slows down (processor sharing with contention).\n\n", c, cfg.cores)
	fmt.Fprintf(w, "  protected    HTTP %s  gRPC %s\n", prot.httpURL(), prot.grpcAddr())
	fmt.Fprintf(w, "               per-key rate limit (%d/s, token bucket) → priority shedder → adaptive gate (gradient)\n", cfg.keyRate)
	fmt.Fprintf(w, "  unprotected  HTTP %s  gRPC %s\n", unprot.httpURL(), unprot.grpcAddr())
	fmt.Fprintf(w, "               the same handler, no guards\n")
	fmt.Fprintf(w, "  metrics      %s  (Prometheus; try: curl -s %s | grep sluice_gate)\n\n", metricsURL, metricsURL)
	var phases []string
	for _, p := range cfg.phases {
		phases = append(phases, fmt.Sprintf("%s %.0f req/s for %v", p.name, p.load*c, p.dur.Round(100*time.Millisecond)))
	}
	fmt.Fprintf(w, "load: the same open-loop Poisson schedule to both: %s.\n", strings.Join(phases, ", "))
	fmt.Fprintf(w, "      %.0f%% HTTP, %.0f%% gRPC; priorities 10/20/30/40%% critical_plus/critical/sheddable_plus/sheddable;\n",
		100*(1-cfg.grpcShare), 100*cfg.grpcShare)
	fmt.Fprintf(w, "      %d API keys, of which %s sends %.0f%% of all traffic; clients give up after %v and never retry.\n",
		cfg.keys, demoKey(0), 100*cfg.abuse, cfg.timeout)
	fmt.Fprintf(w, "goodput: answers 200 within the timeout, per second; 429: rate limited; 503: shed or gate full;\n")
	fmt.Fprintf(w, "ok%%: the share answered 200, per priority critical_plus/critical/sheddable_plus/sheddable,\n")
	fmt.Fprintf(w, "     of the well-behaved keys (%s is counted on its own in the summary).\n", demoKey(0))
}

func demoLine(w io.Writer, lead, name string, b *demoBucket, limit string, inFlight int) {
	p99 := "-"
	if v := b.p99(); v >= 0 {
		p99 = fmt.Sprintf("%.0f", v)
	}
	fmt.Fprintf(w, "%s │ %-11s %7d %6s %5s %8d %5d %5d %7d  %s\n",
		lead, name, b.ok, p99, limit, inFlight, b.r429, b.r503, b.timeouts, demoPrioOK(b))
}

// demoPrioOK is the share of each priority's requests answered 200, most
// important first: "100/100/ 31/  0".
func demoPrioOK(b *demoBucket) string {
	var parts []string
	for p := range shed.Priorities {
		if b.done[p] == 0 {
			parts = append(parts, "  -")
			continue
		}
		parts = append(parts, fmt.Sprintf("%3.0f", 100*float64(b.okBy[p])/float64(b.done[p])))
	}
	return strings.Join(parts, "/")
}

func demoSummary(w io.Writer, cfg *demoConfig, res *demoResult, from, to int, all [2]demoBucket) {
	fmt.Fprintln(w)
	if res.surgeSecs <= 0 {
		fmt.Fprintln(w, "the run ended before a whole second of surge: no summary.")
		return
	}
	n := float64(res.surgeSecs)
	fmt.Fprintf(w, "surge, seconds %d to %d (offered %.0f requests/s, %.1f× capacity C = %.0f/s):\n\n",
		from, to, float64(res.protected.offered)/n, float64(res.protected.offered)/n/res.capacity, res.capacity)
	fmt.Fprintf(w, "%-12s %9s %7s %7s %7s %7s %10s %9s  %-16s %s\n",
		"copy", "goodput/s", "% of C", "p99 ms", "429/s", "503/s", "timeouts/s", "errors/s", "ok% cp/c/sp/s", "ok% "+demoKey(0))
	for i, b := range []*demoBucket{&res.protected, &res.unprotected} {
		name := [2]string{"protected", "unprotected"}[i]
		p99 := "-"
		if v := b.p99(); v >= 0 {
			p99 = fmt.Sprintf("%.0f", v)
		}
		abuse := "-"
		if b.abuseDone > 0 {
			abuse = fmt.Sprintf("%.0f", 100*float64(b.abuseOK)/float64(b.abuseDone))
		}
		fmt.Fprintf(w, "%-12s %9.1f %6.0f%% %7s %7.1f %7.1f %10.1f %9.1f  %-16s %s\n",
			name, float64(b.ok)/n, 100*res.goodputShare(b), p99, float64(b.r429)/n, float64(b.r503)/n,
			float64(b.timeouts)/n, float64(b.errs+b.drops)/n, demoPrioOK(b), abuse)
	}
	fmt.Fprintf(w, "\nwhole run: protected %d of %d requests answered 200, unprotected %d of %d",
		all[0].ok, all[0].offered, all[1].ok, all[1].offered)
	if d := all[0].drops + all[1].drops; d > 0 {
		fmt.Fprintf(w, " (%d not sent: client overload)", d)
	}
	fmt.Fprintln(w, ".")
	if res.metrics != "" {
		fmt.Fprintf(w, "metrics: %s served %s.\n", res.metricsURL, res.metrics)
	}
	pg, ug := res.goodputShare(&res.protected), res.goodputShare(&res.unprotected)
	fmt.Fprintf(w, "\nWith sluice the service kept %.0f%% of its capacity as goodput through the surge, refusing the excess at once\n", 100*pg)
	fmt.Fprintf(w, "(429 for the key over its rate, 503 for the least important work first); without it, goodput fell to %.0f%%:\n", 100*ug)
	fmt.Fprintf(w, "every request in flight slowed every other one, past its client's %v timeout.\n", cfg.timeout)
}

// demoScrape reads the protected copy's /metrics and returns its
// sluice_gate_limit sample.
func demoScrape(ctx context.Context, url string) (string, error) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return "", err
	}
	tr := &http.Transport{DisableKeepAlives: true}
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		return "", fmt.Errorf("scraping %s: %w", url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("scraping %s: %s", url, resp.Status)
	}
	sc := bufio.NewScanner(resp.Body)
	series := 0
	var limit string
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "sluice_") {
			series++
			if strings.HasPrefix(line, "sluice_gate_limit ") {
				limit = line
			}
		}
	}
	if err := sc.Err(); err != nil {
		return "", fmt.Errorf("scraping %s: %w", url, err)
	}
	if limit == "" {
		return "", fmt.Errorf("scraping %s: no sluice_gate_limit", url)
	}
	return fmt.Sprintf("%d sluice_ samples, among them %q", series, limit), nil
}
