package server

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gatewayhq/gateway/internal/config"
	"github.com/gatewayhq/gateway/internal/crashpoint"
	"github.com/gatewayhq/gateway/internal/testdocker"
	"github.com/gatewayhq/gateway/providers"
	"github.com/gatewayhq/gateway/providers/ec2/ec2test"
	"github.com/gatewayhq/gateway/providers/fargate/fargatetest"
	"github.com/gatewayhq/gateway/providers/gce/gcetest"
)

// TestBackendsConstructed: the composition root makes every registered
// backend through its registration alone, from keys set in the
// environment (as the Terraform modules set them), and what it learns of
// the backend (region, default image, whether it runs images) comes from
// the configured section. The cloud backends talk to their wire fakes on
// loopback; local runs Debian's python3-distributed; docker the test
// engine.
func TestBackendsConstructed(t *testing.T) {
	type check struct {
		env                 func(t *testing.T) map[string]string
		region, image       string
		runsImages, engine  bool
		startTimeoutDefault time.Duration
		typicalStart        time.Duration // what benchmark estimates count
	}
	cases := map[string]check{
		"local": {
			env: func(*testing.T) map[string]string {
				return map[string]string{"GATEWAY_PROVIDERS_LOCAL_PYTHON": "/usr/bin/python3", "GATEWAY_PROVIDERS_LOCAL_TRUST_USERS": "true"}
			},
			startTimeoutDefault: time.Minute, typicalStart: 20 * time.Second,
		},
		"docker": {
			env: func(t *testing.T) map[string]string {
				testdocker.Pool(t)
				return map[string]string{"GATEWAY_PROVIDERS_DOCKER_IMAGE": "gateway-test/made-up:1", "GATEWAY_PROVIDERS_DOCKER_NETWORK": "host"}
			},
			image: "gateway-test/made-up:1", runsImages: true, engine: true, startTimeoutDefault: 10 * time.Minute, typicalStart: 30 * time.Second,
		},
		"ec2": {
			env: func(t *testing.T) map[string]string {
				env := awsBackendEnv(t, "ec2", "eu-west-1")
				env["GATEWAY_PROVIDERS_EC2_REGION"] = "eu-west-1"
				return env
			},
			region: "eu-west-1", image: "r.example/dask:1", runsImages: true, startTimeoutDefault: 10 * time.Minute, typicalStart: 3 * time.Minute,
		},
		"fargate": {
			env: func(t *testing.T) map[string]string {
				env := awsBackendEnv(t, "fargate", fargatetest.DefaultRegion)
				env["GATEWAY_PROVIDERS_FARGATE_REGION"] = fargatetest.DefaultRegion
				return env
			},
			region: fargatetest.DefaultRegion, image: "r.example/dask:2", runsImages: true, startTimeoutDefault: 10 * time.Minute, typicalStart: 2 * time.Minute,
		},
		"gce": {
			env: func(t *testing.T) map[string]string {
				srv := gcetest.New(t, gcetest.Options{})
				return map[string]string{
					"GATEWAY_PROVIDERS_GCE_PROJECT": srv.Project, "GATEWAY_PROVIDERS_GCE_ZONES": "us-central1-b,us-central1-a",
					"GATEWAY_PROVIDERS_GCE_GATEWAY_SERVICE_ACCOUNT": "gateway@test-project.iam.gserviceaccount.com",
					"GATEWAY_PROVIDERS_GCE_SERVICE_ACCOUNT":         "dask-workers@test-project.iam.gserviceaccount.com",
					"GATEWAY_PROVIDERS_GCE_CONTAINER_IMAGE":         "r.example/dask:3",
					"GATEWAY_PROVIDERS_GCE_ENDPOINT":                srv.URL, "GATEWAY_PROVIDERS_GCE_SECRETMANAGER_ENDPOINT": srv.URL,
				}
			},
			region: "us-central1-b", image: "r.example/dask:3", runsImages: true, startTimeoutDefault: 10 * time.Minute, typicalStart: 2 * time.Minute,
		},
	}
	var names []string
	for _, b := range Backends() {
		names = append(names, b.Name)
		want, ok := cases[b.Name]
		if !ok {
			t.Errorf("backend %s is registered but not constructed here: add its case", b.Name)
			continue
		}
		t.Run(b.Name, func(t *testing.T) {
			t.Setenv("GOOGLE_APPLICATION_CREDENTIALS", googleCredentials(t))
			cfg, err := loadWithBackend(t, b.Name, want.env(t))
			if err != nil {
				t.Fatal(err)
			}
			reg, err := backend(Backends(), cfg.Provider)
			if err != nil {
				t.Fatal(err)
			}
			ctx := t.Context()
			p, err := newProvider(ctx, reg, cfg, "gw-reg-test", nil, nil)
			if err != nil {
				t.Fatalf("newProvider(%s): %v", b.Name, err)
			}
			if c, ok := p.(providers.Closer); ok {
				t.Cleanup(func() { _ = c.Close(context.Background(), false) })
			}
			section := cfg.ProviderSection(b.Name)
			got := check{region: reg.Region(section), image: reg.DefaultImage(section), runsImages: reg.RunsImages, engine: reg.EngineImages,
				startTimeoutDefault: startTimeout(reg, cfg), typicalStart: TypicalStarts()[b.Name]}
			want.env = nil
			if !reflect.DeepEqual(got, want) {
				t.Errorf("registration of %s says %+v\nwant %+v", b.Name, got, want)
			}
			if p.Name() != b.Name {
				t.Errorf("the provider made for %s is named %s", b.Name, p.Name())
			}
			// Compute Engine's registration names the first zone, in the
			// provider's region.
			if r, ok := p.(providers.Regional); ok != (want.region != "") || ok && !strings.HasPrefix(want.region, r.Region()) {
				t.Errorf("the provider's Region (implemented %v) and the registration's %q differ", ok, want.region)
			}
		})
	}
	if want := []string{"local", "docker", "ec2", "fargate", "gce"}; !slices.Equal(names, want) {
		t.Errorf("backends %v, want %v (the order of the provider key's doc and of the crash points)", names, want)
	}
}

