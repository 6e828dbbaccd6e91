#!/usr/bin/env bash
# The test command: set up what the tests need, check formatting and vet,
# then run every test (unit and end to end) with the race detector.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PATH:/usr/local/go/bin"

scripts/setup.sh
# setup.sh installed Python with distributed and aiohttp: the tests that
# need them must run, not skip.
export GATEWAY_TEST_REQUIRE_PYTHON=1

# The store's tests also run against a real PostgreSQL. As root on Debian,
# start the packaged server on loopback and give the tests a database; any
# other setup can point GATEWAY_TEST_POSTGRES_URL at a database of its own.
if [ -z "${GATEWAY_TEST_POSTGRES_URL:-}" ] && [ "$(id -u)" -eq 0 ] && command -v pg_ctlcluster >/dev/null; then
	ver=$(ls /usr/lib/postgresql | sort -n | tail -1)
	if ! pg_lsclusters -h | awk '{print $2}' | grep -qx main; then
		pg_createcluster "$ver" main >/dev/null
	fi
	pg_ctlcluster "$ver" main start 2>/dev/null || true
	for _ in $(seq 1 50); do
		su postgres -c "psql -qtAc 'select 1'" >/dev/null 2>&1 && break
		sleep 0.2
	done
	# Test packages run at once, and several start gateway replicas with
	# their own connection pools: the default 100 connections are too few.
	if [ "$(su postgres -c "psql -qtAc 'show max_connections'")" -lt 400 ]; then
		su postgres -c "psql -qc 'ALTER SYSTEM SET max_connections = 400'" >/dev/null
		pg_ctlcluster "$ver" main restart
		for _ in $(seq 1 50); do
			su postgres -c "psql -qtAc 'select 1'" >/dev/null 2>&1 && break
			sleep 0.2
		done
	fi
	su postgres -c "psql -qtAc \"SELECT 1 FROM pg_roles WHERE rolname='gateway_test'\"" | grep -q 1 ||
		su postgres -c "psql -qc \"CREATE ROLE gateway_test LOGIN PASSWORD 'gateway_test'\""
	su postgres -c "psql -qtAc \"SELECT 1 FROM pg_database WHERE datname='gateway_test'\"" | grep -q 1 ||
		su postgres -c "createdb -O gateway_test gateway_test"
	# The tests make a schema each: the role must own the database, whoever made it.
	su postgres -c "psql -qc 'ALTER DATABASE gateway_test OWNER TO gateway_test'" >/dev/null
	export GATEWAY_TEST_POSTGRES_URL="postgres://gateway_test:gateway_test@127.0.0.1:5432/gateway_test?sslmode=disable"
	export GATEWAY_TEST_REQUIRE_POSTGRES=1
fi

# The docker provider, the image builder and the end-to-end container tests
# need a Docker engine and an image with Dask; nothing can be pulled, so the
# image is built here (once, cached). As root the engine is started when
# none answers; elsewhere the tests that need one are skipped with a message.
if [ "$(id -u)" -eq 0 ]; then
	# The cloud members' boot scripts are run in network namespaces with
	# iptables; as root they must run, not skip.
	export GATEWAY_TEST_REQUIRE_SANDBOX=1
	# scripts/setup.sh installed Chromium: the browser tests must run.
	export GATEWAY_TEST_REQUIRE_BROWSER=1
	# ... and jupyterhub: the JupyterHub tests must run too.
	export GATEWAY_TEST_REQUIRE_JUPYTERHUB=1
	scripts/docker.sh
	GATEWAY_TEST_DASK_IMAGE=$(scripts/testimage.sh)
	export GATEWAY_TEST_DASK_IMAGE GATEWAY_TEST_REQUIRE_DOCKER=1
elif docker version >/dev/null 2>&1 && GATEWAY_TEST_DASK_IMAGE=$(scripts/testimage.sh); then
	export GATEWAY_TEST_DASK_IMAGE
fi

unformatted=$(gofmt -l $(git ls-files '*.go' 2>/dev/null || find . -name '*.go'))
if [ -n "$unformatted" ]; then
	echo "gofmt: these files need formatting:" >&2
	echo "$unformatted" >&2
	exit 1
fi
testlog="$(mktemp -d)/testlog"
# The browser tests keep a screenshot (and the HTML) of every step here.
export GATEWAY_TEST_ARTIFACTS="${GATEWAY_TEST_ARTIFACTS:-$(dirname "$testlog")/artifacts}"
echo "test artifacts (the browser tests' screenshots): $GATEWAY_TEST_ARTIFACTS" >&2
go build -o "$testlog" ./internal/cmd/testlog

# vet and the tests that skip under the race detector (allocation counts,
# which sync.Pool makes random under it; they say `if raceEnabled`, a
# constant of a race/!race pair of files; they run once, without it) go in
# the background, beside the race run below rather than before it: they
# compile every package without -race, CPU the race run's end-to-end tests,
# which mostly wait, leave free. Their output follows the race run's.
norace=$(awk '/^func Test/ { name = $2; sub(/\(.*/, "", name) } /if raceEnabled/ && name != "" { print FILENAME ":" name }' $(git ls-files '*_test.go' 2>/dev/null || find . -name '*_test.go'))
side="$(dirname "$testlog")/side.log"
(
	go vet ./...
	if [ -n "$norace" ]; then
		pkgs=$(printf '%s\n' "$norace" | sed 's|/[^/]*$||; s|^|./|' | sort -u)
		names=$(printf '%s\n' "$norace" | sed 's|.*:||' | sort -u | paste -sd '|')
		go test -json -count=1 -run "^($names)\$" $pkgs | "$testlog"
	fi
) >"$side" 2>&1 &
sidepid=$!

# go test starts the packages' test binaries strictly in the order given,
# -p (one per core) at a time. The longest go first, so that they overlap
# the many short ones instead of waiting their turn behind them: in
# ./...'s alphabetical order the integration package (the crash and outage
# tests restart real gateways dozens of times: 20 to 35 minutes, in a
# clean-clone run of 35) started only once images/build (15 minutes) and
# every package before it had started. The log ends with each package's time, so this
# list can follow them. The timeout leaves the integration package room.
# The log keeps each package's result, skips with their reasons, failures
# whole, and the figures that passing tests print ("figure: ..."): go
# test's plain output would hide those, -v would bury them.
longest="./integration/ ./images/build/ ./store/ ./scheduler/ ./providers/..."
status=0
go test -json -race -count=1 -timeout 60m "$@" $longest ./... | "$testlog" || status=$?
sidestatus=0
wait "$sidepid" || sidestatus=$?
echo "--- go vet ./... and the tests without the race detector:" >&2
cat "$side" >&2
if [ "$sidestatus" -ne 0 ]; then
	echo "go vet or the tests without the race detector failed (above)" >&2
	[ "$status" -ne 0 ] || status=$sidestatus
fi
exit "$status"
