package sim

import (
	"strings"
	"testing"

	"github.com/sluicehq/sluice/adaptive"
	"github.com/sluicehq/sluice/clock"
	"github.com/sluicehq/sluice/gradient"
	"github.com/sluicehq/sluice/shed"
)

// TestPolicyOnTheWrongClock: a policy whose gate (or shedder) reads a
// clock other than the simulation's is refused, in virtual time (a gate on
// the wall clock there measures every request as taking no time, and the
// run used to report a goodput and pass all the same) and in real time (a
// gate on a manual clock would never see time pass).
func TestPolicyOnTheWrongClock(t *testing.T) {
	sc := short(scenario(t, "step-2x"), 0.05)
	forgot := PolicySpec{Name: "custom", New: func(e Env) (Policy, error) {
		return NewGatePolicy(gradient.New(gradient.WithInitialLimit(e.Cores)), adaptive.WithMaxLimit(e.MaxLimit())) // no WithClock
	}}
	if r, err := Run(sc, forgot, 1); err == nil || !strings.Contains(err.Error(), "wall clock") {
		t.Fatalf("a gate on the wall clock in virtual time: result %v, error %v", r, err)
	}
	shedForgot := PolicySpec{Name: "custom-shed", New: func(e Env) (Policy, error) {
		g, err := NewGatePolicy(gradient.New(), adaptive.WithClock(e.Clock))
		if err != nil {
			return nil, err
		}
		s, err := shed.New(g.Gate) // no shed.WithClock
		if err != nil {
			return nil, err
		}
		return &ShedPolicy{GatePolicy: g, Shedder: s}, nil
	}}
	if _, err := Run(sc, shedForgot, 1); err == nil || !strings.Contains(err.Error(), "shed.WithClock") {
		t.Fatalf("a shedder on the wall clock in virtual time: %v", err)
	}
	manual := PolicySpec{Name: "manual", New: func(e Env) (Policy, error) {
		return NewGatePolicy(adaptive.Fixed(10), adaptive.WithClock(clock.NewManual(epoch)))
	}}
	if _, err := RunRealtime(rtStep(), manual, 1, 0.25); err == nil || !strings.Contains(err.Error(), "manual clock") {
		t.Fatalf("a gate on a manual clock in real time: %v", err)
	}
	for _, spec := range append(BuiltinPolicies(), ExtraPolicies()...) {
		if _, err := Run(sc, spec, 1); err != nil {
			t.Errorf("built-in policy %s: %v", spec.Name, err)
		}
	}
}
