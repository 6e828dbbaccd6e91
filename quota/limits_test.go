package quota

import (
	"encoding/json"
	"errors"
	"math"
	"reflect"
	"strings"
	"testing"
	"time"
)

// Helpers shared by the package's tests.

func amt(f float64) *Amount { a := Amount(f); return &a }

func dur(d time.Duration) *Duration { v := Duration(d); return &v }

// mustParse decodes a JSON entry, failing the test when it is refused.
func mustParse(t *testing.T, js string) Limits {
	t.Helper()
	l, err := ParseLimits([]byte(js))
	if err != nil {
		t.Fatalf("ParseLimits(%s): %v", js, err)
	}
	return l
}

// asJSON renders limits for comparisons and failure messages.
func asJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatalf("marshal %#v: %v", v, err)
	}
	return string(b)
}

// wantErrContains fails unless err is non-nil and its message holds every
// one of subs.
func wantErrContains(t *testing.T, err error, subs ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("got no error, want one containing %q", subs)
	}
	for _, s := range subs {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("error %q does not contain %q", err, s)
		}
	}
}

func TestAmountUnmarshalJSON(t *testing.T) {
	tests := []struct {
		in      string
		want    Amount
		errHas  []string // nil: no error expected
		comment string
	}{
		{in: `5`, want: 5},
		{in: `0`, want: 0},
		{in: `2.5`, want: 2.5},
		{in: `1e3`, want: 1000},
		{in: `"7"`, want: 7, comment: "a number in a string"},
		{in: `" 8 "`, want: 8, comment: "spaces around a number in a string"},
		{in: `"0.5"`, want: 0.5},
		{in: `"unlimited"`, want: Unlimited},
		{in: `"Unlimited"`, want: Unlimited},
		{in: `" UNLIMITED "`, want: Unlimited},
		{in: `-1`, errHas: []string{"at least 0", `"unlimited"`, "-1"}},
		{in: `-0.001`, errHas: []string{"at least 0", "-0.001"}},
		{in: `"-3"`, errHas: []string{"at least 0", `"-3"`}},
		{in: `"NaN"`, errHas: []string{"at least 0", `"NaN"`}},
		{in: `"nan"`, errHas: []string{`"nan"`}},
		{in: `"Inf"`, errHas: []string{`"Inf"`}},
		{in: `"+Inf"`, errHas: []string{`"+Inf"`}},
		{in: `"infinity"`, errHas: []string{`"infinity"`}},
		{in: `"-Inf"`, errHas: []string{`"-Inf"`}},
		{in: `""`, errHas: []string{"at least 0", `"unlimited"`}},
		{in: `"lots"`, errHas: []string{`"lots"`, `"unlimited"`}},
		{in: `"5 GPUs"`, errHas: []string{`"5 GPUs"`}},
		{in: `true`, errHas: []string{"want a number", `"unlimited"`, "true"}},
		{in: `[1]`, errHas: []string{"want a number", "[1]"}},
		{in: `{}`, errHas: []string{"want a number"}},
		{in: `1e400`, errHas: []string{"want a number"}, comment: "out of float64 range"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			var a Amount
			err := json.Unmarshal([]byte(tt.in), &a)
			if tt.errHas != nil {
				wantErrContains(t, err, tt.errHas...)
				return
			}
			if err != nil {
				t.Fatalf("Unmarshal(%s): %v", tt.in, err)
			}
			if a != tt.want {
				t.Errorf("Unmarshal(%s) = %v, want %v", tt.in, a, tt.want)
			}
			if tt.want == Unlimited && !a.IsUnlimited() {
				t.Errorf("Unmarshal(%s).IsUnlimited() = false", tt.in)
			}
		})
	}
}

func TestAmountMarshalJSON(t *testing.T) {
	tests := []struct {
		in   Amount
		want string
	}{
		{0, `0`},
		{5, `5`},
		{2.5, `2.5`},
		{0.1, `0.1`},
		{1e21, `1000000000000000000000`},
		{Unlimited, `"unlimited"`},
	}
	for _, tt := range tests {
		t.Run(tt.want, func(t *testing.T) {
			b, err := json.Marshal(tt.in)
			if err != nil {
				t.Fatal(err)
			}
			if string(b) != tt.want {
				t.Errorf("Marshal(%v) = %s, want %s", float64(tt.in), b, tt.want)
			}
			// A pointer field marshals the same way, and everything reads back.
			b2, err := json.Marshal(Limits{MaxVCPUs: &tt.in})
			if err != nil {
				t.Fatal(err)
			}
			if want := `{"max_vcpus":` + tt.want + `}`; string(b2) != want {
				t.Errorf("Marshal(Limits) = %s, want %s", b2, want)
			}
			var back Amount
			if err := json.Unmarshal(b, &back); err != nil {
				t.Fatalf("round trip of %s: %v", b, err)
			}
			if back != tt.in {
				t.Errorf("round trip of %v gave %v", float64(tt.in), back)
			}
		})
	}
}

