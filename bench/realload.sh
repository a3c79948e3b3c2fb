#!/usr/bin/env bash
# Runs the real-process overload benchmark (cmd/realload) over its full
# matrix — HTTP on 1 and 2 cores with 1 ms and 10 ms of CPU work and the I/O
# handler on 1 core, gRPC on 1 core with 1 ms and 10 ms — in about 14
# minutes, and prints the Markdown report on stdout (progress on stderr).
# OUT=file also writes the report to file; extra arguments go to the
# command (e.g. ./realload.sh -quick).
set -euo pipefail
cd "$(dirname "$0")"

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# Build first so that compiling does not steal CPU from the runs; the
# binary re-executes itself as the server.
go build -o "$tmp/realload" ./cmd/realload

args=()
if [[ -n "${OUT:-}" ]]; then
	args+=(-out "$OUT")
fi
"$tmp/realload" "${args[@]}" "$@"
