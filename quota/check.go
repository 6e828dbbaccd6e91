package quota

import (
	"errors"
	"fmt"
	"math"
	"path"
	"sort"
	"strconv"
	"time"
)

// ErrExceeded matches every *ExceededError.
var ErrExceeded = errors.New("quota exceeded")

// ExceededError says which limit a request is over, where the limit came
// from, and, in its message, the limit, what is in use and what was asked.
type ExceededError struct {
	Limit  string // the field, e.g. "max_vcpus"
	Source string // e.g. "group:analysts (config)"
	Msg    string
}

func (e *ExceededError) Error() string        { return e.Msg }
func (e *ExceededError) Is(target error) bool { return target == ErrExceeded }

// Size is what one member (a worker or the scheduler) holds.
type Size struct {
	VCPUs        float64 `json:"vcpus"`
	MemoryGiB    float64 `json:"memory_gib"`
	GPUs         int     `json:"gpus,omitempty"`
	GPUType      string  `json:"gpu_type,omitempty"`
	InstanceType string  `json:"instance_type,omitempty"`
	PriceHour    float64 `json:"price_hour,omitempty"` // estimated USD per hour
	// Alternatives are instance types of the same vCPUs and GPUs that a
	// backend may fall back to when InstanceType has no capacity.
	Alternatives []string `json:"alternatives,omitempty"`
}

// Shape is a cluster as quotas see it: where it runs and the size of its
// members. Stored with each cluster, so that later checks and the usage
// ledger use the sizes it was admitted with.
type Shape struct {
	Provider  string `json:"provider"`
	Region    string `json:"region,omitempty"`
	Worker    Size   `json:"worker"`
	Scheduler Size   `json:"scheduler"`
}

// PriceHour is the estimated cost per hour (USD) of a cluster of this
// shape with n workers: its scheduler and workers at the prices recorded
// for them (none where the gateway has no price).
func (s Shape) PriceHour(n int) float64 {
	return s.Scheduler.PriceHour + float64(n)*s.Worker.PriceHour
}

// InUse is what a user's live clusters hold.
type InUse struct {
	Clusters   int
	VCPUs      float64
	MemoryGiB  float64
	GPUs       int
	GPUsByType map[string]int
}

// Add counts one cluster of shape s with n workers.
func (u *InUse) Add(s Shape, n int) {
	u.Clusters++
	for _, m := range []struct {
		size  Size
		count int
	}{{s.Scheduler, 1}, {s.Worker, n}} {
		u.VCPUs += m.size.VCPUs * float64(m.count)
		u.MemoryGiB += m.size.MemoryGiB * float64(m.count)
		if g := m.size.GPUs * m.count; g > 0 {
			u.GPUs += g
			if u.GPUsByType == nil {
				u.GPUsByType = map[string]int{}
			}
			u.GPUsByType[m.size.GPUType] += g
		}
	}
}

// Month is a user's use of the current calendar month.
type Month struct {
	Since     time.Time
	VCPUHours float64
	GPUHours  float64
}

// MonthStart is the first instant of t's calendar month in UTC: budgets
// are per calendar month.
func MonthStart(t time.Time) time.Time {
	t = t.UTC()
	return time.Date(t.Year(), t.Month(), 1, 0, 0, 0, 0, time.UTC)
}

func (e Effective) exceeded(limit, format string, args ...any) *ExceededError {
	src := e.Source(limit)
	msg := fmt.Sprintf(format, args...)
	return &ExceededError{Limit: limit, Source: src, Msg: msg}
}

