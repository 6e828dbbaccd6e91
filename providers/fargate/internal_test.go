package fargate

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/credentials"

	"github.com/gatewayhq/gateway/internal/backoff"
	"github.com/gatewayhq/gateway/internal/testutil"
	"github.com/gatewayhq/gateway/providers"
)

func TestRoundSize(t *testing.T) {
	tests := []struct {
		vcpus, gib  float64
		cpu, mem    int
		unsupported bool
	}{
		{0.25, 0.5, 256, 512, false},
		{0, 0, 256, 512, false},
		{0.25, 1.5, 256, 2048, false},
		{0.25, 3, 512, 3072, false}, // 0.25 vCPU stops at 2 GB
		{0.1 + 0.2, 1, 512, 1024, false},
		{0.5, 0.5, 512, 1024, false}, // 0.5 vCPU starts at 1 GB
		{1, 3, 1024, 3072, false},
		{1, 2.2, 1024, 3072, false},
		{1, 9, 2048, 9216, false},
		{2, 3, 2048, 4096, false},
		{3, 8, 4096, 8192, false},
		{4, 30, 4096, 30720, false},
		{4, 31, 8192, 32768, false}, // beyond 30 GB: 8 vCPU, 4 GB steps
		{8, 17, 8192, 20480, false},
		{8, 61, 16384, 65536, false}, // beyond 60 GB: 16 vCPU, 8 GB steps
		{12, 33, 16384, 40960, false},
		{16, 120, 16384, 122880, false},
		{16.01, 32, 0, 0, true},
		{1, 120.5, 0, 0, true},
		{64, 256, 0, 0, true},
		{-1, 1, 0, 0, false},
	}
	for _, tc := range tests {
		got, err := roundSize("worker", tc.vcpus, tc.gib)
		if tc.cpu == 0 {
			if err == nil {
				t.Errorf("roundSize(%v, %v) = %v; want an error", tc.vcpus, tc.gib, got)
			} else if errors.Is(err, providers.ErrUnsupported) != tc.unsupported {
				t.Errorf("roundSize(%v, %v): %v; unsupported should be %v", tc.vcpus, tc.gib, err, tc.unsupported)
			} else if tc.unsupported && !strings.Contains(err.Error(), "provider: ec2") {
				t.Errorf("error does not name the ec2 provider: %v", err)
			}
			continue
		}
		if err != nil || got != (taskSize{tc.cpu, tc.mem}) {
			t.Errorf("roundSize(%v, %v) = %v, %v; want %d/%d", tc.vcpus, tc.gib, got, err, tc.cpu, tc.mem)
		}
	}
	// Every size Fargate lists is its own rounding.
	for _, s := range fargateSizes() {
		if got, err := roundSize("x", float64(s.CPU)/1024, float64(s.Memory)/1024); err != nil || got != s {
			t.Errorf("roundSize(%v) = %v, %v", s, got, err)
		}
	}
}

func TestMemberSizes(t *testing.T) {
	tests := []struct {
		name  string
		spec  providers.ClusterSpec
		sched taskSize
		work  taskSize
	}{
		{"defaults", providers.ClusterSpec{}, taskSize{1024, 2048}, taskSize{1024, 2048}},
		{"threads and memory limit", providers.ClusterSpec{WorkerThreads: 4, WorkerMemory: 6 << 30}, taskSize{1024, 2048}, taskSize{4096, 8192}},
		{"admitted machines", providers.ClusterSpec{Scheduler: providers.Machine{VCPUs: 2, MemoryGiB: 8}, Worker: providers.Machine{VCPUs: 4, MemoryGiB: 16}},
			taskSize{2048, 8192}, taskSize{4096, 16384}},
		{"memory limit above the machine", providers.ClusterSpec{WorkerMemory: 10 << 30, Worker: providers.Machine{VCPUs: 1, MemoryGiB: 2}},
			taskSize{1024, 2048}, taskSize{2048, 10240}},
	}
	for _, tc := range tests {
		s, err := schedulerSize(tc.spec)
		w, err2 := workerSize(tc.spec)
		if err != nil || err2 != nil || s != tc.sched || w != tc.work {
			t.Errorf("%s: scheduler %v (%v), worker %v (%v); want %v, %v", tc.name, s, err, w, err2, tc.sched, tc.work)
		}
	}
}

