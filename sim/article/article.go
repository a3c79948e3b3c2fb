// Package article is the rate-limiting article's proof: it replays the
// simulations of the article the ratelimit package was seeded from (System
// Design, Plainly — Part 6) against the real ratelimit code on a virtual
// clock, measures the figures the article quotes, and checks the ones that
// carry its claims.
//
// A replay offers a client's requests one by one to a fresh
// ratelimit.Limiter at their exact instants; unlike a sim.Scenario it has
// no server and no policy: the limiter is the system. `sluice sim` runs the
// replays as its seed-* scenarios.
package article

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"github.com/sluicehq/sluice/clock"
	"github.com/sluicehq/sluice/ratelimit"
)

// Scenario is one of the article's simulations, replayed. Each figure
// comes with the article's value, and Targets check the figures that carry
// the article's claim. Only seed-sliding-window is random (Poisson arrivals
// from the seed); the others offer the same requests for every seed.
type Scenario struct {
	Name        string
	Description string
	// Targets are judged on the figures: a target's Metric is a figure's
	// Metric, or a figure's Metric plus "_ratio" for Value/Of.
	Targets []Target
	run     func(seed uint64) ([]Figure, error)
}

// Target is one pass/fail check of a replay: the named figure (or its
// Value/Of, when Metric is the figure's Metric plus "_ratio") must be within
// [Min, Max]; a nil bound is no bound.
type Target struct {
	Metric string
	Min    *float64
	Max    *float64
}

// AtLeast builds a target that metric ≥ v.
func AtLeast(metric string, v float64) Target { return Target{Metric: metric, Min: &v} }

// AtMost builds a target that metric ≤ v.
func AtMost(metric string, v float64) Target { return Target{Metric: metric, Max: &v} }

// Exactly builds a target that metric = v.
func Exactly(metric string, v float64) Target { return Target{Metric: metric, Min: &v, Max: &v} }

// Figure is one measured figure of a replay.
type Figure struct {
	Metric string  `json:"metric"`
	Value  float64 `json:"value"`
	// Of is what Value is a count out of (requests offered), 0 if nothing.
	Of float64 `json:"of,omitempty"`
	// Article is the article's figure, as it states it ("" if it gives none).
	Article string `json:"article,omitempty"`
	// Target is the target on the figure, e.g. "= 200" or "≤ 10%" (a share
	// of Of); "" if none.
	Target string `json:"target,omitempty"`
	// Pass reports whether the figure meets its target (true without one).
	Pass bool `json:"pass"`
}

// Result is what one replay measured.
type Result struct {
	Scenario string   `json:"scenario"`
	Seed     uint64   `json:"seed"`
	Figures  []Figure `json:"figures"`
	// Pass reports whether every target was met.
	Pass bool `json:"pass"`
}

// IsScenario reports whether name is a replay's name (seed-…), the names
// `sluice sim` tells from its policy scenarios by.
func IsScenario(name string) bool { return strings.HasPrefix(name, "seed-") }

// Find returns the named scenarios from all, in the order named, or an
// error naming the first unknown one.
func Find(all []Scenario, names []string) ([]Scenario, error) {
	var out []Scenario
	for _, n := range names {
		i := slices.IndexFunc(all, func(x Scenario) bool { return x.Name == n })
		if i < 0 {
			return nil, fmt.Errorf("sim: unknown scenario %q", n)
		}
		out = append(out, all[i])
	}
	return out, nil
}

// Run replays scenario sc with the given seed and judges its targets. The
// same inputs give the same Result, to the bit.
func Run(sc Scenario, seed uint64) (*Result, error) {
	if sc.run == nil {
		return nil, fmt.Errorf("sim: seed scenario %q: not one of article.Scenarios", sc.Name)
	}
	figs, err := sc.run(seed)
	if err != nil {
		return nil, fmt.Errorf("sim: seed scenario %q: %w", sc.Name, err)
	}
	r := &Result{Scenario: sc.Name, Seed: seed, Figures: figs, Pass: true}
	for i := range r.Figures {
		r.Figures[i].Pass = true
	}
	for _, t := range sc.Targets {
		i, ratio := -1, false
		for j, f := range r.Figures {
			if f.Metric == t.Metric {
				i = j
			} else if f.Of > 0 && f.Metric+"_ratio" == t.Metric {
				i, ratio = j, true
			}
		}
		if i < 0 {
			return nil, fmt.Errorf("sim: seed scenario %q: the target on %s names no figure", sc.Name, t.Metric)
		}
		f := &r.Figures[i]
		v := f.Value
		if ratio {
			v /= f.Of
		}
		pass := (t.Min == nil || v >= *t.Min) && (t.Max == nil || v <= *t.Max)
		f.Target = joinTarget(f.Target, seedTargetString(t, ratio))
		f.Pass = f.Pass && pass
		r.Pass = r.Pass && pass
	}
	return r, nil
}

