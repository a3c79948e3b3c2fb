package simpeers

import (
	"math"
	"math/rand/v2"
	"time"

	"github.com/sluicehq/sluice/adaptive"
	"github.com/sluicehq/sluice/sim"
)

// l10 is Netflix's Log10RootFunction with baseline 0: max(1, ⌊log10 x⌋),
// computed on integers so that powers of ten are exact.
func l10(x int) int {
	n := 0
	for x >= 10 {
		x /= 10
		n++
	}
	return max(1, n)
}

// Vegas is Netflix concurrency-limits' VegasLimit (limit/VegasLimit.java)
// with its defaults: initial limit 20, max 1000, smoothing 1.0,
// alpha = 3·L10(L), beta = 6·L10(L), threshold = L10(L),
// increase L + L10(L), decrease L − L10(L), probe multiplier 30, where
// L10(x) = max(1, ⌊log10 x⌋).
//
// The Java limit sees every request (onSample per completion); Update
// replays the window's requests one by one, drops first, and the policy
// NetflixVegas uses one-sample windows, so in practice every Update is one
// request. Per request, in Java's order:
//
//  1. probeCount++; when probeCount ≥ jitter·30·L, with jitter ~ U(0.5, 1)
//     redrawn at each probe: rtt_noload := rtt, probeCount := 0, done;
//  2. when rtt_noload = 0 or the window's fastest RTT is below rtt_noload:
//     rtt_noload := that RTT, done;
//  3. otherwise L is moved by the rule of next.
//
// The window's mean RTT (Sample.RTT) is the request's rtt, its fastest
// (Sample.MinRTT) the one compared with rtt_noload in step 2 (the same for a
// one-sample window), and Sample.MaxInFlight the in-flight count (Java passes
// the in-flight count at the request's admission). A drop carries no RTT in
// sluice's gate, so a dropped request skips steps 1–2 (it still counts
// toward the probe) and goes straight to the drop branch of next; in Java it
// would go through them with the time it took to fail.
//
// Build it with NewVegas; a Vegas is for one gate.
type Vegas struct {
	limit      float64 // Java's estimatedLimit
	noLoad     time.Duration
	probeCount int
	jitter     float64
	rng        *rand.Rand
}

// Netflix VegasLimit defaults.
const (
	vegasInitial    = 20
	vegasMax        = 1000
	vegasSmoothing  = 1.0
	vegasProbeMulti = 30
)

// NewVegas returns a VegasLimit with Netflix's defaults whose probe jitter
// is drawn from a PCG stream seeded with seed (Java uses ThreadLocalRandom),
// so runs are reproducible.
func NewVegas(seed uint64) *Vegas {
	v := &Vegas{limit: vegasInitial, rng: rand.New(rand.NewPCG(seed, 0x7e6a5))}
	v.redrawJitter()
	return v
}

func (v *Vegas) redrawJitter() { v.jitter = 0.5 + 0.5*v.rng.Float64() }

// InitialLimit returns 20, Netflix's default.
func (v *Vegas) InitialLimit() int { return vegasInitial }

// Update applies VegasLimit to each request of the window (see the type's
// doc comment) and returns ⌊L⌋.
func (v *Vegas) Update(s adaptive.Sample) int {
	for range s.Dropped {
		v.onSample(0, 0, s.MaxInFlight, true)
	}
	for range s.Count {
		v.onSample(s.RTT, s.MinRTT, s.MaxInFlight, false)
	}
	return int(v.limit)
}

// onSample is VegasLimit._update for one request.
func (v *Vegas) onSample(rtt, minRTT time.Duration, inflight int, drop bool) {
	v.probeCount++
	if !drop {
		if v.jitter*vegasProbeMulti*v.limit <= float64(v.probeCount) {
			v.redrawJitter()
			v.probeCount = 0
			v.noLoad = rtt
			return
		}
		if v.noLoad == 0 || minRTT < v.noLoad {
			v.noLoad = minRTT
			return
		}
	}
	v.limit = v.next(rtt, inflight, drop)
}

