package ec2

import (
	"encoding/base64"
	"strings"
	"testing"

	"github.com/gatewayhq/gateway/providers"
)

func decodeScript(t *testing.T, b64 string) string {
	t.Helper()
	b, err := base64.StdEncoding.DecodeString(b64)
	if err != nil {
		t.Fatalf("user data is not base64: %v", err)
	}
	return string(b)
}

// assertNoSecrets checks that a script carries no PEM material.
func assertNoSecrets(t *testing.T, script string) {
	t.Helper()
	for _, bad := range []string{"-----BEGIN", "PRIVATE KEY-----", "MIIBfake", "MHcCAQEEIfake", "LINE1", "LINE2"} {
		if strings.Contains(script, bad) {
			t.Errorf("user data contains %q", bad)
		}
	}
}

func TestUserDataScheduler(t *testing.T) {
	p := &Provider{cfg: Config{Region: "eu-west-1", GatewayID: "gw1", Image: DefaultImage}.withDefaults()}
	s := spec("c1")
	b64, err := userData(p.script(s, "scheduler", providers.RoleScheduler, "", "m6i.large", s.Scheduler))
	if err != nil {
		t.Fatal(err)
	}
	script := decodeScript(t, b64)
	assertNoSecrets(t, script)
	for _, want := range []string{
		"#!/bin/bash",
		"X-aws-ec2-metadata-token-ttl-seconds", // IMDSv2 session token
		"X-aws-ec2-metadata-token: $token",
		"REGION=eu-west-1",
		"PARAMETER=/gateway/gw1/c1/tls",
		`aws ssm get-parameter --region "$REGION" --name "$PARAMETER" --with-decryption`,
		"umask 077",
		`chmod 0600 "$DIR/tls.crt" "$DIR/tls.key" "$DIR/launcher.py"`,
		"systemctl disable --now --no-block ecs.service",
		"docker run --rm --name dask --network host -v /etc/dask-gateway:/etc/dask-gateway:ro --env-file /etc/dask-gateway/member.env" +
			" -e DASK_DISTRIBUTED__SCHEDULER__DASHBOARD__TLS__CERT=/etc/dask-gateway/tls.crt" +
			" -e DASK_DISTRIBUTED__SCHEDULER__DASHBOARD__TLS__KEY=/etc/dask-gateway/tls.key" +
			" -e DASK_DISTRIBUTED__SCHEDULER__DASHBOARD__TLS__CA_FILE=/etc/dask-gateway/tls.crt" +
			" --entrypoint python3 ghcr.io/dask/dask:latest /etc/dask-gateway/launcher.py scheduler --protocol tls",
		"--tls-ca-file /etc/dask-gateway/tls.crt --tls-cert /etc/dask-gateway/tls.crt --tls-key /etc/dask-gateway/tls.key",
		"--port 8786 --dashboard-address :8787 --dashboard-prefix /clusters/c1",
		"systemctl poweroff",
		"iptables -I OUTPUT -d 169.254.169.254 -j REJECT", // no instance credentials for user code
	} {
		if !strings.Contains(script, want) {
			t.Errorf("scheduler script lacks %q", want)
		}
	}
	if strings.Index(script, "iptables -I OUTPUT") < strings.Index(script, "docker pull") {
		t.Error("instance metadata is cut off before the image is pulled (a private registry needs the role)")
	}
	if strings.Index(script, "iptables -I OUTPUT") > strings.Index(script, "systemctl start --no-block dask.service") {
		t.Error("instance metadata is still reachable when Dask (and user code) starts")
	}
	// No code of the image runs before the cut-off: the image is the
	// user's choice, and the role reads every cluster's key.
	cut := strings.Index(script, "iptables -I OUTPUT -d 169.254.169.254 -j REJECT")
	for i := 0; ; {
		j := strings.Index(script[i:], "docker run")
		if j < 0 {
			break
		}
		if i+j < cut {
			t.Errorf("a container runs before instance metadata is cut off: %q", firstLine(script[i+j:]))
		}
		i += j + 1
	}
	if !strings.Contains(script, "iptables -I FORWARD -d 169.254.169.254 -j REJECT") {
		t.Error("containers on a bridge may still reach instance metadata")
	}
	if !strings.Contains(script, "docker run --rm --network none --entrypoint id") {
		t.Error("the image's user is asked with a network")
	}
	if strings.Contains(script, "--gpus") {
		t.Error("a CPU scheduler asks for GPUs")
	}
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}

