#!/usr/bin/env bash
# Runs the keyed rate-limiter benchmark of sluice's ratelimit package and its
# peers (BenchmarkKeyed: -count 5 at -cpu 2, serial and RunParallel, 1 key and
# 100k keys; BenchmarkBytesPerKey: heap per key at 1M keys) and prints
# Markdown tables of medians and same-run ratios (cmd/ratetable). Raw
# `go test` output streams to stderr; set RAW=file to save it as well (e.g.
# for benchstat). BENCHTIME, COUNT, CPUS and MEMCOUNT override the defaults;
# SKIP_MEM=1 skips the memory benchmark. About three minutes in all.
set -euo pipefail
cd "$(dirname "$0")"

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# Build the table printer and the test binary first so that compiling does
# not steal CPU from the benchmark.
go build -o "$tmp/ratetable" ./cmd/ratetable
go test -c -o "$tmp/bench.test" .

cpus=${CPUS:-2}
memcpu=${cpus%%,*} # the memory benchmark runs at the first -cpu only

{
	"$tmp/bench.test" -test.run '^$' -test.bench '^BenchmarkKeyed$' -test.benchmem \
		-test.benchtime "${BENCHTIME:-250ms}" -test.count "${COUNT:-5}" -test.cpu "$cpus"
	if [ -z "${SKIP_MEM:-}" ]; then
		"$tmp/bench.test" -test.run '^$' -test.bench '^BenchmarkBytesPerKey$' \
			-test.benchtime 1x -test.count "${MEMCOUNT:-1}" -test.cpu "$memcpu"
	fi
} | tee "${RAW:-/dev/stderr}" | "$tmp/ratetable"
