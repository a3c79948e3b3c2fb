package sim

import (
	"fmt"
	"math"
	"math/rand/v2"
	"time"

	"github.com/sluicehq/sluice/clock"
	"github.com/sluicehq/sluice/retry"
	"github.com/sluicehq/sluice/shed"
)

// epoch is the wall time the simulated clock starts at.
var epoch = time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)

const never = math.MaxInt64

type evKind uint8

const (
	evArrival  evKind = iota // next arrival of the open-loop process
	evRetry                  // a retry attempt of req
	evWaitDone               // req's dependency wait ends
	evTimeout                // req's client deadline (if req.gen matches)
	evBurst                  // the burst state flips
	evResume                 // req arrived during a GC pause: it meets the policy now
)

type event struct {
	at   int64
	seq  uint64
	kind evKind
	gen  uint32
	req  *request
}

// evHeap is the event queue, a binary min-heap by (at, seq). It is typed,
// not a container/heap, so that pushing an event does not box it in an
// interface (an allocation per event). seq is unique, so the order events
// come out in is the same whatever the heap's layout.
type evHeap []event

func (h evHeap) less(i, j int) bool {
	if h[i].at != h[j].at {
		return h[i].at < h[j].at
	}
	return h[i].seq < h[j].seq
}

func (h *evHeap) push(ev event) {
	*h = append(*h, ev)
	q := *h
	for j := len(q) - 1; j > 0; {
		i := (j - 1) / 2 // parent
		if !q.less(j, i) {
			break
		}
		q[i], q[j] = q[j], q[i]
		j = i
	}
}

func (h *evHeap) pop() event {
	q := *h
	n := len(q) - 1
	ev := q[0]
	q[0] = q[n]
	q[n] = event{}
	q = q[:n]
	for i := 0; ; {
		l := 2*i + 1
		if l >= n {
			break
		}
		j := l
		if r := l + 1; r < n && q.less(r, l) {
			j = r
		}
		if !q.less(j, i) {
			break
		}
		q[i], q[j] = q[j], q[i]
		i = j
	}
	*h = q
	return ev
}

type reqState uint8

const (
	stCPU reqState = iota
	stWait
	stDone
	stQueued // admitted, waiting for a worker (Pool, FIFO)
)

type request struct {
	prio     int
	user     int
	attempt  int   // 0 for the first
	first    int64 // arrival of the first attempt
	start    int64 // arrival of this attempt
	work     float64
	wait     int64
	finishV  float64
	hidx     int
	state    reqState
	gen      uint32
	late     bool // the client gave up on it
	isReject bool // a rejection's CPU cost, not a request
	ticket   Ticket
	counted  bool // this attempt arrived after warm-up
	// prevAdmit: the metrics' last admission of this priority before
	// this attempt, restored if the attempt is refused
	prevAdmit int64
}

type engine struct {
	sc     Scenario
	end    int64
	warm   int64
	slo    int64
	dl     int64
	now    int64
	seq    uint64
	events evHeap
	clk    *clock.Manual
	clkAt  int64
	pol    Policy

	rArr, rSvc, rPrio, rRetry, rBurst, rUser *rand.Rand

	// server
	srv      server
	inServer int
	serverState
	capacity float64              // nominal, requests per second
	meanSvc  float64              // ns
	floor    func() time.Duration // the policy's floor estimate; nil: it has none
	fluid    fluidBound

	// arrivals
	lamMax   float64 // per ns
	inBurst  bool
	cumShare []float64

	// retries
	budget   float64
	throttle *retry.Throttle[shed.Priority] // clients' adaptive throttling; nil: none

	free []*request
	m    metricsAcc
}

