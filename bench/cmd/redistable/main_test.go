package main

import (
	"strings"
	"testing"
)

// sample is two runs (the second with only the cells it needs).
const sample = `goos: linux
goarch: amd64
pkg: github.com/sluicehq/sluice/bench
cpu: Some CPU
BenchmarkRedis/sluice.gcra/serial-2   1000   50000 ns/op   30 cli-us/op   25 srvcpu-us/op   2.0 inner-us/op   4.0 srv-us/op   1.000 trips/op   1700 B/op   28 allocs/op
BenchmarkRedis/sluice.gcra/hot-2      1000   20000 ns/op   1.0 inner-us/op   6.0 srv-us/op   1.000 trips/op   1700 B/op   28 allocs/op
BenchmarkRedis/redis_rate/serial-2    1000   40000 ns/op   3.0 inner-us/op  10.0 srv-us/op   1.000 trips/op    690 B/op   22 allocs/op
BenchmarkRedis/redis_rate/hot-2       1000   40000 ns/op   1.0 inner-us/op  10.0 srv-us/op   1.000 trips/op    690 B/op   22 allocs/op
BenchmarkRedisCold/sluice.gcra-2      3   1000 ns/op   2.000 first-trips   1.000 first.eval   1.000 first.evalsha   0.3333 first.hello   1.000 second-trips   1.000 second.evalsha   2.000 restart-trips   1.000 restart.eval   1.000 restart.evalsha   0 setup-trips
BenchmarkRedisCold/ulule-2            3   1000 ns/op   1.000 first-trips   1.000 first.evalsha   4.000 restart-trips   2.000 restart.evalsha   2.000 restart.script   2.000 setup-trips   2.000 setup.script   1.000 second-trips   1.000 second.evalsha
BenchmarkRedisFlood/sluice.gcra-2     3   7000000 ns/op   10.00 admitted/flood   1400000 dec/s   0.15 srv-us/dec   6.0 trips/kdec
BenchmarkRedisFlood/redis_rate-2      1   350000000 ns/op   13.00 admitted/flood   29000 dec/s   7.5 srv-us/dec   1000 trips/kdec
BenchmarkRedis/sluice.gcra/hot-2      1000   30000 ns/op   1.0 inner-us/op   6.0 srv-us/op   1.000 trips/op   1700 B/op   28 allocs/op
BenchmarkRedis/redis_rate/hot-2       1000   20000 ns/op   1.0 inner-us/op  10.0 srv-us/op   1.000 trips/op    690 B/op   22 allocs/op
BenchmarkKeyed/keys=1/sethvargo/serial-2   1000  110.0 ns/op   0 B/op   0 allocs/op
`

func TestParse(t *testing.T) {
	res, err := parse(strings.NewReader(sample))
	if err != nil {
		t.Fatal(err)
	}
	if res.failed {
		t.Error("failed without FAIL lines")
	}
	if got, want := strings.Join(res.rows, ","), "sluice.gcra,redis_rate,ulule"; got != want {
		t.Errorf("rows %s, want %s", got, want)
	}
	hot := key{"redis", "sluice.gcra", "hot"}
	if n := len(res.runs[hot]); n != 2 {
		t.Fatalf("%d runs of %v, want 2", n, hot)
	}
	// Run 1: redis_rate 40000 ns ÷ sluice 20000 ns = 2; run 2: 20000 ÷ 30000.
	rs := res.ratios(hot, key{"redis", "redis_rate", "hot"}, "ns/op", func(x, y float64) float64 { return y / x })
	if len(rs) != 2 || rs[0] != 2 || rs[1] != 20000.0/30000 {
		t.Errorf("ratios %v, want [2 0.667]", rs)
	}
	if got := res.commands(key{"cold", "sluice.gcra", ""}, "first"); got != "1 eval, 1 evalsha" {
		t.Errorf("first commands %q, want a stray handshake left out", got)
	}
}

func TestRender(t *testing.T) {
	res, err := parse(strings.NewReader(sample))
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	render(&b, res, config{ref: "redis_rate", sluice: "sluice.", floor: "floor.fcall", maxRef: 1, maxFloor: 1.3, minSpeed: 1, minFewer: 5, command: "./run-redis.sh"})
	out := b.String()
	for _, want := range []string{
		"Reproduce: `./run-redis.sh`",
		"| sluice.gcra | 1 | — | 1 | 0 | 2 (1 eval, 1 evalsha) | 1 (1 evalsha) | 2 (1 eval, 1 evalsha) |",
		"| ulule | — | — | — | 2 (2 script) | 1 (1 evalsha) | 1 (1 evalsha) | 4 (2 evalsha, 2 script) |",
		"| sluice.gcra | 4 (2, 0.40× redis_rate) | — | 6 (1, 0.60× redis_rate) | ✗ |", // below redis_rate, but no floor measured
		"| sluice.gcra | 20000 (0.80× ✗ [0.80–0.80]) |",                               // serial: 40000/50000
		"| 40000 (1.33× ✓ [0.67–2.00]) |",                                             // hot: median of 2 and 0.67
		"| sluice.gcra | 6 | 167× ✓ [167–167] | 10 | 0.15 | 7 | 1400000 |",
		"| sluice.gcra | 28 (1700 B) | — | 28 (1700 B) |",
		"| sluice.gcra | 30 / 25 | — / — | — / — |",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}