// next is VegasLimit.updateEstimatedLimit. With queue = ⌈L·(1 − rtt_noload/rtt)⌉
// and a = L10(⌊L⌋):
//
//	drop                      →  L − a
//	2·inflight < L            →  L            (app-limited: hold)
//	queue ≤ a   (threshold)   →  L + 6a       (beta)
//	queue < 3a  (alpha)       →  L + a
//	queue > 6a  (beta)        →  L − a
//	otherwise                 →  L
//
// then new = clamp(new, 1, 1000) and L' = (1−s)·L + s·new with s = 1.
func (v *Vegas) next(rtt time.Duration, inflight int, drop bool) float64 {
	l := v.limit
	a := float64(l10(int(l)))
	var n float64
	switch {
	case drop:
		n = l - a
	case float64(inflight)*2 < l:
		return l
	default:
		queue := math.Ceil(l * (1 - float64(v.noLoad)/float64(rtt)))
		switch {
		case queue <= a:
			n = l + 6*a
		case queue < 3*a:
			n = l + a
		case queue > 6*a:
			n = l - a
		default:
			return l
		}
	}
	n = min(max(n, 1), vegasMax)
	return (1-vegasSmoothing)*l + vegasSmoothing*n
}

// Gradient2 is Netflix concurrency-limits' Gradient2Limit
// (limit/Gradient2Limit.java) with its defaults: initial limit 20, min 20,
// max 200, smoothing 0.2, queue size 4, long window 600, RTT tolerance 1.5.
// Per update, with short = the sample's RTT:
//
//	long  = EMA of short, factor 2/(600+1), the plain mean of the first 10
//	if long/short > 2:  stored long *= 0.95   (the update below uses long before the decay)
//	if inflight < L/2:  hold                  (app-limited)
//	gradient = clamp(1.5·long/short, 0.5, 1.0)
//	new = L·gradient + 4
//	L'  = clamp(0.8·L + 0.2·new, 20, 200)
//
// Drops are not a signal (Java ignores didDrop); the policies built on it
// release dropped requests as successes so that, as in Java, their RTT is a
// sample like any other.
//
// Java's Gradient2Limit sees every request; wrapped in WindowedLimit it sees
// one sample per window (the window's mean RTT and peak in-flight). A
// per-sample Gradient2 (NewGradient2(true)) replays every request of the
// window with the window's mean RTT; a windowed one (false) updates once per
// window.
type Gradient2 struct {
	limit     float64
	long      float64
	longN     int
	longSum   float64
	perSample bool
}

// Netflix Gradient2Limit defaults.
const (
	g2Initial    = 20
	g2Min        = 20
	g2Max        = 200
	g2Smoothing  = 0.2
	g2QueueSize  = 4
	g2LongWindow = 600
	g2Warmup     = 10
	g2Tolerance  = 1.5
)

// NewGradient2 returns a Gradient2Limit with Netflix's defaults, updated
// once per request of each window (perSample) or once per window.
func NewGradient2(perSample bool) *Gradient2 {
	return &Gradient2{limit: g2Initial, perSample: perSample}
}

// InitialLimit returns 20, Netflix's default.
func (g *Gradient2) InitialLimit() int { return g2Initial }

// Update applies Gradient2Limit to the window (see the type's doc comment)
// and returns ⌊L⌋.
func (g *Gradient2) Update(s adaptive.Sample) int {
	if s.Count == 0 {
		return int(g.limit)
	}
	n := 1
	if g.perSample {
		n = s.Count
	}
	for range n {
		g.onSample(float64(s.RTT), s.MaxInFlight)
	}
	return int(g.limit)
}

// addLong is ExpAvgMeasurement(600, 10).add: the plain mean of the first 10
// samples, then long = long·(1−f) + x·f with f = 2/(600+1).
func (g *Gradient2) addLong(x float64) float64 {
	if g.longN < g2Warmup {
		g.longN++
		g.longSum += x
		g.long = g.longSum / float64(g.longN)
	} else {
		f := 2.0 / (g2LongWindow + 1)
		g.long = g.long*(1-f) + x*f
	}
	return g.long
}

