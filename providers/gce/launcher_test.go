package gce

import (
	"encoding/base64"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gatewayhq/gateway/images"
	"github.com/gatewayhq/gateway/internal/testutil"
	"github.com/gatewayhq/gateway/providers"
)

// expectJSON is an ExpectEnv value with characters a shell takes for its
// own.
const expectJSON = `{"python":"3.11","dask":"2024.8.0","numpy":"1.26'4 $HOME"}`

// TestStartupScriptLauncher: members are inserted (through the SDK, into
// the fake) with a startup script that writes the launcher to the
// directory the container mounts and runs the container with the
// interpreter as entrypoint and the launcher as its program, with the
// client's versions in its environment only when the cluster has them.
// The script's own lines are run with bash to show that the launcher and
// the value arrive byte for byte.
func TestStartupScriptLauncher(t *testing.T) {
	if strings.Contains("\n"+images.LauncherScript+"\n", "\n"+launcherEOF+"\n") {
		t.Fatalf("the launcher has the line %s that ends its here-document", launcherEOF)
	}
	for _, tc := range []struct{ cluster, expect string }{{"with", expectJSON}, {"without", ""}} {
		t.Run(tc.cluster, func(t *testing.T) {
			e := newEnv(t, nil)
			spec := testSpec(t, tc.cluster, "ann")
			spec.EnvExpect = tc.expect
			if err := e.p.StartScheduler(e.ctx, spec); err != nil {
				t.Fatal(err)
			}
			if err := e.p.StartWorker(e.ctx, spec, "worker-0", "10.128.0.2:8786"); err != nil {
				t.Fatal(err)
			}
			for _, member := range []string{"scheduler", "worker-0"} {
				in := e.insertFor("gw-" + tc.cluster + "-" + member)
				script, _ := in.MetadataValue("startup-script")
				role := strings.TrimSuffix(member, "-0")
				if want := "--entrypoint 'python3' \"$IMAGE\" \\\n  /etc/dask-tls/launcher.py " + role + " "; !strings.Contains(script, want) {
					t.Errorf("%s: the container does not start through the launcher (%q)", member, want)
				}
				if strings.Contains(script, "dask "+role) {
					t.Errorf("%s: Dask is started without the launcher", member)
				}
				// The scheduler's dashboard is served with the cluster's
				// certificate, which the preload in the launcher also makes
				// the CA its clients must present a certificate of.
				tlsEnv := "DASHBOARD_TLS=(-e DASK_DISTRIBUTED__SCHEDULER__DASHBOARD__TLS__CERT=/etc/dask-tls/tls.crt -e DASK_DISTRIBUTED__SCHEDULER__DASHBOARD__TLS__KEY=/etc/dask-tls/tls.key -e DASK_DISTRIBUTED__SCHEDULER__DASHBOARD__TLS__CA_FILE=/etc/dask-tls/tls.crt)\n"
				if got := strings.Contains(script, tlsEnv); got != (role == "scheduler") || !strings.Contains(script, `${DASHBOARD_TLS[@]+"${DASHBOARD_TLS[@]}"}`) {
					t.Errorf("%s: dashboard TLS settings given: %v, want %v", member, got, role == "scheduler")
				}
				launcher, expect := runScriptLines(t, script)
				if launcher != images.LauncherScript {
					t.Errorf("%s: the launcher written differs from images.LauncherScript", member)
				}
				want := ""
				if tc.expect != "" {
					want = "-e|" + images.ExpectEnv + "=" + tc.expect
				}
				if expect != want {
					t.Errorf("%s: EXPECT = %q, want %q", member, expect, want)
				}
				t.Logf("%s: startup script %d bytes (metadata values may have 256 KiB)", member, len(script))
			}
		})
	}
}

// runScriptLines runs, with bash, the lines of the startup script that
// write the launcher and set the container's versions argument, and
// returns the launcher written and the argument's words joined by "|".
func runScriptLines(t *testing.T, script string) (launcher, expect string) {
	t.Helper()
	from := strings.Index(script, `cat > "$DIR/launcher.py"`)
	to := strings.Index(script[from:], "\n"+launcherEOF+"\n")
	line := ""
	for _, l := range strings.Split(script, "\n") {
		if strings.HasPrefix(l, "EXPECT=(") {
			line = l
		}
	}
	if from < 0 || to < 0 || line == "" {
		t.Fatal("the script does not write the launcher or set EXPECT")
	}
	dir := t.TempDir()
	body := script[from:from+to+len(launcherEOF)+2] + line + "\n" + `printf '%s' "${EXPECT[*]+${EXPECT[0]}|${EXPECT[1]}}" > "$DIR/expect"`
	cmd := exec.Command("bash", "-euc", body)
	cmd.Env = append(os.Environ(), "DIR="+dir)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("bash: %v\n%s", err, out)
	}
	l, err := os.ReadFile(filepath.Join(dir, "launcher.py"))
	if err != nil {
		t.Fatal(err)
	}
	x, err := os.ReadFile(filepath.Join(dir, "expect"))
	if err != nil {
		t.Fatal(err)
	}
	return string(l), string(x)
}

