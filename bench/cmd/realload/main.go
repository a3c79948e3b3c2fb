package main

import (
	"bytes"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"
)

// defaultMatrix is the full run's server configurations,
// transport:cores:work.
const defaultMatrix = "http:1:1ms,http:1:10ms,http:1:io,http:2:1ms,http:2:10ms,grpc:1:1ms,grpc:1:10ms"

// quickMatrix is -quick's.
const quickMatrix = "http:1:1ms,grpc:1:1ms"

func main() {
	if os.Getenv(serverEnv) != "" {
		os.Exit(serverMain())
	}
	os.Exit(cli(os.Args[1:], os.Stdout, os.Stderr))
}

// cli runs the command with args and returns its exit code.
func cli(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("realload", flag.ContinueOnError)
	fs.SetOutput(stderr)
	quick := fs.Bool("quick", false, "development run: "+quickMatrix+", short phases (about 2 minutes)")
	matrix := fs.String("matrix", "", "server configurations, comma-separated transport:cores:work (transport http or grpc, work io or a CPU duration); default "+defaultMatrix)
	names := fs.String("contenders", "", "contenders, comma-separated (default: every contender that is not an extra; see -list)")
	cases := fs.String("cases", strings.Join(allCases, ","), "cases, comma-separated: "+strings.Join(knownCases, ", ")+" (0.1x: the CPU mostly idle, not run by default)")
	steady := fs.Duration("steady", 0, "length of the 0.7x case (default 3s; -quick 1s)")
	warmup := fs.Duration("warmup", 0, "the 2x-warm case's warm-up at 0.5x (default 3s; -quick 1s)")
	overload := fs.Duration("overload", 0, "length of the 2x phase (default 4s; -quick 1s)")
	capDur := fs.Duration("capacity", 0, "length of a capacity measurement (default 3s; -quick 1s)")
	costDur := fs.Duration("cost", 0, "length of each refusal-cost run (default 1s; -quick 0.5s)")
	timeout := fs.Duration("timeout", time.Second, "client timeout of every request")
	lone := fs.Int("lone", 0, "requests of the lone client after each run (default 5; -quick 2)")
	loneDelay := fs.Duration("lone-delay", 200*time.Millisecond, "from the load's last request to the lone client's first")
	calib := fs.Float64("calib", 0, "SHA-256 rounds per ms of CPU (0: measure)")
	conns := fs.Int("grpc-conns", 4, "client connections of the gRPC load")
	outFile := fs.String("out", "", "also write the Markdown report to this file")
	list := fs.Bool("list", false, "list the contenders and exit")
	trace := fs.String("trace", "", "write every run's traces to this directory (created if missing): per 50 ms, the server's counters and gate state and the client's outcomes")
	quiet := fs.Bool("q", false, "no progress lines on stderr")
	costs := fs.Bool("costs", true, "measure what a refusal costs the server (one-core closed loops, after the matrix)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *list {
		for _, c := range contenders {
			extra := ""
			if c.extra {
				extra = " (extra: only when named)"
			}
			fmt.Fprintf(stdout, "%-10s %s%s\n", c.name, c.about, extra)
		}
		return 0
	}
	if *lone <= 0 {
		*lone = 5
		if *quick {
			*lone = 2
		}
	}
	o := options{timeout: *timeout, lone: *lone, loneDelay: *loneDelay, calib: *calib, grpcConns: *conns, costs: *costs, trace: *trace}
	if o.trace != "" {
		if err := os.MkdirAll(o.trace, 0o755); err != nil {
			fmt.Fprintln(stderr, "realload:", err)
			return 2
		}
	}
	def := func(set, full, q time.Duration) time.Duration {
		switch {
		case set > 0:
			return set
		case *quick:
			return q
		}
		return full
	}
	o.steady = def(*steady, 3*time.Second, time.Second)
	o.warmup = def(*warmup, 3*time.Second, time.Second)
	o.overload = def(*overload, 4*time.Second, time.Second)
	o.capDur = def(*capDur, 3*time.Second, time.Second)
	o.costDur = def(*costDur, time.Second, 500*time.Millisecond)
	if *matrix == "" {
		*matrix = defaultMatrix
		if *quick {
			*matrix = quickMatrix
		}
	}
	var err error
	if o.matrix, err = parseMatrix(*matrix); err != nil {
		fmt.Fprintln(stderr, "realload:", err)
		return 2
	}
	if o.contenders, err = parseContenders(*names); err != nil {
		fmt.Fprintln(stderr, "realload:", err)
		return 2
	}
	for c := range strings.SplitSeq(*cases, ",") {
		c = strings.TrimSpace(c)
		if !contains(knownCases, c) {
			fmt.Fprintf(stderr, "realload: unknown case %q (want %s)\n", c, strings.Join(knownCases, ", "))
			return 2
		}
		o.cases = append(o.cases, c)
	}
	if !*quiet {
		o.log = stderr
	}
	rep, err := run(o)
	if err != nil {
		fmt.Fprintln(stderr, "realload:", err)
		return 1
	}
	var buf bytes.Buffer
	rep.write(&buf)
	_, _ = stdout.Write(buf.Bytes())
	if *outFile != "" {
		if err := os.WriteFile(*outFile, buf.Bytes(), 0o644); err != nil {
			fmt.Fprintln(stderr, "realload:", err)
			return 1
		}
	}
	return 0
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// parseMatrix reads transport:cores:work entries.
func parseMatrix(s string) ([]config, error) {
	var out []config
	for e := range strings.SplitSeq(s, ",") {
		f := strings.Split(strings.TrimSpace(e), ":")
		if len(f) != 3 {
			return nil, fmt.Errorf("matrix entry %q: want transport:cores:work", e)
		}
		if f[0] != "http" && f[0] != "grpc" {
			return nil, fmt.Errorf("matrix entry %q: transport %q: want http or grpc", e, f[0])
		}
		cores, err := strconv.Atoi(f[1])
		if err != nil || cores < 1 {
			return nil, fmt.Errorf("matrix entry %q: cores %q: want a positive integer", e, f[1])
		}
		w, err := parseWorkload(f[2])
		if err != nil {
			return nil, fmt.Errorf("matrix entry %q: %w", e, err)
		}
		out = append(out, config{transport: f[0], cores: cores, work: w})
	}
	return out, nil
}

// parseContenders reads a comma-separated list of contender names; empty
// means every contender that is not an extra.
func parseContenders(s string) ([]contender, error) {
	if s == "" {
		var out []contender
		for _, c := range contenders {
			if !c.extra {
				out = append(out, c)
			}
		}
		return out, nil
	}
	var out []contender
	for name := range strings.SplitSeq(s, ",") {
		c, err := findContender(strings.TrimSpace(name))
		if err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	return out, nil
}
