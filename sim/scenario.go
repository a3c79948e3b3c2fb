package sim

import (
	"errors"
	"fmt"
	"time"

	"github.com/sluicehq/sluice/retry"
)

// Server describes the simulated server.
//
// It has Cores cores shared by processor sharing among the requests in their
// CPU phase. Past Cores such requests, contention (locks, cache, GC) makes the
// whole server slower: with n requests on the CPU it does
//
//	rate(n) = n                     for n ≤ c
//	rate(n) = c / (1 + κ·(n − c))   for n > c
//
// cores' worth of work per second, shared equally, so throughput really
// collapses under unbounded concurrency. After its CPU phase a request may
// wait on a dependency (Wait): it holds its slot but uses no CPU.
//
// That is the PS model, the default. Model selects another structure in
// front of the same cores (a thread pool with an accept queue, or FIFO
// cores that run each request to completion), and GC adds stop-the-world
// pauses to any of them.
type Server struct {
	// Model is how admitted requests reach the cores (default PS).
	Model Model
	// Workers is the thread count of a Pool server (0: 4×Cores); other
	// models ignore it.
	Workers int
	// GC adds stop-the-world pauses (nil: none).
	GC *GC

	Cores      int
	Service    Dist    // CPU work per request
	Wait       Dist    // dependency wait after the CPU phase (zero: none)
	Contention float64 // κ
	// MaxInFlight is the memory cap: a request admitted while this many are
	// in the server fails at once. 0 means no cap.
	MaxInFlight int
	// RejectCost is the CPU cost of a rejection as a fraction of the mean
	// service time (e.g. 0.02).
	RejectCost float64
	// HonourDeadlines makes the server abort a request when its client's
	// deadline passes; otherwise it finishes it (wasted work).
	HonourDeadlines bool
	// Changes alter the server during the run (a capacity drop).
	Changes []Change
}

// Change scales the server from a moment on.
type Change struct {
	At time.Duration
	// ServiceFactor multiplies CPU work from At on (2 halves capacity).
	ServiceFactor float64
	// WaitFactor multiplies the dependency wait from At on (0 means 1).
	WaitFactor float64
	// WaitPriorities limits WaitFactor to these priorities (none: all).
	WaitPriorities []int
	// CoreFactor multiplies the cores from At on (0 means 1; 0.5 halves
	// capacity and leaves the RTT of a request alone as it was, as long as
	// a whole core remains).
	CoreFactor float64
}

// Phase sets the offered load from a moment on, as a multiple of the
// server's nominal capacity. With Ramp, the load moves linearly from the
// previous phase's load to this one over [previous At, At].
type Phase struct {
	At   time.Duration
	Load float64
	Ramp bool
}

// Bursts modulate the arrival rate (a Markov-modulated Poisson process):
// bursts of mean length Length start on average every Period (exponential
// times from burst start to burst start), and during a burst the offered
// load is Load times capacity.
type Bursts struct {
	Load   float64
	Length time.Duration
	Period time.Duration
}

// Class is a share of the traffic with a priority (0 is the most important).
type Class struct {
	Priority int
	Share    float64
}

// Retry is the clients' retry behaviour.
type Retry struct {
	// Attempts is the most attempts per request, the first included (0 or
	// 1: no retries).
	Attempts int
	// Backoff is the base of the capped exponential backoff with full
	// jitter: attempt k waits U(0, min(MaxBackoff, Backoff·2^(k−1))).
	Backoff    time.Duration
	MaxBackoff time.Duration
	// Budget caps retries at this fraction of first attempts (0: no cap):
	// each first attempt earns Budget tokens, each retry spends one.
	Budget float64
	// Throttle, if positive, is K of the clients' adaptive throttling
	// (retry.Throttle with its default 10 s window, per priority): clients refuse
	// locally, without sending, with probability
	// max(0, (requests − K·accepts)/(requests + 1)). Run only (RunRealtime
	// ignores it).
	Throttle float64
}

