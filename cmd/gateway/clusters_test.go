package main

import (
	"math"
	"strings"
	"testing"
)

func TestParseMemory(t *testing.T) {
	cases := []struct {
		in   string
		want float64
		ok   bool
	}{
		{"2GiB", 2, true},
		{"2gib", 2, true},
		{" 1.5 G ", 1.5, true},
		{"512MiB", 0.5, true},
		{"1TiB", 1024, true},
		{"4", 4, true},
		{"1GB", 1e9 / (1 << 30), true},
		{"lots", 0, false},
		{"-1GiB", 0, false},
		{"0", 0, false},
		{"", 0, false},
	}
	for _, tc := range cases {
		got, err := parseMemory(tc.in)
		if (err == nil) != tc.ok || math.Abs(got-tc.want) > 1e-9 {
			t.Errorf("%q: got %v, %v; want %v ok=%v", tc.in, got, err, tc.want, tc.ok)
		}
	}
}

func TestPythonSnippetNamesTheCluster(t *testing.T) {
	s := pythonSnippet("tls://127.0.0.1:8000", "daskgateway-abc", "/c/tls.crt", "/c/tls.key")
	for _, want := range []string{`args["server_hostname"] = "daskgateway-abc"`, `Client("tls://127.0.0.1:8000", security=security)`, `tls_client_key="/c/tls.key"`} {
		if !strings.Contains(s, want) {
			t.Errorf("snippet lacks %q:\n%s", want, s)
		}
	}
}
