package sim

import (
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"time"
)

// Point is one interval of a run's time series.
type Point struct {
	T         time.Duration `json:"t"`         // end of the interval
	Offered   float64       `json:"offered"`   // attempts per second
	Goodput   float64       `json:"goodput"`   // completions within SLO per second
	Rejected  float64       `json:"rejected"`  // policy rejections per second
	P99       time.Duration `json:"p99"`       // of completions in the interval
	Limit     int           `json:"limit"`     // at the end (-1: unbounded)
	InFlight  int           `json:"in_flight"` // at the end
	Completed float64       `json:"completed"` // completions per second
	OverSLO   float64       `json:"over_slo"`  // completions slower than the SLO per second
	// Capacity is the server's true capacity over the interval, requests
	// per second (the nominal one scaled by the changes in force).
	Capacity float64 `json:"capacity"`
	// Floor is the policy's estimate of the service's floor at the end of
	// the interval (0: the policy has none; see Floorer); FloorTrue and
	// FloorMedian are the model's true floor then, the mean and the median
	// RTT of a request served alone.
	Floor       time.Duration `json:"floor,omitempty"`
	FloorTrue   time.Duration `json:"floor_true"`
	FloorMedian time.Duration `json:"floor_median"`
	// Prio splits Offered, Goodput and Rejected by priority: Prio[p] is
	// priority p's part of the interval (zero for a priority no class
	// has). Summed over the priorities they give the fields above, up to
	// rounding.
	Prio [MaxPriorities]PrioPoint `json:"prio"`
}

// PrioPoint is one priority's traffic in one interval of the time series,
// per second, counted like Point's fields of the same names: every attempt
// (retries included, warm-up too), every policy rejection, every completion
// within the SLO and before the client's deadline.
type PrioPoint struct {
	Offered  float64 `json:"offered"`  // attempts per second
	Goodput  float64 `json:"goodput"`  // completions within SLO per second
	Rejected float64 `json:"rejected"` // policy rejections per second
}

// PriorityResult summarises one priority's requests (after warm-up).
type PriorityResult struct {
	Priority     int     `json:"priority"`
	Offered      float64 `json:"offered"`       // requests (first attempts) per second
	SuccessRatio float64 `json:"success_ratio"` // requests that eventually succeeded in time
	RejectRatio  float64 `json:"reject_ratio"`  // attempts the policy rejected
}

// TargetResult is one target's verdict.
type TargetResult struct {
	Target string `json:"target"`
	// Value is the measured value; +Inf for a settling time that never came
	// (encoded in JSON as null, which JSON has for no number).
	Value float64 `json:"value"`
	Pass  bool    `json:"pass"`
	// NA reports that the figure does not apply to the run (a target on
	// the floor estimate of a policy without one): the target counts as
	// met.
	NA bool `json:"na,omitempty"`
}

// MarshalJSON encodes the verdict, with an infinite or undefined Value as
// null: encoding/json refuses them.
func (t TargetResult) MarshalJSON() ([]byte, error) {
	type plain TargetResult
	if math.IsInf(t.Value, 0) || math.IsNaN(t.Value) {
		return json.Marshal(struct {
			Target string   `json:"target"`
			Value  *float64 `json:"value"`
			Pass   bool     `json:"pass"`
			NA     bool     `json:"na,omitempty"`
		}{t.Target, nil, t.Pass, t.NA})
	}
	return json.Marshal(plain(t))
}

