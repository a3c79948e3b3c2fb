package ratelimit

import (
	"context"
	"strconv"
	"sync/atomic"
	"testing"
	"time"
)

// benchLimit is so large that the benchmarks measure the admitting path,
// as the peer benchmarks do, and refills so slowly (one unit a second) that
// no key is back to fresh (and dropped) between two visits: at 2^30 an hour a
// bucket would be full again 3.4 µs after a request.
var benchLimit = Limit{Rate: 1 << 30, Period: (1 << 30) * time.Second}

func benchKeys(n int) []string {
	keys := make([]string, n)
	for i := range keys {
		keys[i] = "user:" + strconv.Itoa(i)
	}
	return keys
}

func benchLimiter(b *testing.B, alg Algorithm, keys []string) *Limiter {
	lim := benchLimit
	switch alg {
	case SlidingLog:
		// The log keeps a stamp per admitted unit: once a key has 1024 it
		// refuses, which costs the same as admitting.
		lim = Limit{Rate: 1024, Period: time.Hour}
	}
	l, err := New(alg, lim, WithMaxKeys(len(keys)+1))
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	for _, k := range keys {
		if _, err := l.Allow(ctx, k); err != nil {
			b.Fatal(err)
		}
	}
	return l
}

var benchAlgorithms = []Algorithm{FixedWindow, SlidingWindow, TokenBucket, GCRA, SlidingLog}

func BenchmarkAllow(b *testing.B) {
	ctx := context.Background()
	for _, alg := range benchAlgorithms {
		for _, nkeys := range []int{1, 100_000} {
			keys := benchKeys(nkeys)
			name := alg.String() + "/keys=" + strconv.Itoa(nkeys)
			b.Run(name+"/serial", func(b *testing.B) {
				l := benchLimiter(b, alg, keys)
				b.ReportAllocs()
				i := 0
				for b.Loop() {
					if _, err := l.Allow(ctx, keys[i]); err != nil {
						b.Fatal(err)
					}
					if i++; i == len(keys) {
						i = 0
					}
				}
			})
			b.Run(name+"/parallel", func(b *testing.B) {
				l := benchLimiter(b, alg, keys)
				b.ReportAllocs()
				var seq atomic.Uint64
				b.RunParallel(func(pb *testing.PB) {
					i := int(seq.Add(7919)) % len(keys)
					for pb.Next() {
						if _, err := l.Allow(ctx, keys[i]); err != nil {
							b.Fatal(err)
						}
						if i++; i == len(keys) {
							i = 0
						}
					}
				})
			})
		}
	}
}

// BenchmarkBytesPerKey reports the heap each held key costs, less its own
// bytes, at a million keys.
func BenchmarkBytesPerKey(b *testing.B) {
	keys := benchKeys(1 << 20)
	for _, alg := range []Algorithm{FixedWindow, SlidingWindow, TokenBucket, GCRA} {
		b.Run(alg.String(), func(b *testing.B) {
			var perKey float64
			for b.Loop() {
				perKey = bytesPerKey(b, alg, keys)
			}
			b.ReportMetric(perKey, "B/key")
		})
	}
}

func BenchmarkTiers(b *testing.B) {
	ctx := context.Background()
	for _, nkeys := range []int{1, 100_000} {
		keys := benchKeys(nkeys)
		b.Run("keys="+strconv.Itoa(nkeys), func(b *testing.B) {
			perKey, _ := New(TokenBucket, benchLimit, WithMaxKeys(nkeys+1))
			global, _ := New(SlidingWindow, Limit{Rate: MaxWindowRate, Period: time.Hour})
			tiers, _ := All(perKey, global)
			pair := make([]string, 2)
			pair[1] = "global"
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				pair[0] = keys[i]
				if _, err := tiers.AllowN(ctx, pair, 1, nil); err != nil {
					b.Fatal(err)
				}
				if i++; i == len(keys) {
					i = 0
				}
			}
		})
	}
}

func BenchmarkConcurrencyAcquireRelease(b *testing.B) {
	c, _ := NewConcurrency(1 << 20)
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		l, _, _ := c.Acquire(ctx, "tenant:acme")
		l.Release()
	}
}

func BenchmarkReserve(b *testing.B) {
	l, _ := New(GCRA, Limit{Rate: 1 << 30, Period: time.Hour, Burst: 1 << 30})
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := l.Reserve(ctx, "k", 1); err != nil {
			b.Fatal(err)
		}
	}
}
