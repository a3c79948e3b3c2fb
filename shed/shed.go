// Package shed is sluice's priority load shedder: when the process is
// saturated it drops the least important work first, consistently per user,
// and without flapping.
//
// A Shedder sits in front of an adaptive gate (adaptive.Limiter). Every
// request has a Priority on the SRE book's criticality ladder and, optionally,
// a user; together they give a level,
//
//	level = priority · Cohorts + cohort(user)
//
// where cohort(user) is a hash of the user id that is re-drawn every
// rotation period, so a shed user is shed for all of their requests (not half
// of every session), and not forever. Requests at or above the cutoff level
// are refused at once, cheaply; the others try the gate. The cutoff follows
// the gate's saturation: it tightens fast when the gate refuses requests the
// shedder let through, and relaxes slowly once the gate has room again
// (hysteresis), so lower levels are always refused before higher ones.
package shed

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice/adaptive"
	"github.com/sluicehq/sluice/clock"
	"github.com/sluicehq/sluice/metrics"
)

// Priority is a request's criticality; lower values are more important.
type Priority uint8

// The criticality ladder of the SRE book.
const (
	// CriticalPlus: the most important traffic; shed last, and its failure
	// is user-visible and serious.
	CriticalPlus Priority = iota
	// Critical: the default for user-facing requests.
	Critical
	// SheddablePlus: batch or background work that may be retried later.
	SheddablePlus
	// Sheddable: best-effort work, shed first.
	Sheddable
	// Priorities is the number of priorities.
	Priorities
)

var priorityNames = [...]string{"critical_plus", "critical", "sheddable_plus", "sheddable"}

// String returns the priority's snake-case name.
func (p Priority) String() string {
	if p < Priorities {
		return priorityNames[p]
	}
	return fmt.Sprintf("Priority(%d)", uint8(p))
}

// Cohorts is the number of user cohorts within a priority.
const Cohorts = 128

// levels is the number of distinct levels.
const levels = int(Priorities) * Cohorts

// ErrShed is returned by Acquire when a request is shed; it wraps
// adaptive.ErrLimitExceeded, so code that handles the gate's refusals handles
// it too.
var ErrShed = fmt.Errorf("%w: shed (priority too low for the current load)", adaptive.ErrLimitExceeded)

// Decision says why a request was refused and when to come back.
type Decision struct {
	// Admitted reports whether a token was granted.
	Admitted bool
	// Shed is true when the request was refused for its level (as opposed to
	// the gate being full).
	Shed bool
	// RetryAfter is a hint for the client: the shedder's relaxation time.
	RetryAfter time.Duration
}

// Shedder admits requests by priority in front of an adaptive gate. It is
// safe for concurrent use and starts no goroutine: its control loop runs on
// the request that finds the interval due.
type Shedder struct {
	gate     *adaptive.Limiter
	clk      clock.Clock
	since    clock.Elapsed
	epoch    time.Time
	interval int64 // ns
	rotation int64 // ns; 0: no rotation
	tighten  float64
	relax    float64
	reserve  float64
	obs      metrics.ShedObserver // nil: report nothing
	sat      func() bool          // local saturation signal; nil: none

	cutoff  atomic.Int64 // levels below it may try the gate
	nextAt  atomic.Int64 // ns since epoch when the control loop is due
	busy    atomic.Bool
	arrived [levels]atomic.Int64 // arrivals per level in this interval
	tried   atomic.Int64         // arrivals below the cutoff
	refused atomic.Int64         // of which the gate refused
	peak    atomic.Int64         // most in flight seen at an admission this interval
	rate    float64              // target refusal rate; guarded by busy
	last    int64                // ns since epoch of the last update; guarded by busy

	// The reserve (WithReserve; unused without it).
	admitted  [Priorities]atomic.Int64  // admissions per priority in this interval
	seen      atomic.Uint32             // bit p: priority p arrived in this interval
	aboveAt   [Priorities]int64         // ns since epoch + 1 when work above p last arrived; 0: never; guarded by busy
	need      [Priorities]atomic.Uint64 // room for the demand above each priority (float64 bits; see demand)
	critical  atomic.Int64              // CriticalPlus and Critical requests refused in this interval
	guard     atomic.Uint64             // the guard g in [0, 1] (float64 bits; see reserved)
	guardNow  float64                   // g as the control loop last set it; guarded by busy
	holdUntil int64                     // ns since epoch until which g stays 1; guarded by busy
}

