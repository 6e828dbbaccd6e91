package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/gatewayhq/gateway/providers/catalog"
)

// TestInstanceTypesOutput: an unpriced type reads "unpriced" in the table,
// never "$0.000", and its JSON price_hour is null.
func TestInstanceTypesOutput(t *testing.T) {
	types := []catalog.InstanceType{
		{Name: "g4dn.xlarge", Cloud: catalog.CloudAWS, VCPUs: 4, MemoryGiB: 16, GPUs: 1, GPUType: "t4", PriceHour: 0.526},
		{Name: "new1.xlarge", Cloud: catalog.CloudAWS, VCPUs: 4, MemoryGiB: 16, Unpriced: true},
	}
	var b bytes.Buffer
	if err := printInstanceTypes(&b, types); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	if len(lines) != 3 {
		t.Fatalf("table:\n%s", b.String())
	}
	if f := strings.Fields(lines[1]); f[0] != "g4dn.xlarge" || f[len(f)-1] != "$0.526" || !strings.Contains(lines[1], "1 x t4") {
		t.Errorf("priced row %q", lines[1])
	}
	if f := strings.Fields(lines[2]); f[0] != "new1.xlarge" || f[len(f)-1] != "unpriced" || strings.Contains(lines[2], "$") {
		t.Errorf("unpriced row %q; want it marked unpriced, with no price", lines[2])
	}

	b.Reset()
	if err := printJSON(&b, types); err != nil {
		t.Fatal(err)
	}
	var raw []map[string]any
	if err := json.Unmarshal(b.Bytes(), &raw); err != nil {
		t.Fatal(err)
	}
	if len(raw) != 2 || raw[0]["price_hour"] != 0.526 || raw[1]["price_hour"] != nil {
		t.Errorf("JSON %s; want price_hour 0.526 then null", b.String())
	}
}
