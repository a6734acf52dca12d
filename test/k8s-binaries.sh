#!/usr/bin/env bash
# Build the control-plane binaries the integration tests run (etcd,
# kube-apiserver, kube-controller-manager) from the pinned tools module in
# test/tools, into ${FORMSPEC_K8S_BIN:-$HOME/.cache/formspec-hooks/k8s-v1.37.2}.
#
# The build is skipped when all three binaries exist and were built from the
# current test/tools/go.mod, go.sum and etcd main with the current Go
# toolchain (recorded in a stamp file next to them). A cold build takes
# roughly fifteen minutes on two cores (901 s measured); see docs/testing.md.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
tools="${root}/test/tools"
bin="${FORMSPEC_K8S_BIN:-${HOME}/.cache/formspec-hooks/k8s-v1.37.2}"
binaries=(etcd kube-apiserver kube-controller-manager)

# shellcheck source=binaries-stamp.sh
source "${root}/test/binaries-stamp.sh"
stamp="$(stamp_of "${tools}" go.mod go.sum etcd/main.go)"
exit_if_current k8s-binaries "${bin}" "${stamp}" "${binaries[@]}"
start=$(date +%s)
(
	cd "${tools}"
	# One go build for all three shares the compilation of common packages.
	# -X sets the version the API server reports (/version) to the pinned one
	# instead of v0.0.0-master.
	v=k8s.io/component-base/version
	CGO_ENABLED=0 go build -trimpath \
		-ldflags="-s -w -X ${v}.gitVersion=v1.37.2 -X ${v}.gitMajor=1 -X ${v}.gitMinor=37 -X ${v}.gitTreeState=clean" \
		-o "${bin}/" \
		./etcd \
		k8s.io/kubernetes/cmd/kube-apiserver \
		k8s.io/kubernetes/cmd/kube-controller-manager
)
write_stamp k8s-binaries "${bin}" "${stamp}" "${start}"
