package quota

import (
	"encoding/json"
	"errors"
	"maps"
	"strings"
	"testing"
)

// Text writes what ParseText reads back to the same limits, every kind
// of limit included.
func TestTextRoundTrip(t *testing.T) {
	l, err := ParseLimits([]byte(`{"max_clusters": 3, "max_vcpus": 16.5, "max_memory_gib": "unlimited", "max_lifetime": "90m", "max_idle_timeout": "unlimited",
		"allowed_providers": ["local", "ec2"], "allowed_regions": ["*"], "max_gpus_by_type": {"t4": 4, "a100": "unlimited"}}`))
	if err != nil {
		t.Fatal(err)
	}
	text := l.Text()
	want := map[string]string{"max_clusters": "3", "max_vcpus": "16.5", "max_memory_gib": "unlimited", "max_lifetime": "1h30m0s",
		"max_idle_timeout": "unlimited", "allowed_providers": "local,ec2", "allowed_regions": "*", "max_gpus_by_type": "a100=unlimited,t4=4"}
	if !maps.Equal(text, want) {
		t.Errorf("Text() = %v, want %v", text, want)
	}
	back, err := ParseText(text, func(n string) string { return n })
	if err != nil {
		t.Fatal(err)
	}
	a, _ := json.Marshal(l)
	b, _ := json.Marshal(back)
	if string(a) != string(b) {
		t.Errorf("round trip: %s, want %s", b, a)
	}
	if got := (&Limits{}).Text(); len(got) != 0 {
		t.Errorf("empty limits' text: %v", got)
	}
}

// Every problem is reported with its label, and the error is ErrInvalid;
// what the JSON reading refuses is refused too.
func TestParseTextErrors(t *testing.T) {
	_, err := ParseText(map[string]string{"max_vcpus": "-1", "max_clusters": "2.5", "allowed_regions": "eu west", "max_tpus": "1"},
		func(n string) string { return "<" + n + ">" })
	if !errors.Is(err, ErrInvalid) {
		t.Fatalf("error %v is not ErrInvalid", err)
	}
	for _, want := range []string{`<max_clusters>: want a whole number of at least 0 or "unlimited", got "2.5"`,
		`<max_vcpus>: want a number of at least 0 or "unlimited", got "-1"`, "unknown limit max_tpus"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
	_, err = ParseText(map[string]string{"allowed_regions": "eu west"}, func(n string) string { return n })
	if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), `allowed_regions: "eu west" is not a name`) {
		t.Errorf("a name with a space: %v", err)
	}
}
