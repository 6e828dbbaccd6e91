package ec2

import (
	"strings"
	"testing"
	"time"

	"github.com/gatewayhq/gateway/internal/testutil"
	"github.com/gatewayhq/gateway/providers"
)

// The sandbox's pieces: an instance metadata service (IMDSv2) on
// 169.254.169.254:80 in a network namespace of the test's own, an aws CLI
// stand-in that, like the real one, needs the instance role's credentials
// from it to read the parameter, and docker and systemctl stand-ins that
// run the image's code as a container would: as root with Docker's default
// capabilities, in the host's network namespace (or in none for
// --network none).
const (
	sandboxSecret = "MEMBER-ROLE-SECRET-ACCESS-KEY"

	imdsServer = `import sys, json
from http.server import BaseHTTPRequestHandler, HTTPServer
log = open(sys.argv[1], "a", buffering=1)
class H(BaseHTTPRequestHandler):
    def answer(self, code, body):
        self.send_response(code); self.send_header("Content-Length", str(len(body))); self.end_headers(); self.wfile.write(body)
    def do_PUT(self):
        log.write("PUT " + self.path + "\n")
        if self.path == "/latest/api/token": return self.answer(200, b"imds-session-token")
        self.answer(404, b"")
    def do_GET(self):
        log.write("GET " + self.path + "\n")
        if self.headers.get("X-aws-ec2-metadata-token") != "imds-session-token": return self.answer(401, b"")
        if self.path == "/latest/meta-data/iam/security-credentials/": return self.answer(200, b"dask-member")
        if self.path == "/latest/meta-data/iam/security-credentials/dask-member":
            return self.answer(200, json.dumps({"AccessKeyId": "ASIAMEMBER", "SecretAccessKey": "` + sandboxSecret + `", "Token": "t"}).encode())
        self.answer(404, b"")
    def log_message(self, *a): pass
HTTPServer(("169.254.169.254", 80), H).serve_forever()
`

	// imdsCreds prints the role's credentials, or fails, as any process
	// on the instance would get them.
	imdsCreds = `#!/bin/bash
t=$(/usr/bin/curl -q -m 3 -sf -X PUT http://169.254.169.254/latest/api/token -H 'X-aws-ec2-metadata-token-ttl-seconds: 300') || exit 1
/usr/bin/curl -q -m 3 -sf -H "X-aws-ec2-metadata-token: $t" http://169.254.169.254/latest/meta-data/iam/security-credentials/dask-member
`

	awsStub = `#!/bin/bash
echo "aws $*" >> "$SANDBOX/calls.log"
creds=$("$SANDBOX/bin/imds-creds") || { echo "aws: no credentials" >&2; exit 255; }
case "$*" in
  *"ssm get-parameter"*) cat "$SANDBOX/parameter.pem";;
esac
`

	ec2DockerStub = `#!/bin/bash
echo "docker $*" >> "$SANDBOX/calls.log"
inside() {
  setpriv --reuid=0 --regid=0 --clear-groups --inh-caps=-all \
    --bounding-set=-all,+chown,+dac_override,+fowner,+fsetid,+kill,+setgid,+setuid,+setpcap,+net_bind_service,+net_raw,+sys_chroot,+mknod,+audit_write,+setfcap "$@"
}
case "$1" in
  run)
    if [[ " $* " == *" --network none "* ]]; then net=(unshare --net); else net=(); fi
    if ${net[@]+"${net[@]}"} bash -c "$(declare -f inside); inside '$SANDBOX/bin/imds-creds'" > "$SANDBOX/try.out" 2>&1; then
      echo "image code (docker $2 $3 $4): got $(cat "$SANDBOX/try.out")" >> "$SANDBOX/usercode.log"
    else
      echo "image code (docker $2 $3 $4): no" >> "$SANDBOX/usercode.log"
    fi
    echo 0;;
esac
exit 0
`

	systemctlStub = `#!/bin/bash
echo "systemctl $*" >> "$SANDBOX/calls.log"
inside() {
  setpriv --reuid=0 --regid=0 --clear-groups --inh-caps=-all \
    --bounding-set=-all,+chown,+dac_override,+fowner,+fsetid,+kill,+setgid,+setuid,+setpcap,+net_bind_service,+net_raw,+sys_chroot,+mknod,+audit_write,+setfcap "$@"
}
if [ "$1" = start ]; then
  # The dask unit: the container's code, on the host's network.
  if inside "$SANDBOX/bin/imds-creds" > "$SANDBOX/try.out" 2>&1; then
    echo "dask unit: got $(cat "$SANDBOX/try.out")" >> "$SANDBOX/usercode.log"
  else
    echo "dask unit: no" >> "$SANDBOX/usercode.log"
  fi
  if inside iptables -w -D OUTPUT -d 169.254.169.254 -j REJECT > /dev/null 2>&1; then
    echo "dask unit: removed the cut-off" >> "$SANDBOX/usercode.log"
  fi
fi
exit 0
`

	ec2Runner = `set -eu
ip link set lo up
ip addr add 169.254.169.254/32 dev lo
cp -a /etc "$SANDBOX/etc"
mount --bind "$SANDBOX/etc" /etc
mount -t tmpfs none /var/log
mount --bind /dev/null /dev/console
# Nothing in here may power the machine off.
for p in /sbin/poweroff /usr/sbin/poweroff /bin/systemctl /usr/bin/systemctl /sbin/reboot /usr/sbin/reboot; do
  if [ -e "$p" ]; then mount --bind "$SANDBOX/bin/systemctl" "$p"; fi
done
python3 "$SANDBOX/imds.py" "$SANDBOX/imds.log" &
for i in $(seq 50); do /usr/bin/curl -q -s -o /dev/null -X PUT http://169.254.169.254/latest/api/token && break; sleep 0.1; done
PATH="$SANDBOX/bin:$PATH" bash "$SANDBOX/user-data.sh" > "$SANDBOX/user-data.out" 2>&1 || true
kill %1
`
)

