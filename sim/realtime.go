package sim

import (
	"container/heap"
	"fmt"
	"math"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/sluicehq/sluice/clock"
	"github.com/sluicehq/sluice/retry"
	"github.com/sluicehq/sluice/shed"
)

// RunRealtime simulates scenario sc under the policy built by spec in scaled
// wall-clock time, with real goroutines, for policies whose limiters read the
// wall clock themselves and so cannot be driven in virtual time by Run.
//
// Time is compressed by scale: one second of scenario time lasts scale
// seconds of wall time (scale 0.1 plays a 100 s scenario in 10 s). Every
// scenario duration, service time, wait, deadline and backoff is multiplied
// by scale on its way to the wall clock, and every measured duration divided
// by it on the way back, so the Result is in scenario time, has the same
// fields and meaning as Run's, and can be compared with it.
//
// The scenario is the same as in Run: for a given seed the arrival process
// (times and priorities, bursts included) is the very sequence Run sees; one
// goroutine plays it, sleeping on a single timer until each arrival. Every
// attempt then runs in its own goroutine: it asks the policy, and if
// admitted hands its CPU work to one server goroutine that owns the same
// processor-sharing model as Run (rate(n) = n up to c cores, c/(1+κ(n−c))
// past them) and advances it on wall-clock time. The server resolves its
// events (completions, client deadlines) at their exact model times, even
// when its timer fires late, so the model's capacity does not depend on timer
// precision; the attempt's goroutine sleeps until the model time of each of
// its own events (end of the CPU phase or of the dependency wait, deadline)
// before it tells the policy, so the policy sees the request end when it
// would have ended.
//
// The policy is built with an Env in wall time: Clock is clock.System(),
// MeanService, MeanWait and SLO are multiplied by scale and Capacity divided
// by it, so a policy tuned from Env (a static limit, an AIMD timeout of
// SLO/4) is tuned for what its clock sees. Time constants the policy keeps
// for itself are not scaled: sluice's gate closes sampling windows of 100 ms
// to 1 s of wall time by default, i.e. 100/scale ms of scenario time, so the
// gate adapts 1/scale times fewer times per scenario second than under Run.
// A spec meant for compressed runs should scale such options itself (for the
// gate, adaptive.WithWindow(scale·100ms, scale·1s)).
//
// The policy is called from several goroutines at once and must be safe for
// concurrent use (sluice's gate is). Admit may block, e.g. in a limiter's
// wait queue; the wait counts in the request's latency, and RunRealtime
// waits for every Admit to return before it returns, so Admit must return on
// its own. At the end of the scenario, requests still in flight are
// abandoned, as in Run (the policy is not told), and no goroutine of the run
// is left running when RunRealtime returns.
//
// RunRealtime plays the PS server model only, without GC pauses or changes
// of the cores (Change.CoreFactor); it returns an error for the others.
//
// A run lasts scale·Duration of wall time. It is not reproducible to the
// bit: admissions happen when the goroutines get to them, and the policy
// reads the real clock. Timer granularity (about 1 ms of wall time on Linux)
// and scheduling delays make requests reach the server, and the policy hear
// of their end, late: about 0.6 ms of wall time on average on an idle
// machine, several ms when other processes take the CPUs. Divided by scale
// that is scenario time, and a gate holds each slot that much longer than
// the request lasted, so choose scale so that scale·E[S] is well above it.
// On step-2x (E[S] = 5 ms) the modes agree within 0.01 of goodput ratio at
// scale 0.5, but at scale 0.1 the static limit loses a sixth of its goodput
// and AIMD half of it to the lateness; the tests use scale·E[S] = 20–40 ms.
// Events due before the end of the scenario are recorded even when the
// process was not running at the time they were due.
func RunRealtime(sc Scenario, spec PolicySpec, seed uint64, scale float64) (*Result, error) {
	r, _, err := runRealtime(sc, spec, seed, scale)
	return r, err
}