// CheckShape checks what one cluster asks for on its own: where it runs,
// its instance type, its workers and its idle timeout (0: never; below 0:
// not checked).
func (e Effective) CheckShape(s Shape, workers int, idle time.Duration) error {
	l := e.Limits
	for _, c := range []struct {
		limit, what, value string
		allowed            []string
	}{
		{"allowed_providers", "provider", s.Provider, l.AllowedProviders},
		{"allowed_regions", "region", s.Region, l.AllowedRegions},
		{"allowed_instance_types", "instance type", s.Worker.InstanceType, l.AllowedInstanceTypes},
		{"allowed_instance_types", "scheduler instance type", s.Scheduler.InstanceType, l.AllowedInstanceTypes},
	} {
		// Backends without regions or instance types (local, docker)
		// leave these empty: there is nothing to allow.
		if c.value == "" || c.allowed == nil || matchAny(c.allowed, c.value) {
			continue
		}
		return e.exceeded(c.limit, "%s %s is not allowed for you; allowed: %s (%s, from %s)",
			c.what, c.value, joinList(c.allowed), c.limit, e.Source(c.limit))
	}
	if m := l.MaxWorkersPerCluster; m != nil && float64(workers) > float64(*m) {
		return e.exceeded("max_workers_per_cluster", "%d workers is over your limit of %s workers per cluster (max_workers_per_cluster, from %s)",
			workers, *m, e.Source("max_workers_per_cluster"))
	}
	if m := l.MaxIdleTimeout; m != nil && *m != UnlimitedDuration && idle >= 0 {
		if idle == 0 || idle > time.Duration(*m) {
			asked := "never stopping when idle"
			if idle > 0 {
				asked = "an idle timeout of " + idle.String()
			}
			return e.exceeded("max_idle_timeout", "%s is over your maximum idle timeout of %s (max_idle_timeout, from %s); ask for idle_timeout up to %d seconds",
				asked, time.Duration(*m), e.Source("max_idle_timeout"), int64(time.Duration(*m)/time.Second))
		}
	}
	return nil
}

func matchAny(patterns []string, v string) bool {
	for _, p := range patterns {
		if ok, _ := path.Match(p, v); ok || p == v {
			return true
		}
	}
	return false
}

func joinList(l []string) string {
	s := append([]string(nil), l...)
	sort.Strings(s)
	out := ""
	for i, v := range s {
		if i > 0 {
			out += ", "
		}
		out += v
	}
	return out
}

// Admit decides whether a new cluster of shape s with n workers may start,
// given what the user's live clusters hold and this month's use.
func (e Effective) Admit(inUse InUse, month Month, s Shape, n int) error {
	if err := e.CheckShape(s, n, -1); err != nil {
		return err
	}
	if m := e.Limits.MaxClusters; m != nil && *m < 1 {
		return e.exceeded("max_clusters", "you may not run clusters here (max_clusters, from %s): your limit is 0 clusters; ask an admin", e.Source("max_clusters"))
	}
	if m := e.Limits.MaxClusters; m != nil && float64(inUse.Clusters+1) > float64(*m) {
		return e.exceeded("max_clusters", "would run %s of your %s (max_clusters, from %s); %s running: stop one first",
			plural(inUse.Clusters+1, "cluster"), *m, e.Source("max_clusters"), plural(inUse.Clusters, "cluster"))
	}
	if err := e.budget(month, s, "start new clusters"); err != nil {
		return err
	}
	return e.totals(inUse, s, n, "this request asks for")
}

// budget refuses growth once this month's use reached a budget. A GPU
// budget only stops clusters that use GPUs.
func (e Effective) budget(month Month, s Shape, doing string) error {
	if b := e.Limits.MonthlyVCPUHours; b != nil && month.VCPUHours >= float64(*b) {
		return e.exceeded("monthly_vcpu_hours", "monthly budget used up: %s of your %s vCPU-hours since %s (monthly_vcpu_hours, from %s); you can stop clusters but not %s until next month",
			num(month.VCPUHours), *b, month.Since.Format("2006-01-02"), e.Source("monthly_vcpu_hours"), doing)
	}
	usesGPU := s.Worker.GPUs > 0 || s.Scheduler.GPUs > 0
	if b := e.Limits.MonthlyGPUHours; b != nil && usesGPU && month.GPUHours >= float64(*b) {
		return e.exceeded("monthly_gpu_hours", "monthly budget used up: %s of your %s GPU-hours since %s (monthly_gpu_hours, from %s); you can stop clusters but not %s until next month",
			num(month.GPUHours), *b, month.Since.Format("2006-01-02"), e.Source("monthly_gpu_hours"), doing)
	}
	return nil
}

