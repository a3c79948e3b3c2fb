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
// Each concern (arrivals, service times, priorities, retries, bursts) has its
// own seeded PCG stream, so a run is reproducible to the bit. Scenarios are
// data (Scenario) and carry their own pass/fail targets; policies plug in
// through the small Policy interface. A policy's limiters must read the
// run's clock (Env.Clock): Run and RunRealtime refuse a Clocked policy
// (GatePolicy, ShedPolicy) that reads another.
package sim
