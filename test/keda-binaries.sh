#!/usr/bin/env bash
# Build the KEDA HTTP add-on's interceptor, which test/node runs in front of
# a wake-on-request workspace, from the pinned module in test/keda/binaries
# into ${FORMSPEC_KEDA_BIN:-$HOME/.cache/formspec-hooks/keda-http-v0.15.0}.
#
# Like test/ksm-binaries.sh, the build is skipped when the binary exists and
# was built from the current go.mod and go.sum with the current Go toolchain
# (recorded in a stamp file next to it). It is a module apart from the other
# test binaries so that no build invalidates another; a cold build takes
# about four minutes on two cores (docs/testing.md), and only the
# wake-on-request test on the one-node cluster needs it.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
src="${root}/test/keda/binaries"
bin="${FORMSPEC_KEDA_BIN:-${HOME}/.cache/formspec-hooks/keda-http-v0.15.0}"

# shellcheck source=binaries-stamp.sh
source "${root}/test/binaries-stamp.sh"
stamp="$(stamp_of "${src}" go.mod go.sum)"
exit_if_current keda-binaries "${bin}" "${stamp}" interceptor
start=$(date +%s)
(
	cd "${src}"
	# The add-on's own release build: a static binary, stripped, with the
	# version it logs at start set to the pinned one.
	b=github.com/kedacore/http-add-on/pkg/build
	CGO_ENABLED=0 go build -trimpath \
		-ldflags="-s -w -X ${b}.version=v0.15.0 -X ${b}.gitCommit=4ea8a863bd7c16464dc5afbe9ebc8a26e563fac0" \
		-o "${bin}/interceptor" \
		github.com/kedacore/http-add-on/interceptor
)
write_stamp keda-binaries "${bin}" "${stamp}" "${start}"
