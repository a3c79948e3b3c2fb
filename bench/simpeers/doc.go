// Package simpeers plugs sluice's peers into sluice's simulator (package
// sim) so that they can be compared with sluice's own policies on the same
// scenarios, seeds and server models:
//
//   - Failsafe: failsafe-go's adaptivelimiter with its defaults. It reads the
//     wall clock, so it runs only through sim.RunRealtime: in real time, or
//     inside a testing/synctest bubble, whose fake clock makes the run exact
//     and fast (bench/cmd/simcompare's TestSyncedComparison).
//   - NetflixVegas and NetflixGradient2: Netflix concurrency-limits'
//     VegasLimit and Gradient2Limit, written from their published formulas
//     and defaults as adaptive.Algorithms and driven by sluice's gate with
//     one-sample windows, so they update once per completed request as the
//     Java originals do, in virtual time (sim.Run).
//
// It also builds the scenarios of the comparison: shortened copies of the
// built-in scenarios for the real-time mode (Shorten) and a 4-core variant
// of the nominal server (FourCore).
package simpeers
