# Sourced by test/k8s-binaries.sh and test/node-binaries.sh: the one rule
# for when a cached set of built binaries is current.
#
# stamp_of DIR FILE... prints a hash of the Go toolchain and the named
# files (relative to DIR): the inputs a build depends on.
# exit_if_current LABEL BIN STAMP NAME... exits 0 when every NAME is an
# executable in BIN and BIN/.stamp holds STAMP; otherwise it prepares BIN
# for a build (the stamp is written back by write_stamp only after a
# build succeeds, so an interrupted build is never taken as current).

stamp_of() {
	local dir="$1"
	shift
	(
		cd "${dir}"
		{
			go env GOVERSION GOOS GOARCH
			cat "$@"
		} | sha256sum | cut -d' ' -f1
	)
}

exit_if_current() {
	local label="$1" bin="$2" stamp="$3"
	shift 3
	local current=1 b
	for b in "$@"; do
		[[ -x "${bin}/${b}" ]] || current=0
	done
	if [[ "${current}" == 1 && "$(cat "${bin}/.stamp" 2>/dev/null)" == "${stamp}" ]]; then
		echo "${label}: ${bin} is current"
		exit 0
	fi
	mkdir -p "${bin}"
	rm -f "${bin}/.stamp"
	echo "${label}: building $* into ${bin} (this takes a while)"
}

write_stamp() {
	local label="$1" bin="$2" stamp="$3" start="$4"
	echo "${stamp}" >"${bin}/.stamp"
	echo "${label}: built in $(($(date +%s) - start))s"
}
