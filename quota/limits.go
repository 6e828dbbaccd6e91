// Package quota decides what each user may run: limits set per user, per
// group and by default (in the configuration file or through the admin
// API), resolved into one effective set per user, and checked against
// what the user already runs and has used this month.
//
// Resolution, field by field (each limit is resolved on its own):
//
//  1. the user's own entry, when it sets the field;
//  2. otherwise the most generous value among the entries of the user's
//     groups that set it (a group entry is an allowance for each member,
//     not a pool the members share);
//  3. otherwise the default entry;
//  4. otherwise no limit.
//
// For one subject, an entry stored through the admin API overrides the
// configuration file's entry field by field. Below the default entry's
// file and API layers lie the built-in defaults (BuiltinDefaults: a few
// clusters and builds per user), so that a gateway nobody configured
// quotas for is not unbounded; a default entry that sets a field, even to
// "unlimited", replaces the built-in value of that field. The gateway-wide cluster.*
// settings bound every cluster whatever the quotas say.
package quota

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode"
)

// ErrInvalid marks a quota entry or subject that cannot be used.
var ErrInvalid = errors.New("invalid quota")

// Amount is a numeric limit. Unlimited (+Inf) is written "unlimited", so
// that a group can grant more than the default without inventing a number.
type Amount float64

// Unlimited is the Amount that bounds nothing.
var Unlimited = Amount(math.Inf(1))

// IsUnlimited reports whether a bounds nothing.
func (a Amount) IsUnlimited() bool { return math.IsInf(float64(a), 1) }

func (a Amount) String() string {
	if a.IsUnlimited() {
		return "unlimited"
	}
	return strconv.FormatFloat(float64(a), 'f', -1, 64)
}

// MarshalJSON writes a number, or "unlimited".
func (a Amount) MarshalJSON() ([]byte, error) {
	if a.IsUnlimited() {
		return []byte(`"unlimited"`), nil
	}
	return []byte(a.String()), nil
}

// UnmarshalJSON reads a non-negative number or "unlimited".
func (a *Amount) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err == nil {
		v, err := ParseAmount(s)
		*a = v
		return err
	}
	var f float64
	if err := json.Unmarshal(b, &f); err != nil {
		return fmt.Errorf("want a number or \"unlimited\", got %s", b)
	}
	if f < 0 {
		return fmt.Errorf("want a number of at least 0 or \"unlimited\", got %s", b)
	}
	*a = Amount(f)
	return nil
}

// ParseAmount reads a non-negative number or "unlimited".
func ParseAmount(s string) (Amount, error) {
	s = strings.TrimSpace(s)
	if strings.EqualFold(s, "unlimited") {
		return Unlimited, nil
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || f < 0 || math.IsNaN(f) || math.IsInf(f, 0) {
		return 0, fmt.Errorf("want a number of at least 0 or \"unlimited\", got %q", s)
	}
	return Amount(f), nil
}

// Duration is a time limit, written like "2h" or "unlimited".
type Duration time.Duration

// UnlimitedDuration bounds nothing.
const UnlimitedDuration = Duration(math.MaxInt64)

func (d Duration) String() string {
	if d == UnlimitedDuration {
		return "unlimited"
	}
	return time.Duration(d).String()
}

// MarshalJSON writes a Go duration string or "unlimited".
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(d.String()) }

// UnmarshalJSON reads a duration string ("90m"), a number of seconds, or
// "unlimited".
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		var f float64
		// Positive, and short of what a time.Duration holds (~292 years).
		if err := json.Unmarshal(b, &f); err != nil || !(f >= 1) || f > 100*365*24*3600 {
			return fmt.Errorf("want a duration such as \"2h\" (or seconds, from 1 to 100 years' worth) or \"unlimited\", got %s", b)
		}
		*d = Duration(time.Duration(f * float64(time.Second)))
		return nil
	}
	v, err := ParseDuration(s)
	*d = v
	return err
}