// RunSeeds replays every scenario of scs with each of the seeds seed …
// seed+seeds−1: out[i][k] is scenario i's Result with seed+k, or nil where
// the replay failed; errs holds the failures, scenario by scenario and seed
// by seed.
func RunSeeds(scs []Scenario, seed uint64, seeds int) (out [][]*Result, errs []error) {
	out = make([][]*Result, len(scs))
	for i, sc := range scs {
		out[i] = make([]*Result, seeds)
		for k := range seeds {
			r, err := Run(sc, seed+uint64(k))
			if err != nil {
				errs = append(errs, err)
				continue
			}
			out[i][k] = r
		}
	}
	return out, errs
}

func joinTarget(a, b string) string {
	if a == "" {
		return b
	}
	return a + " and " + b
}

// seedTargetString renders a target for the figure it is on: "= 200",
// "≥ 10", "≤ 5", "45–55%" (a ratio, in percent).
func seedTargetString(t Target, ratio bool) string {
	f := func(v float64) string {
		if ratio {
			return fmt.Sprintf("%g%%", 100*v)
		}
		return fmt.Sprintf("%g", v)
	}
	switch {
	case t.Min != nil && t.Max != nil && *t.Min == *t.Max:
		return "= " + f(*t.Min)
	case t.Min != nil && t.Max != nil:
		return f(*t.Min) + "–" + f(*t.Max)
	case t.Min != nil:
		return "≥ " + f(*t.Min)
	case t.Max != nil:
		return "≤ " + f(*t.Max)
	}
	return ""
}

// Scenarios returns the four simulations of the rate-limiting article
// (../shared/reference/rate-limiting-article.txt): the boundary attack on a
// fixed window, the token bucket's bursts, the sliding window counter's
// estimate error and GCRA's spacing.
func Scenarios() []Scenario {
	return []Scenario{
		{
			Name: "seed-boundary-attack",
			Description: "100/min: 100 requests in the last second of a minute and 100 in the first second of the next, " +
				"against the fixed window, the sliding log and the sliding window counter",
			Targets: []Target{
				Exactly("fixed_window_admitted_2s", 200),
				Exactly("fixed_window_peak_60s", 200),
				Exactly("sliding_log_admitted_2s", 100),
				AtMost("sliding_log_peak_60s", 100),
				// The counter only estimates the rolling count; its
				// error here is small but not zero.
				AtMost("sliding_window_peak_60s", 105),
			},
			run: runBoundaryAttack,
		},
		{
			Name: "seed-token-bucket",
			Description: "token bucket 100/s, burst 500: a burst of 500 over 50 ms, another 2 s later, " +
				"then 1,000 requests at 100/s from the moment the bucket is drained",
			Targets: []Target{
				Exactly("first_burst_admitted", 500),
				Exactly("second_burst_admitted", 205),
				Exactly("steady_admitted", 1000),
			},
			run: runTokenBucket,
		},
		{
			Name: "seed-sliding-window",
			Description: "sliding window counter vs sliding log on Poisson 90/min for 2 min, doubled from 1:00 to 1:40 " +
				"(random: seeded); then the minute after, whose previous window held the spike",
			Targets: []Target{
				// The article's figures are one draw; across seeds 1–1000
				// the medians are 1.7, 7 and 3 of 239, and the 99.9th
				// percentiles 5.9, 20 and 16%. These bounds keep the
				// counter in the same regime (a few percent of the limit)
				// and hold for every seed but 762 (37 of 225 flipped).
				AtMost("mean_abs_error", 6),
				AtMost("max_abs_error", 20),
				AtMost("decisions_flipped_ratio", 0.15),
			},
			run: runSlidingWindow,
		},
		{
			Name: "seed-gcra",
			Description: "GCRA 100/s with 100 ms tolerance (burst 11): a burst of 20, " +
				"then 200/s for the rest of the half second, then 50/s for 2 s",
			Targets: []Target{
				Exactly("burst_admitted", 11),
				Exactly("at_200rps_admitted", 49),
				Exactly("at_50rps_admitted", 100),
				AtLeast("min_spacing_ms", 10),
			},
			run: runGCRA,
		},
	}
}

// epoch is the wall time a replay's virtual clock starts at: a minute
// boundary (the simulator's epoch).
var epoch = time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)

// offered is a client's requests, at offsets from the start of the run
// (epoch), in time order.
type offered []time.Duration

