package ec2

import (
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

// expectJSON is an ExpectEnv value with the characters a shell, a systemd
// unit or Docker's --env-file could take for their own.
const expectJSON = `{"python":"3.11","dask":"2024.8.0","numpy":"1.26'4 $HOME %n"}`

// TestUserDataLauncher: every member starts through the launcher, written
// by the boot script to a file the container mounts, with the client's
// versions in its environment when the cluster has them and without the
// variable otherwise. The boot script's own lines are run with bash to
// show that the launcher and the value arrive byte for byte.
func TestUserDataLauncher(t *testing.T) {
	if strings.Contains("\n"+images.LauncherScript+"\n", "\n"+launcherEOF+"\n") {
		t.Fatalf("the launcher has the line %s that ends its here-document", launcherEOF)
	}
	p := &Provider{cfg: Config{Region: "eu-west-1", GatewayID: "gw1", Image: DefaultImage}.withDefaults()}
	for _, tc := range []struct {
		name, expect, env string
	}{
		{"with the client's versions", expectJSON, "PYTHONUNBUFFERED=1\n" + images.ExpectEnv + "=" + expectJSON + "\n"},
		{"without", "", "PYTHONUNBUFFERED=1\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, role := range []providers.Role{providers.RoleScheduler, providers.RoleWorker} {
				s := spec("c1")
				s.EnvExpect = tc.expect
				member := "scheduler"
				if role == providers.RoleWorker {
					member = "worker-0"
				}
				b64, err := userData(p.script(s, member, role, "10.0.1.12:8786", "m6i.large", s.Scheduler))
				if err != nil {
					t.Fatal(err)
				}
				script := decodeScript(t, b64)
				exec := "--entrypoint python3 ghcr.io/dask/dask:latest /etc/dask-gateway/launcher.py " + string(role) + " "
				if !strings.Contains(script, exec) {
					t.Errorf("%s: the container does not start through the launcher (%q)", role, exec)
				}
				if strings.Contains(script, " dask scheduler") || strings.Contains(script, " dask worker") {
					t.Errorf("%s: Dask is started without the launcher", role)
				}
				if got := strings.Contains(script, images.ExpectEnv+"="); got != (tc.expect != "") {
					t.Errorf("%s: %s in the script: %v, want %v", role, images.ExpectEnv, got, tc.expect != "")
				}
				launcher, env := runFileLines(t, script)
				if launcher != images.LauncherScript {
					t.Errorf("%s: the launcher written differs from images.LauncherScript", role)
				}
				if env != tc.env {
					t.Errorf("%s: member.env = %q, want %q", role, env, tc.env)
				}
			}
		})
	}
	t.Run("not one line", func(t *testing.T) {
		s := spec("c1")
		s.EnvExpect = "{\"dask\":\n\"1\"}"
		_, err := userData(p.script(s, "scheduler", providers.RoleScheduler, "", "m6i.large", s.Scheduler))
		if err == nil || !strings.Contains(err.Error(), "not one line") {
			t.Errorf("err = %v", err)
		}
	})
}

// runFileLines runs, with bash, the lines of the boot script that write the
// launcher and the member's environment file, and returns what they wrote.
func runFileLines(t *testing.T, script string) (launcher, env string) {
	t.Helper()
	from := strings.Index(script, `cat > "$DIR/launcher.py"`)
	to := strings.Index(script, `> "$DIR/member.env"`)
	if from < 0 || to < from {
		t.Fatal("the script does not write the launcher and member.env")
	}
	dir := t.TempDir()
	cmd := exec.Command("bash", "-euc", script[from:to]+`> "$DIR/member.env"`)
	cmd.Env = append(os.Environ(), "DIR="+dir)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("bash: %v\n%s", err, out)
	}
	l, err := os.ReadFile(filepath.Join(dir, "launcher.py"))
	if err != nil {
		t.Fatal(err)
	}
	e, err := os.ReadFile(filepath.Join(dir, "member.env"))
	if err != nil {
		t.Fatal(err)
	}
	return string(l), string(e)
}

