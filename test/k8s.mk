# test/k8s.mk: the Kubernetes control plane the integration tests run
# against. Include it from the top-level Makefile:
#
#   include test/k8s.mk
#   test: k8s-binaries
#
# k8s-binaries builds etcd, kube-apiserver and kube-controller-manager from
# the pinned test/tools module (cold: ~15 minutes on two cores; afterwards a
# no-op). FORMSPEC_K8S_BIN is exported so that every recipe's go test finds
# them; without it the API server tests skip.

K8S_MK_DIR := $(patsubst %/,%,$(dir $(lastword $(MAKEFILE_LIST))))
K8S_VERSION := v1.37.2
FORMSPEC_K8S_BIN ?= $(HOME)/.cache/formspec-hooks/k8s-$(K8S_VERSION)
export FORMSPEC_K8S_BIN

.PHONY: k8s-binaries test-integration

## k8s-binaries: build the control-plane binaries into $(FORMSPEC_K8S_BIN) unless current
k8s-binaries:
	@$(K8S_MK_DIR)/k8s-binaries.sh

## test-integration: run the tests that need a real API server
test-integration: k8s-binaries
	go test -count=1 ./test/...
