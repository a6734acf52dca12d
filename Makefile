# formspec-hooks — see README.md.
#   make run    run the hook server on localhost, with its reporter sidecar and
#               a reference Cluster Control, for a local demo
#   make test   run every test layer but the fault and upgrade suites (builds
#               the Kubernetes test binaries once) and the Helm chart's tests
#   make image  build the container image with docker, podman or buildah
#   make release  write dist/: the packaged chart, install.yaml, the image
#               as an OCI archive, linux/amd64 and linux/arm64 binaries, the
#               kubectl plugin for linux and darwin with its krew manifest,
#               SBOMs, provenance and SHA256SUMS, signed with SIGNING_KEY
#               (docs/releasing.md); PRERELEASE=1 for a -dev or -rc version

GO      ?= go
BIN     ?= bin

# The ports of `make run`'s demo, all on 127.0.0.1: the hook server's hooks
# and its metrics and probes, the reporter sidecar's localhost API and its
# metrics, the reference Cluster Control's API and its admin API. Set any
# of them when the default is taken: make run HOOKS_PORT=18080.
HOOKS_PORT            ?= 8080
METRICS_PORT          ?= 9090
REPORTER_PORT         ?= 8181
REPORTER_METRICS_PORT ?= 9091
CC_PORT               ?= 8480
CC_ADMIN_PORT         ?= 8481
LISTEN  ?= 127.0.0.1:$(HOOKS_PORT)
METRICS ?= 127.0.0.1:$(METRICS_PORT)

# VERSION is the project's one version, internal/buildinfo/VERSION: every
# binary embeds it (`formspec-hooks version`, the formspec_hooks_build_info
# metric), it tags and labels the image, and `make sync-version` writes it
# into the chart, deploy/ and the Dockerfile. Change it there, nowhere else
# (docs/releasing.md). REVISION, the commit, is linked into the binaries:
# Go records it by itself only in a plain git checkout.
VERSION  := $(shell cat internal/buildinfo/VERSION)
REVISION ?= $(shell git rev-parse HEAD 2>/dev/null)
LDFLAGS  := -X github.com/formspec/formspec-hooks/internal/buildinfo.revision=$(REVISION)
IMAGE   ?= ghcr.io/formspec/formspec-hooks
# The first container builder found; set it to choose.
BUILDER ?= $(firstword $(foreach b,docker podman buildah,$(if $(shell command -v $(b) 2>/dev/null),$(b))))

# The values the golden fixtures were made with, so that any fixture
# posted to `make run` answers exactly its response.json.
RUN_FLAGS ?= --listen $(LISTEN) --metrics-listen $(METRICS) \
	--resource-image formahub/formspec-resource --default-version latest \
	--cluster-control-url http://formspec-ctl.formspec-system:7070 \
	--log-level debug --shutdown-delay 0s

include test/k8s.mk

FORMSPEC_NODE_BIN ?= $(HOME)/.cache/formspec-hooks/node-$(K8S_VERSION)
export FORMSPEC_NODE_BIN
FORMSPEC_KSM_BIN ?= $(HOME)/.cache/formspec-hooks/ksm-v2.15.0
export FORMSPEC_KSM_BIN

.PHONY: all build image release sync-version run test test-helm test-node test-dist test-faults test-storm test-upgrade test-takeover node-binaries ksm-binaries keda-binaries crds helm-crds unit fmt vet fixtures load bench paced scale clean

all: build

build:
	$(GO) build -ldflags "$(LDFLAGS)" -o $(BIN)/ ./cmd/...

# image builds $(IMAGE):$(VERSION) from the Dockerfile with whichever
# builder is installed: the same files as the release's image archive
# (TestMakeImageMatchesRelease compares them where a builder runs), for
# this machine's platform. SOURCE_DATE_EPOCH, the commit's time, makes
# BuildKit date the image as the release does. Push it with the same tool
# and pin that tag (see docs/install.md).
image:
	@if [ -z "$(BUILDER)" ]; then echo "make image: no docker, podman or buildah found; set BUILDER" >&2; exit 1; fi
	$(BUILDER) $(if $(filter buildah,$(BUILDER)),bud,build) --build-arg VERSION=$(VERSION) --build-arg REVISION=$(REVISION) \
		--build-arg SOURCE_DATE_EPOCH=$(SOURCE_DATE_EPOCH) -t $(IMAGE):$(VERSION) .