// TestUserDataSizeWithLauncher: the launcher in the user data leaves room
// under EC2's 16 KiB for the longest names and values the provider takes.
func TestUserDataSizeWithLauncher(t *testing.T) {
	p := &Provider{cfg: Config{Region: "eu-west-1", GatewayID: strings.Repeat("g", 63), Image: DefaultImage}.withDefaults()}
	s := spec(strings.Repeat("c", 63))
	s.Image = "123456789012.dkr.ecr.us-east-1.amazonaws.com/" + strings.Repeat("r", 200)
	s.DashboardPrefix = "/" + strings.Repeat("p", 200)
	s.EnvExpect = images.ExpectValue(images.Spec{Python: "3.12.1", GPU: true, Packages: []images.Package{
		{Name: "dask", Version: "2024.12.1"}, {Name: "distributed", Version: "2024.12.1"}, {Name: "cloudpickle", Version: "3.1.0"},
		{Name: "msgpack", Version: "1.1.0"}, {Name: "numpy", Version: "2.2.1"}, {Name: "pandas", Version: "2.2.3"},
		{Name: "cupy-cuda12x", Version: "13.3.0"}, {Name: "cudf-cu12", Version: "24.12.0"},
	}})
	b64, err := userData(p.script(s, strings.Repeat("w", 63), providers.RoleWorker, "10.0.1.12:8786", "g5.xlarge", s.Worker))
	if err != nil {
		t.Fatal(err)
	}
	n := len(decodeScript(t, b64))
	t.Logf("user data: %d bytes of EC2's %d (launcher %d)", n, maxUserData, len(images.LauncherScript))
	if n > maxUserData*3/4 {
		t.Errorf("user data is %d bytes: less than a quarter of EC2's %d left", n, maxUserData)
	}
}

// mismatchConsole is what a member whose launcher found other software
// leaves on its console: boot lines, the unit's last lines of log, the end
// line (userdata.go's ExecStopPost), and the kernel's last words.
func mismatchConsole(table string) string {
	return "[    2.104] cloud-init[1021]: dask-gateway: set-up done\r\n" +
		"gateway-env: python=3.11 dask=2024.8.0 numpy=1.26.4\r\n" +
		strings.ReplaceAll(table, "\n", "\r\n") + "\r\n\r\n" +
		consoleEnd + "\r\n" +
		"[   41.337] reboot: Power down\r\n"
}

const testTable = images.MismatchMarker + ": this scheduler does not run the client's software\n" +
	"package  client  image\n" +
	"numpy    1.26.4  1.24.2"

