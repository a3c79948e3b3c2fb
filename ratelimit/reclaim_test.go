package ratelimit

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/sluicehq/sluice/clock"
)

// At the key cap, a new key makes every table run reclaimOthers over the
// other shards; with no key fresh enough to drop it is refused (SourceFull), and the
// attempt (the closures, the TryLock walk, the sweeps) allocates nothing.
func TestReclaimAtCapDoesNotAllocate(t *testing.T) {
	const keys = 512 // spread over all shards
	ctx := context.Background()
	for _, alg := range allAlgorithms {
		t.Run(alg.String(), func(t *testing.T) {
			l := mustNew(t, alg, Limit{Rate: 10, Period: time.Hour}, WithClock(clock.NewManual(t0)), WithMaxKeys(keys))
			for i := range keys {
				if _, err := l.Allow(ctx, fmt.Sprintf("user:%d", i)); err != nil {
					t.Fatal(err)
				}
			}
			key := string([]byte("user:new"))
			refused := func() {
				if res, err := l.Allow(ctx, key); err != nil || res.Allowed || res.Source != SourceFull {
					t.Fatalf("Allow at the cap: %+v, %v; want a refusal with SourceFull", res, err)
				}
			}
			refused()
			// SlidingLog builds the new key's log (two allocations) before
			// it learns the store is full (logTable.take); the reclaim
			// itself adds none.
			want := 0.0
			if alg == SlidingLog {
				want = 2
			}
			if n := testing.AllocsPerRun(200, refused); n != want {
				t.Fatalf("a refused key at the cap allocates %v times, want %v", n, want)
			}
		})
	}
	t.Run("Concurrency", func(t *testing.T) {
		c := mustConcurrency(t, 1, WithClock(clock.NewManual(t0)), WithMaxKeys(keys))
		for i := range keys {
			if _, res, err := c.Acquire(ctx, fmt.Sprintf("user:%d", i)); err != nil || !res.Allowed {
				t.Fatal(res, err)
			}
		}
		key := string([]byte("user:new"))
		refused := func() {
			if _, res, err := c.Acquire(ctx, key); err != nil || res.Allowed || res.Source != SourceFull {
				t.Fatalf("Acquire at the cap: %+v, %v; want a refusal with SourceFull", res, err)
			}
		}
		refused()
		if n := testing.AllocsPerRun(200, refused); n != 0 {
			t.Fatalf("a refused key at the cap allocates %v times", n)
		}
	})
}