// Option configures a Shedder.
type Option func(*config)

type config struct {
	clock    clock.Clock
	interval time.Duration
	rotation time.Duration
	tighten  float64
	relax    float64
	reserve  float64
	observer metrics.ShedObserver
	nilObs   bool
	sat      func() bool
	nilSat   bool
}

// WithClock sets the clock (default clock.System()); give it the gate's.
func WithClock(c clock.Clock) Option { return func(cfg *config) { cfg.clock = c } }

// WithInterval sets how often the cutoff is revised (default 100ms).
func WithInterval(d time.Duration) Option { return func(cfg *config) { cfg.interval = d } }

// WithSaturation adds a local saturation signal besides the gate's: sat is
// called once per interval (from the request that revises the cutoff, so it
// should take microseconds, not block) and reports whether the process
// itself is saturated — its CPU, not a dependency. While it is, the shedder
// sheds a tenth more of the traffic each interval even if the gate has not
// refused anyone yet, and never relaxes. Without it, a gate full of requests
// waiting on a slow dependency and a gate full because the process is out
// of CPU look the same; SchedulerLatency gives the usual signal.
func WithSaturation(sat func() bool) Option {
	return func(cfg *config) {
		if sat == nil {
			cfg.nilSat = true
		}
		cfg.sat = sat
	}
}

// WithCohortRotation sets how often users are re-drawn into cohorts (default
// 1 minute; 0 keeps a user in one cohort forever).
func WithCohortRotation(d time.Duration) Option { return func(cfg *config) { cfg.rotation = d } }

// WithTighten sets how fast the refusal target rises: each interval in which
// the gate refused requests the shedder let through, the target refusal rate
// grows by tighten × the refused share of the traffic (default 1: at once).
func WithTighten(f float64) Option { return func(cfg *config) { cfg.tighten = f } }

// WithRelax sets how fast the refusal target falls once the gate has room:
// by at least this much per interval, and at least a tenth of the target
// (default 0.01: at the default interval, from shedding 70% to none in about
// 3 s).
func WithRelax(f float64) Option { return func(cfg *config) { cfg.relax = f } }

// WithReserve keeps a share of the gate's limit for CriticalPlus and
// Critical: SheddablePlus is refused while in-flight is at or above
// (1 − share)·limit, and Sheddable already at half that, so that whenever
// SheddablePlus is refused, Sheddable is too (no inversion); and a twentieth
// of the share is kept for CriticalPlus alone, so that Critical work cannot
// take the very last slots. The full share is kept from the start and
// whenever critical work was refused while sheddable work was admitted (for
// 30 s at least); once the gate has had room for a while it is lifted
// slowly down to the room the critical work's recent demand needs, so that
// at low load, where the gate's limit follows the demand, sheddable work is
// not refused (see reserved). Default 0; Stripe keeps 0.2.
func WithReserve(share float64) Option { return func(cfg *config) { cfg.reserve = share } }

// WithObserver reports every decision of TryAcquire and Acquire to o, as a
// metrics.ShedDecision and the priority's name (see metrics.ShedObserver).
// Reporting allocates nothing. The default reports nothing; nil is an error.
func WithObserver(o metrics.ShedObserver) Option {
	return func(cfg *config) { cfg.observer, cfg.nilObs = o, o == nil }
}