// TestMismatchOnTheConsole: a member that shut itself down after its
// launcher found other software is reported stopped with the launcher's
// table, read from its console output through the SDK; the console is
// read once; a console not posted yet keeps the member pending (up to
// ConsoleWait), and one that cannot be read, or never says more, gives the
// usual reason.
func TestMismatchOnTheConsole(t *testing.T) {
	start := func(t *testing.T, e *env) string {
		t.Helper()
		s := spec("c1")
		s.EnvExpect = expectJSON
		if err := e.p.StartScheduler(ctx(t), s); err != nil {
			t.Fatal(err)
		}
		in, ok := e.ec2.Instance("c1", "scheduler")
		if !ok {
			t.Fatal("no scheduler instance")
		}
		return in.ID
	}
	scheduler := func(t *testing.T, e *env) providers.Member {
		t.Helper()
		ms, err := e.p.Describe(ctx(t), "c1")
		if err != nil {
			t.Fatal(err)
		}
		m, ok := memberByName(ms, "scheduler")
		if !ok {
			t.Fatalf("no scheduler in %+v", ms)
		}
		return m
	}

	t.Run("table", func(t *testing.T) {
		e := newEnv(t)
		id := start(t, e)
		e.ec2.Print(id, mismatchConsole(testTable))
		e.ec2.ShutDown(id)
		for range 2 {
			m := scheduler(t, e)
			got, ok := images.MismatchIn(m.Reason)
			if m.State != providers.StateStopped || !ok || got != testTable || !strings.Contains(m.Reason, "shut itself down") {
				t.Fatalf("scheduler = %+v; want stopped with the table\n%s", m, testTable)
			}
		}
		if n := len(e.ec2.Requests("GetConsoleOutput")); n != 1 {
			t.Errorf("GetConsoleOutput called %d times, want once", n)
		}
	})
	t.Run("not posted yet", func(t *testing.T) {
		e := newEnv(t)
		id := start(t, e)
		e.ec2.ShutDown(id)
		if m := scheduler(t, e); m.State != providers.StatePending || m.Reason != "" {
			t.Fatalf("scheduler = %+v; want pending while its console is not posted", m)
		}
		e.ec2.Print(id, mismatchConsole(testTable))
		if m := scheduler(t, e); m.State != providers.StateStopped || !strings.Contains(m.Reason, testTable) {
			t.Fatalf("scheduler = %+v; want stopped with the table", m)
		}
	})
	t.Run("never posted", func(t *testing.T) {
		e := newEnv(t, func(c *Config) { c.ConsoleWait = time.Nanosecond })
		id := start(t, e)
		e.ec2.ShutDown(id)
		m := scheduler(t, e)
		if m.State != providers.StateStopped || !strings.Contains(m.Reason, "get-console-output --instance-id "+id) || strings.Contains(m.Reason, images.MismatchMarker) {
			t.Fatalf("scheduler = %+v; want stopped, pointing at the console", m)
		}
	})
	t.Run("no permission", func(t *testing.T) {
		e := newEnv(t)
		id := start(t, e)
		e.ec2.FailNext("GetConsoleOutput", 1, "UnauthorizedOperation")
		e.ec2.Print(id, mismatchConsole(testTable))
		e.ec2.ShutDown(id)
		m := scheduler(t, e)
		if m.State != providers.StateStopped || !strings.Contains(m.Reason, "get-console-output") {
			t.Fatalf("scheduler = %+v; want stopped with the usual reason", m)
		}
		if !strings.Contains(e.logs.String(), "cannot read the console output") {
			t.Errorf("no warning logged:\n%s", e.logs.String())
		}
	})
	t.Run("a worker", func(t *testing.T) {
		e := newEnv(t)
		s := spec("c1")
		if err := e.p.StartWorker(ctx(t), s, "worker-0", "10.0.1.10:8786"); err != nil {
			t.Fatal(err)
		}
		in, _ := e.ec2.Instance("c1", "worker-0")
		table := strings.Replace(testTable, "scheduler", "worker", 1)
		e.ec2.Print(in.ID, mismatchConsole(table))
		e.ec2.ShutDown(in.ID)
		ms, err := e.p.Describe(ctx(t), "c1")
		if err != nil {
			t.Fatal(err)
		}
		w, _ := memberByName(ms, "worker-0")
		if got, ok := images.MismatchIn(w.Reason); w.State != providers.StateStopped || !ok || got != table {
			t.Errorf("worker-0 = %+v; want stopped with the table", w)
		}
	})
}

