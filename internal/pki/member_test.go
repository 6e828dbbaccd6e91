package pki

import (
	"testing"
	"time"
)

func TestMemberTLS(t *testing.T) {
	a, err := ClusterCert("a", time.Hour, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := MemberTLS(a.CertPEM)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.InsecureSkipVerify || cfg.RootCAs == nil || cfg.ServerName != DaskInternalName {
		t.Fatalf("config %+v does not verify against the cluster certificate", cfg)
	}
	for _, bad := range [][]byte{nil, []byte("not PEM")} {
		if _, err := MemberTLS(bad); err == nil {
			t.Errorf("MemberTLS(%q) succeeded", bad)
		}
	}
}
