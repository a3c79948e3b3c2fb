// Package observertest holds the checks every metrics adapter (metrics/prom,
// metrics/gometrics) runs against itself: one round of every kind of event,
// and that observing allocates nothing, alone and through the real guards.
// It is a test helper, imported by tests only; it lives outside metrics/
// because it drives the real guards, which the exporters never import.
package observertest

import (
	"testing"
	"time"

	"github.com/sluicehq/sluice/adaptive"
	"github.com/sluicehq/sluice/clock"
	"github.com/sluicehq/sluice/metrics"
	"github.com/sluicehq/sluice/shed"
)

// Observer is an adapter: an observer of all three guards and of the
// rate-limit store.
type Observer interface {
	metrics.GateObserver
	metrics.RateObserver
	metrics.ShedObserver
	metrics.StoreObserver
}

// Drive reports one event of each kind to o (release is the kind of the
// gate release).
func Drive(o Observer, release metrics.GateRelease) {
	o.GateDecision(metrics.Admitted, "", 0)
	o.GateRelease(release, 3*time.Millisecond)
	o.GateLimit(10, 11)
	o.RateDecision("per_ip", metrics.RateDecision{Cost: 1, Allowed: true})
	o.LeaseExpired("conc")
	o.ShedDecision(metrics.ShedRefused, "sheddable")
	o.StoreCall("decide", metrics.StoreOK, 300*time.Microsecond)
	o.StoreCall("decide", metrics.StoreTimedOut, 100*time.Millisecond)
	o.StoreDegraded("fail_open", metrics.StoreBreakerOpen, 2)
}

// NoAllocs fails t if observing allocates once every label value has been
// seen: a round of Drive, and a shed decision, gate decision and release
// through a real shedder and gate on a manual clock.
func NoAllocs(t *testing.T, o Observer, release metrics.GateRelease) {
	t.Helper()
	Drive(o, release) // the first event of a label value builds its children
	if a := testing.AllocsPerRun(1000, func() { Drive(o, release) }); a != 0 {
		t.Fatalf("%v allocations per round of nine events", a)
	}
	c := clock.NewManual(time.Date(2100, 1, 1, 0, 0, 0, 0, time.UTC))
	g, err := adaptive.New(adaptive.Fixed(4), adaptive.WithClock(c), adaptive.WithObserver(o))
	if err != nil {
		t.Fatal(err)
	}
	s, err := shed.New(g, shed.WithClock(c), shed.WithObserver(o))
	if err != nil {
		t.Fatal(err)
	}
	step := func() {
		if tok, d := s.TryAcquire(shed.Critical, 7); d.Admitted {
			c.Advance(time.Millisecond)
			tok.Success()
		}
	}
	step()
	if a := testing.AllocsPerRun(1000, step); a != 0 {
		t.Fatalf("%v allocations per observed shed+gate decision and release", a)
	}
}
