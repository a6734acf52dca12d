#!/usr/bin/env bash
# Build kube-state-metrics, which test/helm runs against the test API server
# with the chart's CustomResourceStateMetrics config, from the pinned module
# in test/ksm/binaries into
# ${FORMSPEC_KSM_BIN:-$HOME/.cache/formspec-hooks/ksm-v2.15.0}.
#
# Like test/k8s-binaries.sh, the build is skipped when the binary exists and
# was built from the current go.mod and go.sum with the current Go toolchain
# (recorded in a stamp file next to it). It is a module apart from
# test/tools and test/node/binaries so that neither build invalidates the
# other; a cold build takes about two minutes on two cores (docs/testing.md).
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
src="${root}/test/ksm/binaries"
bin="${FORMSPEC_KSM_BIN:-${HOME}/.cache/formspec-hooks/ksm-v2.15.0}"

# shellcheck source=binaries-stamp.sh
source "${root}/test/binaries-stamp.sh"
stamp="$(stamp_of "${src}" go.mod go.sum)"
exit_if_current ksm-binaries "${bin}" "${stamp}" kube-state-metrics
start=$(date +%s)
(
	cd "${src}"
	# The flags of kube-state-metrics' own Makefile: a static binary, and
	# the version it reports (kube_state_metrics_build_info, --version)
	# set to the pinned one.
	v=github.com/prometheus/common/version
	CGO_ENABLED=0 go build -trimpath \
		-ldflags="-s -w -X ${v}.Version=v2.15.0 -X ${v}.Revision=4a585c91beffdbd1378833ce5f102b401e7e57c5" \
		-o "${bin}/kube-state-metrics" \
		k8s.io/kube-state-metrics/v2
)
write_stamp ksm-binaries "${bin}" "${stamp}" "${start}"
