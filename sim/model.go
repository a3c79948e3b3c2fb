package sim

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sort"
	"strings"
	"time"
)

// Model is the structure of the simulated server: how the requests a policy
// admits reach the cores. The zero Model is PS.
type Model uint8

// The server models.
const (
	// PS is processor sharing with contention: every admitted request is
	// on the CPU at once and the cores are shared equally among them, with
	// the rate(n) of Server. A dependency wait holds no CPU.
	PS Model = iota
	// Pool is a thread-per-request server: Workers threads (default
	// 4×Cores) take admitted requests from one FIFO accept queue; a request
	// holds its thread until it ends, its dependency wait included; the
	// threads on the CPU share the cores by processor sharing, with
	// rate(n). An admitted request may wait in the accept queue, and that
	// wait is part of the latency the policy sees.
	Pool
	// FIFO is M/M/c-style: Cores cores take admitted requests from one
	// FIFO queue and run each to completion on one core, without sharing.
	// A dependency wait holds no core.
	//
	// In Pool and FIFO the CPU cost of a rejection (Server.RejectCost) skips
	// the queue and shares the cores with the requests on them.
	FIFO
)

// String returns the model's name: "ps", "pool" or "fifo".
func (m Model) String() string {
	switch m {
	case PS:
		return "ps"
	case Pool:
		return "pool"
	case FIFO:
		return "fifo"
	}
	return fmt.Sprintf("Model(%d)", uint8(m))
}

// GC is a stop-the-world pause that recurs: the first pause starts at a
// uniform time in [0, Every), each next one Every ± Jitter (uniform) after
// the start of the one before, and each lasts Pause. During a pause no
// request progresses: no CPU work is done, a dependency's reply is handled
// when the pause ends, and requests that arrive meet the policy only when
// it ends (their latency counts from their arrival). Clients' deadlines
// still pass during a pause.
type GC struct {
	Every  time.Duration // mean time from the start of a pause to the next
	Jitter time.Duration // largest deviation from Every
	Pause  time.Duration // length of each pause
}

func (g *GC) validate() error {
	if g == nil {
		return nil
	}
	if g.Every <= 0 || g.Jitter < 0 || g.Pause <= 0 || g.Pause >= g.Every-g.Jitter {
		return fmt.Errorf("sim: gc every %v ± %v, pause %v: need 0 < pause < every − jitter, jitter ≥ 0", g.Every, g.Jitter, g.Pause)
	}
	return nil
}

// share returns the fraction of time the pauses leave to the process on
// average: 1 − Pause/Every.
func (g *GC) share() float64 {
	if g == nil {
		return 1
	}
	return 1 - float64(g.Pause)/float64(g.Every)
}

// workers returns the thread count of a Pool server (Workers, default
// 4×Cores), the core count of a FIFO one, and 0 (no queue) for PS.
func (s Server) workers() int {
	switch s.Model {
	case Pool:
		if s.Workers > 0 {
			return s.Workers
		}
		return 4 * s.Cores
	case FIFO:
		return s.Cores
	}
	return 0
}

// capacityAt is the server's throughput in requests per second with CPU
// work scaled by svcF, the cores by coreF and the dependency wait by waitF
// (GC pauses left out): the cores' c/E[S], and for Pool also the threads'
// W/(E[S]+E[wait]) when they are the tighter bound.
func (s Server) capacityAt(svcF, coreF, waitF float64) float64 {
	svc := s.Service.MeanValue().Seconds() * svcF
	c := float64(s.Cores) * coreF / svc
	if s.Model == Pool {
		c = min(c, float64(s.workers())/(svc+s.Wait.MeanValue().Seconds()*waitF))
	}
	return c
}

// server is the engine's server: a processor-sharing core set (ps), with,
// for Pool and FIFO, a bound on the requests past the FIFO queue in front
// of it, and, with GC, pauses during which it makes no progress. The engine
// works in real time; the core set runs on process time, which stands still
// during pauses.
type server struct {
	ps
	model    Model
	workers  int  // requests allowed past the queue; 0: no queue (PS)
	holdWait bool // a request keeps its worker through its dependency wait (Pool)
	held     int  // workers taken
	queue    []queued
	qhead    int
	pauses   *pauses // nil: none
	now      int64   // the real time the cores were last brought up to
}

// queued is a request in the FIFO queue, with the generation it had when it
// joined, so that a request that left (aborted and recycled) is skipped.
type queued struct {
	r   *request
	gen uint32
}

func newServer(s Server, seed uint64, end int64) server {
	srv := server{
		ps:       ps{cores: float64(s.Cores), kappa: s.Contention},
		model:    s.Model,
		workers:  s.workers(),
		holdWait: s.Model == Pool,
	}
	if s.GC != nil {
		srv.pauses = newPauses(*s.GC, rand.New(rand.NewPCG(seed, 7)), end)
	}
	return srv
}

// advance brings the cores up to real time t.
func (s *server) advance(t int64) {
	if s.pauses != nil {
		s.now = t
		t = s.pauses.proc(t)
	}
	s.ps.advance(t)
}

