package sim

import (
	"math"
	"time"
)

// fluidBound is an offline bound on the share of requests that no policy
// can serve within the SLO, given the arrivals the run realised and the
// server's capacity: Result.LossBound.
//
// Derivation. Replace the server by a fluid one that does µ(t) requests'
// worth of mean work per second of process time, µ(t) being the capacity
// of the moment (Server.Capacity without the GC factor: pauses stop the
// fluid too), and that, unlike the real one, splits a single request over
// every core and knows no service-time variance. A request arriving at a
// with a backlog of Q requests' work ahead of it finishes at best after
// (Q+1)/µ of process time, then waits on its dependency, so it can meet
// the SLO only if (Q+1)/µ ≤ SLO − E[wait]. The deadlines a + SLO come in
// the order of the arrivals and every request brings the same work, so
// among all schedules the most requests meet their deadlines under
// first-come-first-served with admission control that refuses exactly the
// arrivals that would be late (an exchange argument: refusing an earlier
// request instead of a later one never leaves less backlog for the
// requests after both, and admitting a request that will be late only adds
// backlog). That greedy is what arrive runs, on the first attempts of the
// run; its refusals after warm-up, as a share of the requests after
// warm-up, are the bound. A real server is slower (one request uses one
// core at a time; a Pool holds threads; service times vary), so a real
// policy loses at least about this much; the fluid is optimistic about the
// variance only, which is why the bursts scenario judges a policy against
// the bound plus a margin.
type fluidBound struct {
	slo    float64 // ns
	wait   float64 // mean dependency wait, ns
	srv    Server
	pauses *pauses // nil: none
	q      float64 // backlog, requests
	last   int64   // process time of the last arrival
	mu     float64 // capacity at the factors below, requests per ns
	coreF  float64
	svcF   float64
	n      int64 // requests after warm-up
	lost   int64 // of which no policy could serve in time
}

func newFluidBound(s *Scenario, p *pauses) fluidBound {
	return fluidBound{slo: float64(s.SLO), wait: float64(s.Server.Wait.MeanValue()), srv: s.Server, pauses: p}
}

// arrive accounts for a request arriving at real time t (counted: after
// warm-up) with the server's cores and work scaled by coreF and svcF.
func (f *fluidBound) arrive(t int64, counted bool, coreF, svcF float64) {
	if f.pauses != nil {
		t = f.pauses.proc(t)
	}
	if f.mu == 0 || coreF != f.coreF || svcF != f.svcF {
		f.mu, f.coreF, f.svcF = f.srv.capacityAt(svcF, coreF, 1)/1e9, coreF, svcF
	}
	mu := f.mu
	f.q = max(0, f.q-float64(t-f.last)*mu)
	f.last = t
	if counted {
		f.n++
	}
	if (f.q+1)/mu <= f.slo-f.wait {
		f.q++
	} else if counted {
		f.lost++
	}
}

// ratio returns the bound: the share of requests after warm-up that the
// fluid server could not serve in time.
func (f *fluidBound) ratio() float64 {
	if f.n == 0 {
		return 0
	}
	return float64(f.lost) / float64(f.n)
}

// stateAt returns the server state the scenario's changes set at time t
// (every change at or before t applied).
func (sc *Scenario) stateAt(t time.Duration) serverState {
	st := newServerState()
	st.apply(sc.Server.Changes, int64(t))
	return st
}

// meanWaitFactor returns the factor on the mean dependency wait, over the
// classes by their shares.
func (sc *Scenario) meanWaitFactor(st *serverState) float64 {
	if len(sc.Classes) == 0 {
		return st.waitFactor[1]
	}
	f := 0.0
	for _, c := range sc.Classes {
		f += c.Share * st.waitFactor[c.Priority]
	}
	return f
}

// capacityAt returns the server's capacity in requests per second under
// state st, the GC pauses included.
func (sc *Scenario) capacityAt(st *serverState) float64 {
	return sc.Server.capacityAt(st.svcFactor, st.coreFactor, sc.meanWaitFactor(st)) * sc.Server.GC.share()
}

// floorAt returns the server's true floor under state st: the RTT of a
// request served alone, as its mean and its median. The CPU time E[S]
// (median m[S]) is scaled by svcFactor and divided by the speed one request
// gets from the cores left (1 with a whole core); the dependency wait's
// mean (median) is scaled by its factor and added. The median of the sum is
// taken as the sum of the medians, exact when the wait is constant, as in
// the zoo. GC pauses are left out.
func (sc *Scenario) floorAt(st *serverState) (mean, median time.Duration) {
	speed := speed1(float64(sc.Server.Cores)*st.coreFactor, sc.Server.Contention)
	wf := sc.meanWaitFactor(st)
	at := func(svc, wait time.Duration) time.Duration {
		return time.Duration(math.Round(float64(svc)*st.svcFactor/speed + float64(wait)*wf))
	}
	return at(sc.Server.Service.MeanValue(), sc.Server.Wait.MeanValue()), at(sc.Server.Service.Median(), sc.Server.Wait.Median())
}

// floorError is how far a floor estimate is from the true floor, whose
// mean and median are both right answers: a learner that summarises its
// windows by their median sees the median, Little's law needs the mean. An
// estimate between the two is exact; one outside is off by its relative
// distance to the nearer one; no estimate (0) is off by 1.
func floorError(est, mean, median time.Duration) float64 {
	lo, hi := min(mean, median), max(mean, median)
	switch {
	case est <= 0:
		return 1
	case est < lo:
		return 1 - float64(est)/float64(lo)
	case est > hi:
		return float64(est)/float64(hi) - 1
	}
	return 0
}