// Run simulates scenario sc under the policy built by spec, with the given
// seed. The same inputs give the same Result, to the bit.
func Run(sc Scenario, spec PolicySpec, seed uint64) (*Result, error) {
	if err := sc.Validate(); err != nil {
		return nil, err
	}
	s := sc.withDefaults()
	e := &engine{
		sc:       s,
		end:      int64(s.Duration),
		warm:     int64(s.Warmup),
		slo:      int64(s.SLO),
		dl:       int64(s.Deadline),
		clk:      clock.NewManual(epoch),
		capacity: s.Server.Capacity(),
		meanSvc:  float64(s.Server.Service.MeanValue()),
		srv:      newServer(s.Server, seed, int64(s.Duration)),
	}
	e.serverState = newServerState()
	e.initArrivals(seed)
	e.rSvc = rand.New(rand.NewPCG(seed, 2))
	e.rRetry = rand.New(rand.NewPCG(seed, 4))
	env := Env{
		Clock: e.clk, Cores: s.Server.Cores, MeanService: s.Server.Service.MeanValue(),
		MeanWait: s.Server.Wait.MeanValue(), Capacity: e.capacity, SLO: s.SLO, MaxInFlight: s.Server.MaxInFlight,
	}
	pol, err := spec.New(env)
	if err == nil {
		err = checkClocks(pol, env)
	}
	if err != nil {
		return nil, fmt.Errorf("sim: policy %s: %w", spec.Name, err)
	}
	e.pol = pol
	e.floor = floorOf(pol)
	e.fluid = newFluidBound(&s, e.srv.pauses)
	if k := s.Retry.Throttle; k > 0 {
		if e.throttle, err = retry.NewThrottle[shed.Priority](retry.WithThrottleClock(e.clk), retry.WithThrottleK(k), retry.WithThrottleSeed(seed)); err != nil {
			return nil, err
		}
	}
	if s.Bursts != nil {
		e.schedule(int64(e.rBurst.ExpFloat64()*float64(s.Bursts.Period-s.Bursts.Length)), evBurst, nil)
	}
	e.m.init(&s, e.capacity)
	e.m.hasFloor = e.floor != nil
	if e.lamMax > 0 {
		e.schedule(e.nextArrival(0), evArrival, nil)
	}
	e.loop()
	e.m.busy = e.srv.busy
	e.m.lossBound = e.fluid.ratio()
	return e.m.result(&s, spec.Name, seed, e.capacity), nil
}

// initArrivals sets up the open-loop arrival process: its rate bound and
// class mix, and one PCG stream per concern (arrivals, priorities, users,
// bursts), so that changing one concern does not shift the random numbers of
// another. Run and RunRealtime share it, so both see the same arrivals.
func (e *engine) initArrivals(seed uint64) {
	e.rArr = rand.New(rand.NewPCG(seed, 1))
	e.rPrio = rand.New(rand.NewPCG(seed, 3))
	e.rBurst = rand.New(rand.NewPCG(seed, 5))
	e.rUser = rand.New(rand.NewPCG(seed, 6))
	maxLoad := 0.0
	for _, p := range e.sc.Load {
		maxLoad = max(maxLoad, p.Load)
	}
	if e.sc.Bursts != nil {
		maxLoad = max(maxLoad, e.sc.Bursts.Load)
	}
	e.lamMax = maxLoad * e.capacity / 1e9
	acc := 0.0
	for _, c := range e.sc.Classes {
		acc += c.Share
		e.cumShare = append(e.cumShare, acc)
	}
}

// classify draws a new request's priority class and user.
func (e *engine) classify(r *request) {
	u := e.rPrio.Float64()
	ci := 0
	for ci < len(e.cumShare)-1 && u >= e.cumShare[ci] {
		ci++
	}
	r.prio = e.sc.Classes[ci].Priority
	r.user = e.rUser.IntN(e.sc.Users)
}

func (e *engine) schedule(at int64, k evKind, r *request) {
	e.seq++
	var gen uint32
	if r != nil {
		gen = r.gen
	}
	e.events.push(event{at: at, seq: e.seq, kind: k, req: r, gen: gen})
}

// advance moves simulated time to t, crediting every CPU-phase request with
// the work done meanwhile and closing time-series buckets on the way.
func (e *engine) advance(t int64) {
	e.srv.advance(t)
	e.now = t
	for t >= e.m.bucketEnd {
		var floor time.Duration
		if e.floor != nil {
			floor = e.floor()
		}
		e.m.roll(e.pol.Limit(), e.inServer, floor)
	}
	if cf := e.coreFactor; e.changeIdx < len(e.sc.Server.Changes) {
		e.apply(e.sc.Server.Changes, t)
		if e.coreFactor != cf {
			e.srv.setCores(float64(e.sc.Server.Cores) * e.coreFactor)
		}
	}
}

