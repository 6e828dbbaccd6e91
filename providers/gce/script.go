package gce

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/gatewayhq/gateway/images"
	"github.com/gatewayhq/gateway/providers"
)

// scriptParams is what one member's startup script needs. Nothing in it is
// secret: the script is instance metadata, readable by anyone with
// compute.instances.get.
type scriptParams struct {
	Project   string
	SecretID  string
	Image     string // container image
	Role      providers.Role
	Member    string
	GPU       bool
	Scheduler string // worker: the scheduler's host:port
	Prefix    string // scheduler: the dashboard prefix
	Threads   int    // worker: 0 lets Dask use every CPU
	Memory    int64  // worker: bytes, 0 for Dask's default
	Python    string // the interpreter in the image that runs the launcher
	Expect    string // the client's versions (images.ExpectEnv), "" for none
}

// launcherEOF ends the here-document that carries the launcher; the
// launcher never has this line (TestStartupScriptLauncher).
const launcherEOF = "GATEWAY_LAUNCHER_EOF"

// maxStatus bounds the launcher's table in the guest attribute
// gateway/status; a longer table is cut there and whole in the serial
// console output.
const maxStatus = 2048

// secretAccessURL is where instances read their TLS secret: always Google's
// endpoint (Private Google Access reaches it without an external address).
const secretAccessURL = "https://secretmanager.googleapis.com/v1/projects/${PROJECT}/secrets/${SECRET}/versions/latest:access"

