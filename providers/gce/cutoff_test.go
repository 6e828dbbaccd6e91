package gce

import (
	"encoding/base64"
	"strings"
	"testing"
	"time"

	"github.com/gatewayhq/gateway/internal/testutil"
	"github.com/gatewayhq/gateway/providers"
)

// The sandbox's pieces. The metadata server answers on 169.254.169.254:80
// in a network namespace of the test's own, as Google's does: the
// instance's address, the members' service-account token, guest
// attributes. Secret Manager is a curl stand-in that hands cluster A's
// secret only to a request bearing that token (what IAM decides for the
// members' shared account), and docker a stand-in whose `run` executes
// "user code" the way the container would run it: as root with Docker's
// default capabilities less those the script drops, no new privileges,
// in the host's network namespace.
const (
	sandboxToken = "ya29.members-service-account-token"

	metadataServer = `import sys, json
from http.server import BaseHTTPRequestHandler, HTTPServer
log = open(sys.argv[1], "a", buffering=1)
class H(BaseHTTPRequestHandler):
    def answer(self, code, body):
        self.send_response(code); self.send_header("Content-Length", str(len(body))); self.end_headers(); self.wfile.write(body)
    def do_GET(self):
        log.write("GET " + self.path + "\n")
        if self.headers.get("Metadata-Flavor") != "Google": return self.answer(403, b"")
        if self.path.endswith("/network-interfaces/0/ip"): return self.answer(200, b"10.0.0.5")
        if self.path.endswith("/service-accounts/default/token"):
            return self.answer(200, json.dumps({"access_token": "` + sandboxToken + `", "expires_in": 3599, "token_type": "Bearer"}).encode())
        self.answer(404, b"")
    def do_PUT(self):
        n = int(self.headers.get("Content-Length", "0")); body = self.rfile.read(n).decode()
        log.write("PUT " + self.path + " " + body + "\n")
        self.answer(200, b"")
    def log_message(self, *a): pass
HTTPServer(("169.254.169.254", 80), H).serve_forever()
`

	// curl: Secret Manager by its URL, everything else the real curl.
	curlStub = `#!/bin/bash
for a in "$@"; do case "$a" in *secretmanager.googleapis.com*)
  auth=""; out=""; prev=""
  for b in "$@"; do [ "$prev" = -H ] && case "$b" in Authorization:*) auth="$b";; esac; [ "$prev" = -o ] && out="$b"; prev="$b"; done
  echo "secretmanager $a auth=[$auth] uid=$(id -u)" >> "$SANDBOX/calls.log"
  [ "$auth" = "Authorization: Bearer ` + sandboxToken + `" ] || exit 22
  body="{\"name\":\"x\",\"payload\":{\"data\":\"$(cat "$SANDBOX/payload.b64")\"}}"
  if [ -n "$out" ]; then printf '%s' "$body" > "$out"; else printf '%s' "$body"; fi
  exit 0;;
esac; done
exec /usr/bin/curl "$@"
`

	dockerStub = `#!/bin/bash
echo "docker $*" >> "$SANDBOX/calls.log"
# The container's processes: root without the dropped capabilities.
inside() {
  setpriv --reuid=0 --regid=0 --clear-groups --inh-caps=-all --no-new-privs \
    --bounding-set=-all,+chown,+dac_override,+fowner,+fsetid,+kill,+setpcap,+net_bind_service,+sys_chroot,+mknod,+audit_write,+setfcap "$@"
}
try() { local what=$1; shift; if "$@" >"$SANDBOX/try.out" 2>&1; then echo "$what: yes $(head -c 200 "$SANDBOX/try.out")"; else echo "$what: no"; fi >> "$SANDBOX/usercode.log"; }
case "$1" in
  run)
    try token-as-root inside /usr/bin/curl -q -m 3 -sf -H 'Metadata-Flavor: Google' http://169.254.169.254/computeMetadata/v1/instance/service-accounts/default/token
    try token-by-name inside /usr/bin/curl -q -m 3 -sf -H 'Metadata-Flavor: Google' http://metadata.google.internal/computeMetadata/v1/instance/service-accounts/default/token
    try token-as-user inside setpriv --reuid=1000 --regid=1000 --clear-groups /usr/bin/curl -q -m 3 -sf -H 'Metadata-Flavor: Google' http://169.254.169.254/computeMetadata/v1/instance/service-accounts/default/token
    try change-uid inside setpriv --reuid=1500000000 --regid=1500000000 --clear-groups true
    try flush-firewall inside iptables -w -F OUTPUT
    # What an attacker on cluster B would do for cluster A's key: a token
    # from the metadata server, then Secret Manager with it.
    try secret-of-a inside bash -c 'tok=$(/usr/bin/curl -q -m 3 -sf -H "Metadata-Flavor: Google" http://169.254.169.254/computeMetadata/v1/instance/service-accounts/default/token | sed -nE "s/.*\"access_token\" *: *\"([^\"]+)\".*/\1/p"); curl -q -m 3 -sf -H "Authorization: Bearer $tok" https://secretmanager.googleapis.com/v1/projects/p/secrets/gw-a-tls/versions/latest:access' 
    echo 0123456789abcdef;;
  wait) echo 0;;
  inspect) echo false;;
esac
exit 0
`

	sandboxRunner = `set -eu
ip link set lo up
ip addr add 169.254.169.254/32 dev lo
mount -t tmpfs none /run
mount -t tmpfs none /var/lib
mount --bind "$SANDBOX/hosts" /etc/hosts
# Nothing in here may power the machine off.
for p in /sbin/poweroff /usr/sbin/poweroff /bin/systemctl /usr/bin/systemctl /sbin/reboot /usr/sbin/reboot; do
  if [ -e "$p" ]; then mount --bind "$SANDBOX/bin/poweroff" "$p"; fi
done
python3 "$SANDBOX/md.py" "$SANDBOX/md.log" &
for i in $(seq 50); do /usr/bin/curl -q -s -o /dev/null http://169.254.169.254/ && break; sleep 0.1; done
PATH="$SANDBOX/bin:$PATH" bash "$SANDBOX/startup.sh" > "$SANDBOX/startup.out" 2>&1 || true
kill %1
`
)

