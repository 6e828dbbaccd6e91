// Package catalog is the table of cloud instance types the gateway knows:
// their shapes (vCPUs, memory, GPUs) for quotas, their approximate prices for
// usage accounting, and a cheapest-fit search for the cloud providers that
// choose an instance type for a worker (EC2, Fargate, Compute Engine).
//
// The table is data, not configuration: a Catalog is built once from
// Builtin (or an operator's own list) plus the operator's negotiated prices,
// is immutable afterwards, and can be shared by every request without
// locking.
package catalog

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"path"
	"slices"
	"strings"
)

// InstanceType is one machine shape.
type InstanceType struct {
	Name      string  `json:"name"`               // "m5.xlarge", "n2-standard-4", "g5.xlarge", "a2-highgpu-1g", ...
	Cloud     string  `json:"cloud"`              // "aws" or "gce"
	VCPUs     int     `json:"vcpus"`              // virtual CPUs (hyperthreads)
	MemoryGiB float64 `json:"memory_gib"`         // memory in GiB
	GPUs      int     `json:"gpus"`               // accelerators that come with the type
	GPUType   string  `json:"gpu_type,omitempty"` // short lower-case name: "t4", "a10g", "l4", "v100", "a100", "a100-80gb", "h100"
	PriceHour float64 `json:"price_hour"`         // approximate on-demand USD per hour, Linux, us-east-1 / us-central1
	// Unpriced marks a type whose price nobody knows (listed by the
	// cloud, absent from the table and from the operator's prices): its
	// PriceHour is meaningless, it sorts after every priced type, and JSON
	// carries its price_hour as null. A known price of 0 (a type paid for
	// up front) is priced.
	Unpriced bool `json:"-"`
}

// instanceTypeJSON is InstanceType on the wire, price_hour null when
// unpriced, so that a reader never takes "unknown" for "free".
type instanceTypeJSON struct {
	Name      string   `json:"name"`
	Cloud     string   `json:"cloud"`
	VCPUs     int      `json:"vcpus"`
	MemoryGiB float64  `json:"memory_gib"`
	GPUs      int      `json:"gpus"`
	GPUType   string   `json:"gpu_type,omitempty"`
	PriceHour *float64 `json:"price_hour"`
}

// MarshalJSON writes price_hour as null for an unpriced type.
func (t InstanceType) MarshalJSON() ([]byte, error) {
	w := instanceTypeJSON{Name: t.Name, Cloud: t.Cloud, VCPUs: t.VCPUs, MemoryGiB: t.MemoryGiB, GPUs: t.GPUs, GPUType: t.GPUType}
	if !t.Unpriced {
		w.PriceHour = &t.PriceHour
	}
	return json.Marshal(w)
}

// UnmarshalJSON reads a null or absent price_hour as unpriced.
func (t *InstanceType) UnmarshalJSON(b []byte) error {
	var w instanceTypeJSON
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	*t = InstanceType{Name: w.Name, Cloud: w.Cloud, VCPUs: w.VCPUs, MemoryGiB: w.MemoryGiB, GPUs: w.GPUs, GPUType: w.GPUType, Unpriced: w.PriceHour == nil}
	if w.PriceHour != nil {
		t.PriceHour = *w.PriceHour
	}
	return nil
}

// String describes the shape in one line, as error messages and logs show it.
func (t InstanceType) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s (%s: %d vCPUs, %g GiB", t.Name, t.Cloud, t.VCPUs, t.MemoryGiB)
	if t.GPUs > 0 {
		fmt.Fprintf(&b, ", %dx %s", t.GPUs, t.GPUType)
	}
	if t.Unpriced {
		b.WriteString(", unpriced)")
	} else {
		fmt.Fprintf(&b, ", $%g/h)", t.PriceHour)
	}
	return b.String()
}

// Errors returned by this package; test for them with errors.Is. The
// messages carry the details (which entry, what to change).
var (
	// ErrInvalid marks a bad instance table or price override given to New.
	ErrInvalid = errors.New("catalog: invalid instance types or prices")
	// ErrInvalidRequirements marks Requirements that cannot be satisfied by
	// construction (negative sizes, unknown cloud or GPU type, bad glob).
	ErrInvalidRequirements = errors.New("catalog: invalid requirements")
	// ErrNoFit means the requirements are valid but no type in the catalog
	// satisfies all of them.
	ErrNoFit = errors.New("catalog: no instance type fits")
)

// Catalog is a validated set of instance types with prices applied. It is
// immutable after New, so it is safe for concurrent use.
type Catalog struct {
	byName   map[string]InstanceType
	byPrice  []InstanceType // sorted by price, then name; unpriced types last
	gpuTypes []string       // distinct GPU types present, sorted
}

