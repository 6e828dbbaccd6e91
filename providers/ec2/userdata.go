package ec2

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"text/template"

	"github.com/gatewayhq/gateway/images"
	"github.com/gatewayhq/gateway/providers"
)

// maxUserData is EC2's limit on user data before base64 encoding.
const maxUserData = 16 << 10

// Where members keep the cluster's TLS files and the launcher, on the host
// and, mounted read-only, in the container.
const tlsDir = "/etc/dask-gateway"

// launcherPath is where the boot script writes images.LauncherScript, which
// the container runs before Dask: in a file rather than on the command
// line of a systemd unit, whose quoting and specifiers (%) it would have to
// survive.
const launcherPath = tlsDir + "/launcher.py"

// launcherEOF ends the here-document that carries the launcher; the
// launcher never has this line (TestLauncherInUserData).
const launcherEOF = "GATEWAY_LAUNCHER_EOF"

// consoleEnd is the line a member prints on its console as it powers
// itself off (after the unit's last lines of log when Dask has exited, or
// after a failed set-up): Describe knows from it that the console output
// it reads is complete. It starts with "gateway" so that images.MismatchIn
// ends the table before it.
const consoleEnd = "gateway: this member is powering off"

// memberScript is the data userData fills in; every field is checked
// against a strict character set before it gets here (names, image, paths,
// numbers), so nothing in it needs quoting beyond what the template does.
type memberScript struct {
	Role      providers.Role
	Cluster   string
	Member    string
	Region    string
	Parameter string
	Image     string
	GPU       bool
	// Python runs the launcher in the image (the container's entrypoint);
	// Command is the launcher's arguments: the role, then Dask's.
	Python  string
	Command []string
	// Expect is the client's versions (images.ExpectEnv), or "" for no
	// check; checked to be one line (expectLine).
	Expect string
	// Env are the owner's variables (providers.EnvList), one line each
	// (clusteropts.CheckEnviron), before the gateway's in the env file.
	Env []string
	// ECRHost and ECRRegion are set when Image is in an ECR registry:
	// Docker logs in there with the instance profile before pulling.
	ECRHost   string
	ECRRegion string
}

// ecrRegistry matches an ECR registry host: <account>.dkr.ecr.<region>.amazonaws.com[.cn].
var ecrRegistry = regexp.MustCompile(`^[0-9]{12}\.dkr\.ecr(-fips)?\.([a-z0-9-]+)\.amazonaws\.com(\.cn)?$`)

// ecrImage returns the registry host and region of an image in ECR, or
// empty strings for any other image.
func ecrImage(image string) (host, region string) {
	host, _, ok := strings.Cut(image, "/")
	if !ok {
		return "", ""
	}
	m := ecrRegistry.FindStringSubmatch(host)
	if m == nil {
		return "", ""
	}
	return host, m[2]
}

// userData is the cloud-init shell script a member boots with. It holds no
// secret: it reads the cluster's TLS material from SSM Parameter Store with
// the instance profile's credentials (which the AWS CLI gets through IMDSv2,
// the only metadata version these instances accept), writes it to files of
// mode 0600, and runs the container in a systemd unit whose end powers the
// machine off. Instances are launched with shutdown behaviour "terminate",
// so a member whose Dask process exits, or whose set-up fails, terminates
// rather than running on idle and billed; Describe then reports it stopped
// with the reason.
func userData(s memberScript) (string, error) {
	if strings.ContainsAny(s.Expect, "\n\r\x00") {
		// Written as one line of Docker's --env-file: JSON from
		// images.ExpectValue never has these.
		return "", fmt.Errorf("ec2 provider: the environment's expected versions of %s are not one line of JSON", s.Member)
	}
	for _, kv := range s.Env {
		if strings.ContainsAny(kv, "\n\r\x00") {
			name, _, _ := strings.Cut(kv, "=")
			return "", fmt.Errorf("ec2 provider: environ variable %s of %s is not one line", name, s.Member)
		}
	}
	var b bytes.Buffer
	if err := scriptTemplate.Execute(&b, s); err != nil {
		return "", fmt.Errorf("ec2 provider: user data: %w", err)
	}
	script := dropComments(b.String())
	if len(script) > maxUserData {
		return "", fmt.Errorf("ec2 provider: user data of %s is %d bytes, more than EC2's %d", s.Member, len(script), maxUserData)
	}
	return base64.StdEncoding.EncodeToString([]byte(script)), nil
}

// dropComments leaves the template's comment lines (all but the first
// line, #!) out of the user data: they explain the script to its readers
// here, and would take EC2's 16 KiB from the owner's variables there. No
// line the script needs starts with #: the launcher's Python has its
// comments stripped already (images.LauncherScript), and the systemd
// unit's would be comments there too.
func dropComments(script string) string {
	var b strings.Builder
	for i, line := range strings.SplitAfter(script, "\n") {
		if i > 0 && strings.HasPrefix(strings.TrimSpace(line), "#") {
			continue
		}
		b.WriteString(line)
	}
	return b.String()
}