func TestAmountString(t *testing.T) {
	for in, want := range map[Amount]string{0: "0", 32: "32", 1.5: "1.5", Unlimited: "unlimited"} {
		if got := in.String(); got != want {
			t.Errorf("Amount(%v).String() = %q, want %q", float64(in), got, want)
		}
	}
	if Amount(math.MaxFloat64).IsUnlimited() {
		t.Error("the largest finite amount is not unlimited")
	}
	if !Unlimited.IsUnlimited() {
		t.Error("Unlimited.IsUnlimited() = false")
	}
}

func TestParseAmount(t *testing.T) {
	tests := []struct {
		in   string
		want Amount
		ok   bool
	}{
		{"0", 0, true},
		{"12", 12, true},
		{" 12.25 ", 12.25, true},
		{"unlimited", Unlimited, true},
		{"UNLIMITED", Unlimited, true},
		{"-1", 0, false},
		{"NaN", 0, false},
		{"Inf", 0, false},
		{"1e999", 0, false},
		{"", 0, false},
		{"ten", 0, false},
		{"unlimited!", 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := ParseAmount(tt.in)
			if !tt.ok {
				// The message says what to write instead, and what was written.
				wantErrContains(t, err, `want a number of at least 0 or "unlimited"`, `"`+strings.TrimSpace(tt.in)+`"`)
				return
			}
			if err != nil {
				t.Fatalf("ParseAmount(%q): %v", tt.in, err)
			}
			if got != tt.want {
				t.Errorf("ParseAmount(%q) = %v, want %v", tt.in, got, tt.want)
			}
		})
	}
}

func TestDurationUnmarshalJSON(t *testing.T) {
	tests := []struct {
		in     string
		want   Duration
		errHas []string
	}{
		{in: `"2h"`, want: Duration(2 * time.Hour)},
		{in: `"90m"`, want: Duration(90 * time.Minute)},
		{in: `" 1h30m "`, want: Duration(90 * time.Minute)},
		{in: `"1.5h"`, want: Duration(90 * time.Minute)},
		{in: `"45s"`, want: Duration(45 * time.Second)},
		{in: `"500ms"`, errHas: []string{"at least 1s", `"500ms"`}},
		{in: `"unlimited"`, want: UnlimitedDuration},
		{in: `"UNLIMITED"`, want: UnlimitedDuration},
		{in: `5400`, want: Duration(90 * time.Minute)},
		{in: `3600`, want: Duration(time.Hour)},
		{in: `1.5`, want: Duration(1500 * time.Millisecond)},
		{in: `0.25`, errHas: []string{"from 1", "0.25"}}, // below a second: a limit that stops everything at once
		{in: `-5`, errHas: []string{`"2h"`, `"unlimited"`, "-5"}},
		{in: `-0.5`, errHas: []string{"-0.5"}},
		{in: `"-1h"`, errHas: []string{"at least 1s", `"-1h"`}},
		{in: `"0s"`, errHas: []string{"at least 1s", `"0s"`}},
		{in: `"0"`, errHas: []string{"at least 1s", `"0"`}},
		{in: `"5"`, errHas: []string{`"2h"`, `"5"`}}, // no unit
		{in: `"NaN"`, errHas: []string{`"NaN"`}},
		{in: `"soon"`, errHas: []string{`"soon"`, `"2h"`, `"unlimited"`}},
		{in: `""`, errHas: []string{`"2h"`}},
		{in: `true`, errHas: []string{`"2h"`, "true"}},
		{in: `{"h":2}`, errHas: []string{`"2h"`}},
		{in: `1e400`, errHas: []string{`"2h"`}},
		{in: `3153600000`, want: Duration(3153600000 * time.Second)}, // 100 years of seconds
		{in: `3153600001`, errHas: []string{"3153600001"}},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			var d Duration
			err := json.Unmarshal([]byte(tt.in), &d)
			if tt.errHas != nil {
				wantErrContains(t, err, tt.errHas...)
				return
			}
			if err != nil {
				t.Fatalf("Unmarshal(%s): %v", tt.in, err)
			}
			if d != tt.want {
				t.Errorf("Unmarshal(%s) = %v, want %v", tt.in, d, tt.want)
			}
		})
	}
}