// startupScript is the member's startup-script. It
//
//  1. fetches the cluster's certificate and key from Secret Manager with the
//     instance's service-account token (retrying while a fresh IAM grant
//     propagates) into /run, which is memory only;
//  2. pulls the container image (configuring registry credentials for
//     Artifact Registry and Container Registry), and for GPU machines
//     either installs the driver (Container-Optimized OS) or uses the
//     NVIDIA container runtime (Deep Learning VM images);
//  3. cuts every process but its own (a random uid) off from the metadata
//     server, so that the container never holds a token of the members'
//     service account (metadataCutoff);
//  4. runs `dask scheduler` or `dask worker` with TLS on the host network,
//     as the local provider's command line does, the scheduler's dashboard
//     over TLS with the cluster's certificate, through the launcher
//     (images.LauncherScript, written to a file the container mounts),
//     which first checks the image's versions against the client's;
//  5. sets the guest attribute gateway/ready once the scheduler accepts
//     connections, for Describe;
//  6. when Dask exits, or any step fails, records why in the guest attribute
//     gateway/status (the launcher's table when the image runs other
//     software than the client) and powers the instance off, so that the
//     member is reported stopped with a reason and costs nothing more.
func startupScript(sp scriptParams) string {
	if sp.Python == "" {
		sp.Python = "python3"
	}
	var b strings.Builder
	w := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	w("#!/bin/bash\n")
	w("# Written by the gateway's gce provider: runs Dask %s %s in a container.\n", sp.Role, sp.Member)
	w("set -o pipefail\n")
	w("MD=http://metadata.google.internal/computeMetadata/v1\n")
	w("PROJECT=%s\n", shellQuote(sp.Project))
	w("SECRET=%s\n", shellQuote(sp.SecretID))
	w("IMAGE=%s\n", shellQuote(sp.Image))
	w("ROLE=%s\n", shellQuote(string(sp.Role)))
	w("GPU=%d\n", boolInt(sp.GPU))
	w("DIR=/run/gateway-dask\n")
	b.WriteString(`
# Guest attributes go through the metadata server; once user code may run,
# only processes of the uid MDUID may reach it (see the cut-off below).
attr() {
  if [ -n "${MDUID:-}" ]; then
    chroot --userspec="$MDUID:$MDUID" --skip-chdir / curl -q -sf -X PUT --data "$2" -H 'Metadata-Flavor: Google' "$MD/instance/guest-attributes/gateway/$1" >/dev/null
  else
    curl -q -sf -X PUT --data "$2" -H 'Metadata-Flavor: Google' "$MD/instance/guest-attributes/gateway/$1" >/dev/null
  fi
}
fail() {
  echo "gateway: $1" >&2
  attr status "$1"
  sync; poweroff; exit 1
}

IP=$(curl -sf -H 'Metadata-Flavor: Google' "$MD/instance/network-interfaces/0/ip") || fail "cannot read the instance's address from the metadata server"

# The TLS key is not in metadata: read it from the cluster's secret with this
# instance's own service-account token. A new IAM grant takes a while.
umask 077
mkdir -p "$DIR"
for i in $(seq 1 60); do
  TOKEN=$(curl -sf -H 'Metadata-Flavor: Google' "$MD/instance/service-accounts/default/token" | sed -nE 's/.*"access_token" *: *"([^"]+)".*/\1/p')
  if [ -n "$TOKEN" ] && curl -sf -H "Authorization: Bearer $TOKEN" "` + secretAccessURL + `" -o "$DIR/secret.json"; then break; fi
  rm -f "$DIR/secret.json"; sleep 5
done
[ -s "$DIR/secret.json" ] || fail "cannot read the TLS secret $SECRET from Secret Manager: does the instance's service account have roles/secretmanager.secretAccessor on it, and the subnetwork Private Google Access?"
sed -nE 's/.*"data" *: *"([^"]+)".*/\1/p' "$DIR/secret.json" | base64 -d > "$DIR/tls.pem" || fail "the TLS secret $SECRET is not base64"
rm -f "$DIR/secret.json"
sed -n '/-----BEGIN CERTIFICATE-----/,/-----END CERTIFICATE-----/p' "$DIR/tls.pem" > "$DIR/tls.crt"
sed -n '/-----BEGIN [A-Z ]*PRIVATE KEY-----/,/-----END [A-Z ]*PRIVATE KEY-----/p' "$DIR/tls.pem" > "$DIR/tls.key"
rm -f "$DIR/tls.pem"
[ -s "$DIR/tls.crt" ] && [ -s "$DIR/tls.key" ] || fail "the TLS secret $SECRET holds no certificate and key"
# The launcher checks that the image runs the client's versions before Dask
# starts; on a difference it prints a table and exits with status 97.
cat > "$DIR/launcher.py" <<'` + launcherEOF + `'
` + strings.TrimRight(images.LauncherScript, "\n") + `
` + launcherEOF + `
# Readable by the container's user whoever it is; /run is memory only and
# the VM runs nothing else.
chmod 0755 "$DIR"; chmod 0644 "$DIR/tls.crt" "$DIR/tls.key" "$DIR/launcher.py"

export HOME=/var/lib/gateway-dask
mkdir -p "$HOME"
REGISTRY=${IMAGE%%/*}
case "$REGISTRY" in
  *.pkg.dev|gcr.io|*.gcr.io)
    if command -v docker-credential-gcr >/dev/null; then docker-credential-gcr configure-docker --registries="$REGISTRY" >/dev/null 2>&1
    elif command -v gcloud >/dev/null; then gcloud auth configure-docker "$REGISTRY" --quiet >/dev/null 2>&1; fi ;;
esac

# The startup script may run before the Docker daemon is up.
for i in $(seq 1 60); do docker info >/dev/null 2>&1 && break; sleep 1; done

GPU_ARGS=()
if [ "$GPU" = 1 ]; then
  if command -v cos-extensions >/dev/null; then
    cos-extensions install gpu || fail "cannot install the GPU driver (cos-extensions install gpu)"
    mount --bind /var/lib/nvidia /var/lib/nvidia && mount -o remount,exec /var/lib/nvidia
    GPU_ARGS=(--volume /var/lib/nvidia/lib64:/usr/local/nvidia/lib64 --volume /var/lib/nvidia/bin:/usr/local/nvidia/bin)
    for d in /dev/nvidia*; do GPU_ARGS+=(--device "$d:$d"); done
  else
    # Deep Learning VM images may still be installing the driver.
    for i in $(seq 1 120); do nvidia-smi >/dev/null 2>&1 && break; sleep 5; done
    nvidia-smi >/dev/null 2>&1 || fail "no working NVIDIA driver (nvidia-smi fails) on image with GPUs"
    GPU_ARGS=(--gpus all)
  fi
fi

PULL_ERR=""
for i in 1 2 3 4 5; do PULL_ERR=$(docker pull "$IMAGE" 2>&1 >/dev/null) && break; sleep $((i * 5)); done
# docker's last line says why (a registry out of reach, a name unknown):
# the gateway tells the operator what a network without a route to the
# registry needs.
docker image inspect "$IMAGE" >/dev/null 2>&1 || fail "cannot pull the container image $IMAGE: $(printf '%s' "$PULL_ERR" | tail -n 1 | cut -c1-300)"
docker rm -f dask >/dev/null 2>&1
unset TOKEN

` + metadataCutoff + `
TLS="--tls-ca-file /etc/dask-tls/tls.crt --tls-cert /etc/dask-tls/tls.crt --tls-key /etc/dask-tls/tls.key"
# The container may not change its uid (it could take MDUID's) nor gain
# privileges through setuid files.
ISOLATION=(--cap-drop SETUID --cap-drop SETGID --cap-drop NET_RAW --security-opt no-new-privileges)
`)
	if sp.Role == providers.RoleScheduler {
		// The dashboard is served over TLS with the cluster's certificate
		// (Dask's distributed.scheduler.dashboard.tls settings).
		w("DASHBOARD_TLS=(-e DASK_DISTRIBUTED__SCHEDULER__DASHBOARD__TLS__CERT=/etc/dask-tls/tls.crt -e DASK_DISTRIBUTED__SCHEDULER__DASHBOARD__TLS__KEY=/etc/dask-tls/tls.key -e DASK_DISTRIBUTED__SCHEDULER__DASHBOARD__TLS__CA_FILE=/etc/dask-tls/tls.crt)\n")
	} else {
		w("DASHBOARD_TLS=()\n")
	}
	if sp.Expect != "" {
		w("EXPECT=(-e %s)\n", shellQuote(images.ExpectEnv+"="+sp.Expect))
	} else {
		w("EXPECT=()\n")
	}
	w("docker run -d --name dask --network host --restart no \"${ISOLATION[@]}\" ${DASHBOARD_TLS[@]+\"${DASHBOARD_TLS[@]}\"} ${GPU_ARGS[@]+\"${GPU_ARGS[@]}\"} ${EXPECT[@]+\"${EXPECT[@]}\"} -e PYTHONUNBUFFERED=1 -v \"$DIR:/etc/dask-tls:ro\" --entrypoint %s \"$IMAGE\" \\\n  /etc/dask-tls/launcher.py ", shellQuote(sp.Python))
	if sp.Role == providers.RoleScheduler {
		w("scheduler --host \"$IP\" --port %d --protocol tls $TLS --dashboard-address \":%d\"", SchedulerPort, DashboardPort)
		if sp.Prefix != "" {
			w(" --dashboard-prefix %s", shellQuote(sp.Prefix))
		}
	} else {
		w("worker %s --host \"$IP\" $TLS --name %s --no-dashboard --death-timeout 60 --local-directory /tmp/dask-space",
			shellQuote("tls://"+sp.Scheduler), shellQuote(sp.Member))
		if sp.Threads > 0 {
			w(" --nthreads %d", sp.Threads)
		}
		if sp.Memory > 0 {
			w(" --memory-limit %s", strconv.FormatInt(sp.Memory, 10))
		}
	}
	w(" \\\n  >/dev/null || fail \"cannot start the container from $IMAGE\"\n")
	if sp.Role == providers.RoleScheduler {
		w(`
# Ready when the scheduler accepts connections, not when the VM runs.
while [ "$(docker inspect -f '{{.State.Running}}' dask 2>/dev/null)" = true ]; do
  if (exec 3<>"/dev/tcp/$IP/%d") 2>/dev/null; then attr ready 1; break; fi
  sleep 1
done
`, SchedulerPort)
	} else {
		w("attr ready 1\n")
	}
	b.WriteString(`
RC=$(docker wait dask)
LOG=$(docker logs --tail 30 dask 2>&1)
printf '%s\n' "$LOG" | sed 's/^/dask: /' >&2
if [ "$RC" = ` + strconv.Itoa(images.MismatchExitCode) + ` ]; then
  # The launcher's table, from its marker to the first empty line.
  TABLE=$(printf '%s\n' "$LOG" | sed -n '/^` + images.MismatchMarker + `/,/^$/p' | head -c ` + strconv.Itoa(maxStatus) + `)
  if [ -n "$TABLE" ]; then
    echo "gateway: $TABLE" >&2
    # Should the metadata server refuse a value this long, the marker
    # still fails the cluster, pointing at the whole table.
    attr status "$TABLE" || attr status "` + images.MismatchMarker + `: this $ROLE does not run the client's software (exit status $RC); the table is in the instance's serial port output"
    sync; poweroff; exit 1
  fi
fi
fail "dask $ROLE exited with status $RC"
`)
	return b.String()
}

