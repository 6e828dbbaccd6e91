package catalog

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
)

// TestUnpricedSortLast: unpriced types come after every priced one (a
// price of 0, paid up front, included) in Types, Cheapest and Fitting; an
// operator's price makes one priced.
func TestUnpricedSortLast(t *testing.T) {
	types := []InstanceType{
		{Name: "zz.new", Cloud: CloudAWS, VCPUs: 4, MemoryGiB: 16, Unpriced: true},
		{Name: "m6i.xlarge", Cloud: CloudAWS, VCPUs: 4, MemoryGiB: 16, PriceHour: 0.192},
		{Name: "aa.new", Cloud: CloudAWS, VCPUs: 8, MemoryGiB: 32, Unpriced: true},
		{Name: "reserved.xlarge", Cloud: CloudAWS, VCPUs: 2, MemoryGiB: 8, PriceHour: 0},
		{Name: "m5.large", Cloud: CloudAWS, VCPUs: 2, MemoryGiB: 8, PriceHour: 0.096},
	}
	for _, tc := range []struct {
		name   string
		prices map[string]float64
		want   []string
	}{
		{"unpriced last by name", nil, []string{"reserved.xlarge", "m5.large", "m6i.xlarge", "aa.new", "zz.new"}},
		{"an operator's price counts", map[string]float64{"zz.new": 0.15}, []string{"reserved.xlarge", "m5.large", "zz.new", "m6i.xlarge", "aa.new"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := New(types, tc.prices)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, it := range c.Types("") {
				got = append(got, it.Name)
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("Types = %q, want %q", got, tc.want)
			}
			best, err := c.Cheapest(Requirements{MinVCPUs: 4, MinMemoryGiB: 16})
			if err != nil {
				t.Fatal(err)
			}
			if best.Unpriced && tc.prices == nil {
				t.Errorf("Cheapest chose the unpriced %s over m6i.xlarge", best.Name)
			}
			fits, _ := c.Fitting(Requirements{MinVCPUs: 4}, 0)
			if len(fits) == 0 || !fits[len(fits)-1].Unpriced || fits[0].Unpriced {
				t.Errorf("Fitting = %v: unpriced types must come last", fits)
			}
		})
	}
	// Only unpriced types fit: one is still chosen.
	c, err := New(types, nil)
	if err != nil {
		t.Fatal(err)
	}
	if best, err := c.Cheapest(Requirements{MinVCPUs: 8}); err != nil || best.Name != "aa.new" {
		t.Errorf("Cheapest(8 vCPUs) = %v, %v; want aa.new", best, err)
	}
	if _, err := New([]InstanceType{{Name: "x.large", Cloud: CloudAWS, VCPUs: 2, MemoryGiB: 4, PriceHour: 1, Unpriced: true}}, nil); err == nil || !strings.Contains(err.Error(), "marked unpriced") {
		t.Errorf("New(priced and unpriced at once) = %v", err)
	}
}

// TestUnpricedJSON: an unpriced type's price_hour is null on the wire,
// never 0, and reads back as unpriced; a priced 0 stays a price.
func TestUnpricedJSON(t *testing.T) {
	for _, it := range []InstanceType{
		{Name: "zz.new", Cloud: CloudAWS, VCPUs: 4, MemoryGiB: 16, Unpriced: true},
		{Name: "reserved.xlarge", Cloud: CloudAWS, VCPUs: 2, MemoryGiB: 8},
		{Name: "g4dn.xlarge", Cloud: CloudAWS, VCPUs: 4, MemoryGiB: 16, GPUs: 1, GPUType: "t4", PriceHour: 0.526},
	} {
		b, err := json.Marshal(it)
		if err != nil {
			t.Fatal(err)
		}
		var raw map[string]any
		if err := json.Unmarshal(b, &raw); err != nil {
			t.Fatal(err)
		}
		if p, ok := raw["price_hour"]; !ok || (p == nil) != it.Unpriced {
			t.Errorf("%s: %s; want price_hour null exactly when unpriced", it.Name, b)
		}
		var back InstanceType
		if err := json.Unmarshal(b, &back); err != nil {
			t.Fatal(err)
		}
		if back != it {
			t.Errorf("round trip of %s: %+v, want %+v", b, back, it)
		}
	}
	var absent InstanceType
	if err := json.Unmarshal([]byte(`{"name":"x","cloud":"aws","vcpus":2,"memory_gib":4}`), &absent); err != nil || !absent.Unpriced {
		t.Errorf("absent price_hour read as %+v, %v; want unpriced", absent, err)
	}
}
