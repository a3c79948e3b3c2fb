package shed

import (
	"testing"
	"time"

	"github.com/sluicehq/sluice/clock"
	"github.com/sluicehq/sluice/retry"
)

// The deprecated throttle names build the throttle retry builds, with an
// account for each priority: the same option values give the same local
// refusals, priority by priority.
func TestDeprecatedThrottle(t *testing.T) {
	t0 := time.Unix(0, 0)
	newC, oldC, olderC := clock.NewManual(t0), clock.NewManual(t0), clock.NewManual(t0)
	want, err := retry.NewThrottle[Priority](retry.WithThrottleClock(newC), retry.WithThrottleK(1.5),
		retry.WithThrottleWindow(time.Second), retry.WithThrottleSeed(7))
	if err != nil {
		t.Fatal(err)
	}
	old, err := NewThrottle(WithThrottleClock(oldC), WithThrottleK(1.5), WithThrottleWindow(time.Second), WithThrottleSeed(7))
	if err != nil {
		t.Fatal(err)
	}
	older, err := NewThrottle(ThrottleClock(olderC), ThrottleK(1.5), ThrottleWindow(time.Second), ThrottleSeed(7))
	if err != nil {
		t.Fatal(err)
	}
	var th []*Throttle = []*Throttle{old, older}
	for i := range 4000 {
		p := Priority(i % int(Priorities))
		w := want.Allow(p)
		for k, x := range th {
			if got := x.Allow(p); got != w {
				t.Fatalf("throttle %d, request %d (%v): Allow %v, retry's %v", k, i, p, got, w)
			}
		}
		if i%7 == 0 { // the server accepts one request in seven
			want.Accepted(p)
			old.Accepted(p)
			older.Accepted(p)
		}
		for _, c := range []*clock.Manual{newC, oldC, olderC} {
			c.Advance(time.Millisecond)
		}
	}
	for p := range Priorities {
		if w, got := want.RejectProbability(p), old.RejectProbability(p); got != w || w == 0 {
			t.Errorf("%v: reject probability %v, retry's %v (want equal and positive)", p, got, w)
		}
	}
	if _, err := NewThrottle(WithThrottleK(0.5)); err == nil {
		t.Error("K below 1 accepted")
	}
}

// The deprecated budget and backoff are retry's.
func TestDeprecatedBudgetAndBackoff(t *testing.T) {
	var b *retry.Budget
	b, err := NewBudget(0.5, 1)
	if err != nil {
		t.Fatal(err)
	}
	b.Request()
	b.Request()
	if !b.TryRetry() || b.TryRetry() {
		t.Error("a budget of one retry per two requests did not give exactly one")
	}
	if _, err := NewBudget(0, 1); err == nil {
		t.Error("ratio 0 accepted")
	}
	var bo retry.Backoff = Backoff{Base: time.Millisecond, Max: 4 * time.Millisecond}
	if got := bo.Delay(3, 0, 0.5); got != 2*time.Millisecond {
		t.Errorf("Delay(3, 0, 0.5) = %v, want 2ms", got)
	}
}