// schedulerCommand is the launcher's arguments for the scheduler: the
// role, then "dask scheduler"'s.
func schedulerCommand(spec providers.ClusterSpec) []string {
	prefix := orDefault(spec.DashboardPrefix, "/clusters/"+spec.Name)
	return append([]string{"scheduler", "--protocol", "tls"}, append(tlsFlags(),
		"--port", strconv.Itoa(schedulerPort),
		"--dashboard-address", ":"+strconv.Itoa(dashboardPort),
		"--dashboard-prefix", prefix)...)
}

// workerCommand is the launcher's arguments for a worker.
func workerCommand(spec providers.ClusterSpec, worker, schedulerAddress string) []string {
	cmd := append([]string{"worker", "tls://" + schedulerAddress}, tlsFlags()...)
	cmd = append(cmd, "--name", worker)
	threads := spec.WorkerThreads
	if threads <= 0 {
		threads = int(spec.Worker.VCPUs)
	}
	if threads > 0 {
		cmd = append(cmd, "--nthreads", strconv.Itoa(threads))
	}
	memory := "auto"
	if spec.WorkerMemory > 0 {
		memory = strconv.FormatInt(spec.WorkerMemory, 10)
	}
	cmd = append(cmd, "--memory-limit", memory,
		// Workers are reached through the scheduler only: no dashboards.
		"--no-dashboard",
		// A worker whose scheduler is gone exits, and its machine with it.
		"--death-timeout", "60")
	return cmd
}

// dashboardTLSEnv makes the scheduler serve its dashboard over HTTPS with
// the cluster's certificate (Dask's distributed.scheduler.dashboard.tls
// settings), so that the gateway's hop to it is authenticated and
// encrypted like the Dask port.
func dashboardTLSEnv() []string {
	return []string{
		"DASK_DISTRIBUTED__SCHEDULER__DASHBOARD__TLS__CERT=" + tlsDir + "/tls.crt",
		"DASK_DISTRIBUTED__SCHEDULER__DASHBOARD__TLS__KEY=" + tlsDir + "/tls.key",
		"DASK_DISTRIBUTED__SCHEDULER__DASHBOARD__TLS__CA_FILE=" + tlsDir + "/tls.crt",
	}
}

func tlsFlags() []string {
	return []string{
		"--tls-ca-file", tlsDir + "/tls.crt",
		"--tls-cert", tlsDir + "/tls.crt",
		"--tls-key", tlsDir + "/tls.key",
	}
}

// plainWord matches words that mean the same, unquoted, to sh and to
// systemd (no spaces, quotes, $, %, globs or backslashes).
var plainWord = regexp.MustCompile(`^[A-Za-z0-9_./:=@+,-]+$`)

