package ratelimit

import (
	"context"
	"runtime"
	"testing"
	"time"
)

// bytesPerKey fills a limiter with keys and returns the heap it grew by per
// key, less the keys' own bytes (the stored clones).
func bytesPerKey(t testing.TB, alg Algorithm, keys []string) float64 {
	heap := func() uint64 {
		runtime.GC()
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return m.HeapAlloc
	}
	keyBytes := 0
	for _, k := range keys {
		keyBytes += roundAlloc(len(k))
	}
	before := heap()
	l := mustNew(t, alg, Limit{Rate: 1000, Period: time.Hour}, WithMaxKeys(len(keys)))
	ctx := context.Background()
	for _, k := range keys {
		if _, err := l.Allow(ctx, k); err != nil {
			t.Fatal(err)
		}
	}
	after := heap()
	runtime.KeepAlive(l)
	return float64(int64(after-before)-int64(keyBytes)) / float64(len(keys))
}

// roundAlloc is the size class a string of n bytes is allocated in (for
// the short keys used here).
func roundAlloc(n int) int {
	for _, c := range []int{8, 16, 24, 32, 48, 64, 80, 96, 112, 128} {
		if n <= c {
			return c
		}
	}
	return n
}
