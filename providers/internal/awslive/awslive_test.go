package awslive

import (
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
)

// TestIsolateAndRestore: Isolate hides every AWS setting of the machine
// (endpoint, credentials, profile, shared files) and turns metadata off;
// Restore gives them back for one test only.
func TestIsolateAndRestore(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		t.Errorf("the hermetic set-up sent %s %s", r.Method, r.URL)
	}))
	defer srv.Close()
	dir := t.TempDir()
	conf := filepath.Join(dir, "config")
	if err := os.WriteFile(conf, []byte("[profile emu]\nregion = ap-south-1\nendpoint_url = "+srv.URL+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	operator := map[string]string{"AWS_ENDPOINT_URL": srv.URL, "AWS_ENDPOINT_URL_ECS": srv.URL, "AWS_PROFILE": "emu", "AWS_CONFIG_FILE": conf,
		"AWS_ACCESS_KEY_ID": "AKIDOPERATOR", "AWS_SECRET_ACCESS_KEY": "s", "AWS_REGION": "eu-west-3"}
	for k, v := range operator {
		t.Setenv(k, v) // undone when the test ends, whatever Isolate does
	}
	t.Setenv("AWS_EC2_METADATA_DISABLED", "")
	os.Unsetenv("AWS_EC2_METADATA_DISABLED")

	env := Isolate()
	for k, v := range operator {
		if got, ok := os.LookupEnv(k); ok && k != "AWS_CONFIG_FILE" {
			t.Errorf("after Isolate %s=%q, want it unset", k, got)
		}
		if env[k] != v {
			t.Errorf("Isolate kept %s=%q, want %q", k, env[k], v)
		}
	}
	if v := os.Getenv("AWS_EC2_METADATA_DISABLED"); v != "true" {
		t.Errorf("after Isolate AWS_EC2_METADATA_DISABLED=%q, want true", v)
	}
	for _, k := range []string{"AWS_CONFIG_FILE", "AWS_SHARED_CREDENTIALS_FILE"} {
		if v := os.Getenv(k); v != os.DevNull {
			t.Errorf("after Isolate %s=%q, want %s: no developer's shared files", k, v, os.DevNull)
		}
	}
	cfg, err := Load(t.Context(), "eu-west-1")
	if err != nil {
		t.Fatal(err)
	}
	eps, err := Endpoints(t.Context(), cfg, "ec2", "ssm", "ecs", "secretsmanager")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range eps {
		if e.Configured {
			t.Errorf("isolated: %s endpoint %s is configured, want AWS's default", e.Service, e.URL)
		}
	}

	t.Run("restored", func(t *testing.T) {
		env.Restore(t)
		if v, ok := os.LookupEnv("AWS_EC2_METADATA_DISABLED"); ok {
			t.Errorf("restored: AWS_EC2_METADATA_DISABLED=%q, the operator had it unset", v)
		}
		cfg, err := Load(t.Context(), "")
		if err != nil {
			t.Fatal(err)
		}
		if cfg.Region != "eu-west-3" {
			t.Errorf("restored: region %q, want eu-west-3 (AWS_REGION)", cfg.Region)
		}
		eps, err := Endpoints(t.Context(), cfg, "ec2", "ecs")
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range eps {
			if !e.Configured || e.URL != srv.URL {
				t.Errorf("restored: %s endpoint %+v, want the configured %s", e.Service, e, srv.URL)
			}
		}
	})
	if _, ok := os.LookupEnv("AWS_ENDPOINT_URL"); ok {
		t.Error("the restore outlived its test")
	}
	if v := os.Getenv("AWS_EC2_METADATA_DISABLED"); v != "true" {
		t.Errorf("after the restored test AWS_EC2_METADATA_DISABLED=%q, want true", v)
	}
}