// New returns a Shedder in front of gate.
func New(gate *adaptive.Limiter, opts ...Option) (*Shedder, error) {
	cfg := config{clock: clock.System(), interval: 100 * time.Millisecond, rotation: time.Minute, tighten: 1, relax: 0.01}
	for _, o := range opts {
		if o != nil {
			o(&cfg)
		}
	}
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf("sluice/shed: "+format, args...)) }
	if gate == nil {
		bad("New(nil): a gate is required")
	}
	if cfg.clock == nil {
		bad("WithClock(nil)")
	}
	if cfg.interval <= 0 {
		bad("interval %v: must be positive", cfg.interval)
	}
	if cfg.rotation < 0 {
		bad("cohort rotation %v: must not be negative", cfg.rotation)
	}
	if !(cfg.tighten > 0 && cfg.tighten <= 10) {
		bad("tighten %v: must be in (0, 10]", cfg.tighten)
	}
	if !(cfg.relax > 0 && cfg.relax <= 1) {
		bad("relax %v: must be in (0, 1]", cfg.relax)
	}
	if !(cfg.reserve >= 0 && cfg.reserve < 1) {
		bad("reserve %v: must be in [0, 1)", cfg.reserve)
	}
	if cfg.nilObs {
		bad("WithObserver(nil): pass an observer or omit the option")
	}
	if cfg.nilSat {
		bad("WithSaturation(nil): pass a signal (e.g. SchedulerLatency) or omit the option")
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	s := &Shedder{
		gate: gate, clk: cfg.clock, interval: int64(cfg.interval), rotation: int64(cfg.rotation),
		tighten: cfg.tighten, relax: cfg.relax, reserve: cfg.reserve, obs: cfg.observer, sat: cfg.sat,
	}
	s.since = clock.ElapsedOf(cfg.clock)
	s.epoch = cfg.clock.Now()
	s.cutoff.Store(int64(levels))
	s.nextAt.Store(s.interval)
	// No demand above any priority is known yet: no reserve until more
	// important work arrives (then the full share, until the gate has
	// shown room).
	for p := range s.need {
		s.need[p].Store(math.Float64bits(-1))
	}
	s.guardNow = 1
	s.guard.Store(math.Float64bits(1))
	return s, nil
}

// Level returns the level of a request of priority p from user at the
// current time: p·Cohorts + cohort(user).
func (s *Shedder) Level(p Priority, user uint64) int {
	return s.level(p, user, int64(s.since.Since(s.epoch)))
}

func (s *Shedder) level(p Priority, user uint64, now int64) int {
	p = min(p, Priorities-1)
	epoch := uint64(0)
	if s.rotation > 0 {
		epoch = uint64(now / s.rotation)
	}
	// Cohort: a hash of the user and the rotation epoch, so a user keeps
	// their cohort (and so their fate) for a whole epoch.
	return int(p)*Cohorts + int(mix(user^epoch*0x9E3779B97F4A7C15)%Cohorts)
}

// mix is the splitmix64 finaliser: a fast, well-spread hash of x.
func mix(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xBF58476D1CE4E5B9
	x ^= x >> 27
	x *= 0x94D049BB133111EB
	return x ^ x>>31
}

// An exporter reads the cutoff through metrics.ShedState.
var _ metrics.ShedState = (*Shedder)(nil)

// Cutoff returns the current cutoff level: requests at or above it are shed.
// Levels() means nothing is shed.
func (s *Shedder) Cutoff() int { return int(s.cutoff.Load()) }

// Clock returns the clock the shedder reads (WithClock).
func (s *Shedder) Clock() clock.Clock { return s.clk }

// Levels returns the number of levels, Priorities·Cohorts.
func Levels() int { return levels }

// TryAcquire admits a request of priority p from user, never waiting. It
// allocates nothing, on admission or refusal, also when it reports the
// decision to an observer (WithObserver). A priority past Sheddable is
// treated as Sheddable.
func (s *Shedder) TryAcquire(p Priority, user uint64) (adaptive.Token, Decision) {
	p = min(p, Priorities-1)
	lvl, cut, shed := s.screen(p, user)
	s.arrive(p, lvl, cut)
	if shed {
		return s.refuse(p, shedByPriority)
	}
	s.tried.Add(1)
	tok, ok := s.gate.TryAcquire()
	if !ok {
		return s.gateRefused(p)
	}
	if s.reserve > 0 {
		s.admitted[p].Add(1)
	}
	if n := int64(s.gate.InFlight()); n > s.peak.Load() {
		s.peak.Store(n) // racy max: a lost update only delays relaxing
	}
	if s.obs != nil {
		s.obs.ShedDecision(metrics.ShedAdmitted, priorityNames[p])
	}
	return tok, Decision{Admitted: true}
}