// A number of seconds too large for a time.Duration must not wrap around
// into a negative limit (which would refuse every cluster).
func TestDurationUnmarshalJSONHugeSecondsNotNegative(t *testing.T) {
	for _, in := range []string{`1e10`, `9300000000`, `1e300`} {
		t.Run(in, func(t *testing.T) {
			var d Duration
			err := json.Unmarshal([]byte(in), &d)
			if err == nil && d <= 0 {
				t.Errorf("Unmarshal(%s) = %d (%v) with no error; want an error or a positive duration", in, int64(d), d)
			}
		})
	}
}

// A number of seconds follows the same rule as a duration string: "0s" is
// refused (want a positive duration), so 0 must be too.
func TestDurationUnmarshalJSONZeroSecondsRefusedLikeZeroString(t *testing.T) {
	var fromString Duration
	if err := json.Unmarshal([]byte(`"0s"`), &fromString); err == nil {
		t.Fatal(`"0s" was accepted`)
	}
	var fromNumber Duration
	if err := json.Unmarshal([]byte(`0`), &fromNumber); err == nil {
		t.Errorf(`0 (seconds) was accepted as %v while "0s" is refused; a zero max_idle_timeout or max_lifetime refuses every cluster`, fromNumber)
	}
}

func TestDurationMarshalJSON(t *testing.T) {
	tests := []struct {
		in   Duration
		want string
	}{
		{Duration(2 * time.Hour), `"2h0m0s"`},
		{Duration(90 * time.Second), `"1m30s"`},
		{UnlimitedDuration, `"unlimited"`},
	}
	for _, tt := range tests {
		t.Run(tt.want, func(t *testing.T) {
			b, err := json.Marshal(tt.in)
			if err != nil {
				t.Fatal(err)
			}
			if string(b) != tt.want {
				t.Errorf("Marshal = %s, want %s", b, tt.want)
			}
			var back Duration
			if err := json.Unmarshal(b, &back); err != nil {
				t.Fatalf("round trip of %s: %v", b, err)
			}
			if back != tt.in {
				t.Errorf("round trip of %s gave %v", b, back)
			}
		})
	}
	if got := UnlimitedDuration.String(); got != "unlimited" {
		t.Errorf("UnlimitedDuration.String() = %q", got)
	}
}

func TestParseDuration(t *testing.T) {
	tests := []struct {
		in   string
		want Duration
		ok   bool
	}{
		{"2h", Duration(2 * time.Hour), true},
		{" 30m ", Duration(30 * time.Minute), true},
		{"1h1s", Duration(time.Hour + time.Second), true},
		{"unlimited", UnlimitedDuration, true},
		{"Unlimited", UnlimitedDuration, true},
		{"0s", 0, false},
		{"-2h", 0, false},
		{"2", 0, false},
		{"2 hours", 0, false},
		{"", 0, false},
		{"forever", 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := ParseDuration(tt.in)
			if !tt.ok {
				wantErrContains(t, err, "at least 1s", `"2h"`, `"unlimited"`, `"`+strings.TrimSpace(tt.in)+`"`)
				return
			}
			if err != nil {
				t.Fatalf("ParseDuration(%q): %v", tt.in, err)
			}
			if got != tt.want {
				t.Errorf("ParseDuration(%q) = %v, want %v", tt.in, got, tt.want)
			}
		})
	}
}

func TestParseLimitsAllFields(t *testing.T) {
	l := mustParse(t, `{
		"max_clusters": 3,
		"max_workers_per_cluster": "unlimited",
		"max_vcpus": 64,
		"max_memory_gib": 256.5,
		"max_gpus": 4,
		"max_gpus_by_type": {"a100": 2, "t4": "unlimited"},
		"allowed_instance_types": ["m5.*", "g5.xlarge"],
		"allowed_providers": ["aws"],
		"allowed_regions": ["us-east-1", "eu-west-1"],
		"max_idle_timeout": "2h",
		"max_lifetime": 86400,
		"monthly_vcpu_hours": 1000,
		"monthly_gpu_hours": 0
	}`)
	want := Limits{
		MaxClusters:          amt(3),
		MaxWorkersPerCluster: amt(math.Inf(1)),
		MaxVCPUs:             amt(64),
		MaxMemoryGiB:         amt(256.5),
		MaxGPUs:              amt(4),
		MaxGPUsByType:        map[string]Amount{"a100": 2, "t4": Unlimited},
		AllowedInstanceTypes: []string{"m5.*", "g5.xlarge"},
		AllowedProviders:     []string{"aws"},
		AllowedRegions:       []string{"us-east-1", "eu-west-1"},
		MaxIdleTimeout:       dur(2 * time.Hour),
		MaxLifetime:          dur(24 * time.Hour),
		MonthlyVCPUHours:     amt(1000),
		MonthlyGPUHours:      amt(0),
	}
	if !reflect.DeepEqual(l, want) {
		t.Errorf("ParseLimits:\n got %s\nwant %s", asJSON(t, l), asJSON(t, want))
	}
	if l.Empty() {
		t.Error("Empty() = true for a full entry")
	}
	// What is written reads back the same.
	again := mustParse(t, asJSON(t, l))
	if !reflect.DeepEqual(again, want) {
		t.Errorf("round trip:\n got %s\nwant %s", asJSON(t, again), asJSON(t, want))
	}
}