# release writes $(DIST) from this checkout, as docs/releasing.md
# describes. It refuses a pre-release version (one with a suffix, such as
# the 0.2.0-dev main carries between releases) unless PRERELEASE=1 asks for
# one. In order: the binaries for linux/amd64 and linux/arm64; the kubectl
# plugin for linux and darwin on both, as .tar.gz archives (what krew
# installs); the image as an OCI archive for both platforms, built as the
# Dockerfile describes (test/node/cmd/imagearchive, without a container
# builder), created at the commit's time; the chart packaged by Helm's
# library and the kustomize install as one install.yaml, both naming the
# image by tag and digest (test/helm/cmd/package); the SBOMs, the krew
# manifest and the provenance statement (test/node/cmd/attest); SHA256SUMS
# over all of it; and, when SIGNING_KEY names an SSH private key
# (ssh-keygen -t ed25519), SHA256SUMS.sig, its signature by `ssh-keygen -Y
# sign` (namespace "file"), with the public key beside it. Go's build cache
# makes a second run cheap; a cold one compiles everything for arm64 and
# darwin too (a few minutes). test/node's TestDist checks the result.
DIST ?= dist
RELEASE_ARCHS ?= amd64 arm64
RELEASE_BINARIES := formspec-hooks formspec-reporter formspec-clustercontrol
PLUGIN_PLATFORMS ?= linux/amd64 linux/arm64 darwin/amd64 darwin/arm64
PRERELEASE ?=
SIGNING_KEY ?=
# The commit's time: the image's creation date, the archives' file times
# and the SBOMs' timestamp, so that a release rebuilt from the same commit
# gives the same bytes.
SOURCE_DATE_EPOCH ?= $(shell git log -1 --format=%ct 2>/dev/null)
release:
	@case "$(VERSION)" in ""|*[!0-9A-Za-z.+-]*) echo "make release: internal/buildinfo/VERSION is \"$(VERSION)\"" >&2; exit 1;; esac
	@case "$(VERSION)" in *-*) if [ "$(PRERELEASE)" != 1 ]; then \
		echo "make release: $(VERSION) is a pre-release version; cut a release by setting internal/buildinfo/VERSION to one without a suffix (docs/releasing.md), or ask for a pre-release with PRERELEASE=1" >&2; exit 1; fi;; esac
	@if [ -z "$(REVISION)" ] || [ -z "$(SOURCE_DATE_EPOCH)" ]; then echo "make release: no git commit to release (REVISION, SOURCE_DATE_EPOCH)" >&2; exit 1; fi
	rm -rf $(DIST) $(DIST).plugin
	mkdir -p $(DIST)
	@for arch in $(RELEASE_ARCHS); do for bin in $(RELEASE_BINARIES); do \
		echo "go build $$bin for linux/$$arch"; \
		CGO_ENABLED=0 GOOS=linux GOARCH=$$arch $(GO) build -trimpath -ldflags "-s -w $(LDFLAGS)" \
			-o $(DIST)/$$bin-$(VERSION)-linux-$$arch ./cmd/$$bin || exit 1; \
	done; done
	@for p in $(PLUGIN_PLATFORMS); do os=$${p%/*}; arch=$${p#*/}; dir=$(DIST).plugin/$$os-$$arch; \
		echo "go build kubectl-formspec for $$os/$$arch"; \
		mkdir -p $$dir && cp LICENSE $$dir/ && \
		CGO_ENABLED=0 GOOS=$$os GOARCH=$$arch $(GO) build -trimpath -ldflags "-s -w $(LDFLAGS)" \
			-o $$dir/kubectl-formspec ./cmd/kubectl-formspec && \
		tar --sort=name --mtime=@$(SOURCE_DATE_EPOCH) --owner=0 --group=0 --numeric-owner -C $$dir -cf - LICENSE kubectl-formspec \
			| gzip -n > $(DIST)/kubectl-formspec-$(VERSION)-$$os-$$arch.tar.gz || exit 1; \
	done
	rm -rf $(DIST).plugin
	digest=$$(cd test/node && $(GO) run ./cmd/imagearchive -root $(CURDIR) -name $(IMAGE):$(VERSION) \
		-arch $$(echo $(RELEASE_ARCHS) | tr ' ' ,) \
		-build-arg VERSION=$(VERSION) -build-arg REVISION=$(REVISION) -build-arg SOURCE_DATE_EPOCH=$(SOURCE_DATE_EPOCH) \
		-out $(abspath $(DIST))/formspec-hooks-image-$(VERSION).oci.tar) && \
	cd test/helm && $(GO) run ./cmd/package -version $(VERSION) -chart $(CURDIR)/deploy/helm/formspec-hooks \
		-kustomization $(CURDIR)/deploy -image $(IMAGE) -image-digest $$digest -source-date-epoch $(SOURCE_DATE_EPOCH) -out $(abspath $(DIST))
	cd test/node && $(GO) run ./cmd/attest -dist $(abspath $(DIST)) -root $(CURDIR) -version $(VERSION) \
		-revision $(REVISION) -source-date-epoch $(SOURCE_DATE_EPOCH) \
		-command "make release$(if $(filter 1,$(PRERELEASE)), PRERELEASE=1)"
	cd $(DIST) && sha256sum $$(ls | grep -vx SHA256SUMS) > SHA256SUMS
	@if [ -n "$(SIGNING_KEY)" ]; then \
		ssh-keygen -Y sign -q -f $(SIGNING_KEY) -n file $(DIST)/SHA256SUMS && \
		ssh-keygen -y -f $(SIGNING_KEY) > $(DIST)/SHA256SUMS.pub && \
		echo "$(DIST)/SHA256SUMS.sig: signed by $$(ssh-keygen -l -f $(DIST)/SHA256SUMS.pub)"; fi
	@echo "$(DIST): formspec-hooks $(VERSION)"; cat $(DIST)/SHA256SUMS