// lagStats summarises how late, in wall time, the run did something
// relative to the model time it was due at.
type lagStats struct {
	n        int64
	sum, max time.Duration
}

func (l *lagStats) add(d time.Duration) {
	d = max(d, 0)
	l.n++
	l.sum += d
	l.max = max(l.max, d)
}

func (l lagStats) String() string {
	if l.n == 0 {
		return "none"
	}
	return fmt.Sprintf("mean %v, max %v (n=%d)", l.sum/time.Duration(l.n), l.max, l.n)
}

// rtStats is what a real-time run knows about its own fidelity: how late
// the policy saw arrivals (Admit returned after the scheduled arrival) and
// ends (Done called after the model's end of the request), in wall time.
type rtStats struct {
	admit, done lagStats
}

// rtRun is one real-time run. Times named t, at, start, end are scenario
// nanoseconds since the start of the run, as in the engine.
type rtRun struct {
	sc           Scenario
	scale        float64
	t0           time.Time
	end          int64
	warm         int64
	slo          int64
	dl           int64
	needDeadline bool // the client's deadline is an event (retries or honoured deadlines)
	rejectWork   float64
	pol          Policy
	throttle     *retry.Throttle[shed.Priority] // clients' adaptive throttling; nil: none
	srv          *rtServer
	wg           sync.WaitGroup // the arrival goroutine and the attempts

	mu       sync.Mutex // guards the fields below
	m        metricsAcc
	inServer int
	budget   float64
	rSvc     *rand.Rand
	rRetry   *rand.Rand
	serverState
	stats rtStats
}

func runRealtime(sc Scenario, spec PolicySpec, seed uint64, scale float64) (*Result, rtStats, error) {
	if !(scale > 0) || math.IsInf(scale, 0) {
		return nil, rtStats{}, fmt.Errorf("sim: real-time scale %v: must be positive and finite", scale)
	}
	if err := sc.Validate(); err != nil {
		return nil, rtStats{}, err
	}
	if err := realtimeSupports(sc.Server); err != nil {
		return nil, rtStats{}, err
	}
	s := sc.withDefaults()
	capacity := s.Server.Capacity()
	rt := &rtRun{
		sc:           s,
		scale:        scale,
		end:          int64(s.Duration),
		warm:         int64(s.Warmup),
		slo:          int64(s.SLO),
		dl:           int64(s.Deadline),
		needDeadline: s.Retry.Attempts > 1 || s.Server.HonourDeadlines,
		rejectWork:   s.Server.RejectCost * float64(s.Server.Service.MeanValue()),
		// The same streams as Run's, for the same concerns.
		rSvc:   rand.New(rand.NewPCG(seed, 2)),
		rRetry: rand.New(rand.NewPCG(seed, 4)),
	}
	rt.serverState = newServerState()
	wall := func(d time.Duration) time.Duration { return time.Duration(float64(d) * scale) }
	env := Env{
		Clock: clock.System(), Cores: s.Server.Cores, MeanService: wall(s.Server.Service.MeanValue()),
		MeanWait: wall(s.Server.Wait.MeanValue()), Capacity: capacity / scale, SLO: wall(s.SLO), MaxInFlight: s.Server.MaxInFlight,
	}
	pol, err := spec.New(env)
	if err == nil {
		err = checkClocks(pol, env)
	}
	if err != nil {
		return nil, rtStats{}, fmt.Errorf("sim: policy %s: %w", spec.Name, err)
	}
	rt.pol = pol
	rt.m.init(&s, capacity)

	// The arrival process is the engine's own code (nextArrival, load),
	// on an engine that does nothing else.
	if k := s.Retry.Throttle; k > 0 {
		// As Run's, on the clock the policy reads (wall time).
		if rt.throttle, err = retry.NewThrottle[shed.Priority](retry.WithThrottleClock(clock.System()), retry.WithThrottleK(k), retry.WithThrottleSeed(seed)); err != nil {
			return nil, rtStats{}, err
		}
	}
	gen := &engine{sc: s, end: rt.end, capacity: capacity}
	gen.initArrivals(seed)
	rt.srv = &rtServer{rt: rt, in: make(chan *rtJob, 1024), done: make(chan struct{}),
		model: ps{cores: float64(s.Server.Cores), kappa: s.Server.Contention}, jobs: map[*request]*rtJob{}}

	rt.t0 = time.Now()
	go rt.srv.run()
	rt.wg.Add(1)
	go rt.arrivals(gen)
	time.Sleep(time.Until(rt.wall(rt.end)))
	// Every wait of the run ends by the end of the scenario, so the
	// stragglers (late because the process was not scheduled) finish now:
	// each records its events due before the end, as in Run.
	rt.wg.Wait()
	close(rt.srv.in)
	<-rt.srv.done

	// Every goroutine of the run has ended: no lock needed.
	rt.rollTo(rt.end)
	rt.m.busy += rt.srv.model.busy
	return rt.m.result(&s, spec.Name, seed, capacity), rt.stats, nil
}