// New validates types, applies prices (instance type name to USD per hour,
// overriding PriceHour with the operator's negotiated price) and returns the
// catalog. The inputs are copied, so later changes to them do not affect it.
//
// Every problem found is reported, not just the first, so that an operator
// fixing a configuration file sees them all at once; each names the entry
// and says what to fix. The error wraps ErrInvalid.
func New(types []InstanceType, prices map[string]float64) (*Catalog, error) {
	var problems []string
	byName := make(map[string]InstanceType, len(types))
	firstAt := make(map[string]int, len(types))
	for i, t := range types {
		label := entryLabel(i, t)
		for _, p := range validate(t) {
			problems = append(problems, label+": "+p)
		}
		if t.Name == "" {
			continue
		}
		if j, dup := firstAt[t.Name]; dup {
			problems = append(problems, fmt.Sprintf("%s: duplicate of entry %d with the same name; remove one of them or rename it", label, j))
			continue
		}
		firstAt[t.Name] = i
		byName[t.Name] = t
	}

	names := make([]string, 0, len(prices))
	for name := range prices {
		names = append(names, name)
	}
	slices.Sort(names) // deterministic messages
	for _, name := range names {
		price := prices[name]
		t, ok := byName[name]
		if !ok {
			msg := fmt.Sprintf("price override for %q: no instance type of that name in the catalog; fix the name or remove the override", name)
			if s := suggest(name, byName); s != "" {
				msg += fmt.Sprintf(" (did you mean %q? names are case-sensitive)", s)
			}
			problems = append(problems, msg)
			continue
		}
		if !validPrice(price) {
			problems = append(problems, fmt.Sprintf("price override for %q is %v; set it to a USD price per hour >= 0", name, price))
			continue
		}
		t.PriceHour, t.Unpriced = price, false
		byName[name] = t
	}

	switch len(problems) {
	case 0:
	case 1:
		return nil, fmt.Errorf("%w: %s", ErrInvalid, problems[0])
	default:
		// Numbered, because each problem carries its own "; fix" clause.
		for i := range problems {
			problems[i] = fmt.Sprintf("(%d) %s", i+1, problems[i])
		}
		return nil, fmt.Errorf("%w (%d problems): %s", ErrInvalid, len(problems), strings.Join(problems, " "))
	}

	c := &Catalog{byName: byName, byPrice: make([]InstanceType, 0, len(byName))}
	gpus := map[string]bool{}
	for _, t := range byName {
		c.byPrice = append(c.byPrice, t)
		if t.GPUType != "" && !gpus[t.GPUType] {
			gpus[t.GPUType] = true
			c.gpuTypes = append(c.gpuTypes, t.GPUType)
		}
	}
	slices.SortFunc(c.byPrice, comparePriceName)
	slices.Sort(c.gpuTypes)
	return c, nil
}

// entryLabel names a table entry in messages: by index, because the name
// itself may be the problem, and by name when there is one.
func entryLabel(i int, t InstanceType) string {
	if t.Name == "" {
		return fmt.Sprintf("entry %d (no name, cloud %q)", i, t.Cloud)
	}
	return fmt.Sprintf("entry %d %q", i, t.Name)
}

// validate returns what is wrong with one entry, each with the fix.
func validate(t InstanceType) []string {
	var p []string
	switch {
	case t.Name == "":
		p = append(p, `name is empty; set it to the cloud's instance type name, e.g. "m5.xlarge"`)
	case strings.TrimSpace(t.Name) != t.Name:
		p = append(p, "name has leading or trailing spaces; remove them")
	}
	switch t.Cloud {
	case CloudAWS, CloudGCE:
	case "":
		p = append(p, fmt.Sprintf("cloud is empty; set it to %q or %q", CloudAWS, CloudGCE))
	default:
		p = append(p, fmt.Sprintf("cloud %q is not known; use %q or %q", t.Cloud, CloudAWS, CloudGCE))
	}
	if t.VCPUs <= 0 {
		p = append(p, fmt.Sprintf("vcpus is %d; set it to the number of vCPUs the machine has (> 0)", t.VCPUs))
	}
	if !(t.MemoryGiB > 0) || math.IsInf(t.MemoryGiB, 0) {
		p = append(p, fmt.Sprintf("memory_gib is %v; set it to the machine's memory in GiB (> 0)", t.MemoryGiB))
	}
	switch {
	case t.GPUs < 0:
		p = append(p, fmt.Sprintf("gpus is %d; set it to the number of GPUs (0 for none)", t.GPUs))
	case t.GPUs > 0 && t.GPUType == "":
		p = append(p, fmt.Sprintf(`gpus is %d but gpu_type is empty; set gpu_type to the accelerator's short name, e.g. "a100"`, t.GPUs))
	case t.GPUs == 0 && t.GPUType != "":
		p = append(p, fmt.Sprintf("gpu_type is %q but gpus is 0; set gpus to the number of accelerators or clear gpu_type", t.GPUType))
	}
	if t.GPUType != "" && !isShortName(t.GPUType) {
		p = append(p, fmt.Sprintf(`gpu_type %q is not a short lower-case name; use letters, digits and "-" only, e.g. "a100-80gb"`, t.GPUType))
	}
	if t.Unpriced && t.PriceHour != 0 {
		p = append(p, fmt.Sprintf("price_hour is %v but the type is marked unpriced; clear one of them", t.PriceHour))
	}
	if !validPrice(t.PriceHour) {
		p = append(p, fmt.Sprintf("price_hour is %v; set it to the on-demand USD price per hour (>= 0)", t.PriceHour))
	}
	return p
}

