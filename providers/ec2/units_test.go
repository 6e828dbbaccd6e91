package ec2

import (
	"context"
	"errors"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"github.com/gatewayhq/gateway/internal/backoff"
	"github.com/gatewayhq/gateway/providers"
)

func TestStopReasons(t *testing.T) {
	in := func(state types.InstanceStateName, code, msg, transition string) types.Instance {
		i := types.Instance{InstanceId: aws.String("i-1"), State: &types.InstanceState{Name: state}, StateTransitionReason: aws.String(transition)}
		if code != "" {
			i.StateReason = &types.StateReason{Code: aws.String(code), Message: aws.String(msg)}
		}
		return i
	}
	for _, tc := range []struct {
		in   types.Instance
		want string
	}{
		{in("terminated", "Server.SpotInstanceTermination", "", ""), "spot interruption: AWS reclaimed spot instance i-1"},
		{in("terminated", "Client.InstanceInitiatedShutdown", "", ""), "shut itself down: the Dask worker exited or its set-up failed"},
		{in("terminated", "Server.InternalError", "Server.InternalError: Internal error on launch", ""), "instance i-1 is terminated: Server.InternalError: Internal error on launch"},
		{in("stopped", "", "", "User initiated (2026-01-02 03:04:05 GMT)"), "instance i-1 is stopped: User initiated"},
		{in("stopping", "", "", ""), "instance i-1 is stopping"},
	} {
		if got := stopReason(tc.in, providers.RoleWorker); !strings.Contains(got, tc.want) {
			t.Errorf("stopReason = %q, want it to contain %q", got, tc.want)
		}
	}
	at := transitionTime("User initiated (2026-01-02 03:04:05 GMT)", time.Time{})
	if want := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC); !at.Equal(want) {
		t.Errorf("transitionTime = %v, want %v", at, want)
	}
	def := time.Unix(1, 0)
	for _, r := range []string{"", "User initiated", "x (not a time)"} {
		if got := transitionTime(r, def); !got.Equal(def) {
			t.Errorf("transitionTime(%q) = %v", r, got)
		}
	}
}

func TestQuotaNames(t *testing.T) {
	for _, tc := range []struct {
		instanceType string
		spot         bool
		want         string
	}{
		{"c7g.large", false, "L-1216C47A"},
		{"t3.medium", false, "L-1216C47A"},
		{"r7iz.large", false, "L-1216C47A"},
		{"g6e.xlarge", false, "L-DB2E81BA"},
		{"vt1.3xlarge", false, "L-DB2E81BA"},
		{"p5.48xlarge", false, "L-417A185B"},
		{"f2.12xlarge", false, "L-74FC7D96"},
		{"x2idn.16xlarge", false, "L-7295265B"},
		{"inf2.xlarge", false, "L-1945791B"},
		{"trn1.2xlarge", false, "Running On-Demand Trn instances"},
		{"dl1.24xlarge", false, "Running On-Demand DL instances"},
		{"hpc7g.4xlarge", false, "Running On-Demand HPC instances"},
		{"u-6tb1.metal", false, "High Memory"},
		{"m6i.large", true, "L-34B43A08"},
		{"g5.xlarge", true, "L-3819A6DF"},
		{"p4d.24xlarge", true, "L-7212CCBC"},
		{"x2gd.large", true, "spot instance requests quota of the x2gd family"},
	} {
		if got := vcpuQuota(tc.instanceType, tc.spot).String(); !strings.Contains(got, tc.want) {
			t.Errorf("vcpuQuota(%s, spot=%v) = %q, want %q", tc.instanceType, tc.spot, got, tc.want)
		}
	}
}

func TestDialProbe(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	if err := dialProbe(context.Background(), addr); err != nil {
		t.Errorf("probe of a listener: %v", err)
	}
	l.Close()
	if err := dialProbe(context.Background(), addr); err == nil {
		t.Error("probe of a closed port succeeded")
	}
}

func TestSleepCtx(t *testing.T) {
	if err := backoff.Sleep(context.Background(), time.Millisecond); err != nil {
		t.Error(err)
	}
	c, cancel := context.WithCancel(context.Background())
	cancel()
	if err := backoff.Sleep(c, time.Hour); !errors.Is(err, context.Canceled) {
		t.Errorf("sleepCtx on a canceled context: %v", err)
	}
	if err := backoff.Sleep(c, 0); !errors.Is(err, context.Canceled) {
		t.Errorf("backoff.Sleep(0) on a canceled context: %v", err)
	}
}

func TestDefaultCredentialsPath(t *testing.T) {
	// Without explicit credentials the SDK's default chain is set up (and
	// not called: New makes no request). Region and retries stay ours.
	t.Setenv("AWS_CONFIG_FILE", t.TempDir()+"/none")
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", t.TempDir()+"/none")
	cfg := validConfig()
	cfg.Credentials = nil
	sent := &sentClient{}
	cfg.HTTPClient = sent
	c, err := awsConfig(context.Background(), cfg.withDefaults())
	if err != nil {
		t.Fatal(err)
	}
	if c.Region != "us-east-1" || c.Retryer == nil {
		t.Errorf("config = region %q", c.Region)
	}
	// Requests go through the configured client (wrapped: sdkhttp).
	req, _ := http.NewRequest(http.MethodPost, "http://127.0.0.1:1/", strings.NewReader("Action=DescribeInstances"))
	if _, err := c.HTTPClient.Do(req); err != nil || sent.n != 1 {
		t.Errorf("a request through the configuration's client: %v, %d reached the configured one", err, sent.n)
	}
	if _, ok := c.Retryer().(aws.NopRetryer); !ok {
		t.Error("the SDK's own retries are on")
	}
}

func TestLoopbackOnly(t *testing.T) {
	req, _ := http.NewRequest(http.MethodGet, "https://ec2.eu-west-1.amazonaws.com/", nil)
	if _, err := (loopbackOnly{}).Do(req); err == nil || !strings.Contains(err.Error(), "refused") {
		t.Errorf("a request to AWS was let through: %v", err)
	}
}

// sentClient counts the requests it is given and answers each 200.
type sentClient struct{ n int }

func (c *sentClient) Do(r *http.Request) (*http.Response, error) {
	c.n++
	return &http.Response{StatusCode: http.StatusOK, Header: http.Header{}, Body: http.NoBody, Request: r}, nil
}
