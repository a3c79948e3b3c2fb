// Command realload measures, on a real process under a real load generator,
// how well each overload guard keeps a CPU-bound Go service alive.
//
// The server is this binary re-executed as a separate OS process (the
// SLUICE_REALLOAD_SERVER environment variable holds its configuration)
// with GOMAXPROCS set to the cores under test, listening on a free loopback
// port. Its one handler does real CPU work per request — SHA-256 rounds for
// W of CPU time, at a rate calibrated once per run (rounds per ms of the
// process's CPU time, the best of fifty 20 ms trials in a one-core server
// process) and passed to every server so that
// they all do the same work — or, for the I/O-bound handler, sleeps 20 ms.
// Every row runs on a fresh server process, so nothing a guard learnt in
// one run reaches another.
//
// Contenders (the contenders table in contenders.go; a new one is one line):
// none (the bare handler); gradient and vegas (interceptors.GateMiddleware /
// GateInterceptors over adaptive.New with the algorithm's defaults); shed
// (interceptors.ShedMiddleware / ShedInterceptors over shed.New(gate,
// shed.WithReserve(0.2)) and a default gradient gate); failsafe
// (failsafe-go's adaptivelimiter with its defaults, refusing with 503 /
// UNAVAILABLE); shed-sched (shed plus shed.SchedulerLatency as its
// saturation signal). shed-maxrtt, shed over a gate with
// gradient.WithMaxRTT(5ms) (the quick start's gate before it became
// gradient.New()), runs only when named in -contenders.
//
// Each configuration (transport, cores, work) is first measured for its
// capacity: the bare server under a closed loop of clients (8 per core for
// CPU work, 512 for the I/O handler), successes per second in the best of
// three windows after the first fifth of the run. Then every contender runs three cases, in an
// order rotated from case to case: 0.7x (0.7 × capacity), 2x-warm (0.5 ×
// capacity for the warm-up, then 2 × on the same process) and 2x-cold (2 ×
// from the first request). The load is open loop at a constant rate, by
// vegeta (github.com/tsenart/vegeta/v12 as a library) for HTTP and by
// grpc-go directly for gRPC (one goroutine per call at the target rate,
// each with the client timeout as its deadline). After each run a lone
// client sends a few requests one at a time, starting 200 ms after the
// load's last request: it should be served at once.
//
// Per row the report gives the offered rate, the goodput (successes within
// the SLO — 10 × the work, 200 ms for the I/O handler — per second of the
// judged window, as a share of capacity; the 2x-warm case is judged on its
// overload only), p50 and p99 of the successes, the shares refused (503 or
// 429; UNAVAILABLE or RESOURCE_EXHAUSTED), timed out and failed, and what
// the lone client saw. A last table gives what a refusal costs the server:
// each guard held full (so that it refuses everything) in front of a
// one-core server under a closed loop, the process's CPU per refusal read
// with getrusage from an admin endpoint, against the bare handler's cost of
// a request without work and of one with the work, served at capacity.
//
// Usage (from the bench directory):
//
//	go run ./cmd/realload -quick           # development: http and gRPC, 1 core, 1 ms, short phases (about 2 minutes)
//	go run ./cmd/realload -out report.md   # the full matrix (about 14 minutes); also ./realload.sh
//	go run ./cmd/realload -matrix http:2:10ms -contenders none,shed -cases 2x-cold
//	go run ./cmd/realload -list            # the contenders
//	go run ./cmd/realload -matrix grpc:1:1ms -contenders gradient -cases 2x-cold -trace /tmp/tr
//
// -matrix takes transport:cores:work entries (http or grpc; a number of
// cores; io or a duration of CPU work); -steady, -warmup, -overload and
// -capacity set the phases' lengths, -timeout the client timeout (1 s). The
// report is Markdown on stdout (and in the -out file); progress goes to
// stderr. Run it on an otherwise idle machine: the load generator shares
// the machine with the server (with a one-core server it has the other
// core), and the figures move with whatever else runs.
package main
