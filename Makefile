# dsh-container — `make help` lists the targets.
SHELL := /bin/bash
export PATH := /usr/local/go/bin:$(PATH)

BIN      := bin/dsh-container
GO       ?= go
GOFLAGS  ?=
# The test-only compiler image sdkgen's tests type-check the SDK with.
SDK_CHECK_IMAGE = $$($(BIN) images tags | awk '$$1=="sdk-check"{print $$2}')
# What a test does when the daemon, an image or the SDK check image is
# missing (internal/testenv): `require` fails it. The targets that build
# what the tests need require it unless told otherwise.
REQUIRE_DAEMON = DSH_TEST_DAEMON=$${DSH_TEST_DAEMON:-require}
# staticcheck, pinned; `go run` fetches it through the module proxy.
STATICCHECK ?= honnef.co/go/tools/cmd/staticcheck@v0.8.2

.PHONY: help
help: ## list the targets
	@awk 'BEGIN{FS=":.*## "} /^[a-zA-Z0-9_-]+:.*## /{printf "  %-16s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

.PHONY: deps
deps: ## install the host packages the build needs (mmdebstrap; needs root)
	@command -v mmdebstrap >/dev/null || { \
	  if [ "$$(id -u)" = 0 ]; then apt-get update -qq && apt-get install -y -qq mmdebstrap >/dev/null; \
	  else echo "install mmdebstrap (sudo apt-get install mmdebstrap)"; exit 2; fi; }

.PHONY: build
build: ## build bin/dsh-container
	$(GO) build $(GOFLAGS) -o $(BIN) ./cmd/dsh-container

.PHONY: images
images: deps build ## build the runner images offline (base from Debian packages), skipping current ones
	$(BIN) images build

.PHONY: containerd-images
containerd-images: images ## put the runner images into containerd's namespace (imported from the Docker daemon; the containerd driver's tests use them)
	$(BIN) images build --driver containerd

.PHONY: sdk-check-image
sdk-check-image: deps build ## build the test-only TypeScript/Python compiler image
	$(BIN) images build --sdk-check

# The daemon image's base: the offline base `images build` made, unless given.
DAEMON_BASE ?= $$($(BIN) images tags | awk '$$1=="base"{print $$2}')

.PHONY: daemon-image
daemon-image: images ## build dsh-container/daemon:latest for docker-compose (static binary on the offline base)
	CGO_ENABLED=0 $(GO) build $(GOFLAGS) -o $(BIN) ./cmd/dsh-container
	docker build -f images/daemon/Dockerfile -t dsh-container/daemon:latest --build-arg BASE=$(DAEMON_BASE) .

.PHONY: agent-image
agent-image: daemon-image ## build dsh-container/agent:latest for deploy/kubernetes (the daemon image + the offline base's root filesystem)
	set -e; ctx=$$(mktemp -d); trap 'rm -rf "$$ctx"' EXIT; \
	id=$$(docker create $(DAEMON_BASE) /bin/true); \
	docker export -o "$$ctx/base-rootfs.tar" "$$id" || { docker rm "$$id" >/dev/null; exit 1; }; \
	docker rm "$$id" >/dev/null; \
	init=$$(command -v tini-static || command -v docker-init) || { echo "agent-image: no tini-static or docker-init on this host (apt-get install tini)" >&2; exit 1; }; \
	cp -L "$$init" "$$ctx/tini-static"; \
	docker build -q -f images/daemon/agent.Dockerfile -t dsh-container/agent:latest "$$ctx"

.PHONY: fleet-images
fleet-images: daemon-image ## build what deploy/fleet/docker-compose.yml runs: the daemon image and dsh-container/haproxy (offline, from Debian packages)
	deploy/fleet/build-haproxy.sh

.PHONY: demo
demo: images ## set up and run the demo: a program calling two host tools in a container
	$(BIN) run --tools examples/demo/tools.json examples/demo/demo.ts
	$(BIN) run --tools examples/demo/tools.json examples/demo/demo.py

# The e2e package is the long pole of `make test`: it runs as two test
# processes side by side, the tests E2E_SHARD matches in one and every other
# test in the other (-run and -skip of one pattern: each test runs exactly
# once), next to the other packages. Each process labels its containers with
# its own owner and checks its own goroutines, memory and leftovers, so the
# two cannot see each other's; within a process the tests stay serial. Each
# line of output is prefixed with its process; the recipe fails when any of
# the three does. Every test binary is compiled once first (-exec /bin/true
# runs none): three `go test` processes that compile the same packages at
# once each compile them (on a fresh machine make test took 2,394 s, its
# longest process 1,837 s of it). E2E_SHARD_A is half of the package's test
# time, balanced from one run's per-test times (`go test -v`, the
# `--- PASS: TestX (Ns)` lines), then from the two processes' times side by
# side (1,837 s and 1,558 s before TestServeUnderAttack moved to the
# second): TestOCIRuntimes with the lighter tests. A new test runs in the
# second process until it is listed here.
space := $(subst ,, )
E2E_SHARD_A = TestApprovalScriptedApproverE2E TestApprovalTimeoutE2E TestBenchFloors \
  TestConcurrentSessionsE2E TestContainerKilledFromOutside TestContainerdGVisor \
  TestContainerdHardening TestContainerdHostile TestContainerdLyingDriver \
  TestDoctorExplainsCrunOnHybridCgroups TestEgress TestGVisorOOMScoreAdjStaysInTheSentry \
  TestHardening TestHostBoundsMountinfo TestHostKilledThenGC TestIdleMemory \
  TestImageRootfsCheck TestKubernetesAgent TestLyingDriver TestMCPApprovalE2E TestMCPCancel \
  TestMCPPrograms TestMCPStreamableHTTP TestMCPToolsList TestMCPUpstreamMemory \
  TestOCIRuntimes TestProgramExit TestRegistryCancellationStopsDispatch \
  TestRegistryDeniedSubCallIsARejection TestRegistryServesConcurrentCallsInSubmissionOrder \
  TestRunCommandFailureAndCancel TestRunnerSuites TestServe TestServeAllowRuntimes \
  TestServeMaxConnections TestServeMemoryBeforeAdmission \
  TestSessionAbortDisconnectSilenceE2E TestSessionBadInputE2E TestSessionCloseCodesE2E \
  TestTenantsE2E TestTracingCLI TestTracingMCP