// googleCredentials writes made-up user credentials, which the Google
// clients accept without a request.
// loadWithBackend loads the configuration from the environment with
// provider name and the variables env. Unless env says otherwise, the AWS
// SDK finds made-up credentials and no region, and never asks instance
// metadata: every request goes to the fakes.
func loadWithBackend(t *testing.T, name string, env map[string]string) (*config.Config, error) {
	t.Helper()
	for k, v := range map[string]string{
		"AWS_ACCESS_KEY_ID": "AKIDEXAMPLETEST", "AWS_SECRET_ACCESS_KEY": "secret-for-the-fake",
		"AWS_EC2_METADATA_DISABLED": "true", "AWS_CONFIG_FILE": os.DevNull, "AWS_SHARED_CREDENTIALS_FILE": os.DevNull,
		"AWS_REGION": "", "AWS_DEFAULT_REGION": "", "AWS_PROFILE": "", "AWS_DEFAULT_PROFILE": "",
	} {
		t.Setenv(k, v)
	}
	t.Setenv("GATEWAY_AUTH_OIDC_ISSUER", "https://idp.example")
	t.Setenv("GATEWAY_PROVIDER", name)
	t.Setenv("GATEWAY_DATA_DIR", t.TempDir())
	for k, v := range env {
		t.Setenv(k, v)
	}
	schema := ConfigSchema()
	return schema.Load(schema.New(), "")
}