// shellQuote quotes one word for sh and systemd alike when it needs it
// (single quotes, which neither interprets inside; the words given here
// never hold one, having been checked against strict character sets).
func shellQuote(s string) string {
	if plainWord.MatchString(s) {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

var scriptTemplate = template.Must(template.New("user-data").Funcs(template.FuncMap{
	"q":            shellQuote,
	"dir":          func() string { return tlsDir },
	"launcher":     func() string { return strings.TrimRight(images.LauncherScript, "\n") },
	"launcherEOF":  func() string { return launcherEOF },
	"launcherPath": func() string { return launcherPath },
	"expectEnv":    func() string { return images.ExpectEnv },
	"consoleEnd":   func() string { return consoleEnd },
	"dashboardTLS": func() []string {
		var out []string
		for _, kv := range dashboardTLSEnv() {
			out = append(out, "-e", kv)
		}
		return out
	},
	"join": func(words []string) string {
		q := make([]string, len(words))
		for i, w := range words {
			q[i] = shellQuote(w)
		}
		return strings.Join(q, " ")
	},
}).Parse(`#!/bin/bash
# Dask {{.Role}} {{.Member}} of cluster {{.Cluster}}, started by the gateway's ec2 provider.
# No secret is in this script: the TLS key is read from SSM Parameter Store.
set -euo pipefail
exec > >(tee -a /var/log/dask-gateway.log > /dev/console) 2>&1
# Any failure ends the machine (it terminates on shutdown) instead of
# leaving it running idle.
trap 'echo "dask-gateway: set-up failed at line $LINENO; shutting down"; echo "{{consoleEnd}}"; systemctl poweroff' ERR

# The ECS-optimized image runs the ECS agent, which would join this machine
# to the account's "default" ECS cluster: it belongs to one Dask cluster only.
systemctl disable --now --no-block ecs.service 2>/dev/null || true

REGION={{q .Region}}
PARAMETER={{q .Parameter}}
IMAGE={{q .Image}}
DIR={{q dir}}

# Instance metadata is IMDSv2 only: a session token first. Wait for the
# instance profile's credentials, which the AWS CLI reads the same way.
imds() {
  local token
  token=$(curl -sf -X PUT http://169.254.169.254/latest/api/token -H 'X-aws-ec2-metadata-token-ttl-seconds: 300') || return 1
  curl -sf -H "X-aws-ec2-metadata-token: $token" "http://169.254.169.254/latest/meta-data/$1"
}
for i in $(seq 60); do imds iam/security-credentials/ >/dev/null && break; sleep 2; done

command -v aws >/dev/null || dnf install -y -q awscli-2
command -v docker >/dev/null || dnf install -y -q docker
systemctl enable --now docker

umask 077
mkdir -p "$DIR"
# The instance profile needs ssm:GetParameter on this parameter and
# kms:Decrypt on its key.
for i in $(seq 30); do
  if aws ssm get-parameter --region "$REGION" --name "$PARAMETER" --with-decryption \
      --query Parameter.Value --output text > "$DIR/tls.pem"; then break; fi
  if [ "$i" = 30 ]; then echo "dask-gateway: cannot read $PARAMETER: the instance profile needs ssm:GetParameter on it and kms:Decrypt"; false; fi
  sleep 5
done
sed -n '/-BEGIN CERTIFICATE-/,/-END CERTIFICATE-/p' "$DIR/tls.pem" > "$DIR/tls.crt"
sed -n '/-BEGIN .*PRIVATE KEY-/,/-END .*PRIVATE KEY-/p' "$DIR/tls.pem" > "$DIR/tls.key"
rm -f "$DIR/tls.pem"
test -s "$DIR/tls.crt"
test -s "$DIR/tls.key"

# The launcher checks that the image runs the client's versions before Dask
# starts; on a difference it prints a table and exits with status 97, and
# the unit puts its last lines on the console, where the gateway reads them
# (ec2:GetConsoleOutput).
cat > "$DIR/launcher.py" <<'{{launcherEOF}}'
{{launcher}}
{{launcherEOF}}
printf '%s\n' {{range .Env}}{{q .}} {{end}}PYTHONUNBUFFERED=1{{if .Expect}} {{q (printf "%s=%s" expectEnv .Expect)}}{{end}} > "$DIR/member.env"

{{- if .ECRHost}}
# The image is in ECR: Docker logs in with the instance profile, which needs
# ecr:GetAuthorizationToken and pull rights on the repository. The password
# goes through a pipe, never a command line.
for i in $(seq 10); do
  aws ecr get-login-password --region {{q .ECRRegion}} | docker login --username AWS --password-stdin {{q .ECRHost}} >/dev/null && break
  if [ "$i" = 10 ]; then echo "dask-gateway: cannot log in to {{.ECRHost}}: the instance profile needs ecr:GetAuthorizationToken"; false; fi
  sleep 5
done
{{- end}}
for i in $(seq 10); do docker pull -q "$IMAGE" && break; [ "$i" = 10 ] && false; sleep 10; done

# The instance profile may read every cluster's TLS parameter: once this
# member has its key and its image (pulling runs none of the image's code),
# nothing on it may reach the instance metadata service and its
# credentials again, before any of the image's code runs: user code runs
# with the host's network (OUTPUT), and without the capability to undo
# this; FORWARD covers containers on a bridge. No iptables: fail.
iptables -I OUTPUT -d 169.254.169.254 -j REJECT
iptables -I FORWARD -d 169.254.169.254 -j REJECT
ip6tables -I OUTPUT -d fd00:ec2::254 -j REJECT 2>/dev/null || true
ip6tables -I FORWARD -d fd00:ec2::254 -j REJECT 2>/dev/null || true

# The files stay 0600, owned by the user the image runs as (asked of the
# image itself, so after the cut-off, and without a network).
chown "$(docker run --rm --network none --entrypoint id "$IMAGE" -u 2>/dev/null || echo 0)" "$DIR/tls.crt" "$DIR/tls.key" "$DIR/launcher.py"
chmod 0600 "$DIR/tls.crt" "$DIR/tls.key" "$DIR/launcher.py"

cat > /etc/systemd/system/dask.service <<'UNIT'
[Unit]
Description=Dask {{.Role}} {{.Member}} of cluster {{.Cluster}}
After=docker.service network-online.target
Requires=docker.service

[Service]
ExecStartPre=-/usr/bin/docker rm -f dask
ExecStart=/usr/bin/docker run --rm --name dask --network host{{if .GPU}} --gpus all{{end}} -v {{dir}}:{{dir}}:ro --env-file {{dir}}/member.env{{if eq .Role "scheduler"}} {{join dashboardTLS}}{{end}} --entrypoint {{q .Python}} {{q .Image}} {{launcherPath}} {{join .Command}}
# When Dask exits the machine has nothing left to do: show why on the
# console (aws ec2 get-console-output; the gateway reads the launcher's
# table there), messages only, and power off, which terminates it.
ExecStopPost=/bin/sh -c 'journalctl -u dask.service -n 30 -o cat --no-pager > /dev/console; (echo; echo "{{consoleEnd}}") > /dev/console; systemctl poweroff --no-block'
Restart=no
UNIT
systemctl daemon-reload
trap - ERR
systemctl start --no-block dask.service
`))