func TestParseLimitsAccepts(t *testing.T) {
	tests := []struct {
		name, in string
		empty    bool
	}{
		{"empty object", `{}`, true},
		{"null", `null`, true},
		{"null with spaces", " null\n", true},
		{"object with spaces", "\n {\"max_gpus\": 1}\n\t", false},
		{"null field", `{"max_clusters": null}`, true},
		{"zero is a limit", `{"max_gpus": 0}`, false},
		{"allow all", `{"allowed_providers": ["*"]}`, false},
		{"128-character name", `{"allowed_instance_types": ["` + strings.Repeat("x", 128) + `"]}`, false},
		{"64-character GPU type", `{"max_gpus_by_type": {"` + strings.Repeat("g", 64) + `": 1}}`, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l, err := ParseLimits([]byte(tt.in))
			if err != nil {
				t.Fatalf("ParseLimits(%s): %v", tt.in, err)
			}
			if l.Empty() != tt.empty {
				t.Errorf("Empty() = %v, want %v", l.Empty(), tt.empty)
			}
		})
	}
}

func TestParseLimitsUnknownField(t *testing.T) {
	for _, in := range []string{`{"max_cluster": 3}`, `{"max_clusters": 1, "gpus": 2}`, `{"quota": {}}`, `{"MAX_CLUSTERS": 3}`, `{"max_clusters": 1, "Max_Vcpus": 2}`} {
		t.Run(in, func(t *testing.T) {
			_, err := ParseLimits([]byte(in))
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("err = %v, want ErrInvalid", err)
			}
			var unknown map[string]any
			if err := json.Unmarshal([]byte(in), &unknown); err != nil {
				t.Fatal(err)
			}
			delete(unknown, "max_clusters")
			for k := range unknown {
				wantErrContains(t, err, "unknown limit", `"`+k+`"`)
			}
			// The message lists what can be written instead.
			wantErrContains(t, err, "known limits are")
			wantErrContains(t, err, FieldNames()...)
			if strings.Contains(err.Error(), "json:") {
				t.Errorf("error %q leaks the decoder's wording", err)
			}
		})
	}
}

// Every decoding problem names the field it is about, whatever the field's
// type (the package promises: "an unknown field, a negative number or a
// malformed list is an error that names the field").
func TestParseLimitsErrorsNameTheField(t *testing.T) {
	tests := []struct {
		name, in, field string
	}{
		{"list given a string", `{"allowed_providers": "aws"}`, "allowed_providers"},
		{"list of numbers", `{"allowed_regions": [1, 2]}`, "allowed_regions"},
		{"list given an object", `{"allowed_instance_types": {"m5": true}}`, "allowed_instance_types"},
		{"map given a number", `{"max_gpus_by_type": 3}`, "max_gpus_by_type"},
		{"amount given a bool", `{"max_clusters": true}`, "max_clusters"},
		{"amount given a list", `{"max_vcpus": [4]}`, "max_vcpus"},
		{"negative amount", `{"max_memory_gib": -1}`, "max_memory_gib"},
		{"negative amount in a string", `{"max_gpus": "-2"}`, "max_gpus"},
		{"amount given a word", `{"monthly_vcpu_hours": "lots"}`, "monthly_vcpu_hours"},
		{"negative amount per GPU type", `{"max_gpus_by_type": {"a100": -1}}`, "max_gpus_by_type"},
		{"duration given a word", `{"max_idle_timeout": "soon"}`, "max_idle_timeout"},
		{"negative duration", `{"max_lifetime": "-1h"}`, "max_lifetime"},
		{"duration given a bool", `{"max_lifetime": false}`, "max_lifetime"},
		{"empty list", `{"allowed_regions": []}`, "allowed_regions"},
		{"several fields, each named", `{"max_clusters": -1, "max_lifetime": "soon"}`, "max_clusters: "},
		{"several fields, each named (2)", `{"max_clusters": -1, "max_lifetime": "soon"}`, "max_lifetime: "},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseLimits([]byte(tt.in))
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("ParseLimits(%s) = %v, want ErrInvalid", tt.in, err)
			}
			wantErrContains(t, err, tt.field)
		})
	}
}

