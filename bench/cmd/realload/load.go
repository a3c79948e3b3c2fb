package main

import (
	"math"
	"sort"
	"time"
)

// outcome is what became of one request.
type outcome uint8

const (
	ok      outcome = iota // answered 200 / OK
	refused                // answered 503 or 429 / UNAVAILABLE or RESOURCE_EXHAUSTED
	timeout                // no answer within the client timeout
	failed                 // any other error or status
)

// sample is one request of a load run.
type sample struct {
	at  time.Duration // when it was sent, from the start of the run
	lat time.Duration // how long until its answer (or the timeout)
	out outcome
}

// step is one stretch of a load profile: rate requests per second for dur.
type step struct {
	rate float64
	dur  time.Duration
}

// profile is an open-loop load: its steps, one after the other.
type profile []step

// total is the profile's length.
func (p profile) total() time.Duration {
	var d time.Duration
	for _, s := range p {
		d += s.dur
	}
	return d
}

// Pace says how long to wait before the next request, given the time since
// the start and the requests sent so far, and whether the profile has
// ended: requests are sent at the steps' rates, and a sender that falls
// behind sends at once until it has caught up. It implements vegeta.Pacer,
// and paces the gRPC load too.
func (p profile) Pace(elapsed time.Duration, hits uint64) (time.Duration, bool) {
	var start time.Duration
	due := 0.0 // requests due by the start of the current step
	next := float64(hits) + 1
	for _, s := range p {
		end := start + s.dur
		inStep := s.rate * s.dur.Seconds()
		if next <= due+inStep {
			at := start + time.Duration((next-due)/s.rate*float64(time.Second))
			if at <= elapsed {
				return 0, false
			}
			return at - elapsed, false
		}
		due += inStep
		start = end
	}
	return 0, true
}

// Rate is the profile's rate at elapsed, in requests per second (it
// implements vegeta.Pacer).
func (p profile) Rate(elapsed time.Duration) float64 {
	var start time.Duration
	for _, s := range p {
		if elapsed < start+s.dur {
			return s.rate
		}
		start += s.dur
	}
	return 0
}

// window is the part of a run a row is judged on: requests sent in
// [from, to).
type window struct{ from, to time.Duration }

// tally is a row's request figures over its window.
type tally struct {
	sent, ok, good, refused, timeout, failed int
	secs                                     float64       // the window's length
	p50, p99                                 time.Duration // of the successful requests
}

// count tallies the samples sent within w; good counts successes within slo.
func count(samples []sample, w window, slo time.Duration) tally {
	t := tally{secs: (w.to - w.from).Seconds()}
	var lats []time.Duration
	for _, s := range samples {
		if s.at < w.from || s.at >= w.to {
			continue
		}
		t.sent++
		switch s.out {
		case ok:
			t.ok++
			lats = append(lats, s.lat)
			if s.lat <= slo {
				t.good++
			}
		case refused:
			t.refused++
		case timeout:
			t.timeout++
		default:
			t.failed++
		}
	}
	t.p50, t.p99 = quantile(lats, 0.5), quantile(lats, 0.99)
	return t
}

// quantile returns the q-quantile of d (nearest rank), or -1 if d is empty.
// It sorts d.
func quantile(d []time.Duration, q float64) time.Duration {
	if len(d) == 0 {
		return -1
	}
	sort.Slice(d, func(i, j int) bool { return d[i] < d[j] })
	i := int(math.Ceil(q*float64(len(d)))) - 1
	return d[max(i, 0)]
}
