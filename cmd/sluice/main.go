// Command sluice is sluice's command line: `sluice sim` replays overload
// scenarios against the real limiter code in virtual time and prints how each
// policy held up; `sluice demo` (not built yet) will run a protected service.
package main

import (
	"fmt"
	"io"
	"os"
)

const usage = `usage: sluice <command>

commands:
  sim    replay overload scenarios against the real limiters (-h for flags)
  demo   run an HTTP + gRPC service protected by every guard (not built yet)
`

const status = `built so far:
  clock      System and Manual (virtual) clocks
  adaptive   the adaptive concurrency gate: exact lock-free admission,
             windowed RTT/drop sampling, FIFO/LIFO/CoDel wait queue,
             partitions with guaranteed shares, Fixed and AIMD algorithms,
             observer hooks
  gradient   Gradient2-style algorithm
  vegas      Vegas-style algorithm
  ratelimit  per-key rate limits: five algorithms, tiers, shadow mode,
             concurrency leases, in-memory store
  shed       priority load shedder, client throttle, retry budget, backoff
  metrics    the observer interfaces
  sim        discrete-event simulator (sluice sim), real-time mode
not built yet: ratelimit/redisstore, interceptors, metrics/prom,
               metrics/gometrics, sluice demo
`

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	switch args[0] {
	case "sim":
		return runSim(args[1:], stdout, stderr)
	case "demo":
		fmt.Fprintf(stdout, "sluice demo: the demo service is not built yet (see the open issues).\n\n%s", status)
		return 0
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
		return 0
	}
	fmt.Fprintf(stderr, "sluice: unknown command %q\n\n%s", args[0], usage)
	return 2
}