# sync-version writes VERSION into the copies that cannot read the file:
# the chart's version and appVersion, the image tag deploy/ pins, and the
# Dockerfile's label default. internal/buildinfo's tests fail while one
# differs.
sync-version:
	sed -i -E 's/^version: .*/version: $(VERSION)/; s/^appVersion: .*/appVersion: "$(VERSION)"/' deploy/helm/formspec-hooks/Chart.yaml
	sed -i -E '/- name: ghcr.io\/formspec\/formspec-hooks$$/{n;s/newTag: .*/newTag: $(VERSION)/}' deploy/hooks/kustomization.yaml
	sed -i -E 's/^ARG VERSION=.*/ARG VERSION=$(VERSION)/' Dockerfile
	@git diff --stat -- deploy/helm/formspec-hooks/Chart.yaml deploy/hooks/kustomization.yaml Dockerfile 2>/dev/null || true

# run starts the three processes of a local demo: the reference Cluster
# Control (API $(CC_PORT), admin $(CC_ADMIN_PORT)), the reporter sidecar
# ($(REPORTER_PORT), metrics $(REPORTER_METRICS_PORT)) and the hook server
# ($(HOOKS_PORT), metrics $(METRICS_PORT)). Ctrl-C, a SIGTERM to make
# (`kill %1` of `make run &`: make passes it on) or any of the three
# exiting stops all of them: the recipe waits in the shell, where the traps
# can run, and the EXIT trap ends the other two. The admin API needs a
# token, which every run writes afresh into CC_ADMIN_TOKEN_FILE, readable
# by you alone; the API itself, on loopback, takes reports without one.
CC_ADMIN_TOKEN_FILE ?= $(BIN)/clustercontrol-admin.token
run: SHELL := /bin/bash
run: build
	@(umask 077 && head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' > $(CC_ADMIN_TOKEN_FILE))
	@echo 'make run: the admin API takes the token in $(CC_ADMIN_TOKEN_FILE): curl -H "Authorization: Bearer $$(cat $(CC_ADMIN_TOKEN_FILE))" 127.0.0.1:$(CC_ADMIN_PORT)/admin/state'
	@trap 'kill $$(jobs -p) 2>/dev/null; wait' EXIT; trap 'exit 0' INT TERM; \
	$(BIN)/formspec-clustercontrol --listen 127.0.0.1:$(CC_PORT) --admin-listen 127.0.0.1:$(CC_ADMIN_PORT) \
		--admin-token-file $(CC_ADMIN_TOKEN_FILE) & \
	$(BIN)/formspec-reporter --cluster-control-url http://127.0.0.1:$(CC_PORT) \
		--listen 127.0.0.1:$(REPORTER_PORT) --metrics-listen 127.0.0.1:$(REPORTER_METRICS_PORT) \
		--node-health-interval 5s --deploy-status-interval 5s & \
	$(BIN)/formspec-hooks serve $(RUN_FLAGS) --reporter-url http://127.0.0.1:$(REPORTER_PORT) & \
	wait -n

# test runs every layer: unit tests, the concurrent packages again under the
# race detector, the tests against a real kube-apiserver (k8s-binaries
# builds it once, ~15 minutes cold), and the Helm chart's tests (with
# kube-state-metrics, which ksm-binaries builds once, ~2 minutes cold). The
# Metacontroller end-to-end tests run too when METACONTROLLER_BIN names a
# binary, and say that they skip when it does not.
test: vet k8s-binaries node-binaries ksm-binaries
	@if [ -z "$$METACONTROLLER_BIN" ]; then echo "note: METACONTROLLER_BIN is not set, so the Metacontroller end-to-end tests (test/e2e, and those of test/node) skip; see docs/testing.md"; fi
	$(GO) test -count=1 ./...
	$(GO) test -count=1 -race ./internal/server/... ./internal/reporter/... ./internal/clustercontrol/... ./cmd/...
	cd test/tools && $(GO) test -count=1 ./crdgen/...
	cd test/helm && $(GO) test -count=1 ./...
	cd test/codec && $(GO) test -count=1 -run Correctness ./...
	$(MAKE) --no-print-directory test-node

# test-node runs test/node: a real one-node cluster (kubelet, containerd,
# kube-proxy, CoreDNS, kube-scheduler beside the test control plane), the
# release's image, deploy/ applied with kubectl, the hook pods Ready behind
# their Service; with METACONTROLLER_BIN, Metacontroller in a pod and the
# workspace scenarios; and the release itself: test-dist's `make release`
# into $(TEST_DIST) (outside the repository, so that a dist/ of yours is
# left alone), checked complete, whose install.yaml and packaged chart
# install with its image. Every cluster test runs that image, the one the
# release ships, not one of its own. It needs root (a bridge, iptables
# rules, mounts, cgroups) and the Debian packages .ci/run installs; as
# another user the cluster tests skip and say so. It prints how long each
# phase took.
TEST_DIST ?= $(HOME)/.cache/formspec-hooks/dist-test
test-node: k8s-binaries node-binaries test-dist
	@if [ "$$(id -u)" != 0 ]; then echo "note: not root, so the one-node cluster tests (test/node) skip: they create a bridge, iptables rules, mounts and cgroups; see docs/testing.md"; fi
	@if [ -n "$$METACONTROLLER_BIN" ] && [ "$$(id -u)" = 0 ]; then test/keda-binaries.sh; fi
	cd test/node && FORMSPEC_DIST=$(TEST_DIST) $(GO) test -count=1 -timeout 40m -v ./...

# test-dist writes a pre-release of this checkout into $(TEST_DIST), signed
# with a key made for it alone (in $(TEST_DIST).key, so that TestDist
# verifies the signature as docs/releasing.md tells users to): the
# release the cluster tests run. Without ssh-keygen (Debian's
# openssh-client, which .ci/run installs) it is left unsigned and
# TestDist says it skips the signature.
test-dist:
	rm -f $(TEST_DIST).key $(TEST_DIST).key.pub
	mkdir -p $(dir $(TEST_DIST))
	@if command -v ssh-keygen >/dev/null; then \
		ssh-keygen -q -t ed25519 -N '' -C formspec-test-release -f $(TEST_DIST).key && \
		$(MAKE) --no-print-directory release DIST=$(TEST_DIST) PRERELEASE=1 SIGNING_KEY=$(TEST_DIST).key; \
	else echo "note: no ssh-keygen (apt-get install openssh-client), so the test release is not signed"; \
		$(MAKE) --no-print-directory release DIST=$(TEST_DIST) PRERELEASE=1; fi

# test-faults runs the fault suite on the one-node cluster (TestFaults in
# test/node): a fleet of Workspaces with claims (FLEET_WORKSPACES, 50)
# driven while, one after the other, the hook Deployment is rolled by a
# helm upgrade, a hook pod and then the reporters are killed with SIGKILL,
# Metacontroller's pod is deleted in the middle of a teardown,
# kube-apiserver restarts, Cluster Control is down for OUTAGE (5m), and a
# Datastore's endpoint Secret is deleted and created again; each asserts
# what docs/reliability.md says must hold and logs the figures the table
# quotes. It needs root and METACONTROLLER_BIN (it skips and says why
# without them), takes about 10 minutes once the Kubernetes and node
# binaries are built (their first build adds about 15), and is not part of
# make test.
FLEET_WORKSPACES ?= 50
OUTAGE ?= 5m
test-faults: k8s-binaries node-binaries test-dist
	@if [ -z "$$METACONTROLLER_BIN" ]; then echo "note: METACONTROLLER_BIN is not set, so the fault suite skips: it runs Metacontroller in a pod; see docs/testing.md"; fi
	cd test/node && FORMSPEC_DIST=$(TEST_DIST) FORMSPEC_FAULTS=1 FORMSPEC_FLEET_WORKSPACES=$(FLEET_WORKSPACES) FORMSPEC_FAULTS_OUTAGE=$(OUTAGE) \
		$(GO) test -count=1 -timeout 90m -v -run '^TestFaults$$' .

# test-storm runs TestDirectiveStorm on the one-node cluster (test/node):
# a fleet of STORM_WORKSPACES Workspaces (32) under a reporter budget of a
# tenth of them at once and 90 s between two restarts of one, while the
# reference Cluster Control publishes a new hash for every workspace every
# 5 s for two minutes. No more may restart at once than the budget
# allows, none sooner than the interval, and each must end on its last
# hash. Root and METACONTROLLER_BIN, like test-faults; about 10 minutes
# once the binaries are built; not part of make test.
STORM_WORKSPACES ?= 32
test-storm: k8s-binaries node-binaries test-dist
	@if [ -z "$$METACONTROLLER_BIN" ]; then echo "note: METACONTROLLER_BIN is not set, so the storm test skips: it runs Metacontroller in a pod; see docs/testing.md"; fi
	cd test/node && FORMSPEC_DIST=$(TEST_DIST) FORMSPEC_STORM=1 FORMSPEC_FLEET_WORKSPACES=$(STORM_WORKSPACES) \
		$(GO) test -count=1 -timeout 40m -v -run '^TestDirectiveStorm$$' .

# test-upgrade installs the chart and image of the previous version (the
# revision test/node/testdata/upgrade-from names, built from git archive
# outside the repository) with FLEET_WORKSPACES workspaces of every class
# shape with claims, upgrades to this checkout with helm upgrade
# --reset-then-reuse-values under Metacontroller, and finds no new
# ReplicaSet but exactly one for each workspace a change the changelog's
# Rolls workspaces names rolls, no recreated credentials Secret, no failed
# hook call and no Workspace leaving Ready (TestUpgrade in test/node).
# Root and METACONTROLLER_BIN, like test-faults; about 3 minutes once the
# binaries are built, 8 when a change rolls workspaces through their
# claims (it waits for the claims' resync).
test-upgrade: k8s-binaries node-binaries test-dist
	@if [ -z "$$METACONTROLLER_BIN" ]; then echo "note: METACONTROLLER_BIN is not set, so the upgrade test skips: it runs Metacontroller in a pod; see docs/testing.md"; fi
	cd test/node && FORMSPEC_DIST=$(TEST_DIST) FORMSPEC_UPGRADE=1 FORMSPEC_FLEET_WORKSPACES=$(FLEET_WORKSPACES) \
		$(GO) test -count=1 -timeout 60m -v -run '^TestUpgrade$$' .

# test-takeover takes over, on the one-node cluster, the Workspaces of the
# original FormSpec operator (FLEET_WORKSPACES of every class shape, with
# claims, their children made as that operator made them) following
# docs/migrating.md, while a client calls every running workspace's
# Service; root and METACONTROLLER_BIN, minutes. See docs/testing.md.
test-takeover: k8s-binaries node-binaries test-dist
	@if [ -z "$$METACONTROLLER_BIN" ]; then echo "note: METACONTROLLER_BIN is not set, so the takeover test skips: it runs Metacontroller in a pod; see docs/testing.md"; fi
	cd test/node && FORMSPEC_DIST=$(TEST_DIST) FORMSPEC_TAKEOVER=1 FORMSPEC_FLEET_WORKSPACES=$(FLEET_WORKSPACES) \
		$(GO) test -count=1 -timeout 60m -v -run '^TestTakeover$$' .

# node-binaries builds the kubelet, kube-proxy, kube-scheduler and CoreDNS
# into $(FORMSPEC_NODE_BIN) unless current (cold: a few minutes); only as
# root, since only root can run them.
node-binaries:
	@if [ "$$(id -u)" = 0 ]; then test/node-binaries.sh; else echo "node-binaries: not root, not building the node binaries (test/node skips)"; fi

# ksm-binaries builds kube-state-metrics v2.15.0 from the pinned module in
# test/ksm/binaries into $(FORMSPEC_KSM_BIN) unless current (cold: about
# two minutes); test/helm runs it with the chart's fleet-view config.
ksm-binaries:
	@test/ksm-binaries.sh

# keda-binaries builds the KEDA HTTP add-on's interceptor v0.15.0 from the
# pinned module in test/keda/binaries into $(FORMSPEC_KEDA_BIN) unless
# current (cold: about four minutes). Only test/node's wake-on-request test
# runs it, with Metacontroller, so test-node builds it only then, before
# the tests' timeout starts.
keda-binaries:
	@test/keda-binaries.sh

# test-helm runs only the chart's tests: render, helm lint, sameness with
# deploy/, a dry run of every rendered object against the API server, and
# kube-state-metrics with the chart's config against a real one.
# test/helm is a module of its own so that Helm's dependencies stay out of
# go.mod; its first build takes a minute or two.
test-helm: k8s-binaries ksm-binaries
	cd test/helm && $(GO) test -count=1 ./...

# crds writes the Workspace CRD from its template, giving the pod
# passthrough fields the schemas of their core types as the pinned
# kube-apiserver defines them (test/tools/crdgen), then copies the CRDs into
# the chart. test/tools/crdgen's tests fail while the CRD is stale.
crds:
	cd test/tools/crdgen && $(GO) run .
	$(MAKE) helm-crds

# helm-crds copies deploy/crds into the chart, which Helm wants in its own
# crds/ directory; test/helm fails while the two differ.
helm-crds:
	rm -f deploy/helm/formspec-hooks/crds/*.yaml
	cp deploy/crds/formspec.dev_*.yaml deploy/helm/formspec-hooks/crds/

# unit runs the tests that need nothing but Go.
unit:
	$(GO) test ./hooks/... ./internal/... ./cmd/... ./test/docs/...

fmt:
	gofmt -w $$(git ls-files '*.go')

vet:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	cd test/helm && $(GO) vet ./...
	cd test/tools && $(GO) vet ./crdgen/...
	cd test/node && $(GO) vet ./...

# fixtures regenerates the fixture requests, each built by its hook
# package's TestFixtureRequests, and every golden response, as the HTTP
# handler answers it with the real clock; review the diff like code.
fixtures:
	$(GO) test ./internal/hooks/workspace ./internal/hooks/datastore ./internal/hooks/resourceclaim ./internal/hooks/wake -run 'TestFixtureRequests$$' -update
	$(GO) test ./cmd/formspec-hooks -run 'TestFixtures$$|TestWarmCallsCoverEveryHook$$' -update

# load posts the Workspace sync fixtures to a running server (make run) and
# prints throughput and latency percentiles.
load:
	$(GO) run ./test/load -url http://$(LISTEN) -duration 20s -workers 4

# bench measures, in one run, the hook server against a bare encoding/json
# round-trip server, a Python http.server + json hook (when python3 is
# present) and an HTTP floor: req/s, ratios, p50/p99 and peak RSS. It prints
# two tables, each with freshly started servers: first the one request the
# hot-path goal is stated on (a steady, ready Workspace sync), then the
# whole Workspace sync fixture set. The driver (test/load/client.go) is a
# lean HTTP/1.1 client that costs about what wrk does; -cpus split runs it
# on the first CPU and every server on the others (-cpus shared: anywhere;
# docs/performance.md says why). About 90 s with the defaults. Compare ratios,
# not absolute figures.
BENCH_FLAGS ?= -duration 8s -workers 8 -cpus split
BENCH_MATCH ?= workspace/sync/steady-ready workspace/sync
bench: build
	$(GO) build -o $(BIN)/load ./test/load
	@for m in $(BENCH_MATCH); do echo; $(BIN)/load -compare $(BIN)/formspec-hooks -match $$m $(BENCH_FLAGS) || exit 1; done

# paced posts the hook calls of a converging fleet (per workspace a
# customize and a first sync; for every tenth a claim's customize and two
# claim syncs) at Metacontroller's pace, over TLS, to the hook server as
# deployed and to TestScale's trivial hook side by side, and prints each one's
# CPU per call from /proc and their ratio: TestScale's converge figure in
# about a minute and a half instead of a fleet run (test/paced, docs/performance.md
# "Paced calls"). PACED_FLAGS passes more, e.g. -only resourceclaim, or
# -also PATH to measure another build of the hook server beside.
PACED_FLAGS ?=
paced: build
	$(GO) build -o $(BIN)/trivialhook ./test/e2e/trivialhook
	$(GO) build -o $(BIN)/paced ./test/paced
	$(BIN)/paced -hooks $(BIN)/formspec-hooks -trivial $(BIN)/trivialhook $(PACED_FLAGS)

# scale runs a fleet of Workspaces at each of SCALE_SIZES on the test
# control plane under Metacontroller (METACONTROLLER_BIN, with
# --client-go-qps SCALE_QPS and server-side apply), each size twice side
# by side: with the hook server, its reporter and the reference Cluster
# Control, and with a trivial hook under the same controller definitions.
# It prints, per size, the time to converge, hook CPU per call, peak RSS,
# Cluster Control traffic, API writes per workspace and the steady-state
# cost of the resync, and how each grows with N; it asserts none of them
# (test/e2e TestScale, docs/performance.md "Scale under Metacontroller").
# SCALE_ROUNDS runs each size again, alternating which goes first, and
# prints medians. At SCALE_QPS 50 Metacontroller's client rate sets the
# pace; at 300 each run's one CPU does (docs/performance.md, "Two regimes").
# The default sizes take about 70 minutes here (2 cores, a 300 s resync:
# 44 minutes for 10,000); progress is printed every 15 s. Run it alone:
# every size of 1,000 or more takes the whole machine.
SCALE_SIZES  ?= 1000 3000 10000
SCALE_ROUNDS ?= 1
SCALE_QPS    ?= 50
scale: k8s-binaries
	@if [ -z "$$METACONTROLLER_BIN" ]; then echo "make scale: METACONTROLLER_BIN is not set: build Metacontroller v4.16+ from its public source and set it (docs/testing.md)" >&2; exit 1; fi
	FORMSPEC_E2E_SCALE="$(SCALE_SIZES)" FORMSPEC_E2E_SCALE_ROUNDS=$(SCALE_ROUNDS) FORMSPEC_E2E_SCALE_QPS=$(SCALE_QPS) \
		$(GO) test -count=1 -timeout 0 -run '^TestScale$$' -v ./test/e2e/

clean:
	rm -rf $(BIN)