func TestUserDataWorker(t *testing.T) {
	p := &Provider{cfg: Config{Region: "eu-west-1", GatewayID: "gw1", Image: DefaultImage}.withDefaults()}
	s := spec("c1")
	s.Image = "ghcr.io/me/dask-gpu:2024.8"
	s.Worker = providers.Machine{InstanceType: "g5.xlarge", VCPUs: 4, GPUs: 1, GPUType: "a10g"}
	b64, err := userData(p.script(s, "worker-3", providers.RoleWorker, "10.0.1.12:8786", "g5.xlarge", s.Worker))
	if err != nil {
		t.Fatal(err)
	}
	script := decodeScript(t, b64)
	assertNoSecrets(t, script)
	for _, want := range []string{
		"--network host --gpus all -v /etc/dask-gateway:/etc/dask-gateway:ro --env-file /etc/dask-gateway/member.env --entrypoint python3 ghcr.io/me/dask-gpu:2024.8 /etc/dask-gateway/launcher.py worker tls://10.0.1.12:8786",
		"--tls-ca-file /etc/dask-gateway/tls.crt --tls-cert /etc/dask-gateway/tls.crt --tls-key /etc/dask-gateway/tls.key",
		"--name worker-3 --nthreads 2 --memory-limit 4294967296 --no-dashboard --death-timeout 60",
		"IMAGE=ghcr.io/me/dask-gpu:2024.8",
	} {
		if !strings.Contains(script, want) {
			t.Errorf("worker script lacks %q", want)
		}
	}
	if strings.Contains(script, "DASHBOARD__TLS") {
		t.Error("a worker, which serves no dashboard, gets dashboard TLS settings")
	}
	// Without threads or memory in the spec: the machine's vCPUs, Dask's
	// automatic memory limit.
	s.WorkerThreads, s.WorkerMemory = 0, 0
	cmd := strings.Join(workerCommand(s, "w", "10.0.0.1:8786"), " ")
	if !strings.Contains(cmd, "--nthreads 4 --memory-limit auto") {
		t.Errorf("worker command %q", cmd)
	}
}

func TestUserDataTooLarge(t *testing.T) {
	_, err := userData(memberScript{Role: providers.RoleWorker, Member: "w", Command: []string{strings.Repeat("x", maxUserData)}})
	if err == nil || !strings.Contains(err.Error(), "more than EC2's") {
		t.Fatalf("err = %v", err)
	}
}

func TestShellQuote(t *testing.T) {
	for in, want := range map[string]string{
		"tls://10.0.0.1:8786": "tls://10.0.0.1:8786",
		"a b":                 "'a b'",
		"it's":                `'it'\''s'`,
		"$HOME":               "'$HOME'",
		"50%":                 "'50%'",
	} {
		if got := shellQuote(in); got != want {
			t.Errorf("shellQuote(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestUserDataECR: a member whose image is in ECR logs Docker in there with
// the instance profile before pulling; other images are pulled as they are.
func TestUserDataECR(t *testing.T) {
	p := &Provider{cfg: Config{Region: "eu-west-1", GatewayID: "gw1", Image: DefaultImage}.withDefaults()}
	cases := []struct {
		image, host, region string
	}{
		{"123456789012.dkr.ecr.us-east-1.amazonaws.com/gw/env:env-abc", "123456789012.dkr.ecr.us-east-1.amazonaws.com", "us-east-1"},
		{"123456789012.dkr.ecr.cn-north-1.amazonaws.com.cn/env:1", "123456789012.dkr.ecr.cn-north-1.amazonaws.com.cn", "cn-north-1"},
		{"123456789012.dkr.ecr-fips.us-gov-west-1.amazonaws.com/env:1", "123456789012.dkr.ecr-fips.us-gov-west-1.amazonaws.com", "us-gov-west-1"},
		{"ghcr.io/dask/dask:latest", "", ""},
		{"public.ecr.aws/dask/dask:latest", "", ""},
		{"dask/dask:latest", "", ""},
		{"12345.dkr.ecr.us-east-1.amazonaws.com/x:1", "", ""}, // not an account id
	}
	for _, c := range cases {
		t.Run(c.image, func(t *testing.T) {
			host, region := ecrImage(c.image)
			if host != c.host || region != c.region {
				t.Fatalf("ecrImage = %q, %q; want %q, %q", host, region, c.host, c.region)
			}
			s := spec("c1")
			s.Image = c.image
			b64, err := userData(p.script(s, "scheduler", providers.RoleScheduler, "", "m6i.large", s.Scheduler))
			if err != nil {
				t.Fatal(err)
			}
			script := decodeScript(t, b64)
			login := strings.Index(script, "aws ecr get-login-password --region "+c.region+" | docker login --username AWS --password-stdin "+c.host)
			if c.host == "" {
				if strings.Contains(script, "docker login") {
					t.Error("a member logs in to a registry that is not ECR")
				}
				return
			}
			if login < 0 || login > strings.Index(script, "docker pull") {
				t.Errorf("the script does not log in to %s before pulling:\n%s", c.host, script)
			}
		})
	}
}
