#!/usr/bin/env bash
# Build the node binaries the one-node test cluster runs (kubelet,
# kube-proxy, kube-scheduler and the kubectl its tests apply the install
# with, from the pinned test/node/binaries module, and
# CoreDNS with only the plugins it needs from test/node/coredns) into
# ${FORMSPEC_NODE_BIN:-$HOME/.cache/formspec-hooks/node-v1.37.2}.
#
# Like test/k8s-binaries.sh, the build is skipped when all binaries exist and
# were built from the current go.mod, go.sum and sources with the current Go
# toolchain (recorded in a stamp file next to them). The control-plane
# binaries come from test/k8s-binaries.sh; these are kept apart so that
# neither build invalidates the other.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
src="${root}/test/node"
bin="${FORMSPEC_NODE_BIN:-${HOME}/.cache/formspec-hooks/node-v1.37.2}"
binaries=(kubelet kube-proxy kube-scheduler kubectl coredns)

# shellcheck source=binaries-stamp.sh
source "${root}/test/binaries-stamp.sh"
stamp="$(stamp_of "${src}" binaries/go.mod binaries/go.sum binaries/tools.go coredns/go.mod coredns/go.sum coredns/main.go)"
exit_if_current node-binaries "${bin}" "${stamp}" "${binaries[@]}"
start=$(date +%s)
(
	cd "${src}/binaries"
	# Static binaries: the kubelet and kube-proxy run on the host, and a
	# static build needs nothing from it but the kernel. -X sets the version
	# the node reports (kubectl get nodes) to the pinned one.
	v=k8s.io/component-base/version
	CGO_ENABLED=0 go build -trimpath \
		-ldflags="-s -w -X ${v}.gitVersion=v1.37.2 -X ${v}.gitMajor=1 -X ${v}.gitMinor=37 -X ${v}.gitTreeState=clean" \
		-o "${bin}/" \
		k8s.io/kubernetes/cmd/kubelet \
		k8s.io/kubernetes/cmd/kube-proxy \
		k8s.io/kubernetes/cmd/kube-scheduler \
		k8s.io/kubernetes/cmd/kubectl
)
(
	cd "${src}/coredns"
	CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" -o "${bin}/coredns" .
)
write_stamp node-binaries "${bin}" "${stamp}" "${start}"
