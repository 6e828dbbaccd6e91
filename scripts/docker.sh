#!/usr/bin/env bash
# Makes sure a Docker engine answers, for the docker provider and its tests:
# installs Debian's docker.io (and debootstrap, which scripts/testimage.sh
# builds the test image with) when missing, and starts dockerd when no engine
# answers. This workplace's engine runs without a bridge network and without
# touching iptables: containers use the host's network and bind to loopback.
set -euo pipefail

if docker version >/dev/null 2>&1; then
	exit 0
fi
if [ "$(id -u)" -ne 0 ]; then
	echo "docker: no Docker engine answers; start one (dockerd --bridge=none --iptables=false --ip6tables=false) or set DOCKER_HOST" >&2
	exit 1
fi
missing=()
command -v dockerd >/dev/null || missing+=(docker.io)
command -v debootstrap >/dev/null || missing+=(debootstrap)
if [ ${#missing[@]} -gt 0 ]; then
	echo "docker: installing ${missing[*]}" >&2
	apt-get update -qq
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
fi
log=/var/log/gateway-dockerd.log
nohup dockerd --bridge=none --iptables=false --ip6tables=false >"$log" 2>&1 &
for _ in $(seq 1 100); do
	docker version >/dev/null 2>&1 && exit 0
	sleep 0.2
done
echo "docker: dockerd did not start; its log ($log) ends with:" >&2
tail -20 "$log" >&2
exit 1