// realtimeSupports reports what of srv RunRealtime cannot play: it has only
// the processor-sharing model, without GC pauses or changes of the cores.
func realtimeSupports(srv Server) error {
	if srv.Model != PS || srv.GC != nil {
		return fmt.Errorf("sim: RunRealtime plays the ps model without GC pauses only (got %s)", srv.describe())
	}
	for _, c := range srv.Changes {
		if c.CoreFactor != 0 && c.CoreFactor != 1 {
			return fmt.Errorf("sim: RunRealtime does not change the cores (change at %v)", c.At)
		}
	}
	return nil
}

// wall returns the wall-clock instant of scenario time t.
func (rt *rtRun) wall(t int64) time.Time {
	return rt.t0.Add(time.Duration(float64(t) * rt.scale))
}

// now returns the scenario time now.
func (rt *rtRun) now() int64 {
	return int64(float64(time.Since(rt.t0)) / rt.scale)
}

// sleepUntil waits until scenario time t. It reports false, without
// waiting, if t is at or past the end of the scenario: like Run, the run
// ignores events from then on.
func (rt *rtRun) sleepUntil(t int64) bool {
	if t >= rt.end {
		return false
	}
	time.Sleep(time.Until(rt.wall(t)))
	return true
}

// rollTo brings the server changes and the time series up to scenario time
// t, like the engine's advance. The caller holds rt.mu (or is alone).
func (rt *rtRun) rollTo(t int64) {
	for t >= rt.m.bucketEnd {
		rt.m.roll(rt.pol.Limit(), rt.inServer, 0)
	}
	rt.apply(rt.sc.Server.Changes, t)
}

// arrivals plays the open-loop arrival process in wall-clock time, in the
// engine's order of arrival and burst events, and starts one goroutine per
// arrival.
func (rt *rtRun) arrivals(gen *engine) {
	defer rt.wg.Done()
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	wait := func(t int64) {
		if d := time.Until(rt.wall(t)); d > 0 {
			timer.Reset(d)
			<-timer.C
		}
	}
	// The engine's event sequence numbers break ties between a burst flip
	// and an arrival at the same nanosecond; only their relative order
	// matters here.
	var seq uint64
	burstAt, burstSeq := int64(never), uint64(0)
	if b := rt.sc.Bursts; b != nil {
		seq++
		burstAt, burstSeq = int64(gen.rBurst.ExpFloat64()*float64(b.Period-b.Length)), seq
	}
	if gen.lamMax <= 0 {
		return
	}
	seq++
	arrAt, arrSeq := gen.nextArrival(0), seq
	for {
		if burstAt < arrAt || (burstAt == arrAt && burstSeq < arrSeq) {
			if burstAt >= rt.end {
				return
			}
			gen.inBurst = !gen.inBurst
			b := rt.sc.Bursts
			mean := b.Length
			if !gen.inBurst {
				mean = b.Period - b.Length
			}
			seq++
			burstAt, burstSeq = burstAt+int64(gen.rBurst.ExpFloat64()*float64(mean)), seq
			continue
		}
		if arrAt >= rt.end {
			return
		}
		wait(arrAt)
		r := &request{first: arrAt, start: arrAt}
		gen.classify(r)
		rt.mu.Lock()
		rt.budget = min(rt.budget+rt.sc.Retry.Budget, 100)
		if arrAt >= rt.warm {
			rt.m.request(r)
		}
		rt.mu.Unlock()
		rt.wg.Add(1)
		go rt.attempt(r)
		seq++
		arrAt, arrSeq = gen.nextArrival(arrAt), seq
	}
}

