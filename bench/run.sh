#!/usr/bin/env bash
# Runs the acquire+release benchmark for sluice and its peers in one go test
# run (-count 5 at -cpu 1 and 2) and prints a Markdown table of medians and
# same-run ratios. Raw `go test` output streams to stderr; set RAW=file to
# save it as well (e.g. for benchstat).
set -euo pipefail
cd "$(dirname "$0")"

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# Build the table printer first so compiling it does not steal CPU from the
# benchmark.
go build -o "$tmp/benchtable" ./cmd/benchtable

go test -run '^$' -bench BenchmarkAcquireRelease -benchtime "${BENCHTIME:-1s}" -count "${COUNT:-5}" -cpu "${CPUS:-1,2}" . \
	| tee "${RAW:-/dev/stderr}" \
	| "$tmp/benchtable"
