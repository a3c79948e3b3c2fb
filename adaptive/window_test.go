package adaptive

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
	"unsafe"
)

func TestHistogramIndexIsMonotoneAndBounded(t *testing.T) {
	prev := -1
	for _, v := range []int64{0, 1, 31, 32, 33, 47, 48, 63, 64, 1000, 1 << 20, 1<<40 - 1, 1 << 40, math.MaxInt64} {
		i := histIndex(v)
		if i < prev || i >= histBuckets {
			t.Fatalf("histIndex(%d) = %d (prev %d, buckets %d)", v, i, prev, histBuckets)
		}
		prev = i
		if v < 1<<histMaxBits {
			lo, w := histLower(i)
			if v < lo || v >= lo+w {
				t.Fatalf("value %d outside its bucket [%d, %d)", v, lo, lo+w)
			}
			if v >= 32 && float64(w)/float64(lo) > 1.0/16+1e-12 {
				t.Fatalf("bucket %d too wide: %d/%d", i, w, lo)
			}
		}
	}
}

func TestHistogramPercentileWithinResolution(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	var vals []int64
	for range 10000 {
		vals = append(vals, int64(r.ExpFloat64()*float64(5*time.Millisecond)))
	}
	fill := func() *histogram {
		h := new(histogram)
		for _, v := range vals {
			h.add(v)
		}
		return h
	}
	h := fill()
	slices.Sort(vals)
	for _, p := range []float64{0.5, 0.9, 0.99} {
		exact := vals[int(math.Ceil(p*float64(len(vals))))-1]
		got := fill().takePercentile(p)
		if rel := math.Abs(float64(got-exact)) / float64(exact); rel > 0.035 {
			t.Errorf("p%v = %d, exact %d (rel err %.3f)", p*100, got, exact, rel)
		}
	}
	if h.takePercentile(0.5) == 0 || h.takePercentile(0.5) != 0 {
		t.Fatal("takePercentile must empty the histogram")
	}
}

func TestShardsTake(t *testing.T) {
	var ss shards
	ss.reset()
	h := &ss[3]
	for _, ms := range []int64{4, 1, 7} {
		if h.add(ms*int64(time.Millisecond), nil) {
			t.Fatal("three samples filled the window")
		}
	}
	h.drops.Add(2)
	h.noteInFlight(9)
	ss[5].noteInFlight(4)
	var s Sample
	ss.take(&s, nil, 0, 3)
	want := Sample{Count: 3, Dropped: 2, MaxInFlight: 9, RTT: 4 * time.Millisecond,
		MinRTT: time.Millisecond, AvgRTT: 4 * time.Millisecond, MaxRTT: 7 * time.Millisecond}
	if s != want {
		t.Fatalf("take = %+v\nwant %+v", s, want)
	}
	var s2 Sample
	ss.take(&s2, nil, 0, 0)
	if s2 != (Sample{MaxInFlight: 3}) {
		t.Fatalf("second take = %+v, want empty with carried in-flight 3", s2)
	}
}

func TestShardFillsLongBeforeOverflow(t *testing.T) {
	var ss shards
	ss.reset()
	h := &ss[0]
	// Samples of an hour count as maxMeanRTT in the sum; the window reports
	// full once the sum passes accSumFull, with room for 32 more such samples.
	n := 0
	for !h.add(int64(time.Hour), nil) {
		n++
	}
	if want := accSumFull/maxMeanRTT + 1; n+1 != want { // maxMeanRTT is 2^36-1
		t.Fatalf("full after %d samples, want %d", n+1, want)
	}
	for range 31 {
		h.add(int64(time.Hour), nil)
	}
	if !ss.full() {
		t.Fatal("shards not full")
	}
	var s Sample
	ss.take(&s, nil, 0, 0)
	if s.Count != n+32 || s.AvgRTT != maxMeanRTT || s.MaxRTT != time.Hour {
		t.Fatalf("after %d samples: %+v", n+32, s)
	}
	if unsafe.Sizeof(hot{}) != 64 || unsafe.Sizeof(shard{}) != 64 {
		t.Fatalf("hot is %d bytes and shard %d, want one 64-byte cache line each",
			unsafe.Sizeof(hot{}), unsafe.Sizeof(shard{}))
	}
}
