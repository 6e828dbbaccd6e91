// Package awslive separates the two AWS set-ups of the backends' tests.
//
// The hermetic tests (every test run by default) must reach nothing but
// their loopback fakes, so their TestMain calls Isolate: no AWS variable of
// the machine running them, and no instance metadata, can steer a client.
// The live contract tests (GATEWAY_LIVE_AWS=1) are the opposite: they must
// take the SDK's standard configuration exactly as an operator gave it —
// environment credentials, profiles, region, AWS_ENDPOINT_URL and
// AWS_ENDPOINT_URL_<SERVICE>, endpoint_url in the shared config — so that
// they run against the operator's account or an emulator. Restore gives a
// live test back what Isolate took away, for that test only, and
// Endpoints reports where each service's requests will go, to print
// before the first call.
package awslive

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ecs"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	"github.com/aws/aws-sdk-go-v2/service/ssm"

	"github.com/gatewayhq/gateway/internal/sdkhttp"
)

// Env is the operator's AWS settings as Isolate found them: every AWS_*
// variable that was set.
type Env map[string]string

// Isolate unsets every AWS_* variable of the process and turns instance
// metadata off, for the hermetic tests. It returns what it removed, for
// the live tests' Restore. Call it from TestMain, before any test runs.
func Isolate() Env {
	env := Env{}
	for _, kv := range os.Environ() {
		k, v, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(k, "AWS_") {
			env[k] = v
			os.Unsetenv(k)
		}
	}
	os.Setenv("AWS_EC2_METADATA_DISABLED", "true")
	// The SDK reads ~/.aws/config and ~/.aws/credentials unless told
	// otherwise: a developer's profile must not reach hermetic tests.
	os.Setenv("AWS_CONFIG_FILE", os.DevNull)
	os.Setenv("AWS_SHARED_CREDENTIALS_FILE", os.DevNull)
	return env
}

// Setenver is the part of testing.TB Restore needs; a test's Setenv undoes
// itself when the test ends.
type Setenver interface {
	Setenv(key, value string)
}

// Restore puts the environment's AWS variables back to e for the test t
// and its subtests: the ones Isolate set are cleared, the operator's are
// set again. When t ends the hermetic set-up is back.
func (e Env) Restore(t Setenver) {
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if _, keep := e[k]; strings.HasPrefix(k, "AWS_") && !keep {
			t.Setenv(k, "") // registers the restore at the end of t
			os.Unsetenv(k)
		}
	}
	for k, v := range e {
		t.Setenv(k, v)
	}
}

// Load reads the SDK's standard configuration, as the backends do when no
// credentials are given. region overrides the configured one when set.
func Load(ctx context.Context, region string) (aws.Config, error) {
	var opts []func(*config.LoadOptions) error
	if region != "" {
		opts = append(opts, config.WithRegion(region))
	}
	cfg, err := config.LoadDefaultConfig(ctx, opts...)
	if err != nil {
		return aws.Config{}, fmt.Errorf("load the AWS configuration: %w", err)
	}
	cfg.HTTPClient = sdkhttp.Client(cfg.HTTPClient)
	return cfg, nil
}

// Endpoint is where one service's requests go.
type Endpoint struct {
	Service string // ec2, ssm, ecs, secretsmanager
	URL     string
	// Configured is true when the URL comes from the configuration
	// (AWS_ENDPOINT_URL*, endpoint_url) rather than the SDK's default for
	// the region.
	Configured bool
}

// Endpoints resolves, without sending anything, where a client made from
// cfg sends each service's requests: the configured base endpoint the SDK
// picks up when it makes the client, else AWS's endpoint for the region.
func Endpoints(ctx context.Context, cfg aws.Config, services ...string) ([]Endpoint, error) {
	out := make([]Endpoint, 0, len(services))
	for _, s := range services {
		base, def, err := resolve(ctx, cfg, s)
		if err != nil {
			return nil, fmt.Errorf("resolve the %s endpoint: %w", s, err)
		}
		e := Endpoint{Service: s, URL: def}
		if base != nil {
			e.URL, e.Configured = *base, true
		}
		out = append(out, e)
	}
	return out, nil
}