// awsBackendEnv configures the AWS backend name (ec2 or fargate) on its
// wire fakes (EC2's in region), every key but the region.
func awsBackendEnv(t *testing.T, name, region string) map[string]string {
	if name == "ec2" {
		return map[string]string{
			"GATEWAY_PROVIDERS_EC2_SUBNETS":       "subnet-0d000000000000005",
			"GATEWAY_PROVIDERS_EC2_GATEWAY_CIDRS": "192.0.2.0/24", "GATEWAY_PROVIDERS_EC2_INSTANCE_PROFILE": "gateway-members",
			"GATEWAY_PROVIDERS_EC2_IMAGE":        "r.example/dask:1",
			"GATEWAY_PROVIDERS_EC2_EC2_ENDPOINT": ec2test.NewEC2(t, region).URL, "GATEWAY_PROVIDERS_EC2_SSM_ENDPOINT": ec2test.NewSSM(t, region).URL,
		}
	}
	f := fargatetest.New(t)
	return map[string]string{
		"GATEWAY_PROVIDERS_FARGATE_CLUSTER": fargatetest.DefaultCluster,
		"GATEWAY_PROVIDERS_FARGATE_SUBNETS": "subnet-0d000000000000005", "GATEWAY_PROVIDERS_FARGATE_GATEWAY_CIDRS": "192.0.2.0/24",
		"GATEWAY_PROVIDERS_FARGATE_EXECUTION_ROLE_ARN": "arn:aws:iam::" + fargatetest.DefaultAccount + ":role/gateway-execution",
		"GATEWAY_PROVIDERS_FARGATE_IMAGE":              "r.example/dask:2",
		"GATEWAY_PROVIDERS_FARGATE_ECS_ENDPOINT":       f.ECS.URL, "GATEWAY_PROVIDERS_FARGATE_SECRETSMANAGER_ENDPOINT": f.SecretsManager.URL,
		"GATEWAY_PROVIDERS_FARGATE_EC2_ENDPOINT": f.EC2.URL, "GATEWAY_PROVIDERS_FARGATE_LOGS_ENDPOINT": f.Logs.URL,
	}
}

// TestAWSRegionFromSDKSettings: providers.ec2.region and
// providers.fargate.region are optional. Set, the key wins over the AWS
// SDK's settings; unset, the backend takes the region those give
// (AWS_REGION, then the profile's in the shared config file), reports it
// (providers.Regional, which quotas' allowed_regions are checked
// against, and its registration's region); with neither, the
// configuration check refuses it, and so does the backend made without
// that check, each naming the key and AWS_REGION.
func TestAWSRegionFromSDKSettings(t *testing.T) {
	cases := []struct {
		name              string
		key, env, profile string // providers.<name>.region, AWS_REGION, the default profile's region
		want              string // the region the backend runs in; "": refused
	}{
		{name: "the key wins over AWS_REGION and the profile", key: "eu-north-1", env: "eu-west-3", profile: "ap-south-1", want: "eu-north-1"},
		{name: "AWS_REGION when the key is unset", env: "eu-west-3", profile: "ap-south-1", want: "eu-west-3"},
		{name: "the profile's region", profile: "ap-south-1", want: "ap-south-1"},
		{name: "neither"},
	}
	for _, name := range []string{"ec2", "fargate"} {
		reg, err := backend(Backends(), name)
		if err != nil {
			t.Fatal(err)
		}
		key := "providers." + name + ".region"
		for _, tc := range cases {
			t.Run(name+"/"+tc.name, func(t *testing.T) {
				env := awsBackendEnv(t, name, "eu-west-1")
				if tc.key != "" {
					env[config.EnvName(key)] = tc.key
				}
				env["AWS_REGION"] = tc.env
				if tc.profile != "" {
					file := filepath.Join(t.TempDir(), "aws-config")
					if err := os.WriteFile(file, []byte("[default]\nregion = "+tc.profile+"\n"), 0o600); err != nil {
						t.Fatal(err)
					}
					env["AWS_CONFIG_FILE"] = file
				}
				cfg, err := loadWithBackend(t, name, env)
				if tc.want == "" {
					if err == nil || !strings.Contains(err.Error(), key) || !strings.Contains(err.Error(), "AWS_REGION") {
						t.Fatalf("configuration check: %v; want a refusal naming %s and AWS_REGION", err, key)
					}
					section := reg.Section.Defaults()
					if _, err := reg.New(t.Context(), section, providers.Deps{GatewayID: "gw-region"}); err == nil ||
						!strings.Contains(err.Error(), key) || !strings.Contains(err.Error(), "AWS_REGION") {
						t.Errorf("New without the check: %v; want a refusal naming %s and AWS_REGION", err, key)
					}
					if r := reg.Region(section); r != "" {
						t.Errorf("registration's region %q; want none", r)
					}
					return
				}
				if err != nil {
					t.Fatal(err)
				}
				p, err := newProvider(t.Context(), reg, cfg, "gw-region", nil, nil)
				if err != nil {
					t.Fatal(err)
				}
				r, ok := p.(providers.Regional)
				if !ok || r.Region() != tc.want {
					t.Errorf("the backend runs in %v (Regional %v); want %s", r, ok, tc.want)
				} else if got := reg.Region(cfg.ProviderSection(name)); got != tc.want {
					t.Errorf("registration's region %q; want %s", got, tc.want)
				}
			})
		}
	}
}