// attempt is one try of a request, from its arrival at r.start to its end,
// in its own goroutine.
func (rt *rtRun) attempt(r *request) {
	defer rt.wg.Done()
	if !rt.sleepUntil(r.start) {
		return
	}
	r.counted = r.start >= rt.warm
	if rt.throttle != nil && !rt.throttle.Allow(shed.Priority(r.prio)) {
		rt.mu.Lock()
		rt.rollTo(r.start)
		rt.m.throttled(r)
		rt.retryOrFail(r, r.start)
		rt.mu.Unlock()
		return
	}
	rt.mu.Lock()
	rt.rollTo(r.start)
	rt.m.attempt(r)
	rt.mu.Unlock()

	tk, ok := rt.pol.Admit(Request{Priority: r.prio, User: r.user})
	now := rt.now()
	if now >= rt.end {
		return
	}
	rt.mu.Lock()
	rt.rollTo(now)
	rt.stats.admit.add(time.Since(rt.wall(r.start)))
	if !ok {
		rt.m.reject(r)
		rt.retryOrFail(r, now)
		rt.mu.Unlock()
		if rt.rejectWork > 0 {
			rt.srv.submit(&rtJob{r: &request{isReject: true, work: rt.rejectWork}, abortAt: never})
		}
		return
	}
	if max := rt.sc.Server.MaxInFlight; max > 0 && rt.inServer >= max {
		rt.m.capHit(r)
		rt.mu.Unlock()
		rt.pol.Done(tk, Dropped)
		rt.mu.Lock()
		rt.retryOrFail(r, now)
		rt.mu.Unlock()
		return
	}
	rt.inServer++
	r.work = float64(rt.sc.Server.Service.sample(rt.rSvc, rt.svcFactor))
	if !rt.sc.Server.Wait.IsZero() {
		r.wait = rt.sc.Server.Wait.sample(rt.rSvc, rt.waitFactor[r.prio])
	}
	rt.mu.Unlock()

	dl := r.start + rt.dl
	j := &rtJob{r: r, abortAt: never, reply: make(chan rtReply, 2)}
	if rt.needDeadline {
		j.abortAt = dl
	}
	rt.srv.submit(j)
	// The server answers at or after the model time of each answer, and
	// closes j.reply when the scenario ends with j still in its CPU phase.
	tc := int64(-1)
	for tc < 0 {
		rep, ok := <-j.reply
		if !ok {
			return
		}
		switch rep.kind {
		case rtLate:
			// The client gives up and retries; the server works on.
			r.late = true
			rt.mu.Lock()
			rt.retryOrFail(r, rep.at)
			rt.mu.Unlock()
		case rtAborted:
			rt.abort(r, tk, rep.at)
			return
		case rtCPUDone:
			tc = rep.at
		}
	}
	fin := tc + r.wait
	// A deadline at the very end of the wait comes first, as in the engine
	// (its timeout event was scheduled before the wait's end).
	if r.wait > 0 && rt.needDeadline && !r.late && fin >= dl {
		if !rt.sleepUntil(dl) {
			return
		}
		if rt.sc.Server.HonourDeadlines {
			rt.abort(r, tk, dl)
			return
		}
		r.late = true
		rt.mu.Lock()
		rt.retryOrFail(r, dl)
		rt.mu.Unlock()
	}
	if !rt.sleepUntil(fin) {
		return
	}
	rt.finish(r, tk, fin)
}

