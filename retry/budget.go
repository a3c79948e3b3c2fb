package retry

import (
	"fmt"
	"sync"
)

// Budget caps retries at a share of requests: each request earns Ratio of a
// retry (up to Max saved), each retry spends one. It keeps no history of
// the server's answers, only what first attempts have earned, so an idle
// spell after an overload never refuses a first attempt; retries come back
// as new requests earn them. Safe for concurrent use.
type Budget struct {
	mu     sync.Mutex
	ratio  float64
	max    float64
	tokens float64
}

// NewBudget returns a retry budget of ratio (e.g. 0.1: retries ≤ 10% of
// requests), saving at most max retries; ratio in (0, 1], max ≥ 1. It
// starts empty: it earns its first retry after 1/ratio requests.
func NewBudget(ratio, max float64) (*Budget, error) {
	if !(ratio > 0 && ratio <= 1) || !(max >= 1) {
		return nil, fmt.Errorf("sluice/retry: budget ratio %v, max %v: need 0 < ratio ≤ 1 and max ≥ 1", ratio, max)
	}
	return &Budget{ratio: ratio, max: max}, nil
}

// Request records a first attempt, earning ratio of a retry.
func (b *Budget) Request() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.tokens = min(b.tokens+b.ratio, b.max)
}

// TryRetry spends one retry if the budget has one.
func (b *Budget) TryRetry() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.tokens < 1 {
		return false
	}
	b.tokens--
	return true
}
