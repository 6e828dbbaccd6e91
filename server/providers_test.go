package server

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/gatewayhq/gateway/internal/config"
)

// TestNewProviderErrorsSayWhere: a cloud backend's configuration problems
// come with the keys to fix them, and nothing is contacted to find them.
func TestNewProviderErrorsSayWhere(t *testing.T) {
	for _, tt := range []struct{ provider, want string }{
		{"ec2", "subnets is empty"},
		{"fargate", "execution_role_arn"},
		{"gce", "project is empty"},
	} {
		t.Run(tt.provider, func(t *testing.T) {
			// A region from the SDK's settings passes the configuration
			// check (TestAWSRegionFromSDKSettings has the one without).
			t.Setenv("AWS_REGION", "us-east-1")
			t.Setenv("AWS_CONFIG_FILE", os.DevNull)
			v := ConfigSchema().New()
			v.Set("dev", true)
			v.Set("provider", tt.provider)
			cfg, err := ConfigSchema().Load(v, "")
			if err != nil {
				t.Fatal(err)
			}
			t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
			b, err := backend(Backends(), tt.provider)
			if err != nil {
				t.Fatal(err)
			}
			_, err = newProvider(context.Background(), b, cfg, "gw-test", nil, nil)
			if err == nil || !strings.Contains(err.Error(), "providers."+tt.provider+".* (or GATEWAY_PROVIDERS_"+strings.ToUpper(tt.provider)+"_*)") ||
				!strings.Contains(err.Error(), tt.want) {
				t.Errorf("newProvider(%s) = %v; want the keys' prefix and %q", tt.provider, err, tt.want)
			}
		})
	}
	for _, tt := range []struct {
		provider string
		set      time.Duration
		want     time.Duration
	}{{"local", 0, time.Minute}, {"ec2", 0, 10 * time.Minute}, {"gce", 30 * time.Second, 30 * time.Second}} {
		b, err := backend(Backends(), tt.provider)
		if err != nil {
			t.Fatal(err)
		}
		cfg := &config.Config{Provider: tt.provider}
		cfg.Cluster.StartTimeout = tt.set
		if got := startTimeout(b, cfg); got != tt.want {
			t.Errorf("startTimeout(%s, %s) = %s, want %s", tt.provider, tt.set, got, tt.want)
		}
	}
}
