# The one command that checks everything: `make test`.
# It installs what it needs on a fresh Debian machine (as root), then runs the
# formatters, linters, the race-enabled tests and the bench module's tests.

GO ?= go
STATICCHECK_VERSION := v0.8.2
STATICCHECK := $(GO) run honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION)

.PHONY: test deps fmt vet staticcheck unit bench-test bench simcompare matrix fuzz

test: deps fmt vet staticcheck unit bench-test

deps:
	@scripts/ensure-redis.sh

fmt:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt needed on:"; echo "$$out"; exit 1; fi

vet:
	$(GO) vet ./...
	cd bench && $(GO) vet ./...

staticcheck:
	$(STATICCHECK) ./...
	cd bench && $(STATICCHECK) ./...

unit:
	$(GO) test -race -count=1 ./...

bench-test:
	cd bench && $(GO) test -race -count=1 ./...

# Benchmarks against peer libraries (see bench/README.md); not part of `make test`.
bench:
	cd bench && ./run.sh

# sluice against its peers in the simulator, written to docs/simcompare.md
# (about 7 minutes on 2 cores; not part of `make test`): parts 1-3 from
# bench/cmd/simcompare, part 4 (failsafe-go on a virtual wall clock, full
# scenarios, 5 seeds) from its test TestSyncedComparison.
simcompare:
	@set -e; tmp=$$(mktemp -d); trap 'rm -rf "$$tmp"' EXIT; \
	(cd bench && $(GO) run ./cmd/simcompare) > "$$tmp/doc.md"; \
	(cd bench && SIMCOMPARE_SYNCED="$$tmp/part4.md" $(GO) test -run '^TestSyncedComparison$$' -count=1 -timeout 1h ./cmd/simcompare); \
	echo >> "$$tmp/doc.md"; cat "$$tmp/part4.md" >> "$$tmp/doc.md"; mv "$$tmp/doc.md" docs/simcompare.md

# Every incident scenario on every server model of the simulator's zoo under
# every policy, worst of 5 seeds, written to docs/matrix.md (not part of
# `make test`; see the run time in the report).
matrix:
	$(GO) run ./cmd/sluice matrix -out docs/matrix.md

# Short runs of every fuzz target, one after the other (go test -fuzz takes
# one target at a time; longer: FUZZTIME=5m make fuzz): option and limit
# validation, the rate-limit arithmetic, and every parser of untrusted input.
FUZZTIME ?= 20s
FUZZ_TARGETS = \
	./adaptive:FuzzNew \
	./ratelimit:FuzzNew ./ratelimit:FuzzDecide \
	./ratelimit/redisstore:FuzzSanitize \
	./shed:FuzzParsePriority \
	./interceptors:FuzzHeadersRateLimitField ./interceptors:FuzzClientRetryAfter \
	./interceptors:FuzzClientPushback ./interceptors:FuzzKeyClientIP ./interceptors:FuzzKeyHeaders
fuzz:
	@set -e; for t in $(FUZZ_TARGETS); do \
		pkg=$${t%%:*}; name=$${t##*:}; \
		echo "$(GO) test -run '^$$' -fuzz '^$$name$$' -fuzztime $(FUZZTIME) $$pkg"; \
		$(GO) test -run '^$$' -fuzz "^$$name\$$" -fuzztime $(FUZZTIME) $$pkg; \
	done
