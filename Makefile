# Terrace: `make help` lists the targets.
GO        ?= go
FUZZTIME  ?= 8s
FUZZTIME_LONG ?= 3m
BIN       := bin/terrace

CONFORMANCE_FLAGS ?=

.PHONY: help build run test test-short vet fuzz fuzz-long conformance load bench clean mirror engines oidc-provider versitygw vault gitea

help: ## list targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-14s %s\n", $$1, $$2}'

build: ## build bin/terrace
	$(GO) build -o $(BIN) ./cmd/terrace

run: build ## build and start Terrace with the embedded defaults (data in ./.terrace)
	./$(BIN) server

ENGINES_DIR ?= $(CURDIR)/.cache/engines
engines: ## build terraform 1.5.7 and OpenTofu (tools/engines/versions) from the Go module proxy into $(ENGINES_DIR), once
	tools/engines/build.sh $(ENGINES_DIR)

OIDC_PROVIDER_DIR ?= $(CURDIR)/.cache/oidc-provider
oidc-provider: ## build the OpenID provider the sign-in tests use (zitadel/oidc's example server) from the Go module proxy into $(OIDC_PROVIDER_DIR), once
	tools/oidcprovider/build.sh $(OIDC_PROVIDER_DIR)

versitygw: ## build versitygw (tools/versitygw/version), the S3-compatible server the S3 tests start, into .cache/versitygw, once
	tools/versitygw/build.sh .cache

vault: ## build HashiCorp Vault (tools/vault/version), the server the Vault dynamic credentials test logs in to, into .cache/vault, once
	tools/vault/build.sh .cache

gitea: ## build Gitea (tools/gitea/version), the git server the VCS-driven workspace tests push to, into .cache/gitea, once
	tools/gitea/build.sh .cache

test: vet engines oidc-provider versitygw vault gitea ## the whole test suite: both stores, every engine (terraform on PATH, terraform 1.5.7, tofu), S3 on versitygw, a real Vault, real HTTPS, with the store's transaction guard and the JSON:API encoder check on
	TERRACE_STORE_TXGUARD=1 TERRACE_JSONAPI_CHECK=1 TERRACE_TEST_ENGINES_DIR=$(ENGINES_DIR) $(GO) test -count=1 -timeout 40m $(TEST_LDFLAGS) ./...

# The test binaries are linked without the symbol table and DWARF (-s -w): a
# third less link time for each of some sixty binaries; stack traces come
# from the runtime's own tables and stay whole. TEST_LDFLAGS= keeps them
# (a debugger needs DWARF).
TEST_LDFLAGS ?= -ldflags='-s -w'

test-short: ## the fast inner loop (skips the slow end-to-end tests)
	$(GO) test -short -count=1 ./...

STATICCHECK ?= honnef.co/go/tools/cmd/staticcheck@v0.8.2
vet: ## go vet, staticcheck and a gofmt check
	$(GO) vet ./...
	$(GO) run $(STATICCHECK) ./...
	@test -z "$$(gofmt -l cmd internal tools)" || { echo "gofmt would change:"; gofmt -l cmd internal tools; exit 1; }

# Every fuzz target, as package:function. A crash the fuzzer finds is saved
# under the package's testdata/fuzz/<function>/, which plain `go test` then
# runs as a regression test: commit it with the fix.
FUZZ_TARGETS := \
	internal/tfeapi:FuzzDecodeBytes \
	internal/slug:FuzzUnpack \
	internal/stack:FuzzParse \
	internal/orchcli:FuzzReadManifest \
	internal/orchestrator:FuzzPlaceholder \
	internal/orchestrator:FuzzCompileManifest \
	internal/runtask:FuzzDecodeCallback \
	internal/notify:FuzzDecodeConfiguration \
	internal/sitesettings:FuzzSafe

fuzz: ## run every fuzz target for $(FUZZTIME) each (CI): JSON:API, archives, stack HCL, manifest YAML, placeholders, run task callbacks, notification configurations, the pages' customization HTML
	@for t in $(FUZZ_TARGETS); do pkg=$${t%%:*}; fn=$${t#*:}; echo "== $$fn ./$$pkg"; \
	  tools/fuzz.sh $(GO) $$pkg $$fn $(FUZZTIME) || exit 1; done

fuzz-long: ## run every fuzz target for $(FUZZTIME_LONG) each
	$(MAKE) fuzz FUZZTIME=$(FUZZTIME_LONG)

conformance: ## go-tfe's own tests (conformance/allow.txt) against a real server; flags in CONFORMANCE_FLAGS
	$(GO) run ./tools/conformance $(CONFORMANCE_FLAGS)

LOAD_FLAGS ?= -clients 200 -duration 60s -max-pending-runs 8
load: ## 200 go-tfe clients for 60 s against one server, per store (tools/load; flags in LOAD_FLAGS): fails on a 5xx or a run that does not end, prints p99 per operation
	@for st in sqlite postgres; do echo "== load $$st"; $(GO) run ./tools/load $(LOAD_FLAGS) -store $$st || exit 1; done

BENCH_FLAGS ?=
bench: ## run benchmarks: remote run time vs local terraform, queue latency, throughput, run-trigger chain and fan-out, runs/min with 2 agents vs the in-process runner (tools/bench; flags in BENCH_FLAGS), then the Go benchmarks
	$(GO) run ./tools/bench $(BENCH_FLAGS)
	$(GO) test -run '^$$' -bench . -benchmem -count=1 $$(grep -rl --include='*_test.go' '^func Benchmark' cmd internal tools | xargs -n1 dirname | sort -u | sed 's|^|./|')

clean: ## remove bin/ and .cache/ (the go-tfe test binary and the engines are rebuilt when next needed)
	rm -rf bin .cache

MIRROR    ?= $(CURDIR)/.mirror
mirror: ## build the null and time stand-ins into a filesystem mirror in $(MIRROR) (README: Offline providers)
	@p=$$($(GO) env GOOS)_$$($(GO) env GOARCH); for host in registry.terraform.io registry.opentofu.org; do \
	  for tv in null:3.2.4 time:0.13.1; do t=$${tv%%:*}; v=$${tv#*:}; d=$(MIRROR)/$$host/hashicorp/$$t/$$v/$$p; \
	    mkdir -p $$d && $(GO) build -o $$d/terraform-provider-$${t}_v$$v ./cmd/terraform-provider-$$t || exit 1; done; done
	@echo "mirror in $(MIRROR); CLI config: see README, Offline providers"