// Result is what one run of a scenario under a policy measured. Summary
// figures exclude the warm-up.
type Result struct {
	Scenario        string  `json:"scenario"`
	Policy          string  `json:"policy"`
	Seed            uint64  `json:"seed"`
	CapacityRPS     float64 `json:"capacity_rps"`
	OfferedRPS      float64 `json:"offered_rps"`
	GoodputRPS      float64 `json:"goodput_rps"`
	GoodputRatio    float64 `json:"goodput_ratio"`       // goodput / capacity
	ServedRatio     float64 `json:"served_ratio"`        // goodput / min(offered, capacity)
	ThroughputRatio float64 `json:"throughput_ratio"`    // completions before the deadline / requests offered
	MeanMs          float64 `json:"mean_ms"`             // admitted requests
	P50ms           float64 `json:"p50_ms"`              // admitted requests
	P99ms           float64 `json:"p99_ms"`              // admitted requests
	P999ms          float64 `json:"p999_ms"`             // admitted requests
	SLOms           float64 `json:"slo_ms"`              // latency objective
	RejectRatio     float64 `json:"reject_ratio"`        // policy rejections / attempts
	LateRejectRatio float64 `json:"late_reject_ratio"`   // rejections / attempts from Scenario.Recover on
	InversionRatio  float64 `json:"inversion_ratio"`     // refusals within Interval/10 of an admission of lower priority / attempts
	CapHits         int64   `json:"cap_hits"`            // attempts failed by the in-flight cap
	SettleIntervals int     `json:"settle_intervals"`    // after Scenario.Change; -1: never settled
	PeakP99ms       float64 `json:"peak_p99_ms"`         // worst interval p99 after Scenario.Change
	PhaseGoodput    float64 `json:"phase_goodput_ratio"` // goodput / capacity in the phase after Scenario.Change
	LimitCoV        float64 `json:"limit_cov"`           // coefficient of variation of the limit on the plateau
	ShedStartLoad   float64 `json:"shed_start_load"`     // scheduled load (× capacity) when shedding began; -1: it never did
	LimitReachS     float64 `json:"limit_reach_s"`       // seconds from the change until the limit is first within ±20% of the optimum (the core count); -1: never
	LimitNearOpt    float64 `json:"limit_near_optimum"`  // share of the phase's intervals from 2 s after the change with the limit within ±20% of the optimum
	WastedRatio     float64 `json:"wasted_ratio"`        // CPU work that produced no on-time success
	RetryAmp        float64 `json:"retry_amplification"`
	ThrottledRatio  float64 `json:"throttled_ratio"` // attempts the clients refused locally (not sent)
	Jain            float64 `json:"jain"`            // Jain's index of the users' success ratios
	// LossRatio is the share of requests (first attempts after warm-up)
	// not served within the SLO: refused, failed, late or unfinished.
	LossRatio float64 `json:"loss_ratio"`
	// LossBound is the least share of requests that any policy must
	// refuse or serve late, given the arrivals of the run and the
	// capacity: a fluid bound (see fluidBound in bound.go).
	LossBound float64 `json:"loss_bound"`
	// IncidentResult holds the figures around Scenario.Incident (absent
	// without one).
	*IncidentResult
	// FloorResult judges the policy's floor estimate (absent if the policy
	// has none).
	*FloorResult
	PerPriority []PriorityResult `json:"per_priority"`
	Targets     []TargetResult   `json:"targets,omitempty"`
	Pass        bool             `json:"pass"`
	Series      []Point          `json:"-"`
	Requests    int64            `json:"requests"` // simulated attempts in all
}

// IncidentResult holds the figures of a run around its Scenario.Incident:
// goodput (completions within the SLO) as a share of the true capacity of
// the moment, and the p99 latency of successes (completions before the
// client's deadline), over the transient [At, At+Early) and the settled
// span [At+Early, Restore or the end), by completion time; and the share
// of goodput against what could be served, Σ goodput / Σ min(offered,
// capacity), per interval of the settled span.
type IncidentResult struct {
	EarlyGoodput float64 `json:"early_goodput_ratio"`    // over the transient, of capacity
	EarlyP99ms   float64 `json:"early_p99_ms"`           // of successes in the transient
	Goodput      float64 `json:"incident_goodput_ratio"` // over the settled span, of capacity
	P99ms        float64 `json:"incident_p99_ms"`        // of successes in the settled span
	Served       float64 `json:"incident_served_ratio"`  // of min(offered, capacity), settled span
}

// FloorResult judges a policy's floor estimate (see Floorer) against the
// model's true floor at the end of each interval that ends at least 10 s
// after every change before it (the start, a load phase, a change of the
// server, the incident's start and restore).
type FloorResult struct {
	// FloorError is the worst relative error over those intervals: 0
	// between the true floor's median and mean, else the relative
	// distance to the nearer of them (an estimate of 0 counts as 1).
	FloorError float64 `json:"floor_error"`
	// FloorIntervals is the number of intervals judged (0: none, and
	// FloorError means nothing).
	FloorIntervals int `json:"floor_intervals"`
}

// floorGrace is how long after a change the floor estimate is not judged.
const floorGrace = 10 * time.Second

