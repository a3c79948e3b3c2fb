#!/usr/bin/env bash
# Runs the Redis rate-limit benchmark of sluice's redisstore against
# go-redis/redis_rate v10 and ulule/limiter v3's Redis store, each
# benchmark starting its own redis-server on a loopback port (redis-server
# must be on the PATH: scripts/ensure-redis.sh), and prints Markdown tables
# (cmd/redistable). The test binary runs COUNT times (default 5), each time
# every implementation back to back, so that the ratios are taken within a
# run: BenchmarkRedis (serial, 64 goroutines on distinct keys and on one
# key; BENCHTIME per cell, default 500ms), BenchmarkRedisCold (FLOODTIME
# iterations, as below) and BenchmarkRedisFlood (FLOODTIME, default 3x
# floods of 10,000 decisions). Raw `go test` output streams to stderr; set
# RAW=file to save it as well. A failed run does not stop the others; the
# table command then exits non-zero. About two minutes with the defaults.
set -euo pipefail
cd "$(dirname "$0")"

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# Build first so that compiling does not steal CPU from the benchmark.
go build -o "$tmp/redistable" ./cmd/redistable
go test -c -o "$tmp/bench.test" .

count=${COUNT:-5}
benchtime=${BENCHTIME:-500ms}
floodtime=${FLOODTIME:-3x}
cmd="cd bench && COUNT=$count BENCHTIME=$benchtime FLOODTIME=$floodtime ./run-redis.sh"

for _ in $(seq "$count"); do
	"$tmp/bench.test" -test.run '^$' -test.bench '^BenchmarkRedis$' -test.benchmem \
		-test.benchtime "$benchtime" -test.count 1 -test.cpu "${CPUS:-2}" || echo "FAIL: exit $?"
	"$tmp/bench.test" -test.run '^$' -test.bench '^BenchmarkRedis(Cold|Flood)$' -test.benchmem \
		-test.benchtime "$floodtime" -test.count 1 -test.cpu "${CPUS:-2}" || echo "FAIL: exit $?"
done | tee "${RAW:-/dev/stderr}" | "$tmp/redistable" -command "$cmd"
