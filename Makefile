# billrun — the two commands are `make demo` and `make test`; see README.md.
GO      ?= go
PERIOD  ?= 2026-10
CUSTOMERS ?= 1000

.PHONY: demo test build vet bench clean

## demo: bill a sample period end to end on the local stack (run it twice).
demo:
	$(GO) run ./cmd/billrun demo --customers $(CUSTOMERS) --period $(PERIOD)

## test: every test, including the Firestore-emulator contract suite.
test:
	BILLRUN_REQUIRE_EMULATORS=1 $(GO) test -shuffle=on -count=1 -timeout 15m ./...

build:
	$(GO) build ./...

vet:
	$(GO) vet ./...

## bench: the speed and memory figures.
bench:
	$(GO) test -run '^$$' -bench . -benchmem ./...

clean:
	rm -rf .billrun
