package shed

// Names kept for one release: the client side of overload (the adaptive
// throttle, the retry budget and the backoff), which moved to package
// retry, and the former names of options renamed to the rule of
// docs/architecture.md (With<Kind><Setting>).

import (
	"time"

	"github.com/sluicehq/sluice/clock"
	"github.com/sluicehq/sluice/retry"
)

// ThrottleClock is the former name of WithThrottleClock.
//
// Deprecated: use retry.WithThrottleClock.
func ThrottleClock(c clock.Clock) ThrottleOption { return retry.WithThrottleClock(c) }

// ThrottleK is the former name of WithThrottleK.
//
// Deprecated: use retry.WithThrottleK.
func ThrottleK(k float64) ThrottleOption { return retry.WithThrottleK(k) }

// ThrottleWindow is the former name of WithThrottleWindow.
//
// Deprecated: use retry.WithThrottleWindow.
func ThrottleWindow(d time.Duration) ThrottleOption { return retry.WithThrottleWindow(d) }

// ThrottleSeed is the former name of WithThrottleSeed.
//
// Deprecated: use retry.WithThrottleSeed.
func ThrottleSeed(seed uint64) ThrottleOption { return retry.WithThrottleSeed(seed) }

// Throttle is the SRE book's adaptive client-side throttling, per priority.
//
// Deprecated: use retry.Throttle[shed.Priority] (retry.NewThrottle).
type Throttle = retry.Throttle[Priority]

// ThrottleOption configures a Throttle.
//
// Deprecated: use retry.ThrottleOption.
type ThrottleOption = retry.ThrottleOption

// NewThrottle returns a Throttle that keeps accounts for each of the
// Priorities.
//
// Deprecated: use retry.NewThrottle[shed.Priority].
func NewThrottle(opts ...ThrottleOption) (*Throttle, error) {
	return retry.NewThrottle[Priority](append([]ThrottleOption{retry.WithThrottleClasses(int(Priorities))}, opts...)...)
}

// WithThrottleClock sets the throttle's clock (default clock.System()).
//
// Deprecated: use retry.WithThrottleClock.
func WithThrottleClock(c clock.Clock) ThrottleOption { return retry.WithThrottleClock(c) }

// WithThrottleK sets K, the multiple of the accepted rate still sent
// (default 2; at least 1).
//
// Deprecated: use retry.WithThrottleK.
func WithThrottleK(k float64) ThrottleOption { return retry.WithThrottleK(k) }

// WithThrottleWindow sets the throttle's sliding window (default 10 s).
//
// Deprecated: use retry.WithThrottleWindow.
func WithThrottleWindow(d time.Duration) ThrottleOption { return retry.WithThrottleWindow(d) }

// WithThrottleSeed makes the throttle's local refusals reproducible
// (default: random).
//
// Deprecated: use retry.WithThrottleSeed.
func WithThrottleSeed(seed uint64) ThrottleOption { return retry.WithThrottleSeed(seed) }

// Budget caps retries at a share of requests.
//
// Deprecated: use retry.Budget.
type Budget = retry.Budget

// NewBudget returns a retry budget of ratio, saving at most max retries.
//
// Deprecated: use retry.NewBudget.
func NewBudget(ratio, max float64) (*Budget, error) { return retry.NewBudget(ratio, max) }

// Backoff is capped exponential backoff with full jitter.
//
// Deprecated: use retry.Backoff.
type Backoff = retry.Backoff