// TestMetadataCutOffKeepsTheTokenFromUserCode runs a worker's real startup
// script in a network and mount namespace of the test's own, with real
// iptables, a metadata server and stand-ins for Docker and Secret Manager.
// It shows what cluster B's member running user code can do once the
// script has started its container: it cannot get a token of the members'
// service account from the metadata server (by address or by name, as root
// or another uid), cannot take another uid or change the firewall, and so
// cannot read cluster A's secret; while the script itself read its own
// key with the token before the cut-off and still reports its guest
// attributes after it.
//
// What it does not show: that Google's own images (Container-Optimized OS,
// Deep Learning VM) have the owner and conntrack matches (Istio on GKE
// relies on them), or anything about a real Docker engine's defaults,
// which the stand-in reproduces (root, Docker's default capability set
// less the dropped ones, no new privileges, the host's network).
func TestMetadataCutOffKeepsTheTokenFromUserCode(t *testing.T) {
	testutil.NeedSandbox(t, "unshare", "iptables", "python3", "setpriv", "chroot", "od", "/usr/bin/curl", "ip")
	cert, key := testTLS(t)
	script := startupScript(scriptParams{Project: "p", SecretID: "gw-b-tls", Image: "ghcr.io/example/dask:1", Role: providers.RoleWorker,
		Member: "worker-0", Scheduler: "10.0.0.2:8786"})
	read := testutil.RunSandbox(t, 90*time.Second, map[string]string{
		"startup.sh":   script,
		"md.py":        metadataServer,
		"run.sh":       sandboxRunner,
		"hosts":        "127.0.0.1 localhost\n169.254.169.254 metadata.google.internal\n",
		"payload.b64":  base64.StdEncoding.EncodeToString(append(append([]byte{}, cert...), key...)),
		"bin/curl":     curlStub,
		"bin/docker":   dockerStub,
		"bin/poweroff": "#!/bin/sh\necho \"poweroff $*\" >> \"$SANDBOX/calls.log\"\n",
		"bin/sync":     "#!/bin/sh\n",
		"calls.log":    "",
		"usercode.log": "",
		"md.log":       "",
		"startup.out":  "",
		"try.out":      "",
	})
	calls, usercode, md, out := read("calls.log"), read("usercode.log"), read("md.log"), read("startup.out")
	t.Logf("startup script output:\n%s\ncalls:\n%s\nmetadata server:\n%s", out, calls, md)

	// The script read its own key with the token, before any container.
	access := strings.Index(calls, "secretmanager https://secretmanager.googleapis.com/v1/projects/p/secrets/gw-b-tls/versions/latest:access auth=[Authorization: Bearer "+sandboxToken+"]")
	run := strings.Index(calls, "docker run ")
	if access < 0 || run < 0 || access > run {
		t.Fatalf("the script did not read its key before starting the container:\n%s", calls)
	}
	for _, flag := range []string{"--cap-drop SETUID", "--cap-drop SETGID", "--security-opt no-new-privileges", "--network host"} {
		if !strings.Contains(calls[run:], flag) {
			t.Errorf("the container is started without %s", flag)
		}
	}
	// User code got nothing.
	for _, attempt := range []string{"token-as-root", "token-by-name", "token-as-user", "change-uid", "flush-firewall", "secret-of-a"} {
		if !strings.Contains(usercode, attempt+": no") {
			t.Errorf("user code: %s succeeded or was not tried:\n%s", attempt, usercode)
		}
	}
	if strings.Contains(usercode, sandboxToken) {
		t.Errorf("user code holds the members' token:\n%s", usercode)
	}
	if n := strings.Count(md, "/service-accounts/default/token"); n != 1 {
		t.Errorf("the metadata server answered %d token requests; want the script's one", n)
	}
	// The script still reports through guest attributes after the cut-off.
	for _, want := range []string{"PUT /computeMetadata/v1/instance/guest-attributes/gateway/ready 1", "PUT /computeMetadata/v1/instance/guest-attributes/gateway/status dask worker exited with status 0"} {
		if !strings.Contains(md, want) {
			t.Errorf("metadata server did not get %q:\n%s", want, md)
		}
	}
}
