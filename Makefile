.PHONY: test test-go test-ts test-short npm-deps bench setup

# Installs what the tests need on a fresh Debian machine.
setup:
	bash .ci/setup
	bash .ci/npm-deps

# The whole suite: what the tests need (system packages where root can
# install them, .ci/setup; the npm dependencies from their lockfiles and
# the SDK build), then the Go tests (which run the TypeScript agents too)
# and the TypeScript SDK's tests side by side (the end-to-end Go tests run
# one at a time and leave a core mostly idle); each output line stays whole.
test: setup
	$(MAKE) --no-print-directory -j2 -Oline test-go test-ts

npm-deps:
	bash .ci/npm-deps

test-go:
	go test -race -timeout 30m ./...

# The TypeScript SDK's own tests (node --test), when it exists and npm is
# there; its end-to-end suite runs against a helmr built here (HELMR_BIN).
test-ts:
	@if [ -f sdk/typescript/package.json ] && command -v npm >/dev/null 2>&1; then \
		bin=$$(mktemp -d) && go build -o $$bin/helmr ./cmd/helmr && \
		(cd sdk/typescript && HELMR_BIN=$$bin/helmr npm test); rc=$$?; rm -rf $$bin; exit $$rc; \
	else echo "skipping the TypeScript SDK's tests (no sdk/typescript or no npm)"; fi

test-short:
	go test -short ./...

bench:
	go run ./bench
