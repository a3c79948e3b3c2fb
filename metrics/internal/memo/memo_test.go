package memo

import (
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
)

func TestGetBuildsOncePerLabel(t *testing.T) {
	var built atomic.Int64
	m := Memo[int]{New: func(label string) *int {
		built.Add(1)
		n := len(label)
		return &n
	}}
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 100 {
				label := strconv.Itoa((g + i) % 10)
				if got := m.Get(label); *got != len(label) {
					t.Errorf("Get(%q) = %d", label, *got)
				}
			}
		}()
	}
	wg.Wait()
	if built.Load() != 10 {
		t.Fatalf("built %d values for 10 labels", built.Load())
	}
	if first, again := m.Get("3"), m.Get("3"); first != again {
		t.Fatal("two values for one label")
	}
	if a := testing.AllocsPerRun(100, func() { m.Get("7") }); a != 0 {
		t.Fatalf("%v allocations per Get of a known label", a)
	}
}
