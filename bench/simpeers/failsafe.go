package simpeers

import (
	"github.com/failsafe-go/failsafe-go/adaptivelimiter"

	"github.com/sluicehq/sluice/sim"
)

// Failsafe returns the policy "failsafe": failsafe-go's adaptivelimiter built
// with adaptivelimiter.NewBuilder[any]().Build(), i.e. all its defaults
// (limits 1–200 starting at 20, max limit 5× the in-flight count, recent
// window 1–30 s of wall time with at least 50 samples, p90 recent RTT,
// baseline age 10, correlation window 50, no queueing).
//
// A request is admitted with TryAcquirePermit (never waits); Success is
// reported with permit.Record() and Dropped with permit.Drop() (released
// without a sample, as failsafe-go recommends for timeouts).
//
// The limiter reads the wall clock (time.Now) and ignores Env.Clock, so the
// policy is meaningful only under sim.RunRealtime — in real time, or on the
// fake clock of a testing/synctest bubble; it is safe for concurrent use.
func Failsafe() sim.PolicySpec {
	return sim.PolicySpec{
		Name:        "failsafe",
		Description: "failsafe-go adaptivelimiter, defaults (wall clock: real-time mode only)",
		New: func(sim.Env) (sim.Policy, error) {
			return &failsafePolicy{lim: adaptivelimiter.NewBuilder[any]().Build()}, nil
		},
	}
}

type failsafePolicy struct {
	lim adaptivelimiter.AdaptiveLimiter[any]
}

func (p *failsafePolicy) Admit(sim.Request) (sim.Ticket, bool) {
	permit, ok := p.lim.TryAcquirePermit()
	if !ok {
		return sim.Ticket{}, false
	}
	return sim.Ticket{Ref: permit}, true
}

func (p *failsafePolicy) Done(t sim.Ticket, o sim.Outcome) {
	permit := t.Ref.(adaptivelimiter.Permit)
	if o == sim.Success {
		permit.Record()
	} else {
		permit.Drop()
	}
}

func (p *failsafePolicy) Limit() int { return p.lim.Limit() }
