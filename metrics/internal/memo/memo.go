// Package memo caches the metric children of one label value (a partition, a
// rate limiter's name, a priority) so that an observer finds them on the hot
// path with one lock-free map read and no allocation.
package memo

import (
	"sync"
	"sync/atomic"
)

// Memo maps a label value to a value built once for it by New. Reads are
// lock-free: the map is copied on write, which happens once per distinct
// label value, so it suits label values that come from configuration (a few
// partitions, a few limiter names), not from requests. The zero Memo is not
// usable; set New.
type Memo[T any] struct {
	// New builds the value of a label value seen for the first time. It is
	// called at most once per label value, with the Memo's lock held.
	New func(label string) *T

	mu sync.Mutex
	m  atomic.Pointer[map[string]*T]
}

// Get returns the value for label, building it with New on first use.
// It is safe for concurrent use and, once label has been seen, allocates
// nothing.
func (c *Memo[T]) Get(label string) *T {
	if m := c.m.Load(); m != nil {
		if v, ok := (*m)[label]; ok {
			return v
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	old := c.m.Load()
	var n map[string]*T
	if old == nil {
		n = make(map[string]*T, 1)
	} else {
		if v, ok := (*old)[label]; ok {
			return v
		}
		n = make(map[string]*T, len(*old)+1)
		for k, v := range *old {
			n[k] = v
		}
	}
	v := c.New(label)
	n[label] = v
	c.m.Store(&n)
	return v
}