// PassFront reports whether a request of priority p from user may go on to
// TryAcquire or Acquire: false, with the decision, when TryAcquire would
// refuse it before it takes a token, shed for its level or refused by the
// gate's front limit (adaptive.Limiter.PassFront). It takes no token and
// counts nothing for a request it lets pass, so that request must still
// call TryAcquire or Acquire; a refusal is counted and reported, by the
// shedder and by the gate, exactly as TryAcquire's would be. A transport
// that can refuse before it spends anything on a request calls it there
// (interceptors.ShedInterceptors's Tap: gRPC's tap handle). It allocates
// nothing.
func (s *Shedder) PassFront(p Priority, user uint64) (Decision, bool) {
	p = min(p, Priorities-1)
	lvl, cut, shed := s.screen(p, user)
	if shed {
		s.arrive(p, lvl, cut)
		_, d := s.refuse(p, shedByPriority)
		return d, false
	}
	if s.gate.PassFront() {
		return Decision{}, true
	}
	s.arrive(p, lvl, false)
	s.tried.Add(1)
	_, d := s.gateRefused(p)
	return d, false
}

// screen returns the level of a request of priority p (at most Sheddable)
// from user and whether the shedder sheds it before the gate: cut, its
// level is at or above the cutoff, or the reserve keeps the room it asks
// for for more critical work. It runs the control loop when an interval is
// due, and counts nothing (see arrive).
func (s *Shedder) screen(p Priority, user uint64) (lvl int, cut, shed bool) {
	now := int64(s.since.Since(s.epoch))
	if now >= s.nextAt.Load() {
		s.update(now)
	}
	lvl = s.level(p, user, now)
	if int64(lvl) >= s.cutoff.Load() {
		return lvl, true, true
	}
	return lvl, false, s.reserve > 0 && p >= Critical && s.reserved(p)
}

// arrive counts the arrival of a request of priority p at level lvl, and
// that p arrived in this interval unless the cutoff shed it (cut; the
// reserve reads only the priorities above p, so marking p after screen
// decided is the same as before).
func (s *Shedder) arrive(p Priority, lvl int, cut bool) {
	s.arrived[lvl].Add(1)
	if s.reserve > 0 && !cut {
		if bit := uint32(1) << p; s.seen.Load()&bit == 0 {
			s.seen.Or(bit)
		}
	}
}

// gateRefused counts and reports a request of priority p that the gate
// refused.
func (s *Shedder) gateRefused(p Priority) (adaptive.Token, Decision) {
	s.refused.Add(1)
	return s.refuse(p, gateFull)
}

// reserved reports whether the reserve refuses a request of priority p
// (Critical, SheddablePlus or Sheddable). The room kept free above
// SheddablePlus and Sheddable lies between the room the demand of the
// priorities above them needs (need, see demand) and their full share of the
// limit, as the guard g says (see guardUpdate):
//
//	Critical       in-flight ≥ limit − reserve·limit/20
//	SheddablePlus  in-flight ≥ limit − keep(reserve)
//	Sheddable      in-flight ≥ limit − keep((1 + reserve)/2)
//	keep(share)    = max(g·share·limit, min(share·limit, need[p]))
//
// With g = 1 (after critical work was refused while sheddable work was
// admitted) SheddablePlus may fill only (1 − reserve)·limit and Sheddable
// half that; with g = 0 (the gate has had room for a while) only the room
// the critical work's demand needs is kept, so at low load, where the
// gate's limit follows the demand, sheddable work is not refused. Since
// need[Sheddable] ≥ need[SheddablePlus], whenever SheddablePlus is
// refused, Sheddable is too. Nothing is kept above p while no more important
// work has arrived for guardHold (need[p] < 0), nor in this interval: a
// reserve is room for other work, and with none coming, p gets the whole
// gate. Once more important work arrives after none, the full share is kept
// until the next interval measures its demand.
func (s *Shedder) reserved(p Priority) bool {
	need := math.Float64frombits(s.need[p].Load())
	if need < 0 {
		if s.seen.Load()&(1<<p-1) == 0 {
			return false
		}
		need = math.Inf(1)
	}
	limit, n := float64(s.gate.Limit()), float64(s.gate.InFlight())
	share := s.reserve
	switch p {
	case Critical:
		// A full gate refuses by itself (and says so: gate full).
		return n >= limit-s.reserve*limit*topShare && n < limit
	case Sheddable:
		share = (1 + s.reserve) / 2
	}
	g := math.Float64frombits(s.guard.Load())
	keep := max(g*share*limit, min(share*limit, need))
	return n >= limit-keep
}

