package sim

import (
	"container/heap"
	"math"
)

// ps is the processor-sharing server model that Run and RunRealtime share.
// With n requests in their CPU phase the server does
//
//	rate(n) = n                     for n ≤ c
//	rate(n) = c / (1 + κ·(n − c))   for n > c
//
// cores' worth of work per nanosecond, shared equally; v is the work each
// CPU-phase request has received so far, so a request that started at level
// v₀ with work w finishes when v reaches v₀ + w (its finishV).
type ps struct {
	cores, kappa float64
	v            float64 // work per CPU-phase request so far (ns)
	lastT        int64   // model time v was last brought up to
	busy         float64 // core-ns of work done in all
	cpu          cpuHeap
}

// rate is the whole server's speed, in cores' worth of work, with n
// requests in their CPU phase: n up to c, then c/(1+κ(n−c)).
func (p *ps) rate(n int) float64 {
	if float64(n) <= p.cores {
		return float64(n)
	}
	return p.cores / (1 + p.kappa*(float64(n)-p.cores))
}

// perJob is the speed each CPU-phase request gets: rate(n)/n.
func (p *ps) perJob() float64 {
	n := len(p.cpu)
	if n == 0 {
		return 0
	}
	return p.rate(n) / float64(n)
}

// advance credits every CPU-phase request with the work done up to t.
func (p *ps) advance(t int64) {
	if t > p.lastT {
		p.v += float64(t-p.lastT) * p.perJob()
		p.busy += float64(t-p.lastT) * p.rate(len(p.cpu))
		p.lastT = t
	}
}

// next returns the model time of the next end of a CPU phase, never if none.
func (p *ps) next() int64 {
	if len(p.cpu) == 0 {
		return never
	}
	d := (p.cpu[0].finishV - p.v) / p.perJob()
	return p.lastT + max(int64(math.Ceil(d)), 0)
}

// start puts r in its CPU phase for r.work.
func (p *ps) start(r *request) {
	r.finishV = p.v + r.work
	heap.Push(&p.cpu, r)
}

// pop takes out the request whose CPU phase ends first.
func (p *ps) pop() *request { return heap.Pop(&p.cpu).(*request) }

// abort takes r out of its CPU phase and returns the work it received.
func (p *ps) abort(r *request) float64 {
	done := r.work - (r.finishV - p.v)
	heap.Remove(&p.cpu, r.hidx)
	return done
}

// cpuHeap holds the requests in their CPU phase, ordered by the work level
// at which they finish.
type cpuHeap []*request

func (h cpuHeap) Len() int           { return len(h) }
func (h cpuHeap) Less(i, j int) bool { return h[i].finishV < h[j].finishV }
func (h cpuHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].hidx = i
	h[j].hidx = j
}
func (h *cpuHeap) Push(x any) {
	r := x.(*request)
	r.hidx = len(*h)
	*h = append(*h, r)
}
func (h *cpuHeap) Pop() any {
	old := *h
	r := old[len(old)-1]
	*h = old[:len(old)-1]
	r.hidx = -1
	return r
}
