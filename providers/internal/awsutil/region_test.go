package awsutil

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// sharedConfig is a shared config file with a region for the default
// profile and another for the profile "team".
const sharedConfig = "[default]\nregion = ap-south-1\n\n[profile team]\nregion = ca-central-1\n"

// regionEnv sets the AWS SDK's region settings for one test, all others
// cleared: env holds AWS_* variables, and config, when set, is the shared
// config file's text. Nothing is read from the machine's own settings and
// instance metadata is off, so that Region reads no network.
func regionEnv(t *testing.T, env map[string]string, config string) {
	t.Helper()
	for _, k := range []string{"AWS_REGION", "AWS_DEFAULT_REGION", "AWS_PROFILE", "AWS_DEFAULT_PROFILE"} {
		t.Setenv(k, "")
	}
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", os.DevNull)
	file := os.DevNull
	if config != "" {
		file = filepath.Join(t.TempDir(), "config")
		if err := os.WriteFile(file, []byte(config), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("AWS_CONFIG_FILE", file)
	for k, v := range env {
		t.Setenv(k, v)
	}
}

// TestRegion: the configured region wins over the SDK's settings; without
// it the SDK's order holds (AWS_REGION, AWS_DEFAULT_REGION, the profile's
// region in the shared config file); with none of them the error names
// the key and the environment variable.
func TestRegion(t *testing.T) {
	const key = "providers.toy.region"
	tests := []struct {
		name       string
		configured string
		env        map[string]string
		config     string
		want       string
		wantErr    []string // each in the error; nil: no error
		noRegion   bool     // the error is ErrNoRegion
	}{
		{name: "the key wins over the environment and the profile", configured: "eu-north-1",
			env: map[string]string{"AWS_REGION": "eu-west-3", "AWS_DEFAULT_REGION": "us-west-2"}, config: sharedConfig, want: "eu-north-1"},
		{name: "the key alone", configured: "eu-north-1", want: "eu-north-1"},
		{name: "AWS_REGION when the key is unset", env: map[string]string{"AWS_REGION": "eu-west-3", "AWS_DEFAULT_REGION": "us-west-2"},
			config: sharedConfig, want: "eu-west-3"},
		{name: "AWS_DEFAULT_REGION", env: map[string]string{"AWS_DEFAULT_REGION": "us-west-2"}, config: sharedConfig, want: "us-west-2"},
		{name: "the default profile's region", config: sharedConfig, want: "ap-south-1"},
		{name: "AWS_PROFILE's region", env: map[string]string{"AWS_PROFILE": "team"}, config: sharedConfig, want: "ca-central-1"},
		{name: "neither the key nor the SDK's settings", config: "[default]\noutput = json\n",
			wantErr: []string{key, "AWS_REGION", "is not set"}, noRegion: true},
		{name: "nothing at all", wantErr: []string{key, "AWS_REGION"}, noRegion: true},
		{name: "a profile that is not there", env: map[string]string{"AWS_PROFILE": "nobody"}, config: sharedConfig,
			wantErr: []string{key, "nobody"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			regionEnv(t, tc.env, tc.config)
			got, err := Region(context.Background(), tc.configured, key)
			if tc.wantErr == nil {
				if err != nil || got != tc.want {
					t.Fatalf("Region = %q, %v; want %q", got, err, tc.want)
				}
				if r := ResolvedRegion(tc.configured, key); r != tc.want {
					t.Errorf("ResolvedRegion = %q; want %q", r, tc.want)
				}
				if p := RegionProblems(tc.configured, key); p != nil {
					t.Errorf("RegionProblems = %q; want none", p)
				}
				return
			}
			if err == nil {
				t.Fatalf("Region = %q; want an error", got)
			}
			t.Logf("error: %v", err)
			for _, w := range tc.wantErr {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
			if errors.Is(err, ErrNoRegion) != tc.noRegion {
				t.Errorf("errors.Is(%v, ErrNoRegion) = %v; want %v", err, !tc.noRegion, tc.noRegion)
			}
			if p := RegionProblems(tc.configured, key); len(p) != 1 || p[0] != err.Error() {
				t.Errorf("RegionProblems = %q; want the error", p)
			}
			if r := ResolvedRegion(tc.configured, key); r != "" {
				t.Errorf("ResolvedRegion = %q; want none", r)
			}
		})
	}
}