type metricsAcc struct {
	interval  int64
	slo       int64
	bucketEnd int64
	warm      int64
	cur       Point
	curLat    []int64
	series    []Point

	lat       []int64 // admitted completions after warm-up
	attempts  int64   // after warm-up
	firsts    int64
	allAtt    int64
	rejects   int64
	capHits   int64
	good      int64
	ontime    int64
	local     int64 // attempts refused by the client's throttle
	requests  [MaxPriorities]int64
	success   [MaxPriorities]int64
	pAttempts [MaxPriorities]int64
	pRejects  [MaxPriorities]int64
	busy      float64 // core-ns of work done
	useful    float64
	total     float64
	wasted    float64
	recoverAt int64
	userReq   []int32 // requests per user after warm-up
	userOK    []int32 // of which succeeded in time
	lateAtt   int64
	lateRej   int64
	// priority inversions: the last admission of each priority, and the
	// span within which an admission of lower priority makes a refusal
	// an inversion
	lastAdmit  [MaxPriorities]int64
	invSpan    int64
	inversions int64

	hasFloor  bool    // the policy reports a floor estimate
	lossBound float64 // the fluid bound, set by the engine
	// around Scenario.Incident: the spans [early, settled) and [settled,
	// end), successes' latencies and goodput in each, by completion time
	inc                          bool
	incEarly, incSettled, incEnd int64
	earlyLat, spanLat            []int64
	earlyGood, spanGood          int64
}

func (m *metricsAcc) init(s *Scenario, capacity float64) {
	m.interval = int64(s.Interval)
	m.slo = int64(s.SLO)
	m.bucketEnd = m.interval
	m.warm = int64(s.Warmup)
	m.recoverAt = never
	m.invSpan = int64(s.Interval / 10)
	for p := range m.lastAdmit {
		m.lastAdmit[p] = -1 << 62 // long before any attempt
	}
	m.userReq = make([]int32, s.Users)
	m.userOK = make([]int32, s.Users)
	if s.Recover > 0 {
		m.recoverAt = int64(s.Recover)
	}
	if in := s.Incident; in != nil {
		m.inc = true
		m.incEarly, m.incSettled, m.incEnd = int64(in.At), int64(in.At+in.Early), int64(s.Duration)
		if in.Restore > 0 {
			m.incEnd = int64(in.Restore)
		}
	}
}

// roll closes the interval, with the policy's limit, the requests in the
// server and the policy's floor estimate at its end.
func (m *metricsAcc) roll(limit, inFlight int, floor time.Duration) {
	sec := float64(m.interval) / 1e9
	p := m.cur
	p.T = time.Duration(m.bucketEnd)
	p.Offered /= sec
	p.Goodput /= sec
	p.Rejected /= sec
	p.Completed /= sec
	p.OverSLO /= sec
	for i := range p.Prio {
		p.Prio[i].Offered /= sec
		p.Prio[i].Goodput /= sec
		p.Prio[i].Rejected /= sec
	}
	p.Limit, p.InFlight, p.Floor = limit, inFlight, floor
	if len(m.curLat) > 0 {
		slices.Sort(m.curLat)
		p.P99 = time.Duration(quantile(m.curLat, 0.99))
	}
	m.series = append(m.series, p)
	m.cur = Point{}
	m.curLat = m.curLat[:0]
	m.bucketEnd += m.interval
}

func (m *metricsAcc) attempt(r *request) {
	r.prevAdmit, m.lastAdmit[r.prio] = m.lastAdmit[r.prio], r.start // admitted unless reject says otherwise
	m.allAtt++
	m.cur.Offered++
	m.cur.Prio[r.prio].Offered++
	if r.counted {
		m.attempts++
		m.pAttempts[r.prio]++
		if r.attempt == 0 {
			m.firsts++
		}
	}
	if r.start >= m.recoverAt {
		m.lateAtt++
	}
}

func (m *metricsAcc) reject(r *request) {
	m.lastAdmit[r.prio] = r.prevAdmit
	m.cur.Rejected++
	m.cur.Prio[r.prio].Rejected++
	if r.counted {
		m.rejects++
		m.pRejects[r.prio]++
		if m.inverted(r) {
			m.inversions++
		}
	}
	if r.start >= m.recoverAt {
		m.lateRej++
	}
}

