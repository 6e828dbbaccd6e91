#!/usr/bin/env bash
# Installs what the gateway and its tests need on Debian/Ubuntu, when missing:
# Go is expected at /usr/local/go or on PATH; Dask comes from Debian's
# python3-distributed at /usr/bin/python3 (the local provider's default).
set -euo pipefail

export PATH="$PATH:/usr/local/go/bin"
if ! command -v go >/dev/null; then
	echo "setup: Go is not installed: install Go 1.26 or newer (https://go.dev/doc/install)" >&2
	exit 1
fi

missing=()
if ! /usr/bin/python3 -c 'import distributed, dask.array' >/dev/null 2>&1; then
	missing+=(python3-distributed)
fi
if ! /usr/bin/python3 -c 'import prometheus_client' >/dev/null 2>&1; then
	missing+=(python3-prometheus-client)
fi
# The API's cookie test drives the dask-gateway client's HTTP library.
if ! /usr/bin/python3 -c 'import aiohttp' >/dev/null 2>&1; then
	missing+=(python3-aiohttp)
fi
# The browser tests drive Debian's Chromium. As root (CI) it is installed
# when missing, and scripts/test.sh then requires those tests to run;
# elsewhere they are skipped with a message when it is missing.
if [ "$(id -u)" -eq 0 ] && ! command -v chromium >/dev/null; then
	missing+=(chromium)
fi
# The JupyterHub tests run Debian's jupyterhub (3.0) on loopback: installed
# as root like Chromium, skipped with a message elsewhere when missing.
if [ "$(id -u)" -eq 0 ] && ! command -v jupyterhub >/dev/null; then
	missing+=(jupyterhub)
fi
if [ ${#missing[@]} -eq 0 ]; then
	exit 0
fi

sudo=""
if [ "$(id -u)" -ne 0 ]; then
	if command -v sudo >/dev/null; then
		sudo="sudo"
	else
		echo "setup: please install as root: apt-get install -y ${missing[*]}" >&2
		exit 1
	fi
fi
if ! command -v apt-get >/dev/null; then
	echo "setup: no apt-get here: install Dask (python3 with distributed) and set providers.local.python" >&2
	exit 1
fi
echo "setup: installing ${missing[*]}" >&2
$sudo apt-get update -qq
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}" >/dev/null