// The docker and systemctl stand-ins of the launcher's sandbox run what a
// real member runs: the unit's ExecStart (docker run, as the container
// would: the image's interpreter is this machine's /usr/bin/python3, with
// the variables of --env-file and -e only), its log kept as a journal, and
// its ExecStopPost, which writes that journal to the console.
const (
	launcherDockerStub = `#!/bin/bash
echo "docker $*" >> "$SANDBOX/calls.log"
[ "$1" = run ] || exit 0
shift
if [[ " $* " == *" --network none "* ]]; then echo 0; exit 0; fi
envs=(PATH=/usr/bin:/bin)
entry=""
while [ $# -gt 0 ]; do
  case "$1" in
    --rm) shift;;
    --name|--network|-v|--gpus) shift 2;;
    --env-file) while IFS= read -r line; do envs+=("$line"); done < "$2"; shift 2;;
    -e) envs+=("$2"); shift 2;;
    --entrypoint) entry=$2; shift 2;;
    *) break;;
  esac
done
image=$1; shift
[ "$entry" = python3 ] && entry=/usr/bin/python3
echo "container of $image: $entry $*" >> "$SANDBOX/calls.log"
exec env -i "${envs[@]}" "$entry" "$@"
`

	launcherSystemctlStub = `#!/bin/bash
echo "systemctl $*" >> "$SANDBOX/calls.log"
if [ "$1" = start ] && [ "$3" = dask.service ]; then
  unit=/etc/systemd/system/dask.service
  start=$(sed -n 's/^ExecStart=//p' "$unit")
  post=$(sed -n 's/^ExecStopPost=//p' "$unit")
  eval "set -- $start"
  shift # /usr/bin/docker: the stand-in on PATH instead
  docker "$@" >> "$SANDBOX/journal.log" 2>&1
  echo "exit $?" >> "$SANDBOX/calls.log"
  eval "set -- $post"
  "$@"
fi
exit 0
`

	// launcherRunner is ec2Runner with a console that is kept: a FIFO
	// whose reader appends to console.log (writers open the console with
	// ">", which would empty a file; a real console is a device). It waits
	// for its own last line to be read before the sandbox ends.
	launcherRunner = `set -eu
ip link set lo up
ip addr add 169.254.169.254/32 dev lo
cp -a /etc "$SANDBOX/etc"
mount --bind "$SANDBOX/etc" /etc
mount -t tmpfs none /var/log
: > "$SANDBOX/console.log"
mkfifo "$SANDBOX/console.fifo"
(for i in $(seq 1000); do cat "$SANDBOX/console.fifo" >> "$SANDBOX/console.log"; done) </dev/null >/dev/null 2>&1 &
READER=$!
mount --bind "$SANDBOX/console.fifo" /dev/console
for p in /sbin/poweroff /usr/sbin/poweroff /bin/systemctl /usr/bin/systemctl /sbin/reboot /usr/sbin/reboot; do
  if [ -e "$p" ]; then mount --bind "$SANDBOX/bin/systemctl" "$p"; fi
done
python3 "$SANDBOX/imds.py" "$SANDBOX/imds.log" &
IMDS=$!
for i in $(seq 50); do /usr/bin/curl -q -s -o /dev/null -X PUT http://169.254.169.254/latest/api/token && break; sleep 0.1; done
PATH="$SANDBOX/bin:$PATH" timeout 60 bash "$SANDBOX/user-data.sh" > "$SANDBOX/user-data.out" 2>&1 || true
kill $IMDS
echo "sandbox: done" > /dev/console
for i in $(seq 100); do grep -q "sandbox: done" "$SANDBOX/console.log" && break; sleep 0.05; done
kill $READER
# The reader's cat waits for a writer: one, to let it end.
timeout 1 bash -c ': > "$SANDBOX/console.fifo"' || true
`

	journalctlStub = `#!/bin/bash
echo "journalctl $*" >> "$SANDBOX/calls.log"
cat "$SANDBOX/journal.log"
`
)