// abort ends an admitted attempt that the server abandoned at its client's
// deadline, at scenario time at.
func (rt *rtRun) abort(r *request, tk Ticket, at int64) {
	rt.mu.Lock()
	rt.rollTo(at)
	rt.inServer--
	rt.m.aborted(r)
	rt.stats.done.add(time.Since(rt.wall(at)))
	rt.mu.Unlock()
	rt.pol.Done(tk, Dropped)
	rt.mu.Lock()
	rt.retryOrFail(r, at)
	rt.mu.Unlock()
}

// finish ends an admitted attempt that ran to completion at scenario time
// fin, like the engine's finish.
func (rt *rtRun) finish(r *request, tk Ticket, fin int64) {
	lat := fin - r.start
	ontime := !r.late && lat <= rt.dl
	rt.mu.Lock()
	rt.rollTo(fin)
	rt.inServer--
	rt.m.complete(r, lat, ontime, lat <= rt.slo && ontime)
	rt.stats.done.add(time.Since(rt.wall(fin)))
	rt.mu.Unlock()
	if ontime {
		rt.pol.Done(tk, Success)
		if rt.throttle != nil {
			rt.throttle.Accepted(shed.Priority(r.prio))
		}
	} else {
		rt.pol.Done(tk, Dropped)
	}
	if !r.late && !ontime {
		rt.mu.Lock()
		rt.retryOrFail(r, fin)
		rt.mu.Unlock()
	}
}

// retryOrFail starts the next attempt of r's request, failed at scenario
// time at, if the retry policy allows, or records the request as failed.
// The caller holds rt.mu.
func (rt *rtRun) retryOrFail(r *request, at int64) {
	delay, ok := rt.sc.Retry.next(r.attempt, &rt.budget, rt.rRetry.Float64())
	if !ok {
		rt.m.fail(r)
		return
	}
	n := &request{prio: r.prio, user: r.user, first: r.first, attempt: r.attempt + 1}
	n.start = at + delay
	if n.start >= rt.end {
		return
	}
	rt.wg.Add(1) // the caller's own goroutine is still counted: Wait has not returned
	go rt.attempt(n)
}

// The server's answers to an attempt.
type rtReplyKind uint8

const (
	rtCPUDone rtReplyKind = iota // the CPU phase ended
	rtLate                       // the client's deadline passed; the server works on
	rtAborted                    // the server abandoned the request at its client's deadline
)

type rtReply struct {
	kind rtReplyKind
	at   int64 // scenario time
}

// rtJob is a piece of CPU work in the server.
type rtJob struct {
	r       *request
	at      int64        // when it was handed to the server
	abortAt int64        // the client's deadline, if it is an event; never otherwise
	reply   chan rtReply // nil for the CPU cost of a rejection
}

// rtServer is the processor-sharing server of the engine, advanced on wall
// time by one goroutine: requests in their CPU phase share rate(n) cores'
// worth of work (the engine's own model, ps).
type rtServer struct {
	rt   *rtRun
	in   chan *rtJob
	done chan struct{} // closed when run returns

	// Owned by the server goroutine.
	model ps
	jobs  map[*request]*rtJob // the job of each request in the model's CPU phase
	dls   rtDeadlines
	over  bool // the scenario has ended
}

// submit hands j to the server, stamped with the current scenario time.
func (s *rtServer) submit(j *rtJob) {
	j.at = s.rt.now()
	s.in <- j
}