const testTable = images.MismatchMarker + ": this worker does not run the client's software\n" +
	"package  client  image\n" +
	"numpy    1.26.4  1.24.2"

// TestMismatchStatusFailsTheMember: a member whose script recorded the
// launcher's table in gateway/status before powering off is reported
// stopped with that table, whole, for the core to fail the cluster with.
func TestMismatchStatusFailsTheMember(t *testing.T) {
	e := newEnv(t, nil)
	spec := testSpec(t, "mm", "ann")
	spec.EnvExpect = `{"numpy":"1.26.4"}`
	if err := e.p.StartScheduler(e.ctx, spec); err != nil {
		t.Fatal(err)
	}
	if err := e.p.StartWorker(e.ctx, spec, "worker-0", "10.128.0.2:8786"); err != nil {
		t.Fatal(err)
	}
	e.describe("mm")
	if err := e.srv.PowerOff("gw-mm-worker-0", testTable); err != nil {
		t.Fatal(err)
	}
	w := e.describe("mm")["worker-0"]
	got, ok := images.MismatchIn(w.Reason)
	if w.State != providers.StateStopped || !ok || got != testTable {
		t.Errorf("worker-0 = %+v\nwant stopped with the table:\n%s", w, testTable)
	}
}

// launcherDockerStub runs the container of `docker run -d` as the image
// would, at once: its entrypoint (python3: this machine's) with the
// launcher from the directory the script mounts, the -e variables only;
// `docker wait` and `docker logs` answer with its status and output.
const launcherDockerStub = `#!/bin/bash
echo "docker $*" >> "$SANDBOX/calls.log"
case "$1" in
  run)
    shift
    envs=(PATH=/usr/bin:/bin)
    entry=""
    while [ $# -gt 0 ]; do
      case "$1" in
        -d) shift;;
        --name|--network|--restart|--cap-drop|--security-opt|-v|--volume|--device|--gpus) shift 2;;
        -e) envs+=("$2"); shift 2;;
        --entrypoint) entry=$2; shift 2;;
        *) break;;
      esac
    done
    shift # the image
    [ "$entry" = python3 ] && entry=/usr/bin/python3
    args=()
    for a in "$@"; do args+=("${a/#\/etc\/dask-tls\//\/run\/gateway-dask\/}"); done
    echo "container: $entry ${args[*]}" >> "$SANDBOX/calls.log"
    env -i "${envs[@]}" "$entry" "${args[@]}" > "$SANDBOX/container.log" 2>&1
    echo $? > "$SANDBOX/container.rc"
    echo 0123456789abcdef;;
  wait) cat "$SANDBOX/container.rc";;
  logs) cat "$SANDBOX/container.log";;
  inspect) echo false;;
esac
exit 0
`