func (e *engine) loop() {
	for {
		tEv := int64(never)
		if len(e.events) > 0 {
			tEv = e.events[0].at
		}
		tCPU := e.srv.next()
		if min(tEv, tCPU) >= e.end {
			e.advance(e.end)
			return
		}
		if tCPU <= tEv {
			e.advance(tCPU)
			e.cpuDone(e.srv.pop())
			continue
		}
		ev := e.events.pop()
		e.advance(ev.at)
		switch ev.kind {
		case evArrival:
			e.arrival()
		case evRetry:
			e.attempt(ev.req)
		case evWaitDone:
			if ev.req.gen == ev.gen && ev.req.state == stWait {
				if end := e.pausedUntil(); end >= 0 {
					e.schedule(end, evWaitDone, ev.req) // the reply waits for the pause to end
					continue
				}
				e.finish(ev.req)
			}
		case evResume:
			e.admit(ev.req)
		case evTimeout:
			if ev.req.gen == ev.gen && ev.req.state != stDone {
				e.timeout(ev.req)
			}
		case evBurst:
			e.inBurst = !e.inBurst
			b := e.sc.Bursts
			mean := b.Length
			if !e.inBurst {
				mean = b.Period - b.Length
			}
			e.schedule(e.now+int64(e.rBurst.ExpFloat64()*float64(mean)), evBurst, nil)
		}
	}
}

// load returns the offered load (multiple of capacity) at time t.
func (e *engine) load(t int64) float64 {
	if e.inBurst {
		return e.sc.Bursts.Load
	}
	return loadAt(e.sc.Load, t)
}

// loadAt is the load the phases ph schedule at time t (ns), ramps
// interpolated, as a multiple of capacity.
func loadAt(ph []Phase, t int64) float64 {
	i := len(ph) - 1
	for i > 0 && int64(ph[i].At) > t {
		i--
	}
	if i+1 < len(ph) && ph[i+1].Ramp {
		a, b := ph[i], ph[i+1]
		f := float64(t-int64(a.At)) / float64(b.At-a.At)
		return a.Load + f*(b.Load-a.Load)
	}
	return ph[i].Load
}

// nextArrival draws the next arrival after t of the non-homogeneous Poisson
// process with rate load(t)·C, by thinning a process of rate lamMax.
func (e *engine) nextArrival(t int64) int64 {
	for {
		t += int64(e.rArr.ExpFloat64()/e.lamMax) + 1
		if t >= e.end {
			return t
		}
		if e.rArr.Float64()*e.lamMax*1e9 < e.load(t)*e.capacity {
			return t
		}
	}
}

func (e *engine) newRequest() *request {
	var r *request
	if n := len(e.free); n > 0 {
		r = e.free[n-1]
		e.free = e.free[:n-1]
		gen := r.gen + 1
		*r = request{gen: gen}
	} else {
		r = new(request)
	}
	r.hidx = -1
	return r
}

func (e *engine) recycle(r *request) {
	r.state = stDone
	r.gen++
	e.free = append(e.free, r)
}

func (e *engine) setClock() {
	if e.now != e.clkAt {
		e.clk.Set(epoch.Add(time.Duration(e.now)))
		e.clkAt = e.now
	}
}

func (e *engine) arrival() {
	r := e.newRequest()
	e.classify(r)
	r.first = e.now
	e.budget = min(e.budget+e.sc.Retry.Budget, 100)
	e.fluid.arrive(e.now, e.now >= e.warm, e.coreFactor, e.svcFactor)
	if e.now >= e.warm {
		e.m.request(r)
	}
	e.attempt(r)
	e.schedule(e.nextArrival(e.now), evArrival, nil)
}