// next decides whether attempt (0 for the first) of a failed request is
// retried, spending from budget (the retries saved so far) when the policy
// has one, and returns the delay before the retry: retry.Backoff's capped
// exponential backoff with full jitter, u uniform in [0, 1).
func (rt Retry) next(attempt int, budget *float64, u float64) (int64, bool) {
	if attempt+1 >= rt.Attempts || (rt.Budget > 0 && *budget < 1) {
		return 0, false
	}
	if rt.Budget > 0 {
		*budget--
	}
	return int64(retry.Backoff{Base: rt.Backoff, Max: rt.MaxBackoff}.Delay(attempt+1, 0, u)), true
}

// Target is one pass/fail check of a run: the named metric (a field of
// Result's JSON, e.g. "goodput_ratio") must be within [Min, Max].
type Target struct {
	Metric string
	Min    *float64
	Max    *float64
}

// AtLeast and AtMost build targets.
func AtLeast(metric string, v float64) Target { return Target{Metric: metric, Min: &v} }

// AtMost builds a target that metric ≤ v.
func AtMost(metric string, v float64) Target { return Target{Metric: metric, Max: &v} }

// String renders the target as "metric ≥ v" or "metric ≤ v".
func (t Target) String() string {
	switch {
	case t.Min != nil && t.Max != nil:
		return fmt.Sprintf("%v ≤ %s ≤ %v", *t.Min, t.Metric, *t.Max)
	case t.Min != nil:
		return fmt.Sprintf("%s ≥ %v", t.Metric, *t.Min)
	case t.Max != nil:
		return fmt.Sprintf("%s ≤ %v", t.Metric, *t.Max)
	}
	return t.Metric
}

// Scenario is one overload experiment, as data.
type Scenario struct {
	Name        string
	Description string
	Duration    time.Duration
	// Warmup is excluded from the summary metrics (not from the series).
	Warmup  time.Duration
	Server  Server
	Load    []Phase
	Bursts  *Bursts
	Classes []Class // empty: one class of priority 1
	// Users is the number of distinct clients requests come from, each
	// request's user drawn uniformly (default 1000); Jain's fairness index
	// is taken over them.
	Users int
	Retry Retry
	// SLO is the latency objective; zero means 10× the mean service time
	// (CPU plus wait). Clients give up after Deadline (zero: 2×SLO).
	SLO      time.Duration
	Deadline time.Duration
	// Interval is the bucket of the time series and the unit of settling
	// time (default 100ms, the gate's default window).
	Interval time.Duration
	// Change is the moment after which settling time is measured (e.g. the
	// start of a step); zero: not measured.
	Change time.Duration
	// Recover is the moment from which rejections should have stopped (e.g.
	// a few seconds after a surge ends): late_reject_ratio counts from it.
	Recover time.Duration
	// Incident, if set, marks the incident the Result's incident figures
	// (Result.Incident) are measured around.
	Incident *Incident
	Targets  []Target
}

// Incident marks the moments of an incident: the surge, or the change of
// capacity, at At (0: the process starts into it), and, if it ends, the
// moment Restore the capacity comes back. The early figures cover the
// transient [At, At+Early), the settled ones [At+Early, Restore) (to the
// end of the run without Restore); set Scenario.Recover to Restore to have
// late_reject_ratio count the refusals after it.
type Incident struct {
	At      time.Duration // the surge or change of capacity begins
	Restore time.Duration // the capacity comes back (0: never)
	// Early is the transient's length (0: 5 s).
	Early time.Duration
}

func (sc *Scenario) withDefaults() Scenario {
	s := *sc
	if s.SLO == 0 {
		s.SLO = 10 * (s.Server.Service.MeanValue() + s.Server.Wait.MeanValue())
	}
	if s.Deadline == 0 {
		s.Deadline = 2 * s.SLO
	}
	if s.Interval == 0 {
		s.Interval = 100 * time.Millisecond
	}
	if len(s.Classes) == 0 {
		s.Classes = []Class{{Priority: 1, Share: 1}}
	}
	if s.Users == 0 {
		s.Users = 1000
	}
	if s.Incident != nil && s.Incident.Early == 0 {
		in := *s.Incident
		in.Early = 5 * time.Second
		s.Incident = &in
	}
	return s
}

