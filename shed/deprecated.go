package shed

// The former names of options renamed to the rule of docs/architecture.md
// (With<Kind><Setting>); kept for one release.

import (
	"time"

	"github.com/sluicehq/sluice/clock"
)

// ThrottleClock is the former name of WithThrottleClock.
//
// Deprecated: use WithThrottleClock; options are named With + the setting (docs/architecture.md).
func ThrottleClock(c clock.Clock) ThrottleOption { return WithThrottleClock(c) }

// ThrottleK is the former name of WithThrottleK.
//
// Deprecated: use WithThrottleK; options are named With + the setting (docs/architecture.md).
func ThrottleK(k float64) ThrottleOption { return WithThrottleK(k) }

// ThrottleWindow is the former name of WithThrottleWindow.
//
// Deprecated: use WithThrottleWindow; options are named With + the setting (docs/architecture.md).
func ThrottleWindow(d time.Duration) ThrottleOption { return WithThrottleWindow(d) }

// ThrottleSeed is the former name of WithThrottleSeed.
//
// Deprecated: use WithThrottleSeed; options are named With + the setting (docs/architecture.md).
func ThrottleSeed(seed uint64) ThrottleOption { return WithThrottleSeed(seed) }
