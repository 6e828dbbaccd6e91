package integration

import (
	"crypto/tls"
	"crypto/x509"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestServeTLS: `gateway serve` outside dev: HTTPS by default (self-signed
// when no certificate is configured), plain HTTP refused, an external OIDC
// issuer (here the dev gateway's), and Dask traffic by SNI on the same port.
func TestServeTLS(t *testing.T) {
	t.Parallel()
	idp := newEnv(t)
	idp.startGateway()
	issuer := idp.devIssuer()
	dataDir := filepath.Join(t.TempDir(), "serve")

	// Refused without acknowledging that local clusters are not isolated.
	noIssuer := exec.Command(idp.bin, "serve", "--listen", "127.0.0.1:0", "--data-dir", dataDir)
	noIssuer.Env = filterEnv(os.Environ())
	out, err := noIssuer.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "auth.oidc.issuer") {
		t.Fatalf("serve without an issuer: %v %s", err, out)
	}
	cmd := exec.Command(idp.bin, "serve", "--listen", "127.0.0.1:0", "--data-dir", dataDir)
	cmd.Env = append(filterEnv(os.Environ()), "GATEWAY_AUTH_OIDC_ISSUER="+issuer)
	if out, err := cmd.CombinedOutput(); err == nil || !strings.Contains(string(out), "providers.local.trust_users") {
		t.Fatalf("serve with the local provider for untrusted users: %v %s", err, out)
	}

	url, log := startServe(t, idp.bin, dataDir, issuer)
	caFile := filepath.Join(dataDir, "gateway-tls.crt")
	pem, err := os.ReadFile(caFile)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(pem)
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	resp, err := hc.Get(url + "/api/health")
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("HTTPS health: %v %v", resp, err)
	}
	resp.Body.Close()
	plain := "http" + strings.TrimPrefix(url, "https")
	if resp, err := http.Get(plain + "/api/health"); err == nil {
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest {
			t.Errorf("plain HTTP on a TLS gateway: %d, want 400", resp.StatusCode)
		}
	}

	// The dev user, logged in at the issuer, uses the TLS gateway.
	user := &env{t: t, bin: idp.bin, home: t.TempDir(), gwLog: log, url: url}
	user.vars = append(filterEnv(os.Environ()), "HOME="+user.home, "XDG_CONFIG_HOME="+filepath.Join(user.home, "config"),
		"GATEWAY_URL="+url, "GATEWAY_CA_FILE="+caFile, "GATEWAY_TOKEN="+strings.TrimSpace(idp.gwOK("print-token")))
	var who map[string]any
	user.gwJSON(&who, "whoami")
	if who["name"] != "dev" {
		t.Fatalf("whoami over HTTPS: %v", who)
	}
	var c cluster
	user.gwJSON(&c, "new-cluster", "--workers", "1")
	if !strings.HasPrefix(c.DashboardURL, "https://") || c.SchedulerAddress != "tls://"+strings.TrimPrefix(url, "https://") {
		t.Errorf("addresses of a TLS gateway: %s %s", c.DashboardURL, c.SchedulerAddress)
	}
	out2, err := user.runPython(c.Python + "\nprint('sum', client.submit(sum, range(100)).result())\n")
	if err != nil || !strings.Contains(out2, "sum 4950") {
		t.Fatalf("Dask through the TLS gateway's port: %v\n%s", err, out2)
	}
	user.gwOK("stop", c.Name)
	waitNoMembers(t, c.Name)
}
