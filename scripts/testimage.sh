#!/usr/bin/env bash
# Builds the image the Docker tests run Dask in, once: a Debian bookworm root
# filesystem made with debootstrap, with Debian's python3-distributed (and
# pip, which the image builder's tests install a package with), imported
# into the local Docker engine. Nothing can be pulled from a registry here,
# so the tests make their own image. The root filesystem is kept beside it:
# the end-to-end test runs the user's Dask client from it (chroot), as a
# user environment whose contents are known exactly.
#
# Prints the image reference. Does nothing when both are there already;
# bump VERSION when the package list changes.
set -euo pipefail
VERSION=1
SUITE=bookworm
PACKAGES=python3-distributed,python3-pip,python3-prometheus-client
MIRROR=${GATEWAY_TEST_DEBIAN_MIRROR:-http://deb.debian.org/debian}
CACHE=${GATEWAY_TEST_CACHE:-/var/cache/gateway-test}
IMAGE="gateway-test/dask:$SUITE-$VERSION"
ROOTFS="$CACHE/dask-$SUITE-$VERSION"

if docker image inspect "$IMAGE" >/dev/null 2>&1 && [ -x "$ROOTFS/usr/bin/python3" ]; then
	echo "$IMAGE"
	exit 0
fi
command -v debootstrap >/dev/null || { echo "testimage: debootstrap is not installed (apt-get install debootstrap)" >&2; exit 1; }
[ "$(id -u)" -eq 0 ] || { echo "testimage: debootstrap needs root" >&2; exit 1; }

mkdir -p "$CACHE"
tmp="$ROOTFS.tmp"
rm -rf "$tmp"
echo "testimage: building $IMAGE with debootstrap (a few minutes, once)" >&2
if ! debootstrap --variant=minbase --include="$PACKAGES" "$SUITE" "$tmp" "$MIRROR" >"$CACHE/debootstrap.log" 2>&1; then
	tail -20 "$CACHE/debootstrap.log" >&2
	exit 1
fi
# Smaller and reproducible enough: no package lists or caches.
rm -rf "$tmp"/var/cache/apt/archives/*.deb "$tmp"/var/lib/apt/lists/*
rm -rf "$ROOTFS"
mv "$tmp" "$ROOTFS"
tar -C "$ROOTFS" -c . | docker import \
	--change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
	--change 'ENV LANG=C.UTF-8' \
	--change "LABEL io.gateway.test=dask-$SUITE-$VERSION" \
	- "$IMAGE" >/dev/null
echo "$IMAGE"