// isShortName reports whether s uses only [a-z0-9-], so that GPU types
// compare equal however a configuration file spelled them.
func isShortName(s string) bool {
	for _, r := range s {
		if !('a' <= r && r <= 'z' || '0' <= r && r <= '9' || r == '-') {
			return false
		}
	}
	return s != ""
}

// validPrice allows zero (a type paid for up front costs nothing per hour)
// but not negative or non-finite values, which would corrupt cost totals.
func validPrice(p float64) bool {
	return p >= 0 && !math.IsInf(p, 0) // NaN fails p >= 0
}

// suggest finds the name that differs from name only in case, the likeliest
// typo in an operator's price list.
func suggest(name string, byName map[string]InstanceType) string {
	for n := range byName {
		if strings.EqualFold(n, name) {
			return n
		}
	}
	return ""
}

// comparePriceName orders priced types by price and unpriced ones after
// them all: "cheapest" must never mean "price unknown".
func comparePriceName(a, b InstanceType) int {
	if a.Unpriced != b.Unpriced {
		if a.Unpriced {
			return 1
		}
		return -1
	}
	if a.Unpriced {
		return cmp.Or(strings.Compare(a.Name, b.Name), strings.Compare(a.Cloud, b.Cloud))
	}
	return cmp.Or(cmp.Compare(a.PriceHour, b.PriceHour), strings.Compare(a.Name, b.Name), strings.Compare(a.Cloud, b.Cloud))
}

func compareCloudName(a, b InstanceType) int {
	return cmp.Or(strings.Compare(a.Cloud, b.Cloud), strings.Compare(a.Name, b.Name))
}

// Lookup returns the type with exactly this name. Matching is
// case-sensitive, as the clouds' APIs are.
func (c *Catalog) Lookup(name string) (InstanceType, bool) {
	t, ok := c.byName[name]
	return t, ok
}

// Types returns a copy of the types of one cloud ("" for all), sorted by
// price then name with unpriced types last, i.e. in the order Cheapest
// considers them. An unknown
// cloud has no types.
func (c *Catalog) Types(cloud string) []InstanceType {
	var out []InstanceType
	for _, t := range c.byPrice {
		if cloud == "" || t.Cloud == cloud {
			out = append(out, t)
		}
	}
	return out
}

// Requirements describe what a worker needs; Cheapest returns the cheapest
// type satisfying all of them, as Karpenter does.
type Requirements struct {
	Cloud        string  // "aws", "gce", or "" for any cloud
	MinVCPUs     int     // at least this many vCPUs
	MinMemoryGiB float64 // at least this much memory
	// GPUs is the minimum number of GPUs. Zero excludes GPU types, because
	// an accelerator machine's price is dominated by GPUs that a CPU-only
	// worker would leave idle.
	GPUs int
	// GPUType restricts the GPU model ("a10g", "a100", ...); "" accepts any.
	// It needs GPUs > 0.
	GPUType string
	// Allowed lists the names or path.Match globs ("m5.*") the operator
	// permits; empty allows every type.
	Allowed []string
}

