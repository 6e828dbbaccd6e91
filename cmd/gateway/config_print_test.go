package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

// TestConfigPrintRedacts: `gateway config print` shows neither the
// credentials of a package index URL nor a password given in the query of
// database.url (issue 14, finding 6), and still shows the rest of them.
func TestConfigPrintRedacts(t *testing.T) {
	t.Setenv("GATEWAY_CONFIG", "")
	t.Setenv("GATEWAY_AUTH_OIDC_ISSUER", "https://idp.example/realms/team")
	t.Setenv("GATEWAY_PROVIDERS_LOCAL_TRUST_USERS", "true")
	t.Setenv("GATEWAY_IMAGES_PIP_INDEX_URL", "https://builder:pip-s3cret@pypi.corp.example/simple/")
	t.Setenv("GATEWAY_DATABASE_URL", "postgres://gateway@db.corp.example:5432/gateway?sslmode=verify-full&password=db-s3cret")
	t.Setenv("GATEWAY_PROVIDERS_EC2_EC2_ENDPOINT", "https://ec2.example/?X-Amz-Signature=sig-s3cret&Action=x")
	root := newRootCmd()
	var out, errOut bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&errOut)
	root.SetArgs([]string{"config", "print", "--data-dir", t.TempDir()})
	if err := root.ExecuteContext(context.Background()); err != nil {
		t.Fatalf("config print: %v\n%s", err, errOut.String())
	}
	got := out.String()
	for _, secret := range []string{"pip-s3cret", "db-s3cret", "sig-s3cret"} {
		if strings.Contains(got, secret) {
			t.Errorf("config print shows %q:\n%s", secret, got)
		}
	}
	for _, want := range []string{
		"pip_index_url: https://builder:REDACTED@pypi.corp.example/simple/",
		"url: postgres://db.corp.example:5432/REDACTED",
		"issuer: https://idp.example/realms/team",
		"Action=x",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("config print lacks %q:\n%s", want, got)
		}
	}
}
