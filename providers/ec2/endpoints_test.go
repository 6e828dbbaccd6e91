package ec2

import (
	"context"
	"path/filepath"
	"testing"
)

// TestStandardEndpointSettings: with no endpoint keys configured, the EC2
// and SSM clients send their requests where the SDK's standard settings
// say (AWS_ENDPOINT_URL_EC2, AWS_ENDPOINT_URL_SSM), here the loopback
// fakes. The clients dial loopback only (loopbackOnly), so a request sent
// anywhere else fails at once without leaving the machine.
func TestStandardEndpointSettings(t *testing.T) {
	// No file of the machine running the tests may steer the clients.
	t.Setenv("AWS_CONFIG_FILE", filepath.Join(t.TempDir(), "none"))
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", filepath.Join(t.TempDir(), "none"))
	t.Setenv("AWS_ACCESS_KEY_ID", "AKIDTEST")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "secret")
	var ec2URL, ssmURL string
	e := newEnv(t, func(c *Config) {
		ec2URL, ssmURL = c.EC2Endpoint, c.SSMEndpoint
		t.Setenv("AWS_ENDPOINT_URL_EC2", ec2URL)
		t.Setenv("AWS_ENDPOINT_URL_SSM", ssmURL)
		// The default chain, as a gateway runs: explicit credentials
		// would keep the environment out.
		c.Credentials = nil
		c.EC2Endpoint, c.SSMEndpoint = "", ""
	})
	if err := e.p.Check(context.Background()); err != nil {
		t.Fatalf("Check: %v", err)
	}
	if len(e.ec2.Requests("")) == 0 {
		t.Errorf("no request reached %s, the EC2 endpoint AWS_ENDPOINT_URL_EC2 names", ec2URL)
	}
	if len(e.ssm.Requests("")) == 0 {
		t.Errorf("no request reached %s, the SSM endpoint AWS_ENDPOINT_URL_SSM names", ssmURL)
	}
}
