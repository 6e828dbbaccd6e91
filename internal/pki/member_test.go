package pki

import (
	"errors"
	"testing"
	"time"
)

func TestMemberTLS(t *testing.T) {
	a, err := ClusterCert("a", time.Hour, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := MemberTLS(a.CertPEM, nil)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.InsecureSkipVerify || cfg.RootCAs == nil || cfg.ServerName != DaskInternalName {
		t.Fatalf("config %+v does not verify against the cluster certificate", cfg)
	}
	for _, bad := range [][]byte{nil, []byte("not PEM")} {
		if _, err := MemberTLS(bad, nil); err == nil {
			t.Errorf("MemberTLS(%q) succeeded", bad)
		}
	}
	if len(cfg.Certificates) != 0 {
		t.Errorf("without the key, the config presents %d certificates", len(cfg.Certificates))
	}
	// With the cluster's key, the gateway presents the cluster's
	// certificate: members' dashboards require it.
	withKey, err := MemberTLS(a.CertPEM, a.KeyPEM)
	if err != nil {
		t.Fatal(err)
	}
	if len(withKey.Certificates) != 1 || withKey.RootCAs == nil {
		t.Fatalf("with the key: %d certificates, roots %v; want the cluster's, verifying", len(withKey.Certificates), withKey.RootCAs)
	}
	b, err := ClusterCert("b", time.Hour, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := MemberTLS(a.CertPEM, b.KeyPEM); !errors.Is(err, ErrBadClusterKey) {
		t.Errorf("another cluster's key: %v, want ErrBadClusterKey", err)
	}
}
