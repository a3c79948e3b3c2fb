package attach

import "testing"

type gauge interface{ Value() int }

type fixed int

func (f *fixed) Value() int { return int(*f) }

func TestSlot(t *testing.T) {
	var s Slot[gauge]
	if _, ok := s.Load(); ok {
		t.Fatal("zero Slot holds a value")
	}
	v := fixed(3)
	s.Store(&v)
	if g, ok := s.Load(); !ok || g.Value() != 3 {
		t.Fatalf("Load() = %v, %v; want the attached value", g, ok)
	}
	s.Store(nil)
	if _, ok := s.Load(); ok {
		t.Fatal("Store(nil) did not detach")
	}
	s.Store(&v)
	s.Store((*fixed)(nil))
	if _, ok := s.Load(); ok {
		t.Fatal("Store of a nil pointer did not detach")
	}
}