// refusedCritical counts a refusal of a request of priority p if it is
// CriticalPlus or Critical work and a reserve is kept; if sheddable work was
// admitted in this interval, the guard goes up to 1 at once (the control
// loop then holds it there: see guardUpdate).
func (s *Shedder) refusedCritical(p Priority) {
	if s.reserve == 0 || p > Critical {
		return
	}
	s.critical.Add(1)
	if math.Float64frombits(s.guard.Load()) < 1 && s.admitted[SheddablePlus].Load()+s.admitted[Sheddable].Load() > 0 {
		s.guard.Store(math.Float64bits(1))
	}
}

// topShare is the part of the reserve kept for CriticalPlus alone.
const topShare = 0.05

// refusal is why the shedder refused a request, in its own words: shed by
// priority (Decision.Shed: its level is at or above the cutoff, or it asked
// for capacity held in reserve for more critical work), or let through to a
// gate that was full. An observer sees it as a metrics.ShedDecision.
type refusal uint8

const (
	shedByPriority refusal = iota
	gateFull
)

// label is the refusal as the observer's label.
func (r refusal) label() metrics.ShedDecision {
	if r == shedByPriority {
		return metrics.ShedRefused
	}
	return metrics.ShedGateFull
}

// refuse counts a refusal of a request of priority p (at most Sheddable)
// against the reserve (refusedCritical), reports it and returns its
// decision.
func (s *Shedder) refuse(p Priority, r refusal) (adaptive.Token, Decision) {
	s.refusedCritical(p)
	if s.obs != nil {
		s.obs.ShedDecision(r.label(), priorityNames[p])
	}
	return adaptive.Token{}, Decision{Shed: r == shedByPriority, RetryAfter: s.retryAfter()}
}

// retryAfter is the hint given with a refusal: the time the cutoff needs to
// relax by one priority at the current settings, at least one interval.
func (s *Shedder) retryAfter() time.Duration {
	return time.Duration(float64(s.interval) * max(1, 0.25/s.relax))
}

// relaxShare is the least share of the refusal target given up per interval
// with room: after a surge the shedder lets traffic back in within seconds,
// a tenth at a time, not all at once.
const relaxShare = 0.1

// headroom is the share of the gate's limit below which the gate is taken to
// have room, and the shedder relaxes.
const headroom = 0.85

// saturationStep is the share of the traffic shed more per interval while
// the local saturation signal (WithSaturation) says the process is
// saturated and the gate refused no one.
const saturationStep = 0.1