E2E_SHARD ?= ^($(subst $(space),|,$(strip $(E2E_SHARD_A))))$$
GOTEST    = $(GO) test -race -count=1 -timeout 70m

.PHONY: test
test: images containerd-images sdk-check-image agent-image fleet-images ## run every test: unit, runner suites, e2e against the real daemon (anything missing fails)
	@set -u; export $(REQUIRE_DAEMON) DSH_SDKGEN_COMPILE_IMAGE=$(SDK_CHECK_IMAGE); \
	pkgs=$$($(GO) list ./... | grep -v '/e2e$$'); \
	$(GOTEST) -exec /bin/true ./... >/dev/null 2>&1 || true; \
	run() { name=$$1; shift; ( set -o pipefail; "$$@" 2>&1 | sed -u "s/^/[$$name] /" ); }; \
	run pkgs $(GOTEST) $$pkgs & p1=$$!; \
	run e2e-a $(GOTEST) -run '$(E2E_SHARD)' ./e2e/ & p2=$$!; \
	run e2e-b $(GOTEST) -skip '$(E2E_SHARD)' ./e2e/ & p3=$$!; \
	rc=0; for p in $$p1 $$p2 $$p3; do wait $$p || rc=1; done; \
	[ $$rc = 0 ] && echo "make test: every package passed" || echo "make test: FAIL (see the [pkgs], [e2e-a] and [e2e-b] lines above)"; \
	exit $$rc

.PHONY: unit
unit: ## run the tests that need no daemon, without touching it (DSH_TEST_DAEMON=off)
	DSH_TEST_DAEMON=off $(GO) test -race -count=1 $$($(GO) list ./... | grep -v /e2e)

.PHONY: e2e
e2e: images ## run the e2e suite against the real daemon and images (anything missing fails)
	$(REQUIRE_DAEMON) $(GO) test -race -count=1 -timeout 70m ./e2e/...

.PHONY: e2e-restart
e2e-restart: images ## restart dockerd mid-run (disruptive: run it alone; .ci/run does, after `make test`)
	$(REQUIRE_DAEMON) DSH_E2E_DAEMON_RESTART=1 $(GO) test -count=1 -timeout 10m -run '^TestDaemonRestartMidRun$$' -v ./e2e/

# The tests of call order, cancellation and settlement, the ones a race
# breaks: run many times under -race with every CPU busy, so a schedule a
# quiet machine never produces shows up here rather than in CI at random.
STRESS_COUNT ?= 300
STRESS_REGISTRY := TestRunCode(SubmissionOrder|SerializesUnderContention|ConcurrentRuns|OuterCancellation|SettlementAbandonsQueue|NothingStartsAfterSettlement|BindingContextCancelled)$$
STRESS_CONTAINER := Test(BindingsRunInIssueOrder|CancellationAborts|CloseAbortsInFlightRunsAndRefusesNewOnes|DoneRacingExit)$$

.PHONY: stress
stress: ## call-order, cancellation and settlement tests, -race -count=$(STRESS_COUNT), with the CPU loaded
	@load=""; for _ in $$(seq $$(nproc)); do (while :; do :; done) & load="$$load $$!"; done; \
	trap 'kill $$load 2>/dev/null' EXIT; \
	$(GO) test -race -timeout 30m -count=$(STRESS_COUNT) -run '$(STRESS_REGISTRY)' ./registry/ && \
	$(GO) test -race -timeout 30m -count=$$(( $(STRESS_COUNT) / 10 )) -run '$(STRESS_CONTAINER)' ./backend/container/

.PHONY: bench
bench: images ## benchmarks (ratios side by side; see README)
	$(GO) test -run '^$$' -bench . -benchtime 20x ./e2e/...

.PHONY: fmt
fmt: ## gofmt the tree
	gofmt -w $$(git ls-files '*.go')

.PHONY: lint
lint: ## fail on gofmt diffs, go vet and staticcheck findings
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	$(GO) run $(STATICCHECK) ./...

.PHONY: gc
gc: build ## remove containers and socket dirs left by dead runs
	$(BIN) gc

.PHONY: clean
clean: ## remove build output
	rm -rf bin