// ParseLimits decodes strictly: anything after the entry is refused rather
// than silently dropped.
func TestParseLimitsRejectsTrailingData(t *testing.T) {
	for _, in := range []string{`{"max_clusters": 1} {"max_clusters": 100}`, `{"max_clusters": 1} junk`} {
		if l, err := ParseLimits([]byte(in)); err == nil {
			t.Errorf("ParseLimits(%s) = %s with no error; want the trailing data refused", in, asJSON(t, l))
		}
	}
}

func TestParseLimitsNotAnObject(t *testing.T) {
	for _, in := range []string{`[]`, `3`, `"max_clusters"`, ``, `{`, `nul`, `true`} {
		if _, err := ParseLimits([]byte(in)); !errors.Is(err, ErrInvalid) {
			t.Errorf("ParseLimits(%q) = %v, want ErrInvalid", in, err)
		}
	}
}

func TestLimitsValidate(t *testing.T) {
	long := strings.Repeat("x", 129)
	tests := []struct {
		name   string
		l      Limits
		errHas []string // nil: valid
	}{
		{"empty", Limits{}, nil},
		{"names", Limits{AllowedProviders: []string{"aws", "gcp"}, AllowedRegions: []string{"us-east-1"}, AllowedInstanceTypes: []string{"m5.*", "*"}}, nil},
		{"GPU types", Limits{MaxGPUsByType: map[string]Amount{"a100": 1, "nvidia-h100-80gb": 2}}, nil},
		{"space in provider", Limits{AllowedProviders: []string{"aws east"}}, []string{"allowed_providers", `"aws east"`, "no spaces"}},
		{"empty region", Limits{AllowedRegions: []string{"us-east-1", ""}}, []string{"allowed_regions", `""`}},
		{"tab in instance type", Limits{AllowedInstanceTypes: []string{"m5.\tlarge"}}, []string{"allowed_instance_types"}},
		{"too long", Limits{AllowedInstanceTypes: []string{long}}, []string{"allowed_instance_types", "128"}},
		{"empty GPU type", Limits{MaxGPUsByType: map[string]Amount{"": 1}}, []string{"max_gpus_by_type", `""`, "GPU type"}},
		{"GPU type with space", Limits{MaxGPUsByType: map[string]Amount{"a 100": 1}}, []string{"max_gpus_by_type", `"a 100"`}},
		{"empty provider list", Limits{AllowedProviders: []string{}}, []string{"allowed_providers", "empty list", `["*"]`}},
		{"empty instance type list", Limits{AllowedInstanceTypes: []string{}}, []string{"allowed_instance_types", "empty list"}},
		{"GPU type too long", Limits{MaxGPUsByType: map[string]Amount{strings.Repeat("g", 65): 1}}, []string{"max_gpus_by_type"}},
		{"several problems together", Limits{AllowedProviders: []string{"a b"}, AllowedRegions: []string{""}, MaxGPUsByType: map[string]Amount{" ": 1}},
			[]string{"allowed_providers", "allowed_regions", "max_gpus_by_type"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.l.Validate()
			if tt.errHas == nil {
				if err != nil {
					t.Fatalf("Validate: %v", err)
				}
				return
			}
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("Validate = %v, want ErrInvalid", err)
			}
			wantErrContains(t, err, tt.errHas...)
			// ParseLimits runs the same checks (an empty list is not
			// written: the JSON case is in TestParseLimitsErrorsNameTheField).
			if js := asJSON(t, tt.l); js == "{}" {
				return
			}
			if _, perr := ParseLimits([]byte(asJSON(t, tt.l))); !errors.Is(perr, ErrInvalid) {
				t.Errorf("ParseLimits accepted what Validate refuses: %v", perr)
			}
		})
	}
}

func TestValidateIsDeterministic(t *testing.T) {
	l := Limits{AllowedProviders: []string{"a b"}, AllowedRegions: []string{"c d"}, AllowedInstanceTypes: []string{"e f"}, MaxGPUsByType: map[string]Amount{"g h": 1, "i j": 2}}
	first := l.Validate().Error()
	for range 20 {
		if got := l.Validate().Error(); got != first {
			t.Fatalf("Validate's message changes between calls:\n%s\n%s", first, got)
		}
	}
}

