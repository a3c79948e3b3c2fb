package adaptive_test

import (
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/adaptive"
	"github.com/sluicehq/sluice/gradient"
	"github.com/sluicehq/sluice/vegas"
)

// TestNewJoinsEveryError: New reports the algorithm's invalid options and
// its own together, one line each, not only the algorithm's.
func TestNewJoinsEveryError(t *testing.T) {
	opts := []adaptive.Option{adaptive.WithMaxLimit(0), adaptive.WithQueueTimeout(time.Second)}
	_, withoutAlg := adaptive.New(gradient.New(), opts...)
	_, withAlg := adaptive.New(gradient.New(gradient.WithTolerance(0.5)), opts...)
	if withoutAlg == nil || withAlg == nil {
		t.Fatalf("invalid options accepted: %v / %v", withoutAlg, withAlg)
	}
	for _, want := range []string{"max limit 0", "WithQueueTimeout"} {
		for _, err := range []error{withoutAlg, withAlg} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("%q does not name %q", err, want)
			}
		}
	}
	if !strings.Contains(withAlg.Error(), "tolerance 0.5") {
		t.Errorf("%q does not name the algorithm's tolerance", withAlg)
	}
	lines := func(err error) int { return len(strings.Split(err.Error(), "\n")) }
	if lines(withAlg) < 3 {
		t.Errorf("%d lines for an invalid algorithm and two invalid options:\n%v", lines(withAlg), withAlg)
	}
	t.Logf("without the bad tolerance:\n%v\nwith it:\n%v", withoutAlg, withAlg)

	// An algorithm that is invalid on its own is reported with the options
	// (and a nil one does not make New panic).
	_, err := adaptive.New((*gradient.Gradient)(nil), adaptive.WithMinLimit(0))
	if err == nil || !strings.Contains(err.Error(), "nil *Gradient") || !strings.Contains(err.Error(), "min limit 0") {
		t.Errorf("nil algorithm and a bad option: %v", err)
	}
	_, err = adaptive.New(adaptive.NewAIMD(adaptive.WithAIMDBackoff(2)), adaptive.WithMinLimit(0))
	if err == nil || !strings.Contains(err.Error(), "backoff") || !strings.Contains(err.Error(), "min limit 0") {
		t.Errorf("AIMD: %v", err)
	}
}

// TestAlgorithmBindsOneGate: an algorithm with state drives one gate;
// giving it to a second is an error, for each of sluice's algorithms,
// also when two gates are built at once. A New that failed for another
// reason does not use the algorithm up; Fixed keeps no state and may be
// shared.
func TestAlgorithmBindsOneGate(t *testing.T) {
	for name, mk := range map[string]func() adaptive.Algorithm{
		"gradient": func() adaptive.Algorithm { return gradient.New() },
		"vegas":    func() adaptive.Algorithm { return vegas.New() },
		"aimd":     func() adaptive.Algorithm { return adaptive.NewAIMD() },
	} {
		t.Run(name, func(t *testing.T) {
			alg := mk()
			if _, err := adaptive.New(alg, adaptive.WithMaxLimit(0)); err == nil || errors.Is(err, adaptive.ErrAlgorithmBound) {
				t.Fatalf("invalid option: %v", err)
			}
			if _, err := adaptive.New(alg); err != nil {
				t.Fatalf("first gate (after a failed New): %v", err)
			}
			if _, err := adaptive.New(alg); !errors.Is(err, adaptive.ErrAlgorithmBound) {
				t.Fatalf("second gate: %v, want ErrAlgorithmBound", err)
			}

			shared := mk()
			var wg sync.WaitGroup
			var mu sync.Mutex
			ok := 0
			for range 8 {
				wg.Go(func() {
					if _, err := adaptive.New(shared); err == nil {
						mu.Lock()
						ok++
						mu.Unlock()
					}
				})
			}
			wg.Wait()
			if ok != 1 {
				t.Fatalf("%d gates built on one algorithm at once, want 1", ok)
			}
		})
	}
	fixed := adaptive.Fixed(4)
	for range 2 {
		if _, err := adaptive.New(fixed); err != nil {
			t.Fatalf("Fixed shared: %v", err)
		}
	}
}

// The former AIMD option names still build the same algorithm.
func TestDeprecatedAIMDOptions(t *testing.T) {
	old := adaptive.NewAIMD(adaptive.AIMDInitial(7), adaptive.AIMDIncrease(2), adaptive.AIMDBackoff(0.8), adaptive.AIMDTimeout(time.Second))
	cur := adaptive.NewAIMD(adaptive.WithAIMDInitial(7), adaptive.WithAIMDIncrease(2), adaptive.WithAIMDBackoff(0.8), adaptive.WithAIMDTimeout(time.Second))
	s := adaptive.Sample{Limit: 7, Count: 10, RTT: 2 * time.Second, AvgRTT: 2 * time.Second, MaxInFlight: 7, Rejected: 3}
	if old.InitialLimit() != 7 || old.Update(s) != cur.Update(s) || old.Validate() != nil {
		t.Fatal("the deprecated AIMD options build another algorithm")
	}
}
