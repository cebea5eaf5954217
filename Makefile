.PHONY: test test-short bench setup

# Installs what the tests need on a fresh Debian machine.
setup:
	bash .ci/setup

test:
	go test -race ./...

test-short:
	go test -short ./...

bench:
	go run ./bench