// Validate reports what is wrong with the scenario, if anything.
func (sc *Scenario) Validate() error {
	var errs []error
	bad := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("sim: scenario %q: "+format, append([]any{sc.Name}, args...)...))
	}
	s := sc.withDefaults()
	if s.Name == "" {
		bad("no name")
	}
	if s.Duration <= 0 || s.Warmup < 0 || s.Warmup >= s.Duration {
		bad("duration %v, warm-up %v: need 0 ≤ warm-up < duration", s.Duration, s.Warmup)
	}
	if s.Server.Cores < 1 {
		bad("cores %d: need at least 1", s.Server.Cores)
	}
	if s.Server.Service.MeanValue() <= 0 {
		bad("service time must have a positive mean")
	}
	for _, e := range []error{s.Server.Service.validate("service"), s.Server.Wait.validate("wait")} {
		if e != nil {
			errs = append(errs, e)
		}
	}
	if s.Server.Contention < 0 || s.Server.RejectCost < 0 || s.Server.MaxInFlight < 0 {
		bad("contention, reject cost and in-flight cap must not be negative")
	}
	if len(s.Load) == 0 || s.Load[0].At != 0 {
		bad("load phases must start at 0")
	}
	for i, p := range s.Load {
		if p.Load < 0 || (i > 0 && p.At < s.Load[i-1].At) {
			bad("load phase %d: loads must be ≥ 0 and phases in time order", i)
		}
	}
	if b := s.Bursts; b != nil && (b.Load <= 0 || b.Length <= 0 || b.Period <= b.Length) {
		bad("bursts: need load > 0 and 0 < length < period")
	}
	sum := 0.0
	for _, c := range s.Classes {
		if c.Share <= 0 || c.Priority < 0 || c.Priority >= MaxPriorities {
			bad("class %+v: need share > 0 and priority in [0, %d)", c, MaxPriorities)
		}
		sum += c.Share
	}
	if sum < 0.999 || sum > 1.001 {
		bad("class shares sum to %v, want 1", sum)
	}
	if t := s.Retry.Throttle; t < 0 || (t > 0 && t < 1) || t > 100 {
		bad("retry throttle K %v: need 0 (off) or 1 to 100", t)
	}
	if s.Users < 0 || s.Users > 1<<20 {
		bad("users %d: need 0 (default) to 2^20", s.Users)
	}
	if s.Retry.Attempts < 0 || s.Retry.Budget < 0 || (s.Retry.Attempts > 1 && s.Retry.Backoff <= 0) {
		bad("retry: attempts and budget must be ≥ 0, backoff > 0 with retries")
	}
	for _, c := range s.Server.Changes {
		if c.ServiceFactor <= 0 || c.CoreFactor < 0 {
			bad("change at %v: service factor must be positive, core factor not negative", c.At)
		}
	}
	if s.Server.Model > FIFO {
		bad("unknown server model %v", s.Server.Model)
	}
	if s.Server.Workers < 0 {
		bad("workers %d: must not be negative", s.Server.Workers)
	}
	if err := s.Server.GC.validate(); err != nil {
		errs = append(errs, err)
	}
	if in := s.Incident; in != nil && (in.At < 0 || in.At >= s.Duration || in.Early < 0 ||
		(in.Restore != 0 && in.Restore <= in.At+in.Early) || in.Restore > s.Duration) {
		bad("incident %+v: need 0 ≤ at < duration and at + early < restore ≤ duration (or no restore)", *in)
	}
	return errors.Join(errs...)
}

// MaxPriorities is the number of priority levels the simulator tracks.
const MaxPriorities = 4

// Capacity returns the server's nominal throughput in requests per second:
// c / E[S]; for Pool no more than its threads can carry, W / (E[S] + E[wait]);
// with GC, times the share of time the pauses leave, 1 − Pause/Every.
func (s Server) Capacity() float64 {
	c := s.capacityAt(1, 1, 1)
	if s.GC != nil {
		c *= s.GC.share()
	}
	return c
}