// TestBackoff: full jitter stays within the exponentially growing window,
// capped at MaxDelay, and varies.
func TestBackoff(t *testing.T) {
	p, err := New(Config{
		Region: "us-east-1", Cluster: "c", Subnets: []string{"subnet-1"}, GatewayCIDRs: []string{"10.0.0.0/8"},
		ExecutionRoleArn: "arn:aws:iam::123456789012:role/x", GatewayID: "g",
		Credentials: credentials.NewStaticCredentialsProvider("AKID", "secret", ""), Endpoints: Endpoints{ECS: "http://127.0.0.1:1", SecretsManager: "http://127.0.0.1:1", EC2: "http://127.0.0.1:1"},
		Retry: Retry{BaseDelay: 100 * time.Millisecond, MaxDelay: time.Second},
	})
	if err != nil {
		t.Fatal(err)
	}
	for attempt := 1; attempt <= 70; attempt++ {
		window := min(100*time.Millisecond<<min(attempt-1, 20), time.Second)
		seen := map[time.Duration]bool{}
		for range 200 {
			d := p.retry().Backoff(attempt)
			if d < 0 || d > window {
				t.Fatalf("attempt %d: wait %s outside [0, %s]", attempt, d, window)
			}
			seen[d] = true
		}
		if len(seen) < 50 {
			t.Errorf("attempt %d: only %d distinct waits: no jitter?", attempt, len(seen))
		}
	}
}

func TestNames(t *testing.T) {
	if got := startedBy("0123456789abcdef"); got != "gateway-0123456789abcdef" {
		t.Errorf("startedBy = %q", got)
	}
	long := strings.Repeat("c", 40)
	if got := startedBy(long); len(got) != 36 || !strings.HasPrefix(got, "gateway-") || got == startedBy(long+"d") {
		t.Errorf("startedBy(long) = %q", got)
	}
	for name, ok := range map[string]bool{"0123456789abcdef": true, "worker-12": true, "a_b": true, "": false, "-a": false, "a/b": false, "a b": false, strings.Repeat("a", 65): false} {
		if validName(name) != ok {
			t.Errorf("validName(%q) = %v", name, !ok)
		}
	}
	if got := tagValue("Ann O'Neil <ann@example.com>"); got != "Ann O_Neil _ann@example.com_" {
		t.Errorf("tagValue = %q", got)
	}
	p := &Provider{gwKey: "abcd1234"}
	for family, ok := range map[string]bool{
		"gateway-abcd1234-c1-0123456789ab":     true,
		"gateway-abcd1234-c1-x-0123456789ab":   false, // cluster "c1-x"
		"gateway-abcd1234-c1-0123456789abc":    false,
		"gateway-abcd1234-c1-0123456789aZ":     false,
		"gateway-ffff1234-c1-0123456789ab":     false,
		"gateway-abcd1234-c1-0123456789ab:1":   false,
		"gateway-abcd1234-c10-0123456789ab":    false,
		"gateway-abcd1234-c1-0123456789ab-abc": false,
	} {
		if p.ownFamily(family, "c1") != ok {
			t.Errorf("ownFamily(%q, c1) = %v", family, !ok)
		}
	}
}

func TestSleepCtx(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	testutil.Returns(t, "an hour's backoff.Sleep on a cancelled context", func() {
		if err := backoff.Sleep(ctx, time.Hour); !errors.Is(err, context.Canceled) {
			t.Errorf("backoff.Sleep on a cancelled context = %v", err)
		}
	})
	if err := backoff.Sleep(context.Background(), time.Millisecond); err != nil {
		t.Errorf("backoff.Sleep = %v", err)
	}
	if (&Provider{}).Name() != "fargate" {
		t.Errorf("Name() is not fargate")
	}
}

// TestSecretNameMatchesTerraform: the Terraform module scopes the Dask
// execution role to gateway/<substr(sha256(gateway_id), 0, 8)>/*; the
// secrets' names must start so.
func TestSecretNameMatchesTerraform(t *testing.T) {
	const id = "prod-gateway"
	sum := sha256.Sum256([]byte(id))
	p, err := New(Config{
		Region: "us-east-1", Cluster: "c", Subnets: []string{"subnet-1"}, GatewaySecurityGroup: "sg-0123456789abcdef0",
		ExecutionRoleArn: "arn:aws:iam::123456789012:role/x", GatewayID: id,
		Credentials: credentials.NewStaticCredentialsProvider("AKID", "secret", ""), Endpoints: Endpoints{ECS: "http://127.0.0.1:1", SecretsManager: "http://127.0.0.1:1", EC2: "http://127.0.0.1:1"},
	})
	if err != nil {
		t.Fatal(err)
	}
	want := "gateway/" + hex.EncodeToString(sum[:])[:8] + "/"
	if got := p.secretName("c1"); !strings.HasPrefix(got, want) || got != want+"c1/tls" {
		t.Errorf("secretName = %q; want %sc1/tls", got, want)
	}
}