// TestLauncherReachesTheGateway launches a scheduler through the real SDK
// and the EC2 fake with the client's versions, runs the user data the fake
// received in the sandbox of TestMetadataCutOffBeforeImageCode, where the
// unit runs the real launcher with /usr/bin/python3 against versions that
// differ from the installed distributed, and hands the console it wrote to
// the fake: Describe reports the scheduler stopped with the launcher's
// table, as the scheduling core fails clusters with.
func TestLauncherReachesTheGateway(t *testing.T) {
	testutil.NeedSandbox(t, "unshare", "iptables", "python3", "setpriv", "/usr/bin/curl", "ip", "/usr/bin/python3")
	out, err := exec.Command("/usr/bin/python3", "-c", "import sys, importlib.metadata as m; print('%d.%d' % sys.version_info[:2], m.version('distributed'))").Output()
	if err != nil {
		testutil.Missing(t, testutil.EnvRequirePython, fmt.Sprintf("no python3 with distributed: %v (apt-get install python3-distributed)", err))
	}
	pyVersion, installed, _ := strings.Cut(strings.TrimSpace(string(out)), " ")

	e := newEnv(t)
	s := spec("c1")
	s.EnvExpect = `{"python":"` + pyVersion + `","distributed":"1999.1.0"}`
	if err := e.p.StartScheduler(ctx(t), s); err != nil {
		t.Fatal(err)
	}
	in, _ := e.ec2.Instance("c1", "scheduler")

	read := testutil.RunSandbox(t, 120*time.Second, map[string]string{
		"user-data.sh":   in.UserData,
		"imds.py":        imdsServer,
		"run.sh":         launcherRunner,
		"parameter.pem":  testCert + testKey,
		"bin/aws":        awsStub,
		"bin/docker":     launcherDockerStub,
		"bin/systemctl":  launcherSystemctlStub,
		"bin/journalctl": journalctlStub,
		"bin/imds-creds": imdsCreds,
		"calls.log":      "",
		"journal.log":    "",
		"imds.log":       "",
	})
	console, calls := read("console.log"), read("calls.log")
	t.Logf("console:\n%s\ncalls:\n%s", console, calls)
	if !strings.Contains(calls, "container of "+DefaultImage+": /usr/bin/python3 /etc/dask-gateway/launcher.py scheduler --protocol tls") {
		t.Fatalf("the unit did not run the launcher:\n%s", calls)
	}
	if !strings.Contains(calls, "exit 97") {
		t.Errorf("the launcher did not exit with status 97:\n%s", calls)
	}
	printed, ok := images.MismatchIn(console)
	if !ok || !strings.Contains(printed, "distributed") || !strings.Contains(printed, "1999.1.0") || !strings.Contains(printed, installed) {
		t.Fatalf("the console has no table with distributed 1999.1.0 against %s:\n%s", installed, console)
	}
	if !strings.Contains(console, consoleEnd) {
		t.Errorf("the console lacks the end line %q", consoleEnd)
	}

	e.ec2.Print(in.ID, console)
	e.ec2.ShutDown(in.ID)
	ms, err := e.p.Describe(ctx(t), "c1")
	if err != nil {
		t.Fatal(err)
	}
	m, _ := memberByName(ms, "scheduler")
	got, ok := images.MismatchIn(m.Reason)
	if m.State != providers.StateStopped || !ok || got != printed {
		t.Errorf("scheduler = %+v\nwant stopped with the table:\n%s", m, printed)
	}
}

// TestUserDataOwnerEnv: the owner's variables (the environ option) reach
// member.env word for word, before the gateway's, whatever a shell or
// Docker's env file would make of their characters.
func TestUserDataOwnerEnv(t *testing.T) {
	p := &Provider{cfg: Config{Region: "eu-west-1", GatewayID: "gw1", Image: DefaultImage}.withDefaults()}
	hostile := `it's "$HOME" $(touch /tmp/x) ` + "`id`" + ` \n; #`
	for _, role := range []providers.Role{providers.RoleScheduler, providers.RoleWorker} {
		s := spec("c1")
		s.Env = map[string]string{"DASK_DISTRIBUTED__WORKER__MEMORY__TARGET": "0.1", "MY_VAR": hostile, "EMPTY": ""}
		b64, err := userData(p.script(s, "worker-0", role, "10.0.1.12:8786", "m6i.large", s.Scheduler))
		if err != nil {
			t.Fatal(err)
		}
		_, env := runFileLines(t, decodeScript(t, b64))
		want := "DASK_DISTRIBUTED__WORKER__MEMORY__TARGET=0.1\nEMPTY=\nMY_VAR=" + hostile + "\nPYTHONUNBUFFERED=1\n"
		if env != want {
			t.Errorf("%s: member.env = %q, want %q", role, env, want)
		}
	}
	s := spec("c1")
	s.Env = map[string]string{"A": "x\ny"}
	if _, err := userData(p.script(s, "scheduler", providers.RoleScheduler, "", "m6i.large", s.Scheduler)); err == nil || !strings.Contains(err.Error(), "environ variable A") {
		t.Errorf("a two-line value: err = %v, want one naming the variable", err)
	}
}
