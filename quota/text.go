package quota

import (
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"slices"
	"sort"
	"strings"
)

// Kind is how a limit is written as text: the CLI's flags and the
// console's form fields take limits so.
type Kind int

// The kinds of limits.
const (
	KindUnknown  Kind = iota
	KindCount         // a whole number or "unlimited"
	KindAmount        // a number or "unlimited"
	KindDuration      // "2h" or "unlimited"
	KindList          // names; "*" allows any
	KindGPUMap        // GPU type -> count
)

// KindOf says how the limit of FieldNames called name is written.
func KindOf(name string) Kind {
	switch name {
	case "max_clusters", "max_workers_per_cluster", "max_gpus", "max_builds":
		return KindCount
	case "max_vcpus", "max_memory_gib", "monthly_vcpu_hours", "monthly_gpu_hours":
		return KindAmount
	case "max_idle_timeout", "max_lifetime":
		return KindDuration
	case "allowed_instance_types", "allowed_providers", "allowed_regions":
		return KindList
	case gpuTypeField:
		return KindGPUMap
	}
	return KindUnknown
}

// Hint says how a limit of this kind is written.
func (k Kind) Hint() string {
	switch k {
	case KindCount:
		return "N or unlimited"
	case KindAmount:
		return "number or unlimited"
	case KindDuration:
		return "duration (2h) or unlimited"
	case KindList:
		return "comma-separated"
	case KindGPUMap:
		return "e.g. a100=2,t4=4"
	}
	return "value"
}

// UnsetValue is how a limit of this kind that applies nothing reads.
func (k Kind) UnsetValue() string {
	if k == KindList {
		return "any"
	}
	return "unlimited"
}

// parseCount reads a whole number or "unlimited".
func parseCount(s string) (Amount, error) {
	a, err := ParseAmount(s)
	if err != nil || (!a.IsUnlimited() && float64(a) != math.Trunc(float64(a))) {
		return 0, fmt.Errorf("want a whole number of at least 0 or \"unlimited\", got %q", strings.TrimSpace(s))
	}
	return a, nil
}

// parseValue reads one limit's text as its JSON value.
func parseValue(field, s string) (any, error) {
	switch KindOf(field) {
	case KindCount:
		return parseCount(s)
	case KindAmount:
		return ParseAmount(s)
	case KindDuration:
		return ParseDuration(s)
	case KindList:
		var names []string
		for _, p := range strings.Split(s, ",") {
			if p = strings.TrimSpace(p); p == "" {
				return nil, fmt.Errorf("want a list of names such as a,b (\"*\" allows any), got %q", s)
			}
			names = append(names, p)
		}
		return names, nil
	case KindGPUMap:
		m := map[string]Amount{}
		for _, p := range strings.Split(s, ",") {
			typ, n, ok := strings.Cut(strings.TrimSpace(p), "=")
			typ = strings.TrimSpace(typ)
			if !ok || typ == "" {
				return nil, fmt.Errorf("want type=count pairs such as a100=2,t4=4, got %q", p)
			}
			if _, dup := m[typ]; dup {
				return nil, fmt.Errorf("GPU type %s is given twice", typ)
			}
			a, err := parseCount(n)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", typ, err)
			}
			m[typ] = a
		}
		return m, nil
	}
	return nil, fmt.Errorf("no way to read limit %s as text", field)
}

// ParseText reads limits written as text (see Kind), keyed by limit
// name, then as ParseLimits reads the API's JSON. Every problem is
// reported, each naming its limit as label says (the CLI names its
// flags); the error wraps ErrInvalid.
func ParseText(given map[string]string, label func(limit string) string) (Limits, error) {
	obj := map[string]any{}
	var problems []string
	for _, name := range FieldNames() {
		s, ok := given[name]
		if !ok {
			continue
		}
		v, err := parseValue(name, s)
		if err != nil {
			problems = append(problems, fmt.Sprintf("%s: %v", label(name), err))
			continue
		}
		obj[name] = v
	}
	var unknown []string
	for name := range given {
		if !slices.Contains(FieldNames(), name) {
			unknown = append(unknown, name)
		}
	}
	sort.Strings(unknown)
	for _, name := range unknown {
		problems = append(problems, "unknown limit "+name)
	}
	if len(problems) > 0 {
		return Limits{}, fmt.Errorf("%w: %s", ErrInvalid, strings.Join(problems, "; "))
	}
	b, err := json.Marshal(obj)
	if err != nil {
		return Limits{}, fmt.Errorf("encode limits: %w", err)
	}
	// The API's own strict reading: list names, GPU types.
	return ParseLimits(b)
}

// Text writes the limits l sets as ParseText reads them, keyed by limit
// name (GPU types sorted).
func (l *Limits) Text() map[string]string {
	out := map[string]string{}
	for _, f := range fields() {
		if f.isSet(l) {
			out[f.name] = f.text(l)
		}
	}
	if len(l.MaxGPUsByType) > 0 {
		var pairs []string
		for _, t := range slices.Sorted(maps.Keys(l.MaxGPUsByType)) {
			pairs = append(pairs, t+"="+l.MaxGPUsByType[t].String())
		}
		out[gpuTypeField] = strings.Join(pairs, ",")
	}
	return out
}
