#!/usr/bin/env bash
# Makes sure a Docker engine answers, for the docker provider and its tests:
# installs Debian's docker.io (and debootstrap, which scripts/testimage.sh
# builds the test image with) when missing, and starts dockerd when no engine
# answers. This workplace's engine runs without the default bridge and
# without touching iptables. The docker provider still gives each cluster a
# user-defined bridge network of its own, and, since no iptables rules keep
# those bridges apart here, turns IPv4 forwarding off on each of them (as
# root; see providers.docker.egress).
set -euo pipefail

missing=()
command -v dockerd >/dev/null || missing+=(docker.io)
command -v debootstrap >/dev/null || missing+=(debootstrap)
# The tests of the cloud members' boot scripts run them in a network
# namespace with these.
command -v iptables >/dev/null || missing+=(iptables)
command -v ip >/dev/null || missing+=(iproute2)
[ -x /usr/bin/curl ] || missing+=(curl)
if [ ${#missing[@]} -gt 0 ] && [ "$(id -u)" -eq 0 ]; then
	echo "docker: installing ${missing[*]}" >&2
	apt-get update -qq
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
fi
if docker version >/dev/null 2>&1; then
	exit 0
fi
if [ "$(id -u)" -ne 0 ]; then
	echo "docker: no Docker engine answers; start one (dockerd --bridge=none --iptables=false --ip6tables=false) or set DOCKER_HOST" >&2
	exit 1
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