// update revises the cutoff once per interval:
//
//	refused share  r_i = refused / arrivals          (this interval, at the gate)
//	target rate    R  ← R + tighten·r_i·(1 − R)     if the gate refused anyone
//	               R  ← R + tighten·0.1·(1 − R)     else if the process is saturated (WithSaturation)
//	               R  ← max(0, R − max(relax, R/10)) if in-flight stayed below 85% of the limit
//	               R  unchanged                      otherwise (hysteresis)
//	               then R ← max(0, R − max(relax, R/10)) once for every
//	               whole interval since the last update in which nothing
//	               arrived (an idle gate has room)
//	cutoff            = the level below which a share 1 − R of this
//	                    interval's arrivals lie (the CDF of their levels);
//	                    none when they were all of one priority (the gate
//	                    alone refuses then) or after an idle interval
//
// so the lowest levels go first, the cutoff tightens within an interval
// of saturation but relaxes slowly, an idle spell relaxes it as much as the
// same time with room would, and a service whose traffic is all of one
// priority is refused by the gate alone, as if there were no shedder.
func (s *Shedder) update(now int64) {
	if !s.busy.CompareAndSwap(false, true) {
		return
	}
	defer s.busy.Store(false)
	if now < s.nextAt.Load() {
		return
	}
	s.nextAt.Store(now + s.interval)
	var counts [levels]int64
	var total int64
	for i := range s.arrived {
		counts[i] = s.arrived[i].Swap(0)
		total += counts[i]
	}
	tried, refused, peak := s.tried.Swap(0), s.refused.Swap(0), s.peak.Swap(0)
	s.seen.Store(0)
	if s.reserve > 0 {
		s.guardUpdate(now, s.demand(&counts, peak, now), peak)
	}
	saturated := s.sat != nil && s.sat()
	switch {
	case saturated && !(refused > 0 && tried > 0):
		// The process is out of CPU before the gate noticed: shed more.
		s.rate += s.tighten * saturationStep * (1 - s.rate)
	case refused > 0 && tried > 0:
		share := float64(refused) / float64(total)
		s.rate += s.tighten * share * (1 - s.rate)
	case float64(peak) < headroom*float64(s.gate.Limit()):
		s.rate = s.relaxed(s.rate)
	default:
		// The gate came close to full without refusing: hold (the band
		// between headroom and full is the hysteresis).
	}
	s.rate = min(s.rate, 1)
	// The counts were of the last interval with traffic. The intervals
	// since, in which nothing arrived, ran no update: the gate had room in
	// them, so relax once for each (time, not traffic, moves the state),
	// and let the current interval's arrivals in (nothing arrived in the
	// last one).
	idle := min(max((now-s.last)/s.interval-1, 0), idleSteps)
	for j := range idle {
		s.rate = s.relaxed(s.rate)
		if s.reserve > 0 && s.last+(j+2)*s.interval >= s.holdUntil {
			s.guardNow = s.relaxed(s.guardNow)
			s.guard.Store(math.Float64bits(s.guardNow))
		}
	}
	s.last = now
	if total == 0 || s.rate == 0 || idle > 0 {
		s.cutoff.Store(int64(levels))
		return
	}
	keep := int64(math.Round((1 - s.rate) * float64(total)))
	var seen int64
	cut := levels
	for i, c := range counts {
		if seen+c > keep {
			cut = i
			break
		}
		seen += c
	}
	// Traffic of one priority only is never shed: shedding makes room for
	// more important work, and with none arriving the gate alone decides
	// (so one priority class costs nothing over the gate).
	if one := onePriority(&counts); one >= 0 {
		cut = levels
	}
	s.cutoff.Store(int64(cut))
}

// onePriority returns the priority of all the counted arrivals when they
// are all of one, else −1.
func onePriority(counts *[levels]int64) int {
	p := -1
	for i, c := range counts {
		if c == 0 {
			continue
		}
		if q := i / Cohorts; p < 0 {
			p = q
		} else if q != p {
			return -1
		}
	}
	return p
}

// relaxed is x after one interval of relaxing: down by max(relax, x/10).
func (s *Shedder) relaxed(x float64) float64 {
	return max(0, x-max(s.relax, x*relaxShare))
}

// idleSteps bounds the intervals relaxed at once after an idle gap: enough
// to relax fully from any state (1/relax ≤ 100 steps at the least relax of
// 0.01 ... a tenth at a time reaches 0 sooner).
const idleSteps = 1000

// demandShare is the room kept above a sheddable priority while the guard
// is down, as a share of the demand in flight of the priorities above it:
// small enough that at low load the in-flight can reach ¾ of a
// demand-sized limit (where the gate grows it), large enough for the
// critical work's own swings.
const demandShare = 0.4

