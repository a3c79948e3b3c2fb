package adaptive

import (
	"errors"
	"fmt"
	"math"
	"time"
)

// Fixed returns an Algorithm that keeps the limit at n: a plain semaphore
// with the gate's measurements and queue. n must be at least 1 (New reports
// it otherwise).
func Fixed(n int) Algorithm { return fixed(n) }

type fixed int

func (f fixed) InitialLimit() int { return int(f) }
func (f fixed) Update(Sample) int { return int(f) }
func (f fixed) Validate() error {
	if f < 1 {
		return fmt.Errorf("sluice/adaptive: Fixed(%d): limit must be at least 1", int(f))
	}
	return nil
}

// AIMD is the additive-increase, multiplicative-decrease algorithm. Per
// window:
//
//	drop or RTT > timeout          →  L' = ⌊L·backoff⌋
//	else if 2·MaxInFlight ≥ L      →  L' = L + increase
//	else                           →  L' = L   (the gate is not the bottleneck)
//
// The gate keeps L' within its min and max limits (WithMinLimit,
// WithMaxLimit). Defaults: initial limit 20, increase 1, backoff 0.9,
// timeout 5s. Build it with NewAIMD.
type AIMD struct {
	Binding // one gate per AIMD: adaptive.New refuses a second

	initial  int
	increase int
	backoff  float64
	timeout  time.Duration
	err      error
}

// AIMDOption configures an AIMD algorithm.
type AIMDOption func(*AIMD)

// WithAIMDInitial sets the starting limit (default 20; at least 1).
func WithAIMDInitial(n int) AIMDOption { return func(a *AIMD) { a.initial = n } }

// WithAIMDIncrease sets the additive step per healthy window (default 1; at
// least 1).
func WithAIMDIncrease(n int) AIMDOption { return func(a *AIMD) { a.increase = n } }

// WithAIMDBackoff sets the multiplicative decrease (default 0.9; in
// [0.5, 1)).
func WithAIMDBackoff(f float64) AIMDOption { return func(a *AIMD) { a.backoff = f } }

// WithAIMDTimeout sets the window RTT above which the window counts as
// congested even without drops (default 5s; positive).
func WithAIMDTimeout(d time.Duration) AIMDOption { return func(a *AIMD) { a.timeout = d } }

// AIMDInitial is the former name of WithAIMDInitial.
//
// Deprecated: use WithAIMDInitial.
func AIMDInitial(n int) AIMDOption { return WithAIMDInitial(n) }

// AIMDIncrease is the former name of WithAIMDIncrease.
//
// Deprecated: use WithAIMDIncrease.
func AIMDIncrease(n int) AIMDOption { return WithAIMDIncrease(n) }

// AIMDBackoff is the former name of WithAIMDBackoff.
//
// Deprecated: use WithAIMDBackoff.
func AIMDBackoff(f float64) AIMDOption { return WithAIMDBackoff(f) }

// AIMDTimeout is the former name of WithAIMDTimeout.
//
// Deprecated: use WithAIMDTimeout.
func AIMDTimeout(d time.Duration) AIMDOption { return WithAIMDTimeout(d) }

// NewAIMD returns an AIMD algorithm. Invalid options are reported by its
// Validate method, which New calls.
func NewAIMD(opts ...AIMDOption) *AIMD {
	a := &AIMD{initial: 20, increase: 1, backoff: 0.9, timeout: 5 * time.Second}
	for _, o := range opts {
		if o != nil {
			o(a)
		}
	}
	var errs []error
	if a.initial < 1 {
		errs = append(errs, fmt.Errorf("sluice/adaptive: AIMD initial limit %d: must be at least 1", a.initial))
	}
	if a.increase < 1 || a.increase > maxLimitCap {
		errs = append(errs, fmt.Errorf("sluice/adaptive: AIMD increase %d: must be in [1, 2^31-1]", a.increase))
	}
	if !(a.backoff >= 0.5 && a.backoff < 1) {
		errs = append(errs, fmt.Errorf("sluice/adaptive: AIMD backoff %v: must be in [0.5, 1)", a.backoff))
	}
	if a.timeout <= 0 {
		errs = append(errs, fmt.Errorf("sluice/adaptive: AIMD timeout %v: must be positive", a.timeout))
	}
	a.err = errors.Join(errs...)
	return a
}

// Validate reports the invalid options NewAIMD was given, if any.
func (a *AIMD) Validate() error {
	if a == nil {
		return errors.New("sluice/adaptive: nil *AIMD: build it with NewAIMD")
	}
	return a.err
}

// InitialLimit returns the configured starting limit.
func (a *AIMD) InitialLimit() int { return a.initial }

// Update applies the AIMD rule in the type's doc comment to one window.
func (a *AIMD) Update(s Sample) int {
	switch {
	case s.Dropped > 0 || s.RTT > a.timeout:
		return int(math.Floor(float64(s.Limit) * a.backoff))
	case 2*s.MaxInFlight >= s.Limit:
		return min(s.Limit+a.increase, maxLimitCap) // both ≤ MaxInt32: no overflow
	default:
		return s.Limit
	}
}
