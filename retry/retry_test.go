package retry

import (
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/clock"
)

var t0 = time.Date(2100, 1, 1, 0, 0, 0, 0, time.UTC)

// prio is a caller's priority type, as shed.Priority is: 0 the most
// important, 3 the least.
type prio uint8

const (
	criticalPlus prio = iota
	critical
	sheddablePlus
	sheddable
)

func TestThrottle(t *testing.T) {
	c := clock.NewManual(t0)
	th, err := NewThrottle[prio](WithThrottleClock(c), WithThrottleK(2), WithThrottleSeed(1), WithThrottleWindow(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	// The server accepts everything: never refuse locally.
	for range 1000 {
		if !th.Allow(critical) {
			t.Fatal("refused locally while the server accepts everything")
		}
		th.Accepted(critical)
	}
	// 1000 requests a second against a server that accepts 100 a second:
	// p → (req − 2·acc)/(req + 1) ≈ (1000 − 200)/1001.
	var last time.Duration = -time.Second
	for i := range 3000 {
		now := time.Duration(i) * time.Millisecond
		c.Advance(time.Millisecond)
		if th.Allow(sheddable) && now-last >= 10*time.Millisecond {
			th.Accepted(sheddable)
			last = now
		}
	}
	if p := th.RejectProbability(sheddable); p < 0.7 || p > 0.9 {
		t.Fatalf("reject probability %v at ten times the accepted rate, want about 0.8", p)
	}
	if p := th.RejectProbability(criticalPlus); p != 0 {
		t.Fatalf("another priority affected: %v", p)
	}
	// Priorities past the last class share its accounts.
	if p, q := th.RejectProbability(sheddable), th.RejectProbability(200); p != q {
		t.Fatalf("priority 200: reject probability %v, want the last class's %v", q, p)
	}
	// A quiet window later the history has gone.
	c.Advance(2 * time.Second)
	if p := th.RejectProbability(sheddable); p != 0 {
		t.Fatalf("reject probability %v after the window passed", p)
	}
}

func TestThrottleOptionErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		opt  ThrottleOption
		want string
	}{
		{"K below 1", WithThrottleK(0.5), "throttle K 0.5"},
		{"K above 100", WithThrottleK(101), "throttle K 101"},
		{"nil clock", WithThrottleClock(nil), "WithThrottleClock(nil)"},
		{"short window", WithThrottleWindow(time.Millisecond), "throttle window 1ms"},
		{"no class", WithThrottleClasses(0), "throttle classes 0"},
		{"too many classes", WithThrottleClasses(257), "throttle classes 257"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := NewThrottle[prio](tc.opt)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
}

// With one class, every priority shares one account.
func TestThrottleClasses(t *testing.T) {
	c := clock.NewManual(t0)
	th, err := NewThrottle[prio](WithThrottleClock(c), WithThrottleSeed(1), WithThrottleClasses(1))
	if err != nil {
		t.Fatal(err)
	}
	for range 100 {
		th.Allow(sheddable) // never accepted
	}
	if p := th.RejectProbability(criticalPlus); p < 0.9 {
		t.Fatalf("critical-plus: reject probability %v, want the shared account's (> 0.9)", p)
	}
}

// TestThrottleDefaultForgetsAnOverload: with the default window, a client
// that saw the server refuse everything sends again after ten idle seconds
// (the SRE book's two minutes would keep it refusing locally).
func TestThrottleDefaultForgetsAnOverload(t *testing.T) {
	c := clock.NewManual(t0)
	th, err := NewThrottle[prio](WithThrottleClock(c), WithThrottleSeed(1))
	if err != nil {
		t.Fatal(err)
	}
	for range 1000 {
		th.Allow(critical) // never accepted: the server refuses everything
		c.Advance(time.Millisecond)
	}
	if p := th.RejectProbability(critical); p < 0.9 {
		t.Fatalf("reject probability %v after 1000 refusals", p)
	}
	c.Advance(10 * time.Second)
	for i := range 100 {
		if !th.Allow(critical) {
			t.Fatalf("request %d after 10 s idle refused locally", i)
		}
		th.Accepted(critical)
	}
}

func TestBudget(t *testing.T) {
	b, err := NewBudget(0.1, 5)
	if err != nil {
		t.Fatal(err)
	}
	if b.TryRetry() {
		t.Fatal("retry with an empty budget")
	}
	retries := 0
	for range 1000 {
		b.Request()
		if b.TryRetry() {
			retries++
		}
	}
	if retries < 99 || retries > 100 {
		t.Fatalf("%d retries for 1000 requests at 10%%", retries)
	}
	// At most max saved.
	for range 1000 {
		b.Request()
	}
	saved := 0
	for b.TryRetry() {
		saved++
	}
	if saved != 5 {
		t.Fatalf("%d retries saved, want the max 5", saved)
	}
	for _, bad := range [][2]float64{{0, 1}, {1.5, 1}, {0.1, 0.5}} {
		if _, err := NewBudget(bad[0], bad[1]); err == nil {
			t.Errorf("NewBudget(%v, %v) accepted", bad[0], bad[1])
		}
	}
}

func TestBackoff(t *testing.T) {
	bo := Backoff{Base: 10 * time.Millisecond, Max: 100 * time.Millisecond}
	for k, want := range map[int]time.Duration{1: 10 * time.Millisecond, 2: 20 * time.Millisecond, 4: 80 * time.Millisecond, 9: 100 * time.Millisecond} {
		if got := bo.Delay(k, 0, 0.999999); got > want || got < want*99/100 {
			t.Errorf("attempt %d: ceiling %v, want %v", k, got, want)
		}
	}
	if got := bo.Delay(1, 0, 0); got <= 0 {
		t.Fatal("an immediate retry")
	}
	if got := bo.Delay(1, time.Second, 0.5); got != time.Second {
		t.Fatalf("retry-after not honoured: %v", got)
	}
}
