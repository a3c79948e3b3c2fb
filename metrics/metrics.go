// Package metrics defines the observer hooks through which sluice's guards
// report what they decide: its one job is the contract between a guard and
// an exporter. It holds interfaces and the labels they carry only; adapters
// for Prometheus (metrics/prom) and go-metrics (metrics/gometrics) implement
// them, so a guard never imports a metrics library and a new adapter needs
// no change to any guard.
//
// The labels (GateDecision, GateRelease, ShedDecision, RateOutcome,
// StoreOutcome) are how an observer sees a guard's events, not the guard's
// own vocabulary: each guard decides in its own terms (a Token is released
// with Success, Dropped or Ignore; a shed.Decision is Shed or not) and turns
// them into these labels when it reports. Exporters read the state of a
// guard through GateState and ShedState, never through the guard's package,
// so no import runs from metrics back up to a guard.
//
// Observers are called synchronously on the request path. They must be safe
// for concurrent use and cheap: count, do not block.
package metrics

import "time"

// GateDecision is what an adaptive gate did with one attempt to acquire a
// token.
type GateDecision uint8

// The decisions a gate reports.
const (
	// Admitted: a token was granted, at once or after waiting in the queue.
	Admitted GateDecision = iota
	// Rejected: the gate was full (or callers were queued ahead) and the
	// caller did not wait: TryAcquire, or Acquire without a queue.
	Rejected
	// QueueFull: the gate was full and so was its wait queue.
	QueueFull
	// DeadlineUnmeetable: the caller's deadline would pass before the
	// request could be admitted and served, so it was refused at once.
	DeadlineUnmeetable
	// QueueTimeout: the caller waited longer than the queue allows.
	QueueTimeout
	// Canceled: the caller's context ended while it waited.
	Canceled
)

var gateDecisionNames = [...]string{"admitted", "rejected", "queue_full", "deadline_unmeetable", "queue_timeout", "canceled"}

// String returns the decision's name in snake case, fit for a metric label.
func (d GateDecision) String() string {
	if int(d) < len(gateDecisionNames) {
		return gateDecisionNames[d]
	}
	return "unknown"
}

// GateRelease is how a token was given back.
type GateRelease uint8

// The ways a token is released.
const (
	// Success: the request completed; its round-trip time is a sample.
	Success GateRelease = iota
	// Dropped: the request timed out or was refused downstream; a
	// congestion signal, never a latency sample.
	Dropped
	// Ignored: the slot was released without any sample (for example the
	// client went away).
	Ignored
)

var gateReleaseNames = [...]string{"success", "dropped", "ignored"}

// String returns the release kind's name in snake case, fit for a metric label.
func (r GateRelease) String() string {
	if int(r) < len(gateReleaseNames) {
		return gateReleaseNames[r]
	}
	return "unknown"
}

// GateObserver receives the events of an adaptive gate (adaptive.Limiter).
// Embed GateBase to implement only the methods you need; methods added to
// this interface later will come with a no-op in GateBase.
type GateObserver interface {
	// GateDecision reports the outcome of one acquisition. partition is the
	// partition's name ("" when the gate has none or the caller named none);
	// wait is the time spent in the queue (0 when the caller did not queue).
	GateDecision(d GateDecision, partition string, wait time.Duration)
	// GateRelease reports a released token; rtt is the time the token was
	// held (reported for every kind, but only Success feeds the algorithm).
	GateRelease(r GateRelease, rtt time.Duration)
	// GateLimit reports a change of the concurrency limit.
	GateLimit(old, new int)
}

// GateBase implements GateObserver with methods that do nothing.
type GateBase struct{}

// GateDecision does nothing.
func (GateBase) GateDecision(GateDecision, string, time.Duration) {}

// GateRelease does nothing.
func (GateBase) GateRelease(GateRelease, time.Duration) {}

// GateLimit does nothing.
func (GateBase) GateLimit(int, int) {}

// RateDecision is one decision of a per-key rate limiter (package
// ratelimit), as reported to a RateObserver. Keys are never reported, so
// metric labels stay bounded.
type RateDecision struct {
	// Cost is the request's cost (n of AllowN).
	Cost int
	// Allowed reports whether the request was admitted. In shadow mode it is
	// always true and Shadowed says whether the limit would have refused.
	Allowed  bool
	Shadowed bool
	// Limit is the limit's size (its burst) and Remaining what is left of it
	// after the decision.
	Limit, Remaining int
	// RetryAfter is, for a refusal, the time until the request would be
	// admitted (0 when admitted).
	RetryAfter time.Duration
	// Degraded reports that the store could not decide (a Redis down or
	// slow) and the decision is its failure policy's (ratelimit.Result.Degraded).
	Degraded bool
}

// RateObserver receives the decisions of rate limiters and concurrency
// limiters of package ratelimit (its WithObserver). Embed RateBase to
// implement only the methods you need; methods added to this interface later
// will come with a no-op in RateBase.
type RateObserver interface {
	// RateDecision reports one decision of the limiter named limiter. For
	// tiers, every tier reports its own decision.
	RateDecision(limiter string, d RateDecision)
	// LeaseExpired reports a concurrency lease that was neither released nor
	// renewed in time and whose slot was taken back.
	LeaseExpired(limiter string)
}

// RateBase implements RateObserver with methods that do nothing.
type RateBase struct{}

// RateDecision does nothing.
func (RateBase) RateDecision(string, RateDecision) {}

// LeaseExpired does nothing.
func (RateBase) LeaseExpired(string) {}

// ShedDecision is what a priority load shedder (package shed) did with one
// request.
type ShedDecision uint8