func resolve(ctx context.Context, cfg aws.Config, service string) (base *string, def string, err error) {
	region := aws.String(cfg.Region)
	switch service {
	case "ec2":
		if b := ec2.NewFromConfig(cfg).Options().BaseEndpoint; b != nil {
			return b, "", nil
		}
		ep, err := ec2.NewDefaultEndpointResolverV2().ResolveEndpoint(ctx, ec2.EndpointParameters{Region: region}.WithDefaults())
		return nil, ep.URI.String(), err
	case "ssm":
		if b := ssm.NewFromConfig(cfg).Options().BaseEndpoint; b != nil {
			return b, "", nil
		}
		ep, err := ssm.NewDefaultEndpointResolverV2().ResolveEndpoint(ctx, ssm.EndpointParameters{Region: region}.WithDefaults())
		return nil, ep.URI.String(), err
	case "ecs":
		if b := ecs.NewFromConfig(cfg).Options().BaseEndpoint; b != nil {
			return b, "", nil
		}
		ep, err := ecs.NewDefaultEndpointResolverV2().ResolveEndpoint(ctx, ecs.EndpointParameters{Region: region}.WithDefaults())
		return nil, ep.URI.String(), err
	case "secretsmanager":
		if b := secretsmanager.NewFromConfig(cfg).Options().BaseEndpoint; b != nil {
			return b, "", nil
		}
		ep, err := secretsmanager.NewDefaultEndpointResolverV2().ResolveEndpoint(ctx, secretsmanager.EndpointParameters{Region: region}.WithDefaults())
		return nil, ep.URI.String(), err
	}
	return nil, "", fmt.Errorf("unknown service %q", service)
}

// Print writes one line per service naming its endpoint and where it came
// from, so that an operator sees where the test sends its calls before the
// first one.
func Print(w io.Writer, region string, eps []Endpoint) {
	for _, e := range eps {
		from := "AWS default for the region"
		if e.Configured {
			from = "configured (AWS_ENDPOINT_URL*, endpoint_url)"
		}
		fmt.Fprintf(w, "live AWS test: %s endpoint %s in %s (%s)\n", e.Service, e.URL, region, from)
	}
}

// Configured returns the configured URL of service, or "" when its
// requests go to AWS's default endpoint.
func Configured(eps []Endpoint, service string) string {
	for _, e := range eps {
		if e.Service == service && e.Configured {
			return e.URL
		}
	}
	return ""
}

// Setup is a live test's start: it loads the SDK's standard configuration
// (the region from the variable regionVar when set), requires a region,
// resolves where each of services sends its requests, and prints that to
// w before any call is made.
func Setup(ctx context.Context, w io.Writer, regionVar string, services ...string) (aws.Config, []Endpoint, error) {
	cfg, err := Load(ctx, os.Getenv(regionVar))
	if err != nil {
		return aws.Config{}, nil, err
	}
	if cfg.Region == "" {
		return aws.Config{}, nil, fmt.Errorf("no region: set %s, AWS_REGION or region in the shared config", regionVar)
	}
	eps, err := Endpoints(ctx, cfg, services...)
	if err != nil {
		return aws.Config{}, nil, err
	}
	Print(w, cfg.Region, eps)
	return cfg, eps, nil
}

// Logger is the part of testing.TB LogWriter needs.
type Logger interface {
	Log(args ...any)
}

// LogWriter is a writer that puts each line written into t's log.
func LogWriter(t Logger) io.Writer { return logWriter{t} }

type logWriter struct{ t Logger }

func (l logWriter) Write(p []byte) (int, error) {
	l.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// Errorer is the part of testing.TB CheckIsolated needs.
type Errorer interface {
	Helper()
	Errorf(format string, args ...any)
}

// CheckIsolated fails t unless the hermetic set-up Isolate makes is in
// place again after a live set-up's test: none of vars (AWS variables the
// live set-up had set) is left, instance metadata is off, and the shared
// files are os.DevNull.
func CheckIsolated(t Errorer, vars ...string) {
	t.Helper()
	for _, k := range vars {
		if v, ok := os.LookupEnv(k); ok {
			t.Errorf("after the live set-up's test, %s=%q is still set", k, v)
		}
	}
	if v := os.Getenv("AWS_EC2_METADATA_DISABLED"); v != "true" {
		t.Errorf("after the live set-up's test, AWS_EC2_METADATA_DISABLED=%q, want true", v)
	}
	for _, k := range []string{"AWS_CONFIG_FILE", "AWS_SHARED_CREDENTIALS_FILE"} {
		if v := os.Getenv(k); v != os.DevNull {
			t.Errorf("after the live set-up's test, %s=%q, want %s (no shared files)", k, v, os.DevNull)
		}
	}
}