// throttled counts an attempt the client refused locally (not sent).
func (m *metricsAcc) throttled(r *request) {
	if r.counted {
		m.local++
	}
}

func (m *metricsAcc) capHit(r *request) {
	if r.counted {
		m.capHits++
	}
}

func (m *metricsAcc) aborted(*request) {}

func (m *metricsAcc) work(r *request, w float64) {
	m.total += w
	if r.isReject {
		m.wasted += w
	}
}

func (m *metricsAcc) complete(r *request, lat int64, ontime, good bool) {
	m.cur.Completed++
	m.curLat = append(m.curLat, lat)
	if lat > m.slo {
		m.cur.OverSLO++
	}
	if good {
		m.cur.Goodput++
		m.cur.Prio[r.prio].Goodput++
	}
	if ontime {
		m.useful += r.work
		if r.counted {
			m.ontime++
		}
		if m.inc {
			m.incident(r.start+lat, lat, good)
		}
	} else {
		m.wasted += r.work
	}
	if !r.counted {
		return
	}
	m.lat = append(m.lat, lat)
	if good {
		m.good++
	}
	if ontime && r.first >= m.warm {
		m.success[r.prio]++
		m.userOK[r.user]++
	}
}

func (m *metricsAcc) fail(*request) {}

// incident counts a success that completed at t, lat after its attempt
// began (good: within the SLO), in the incident's span it falls in.
func (m *metricsAcc) incident(t, lat int64, good bool) {
	switch {
	case t >= m.incEarly && t < m.incSettled:
		m.earlyLat = append(m.earlyLat, lat)
		if good {
			m.earlyGood++
		}
	case t >= m.incSettled && t < m.incEnd:
		m.spanLat = append(m.spanLat, lat)
		if good {
			m.spanGood++
		}
	}
}

// request counts a request (a first attempt) after warm-up.
func (m *metricsAcc) request(r *request) {
	m.requests[r.prio]++
	m.userReq[r.user]++
}

// inverted reports whether refusing r is a priority inversion: an attempt
// of strictly lower priority (a larger number) was admitted within the last
// tenth of a control interval (10 ms by default: two mean service times of
// the nominal server), when r's slot could have been kept for r.
func (m *metricsAcc) inverted(r *request) bool {
	for q := r.prio + 1; q < MaxPriorities; q++ {
		if r.start-m.lastAdmit[q] <= m.invSpan {
			return true
		}
	}
	return false
}

// quantile returns the q-quantile of sorted xs (nearest rank).
func quantile(xs []int64, q float64) int64 {
	if len(xs) == 0 {
		return 0
	}
	i := int(math.Ceil(q*float64(len(xs)))) - 1
	return xs[min(max(i, 0), len(xs)-1)]
}

