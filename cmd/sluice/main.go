// Command sluice is sluice's command line: `sluice sim` replays overload
// scenarios against the real limiter code, `sluice demo` runs a protected
// service. Neither is built yet; until they are, both say so and list what
// the library already provides.
package main

import (
	"fmt"
	"io"
	"os"
)

const usage = `usage: sluice <command>

commands:
  sim    replay overload scenarios against the real limiters (not built yet)
  demo   run an HTTP + gRPC service protected by every guard (not built yet)
`

const status = `built so far:
  clock      System and Manual (virtual) clocks
  adaptive   the adaptive concurrency gate: exact lock-free admission,
             windowed RTT/drop sampling, FIFO/LIFO/CoDel wait queue,
             partitions with guaranteed shares, Fixed and AIMD algorithms,
             observer hooks
  metrics    the observer interfaces
not built yet: vegas, gradient, ratelimit, ratelimit/redisstore, shed,
               interceptors, metrics/prom, metrics/gometrics, sim
`

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	switch args[0] {
	case "sim", "demo":
		fmt.Fprintf(stdout, "sluice %s: the %s is not built yet (see the open issues).\n\n%s",
			args[0], map[string]string{"sim": "simulator", "demo": "demo service"}[args[0]], status)
		return 0
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
		return 0
	}
	fmt.Fprintf(stderr, "sluice: unknown command %q\n\n%s", args[0], usage)
	return 2
}