// onSample is Gradient2Limit._update for one sample; the formula is in the
// type's doc comment.
func (g *Gradient2) onSample(short float64, inflight int) {
	short = max(short, 1) // Java divides by the RTT; a zero RTT would read as infinitely fast anyway
	long := g.addLong(short)
	if long/short > 2 {
		g.long *= 0.95
	}
	if float64(inflight) < g.limit/2 {
		return
	}
	gradient := min(max(g2Tolerance*long/short, 0.5), 1.0)
	n := g.limit*gradient + g2QueueSize
	n = g.limit*(1-g2Smoothing) + n*g2Smoothing
	g.limit = min(max(n, g2Min), g2Max)
}

// perRequest is the sampling window that makes sluice's gate call its
// algorithm once per completed request: a window closes at the first release
// after it has lasted 1 ns and holds one sample or drop. Two releases at the
// same nanosecond share a window, which Update replays request by request.
func perRequest() []adaptive.Option {
	return []adaptive.Option{adaptive.WithWindow(time.Nanosecond, time.Nanosecond), adaptive.WithMinSamples(1)}
}

// NetflixVegas returns the policy "netflix-vegas": Vegas (Netflix's
// VegasLimit with its defaults) on sluice's gate, updated once per request.
// Successes are samples and drops are drops, as in Java's onSuccess and
// onDropped.
func NetflixVegas() sim.PolicySpec {
	return sim.PolicySpec{
		Name:        "netflix-vegas",
		Description: "Netflix VegasLimit as published, per request",
		New: func(e sim.Env) (sim.Policy, error) {
			opts := append(perRequest(), adaptive.WithClock(e.Clock), adaptive.WithMaxLimit(vegasMax))
			return sim.NewGatePolicy(NewVegas(1), opts...)
		},
	}
}

// NetflixGradient2 returns the policy "netflix-gradient2": Gradient2
// (Netflix's Gradient2Limit with its defaults, tolerance 1.5, queue size 4)
// on sluice's gate, updated once per request, as Java's Gradient2Limit is
// under a SimpleLimiter. Dropped requests are released as samples with the
// time they took (Java's onDropped passes the RTT and Gradient2Limit ignores
// the drop flag).
func NetflixGradient2() sim.PolicySpec {
	return sim.PolicySpec{
		Name:        "netflix-gradient2",
		Description: "Netflix Gradient2Limit as published, per request",
		New: func(e sim.Env) (sim.Policy, error) {
			opts := append(perRequest(), adaptive.WithClock(e.Clock), adaptive.WithMinLimit(g2Min), adaptive.WithMaxLimit(g2Max))
			p, err := sim.NewGatePolicy(NewGradient2(true), opts...)
			if err != nil {
				return nil, err
			}
			return dropsAsSamples{p}, nil
		},
	}
}

// NetflixGradient2Windowed returns the policy "netflix-gradient2-1s":
// Gradient2 behind Netflix's WindowedLimit with its defaults (1 s windows of
// at least 10 samples, the window's mean RTT and peak in-flight count),
// i.e. one update per second. Drops are samples, as in NetflixGradient2.
func NetflixGradient2Windowed() sim.PolicySpec {
	return sim.PolicySpec{
		Name:        "netflix-gradient2-1s",
		Description: "Netflix Gradient2Limit behind WindowedLimit (1 s windows)",
		New: func(e sim.Env) (sim.Policy, error) {
			p, err := sim.NewGatePolicy(NewGradient2(false), adaptive.WithClock(e.Clock),
				adaptive.WithWindow(time.Second, time.Second), adaptive.WithMinSamples(10),
				adaptive.WithMinLimit(g2Min), adaptive.WithMaxLimit(g2Max))
			if err != nil {
				return nil, err
			}
			return dropsAsSamples{p}, nil
		},
	}
}

// dropsAsSamples is a gate policy that releases every request, dropped or
// not, as a success, so its round-trip time is a sample.
type dropsAsSamples struct{ *sim.GatePolicy }

func (p dropsAsSamples) Done(t sim.Ticket, _ sim.Outcome) { t.Token.Success() }