// run serves jobs until s.in is closed. It takes the submissions waiting
// for it before it moves the model to the present, so that each job starts
// when it was submitted even if the server goroutine was not running then.
// When the scenario ends it resolves every event due before the end and
// closes the replies of the jobs still in their CPU phase, and from then on
// closes the reply of each job it gets.
func (s *rtServer) run() {
	defer close(s.done)
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	end := s.rt.end
	for {
		for pending := true; pending; {
			select {
			case j, ok := <-s.in:
				if !ok {
					return
				}
				s.receive(j)
			default:
				pending = false
			}
		}
		if !s.over {
			now := s.rt.now()
			s.catchUp(min(now, end-1))
			if now >= end {
				s.over = true
				for _, r := range s.model.cpu {
					if j := s.jobs[r]; j.reply != nil {
						close(j.reply)
					}
				}
				timer.Stop()
			} else {
				timer.Reset(time.Until(s.rt.wall(min(s.next(), end))))
			}
		}
		select {
		case j, ok := <-s.in:
			if !ok {
				return
			}
			s.receive(j)
		case <-timer.C:
		}
	}
}

// receive starts j when it was submitted, unless the model is already past
// that moment, or closes its reply if the scenario is over.
func (s *rtServer) receive(j *rtJob) {
	if s.over {
		if j.reply != nil {
			close(j.reply)
		}
		return
	}
	s.catchUp(min(j.at, s.rt.end-1))
	s.start(j)
}

// nextDeadline returns the earliest client deadline of a request still in
// its CPU phase, dropping those of requests that left it.
func (s *rtServer) nextDeadline() int64 {
	for len(s.dls) > 0 && s.dls[0].r.hidx < 0 {
		heap.Pop(&s.dls)
	}
	if len(s.dls) == 0 {
		return never
	}
	return s.dls[0].abortAt
}

func (s *rtServer) next() int64 { return min(s.model.next(), s.nextDeadline()) }

// catchUp resolves, in model-time order, every event up to scenario time t,
// each at its own time, then advances the model to t.
func (s *rtServer) catchUp(t int64) {
	for {
		tc, td := s.model.next(), s.nextDeadline()
		if min(tc, td) > t {
			break
		}
		if tc <= td { // a CPU phase ending with a deadline goes first, as in the engine
			s.model.advance(tc)
			r := s.model.pop()
			j := s.jobs[r]
			delete(s.jobs, r)
			s.cpuDone(j)
		} else {
			s.model.advance(td)
			s.deadline(heap.Pop(&s.dls).(*rtJob))
		}
	}
	s.model.advance(t)
}

func (s *rtServer) start(j *rtJob) {
	s.jobs[j.r] = j
	s.model.start(j.r)
	if j.abortAt != never {
		heap.Push(&s.dls, j)
	}
}

func (s *rtServer) cpuDone(j *rtJob) {
	s.rt.mu.Lock()
	s.rt.m.work(j.r, j.r.work)
	s.rt.mu.Unlock()
	if j.reply != nil {
		j.reply <- rtReply{kind: rtCPUDone, at: s.model.lastT}
	}
}

// deadline is the client of j giving up: the server aborts j if it honours
// deadlines, and otherwise keeps working on it.
func (s *rtServer) deadline(j *rtJob) {
	if !s.rt.sc.Server.HonourDeadlines {
		j.reply <- rtReply{kind: rtLate, at: s.model.lastT}
		return
	}
	done := s.model.abort(j.r)
	delete(s.jobs, j.r)
	s.rt.mu.Lock()
	s.rt.m.work(j.r, done)
	s.rt.m.wasted += done
	s.rt.mu.Unlock()
	j.reply <- rtReply{kind: rtAborted, at: s.model.lastT}
}

// rtDeadlines holds client deadlines, earliest first; a job that has left
// its CPU phase (hidx < 0) is dropped when it comes to the top.
type rtDeadlines []*rtJob

func (h rtDeadlines) Len() int           { return len(h) }
func (h rtDeadlines) Less(i, j int) bool { return h[i].abortAt < h[j].abortAt }
func (h rtDeadlines) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *rtDeadlines) Push(x any)        { *h = append(*h, x.(*rtJob)) }
func (h *rtDeadlines) Pop() any {
	old := *h
	j := old[len(old)-1]
	*h = old[:len(old)-1]
	return j
}
