package shed

import (
	"testing"
	"time"

	"github.com/sluicehq/sluice/clock"
)

// The former option names set what the new ones set.
func TestDeprecatedThrottleOptions(t *testing.T) {
	c := clock.NewManual(time.Unix(0, 0))
	var oldCfg, newCfg throttleConfig
	for _, o := range []ThrottleOption{ThrottleClock(c), ThrottleK(3), ThrottleWindow(time.Minute), ThrottleSeed(7)} {
		o(&oldCfg)
	}
	for _, o := range []ThrottleOption{WithThrottleClock(c), WithThrottleK(3), WithThrottleWindow(time.Minute), WithThrottleSeed(7)} {
		o(&newCfg)
	}
	if oldCfg != newCfg {
		t.Errorf("old names gave %+v, new names %+v", oldCfg, newCfg)
	}
}
