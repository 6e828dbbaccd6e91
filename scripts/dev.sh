#!/usr/bin/env bash
# The main job on one machine: set up, build, start `gateway dev`, and create a
# first cluster with two workers. The gateway keeps running in the foreground;
# Ctrl-C stops it and its clusters. Its logs go to a file that the banner
# names (pass --log-file - to see them here); other arguments go to gateway dev.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PATH:/usr/local/go/bin"

scripts/setup.sh
mkdir -p bin
# GATEWAY_BIN: a gateway binary built elsewhere (the test of this script
# uses the test suite's), instead of building one here.
bin="${GATEWAY_BIN:-}"
if [ -z "$bin" ]; then
	bin=bin/gateway
	log=$(mktemp)
	start=$(date +%s)
	if [ ! -e bin/gateway ]; then
		# The first build downloads the modules and compiles about 860
		# packages, about 5 minutes of CPU (measured: 307 s on the test
		# machine): say so, with a time for this machine's cores, then
		# stay quiet.
		echo "building bin/gateway: the first build downloads and compiles the dependencies, roughly $((307 / $(nproc) / 60 + 2)) minutes with $(nproc) cores; later builds take seconds" >&2
	fi
	# Without the symbol table and DWARF (-s -w): 98 MB instead of 135;
	# panics keep their stack traces.
	if ! go build -ldflags="-s -w" -o bin/gateway ./cmd/gateway >"$log" 2>&1; then
		grep -v '^go: downloading ' "$log" >&2
		rm -f "$log"
		exit 1
	fi
	rm -f "$log"
	echo "built bin/gateway in $(($(date +%s) - start))s" >&2
fi

args=("$@")
if ! printf '%s\n' "$@" | grep -q '^--log-file'; then
	state="${XDG_STATE_HOME:-$HOME/.local/state}/gateway"
	args+=(--log-file "$state/dev.log")
fi
exec "$bin" dev --first-cluster 2 "${args[@]}"