func googleCredentials(t *testing.T) string {
	p := filepath.Join(t.TempDir(), "adc.json")
	if err := os.WriteFile(p, []byte(`{"type":"authorized_user","client_id":"made-up","client_secret":"made-up","refresh_token":"made-up"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// toySection is a made-up backend's configuration.
type toySection struct {
	Region  string        `mapstructure:"region" doc:"where the toy plays"`
	Image   string        `mapstructure:"image" doc:"the toy's default image"`
	Slots   []string      `mapstructure:"slots" doc:"the toy's slots"`
	Size    int           `mapstructure:"size" doc:"how big the toy is"`
	Patient time.Duration `mapstructure:"patience" doc:"how long the toy waits"`
	Loud    bool          `mapstructure:"loud" doc:"whether the toy squeaks"`
}

// toy is a made-up backend: it records what it was made with.
type toy struct {
	providers.Provider
	section toySection
	deps    providers.Deps
}

func (t *toy) Name() string { return "toy" }

func toyRegistration() providers.Registration {
	return providers.Register(providers.Backend[toySection]{
		Name:     "toy",
		Defaults: func() *toySection { return &toySection{Size: 3, Patient: 90 * time.Second, Slots: []string{"a"}} },
		Problems: func(s *toySection, _ bool) []string {
			if s.Size > 10 {
				return []string{"providers.toy.size must be at most 10"}
			}
			return nil
		},
		New: func(_ context.Context, s *toySection, d providers.Deps) (providers.Provider, error) {
			if s.Image == "broken" {
				return nil, errors.New("image is broken")
			}
			return &toy{section: *s, deps: d}, nil
		},
		Region:       func(s *toySection) string { return s.Region },
		DefaultImage: func(s *toySection) string { return s.Image },
		StartTimeout: 42 * time.Second,
		CrashPoints:  []crashpoint.Name{"toy.cluster.started", "toy.cluster.stopped"},
	})
}

// TestMadeUpBackend: a backend registered in the list, and nowhere else,
// gets its keys (listed, documented, with their environment variables and
// defaults), is loaded from the file and the environment, validated,
// constructed with its section and the gateway's dependencies, and lists
// its crash points after the others'.
func TestMadeUpBackend(t *testing.T) {
	list := append(Backends(), toyRegistration())
	schema := schemaOf(list)

	keys := schema.Keys()
	docs := schema.Docs()
	for key, doc := range map[string]string{
		"providers.toy.region": "where the toy plays", "providers.toy.slots": "the toy's slots", "providers.toy.patience": "how long the toy waits",
		"provider": "backend for new clusters: local, docker, ec2, fargate, gce or toy",
	} {
		if !slices.Contains(keys, key) || docs[key] != doc {
			t.Errorf("key %s: listed %v, doc %q; want it listed with %q", key, slices.Contains(keys, key), docs[key], doc)
		}
	}
	if got := config.EnvName("providers.toy.patience"); got != "GATEWAY_PROVIDERS_TOY_PATIENCE" {
		t.Errorf("env name %s", got)
	}

	t.Setenv("GATEWAY_AUTH_OIDC_ISSUER", "https://idp.example")
	t.Setenv("GATEWAY_PROVIDER", "toy")
	t.Setenv("GATEWAY_PROVIDERS_TOY_REGION", "toyland-1")
	t.Setenv("GATEWAY_PROVIDERS_TOY_SLOTS", "x,y")
	dataDir := t.TempDir()
	file := filepath.Join(dataDir, "gateway.yaml")
	if err := os.WriteFile(file, []byte("data_dir: "+dataDir+"\nproviders:\n  toy:\n    region: file-region\n    image: r.example/toy:1\n    loud: true\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := schema.Load(schema.New(), file)
	if err != nil {
		t.Fatal(err)
	}
	reg, err := backend(list, cfg.Provider)
	if err != nil {
		t.Fatal(err)
	}
	p, err := newProvider(t.Context(), reg, cfg, "gw-toy", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	made := p.(*toy)
	want := toySection{Region: "toyland-1", Image: "r.example/toy:1", Slots: []string{"x", "y"}, Size: 3, Patient: 90 * time.Second, Loud: true}
	if !reflect.DeepEqual(made.section, want) {
		t.Errorf("toy made with %+v\nwant         %+v (defaults, file, environment over file)", made.section, want)
	}
	if made.deps.GatewayID != "gw-toy" || made.deps.DataDir != dataDir {
		t.Errorf("toy made with deps %+v", made.deps)
	}
	section := cfg.ProviderSection("toy")
	if reg.Region(section) != "toyland-1" || reg.DefaultImage(section) != "r.example/toy:1" || !reg.RunsImages || startTimeout(reg, cfg) != 42*time.Second {
		t.Errorf("registration: region %q, image %q, runs images %v, start timeout %s", reg.Region(section), reg.DefaultImage(section), reg.RunsImages, startTimeout(reg, cfg))
	}
	if got := crashPointsOf(list); !slices.Equal(got[len(got)-2:], []crashpoint.Name{"toy.cluster.started", "toy.cluster.stopped"}) || !slices.Equal(got[:len(got)-2], CrashPoints()) {
		t.Errorf("crash points with the toy: %v", got)
	}

	// The toy's own checks and errors reach the operator with where its
	// keys live.
	t.Setenv("GATEWAY_PROVIDERS_TOY_SIZE", "11")
	if _, err := schema.Load(schema.New(), file); err == nil || !strings.Contains(err.Error(), "providers.toy.size must be at most 10") {
		t.Errorf("size 11: %v; want the toy's problem", err)
	}
	t.Setenv("GATEWAY_PROVIDERS_TOY_SIZE", "3")
	t.Setenv("GATEWAY_PROVIDERS_TOY_IMAGE", "broken")
	if cfg, err = schema.Load(schema.New(), file); err != nil {
		t.Fatal(err)
	}
	if _, err := newProvider(t.Context(), reg, cfg, "gw-toy", nil, nil); err == nil || err.Error() != "providers.toy.* (or GATEWAY_PROVIDERS_TOY_*): image is broken" {
		t.Errorf("a failing toy: %v", err)
	}
	// Without the toy in the list, its keys are typos.
	plain := ConfigSchema()
	if _, err := plain.Load(plain.New(), file); err == nil || !strings.Contains(err.Error(), "unknown key(s) providers.toy.image, providers.toy.loud, providers.toy.region") {
		t.Errorf("the toy's keys without the toy: %v", err)
	}
}

// TestCrashPointsListed: the core's points, then each backend's in the
// list's order, each named after its backend; none twice.
func TestCrashPointsListed(t *testing.T) {
	all := CrashPoints()
	want := crashpoint.Core()
	for _, b := range Backends() {
		for _, p := range b.CrashPoints {
			if !strings.HasPrefix(string(p), b.Name+".") {
				t.Errorf("backend %s lists %s, not one of its own", b.Name, p)
			}
		}
		want = append(want, b.CrashPoints...)
	}
	if !slices.Equal(all, want) {
		t.Errorf("CrashPoints() = %v\nwant %v", all, want)
	}
	seen := map[crashpoint.Name]bool{}
	for _, p := range all {
		if seen[p] {
			t.Errorf("%s listed twice", p)
		}
		seen[p] = true
	}
	// What GATEWAY_CRASH_AT accepts: a backend's point, not a made-up one.
	if _, err := crashpoint.Parse("fargate.worker.run@2", all...); err != nil {
		t.Error(err)
	}
	if _, err := crashpoint.Parse("toy.cluster.started", all...); err == nil {
		t.Error("a point no backend lists is accepted")
	}
}