// String states the requirements as error messages show them.
func (r Requirements) String() string {
	var b strings.Builder
	if r.Cloud == "" {
		b.WriteString("an instance type on any cloud")
	} else {
		fmt.Fprintf(&b, "an instance type on %s", r.Cloud)
	}
	fmt.Fprintf(&b, " with >= %d vCPUs, >= %g GiB memory, ", r.MinVCPUs, r.MinMemoryGiB)
	switch {
	case r.GPUs == 0:
		b.WriteString("no GPUs")
	case r.GPUType == "":
		fmt.Fprintf(&b, ">= %d GPUs of any type", r.GPUs)
	default:
		fmt.Fprintf(&b, ">= %d %s GPUs", r.GPUs, r.GPUType)
	}
	if len(r.Allowed) > 0 {
		fmt.Fprintf(&b, ", allowed %q", r.Allowed)
	}
	return b.String()
}

// maxClosest is how many near misses a no-fit error lists: enough to show
// which way to relax the requirements, few enough to read.
const maxClosest = 3

// Cheapest returns the cheapest type that satisfies r, breaking price ties
// by name so the choice is stable; an unpriced type only when no priced
// one fits.
//
// Invalid requirements give an error wrapping ErrInvalidRequirements (and
// path.ErrBadPattern for a malformed glob). When nothing fits, the error
// wraps ErrNoFit, restates what was asked and lists the closest candidates
// with what each lacks, so the user or operator can see what to relax.
func (c *Catalog) Cheapest(r Requirements) (InstanceType, error) {
	if err := c.check(r); err != nil {
		return InstanceType{}, err
	}
	type miss struct {
		t       InstanceType
		score   float64
		reasons []string
	}
	var misses []miss
	for _, t := range c.byPrice {
		if r.Cloud != "" && t.Cloud != r.Cloud {
			continue
		}
		reasons, score := shortfalls(t, r)
		if len(reasons) == 0 {
			return t, nil
		}
		misses = append(misses, miss{t, score, reasons})
	}
	if len(misses) == 0 {
		return InstanceType{}, fmt.Errorf("%w: asked for %s, but the catalog has no instance types there", ErrNoFit, r)
	}
	// Stable, so that equal scores keep price order.
	slices.SortStableFunc(misses, func(a, b miss) int { return cmp.Compare(a.score, b.score) })
	closest := make([]string, 0, maxClosest)
	for _, m := range misses[:min(len(misses), maxClosest)] {
		closest = append(closest, fmt.Sprintf("%s lacks: %s", m.t, strings.Join(m.reasons, ", ")))
	}
	msg := fmt.Sprintf("asked for %s; closest: %s", r, strings.Join(closest, "; "))
	for _, p := range r.Allowed {
		if !c.anyMatch(p, r.Cloud) {
			msg += fmt.Sprintf("; allowed pattern %q matches no known type", p)
		}
	}
	return InstanceType{}, fmt.Errorf("%w: %s", ErrNoFit, msg)
}

// Fitting returns up to n types that satisfy r, cheapest first (all of
// them when n <= 0): the first is Cheapest's choice, the others are what a
// backend falls back to when the first has no capacity.
func (c *Catalog) Fitting(r Requirements, n int) ([]InstanceType, error) {
	if err := c.check(r); err != nil {
		return nil, err
	}
	var out []InstanceType
	for _, t := range c.byPrice {
		if r.Cloud != "" && t.Cloud != r.Cloud {
			continue
		}
		if reasons, _ := shortfalls(t, r); len(reasons) == 0 {
			out = append(out, t)
			if n > 0 && len(out) == n {
				break
			}
		}
	}
	return out, nil
}

// check rejects requirements that are wrong whatever the catalog holds,
// rather than reporting them as "nothing fits".
func (c *Catalog) check(r Requirements) error {
	switch r.Cloud {
	case "", CloudAWS, CloudGCE:
	default:
		return fmt.Errorf("%w: cloud %q is not known; use %q, %q or \"\" for any", ErrInvalidRequirements, r.Cloud, CloudAWS, CloudGCE)
	}
	if r.MinVCPUs < 0 {
		return fmt.Errorf("%w: MinVCPUs is %d; it must be >= 0", ErrInvalidRequirements, r.MinVCPUs)
	}
	if !(r.MinMemoryGiB >= 0) || math.IsInf(r.MinMemoryGiB, 0) {
		return fmt.Errorf("%w: MinMemoryGiB is %v; it must be a finite number >= 0", ErrInvalidRequirements, r.MinMemoryGiB)
	}
	if r.GPUs < 0 {
		return fmt.Errorf("%w: GPUs is %d; it must be >= 0", ErrInvalidRequirements, r.GPUs)
	}
	if r.GPUType != "" {
		if r.GPUs == 0 {
			return fmt.Errorf("%w: GPUType is %q but GPUs is 0; set GPUs to the number of GPUs needed", ErrInvalidRequirements, r.GPUType)
		}
		if _, ok := slices.BinarySearch(c.gpuTypes, r.GPUType); !ok {
			return fmt.Errorf("%w: GPU type %q is not in the catalog; known types: %q", ErrInvalidRequirements, r.GPUType, c.gpuTypes)
		}
	}
	for _, p := range r.Allowed {
		// Match validates the whole pattern, even against an empty name.
		if _, err := path.Match(p, ""); err != nil {
			return fmt.Errorf("%w: allowed pattern %q: %w", ErrInvalidRequirements, p, err)
		}
	}
	return nil
}

