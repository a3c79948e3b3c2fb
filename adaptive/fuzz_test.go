package adaptive

import (
	"testing"
	"time"
)

// FuzzNew checks that New either rejects a configuration with an error or
// returns a gate that works: it never panics, and a working gate admits
// exactly its limit.
func FuzzNew(f *testing.F) {
	f.Add(10, 1, 1000, int64(100e6), int64(1e9), 10, 0.0, 0, uint8(0), int64(0), 0.5)
	f.Add(1, 1, 1, int64(1), int64(1), 1, 0.99, 5, uint8(1), int64(5e6), 1.0)
	f.Add(0, -1, 0, int64(-1), int64(0), 0, 1.5, -1, uint8(9), int64(-1), -0.1)
	f.Fuzz(func(t *testing.T, initial, minL, maxL int, minW, maxW int64, minS int,
		pct float64, qcap int, order uint8, qto int64, share float64) {
		opts := []Option{
			WithMinLimit(minL), WithMaxLimit(maxL),
			WithWindow(time.Duration(minW), time.Duration(maxW)), WithMinSamples(minS),
			WithPercentile(pct),
		}
		if qcap != 0 {
			opts = append(opts, WithQueue(qcap, QueueOrder(order)), WithQueueTimeout(time.Duration(qto)))
		}
		if share != 0.5 {
			opts = append(opts, WithPartitions(map[string]float64{"a": share}))
		}
		l, err := New(Fixed(initial), opts...)
		if err != nil {
			if l != nil {
				t.Fatal("non-nil limiter with an error")
			}
			return
		}
		if initial > 64 {
			return // too slow to fill; validity is what matters here
		}
		var toks []Token
		for {
			tok, ok := l.TryAcquire()
			if !ok {
				break
			}
			toks = append(toks, tok)
			if len(toks) > initial {
				t.Fatalf("admitted %d with limit %d", len(toks), initial)
			}
		}
		if share == 0.5 && len(toks) != initial {
			t.Fatalf("admitted %d with limit %d and no partitions", len(toks), initial)
		}
		for _, tok := range toks {
			tok.Success()
		}
		if l.InFlight() != 0 {
			t.Fatalf("in-flight %d after releasing all", l.InFlight())
		}
	})
}