// ParseDuration reads "2h", "90m" or "unlimited".
func ParseDuration(s string) (Duration, error) {
	s = strings.TrimSpace(s)
	if strings.EqualFold(s, "unlimited") {
		return UnlimitedDuration, nil
	}
	v, err := time.ParseDuration(s)
	if err != nil || v < time.Second {
		return 0, fmt.Errorf("want a duration of at least 1s such as \"2h\", or \"unlimited\", got %q", s)
	}
	return Duration(v), nil
}

// Limits is one entry's limits. A nil field is not set by the entry and
// inherits (see the package comment); an allow-list of ["*"] allows all.
type Limits struct {
	MaxClusters          *Amount           `json:"max_clusters,omitempty"`
	MaxWorkersPerCluster *Amount           `json:"max_workers_per_cluster,omitempty"`
	MaxVCPUs             *Amount           `json:"max_vcpus,omitempty"`
	MaxMemoryGiB         *Amount           `json:"max_memory_gib,omitempty"`
	MaxGPUs              *Amount           `json:"max_gpus,omitempty"`
	MaxGPUsByType        map[string]Amount `json:"max_gpus_by_type,omitempty"`
	AllowedInstanceTypes []string          `json:"allowed_instance_types,omitempty"`
	AllowedProviders     []string          `json:"allowed_providers,omitempty"`
	AllowedRegions       []string          `json:"allowed_regions,omitempty"`
	MaxIdleTimeout       *Duration         `json:"max_idle_timeout,omitempty"`
	MaxLifetime          *Duration         `json:"max_lifetime,omitempty"`
	MonthlyVCPUHours     *Amount           `json:"monthly_vcpu_hours,omitempty"`
	MonthlyGPUHours      *Amount           `json:"monthly_gpu_hours,omitempty"`
	MaxBuilds            *Amount           `json:"max_builds,omitempty"`
}

// field is one limit, with what generic code (resolution, set, unset,
// listing) needs to handle it without knowing its type.
type field struct {
	name, doc string
	isSet     func(*Limits) bool
	copy      func(dst, src *Limits)
	clear     func(*Limits)
	// moreGenerous reports whether a's value allows more than b's.
	moreGenerous func(a, b *Limits) bool
	// text writes the value as ParseText reads it.
	text func(*Limits) string
}

// scalarField is a limit held by pointer (an Amount or a Duration), where
// more is more generous.
func scalarField[T Amount | Duration](name, doc string, p func(*Limits) **T) field {
	return field{
		name: name, doc: doc,
		isSet: func(l *Limits) bool { return *p(l) != nil },
		copy: func(dst, src *Limits) {
			v := **p(src)
			*p(dst) = &v
		},
		clear:        func(l *Limits) { *p(l) = nil },
		moreGenerous: func(a, b *Limits) bool { return **p(a) > **p(b) },
		text:         func(l *Limits) string { return fmt.Sprint(**p(l)) },
	}
}

func listField(name, doc string, p func(*Limits) *[]string) field {
	return field{
		name: name, doc: doc,
		isSet: func(l *Limits) bool { return *p(l) != nil },
		copy:  func(dst, src *Limits) { *p(dst) = append([]string(nil), *p(src)...) },
		clear: func(l *Limits) { *p(l) = nil },
		moreGenerous: func(a, b *Limits) bool {
			// Only used to pick one source to name; lists are unioned.
			return allowsAll(*p(a)) || (!allowsAll(*p(b)) && len(*p(a)) > len(*p(b)))
		},
		text: func(l *Limits) string { return strings.Join(*p(l), ",") },
	}
}

