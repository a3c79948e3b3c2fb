package ratelimit

// Observer receives the decisions of rate limiters and Concurrency limiters
// (WithObserver). It is called synchronously on the request path, so it must
// be safe for concurrent use and cheap: count, do not block. Keys are never
// reported, to keep metric labels bounded.
//
// Embed ObserverBase to implement only the methods you need; methods added
// to this interface later will come with a no-op in ObserverBase.
//
// This interface belongs in package metrics next to GateObserver; it lives
// here until it moves there.
type Observer interface {
	// RateDecision reports one decision of the limiter named limiter (see
	// WithName) on a request of cost n. In shadow mode res.Allowed is true
	// and res.Shadowed says whether the limit would have refused. For Tiers,
	// every tier reports its own decision.
	RateDecision(limiter string, n int, res Result)
	// LeaseExpired reports a Concurrency lease that was neither released
	// nor renewed in time and whose slot was taken back.
	LeaseExpired(limiter string)
}

// ObserverBase implements Observer with methods that do nothing.
type ObserverBase struct{}

// RateDecision does nothing.
func (ObserverBase) RateDecision(string, int, Result) {}

// LeaseExpired does nothing.
func (ObserverBase) LeaseExpired(string) {}