// totals checks the sums across clusters: what others hold plus this
// cluster with n workers.
func (e Effective) totals(others InUse, s Shape, n int, asked string) error {
	var this InUse
	this.Add(s, n)
	clusters := plural(others.Clusters, "cluster")
	l := e.Limits
	for _, c := range []struct {
		limit, unit string
		max         *Amount
		used, add   float64
	}{
		{"max_vcpus", "vCPUs", l.MaxVCPUs, others.VCPUs, this.VCPUs},
		{"max_memory_gib", "GiB of memory", l.MaxMemoryGiB, others.MemoryGiB, this.MemoryGiB},
		{"max_gpus", "GPUs", l.MaxGPUs, float64(others.GPUs), float64(this.GPUs)},
	} {
		if c.max == nil || c.add == 0 || c.used+c.add <= float64(*c.max)+1e-9 {
			continue
		}
		return e.exceeded(c.limit, "would use %s %s of your %s (%s, from %s); %s in use by %s, %s %s",
			num(c.used+c.add), c.unit, *c.max, c.limit, e.Source(c.limit), num(c.used), clusters, asked, num(c.add))
	}
	for t, add := range this.GPUsByType {
		m, ok := l.MaxGPUsByType[t]
		if !ok || float64(others.GPUsByType[t]+add) <= float64(m) {
			continue
		}
		key := gpuTypeField + "." + t
		return e.exceeded(key, "would use %d %s GPUs of your %s (%s, from %s); %d in use by %s, %s %d",
			others.GPUsByType[t]+add, t, m, key, e.Source(key), others.GPUsByType[t], clusters, asked, add)
	}
	return nil
}

// WorkersAllowed is the most workers (at most want) a live cluster of
// shape s may have, given what the user's other live clusters hold. When
// it is below want, the error says which limit binds and why. current is
// the cluster's workers now: past a budget it may keep them, not grow.
func (e Effective) WorkersAllowed(others InUse, month Month, s Shape, current, want int) (int, error) {
	if want <= current {
		return want, nil
	}
	if err := e.budget(month, s, "add workers"); err != nil {
		return current, err
	}
	perCluster, whyPC := want, error(nil)
	if m := e.Limits.MaxWorkersPerCluster; m != nil && float64(want) > float64(*m) {
		perCluster = int(math.Floor(float64(*m)))
		whyPC = e.CheckShape(Shape{}, want, -1)
	}
	// The totals grow with n: the first fit from the top is the largest.
	// The reason given is a total the request as asked is over, told with
	// the request's own numbers.
	for n := perCluster; n > current; n-- {
		if e.totals(others, s, n, need(n)) == nil {
			if n == perCluster {
				return n, whyPC
			}
			return n, e.overTotals(others, s, want, n+1)
		}
	}
	// Nothing above current fits: keep what the cluster has.
	if perCluster <= current {
		return current, whyPC
	}
	return current, e.overTotals(others, s, want, current+1)
}

// overTotals is the totals error of the request at want workers, or of
// the first count that did not fit when want's is not one (it is, as the
// totals grow with the count; this keeps an answer whatever the order).
func (e Effective) overTotals(others InUse, s Shape, want, first int) error {
	if err := e.totals(others, s, want, need(want)); err != nil {
		return err
	}
	return e.totals(others, s, first, need(first))
}

// need is how a growth check names what it asks for.
func need(n int) string { return fmt.Sprintf("this cluster at %d workers needs", n) }

func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return strconv.Itoa(n) + " " + what + "s"
}

// num prints a quantity without float noise: 24, 1.5, 0.33.
func num(f float64) string {
	return strconv.FormatFloat(math.Round(f*100)/100, 'f', -1, 64)
}