// evenly returns n requests spread evenly over span from start: the first at
// start, the last at start+span.
func evenly(start time.Duration, n int, span time.Duration) offered {
	out := make(offered, n)
	for i := range out {
		out[i] = start
		if n > 1 {
			out[i] += time.Duration(int64(span) * int64(i) / int64(n-1))
		}
	}
	return out
}

// every returns n requests gap apart, the first at start.
func every(start time.Duration, n int, gap time.Duration) offered {
	out := make(offered, n)
	for i := range out {
		out[i] = start + time.Duration(i)*gap
	}
	return out
}

// replay offers the requests at, one by one at their instants, to a fresh
// limiter of alg and lim on a virtual clock, and returns its decisions.
func replay(alg ratelimit.Algorithm, lim ratelimit.Limit, at offered) ([]ratelimit.Result, error) {
	clk := clock.NewManual(epoch)
	l, err := ratelimit.New(alg, lim, ratelimit.WithClock(clk))
	if err != nil {
		return nil, err
	}
	ctx := context.Background()
	out := make([]ratelimit.Result, len(at))
	for i, t := range at {
		clk.Set(epoch.Add(t))
		if out[i], err = l.Allow(ctx, "client"); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// admitted counts the requests of res[from:to] that were admitted.
func admitted(res []ratelimit.Result, from, to int) int {
	n := 0
	for _, r := range res[from:to] {
		if r.Allowed {
			n++
		}
	}
	return n
}

// peak returns the most requests admitted within any window of length w,
// (t−w, t].
func peak(at offered, res []ratelimit.Result, w time.Duration) int {
	var ts []time.Duration
	for i, r := range res {
		if r.Allowed {
			ts = append(ts, at[i])
		}
	}
	best, lo := 0, 0
	for hi, t := range ts {
		for ts[lo] <= t-w {
			lo++
		}
		best = max(best, hi-lo+1)
	}
	return best
}

// runBoundaryAttack: the article's boundary burst. A 100-per-minute limit;
// the client sends 100 requests 10 ms apart in 0:59–1:00 and 100 in 1:00–1:01.
func runBoundaryAttack(uint64) ([]Figure, error) {
	lim := ratelimit.Limit{Rate: 100, Period: time.Minute}
	at := append(every(59*time.Second, 100, 10*time.Millisecond), every(time.Minute, 100, 10*time.Millisecond)...)
	n := float64(len(at))
	var figs []Figure
	for _, a := range []struct {
		alg                   ratelimit.Algorithm
		name                  string
		article2s, article60s string
	}{
		{ratelimit.FixedWindow, "fixed_window", "200 of 200", "200"},
		{ratelimit.SlidingLog, "sliding_log", "", "≤ 100"},
		{ratelimit.SlidingWindow, "sliding_window", "", ""},
	} {
		res, err := replay(a.alg, lim, at)
		if err != nil {
			return nil, err
		}
		figs = append(figs,
			Figure{Metric: a.name + "_admitted_2s", Value: float64(peak(at, res, 2*time.Second)), Of: n, Article: a.article2s},
			Figure{Metric: a.name + "_peak_60s", Value: float64(peak(at, res, time.Minute)), Article: a.article60s})
	}
	return figs, nil
}

// runTokenBucket: the article's token bucket, capacity 500 refilled at
// 100/s. A burst is 500 requests spread evenly over 50 ms; the first at 0,
// the second at 2 s (200 tokens refilled, 5 more while it arrives); then
// 1,000 requests at 100/s, the first 10 ms after the second burst's last,
// when the drained bucket has refilled exactly one token.
func runTokenBucket(uint64) ([]Figure, error) {
	lim := ratelimit.Limit{Rate: 100, Period: time.Second, Burst: 500}
	burst := 50 * time.Millisecond
	at := append(evenly(0, 500, burst), evenly(2*time.Second, 500, burst)...)
	at = append(at, every(2*time.Second+burst+10*time.Millisecond, 1000, 10*time.Millisecond)...)
	res, err := replay(ratelimit.TokenBucket, lim, at)
	if err != nil {
		return nil, err
	}
	return []Figure{
		{Metric: "first_burst_admitted", Value: float64(admitted(res, 0, 500)), Of: 500, Article: "500 of 500"},
		{Metric: "second_burst_admitted", Value: float64(admitted(res, 500, 1000)), Of: 500, Article: "205 of 500"},
		{Metric: "steady_admitted", Value: float64(admitted(res, 1000, 2000)), Of: 1000, Article: "1000 of 1000"},
	}, nil
}

// ratePhase is a Poisson rate, per minute, from a moment on.
type ratePhase struct {
	at     time.Duration
	perMin float64
}

// poisson draws a Poisson process with piecewise constant rate until end.
// At each change of rate the process restarts from the change (the
// exponential is memoryless, so this is exact).
func poisson(r *rand.Rand, phases []ratePhase, end time.Duration) offered {
	var out offered
	t, i := 0.0, 0
	for {
		next := end.Seconds()
		if i+1 < len(phases) {
			next = phases[i+1].at.Seconds()
		}
		gap := r.ExpFloat64() * 60 / phases[i].perMin
		if t+gap < next {
			t += gap
			out = append(out, time.Duration(math.Round(t*1e9)))
			continue
		}
		if i+1 >= len(phases) {
			return out
		}
		t, i = next, i+1
	}
}

// runSlidingWindow: the article's sliding window counter. Poisson traffic at
// 90/min for two minutes, doubled from 1:00 to 1:40, is offered to a sliding
// window counter and to a sliding log, both with a limit far above the
// traffic (10,000/min), so that both admit everything and each reports the
// rolling count of the last minute through Remaining: the counter its
// estimate (prev·(60 s − elapsed)/60 s, rounded up, + current), the log the
// exact count. The error is estimate − exact at each request; a decision is
// flipped when the two counts fall on different sides of a 100-per-minute
// limit. The run goes on at 90/min for a third minute, whose previous window
// held the spike: the counter's assumption that the previous window was
// evenly spread is wrong there, and the figures of that minute show by how
// much (no article figure, no target).
func runSlidingWindow(seed uint64) ([]Figure, error) {
	const limit = 100
	big := ratelimit.Limit{Rate: 10000, Period: time.Minute}
	r := rand.New(rand.NewPCG(seed, 7))
	at := poisson(r, []ratePhase{{0, 90}, {60 * time.Second, 180}, {100 * time.Second, 90}}, 3*time.Minute)
	est, err := replay(ratelimit.SlidingWindow, big, at)
	if err != nil {
		return nil, err
	}
	exact, err := replay(ratelimit.SlidingLog, big, at)
	if err != nil {
		return nil, err
	}
	type stats struct {
		n, flipped int
		sum, max   float64
	}
	var s [2]stats // the article's two minutes, the minute after
	for i, t := range at {
		e, x := big.Rate-est[i].Remaining, big.Rate-exact[i].Remaining
		st := &s[0]
		if t >= 2*time.Minute {
			st = &s[1]
		}
		d := math.Abs(float64(e - x))
		st.n++
		st.sum += d
		st.max = max(st.max, d)
		if (e <= limit) != (x <= limit) {
			st.flipped++
		}
	}
	if s[0].n == 0 {
		return nil, fmt.Errorf("no requests drawn")
	}
	return []Figure{
		{Metric: "mean_abs_error", Value: s[0].sum / float64(s[0].n), Article: "2.44"},
		{Metric: "max_abs_error", Value: s[0].max, Article: "8"},
		{Metric: "decisions_flipped", Value: float64(s[0].flipped), Of: float64(s[0].n), Article: "1 of 239"},
		{Metric: "next_minute_max_abs_error", Value: s[1].max},
		{Metric: "next_minute_decisions_flipped", Value: float64(s[1].flipped), Of: float64(s[1].n)},
	}, nil
}

// runGCRA: the article's GCRA, 100/s with a 100 ms tolerance (Burst 11:
// τ = (11−1)·10 ms). A burst of 20 requests at 0; then 200/s for the rest of
// the half second (5 ms … 495 ms, 99 requests); then 50/s for two seconds
// from 0.5 s (100 requests). min_spacing_ms is the smallest gap between two
// requests admitted after the burst.
func runGCRA(uint64) ([]Figure, error) {
	lim := ratelimit.Limit{Rate: 100, Period: time.Second, Burst: 11}
	at := every(0, 20, 0)
	at = append(at, every(5*time.Millisecond, 99, 5*time.Millisecond)...)
	at = append(at, every(500*time.Millisecond, 100, 20*time.Millisecond)...)
	res, err := replay(ratelimit.GCRA, lim, at)
	if err != nil {
		return nil, err
	}
	gap, last := time.Duration(math.MaxInt64), time.Duration(-1)
	for i := 20; i < len(at); i++ {
		if res[i].Allowed {
			if last >= 0 {
				gap = min(gap, at[i]-last)
			}
			last = at[i]
		}
	}
	return []Figure{
		{Metric: "burst_admitted", Value: float64(admitted(res, 0, 20)), Of: 20, Article: "11 of 20"},
		{Metric: "at_200rps_admitted", Value: float64(admitted(res, 20, 119)), Of: 99, Article: "49 of 98"},
		{Metric: "at_50rps_admitted", Value: float64(admitted(res, 119, 219)), Of: 100, Article: "99 of 100"},
		{Metric: "min_spacing_ms", Value: gap.Seconds() * 1000, Article: "≥ 10"},
	}, nil
}
