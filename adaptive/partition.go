package adaptive

import (
	"context"
	"math"
	"sort"
	"sync"
	"sync/atomic"
)

// partitions holds the named shares of a gate (WithPartitions).
type partitions struct {
	mu       sync.Mutex // serialises partitioned admission
	names    []string
	shares   []float64
	inFlight []atomic.Int64
	index    map[string]int32 // name → index+1
}

func newPartitions(shares map[string]float64) *partitions {
	p := &partitions{index: make(map[string]int32, len(shares))}
	for name := range shares {
		p.names = append(p.names, name)
	}
	sort.Strings(p.names)
	p.shares = make([]float64, len(p.names))
	p.inFlight = make([]atomic.Int64, len(p.names))
	for i, name := range p.names {
		p.shares[i] = shares[name]
		p.index[name] = int32(i + 1)
	}
	return p
}

// guaranteed is the number of slots a partition with share s is owed under
// limit lim: floor(s·lim). The floors of shares summing to at most 1 sum to
// at most lim.
func guaranteed(s float64, lim int64) int64 {
	return int64(math.Floor(s*float64(lim) + 1e-9))
}

// admitPartition takes a slot for partition part (0: none) if the rules of
// WithPartitions allow it:
//
//	owed(q) = max(0, floor(share_q·L) − inFlight_q)
//	admit p  ⇔  n < L  ∧  (inFlight_p < floor(share_p·L)  ∨  n + 1 + Σ_{q≠p} owed(q) ≤ L)
//
// Admissions that borrow keep n + Σ owed ≤ L, so a partition below its share
// always finds a free slot while n < L.
func (l *Limiter) admitPartition(part int32) bool {
	p := l.parts
	p.mu.Lock()
	defer p.mu.Unlock()
	for {
		s := l.h.state.Load()
		lim, n := unpack(s)
		if n >= lim {
			return false
		}
		var owed int64
		under := false
		for i, share := range p.shares {
			g := guaranteed(share, lim)
			in := p.inFlight[i].Load()
			if int32(i+1) == part {
				under = in < g
				continue
			}
			if in < g {
				owed += g - in
			}
		}
		if !under && n+1+owed > lim {
			return false
		}
		if l.h.state.CompareAndSwap(s, s+oneInFlight) {
			if part > 0 {
				p.inFlight[part-1].Add(1)
			}
			return true
		}
	}
}

func (l *Limiter) partitionName(part int32) string {
	if part == 0 {
		return ""
	}
	return l.parts.names[part-1]
}

// Partition is a handle on one named share of a gate (WithPartitions), got
// from Limiter.Partition; keep it rather than looking it up per request.
// Handles of unknown names admit only capacity owed to no partition. The zero
// Partition is not usable.
//
// On a partitioned gate TryAcquire does not defer to queued callers of other
// partitions (a partition below its share must be admitted at once), so it
// may take a slot freed an instant before the queue would have.
type Partition struct {
	l    *Limiter
	part int32
}

// Partition returns the handle of the named partition. An unknown name, or a
// gate without partitions, gives the handle of the unnamed remainder, which is
// what the Limiter's own TryAcquire and Acquire use.
func (l *Limiter) Partition(name string) Partition {
	if l.parts != nil {
		if i, ok := l.parts.index[name]; ok {
			return Partition{l: l, part: i}
		}
	}
	return Partition{l: l}
}

// Name returns the partition's name, or "" for the unnamed remainder.
func (p Partition) Name() string { return p.l.partitionName(p.part) }

// TryAcquire is the Limiter's TryAcquire within this partition.
func (p Partition) TryAcquire() (Token, bool) { return p.l.tryAcquire(p.part) }

// Acquire is the Limiter's Acquire within this partition.
func (p Partition) Acquire(ctx context.Context) (Token, error) {
	return p.l.acquire(ctx, p.part)
}

// InFlight returns the number of tokens the partition holds (for the unnamed
// remainder: those held by no partition).
func (p Partition) InFlight() int {
	if p.part == 0 {
		n := p.l.InFlight()
		if p.l.parts != nil {
			for i := range p.l.parts.inFlight {
				n -= int(p.l.parts.inFlight[i].Load())
			}
		}
		return max(n, 0)
	}
	return int(p.l.parts.inFlight[p.part-1].Load())
}

// Guaranteed returns the number of slots the partition is owed under the
// current limit, floor(share·limit); 0 for the unnamed remainder.
func (p Partition) Guaranteed() int {
	if p.part == 0 {
		return 0
	}
	return int(guaranteed(p.l.parts.shares[p.part-1], int64(p.l.Limit())))
}