// guardHold is how long the guard stays at 1 after critical work was refused
// while sheddable work was admitted, before it relaxes: a sheddable class
// that hurt the critical work (say its dependency slowed down, so each of
// its requests holds a slot many times longer) is let back in only after
// this, and then gradually.
const guardHold = 30 * time.Second

// demand revises, once per interval, the room the reserve keeps for the
// demand of the priorities above each priority p, by Little's law (the
// requests in flight are the admission rate times the time in the gate):
//
//	A_<p     arrivals of the priorities above p         (this interval)
//	N        admissions                                 (this interval)
//	D_<p     = peak · A_<p / N                          their demand in flight
//	need[p]  = demandShare · D_<p                       (+∞ if N = 0 < A_<p)
//	         = need[p] as before                        if A_<p = 0 but work above p
//	                                                     arrived within guardHold
//	         = −1 (no reserve)                          if none arrived within guardHold
//
// Arrivals, not admissions, of the priorities above: critical work refused
// is demand too. It returns the sheddable admissions of the interval.
func (s *Shedder) demand(counts *[levels]int64, peak, now int64) (sheddable int64) {
	var arrived, admitted [Priorities]int64
	var total int64
	for p := range Priorities {
		for _, c := range counts[int(p)*Cohorts : int(p+1)*Cohorts] {
			arrived[p] += c
		}
		admitted[p] = s.admitted[p].Swap(0)
		total += admitted[p]
	}
	var above int64
	for p := range Priorities {
		need := -1.0
		switch {
		case above == 0 && s.aboveAt[p] > 0 && now-s.aboveAt[p] < int64(guardHold):
			// Nothing above arrived this interval, but it did lately:
			// keep its room as last measured.
			need = math.Float64frombits(s.need[p].Load())
		case above == 0:
		case total > 0:
			need = demandShare * float64(peak) * float64(above) / float64(total)
		case above > 0:
			need = math.Inf(1)
		}
		s.need[p].Store(math.Float64bits(need))
		if above > 0 {
			s.aboveAt[p] = now + 1
		}
		above += arrived[p]
	}
	return admitted[SheddablePlus] + admitted[Sheddable]
}

// guardUpdate revises the reserve's guard g once per interval:
//
//	g ← 1, held for guardHold  if critical work was refused while sheddable work was admitted
//	g unchanged                 while held
//	g ← max(0, g − max(relax, g/10))  else if in-flight stayed below 85% of the limit
//	g unchanged                 otherwise
//
// so the full reserve comes back within the interval in which sheddable
// work crowds out critical work, and is lifted slowly (as the cutoff
// relaxes), and only after a hold, once the gate has room. It starts at 1.
func (s *Shedder) guardUpdate(now, sheddable, peak int64) {
	switch critical := s.critical.Swap(0); {
	case critical > 0 && sheddable > 0 && s.guardNow < 1:
		s.guardNow = 1
		s.holdUntil = now + int64(guardHold)
	case now < s.holdUntil:
	case float64(peak) < headroom*float64(s.gate.Limit()):
		s.guardNow = s.relaxed(s.guardNow)
	}
	s.guard.Store(math.Float64bits(s.guardNow))
}

// Acquire is TryAcquire with an error: ErrShed when the request was shed for
// its level, the gate's adaptive.ErrLimitExceeded when the gate was full. It
// does not wait (the shedder sits in front of the gate's queue, if any). A
// context that has already ended gives its error and no decision, so nothing
// is reported to the observer.
func (s *Shedder) Acquire(ctx context.Context, p Priority, user uint64) (adaptive.Token, error) {
	if err := ctx.Err(); err != nil {
		return adaptive.Token{}, err
	}
	tok, d := s.TryAcquire(p, user)
	switch {
	case d.Admitted:
		return tok, nil
	case d.Shed:
		return adaptive.Token{}, ErrShed
	default:
		return adaptive.Token{}, adaptive.ErrLimitExceeded
	}
}
