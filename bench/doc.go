// Package bench holds sluice's comparisons with peer libraries: the adaptive
// gate's hot path against failsafe-go, go-zero and go-kratos/aegis
// (run.sh), the keyed rate limiter against sethvargo/go-limiter, x/time/rate,
// throttled, ulule and uber (run-ratelimit.sh), and the simulator scenarios
// with failsafe-go and Netflix's published algorithms as policies
// (cmd/simcompare). It is a separate module so the peers never enter the
// library's go.mod. See README.md.
package bench
