// Package attach holds the guard an exporter reads for its gauges: one
// attached at run time (AttachGate, AttachShedder), or none.
package attach

import (
	"reflect"
	"sync/atomic"
)

// Slot holds one attached value of interface type T, or none. Store and
// Load are safe for concurrent use. The zero Slot holds none.
type Slot[T any] struct {
	p atomic.Pointer[T]
}

// Store attaches v; a nil v, also a nil pointer in a non-nil interface,
// detaches what was attached.
func (s *Slot[T]) Store(v T) {
	if isNil(v) {
		s.p.Store(nil)
		return
	}
	s.p.Store(&v)
}

// Load returns the attached value and true, or false when none is attached.
func (s *Slot[T]) Load() (T, bool) {
	if p := s.p.Load(); p != nil {
		return *p, true
	}
	var zero T
	return zero, false
}

// isNil reports whether v is nil or holds a nil pointer (a guard passed as
// (*adaptive.Limiter)(nil) detaches, as it did when AttachGate took the
// pointer itself).
func isNil(v any) bool {
	if v == nil {
		return true
	}
	r := reflect.ValueOf(v)
	return r.Kind() == reflect.Pointer && r.IsNil()
}
