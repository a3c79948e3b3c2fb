package main

import (
	"crypto/sha256"
	"fmt"
	"time"
)

// spin does iters rounds of SHA-256 over a 32-byte block, each round hashing
// the previous digest, and returns the last digest's first byte so that the
// compiler cannot drop the loop. It is the CPU-bound handler's work: real
// instructions on a real core, with no allocation and no system call.
func spin(iters int) byte {
	var h [sha256.Size]byte
	for range iters {
		h = sha256.Sum256(h[:])
	}
	return h[0]
}

// calibrate measures how many spin rounds this process does per millisecond
// of CPU: the best of trials runs of spin over about trial of wall time
// each, each divided by the CPU time the process used meanwhile (getrusage;
// the wall time where the process's CPU time cannot be read). CPU time, not
// wall time, so that other processes taking the core during a trial do not
// count; the best, not the mean, because what remains (a busy sibling
// hyperthread, cache misses) can only slow a trial down.
func calibrate(trials int, trial time.Duration) float64 {
	const chunk = 256
	best := 0.0
	for range trials {
		n := 0
		start, cpu0 := time.Now(), processCPU()
		for time.Since(start) < trial {
			spin(chunk)
			n += chunk
		}
		used := processCPU() - cpu0
		if cpu0 == 0 || used <= 0 {
			used = time.Since(start)
		}
		if r := float64(n) / (float64(used) / float64(time.Millisecond)); r > best {
			best = r
		}
	}
	return best
}

// workload is one handler's cost: CPU work (spin for CPU of wall time at
// the calibrated rate) or I/O (a sleep with next to no CPU).
type workload struct {
	name  string        // "1ms", "10ms", "io"
	cpu   time.Duration // CPU per request; 0 for the I/O handler
	sleep time.Duration // wait per request; 0 for the CPU handlers
}

// noop is the workload that does nothing: the transport's own cost.
const noop = "noop"

// ioSleep is the I/O-bound handler's wait.
const ioSleep = 20 * time.Millisecond

// parseWorkload reads a workload name: "io", or a duration of CPU work
// such as "1ms" or "10ms".
func parseWorkload(s string) (workload, error) {
	if s == noop {
		return workload{name: s}, nil
	}
	if s == "io" {
		return workload{name: s, sleep: ioSleep}, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d <= 0 {
		return workload{}, fmt.Errorf("work %q: want io or a positive duration of CPU work such as 1ms", s)
	}
	return workload{name: s, cpu: d}, nil
}

// slo is the latency a response must meet to count as goodput: ten times
// the work (10 ms for 1 ms of CPU, 100 ms for 10 ms), and 200 ms for the
// I/O handler (ten times its 20 ms wait).
func (w workload) slo() time.Duration {
	if w.cpu > 0 {
		return 10 * w.cpu
	}
	if w.sleep > 0 {
		return 10 * w.sleep
	}
	return time.Second
}
