// Command sluice is sluice's command line: `sluice sim` replays overload
// scenarios against the real limiter code in virtual time and prints how each
// policy held up; `sluice matrix` runs the incident scenarios on every server
// model of the simulator's zoo and writes a report; `sluice demo` runs a service protected by every guard next to
// an unprotected copy and drives both past capacity.
package main

import (
	"fmt"
	"io"
	"os"
)

const usage = `usage: sluice <command>

commands:
  sim    replay overload scenarios against the real limiters (-h for flags)
  demo   run an HTTP + gRPC service protected by every guard, next to an
         unprotected copy, through a surge to 3x capacity (-h for flags)
  matrix run the incident scenarios on every server model of the zoo under
         every policy and write a markdown report (-h for flags)
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
		return runDemo(args[1:], stdout, stderr)
	case "matrix":
		return runMatrix(args[1:], stdout, stderr)
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
		return 0
	}
	fmt.Fprintf(stderr, "sluice: unknown command %q\n\n%s", args[0], usage)
	return 2
}