// fields lists every limit except max_gpus_by_type, which is resolved per
// GPU type.
func fields() []field {
	return []field{
		scalarField("max_clusters", "clusters running at once", func(l *Limits) **Amount { return &l.MaxClusters }),
		scalarField("max_workers_per_cluster", "workers in one cluster", func(l *Limits) **Amount { return &l.MaxWorkersPerCluster }),
		scalarField("max_vcpus", "vCPUs across all running clusters", func(l *Limits) **Amount { return &l.MaxVCPUs }),
		scalarField("max_memory_gib", "memory (GiB) across all running clusters", func(l *Limits) **Amount { return &l.MaxMemoryGiB }),
		scalarField("max_gpus", "GPUs across all running clusters", func(l *Limits) **Amount { return &l.MaxGPUs }),
		listField("allowed_instance_types", "instance types clusters may use (globs; [\"*\"]: any)", func(l *Limits) *[]string { return &l.AllowedInstanceTypes }),
		listField("allowed_providers", "providers clusters may run on ([\"*\"]: any)", func(l *Limits) *[]string { return &l.AllowedProviders }),
		listField("allowed_regions", "regions clusters may run in ([\"*\"]: any)", func(l *Limits) *[]string { return &l.AllowedRegions }),
		scalarField("max_idle_timeout", "longest idle timeout a cluster may have", func(l *Limits) **Duration { return &l.MaxIdleTimeout }),
		scalarField("max_lifetime", "longest a cluster may run", func(l *Limits) **Duration { return &l.MaxLifetime }),
		scalarField("monthly_vcpu_hours", "vCPU-hours per calendar month (UTC)", func(l *Limits) **Amount { return &l.MonthlyVCPUHours }),
		scalarField("monthly_gpu_hours", "GPU-hours per calendar month (UTC)", func(l *Limits) **Amount { return &l.MonthlyGPUHours }),
		scalarField("max_builds", "environment image builds queued or running at once", func(l *Limits) **Amount { return &l.MaxBuilds }),
	}
}

const gpuTypeField = "max_gpus_by_type"

// FieldDocs returns every limit's name and meaning, in display order.
func FieldDocs() [][2]string {
	var out [][2]string
	for _, f := range fields() {
		out = append(out, [2]string{f.name, f.doc})
	}
	out = append(out, [2]string{gpuTypeField, "GPUs of each type across all running clusters (a map: type -> count)"})
	return out
}

func allowsAll(list []string) bool {
	for _, s := range list {
		if s == "*" {
			return true
		}
	}
	return false
}

// Empty reports whether the entry sets nothing.
func (l *Limits) Empty() bool {
	for _, f := range fields() {
		if f.isSet(l) {
			return false
		}
	}
	return len(l.MaxGPUsByType) == 0
}

// Merge sets every field that patch sets (max_gpus_by_type per GPU type).
func (l *Limits) Merge(patch *Limits) {
	for _, f := range fields() {
		if f.isSet(patch) {
			f.copy(l, patch)
		}
	}
	for k, v := range patch.MaxGPUsByType {
		if l.MaxGPUsByType == nil {
			l.MaxGPUsByType = map[string]Amount{}
		}
		l.MaxGPUsByType[k] = v
	}
}

// Unset clears the named fields; "max_gpus_by_type.<type>" clears one GPU
// type. Unknown names are an error naming the known ones.
func (l *Limits) Unset(names []string) error {
	byName := map[string]field{}
	for _, f := range fields() {
		byName[f.name] = f
	}
	var unknown []string
	for _, n := range names {
		switch {
		case byName[n].name != "":
			byName[n].clear(l)
		case n == gpuTypeField:
			l.MaxGPUsByType = nil
		case strings.HasPrefix(n, gpuTypeField+".") && n != gpuTypeField+".":
			delete(l.MaxGPUsByType, strings.TrimPrefix(n, gpuTypeField+"."))
			if len(l.MaxGPUsByType) == 0 {
				l.MaxGPUsByType = nil
			}
		default:
			unknown = append(unknown, n)
		}
	}
	if len(unknown) > 0 {
		return fmt.Errorf("%w: unknown limit(s) %s; known limits are %s", ErrInvalid, strings.Join(unknown, ", "), strings.Join(FieldNames(), ", "))
	}
	return nil
}

// FieldNames lists every limit's name.
func FieldNames() []string {
	var out []string
	for _, d := range FieldDocs() {
		out = append(out, d[0])
	}
	return out
}