// shortfalls lists what t lacks for r, and scores how far it is off: the
// relative shortfall of each size plus one for each unmet yes/no condition.
// The score only orders near misses for the error message.
func shortfalls(t InstanceType, r Requirements) ([]string, float64) {
	var reasons []string
	var score float64
	if t.VCPUs < r.MinVCPUs {
		reasons = append(reasons, fmt.Sprintf("%d vCPUs < %d", t.VCPUs, r.MinVCPUs))
		score += float64(r.MinVCPUs-t.VCPUs) / float64(r.MinVCPUs)
	}
	if t.MemoryGiB < r.MinMemoryGiB {
		reasons = append(reasons, fmt.Sprintf("%g GiB < %g GiB", t.MemoryGiB, r.MinMemoryGiB))
		score += (r.MinMemoryGiB - t.MemoryGiB) / r.MinMemoryGiB
	}
	switch {
	case r.GPUs == 0 && t.GPUs > 0:
		reasons = append(reasons, "has GPUs but none were asked for")
		score++
	case t.GPUs < r.GPUs:
		reasons = append(reasons, fmt.Sprintf("%d GPUs < %d", t.GPUs, r.GPUs))
		score += float64(r.GPUs-t.GPUs) / float64(r.GPUs)
	}
	if r.GPUType != "" && t.GPUType != r.GPUType {
		// A type without GPUs lacks the model too, so that a GPU machine of
		// the wrong model ranks closer than a CPU-only one.
		if t.GPUs > 0 {
			reasons = append(reasons, fmt.Sprintf("GPU type %s, not %s", t.GPUType, r.GPUType))
		}
		score++
	}
	if !allowed(t.Name, r.Allowed) {
		reasons = append(reasons, "not in Allowed")
		score++
	}
	return reasons, score
}

// allowed reports whether name matches one of the patterns; check has
// already rejected malformed ones.
func allowed(name string, patterns []string) bool {
	if len(patterns) == 0 {
		return true
	}
	for _, p := range patterns {
		if ok, _ := path.Match(p, name); ok {
			return true
		}
	}
	return false
}

// anyMatch reports whether pattern matches a type of cloud ("" for any),
// to point out a misspelt Allowed entry.
func (c *Catalog) anyMatch(pattern, cloud string) bool {
	for _, t := range c.byPrice {
		if cloud != "" && t.Cloud != cloud {
			continue
		}
		if ok, _ := path.Match(pattern, t.Name); ok {
			return true
		}
	}
	return false
}

// GPUs is what an operator declares of an instance type's accelerators,
// over what the cloud's listing says: a type whose GPUs the gateway does
// not count by itself (AMD's, Habana's, ones of no stated make) counts as
// a GPU type when its workers' image can use them, and Count 0 takes a
// type's GPUs away.
type GPUs struct {
	Count int
	Type  string // short lower-case name; empty when Count is 0
}

// ApplyGPUs returns a copy of types with the GPUs of the named ones
// replaced by the operator's declaration; other types are unchanged.
func ApplyGPUs(types []InstanceType, declared map[string]GPUs) []InstanceType {
	if len(declared) == 0 {
		return types
	}
	out := slices.Clone(types)
	for i, t := range out {
		if g, ok := declared[t.Name]; ok {
			out[i].GPUs, out[i].GPUType = g.Count, g.Type
		}
	}
	return out
}

// CheckGPUs says what is wrong with a declaration, for the configuration
// key that holds it; nil when it is valid.
func CheckGPUs(g GPUs) error {
	switch {
	case g.Count < 0:
		return fmt.Errorf("gpus is %d; set it to the number of GPUs (0 for none)", g.Count)
	case g.Count > 0 && !isShortName(g.Type):
		return fmt.Errorf(`gpus is %d but gpu_type %q is not a short lower-case name; set gpu_type to the accelerator's, e.g. "radeon-pro-v520"`, g.Count, g.Type)
	case g.Count == 0 && g.Type != "":
		return fmt.Errorf("gpu_type is %q but gpus is 0; set gpus to the number of accelerators or remove gpu_type", g.Type)
	}
	return nil
}
