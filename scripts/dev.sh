#!/usr/bin/env bash
# The main job on one machine: set up, build, start `gateway dev`, and create a
# first cluster with two workers. The gateway keeps running in the foreground;
# Ctrl-C stops it and its clusters.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PATH:/usr/local/go/bin"

scripts/setup.sh
mkdir -p bin
go build -o bin/gateway ./cmd/gateway
echo "built bin/gateway" >&2

bin/gateway dev "$@" &
gw=$!
trap 'kill -TERM $gw 2>/dev/null; wait $gw' INT TERM

url=""
for _ in $(seq 1 100); do
	if ! kill -0 $gw 2>/dev/null; then
		wait $gw
		exit 1
	fi
	if bin/gateway whoami >/dev/null 2>&1; then
		url=ok
		break
	fi
	sleep 0.1
done
if [ -z "$url" ]; then
	echo "dev: the gateway did not come up within 10s" >&2
	kill -TERM $gw
	wait $gw
	exit 1
fi

bin/gateway new-cluster --workers 2 || true
echo
echo "The gateway keeps running: open its web console in a browser (the banner's \"web console\" line), or in another shell: bin/gateway list | show | scale | stop | logs. Ctrl-C stops it." >&2
wait $gw