// ParseLimits decodes an entry strictly: an unknown field, a negative
// number or a malformed list is an error that names the field.
func ParseLimits(b []byte) (Limits, error) {
	var fieldsOf map[string]json.RawMessage
	dec := json.NewDecoder(bytes.NewReader(b))
	if err := dec.Decode(&fieldsOf); err != nil || (fieldsOf == nil && strings.TrimSpace(string(b)) != "null") {
		return Limits{}, fmt.Errorf("%w: want a JSON object of limits, such as {\"max_clusters\": 5}", ErrInvalid)
	}
	if dec.More() {
		return Limits{}, fmt.Errorf("%w: data after the JSON object of limits", ErrInvalid)
	}
	known := map[string]bool{}
	for _, n := range FieldNames() {
		known[n] = true
	}
	names := make([]string, 0, len(fieldsOf))
	for k := range fieldsOf {
		names = append(names, k)
	}
	sort.Strings(names)
	var l Limits
	var problems []string
	for _, k := range names {
		if !known[k] {
			problems = append(problems, fmt.Sprintf("unknown limit %q; known limits are %s", k, strings.Join(FieldNames(), ", ")))
			continue
		}
		// One field at a time, so that each error names its field.
		one, _ := json.Marshal(map[string]json.RawMessage{k: fieldsOf[k]})
		if err := json.Unmarshal(one, &l); err != nil {
			msg := err.Error()
			var ute *json.UnmarshalTypeError
			if errors.As(err, &ute) {
				msg = fmt.Sprintf("want %s, got a JSON %s", ute.Type, ute.Value)
			}
			problems = append(problems, k+": "+strings.TrimPrefix(msg, "json: "))
		}
	}
	if len(problems) > 0 {
		return Limits{}, fmt.Errorf("%w: %s", ErrInvalid, strings.Join(problems, "; "))
	}
	if err := l.Validate(); err != nil {
		return Limits{}, err
	}
	return l, nil
}

// Validate checks what the JSON types do not: names in lists and GPU types.
func (l *Limits) Validate() error {
	var problems []string
	for name, list := range map[string][]string{
		"allowed_instance_types": l.AllowedInstanceTypes, "allowed_providers": l.AllowedProviders, "allowed_regions": l.AllowedRegions,
	} {
		if list != nil && len(list) == 0 {
			problems = append(problems, fmt.Sprintf("%s: an empty list would allow nothing; list what is allowed, [\"*\"] for anything, or unset the limit", name))
		}
		for _, s := range list {
			if s == "" || strings.ContainsFunc(s, unicode.IsSpace) || len(s) > 128 {
				problems = append(problems, fmt.Sprintf("%s: %q is not a name (no spaces, 1 to 128 characters)", name, s))
			}
		}
	}
	for k := range l.MaxGPUsByType {
		if k == "" || strings.ContainsFunc(k, unicode.IsSpace) || len(k) > 64 {
			problems = append(problems, fmt.Sprintf("%s: %q is not a GPU type such as a100 or t4", gpuTypeField, k))
		}
	}
	sort.Strings(problems)
	if len(problems) > 0 {
		return fmt.Errorf("%w: %s", ErrInvalid, strings.Join(problems, "; "))
	}
	return nil
}

// Subject names whom an entry applies to: "default", "user:<name>" or
// "group:<name>".
type Subject string

// DefaultSubject is the entry for users no other entry covers.
const DefaultSubject Subject = "default"

// UserSubject and GroupSubject build subjects.
func UserSubject(name string) Subject  { return Subject("user:" + name) }
func GroupSubject(name string) Subject { return Subject("group:" + name) }

// ParseSubject validates a subject.
func ParseSubject(s string) (Subject, error) {
	s = strings.TrimSpace(s)
	if s == string(DefaultSubject) {
		return DefaultSubject, nil
	}
	kind, name, ok := strings.Cut(s, ":")
	if !ok || (kind != "user" && kind != "group") {
		return "", fmt.Errorf("%w: subject %q must be default, user:<name> or group:<name>", ErrInvalid, s)
	}
	if name == "" || len(name) > 256 || strings.ContainsFunc(name, unicode.IsControl) {
		return "", fmt.Errorf("%w: subject %q needs a name of 1 to 256 printable characters after %s:", ErrInvalid, s, kind)
	}
	return Subject(kind + ":" + name), nil
}