func TestLimitsMerge(t *testing.T) {
	tests := []struct {
		name, base, patch, want string
	}{
		{"into empty", `{}`, `{"max_clusters": 2}`, `{"max_clusters":2}`},
		{"empty patch changes nothing", `{"max_clusters": 2, "allowed_providers": ["aws"]}`, `{}`, `{"max_clusters":2,"allowed_providers":["aws"]}`},
		{"patch overrides what it sets, keeps the rest", `{"max_clusters": 2, "max_vcpus": 8}`, `{"max_vcpus": 16}`, `{"max_clusters":2,"max_vcpus":16}`},
		{"unlimited overrides a number", `{"max_vcpus": 8}`, `{"max_vcpus": "unlimited"}`, `{"max_vcpus":"unlimited"}`},
		{"a number overrides unlimited", `{"max_vcpus": "unlimited"}`, `{"max_vcpus": 4}`, `{"max_vcpus":4}`},
		{"zero overrides", `{"max_gpus": 4}`, `{"max_gpus": 0}`, `{"max_gpus":0}`},
		{"lists are replaced, not added to", `{"allowed_regions": ["a", "b"]}`, `{"allowed_regions": ["c"]}`, `{"allowed_regions":["c"]}`},
		{"durations", `{"max_idle_timeout": "1h", "max_lifetime": "8h"}`, `{"max_lifetime": "unlimited"}`, `{"max_idle_timeout":"1h0m0s","max_lifetime":"unlimited"}`},
		{"GPU types merge per type", `{"max_gpus_by_type": {"a100": 1, "t4": 2}}`, `{"max_gpus_by_type": {"a100": 3, "h100": 1}}`, `{"max_gpus_by_type":{"a100":3,"h100":1,"t4":2}}`},
		{"GPU types into none", `{"max_gpus": 1}`, `{"max_gpus_by_type": {"t4": 1}}`, `{"max_gpus":1,"max_gpus_by_type":{"t4":1}}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			base, patch := mustParse(t, tt.base), mustParse(t, tt.patch)
			patchBefore := asJSON(t, patch)
			base.Merge(&patch)
			if got := asJSON(t, base); got != tt.want {
				t.Errorf("Merge:\n got %s\nwant %s", got, tt.want)
			}
			if got := asJSON(t, patch); got != patchBefore {
				t.Errorf("Merge changed the patch: %s, was %s", got, patchBefore)
			}
		})
	}
}

// The merged entry shares nothing with the patch: changing the patch later
// does not change it.
func TestLimitsMergeCopies(t *testing.T) {
	patch := mustParse(t, `{"max_clusters": 2, "max_idle_timeout": "1h", "allowed_providers": ["aws"], "max_gpus_by_type": {"a100": 1}}`)
	var l Limits
	l.Merge(&patch)
	*patch.MaxClusters = 99
	*patch.MaxIdleTimeout = Duration(time.Minute)
	patch.AllowedProviders[0] = "gcp"
	patch.MaxGPUsByType["a100"] = 99
	want := `{"max_clusters":2,"max_gpus_by_type":{"a100":1},"allowed_providers":["aws"],"max_idle_timeout":"1h0m0s"}`
	if got := asJSON(t, l); got != want {
		t.Errorf("merged entry follows the patch:\n got %s\nwant %s", got, want)
	}
}

func TestLimitsUnset(t *testing.T) {
	full := `{"max_clusters": 2, "max_vcpus": 8, "allowed_regions": ["r"], "max_idle_timeout": "1h", "max_gpus_by_type": {"a100": 1, "t4": 2}}`
	tests := []struct {
		name   string
		start  string
		names  []string
		want   string
		errHas []string
	}{
		{"nothing named", full, nil, `{"max_clusters":2,"max_vcpus":8,"max_gpus_by_type":{"a100":1,"t4":2},"allowed_regions":["r"],"max_idle_timeout":"1h0m0s"}`, nil},
		{"one field", full, []string{"max_clusters"}, `{"max_vcpus":8,"max_gpus_by_type":{"a100":1,"t4":2},"allowed_regions":["r"],"max_idle_timeout":"1h0m0s"}`, nil},
		{"a list and a duration", full, []string{"allowed_regions", "max_idle_timeout"}, `{"max_clusters":2,"max_vcpus":8,"max_gpus_by_type":{"a100":1,"t4":2}}`, nil},
		{"one GPU type", full, []string{"max_gpus_by_type.a100"}, `{"max_clusters":2,"max_vcpus":8,"max_gpus_by_type":{"t4":2},"allowed_regions":["r"],"max_idle_timeout":"1h0m0s"}`, nil},
		{"every GPU type", full, []string{"max_gpus_by_type"}, `{"max_clusters":2,"max_vcpus":8,"allowed_regions":["r"],"max_idle_timeout":"1h0m0s"}`, nil},
		{"GPU type not set", full, []string{"max_gpus_by_type.h100"}, `{"max_clusters":2,"max_vcpus":8,"max_gpus_by_type":{"a100":1,"t4":2},"allowed_regions":["r"],"max_idle_timeout":"1h0m0s"}`, nil},
		{"field not set", `{"max_clusters": 2}`, []string{"max_gpus", "monthly_gpu_hours"}, `{"max_clusters":2}`, nil},
		{"everything", full, []string{"max_clusters", "max_vcpus", "allowed_regions", "max_idle_timeout", "max_gpus_by_type.a100", "max_gpus_by_type.t4"}, `{}`, nil},
		{"unknown name", full, []string{"max_cluster"}, "", []string{`max_cluster;`, "known limits are", "max_clusters", "max_gpus_by_type", "monthly_gpu_hours"}},
		{"several unknown names", full, []string{"gpus", "max_vcpus", "cpus"}, "", []string{"gpus, cpus", "known limits are"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := mustParse(t, tt.start)
			err := l.Unset(tt.names)
			if tt.errHas != nil {
				if !errors.Is(err, ErrInvalid) {
					t.Fatalf("Unset(%q) = %v, want ErrInvalid", tt.names, err)
				}
				wantErrContains(t, err, tt.errHas...)
				return
			}
			if err != nil {
				t.Fatalf("Unset(%q): %v", tt.names, err)
			}
			if got := asJSON(t, l); got != tt.want {
				t.Errorf("Unset(%q):\n got %s\nwant %s", tt.names, got, tt.want)
			}
		})
	}
}

func TestLimitsUnsetLastGPUTypeLeavesNoMap(t *testing.T) {
	l := mustParse(t, `{"max_gpus_by_type": {"a100": 1}}`)
	if err := l.Unset([]string{"max_gpus_by_type.a100"}); err != nil {
		t.Fatal(err)
	}
	if l.MaxGPUsByType != nil {
		t.Errorf("MaxGPUsByType = %#v, want nil", l.MaxGPUsByType)
	}
	if !l.Empty() {
		t.Error("Empty() = false after unsetting the only limit")
	}
}

// sampleValues holds a valid JSON value for every limit.
var sampleValues = map[string]string{
	"max_clusters":            `1`,
	"max_workers_per_cluster": `10`,
	"max_vcpus":               `32`,
	"max_memory_gib":          `128`,
	"max_gpus":                `0`,
	"max_gpus_by_type":        `{"a100": 1}`,
	"allowed_instance_types":  `["m5.*"]`,
	"allowed_providers":       `["aws"]`,
	"allowed_regions":         `["us-east-1"]`,
	"max_idle_timeout":        `"1h"`,
	"max_lifetime":            `"unlimited"`,
	"monthly_vcpu_hours":      `100`,
	"monthly_gpu_hours":       `"unlimited"`,
	"max_builds":              `2`,
}

// Every limit, one at a time: it parses, makes the entry non-empty, merges,
// and unsetting it by name empties the entry again.
func TestEveryField(t *testing.T) {
	if len(FieldNames()) != len(sampleValues) {
		t.Fatalf("FieldNames() = %q; the test knows %d limits", FieldNames(), len(sampleValues))
	}
	for _, name := range FieldNames() {
		t.Run(name, func(t *testing.T) {
			v, ok := sampleValues[name]
			if !ok {
				t.Fatalf("no sample value for %s", name)
			}
			l := mustParse(t, `{"`+name+`": `+v+`}`)
			if l.Empty() {
				t.Fatalf("Empty() = true with %s set", name)
			}
			var m Limits
			m.Merge(&l)
			if !reflect.DeepEqual(m, l) {
				t.Errorf("Merge into empty: got %s, want %s", asJSON(t, m), asJSON(t, l))
			}
			if err := l.Unset([]string{name}); err != nil {
				t.Fatalf("Unset(%s): %v", name, err)
			}
			if !l.Empty() {
				t.Errorf("Empty() = false after unsetting %s: %s", name, asJSON(t, l))
			}
		})
	}
}

func TestLimitsEmpty(t *testing.T) {
	tests := []struct {
		name string
		l    Limits
		want bool
	}{
		{"zero", Limits{}, true},
		{"empty GPU map", Limits{MaxGPUsByType: map[string]Amount{}}, true},
		{"one GPU type", Limits{MaxGPUsByType: map[string]Amount{"t4": 0}}, false},
		{"zero amount is set", Limits{MaxGPUs: amt(0)}, false},
		{"allow-list", Limits{AllowedProviders: []string{"*"}}, false},
		{"duration", Limits{MaxLifetime: dur(time.Hour)}, false},
	}
	for _, tt := range tests {
		if got := tt.l.Empty(); got != tt.want {
			t.Errorf("%s: Empty() = %v, want %v", tt.name, got, tt.want)
		}
	}
}

// FieldDocs covers exactly the JSON fields of Limits, each once, with a
// description.
func TestFieldDocsMatchLimits(t *testing.T) {
	tags := map[string]bool{}
	rt := reflect.TypeFor[Limits]()
	for i := range rt.NumField() {
		tag, _, _ := strings.Cut(rt.Field(i).Tag.Get("json"), ",")
		tags[tag] = true
	}
	seen := map[string]bool{}
	for _, d := range FieldDocs() {
		if seen[d[0]] {
			t.Errorf("%s is listed twice", d[0])
		}
		seen[d[0]] = true
		if !tags[d[0]] {
			t.Errorf("%s is not a field of Limits", d[0])
		}
		if d[1] == "" {
			t.Errorf("%s has no description", d[0])
		}
	}
	for tag := range tags {
		if !seen[tag] {
			t.Errorf("Limits field %s is missing from FieldDocs", tag)
		}
	}
	if names := FieldNames(); len(names) != len(FieldDocs()) || names[0] != "max_clusters" {
		t.Errorf("FieldNames() = %q", names)
	}
}

func TestParseSubject(t *testing.T) {
	tests := []struct {
		in     string
		want   Subject
		errHas []string
	}{
		{in: "default", want: DefaultSubject},
		{in: "  default\t", want: DefaultSubject},
		{in: "user:ann", want: "user:ann"},
		{in: " user:ann ", want: "user:ann"},
		{in: "group:gpu", want: "group:gpu"},
		{in: "group:org/team", want: "group:org/team"},
		{in: "user:ann@example.com", want: "user:ann@example.com"},
		{in: "user:a:b", want: "user:a:b"},
		{in: "group:Data Science", want: "group:Data Science"},
		{in: "user:" + strings.Repeat("a", 256), want: Subject("user:" + strings.Repeat("a", 256))},
		{in: "", errHas: []string{`subject ""`, "default, user:<name> or group:<name>"}},
		{in: "Default", errHas: []string{`"Default"`, "default, user:<name> or group:<name>"}},
		{in: "defaults", errHas: []string{"default, user:<name> or group:<name>"}},
		{in: "ann", errHas: []string{`"ann"`, "user:<name>"}},
		{in: "USER:ann", errHas: []string{`"USER:ann"`}},
		{in: "team:x", errHas: []string{`"team:x"`}},
		{in: "users:ann", errHas: []string{`"users:ann"`}},
		{in: ":ann", errHas: []string{`":ann"`}},
		{in: "user:", errHas: []string{`"user:"`, "needs a name", "after user:"}},
		{in: "group:", errHas: []string{"needs a name", "after group:"}},
		{in: "group:  ", errHas: []string{"needs a name"}},
		{in: "user:" + strings.Repeat("a", 257), errHas: []string{"1 to 256"}},
		{in: "user:a\x00b", errHas: []string{"printable"}},
		{in: "user:a\nb", errHas: []string{"printable"}},
		{in: "group:a\x7fb", errHas: []string{"printable"}},
		{in: "group:x\u0085y", errHas: []string{"printable"}},
		{in: "user:\x1b[31mred", errHas: []string{"printable"}},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := ParseSubject(tt.in)
			if tt.errHas != nil {
				if !errors.Is(err, ErrInvalid) {
					t.Fatalf("ParseSubject(%q) = %q, %v; want ErrInvalid", tt.in, got, err)
				}
				wantErrContains(t, err, tt.errHas...)
				if got != "" {
					t.Errorf("ParseSubject(%q) returned %q with its error", tt.in, got)
				}
				return
			}
			if err != nil {
				t.Fatalf("ParseSubject(%q): %v", tt.in, err)
			}
			if got != tt.want {
				t.Errorf("ParseSubject(%q) = %q, want %q", tt.in, got, tt.want)
			}
			// A parsed subject parses to itself.
			if again, err := ParseSubject(string(got)); err != nil || again != got {
				t.Errorf("ParseSubject(%q) = %q, %v", got, again, err)
			}
		})
	}
}

func TestSubjectBuilders(t *testing.T) {
	if got := UserSubject("ann"); got != "user:ann" {
		t.Errorf("UserSubject = %q", got)
	}
	if got := GroupSubject("org/team"); got != "group:org/team" {
		t.Errorf("GroupSubject = %q", got)
	}
	for _, s := range []Subject{UserSubject("ann"), GroupSubject("gpu"), DefaultSubject} {
		if got, err := ParseSubject(string(s)); err != nil || got != s {
			t.Errorf("ParseSubject(%q) = %q, %v", s, got, err)
		}
	}
}