func (m *metricsAcc) result(s *Scenario, policy string, seed uint64, capacity float64) *Result {
	secs := (s.Duration - s.Warmup).Seconds()
	slices.Sort(m.lat)
	ms := func(ns int64) float64 { return float64(ns) / 1e6 }
	r := &Result{
		Scenario: s.Name, Policy: policy, Seed: seed,
		CapacityRPS:     capacity,
		OfferedRPS:      float64(m.firsts) / secs,
		GoodputRPS:      float64(m.good) / secs,
		P50ms:           ms(quantile(m.lat, 0.5)),
		P99ms:           ms(quantile(m.lat, 0.99)),
		P999ms:          ms(quantile(m.lat, 0.999)),
		SLOms:           ms(int64(s.SLO)),
		CapHits:         m.capHits,
		Series:          m.series,
		Requests:        m.allAtt,
		SettleIntervals: -1,
	}
	r.GoodputRatio = r.GoodputRPS / capacity
	if len(m.lat) > 0 {
		var sum float64
		for _, l := range m.lat {
			sum += float64(l)
		}
		r.MeanMs = sum / float64(len(m.lat)) / 1e6
	}
	// Served: goodput against what could have been served, interval by
	// interval: Σ goodput / Σ min(offered, capacity) after warm-up.
	var servable, gp float64
	for _, p := range m.series {
		if p.T > s.Warmup {
			servable += min(p.Offered, capacity)
			gp += p.Goodput
		}
	}
	if servable > 0 {
		r.ServedRatio = gp / servable
	}
	if m.firsts > 0 {
		r.ThroughputRatio = float64(m.ontime) / float64(m.firsts)
	}
	if m.attempts > 0 {
		r.RejectRatio = float64(m.rejects) / float64(m.attempts)
		r.InversionRatio = float64(m.inversions) / float64(m.attempts)
	}
	if m.lateAtt > 0 {
		r.LateRejectRatio = float64(m.lateRej) / float64(m.lateAtt)
	}
	if m.firsts > 0 {
		r.RetryAmp = float64(m.attempts) / float64(m.firsts)
	}
	if m.attempts+m.local > 0 {
		r.ThrottledRatio = float64(m.local) / float64(m.attempts+m.local)
	}
	if m.total > 0 {
		r.WastedRatio = m.wasted / m.total
	}
	for p := range MaxPriorities {
		if m.requests[p] == 0 {
			continue
		}
		pr := PriorityResult{
			Priority:     p,
			Offered:      float64(m.requests[p]) / secs,
			SuccessRatio: min(float64(m.success[p])/float64(m.requests[p]), 1),
		}
		if m.pAttempts[p] > 0 {
			pr.RejectRatio = float64(m.pRejects[p]) / float64(m.pAttempts[p])
		}
		r.PerPriority = append(r.PerPriority, pr)
	}
	var ratios []float64
	for u, n := range m.userReq {
		if n > 0 {
			ratios = append(ratios, min(float64(m.userOK[u])/float64(n), 1))
		}
	}
	r.Jain = jain(ratios)
	if m.firsts > 0 {
		r.LossRatio = max(0, 1-float64(m.good)/float64(m.firsts))
	}
	r.LossBound = m.lossBound
	m.server(s, r)
	m.settle(s, r)
	r.ShedStartLoad = m.shedStart(s)
	r.Pass = true
	for _, t := range s.Targets {
		if !r.applies(t.Metric) {
			r.Targets = append(r.Targets, TargetResult{Target: t.String(), Value: math.NaN(), Pass: true, NA: true})
			continue
		}
		v, ok := r.metric(t.Metric)
		pass := ok && (t.Min == nil || v >= *t.Min) && (t.Max == nil || v <= *t.Max)
		r.Targets = append(r.Targets, TargetResult{Target: t.String(), Value: v, Pass: pass})
		r.Pass = r.Pass && pass
	}
	return r
}

// server fills in each point's capacity and true floor, and the figures
// that need them: the floor estimate's error and the incident's figures.
func (m *metricsAcc) server(s *Scenario, r *Result) {
	// Changes in time order, for the floor's grace after each.
	changes := []time.Duration{0}
	for _, p := range s.Load {
		changes = append(changes, p.At)
	}
	for _, c := range s.Server.Changes {
		changes = append(changes, c.At)
	}
	if in := s.Incident; in != nil {
		changes = append(changes, in.At, in.Restore)
	}
	slices.Sort(changes)
	worst, judged := 0.0, 0
	for i := range m.series {
		p := &m.series[i]
		st := s.stateAt(p.T - s.Interval)
		p.Capacity = s.capacityAt(&st)
		end := s.stateAt(p.T - 1)
		p.FloorTrue, p.FloorMedian = s.floorAt(&end)
		if !m.hasFloor {
			continue
		}
		last := time.Duration(0)
		for _, c := range changes {
			if c < p.T {
				last = c
			}
		}
		if p.T-last < floorGrace {
			continue
		}
		judged++
		worst = max(worst, floorError(p.Floor, p.FloorTrue, p.FloorMedian))
	}
	if m.hasFloor {
		r.FloorResult = &FloorResult{FloorError: worst, FloorIntervals: judged}
	}
	if !m.inc {
		return
	}
	capOver := func(from, to int64) float64 { // requests the capacity allows over [from, to)
		var n float64
		for t := from; t < to; {
			st := s.stateAt(time.Duration(t))
			next := to
			for _, c := range s.Server.Changes {
				if int64(c.At) > t && int64(c.At) < next {
					next = int64(c.At)
				}
			}
			n += s.capacityAt(&st) * float64(next-t) / 1e9
			t = next
		}
		return n
	}
	ir := &IncidentResult{}
	if c := capOver(m.incEarly, m.incSettled); c > 0 {
		ir.EarlyGoodput = float64(m.earlyGood) / c
	}
	if c := capOver(m.incSettled, m.incEnd); c > 0 {
		ir.Goodput = float64(m.spanGood) / c
	}
	slices.Sort(m.earlyLat)
	slices.Sort(m.spanLat)
	ir.EarlyP99ms = float64(quantile(m.earlyLat, 0.99)) / 1e6
	ir.P99ms = float64(quantile(m.spanLat, 0.99)) / 1e6
	var servable, gp float64
	for _, p := range m.series {
		if from := int64(p.T - s.Interval); from >= m.incSettled && int64(p.T) <= m.incEnd {
			servable += min(p.Offered, p.Capacity)
			gp += p.Goodput
		}
	}
	if servable > 0 {
		ir.Served = gp / servable
	}
	r.IncidentResult = ir
}