// attempt is one try of a request: the client may refuse it locally
// (throttling); otherwise it reaches the server.
func (e *engine) attempt(r *request) {
	r.start = e.now
	r.counted = e.now >= e.warm
	e.setClock()
	if e.throttle != nil && !e.throttle.Allow(shed.Priority(r.prio)) {
		e.m.throttled(r)
		e.retryOrFail(r)
		return
	}
	e.m.attempt(r)
	if end := e.pausedUntil(); end >= 0 {
		e.schedule(end, evResume, r) // the process is stopped: the request waits for it
		return
	}
	e.admit(r)
}

// pausedUntil returns the end of the GC pause in progress, or −1 if none
// is.
func (e *engine) pausedUntil() int64 {
	if e.srv.pauses == nil {
		return -1
	}
	return e.srv.pauses.until(e.now)
}

// admit puts an attempt that reached the server to the policy, and starts it
// if admitted.
func (e *engine) admit(r *request) {
	e.setClock()
	t, ok := e.pol.Admit(Request{Priority: r.prio, User: r.user})
	if !ok {
		e.m.reject(r)
		if e.sc.Server.RejectCost > 0 {
			j := e.newRequest()
			j.isReject = true
			j.work = e.sc.Server.RejectCost * e.meanSvc
			e.startCPU(j)
		}
		e.retryOrFail(r)
		return
	}
	r.ticket = t
	if max := e.sc.Server.MaxInFlight; max > 0 && e.inServer >= max {
		e.m.capHit(r)
		e.pol.Done(t, Dropped)
		e.retryOrFail(r)
		return
	}
	e.inServer++
	r.work = float64(e.sc.Server.Service.sample(e.rSvc, e.svcFactor))
	if !e.sc.Server.Wait.IsZero() {
		r.wait = e.sc.Server.Wait.sample(e.rSvc, e.waitFactor[r.prio])
	}
	e.srv.admit(r)
	if e.sc.Retry.Attempts > 1 || e.sc.Server.HonourDeadlines {
		e.schedule(r.start+e.dl, evTimeout, r)
	}
}

func (e *engine) startCPU(r *request) {
	e.srv.admit(r)
}

func (e *engine) cpuDone(r *request) {
	e.m.work(r, r.work)
	if r.isReject {
		e.recycle(r)
		return
	}
	e.srv.cpuEnded(r)
	if r.wait > 0 {
		r.state = stWait
		e.schedule(e.now+r.wait, evWaitDone, r)
		return
	}
	e.finish(r)
}

// finish ends an admitted request that ran to completion.
func (e *engine) finish(r *request) {
	e.inServer--
	e.srv.left(r)
	lat := e.now - r.start
	ontime := !r.late && lat <= e.dl
	e.m.complete(r, lat, ontime, lat <= e.slo && ontime)
	e.setClock()
	if ontime {
		e.pol.Done(r.ticket, Success)
		if e.throttle != nil {
			e.throttle.Accepted(shed.Priority(r.prio))
		}
	} else {
		e.pol.Done(r.ticket, Dropped)
	}
	if r.late {
		e.recycle(r) // the client already gave up and moved on
		return
	}
	if !ontime {
		e.retryOrFail(r)
	}
	e.recycle(r)
}

// timeout is the client giving up on an attempt at its deadline.
func (e *engine) timeout(r *request) {
	r.late = true
	if e.sc.Server.HonourDeadlines {
		cpu := r.state == stCPU
		done := e.srv.abort(r)
		if cpu {
			e.m.work(r, done)
			e.m.wasted += done
		}
		e.inServer--
		e.m.aborted(r)
		e.setClock()
		e.pol.Done(r.ticket, Dropped)
		e.retryOrFail(r)
		e.recycle(r)
		return
	}
	// The server keeps working on it; the client retries with a copy.
	e.retryOrFail(r)
}

// retryOrFail schedules the next attempt of r's request, if the retry
// policy allows, or records the request as failed.
func (e *engine) retryOrFail(r *request) {
	delay, ok := e.sc.Retry.next(r.attempt, &e.budget, e.rRetry.Float64())
	if !ok {
		e.m.fail(r)
		return
	}
	n := e.newRequest()
	n.prio, n.user, n.first, n.attempt = r.prio, r.user, r.first, r.attempt+1
	e.schedule(e.now+delay, evRetry, n)
}