// TestMetadataCutOffBeforeImageCode runs a scheduler's real user data in a
// network and mount namespace of the test's own, with real iptables, an
// IMDSv2 stand-in and stand-ins for the aws CLI, Docker and systemd. It
// shows that the member reads its parameter with the role's credentials,
// and that no code of the image (the user's choice), neither the run that
// asks the image's user nor the Dask unit, can get the role's credentials
// (which read every cluster's key) or undo the cut-off.
func TestMetadataCutOffBeforeImageCode(t *testing.T) {
	testutil.NeedSandbox(t, "unshare", "iptables", "python3", "setpriv", "/usr/bin/curl", "ip")
	p := &Provider{cfg: Config{Region: "eu-west-1", GatewayID: "gw1", Image: DefaultImage}.withDefaults()}
	s := spec("c1")
	b64, err := userData(p.script(s, "scheduler", providers.RoleScheduler, "", "m6i.large", s.Scheduler))
	if err != nil {
		t.Fatal(err)
	}
	read := testutil.RunSandbox(t, 120*time.Second, map[string]string{
		"user-data.sh":   decodeScript(t, b64),
		"imds.py":        imdsServer,
		"run.sh":         ec2Runner,
		"parameter.pem":  testCert + testKey,
		"bin/aws":        awsStub,
		"bin/docker":     ec2DockerStub,
		"bin/systemctl":  systemctlStub,
		"bin/imds-creds": imdsCreds,
		"calls.log":      "",
		"usercode.log":   "",
		"imds.log":       "",
		"try.out":        "",
	})
	calls, usercode, out := read("calls.log"), read("usercode.log"), read("user-data.out")
	t.Logf("user data output:\n%s\ncalls:\n%s\nimage code:\n%s", out, calls, usercode)

	if !strings.Contains(calls, "aws ssm get-parameter --region eu-west-1 --name /gateway/gw1/c1/tls") ||
		strings.Contains(out, "cannot read") || !strings.Contains(read("etc/dask-gateway/tls.key"), "PRIVATE KEY") {
		t.Fatalf("the member did not read its key:\n%s", out)
	}
	if !strings.Contains(calls, "systemctl start --no-block dask.service") || strings.Contains(calls, "poweroff") {
		t.Fatalf("the member did not start Dask:\n%s", calls)
	}
	if n := strings.Count(usercode, ": no"); n != 2 || strings.Contains(usercode, sandboxSecret) || strings.Contains(usercode, "removed") {
		t.Errorf("the image's code reached the role's credentials or undid the cut-off:\n%s", usercode)
	}
}
