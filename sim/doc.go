// Package sim is sluice's proof: a deterministic discrete-event simulator
// that replays overload scenarios in virtual time against the real limiter
// code (driven through a clock.Manual) and measures goodput, tail latency,
// rejections and recovery.
//
// The server model has c cores shared by processor sharing, a contention
// penalty past c concurrent requests (rate c/(1+κ(n−c))) so that throughput
// really collapses, an optional dependency wait that holds a slot but uses
// no CPU, a memory cap on requests in flight, and a CPU cost per rejection.
// Clients are open-loop (Poisson, steps, ramps, Markov-modulated bursts) with
// deadlines, priorities and optional retries with capped exponential backoff,
// full jitter and a retry budget.
//
// That is the PS model. Server.Model selects another structure in front of
// the same cores: Pool, a thread-per-request server whose worker threads take
// requests from a FIFO accept queue and hold them through their dependency
// wait, and FIFO, M/M/c cores that run each request to completion. Server.GC
// adds stop-the-world pauses to any of them, and a Change may halve the cores
// (the floor stays) or double the service time (the floor doubles).
//
// Each concern (arrivals, service times, priorities, retries, bursts, pauses)
// has its own seeded PCG stream, so a run is reproducible to the bit.
// Scenarios are data (Scenario) and carry their own pass/fail targets;
// policies plug in through the small Policy interface. A policy's limiters
// must read the run's clock (Env.Clock): Run and RunRealtime refuse a
// Clocked policy (GatePolicy, ShedPolicy) that reads another.
//
// The zoo (ZooModels, ZooDists, ZooCores) is a set of structurally different
// servers of equal capacity, and Incidents the scenarios to run on each of
// them: cold and warm surges, capacity halvings, a ramp, no-harm loads and
// bursts. RunMatrix runs them all under every policy, finds the best fixed
// limit of each row, and judges each policy on the worst of its seeds;
// `sluice matrix` writes the outcome as a report.
//
// Two runners play the same scenarios on the same server model: Run, the
// discrete-event engine in virtual time, and RunRealtime, which plays them
// in scaled wall-clock time with real goroutines, for limiters that read
// the wall clock (its server and jobs are its own; the engine knows nothing
// of them). RunGrid runs scenarios under policies for several seeds in
// parallel; with the Results, Scenario.Events (the moments a scenario
// changes), Scenario.Priorities and Scenario.Demand (the first attempts it
// schedules per priority) are what a report draws, so that `sluice sim`
// only renders them. The rate-limiting article's replays, which have
// neither server nor policy, are package sim/article.
package sim