// metadataCutoff is the part of the startup script that runs once the
// member has its key, its registry credentials and its image, before any
// of the image's code runs. Every cluster's members share one service
// account, which may read every live cluster's TLS secret: user code must
// never get a token of it. From here on, new TCP connections to the
// metadata server (169.254.169.254, fd20:ce::254) are refused to every
// process but those of MDUID, a uid drawn at random now (after the image,
// which could otherwise name it as its user, was pulled), which the script
// uses for its guest attributes; DNS (port 53 on the same address) stays
// open. The container cannot take that uid: it runs without CAP_SETUID and
// CAP_SETGID, with no-new-privileges, in the host's network namespace, so
// these OUTPUT rules apply to it and it cannot change them (no
// CAP_NET_ADMIN). FORWARD covers containers on a bridge (no uid there: all
// refused). Should any of it
// fail, the member powers off rather than run user code with the token in
// reach.
const metadataCutoff = `# Cut the metadata server (and the service account's token) off from
# everything that runs from now on, but this script's own uid.
MDUID=$((1000000000 + $(od -An -N4 -tu4 /dev/urandom | tr -d ' ') % 1000000000))
{
  iptables -w -N GATEWAY-METADATA &&
  iptables -w -A GATEWAY-METADATA -m owner --uid-owner "$MDUID" -j RETURN &&
  iptables -w -A GATEWAY-METADATA -p tcp --dport 53 -j RETURN &&
  iptables -w -A GATEWAY-METADATA -j REJECT &&
  iptables -w -I FORWARD -p tcp -d 169.254.169.254 ! --dport 53 -j REJECT &&
  iptables -w -I OUTPUT -p tcp -d 169.254.169.254 -m conntrack --ctstate NEW -j GATEWAY-METADATA
} || fail "cannot cut user containers off from the metadata server (iptables with the owner and conntrack matches is needed)"
if ip6tables -w -N GATEWAY-METADATA 2>/dev/null; then
  ip6tables -w -A GATEWAY-METADATA -m owner --uid-owner "$MDUID" -j RETURN
  ip6tables -w -A GATEWAY-METADATA -p tcp --dport 53 -j RETURN
  ip6tables -w -A GATEWAY-METADATA -j REJECT
  ip6tables -w -I FORWARD -p tcp -d fd20:ce::254 ! --dport 53 -j REJECT
  ip6tables -w -I OUTPUT -p tcp -d fd20:ce::254 -m conntrack --ctstate NEW -j GATEWAY-METADATA
fi
`

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}
