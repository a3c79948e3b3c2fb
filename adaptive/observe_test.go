package adaptive

import (
	"context"
	"errors"
	"testing"

	"github.com/sluicehq/sluice/metrics"
)

// The gate decides in its own words (a token, its errors, the caller's
// context's) and an observer sees each as the label it had before the gate
// stopped speaking metrics' words.
func TestDecisionLabels(t *testing.T) {
	for _, tc := range []struct {
		err     error
		want    metrics.GateDecision
		refusal bool
	}{
		{nil, metrics.Admitted, false},
		{ErrLimitExceeded, metrics.Rejected, true},
		{ErrFrontQueue, metrics.Rejected, true},
		{ErrQueueFull, metrics.QueueFull, true},
		{ErrDeadlineUnmeetable, metrics.DeadlineUnmeetable, true},
		{ErrQueueTimeout, metrics.QueueTimeout, true},
		{context.Canceled, metrics.Canceled, false},
		{context.DeadlineExceeded, metrics.Canceled, false},
	} {
		if got := decision(tc.err); got != tc.want {
			t.Errorf("decision(%v) = %v, want %v", tc.err, got, tc.want)
		}
		// observe counts a refusal by the wrapping every gate refusal declares.
		if got := errors.Is(tc.err, ErrLimitExceeded); got != tc.refusal {
			t.Errorf("errors.Is(%v, ErrLimitExceeded) = %v, want %v", tc.err, got, tc.refusal)
		}
	}
	for _, tc := range []struct {
		o    outcome
		want metrics.GateRelease
	}{{succeeded, metrics.Success}, {dropped, metrics.Dropped}, {ignored, metrics.Ignored}} {
		if got := tc.o.label(); got != tc.want {
			t.Errorf("outcome %d label = %v, want %v", tc.o, got, tc.want)
		}
	}
}