// next returns the real time of the next end of a CPU phase, never if none.
// With pauses, a CPU phase that ends at the very process time the cores
// stand at (the start of a pause in progress, or of one that just ended:
// the cores' next time is rounded up to the nanosecond from wherever they
// were last brought up to) ends now, or at the end of the pause in
// progress: never in the past.
func (s *server) next() int64 {
	t := s.ps.next()
	if s.pauses == nil || t == never {
		return t
	}
	t = s.pauses.real(t)
	if t < s.now {
		t = s.now
		if end := s.pauses.until(t); end >= 0 {
			t = end
		}
	}
	return t
}

// admit takes in an admitted request: onto the cores, or into the queue
// when every worker is taken. A rejection's CPU cost goes to the cores
// directly.
func (s *server) admit(r *request) {
	if s.workers > 0 && !r.isReject {
		if s.held >= s.workers {
			r.state = stQueued
			s.queue = append(s.queue, queued{r, r.gen})
			return
		}
		s.held++
	}
	r.state = stCPU
	s.ps.start(r)
}

// cpuEnded is told that r's CPU phase ended (popped): a FIFO core is free.
func (s *server) cpuEnded(*request) {
	if s.workers > 0 && !s.holdWait {
		s.release()
	}
}

// left is told that r, admitted, ended after its CPU phase: a Pool thread
// is free.
func (s *server) left(*request) {
	if s.workers > 0 && s.holdWait {
		s.release()
	}
}

// abort takes r out of the server wherever it is and returns the CPU work
// it received.
func (s *server) abort(r *request) float64 {
	switch r.state {
	case stQueued:
		r.state = stDone // its queue entry is skipped
		return 0
	case stCPU:
		done := s.ps.abort(r)
		if s.workers > 0 {
			s.release()
		}
		return done
	case stWait:
		s.left(r)
	}
	return 0
}

// release frees a worker and hands the free workers to the queue's head.
func (s *server) release() {
	s.held--
	s.fill()
}

// fill starts queued requests while workers are free.
func (s *server) fill() {
	for s.held < s.workers && s.qhead < len(s.queue) {
		q := s.queue[s.qhead]
		s.queue[s.qhead] = queued{}
		s.qhead++
		if q.r.gen != q.gen || q.r.state != stQueued {
			continue
		}
		s.held++
		q.r.state = stCPU
		s.ps.start(q.r)
	}
	if s.qhead > 1024 && s.qhead*2 > len(s.queue) {
		n := copy(s.queue, s.queue[s.qhead:])
		s.queue = s.queue[:n]
		s.qhead = 0
	}
}

// setCores gives the server c cores' worth of CPU (a fraction of the
// nominal ones under a Change): a FIFO server runs as many requests at once
// as it has whole cores, at least one.
func (s *server) setCores(c float64) {
	s.cores = c
	if s.model == FIFO {
		s.workers = max(1, int(math.Round(c)))
		s.fill()
	}
}

// speed1 is the speed a request alone gets from c cores: 1 with at least
// one core, else c/(1+κ(1−c)), the rate(1) of a fraction of a core.
func speed1(c, kappa float64) float64 {
	p := ps{cores: c, kappa: kappa}
	return p.rate(1)
}

// pauses is a GC schedule: pause k runs over [at[k], at[k]+length), and
// process time (the time the server's cores see) stands still during it.
// The schedule is drawn at the start, up to the end of the run.
type pauses struct {
	length int64
	at     []int64
}

func newPauses(g GC, r *rand.Rand, end int64) *pauses {
	p := &pauses{length: int64(g.Pause)}
	t := int64(r.Float64() * float64(g.Every))
	for t < end {
		p.at = append(p.at, t)
		t += int64(g.Every) + int64((2*r.Float64()-1)*float64(g.Jitter))
	}
	return p
}

// proc returns the process time at real time t: t less the pauses before
// it.
func (p *pauses) proc(t int64) int64 {
	// k: the pauses that started at or before t.
	k, _ := slices.BinarySearch(p.at, t+1)
	if k == 0 {
		return t
	}
	if s := p.at[k-1]; t < s+p.length {
		return s - int64(k-1)*p.length // within pause k−1
	}
	return t - int64(k)*p.length
}

// real returns the first real time at which process time reaches pt.
func (p *pauses) real(pt int64) int64 {
	// Pause k starts at process time at[k] − k·length, increasing in k:
	// pt falls before the first pause that starts at or after it.
	k := sort.Search(len(p.at), func(i int) bool { return p.at[i]-int64(i)*p.length >= pt })
	return pt + int64(k)*p.length
}

// until returns the end of the pause in progress at real time t, or −1 if
// none is.
func (p *pauses) until(t int64) int64 {
	k, _ := slices.BinarySearch(p.at, t+1)
	if k > 0 && t < p.at[k-1]+p.length {
		return p.at[k-1] + p.length
	}
	return -1
}

// describe names the server's structure for reports: the model, its
// workers, the wait and the pauses, e.g. "pool(16 workers)+wait 20ms+gc".
func (s Server) describe() string {
	var b strings.Builder
	b.WriteString(s.Model.String())
	if s.Model == Pool {
		fmt.Fprintf(&b, "(%d workers)", s.workers())
	}
	if !s.Wait.IsZero() {
		fmt.Fprintf(&b, "+wait %v", s.Wait.MeanValue())
	}
	if s.GC != nil {
		fmt.Fprintf(&b, "+gc %v/%v", s.GC.Pause, s.GC.Every)
	}
	return b.String()
}