// TestLauncherReachesTheGatewayGCE inserts a worker through the SDK and
// the fake with the client's versions, runs the startup script the fake
// received in the sandbox of TestMetadataCutOffKeepsTheTokenFromUserCode,
// where the container runs the real launcher with /usr/bin/python3
// against versions that differ from the installed distributed, and gives
// the gateway/status the script put on the metadata server to the fake's
// instance as it powers off: Describe reports the worker stopped with the
// launcher's table.
func TestLauncherReachesTheGatewayGCE(t *testing.T) {
	testutil.NeedSandbox(t, "unshare", "iptables", "python3", "setpriv", "chroot", "od", "/usr/bin/curl", "ip", "/usr/bin/python3")
	out, err := exec.Command("/usr/bin/python3", "-c", "import sys, importlib.metadata as m; print('%d.%d' % sys.version_info[:2], m.version('distributed'))").Output()
	if err != nil {
		testutil.Missing(t, testutil.EnvRequirePython, fmt.Sprintf("no python3 with distributed: %v (apt-get install python3-distributed)", err))
	}
	pyVersion, installed, _ := strings.Cut(strings.TrimSpace(string(out)), " ")

	e := newEnv(t, nil)
	spec := testSpec(t, "ls", "ann")
	spec.EnvExpect = `{"python":"` + pyVersion + `","distributed":"1999.1.0"}`
	if err := e.p.StartScheduler(e.ctx, spec); err != nil {
		t.Fatal(err)
	}
	if err := e.p.StartWorker(e.ctx, spec, "worker-0", "10.128.0.2:8786"); err != nil {
		t.Fatal(err)
	}
	script, _ := e.insertFor("gw-ls-worker-0").MetadataValue("startup-script")

	// The metadata server of the cut-off test, keeping the last status.
	md := strings.Replace(metadataServer, `        log.write("PUT " + self.path + " " + body + "\n")`,
		`        log.write("PUT " + self.path + " " + body + "\n")
        if self.path.endswith("/gateway/status"): open(sys.argv[2], "w").write(body)`, 1)
	if md == metadataServer {
		t.Fatal("the metadata server changed: the status cannot be kept")
	}
	runner := strings.Replace(sandboxRunner, `python3 "$SANDBOX/md.py" "$SANDBOX/md.log" &`, `python3 "$SANDBOX/md.py" "$SANDBOX/md.log" "$SANDBOX/status.txt" &`, 1)
	cert, key := testTLS(t)
	read := testutil.RunSandbox(t, 90*time.Second, map[string]string{
		"startup.sh":    script,
		"md.py":         md,
		"run.sh":        runner,
		"hosts":         "127.0.0.1 localhost\n169.254.169.254 metadata.google.internal\n",
		"payload.b64":   base64.StdEncoding.EncodeToString(append(append([]byte{}, cert...), key...)),
		"bin/curl":      curlStub,
		"bin/docker":    launcherDockerStub,
		"bin/poweroff":  "#!/bin/sh\necho \"poweroff $*\" >> \"$SANDBOX/calls.log\"\n",
		"bin/sync":      "#!/bin/sh\n",
		"calls.log":     "",
		"md.log":        "",
		"startup.out":   "",
		"status.txt":    "",
		"container.log": "",
		"container.rc":  "",
	})
	status, calls := read("status.txt"), read("calls.log")
	t.Logf("startup script output:\n%s\ncalls:\n%s\nstatus:\n%s", read("startup.out"), calls, status)
	if !strings.Contains(calls, "container: /usr/bin/python3 /run/gateway-dask/launcher.py worker tls://10.128.0.2:8786") {
		t.Fatalf("the container did not run the launcher:\n%s", calls)
	}
	if rc := strings.TrimSpace(read("container.rc")); rc != "97" {
		t.Errorf("the launcher exited with %q, want 97", rc)
	}
	printed, ok := images.MismatchIn(status)
	if !ok || !strings.Contains(printed, "1999.1.0") || !strings.Contains(printed, installed) {
		t.Fatalf("gateway/status has no table with distributed 1999.1.0 against %s:\n%s", installed, status)
	}

	if err := e.srv.PowerOff("gw-ls-worker-0", status); err != nil {
		t.Fatal(err)
	}
	w := e.describe("ls")["worker-0"]
	got, ok := images.MismatchIn(w.Reason)
	if w.State != providers.StateStopped || !ok || got != printed {
		t.Errorf("worker-0 = %+v\nwant stopped with the table:\n%s", w, printed)
	}
}

// TestStartupScriptOwnerEnv: the owner's variables (the environ option)
// reach docker run as -e arguments word for word, whatever a shell would
// make of their characters, and the container is started with them.
func TestStartupScriptOwnerEnv(t *testing.T) {
	e := newEnv(t, nil)
	spec := testSpec(t, "owner-env", "ann")
	hostile := `it's "$HOME" $(touch /tmp/x) ` + "`id`" + ` ; #`
	spec.Env = map[string]string{"DASK_DISTRIBUTED__WORKER__MEMORY__TARGET": "0.1", "MY_VAR": hostile}
	if err := e.p.StartScheduler(e.ctx, spec); err != nil {
		t.Fatal(err)
	}
	in := e.insertFor("gw-owner-env-scheduler")
	script, _ := in.MetadataValue("startup-script")
	line := ""
	for _, l := range strings.Split(script, "\n") {
		if strings.HasPrefix(l, "OWNER_ENV=(") {
			line = l
		}
	}
	if line == "" || !strings.Contains(script, `${OWNER_ENV[@]+"${OWNER_ENV[@]}"}`) {
		t.Fatalf("the script does not pass OWNER_ENV to docker run:\n%s", script)
	}
	dir := t.TempDir()
	cmd := exec.Command("bash", "-euc", line+"\n"+`printf '%s|' "${OWNER_ENV[@]}" > "$DIR/env"`)
	cmd.Env = append(os.Environ(), "DIR="+dir)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("bash: %v\n%s", err, out)
	}
	got, err := os.ReadFile(filepath.Join(dir, "env"))
	if err != nil {
		t.Fatal(err)
	}
	want := "-e|DASK_DISTRIBUTED__WORKER__MEMORY__TARGET=0.1|-e|MY_VAR=" + hostile + "|"
	if string(got) != want {
		t.Errorf("OWNER_ENV = %q, want %q", got, want)
	}
}