// jain returns Jain's fairness index (Σx)²/(n·Σx²) of xs: 1 when all are
// equal, 1/n when one gets everything.
func jain(xs []float64) float64 {
	var s, s2 float64
	for _, x := range xs {
		s += x
		s2 += x * x
	}
	if s2 == 0 {
		return 1
	}
	return s * s / (float64(len(xs)) * s2)
}

// settle measures, for the phase that starts at s.Change (until the next
// load change or the end): the settling time in intervals — the first
// interval from which on the next two seconds always have p99 ≤ SLO and mean
// goodput within ±5% of the phase's steady state (its last half's mean) —,
// the worst interval p99, the phase's goodput, and the coefficient of
// variation of the limit over its last half.
func (m *metricsAcc) settle(s *Scenario, r *Result) {
	if s.Change == 0 {
		return
	}
	from := int(s.Change / s.Interval)
	to := len(m.series)
	for _, p := range s.Load {
		if p.At > s.Change {
			to = min(to, int(p.At/s.Interval))
			break
		}
	}
	if from >= to {
		return
	}
	ph := m.series[from:to]
	half := ph[len(ph)/2:]
	var steady float64
	var lims []float64
	for _, p := range half {
		steady += p.Goodput
		lims = append(lims, float64(p.Limit))
	}
	steady /= float64(len(half))
	// Judge each moment by the two seconds from it on (a forward window
	// smooths the Poisson noise of 100 ms buckets without blurring the
	// transient into later intervals): the window's mean goodput, and its
	// p99 — within the SLO when at most 1% of its completions were slower.
	w := max(1, int(2*time.Second/s.Interval))
	ok := func(i int) bool {
		hi := min(len(ph), i+w)
		var g, done, over float64
		for _, p := range ph[i:hi] {
			g += p.Goodput
			done += p.Completed
			over += p.OverSLO
		}
		g /= float64(hi - i)
		return over <= 0.01*done && math.Abs(g-steady) <= 0.05*steady
	}
	last := len(ph) - w // the last interval with a whole window ahead
	settled := last + 1
	for i := last; i >= 0 && ok(i); i-- {
		settled = i
	}
	if settled <= last {
		r.SettleIntervals = settled
	}
	for _, p := range ph {
		r.PeakP99ms = max(r.PeakP99ms, float64(p.P99)/1e6)
	}
	r.LimitCoV = cov(lims)
	// The limit against the optimum of the processor-sharing model, the
	// core count (fewer in flight idle cores, more only queue), from two
	// seconds after the change on.
	opt := float64(s.Server.Cores)
	inBand := func(p Point) bool { return math.Abs(float64(p.Limit)-opt) <= 0.2*opt }
	r.LimitReachS = -1
	for i, p := range ph {
		if inBand(p) {
			r.LimitReachS = float64(time.Duration(i+1)*s.Interval) / 1e9
			break
		}
	}
	near, n := 0, 0
	for _, p := range ph[min(len(ph), int(2*time.Second/s.Interval)):] {
		n++
		if inBand(p) {
			near++
		}
	}
	if n > 0 {
		r.LimitNearOpt = float64(near) / float64(n)
	}
	var g float64
	for _, p := range ph {
		g += p.Goodput
	}
	r.PhaseGoodput = g / float64(len(ph)) / r.CapacityRPS
}