// The decisions a shedder reports.
const (
	// ShedAdmitted: the request passed the shedder and the gate granted a
	// token.
	ShedAdmitted ShedDecision = iota
	// ShedRefused: the request was shed for its level: at or above the
	// shedder's cutoff, or a low priority asking for capacity held in
	// reserve for critical work. The gate was not consulted.
	ShedRefused
	// ShedGateFull: the shedder let the request through but the gate behind
	// it was full.
	ShedGateFull
)

var shedDecisionNames = [...]string{"admitted", "shed", "gate_full"}

// String returns the decision's name in snake case, fit for a metric label:
// "admitted", "shed" or "gate_full".
func (d ShedDecision) String() string {
	if int(d) < len(shedDecisionNames) {
		return shedDecisionNames[d]
	}
	return "unknown"
}

// ShedObserver receives the decisions of a priority load shedder
// (shed.Shedder, its WithObserver). Embed ShedBase to implement only the
// methods you need; methods added to this interface later will come with a
// no-op in ShedBase.
type ShedObserver interface {
	// ShedDecision reports the outcome of one request. priority is the
	// name of the request's priority, one of the four rungs of the
	// criticality ladder ("critical_plus", "critical", "sheddable_plus",
	// "sheddable"), so it is a bounded label. Users and cohorts are never
	// reported.
	ShedDecision(d ShedDecision, priority string)
}

// ShedBase implements ShedObserver with methods that do nothing.
type ShedBase struct{}

// ShedDecision does nothing.
func (ShedBase) ShedDecision(ShedDecision, string) {}

// RateOutcome is a rate-limit decision as a metric label: admitted, refused,
// or admitted in shadow mode although the limit would have refused it.
type RateOutcome uint8

// The outcomes of a rate-limit decision.
const (
	RateAllowed RateOutcome = iota
	RateRefused
	RateShadowRefused
)

var rateOutcomeNames = [...]string{"allowed", "refused", "shadow_refused"}

// String returns the outcome's name in snake case, fit for a metric label.
func (o RateOutcome) String() string {
	if int(o) < len(rateOutcomeNames) {
		return rateOutcomeNames[o]
	}
	return "unknown"
}

// Outcome returns the decision's outcome label.
func (d RateDecision) Outcome() RateOutcome {
	switch {
	case d.Shadowed:
		return RateShadowRefused
	case !d.Allowed:
		return RateRefused
	}
	return RateAllowed
}

// The number of values of each kind of event, for adapters that keep one
// metric per value in an array. They grow when a value is added.
const (
	GateDecisions = int(Canceled) + 1
	GateReleases  = int(Ignored) + 1
	ShedDecisions = int(ShedGateFull) + 1
	RateOutcomes  = int(RateShadowRefused) + 1
	StoreOutcomes = int(StoreBreakerOpen) + 1
)

// StoreOutcome is how one call of a rate-limit store to its backend (Redis)
// ended, or why the store did not call it.
type StoreOutcome uint8

// The outcomes of a store's call.
const (
	// StoreOK: the backend answered.
	StoreOK StoreOutcome = iota
	// StoreFailed: the call failed (a refused connection, an error reply,
	// an answer the store could not read).
	StoreFailed
	// StoreTimedOut: no answer within the store's timeout.
	StoreTimedOut
	// StoreCanceled: the call was given up before it ended (the caller's
	// context ended, or the store abandoned its calls when the backend
	// refused a connection).
	StoreCanceled
	// StoreBreakerOpen: the store's circuit breaker was open, so it did not
	// call the backend (reported with StoreDegraded only).
	StoreBreakerOpen
)

var storeOutcomeNames = [...]string{"ok", "failed", "timed_out", "canceled", "breaker_open"}

// String returns the outcome's name in snake case, fit for a metric label.
func (o StoreOutcome) String() string {
	if int(o) < len(storeOutcomeNames) {
		return storeOutcomeNames[o]
	}
	return "unknown"
}

// StoreObserver receives the calls of a rate-limit store to its backend and
// the decisions its failure policy made (ratelimit/redisstore's
// WithObserver). Embed StoreBase to implement only the methods you need;
// methods added to this interface later will come with a no-op in
// StoreBase.
type StoreObserver interface {
	// StoreCall reports one call to the backend: op names what it did (for
	// Redis "decide", "lease_acquire", "lease_release", "lease_renew",
	// "lease_count"), outcome how it ended and d how long it took.
	StoreCall(op string, outcome StoreOutcome, d time.Duration)
	// StoreDegraded reports n requests the store's failure policy decided
	// (policy: "fail_open", "fail_closed" or "fail_local") because the
	// backend could not: cause is the failed call's outcome, or
	// StoreBreakerOpen.
	StoreDegraded(policy string, cause StoreOutcome, n int)
}

// StoreBase implements StoreObserver with methods that do nothing.
type StoreBase struct{}

// StoreCall does nothing.
func (StoreBase) StoreCall(string, StoreOutcome, time.Duration) {}

// StoreDegraded does nothing.
func (StoreBase) StoreDegraded(string, StoreOutcome, int) {}

// GateState is what an exporter reads of an adaptive gate for its gauges
// (*adaptive.Limiter implements it): the current concurrency limit, the
// tokens held and the callers waiting in its queue. An exporter's
// AttachGate takes it, so exporters need not import the gate's package.
type GateState interface {
	Limit() int
	InFlight() int
	Queued() int
}

// ShedState is what an exporter reads of a priority load shedder for its
// gauge (*shed.Shedder implements it): the cutoff level, at or above which
// requests are shed. An exporter's AttachShedder takes it.
type ShedState interface {
	Cutoff() int
}
