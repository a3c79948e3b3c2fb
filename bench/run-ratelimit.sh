#!/usr/bin/env bash
# Runs the keyed rate-limiter comparison of sluice's ratelimit package and
# its peers (issue 18): TestRateCompare, every contender interleaved in one
# process, 1 key, 100k and 1M keys in insertion, uniform and Zipf(1.1)
# order, serial and 2 goroutines, medians of the rounds' ratios to
# sethvargo/go-limiter; then BenchmarkBytesPerKey (heap per key at 1M keys).
# Prints Markdown tables on stdout; the per-cell lines stream to stderr (set
# RAW=file to save everything). ROUNDS, BATCH and KEYS override the
# comparison's defaults (7 rounds of 131072 decisions per contender per
# cell; 1,100000,1000000); SKIP_MEM=1 skips the memory benchmark. About five
# minutes. Run it on an otherwise idle machine.
set -euo pipefail
cd "$(dirname "$0")"

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# Build the test binary first so that compiling does not steal CPU from the
# measurement.
go test -c -o "$tmp/bench.test" .

{
	"$tmp/bench.test" -test.run '^TestRateCompare$' -test.v=false -test.cpu 2 -ratecompare \
		-ratecompare.rounds "${ROUNDS:-7}" -ratecompare.batch "${BATCH:-131072}" \
		-ratecompare.keys "${KEYS:-1,100000,1000000}" | grep -v '^PASS$'
	if [ -z "${SKIP_MEM:-}" ]; then
		echo
		echo "Heap per key at 1M keys (BenchmarkBytesPerKey): B/key is the live heap's growth ÷ keys less keyB/key, the bytes of the key strings the limiter keeps (sluice keeps keys of up to 12 bytes inside its slots: 0)."
		echo
		"$tmp/bench.test" -test.run '^$' -test.bench '^BenchmarkBytesPerKey$' -test.benchtime 1x -test.cpu 2 | grep '^Benchmark'
	fi
} | tee "${RAW:-/dev/null}"