// shedStart returns the load the scenario schedules (a multiple of
// capacity) at the interval where shedding begins — the first interval
// after warm-up from which the policy refuses at least 1% of attempts in at
// least 4 of the next 5 intervals —, or -1 if it never does.
func (m *metricsAcc) shedStart(s *Scenario) float64 {
	const run, need = 5, 4
	shedding := func(p Point) bool { return p.Offered > 0 && p.Rejected >= 0.01*p.Offered }
	for i := range m.series {
		start := m.series[i].T - s.Interval
		if start < s.Warmup || i+run > len(m.series) {
			continue
		}
		k := 0
		for _, p := range m.series[i : i+run] {
			if shedding(p) {
				k++
			}
		}
		if shedding(m.series[i]) && k >= need {
			return loadAt(s.Load, int64(start))
		}
	}
	return -1
}

// orInf maps a figure's "never happened" (-1) to +Inf, so that no bound is
// met by it.
func orInf(x float64) float64 {
	if x < 0 {
		return math.Inf(1)
	}
	return x
}

func cov(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	var s float64
	for _, x := range xs {
		s += x
	}
	mean := s / float64(len(xs))
	if mean <= 0 {
		return 0
	}
	var v float64
	for _, x := range xs {
		v += (x - mean) * (x - mean)
	}
	return math.Sqrt(v/float64(len(xs))) / mean
}

// applies reports whether the named figure applies to the run: a figure of
// the floor estimate does not to a policy that has none.
func (r *Result) applies(name string) bool {
	return name != "floor_error" || r.FloorResult != nil
}

// metric returns the named summary figure (a JSON field name of Result), or
// for "p<k>_success" the success ratio of priority k.
func (r *Result) metric(name string) (float64, bool) {
	switch name {
	case "goodput_ratio":
		return r.GoodputRatio, true
	case "throughput_ratio":
		return r.ThroughputRatio, true
	case "served_ratio":
		return r.ServedRatio, true
	case "phase_goodput_ratio":
		return r.PhaseGoodput, true
	case "p50_ms":
		return r.P50ms, true
	case "p99_ms":
		return r.P99ms, true
	case "p99_over_slo":
		return r.P99ms / r.SLOms, true
	case "peak_p99_over_slo":
		return r.PeakP99ms / r.SLOms, true
	case "reject_ratio":
		return r.RejectRatio, true
	case "late_reject_ratio":
		return r.LateRejectRatio, true
	case "inversion_ratio":
		return r.InversionRatio, true
	case "cap_hits":
		return float64(r.CapHits), true
	case "settle_intervals":
		if r.SettleIntervals < 0 {
			return math.Inf(1), true
		}
		return float64(r.SettleIntervals), true
	case "limit_cov":
		return r.LimitCoV, true
	case "shed_start_load":
		return orInf(r.ShedStartLoad), true
	case "limit_near_optimum":
		return r.LimitNearOpt, true
	case "limit_reach_s":
		return orInf(r.LimitReachS), true
	case "wasted_ratio":
		return r.WastedRatio, true
	case "throttled_ratio":
		return r.ThrottledRatio, true
	case "retry_amplification":
		return r.RetryAmp, true
	case "jain":
		return r.Jain, true
	case "loss_ratio":
		return r.LossRatio, true
	case "loss_bound":
		return r.LossBound, true
	case "loss_over_bound":
		return r.LossRatio - r.LossBound, true
	case "floor_error":
		if r.FloorResult == nil || r.FloorIntervals == 0 {
			return math.NaN(), false
		}
		return r.FloorError, true
	}
	if ir := r.IncidentResult; ir != nil {
		switch name {
		case "early_goodput_ratio":
			return ir.EarlyGoodput, true
		case "early_p99_ms":
			return ir.EarlyP99ms, true
		case "early_p99_over_slo":
			return ir.EarlyP99ms / r.SLOms, true
		case "incident_goodput_ratio":
			return ir.Goodput, true
		case "incident_p99_ms":
			return ir.P99ms, true
		case "incident_p99_over_slo":
			return ir.P99ms / r.SLOms, true
		case "incident_served_ratio":
			return ir.Served, true
		}
	}
	var k int
	if n, _ := fmt.Sscanf(name, "p%d_success", &k); n == 1 {
		for _, p := range r.PerPriority {
			if p.Priority == k {
				return p.SuccessRatio, true
			}
		}
	}
	return math.NaN(), false
}
