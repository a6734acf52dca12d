# formspec-hooks — see README.md.
#   make run    run the hook server on localhost, with its reporter sidecar and
#               a reference Cluster Control, for a local demo
#   make test   run every test layer (builds the Kubernetes test binaries once)
#               and the Helm chart's tests

GO      ?= go
BIN     ?= bin
LISTEN  ?= 127.0.0.1:8080
METRICS ?= 127.0.0.1:9090

# The values the golden fixtures were made with, so that any fixture
# posted to `make run` answers exactly its response.json.
RUN_FLAGS ?= --listen $(LISTEN) --metrics-listen $(METRICS) \
	--resource-image formahub/formspec-resource --default-version latest \
	--control-cluster-url http://formspec-ctl.formspec-system:7070 \
	--log-level debug --shutdown-delay 0s

include test/k8s.mk

FORMSPEC_NODE_BIN ?= $(HOME)/.cache/formspec-hooks/node-$(K8S_VERSION)
export FORMSPEC_NODE_BIN

.PHONY: all build run test test-helm test-node node-binaries helm-crds unit fmt vet fixtures load clean

all: build

build:
	$(GO) build -o $(BIN)/ ./cmd/...

# run starts the three processes of a local demo and stops all of them on
# Ctrl-C: the reference Cluster Control (API 127.0.0.1:8480, admin
# 127.0.0.1:8481), the reporter sidecar (127.0.0.1:8181, metrics
# 127.0.0.1:9091) and the hook server.
run: build
	@trap 'trap - EXIT INT TERM; kill 0' EXIT INT TERM; \
	$(BIN)/formspec-clustercontrol --listen 127.0.0.1:8480 --admin-listen 127.0.0.1:8481 & \
	$(BIN)/formspec-reporter --cluster-control-url http://127.0.0.1:8480 \
		--listen 127.0.0.1:8181 --metrics-listen 127.0.0.1:9091 \
		--node-health-interval 5s --deploy-status-interval 5s & \
	$(BIN)/formspec-hooks serve $(RUN_FLAGS) --reporter-url http://127.0.0.1:8181

# test runs every layer: unit tests, the concurrent packages again under the
# race detector, the tests against a real kube-apiserver (k8s-binaries
# builds it once, ~15 minutes cold), and the Helm chart's tests. The
# Metacontroller end-to-end tests run too when METACONTROLLER_BIN names a
# binary, and say that they skip when it does not.
test: vet k8s-binaries node-binaries
	@if [ -z "$$METACONTROLLER_BIN" ]; then echo "note: METACONTROLLER_BIN is not set, so the Metacontroller end-to-end tests (test/e2e, and those of test/node) skip; see docs/testing.md"; fi
	$(GO) test -count=1 ./...
	$(GO) test -count=1 -race ./hooks/server/... ./hooks/reporter/... ./hooks/clustercontrol/... ./cmd/...
	cd test/helm && $(GO) test -count=1 ./...
	$(MAKE) --no-print-directory test-node

# test-node runs test/node: a real one-node cluster (kubelet, containerd,
# kube-proxy, CoreDNS, kube-scheduler beside the test control plane), the
# project's image built here, deploy/ applied with kubectl, the hook pods
# Ready behind their Service; with METACONTROLLER_BIN, Metacontroller in a
# pod and the workspace scenarios. It needs root (a bridge, iptables rules,
# mounts, cgroups) and the Debian packages .ci/run installs; as another user
# the cluster tests skip and say so. It prints how long each phase took.
test-node: k8s-binaries node-binaries
	@if [ "$$(id -u)" != 0 ]; then echo "note: not root, so the one-node cluster tests (test/node) skip: they create a bridge, iptables rules, mounts and cgroups; see docs/testing.md"; fi
	cd test/node && $(GO) test -count=1 -timeout 40m -v ./...

# node-binaries builds the kubelet, kube-proxy, kube-scheduler and CoreDNS
# into $(FORMSPEC_NODE_BIN) unless current (cold: a few minutes); only as
# root, since only root can run them.
node-binaries:
	@if [ "$$(id -u)" = 0 ]; then test/node-binaries.sh; else echo "node-binaries: not root, not building the node binaries (test/node skips)"; fi

# test-helm runs only the chart's tests: render, helm lint, sameness with
# deploy/, and a dry run of every rendered object against the API server.
# test/helm is a module of its own so that Helm's dependencies stay out of
# go.mod; its first build takes a minute or two.
test-helm: k8s-binaries
	cd test/helm && $(GO) test -count=1 ./...

# helm-crds copies deploy/crds into the chart, which Helm wants in its own
# crds/ directory; test/helm fails while the two differ.
helm-crds:
	rm -f deploy/helm/formspec-hooks/crds/*.yaml
	cp deploy/crds/formspec.dev_*.yaml deploy/helm/formspec-hooks/crds/

# unit runs the tests that need nothing but Go.
unit:
	$(GO) test ./hooks/... ./cmd/...

fmt:
	gofmt -w $$(git ls-files '*.go')

vet:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	cd test/helm && $(GO) vet ./...
	cd test/node && $(GO) vet ./...

# fixtures regenerates the fixture requests (workspace ones from
# test/fixturegen, the signed datastore and resourceclaim ones from their
# packages' tests) and every golden response, as the HTTP handler answers
# it with the real clock; review the diff like code.
fixtures:
	$(GO) run ./test/fixturegen -out fixtures
	$(GO) test ./hooks/datastore ./hooks/resourceclaim -run 'TestFixtureRequests$$' -update
	$(GO) test ./cmd/formspec-hooks -run 'TestFixtures$$' -update

# load posts the Workspace sync fixtures to a running server (make run) and
# prints throughput and latency percentiles.
load:
	$(GO) run ./test/load -duration 20s -workers 4

clean:
	rm -rf $(BIN)
