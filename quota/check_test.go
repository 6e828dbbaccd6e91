package quota

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// teamEff resolves limits given to the group "team" in the configuration
// file, so that every limit's source is "group:team (config)".
func teamEff(t *testing.T, limits string) Effective {
	t.Helper()
	return Resolve(entriesOf(t, ent{subject: "group:team", config: limits}), Who{ID: "u1", Name: "ann", Groups: []string{"team"}})
}

const teamSource = "group:team (config)"

// wantExceeded checks err against the expected limit ("" for none) and
// message fragments, and that it carries the limit and its source.
func wantExceeded(t *testing.T, err error, limit, source string, msgHas ...string) {
	t.Helper()
	if limit == "" {
		if err != nil {
			t.Fatalf("got %v, want no error", err)
		}
		return
	}
	if err == nil {
		t.Fatalf("got no error, want %s exceeded", limit)
	}
	if !errors.Is(err, ErrExceeded) {
		t.Errorf("errors.Is(%v, ErrExceeded) = false", err)
	}
	if errors.Is(err, ErrInvalid) {
		t.Errorf("errors.Is(%v, ErrInvalid) = true", err)
	}
	var ee *ExceededError
	if !errors.As(err, &ee) {
		t.Fatalf("errors.As(%v, *ExceededError) = false", err)
	}
	if ee.Limit != limit {
		t.Errorf("Limit = %q, want %q (%v)", ee.Limit, limit, err)
	}
	if ee.Source != source {
		t.Errorf("Source = %q, want %q", ee.Source, source)
	}
	if ee.Error() != ee.Msg {
		t.Errorf("Error() = %q, Msg = %q", ee.Error(), ee.Msg)
	}
	// Every message names the limit and where it came from.
	msgHas = append(msgHas, "("+limit+", from "+source+")")
	for _, s := range msgHas {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("message %q does not contain %q", err, s)
		}
	}
}

var (
	cpuWorker = Size{VCPUs: 4, MemoryGiB: 16, InstanceType: "m5.xlarge"}
	cpuSched  = Size{VCPUs: 4, MemoryGiB: 16, InstanceType: "m5.xlarge"}
	// cpuShape: 4 vCPUs and 16 GiB per member, the scheduler included.
	cpuShape = Shape{Provider: "aws", Region: "us-east-1", Worker: cpuWorker, Scheduler: cpuSched}
	// gpuShape: workers with one a100 each, a scheduler without GPUs.
	gpuShape = Shape{Provider: "aws", Region: "us-east-1",
		Worker:    Size{VCPUs: 8, MemoryGiB: 32, GPUs: 1, GPUType: "a100", InstanceType: "p4d.large"},
		Scheduler: Size{VCPUs: 2, MemoryGiB: 8, InstanceType: "m5.large"}}
	// t4Shape: workers with two t4 each.
	t4Shape = Shape{Provider: "aws", Region: "us-east-1",
		Worker:    Size{VCPUs: 4, MemoryGiB: 16, GPUs: 2, GPUType: "t4", InstanceType: "g4dn.xlarge"},
		Scheduler: Size{VCPUs: 2, MemoryGiB: 8, InstanceType: "m5.large"}}
)

func withWorker(s Shape, it string) Shape    { s.Worker.InstanceType = it; return s }
func withScheduler(s Shape, it string) Shape { s.Scheduler.InstanceType = it; return s }

func TestCheckShape(t *testing.T) {
	tests := []struct {
		name    string
		limits  string
		shape   Shape
		workers int
		idle    time.Duration
		limit   string // "" when allowed
		msgHas  []string
	}{
		{name: "no limits", limits: `{}`, shape: cpuShape, workers: 1000, idle: 0},
		{name: "provider allowed", limits: `{"allowed_providers": ["gcp", "aws"]}`, shape: cpuShape, workers: 1, idle: -1},
		{name: "provider refused", limits: `{"allowed_providers": ["gcp", "local"]}`, shape: cpuShape, workers: 1, idle: -1,
			limit: "allowed_providers", msgHas: []string{"provider aws is not allowed for you", "allowed: gcp, local"}},
		{name: "any provider", limits: `{"allowed_providers": ["*"]}`, shape: cpuShape, workers: 1, idle: -1},
		{name: "empty provider skipped", limits: `{"allowed_providers": ["gcp"]}`, shape: Shape{}, workers: 1, idle: -1},
		{name: "region allowed", limits: `{"allowed_regions": ["us-east-1"]}`, shape: cpuShape, workers: 1, idle: -1},
		{name: "region refused", limits: `{"allowed_regions": ["us-west-2", "eu-west-1"]}`, shape: cpuShape, workers: 1, idle: -1,
			limit: "allowed_regions", msgHas: []string{"region us-east-1 is not allowed", "allowed: eu-west-1, us-west-2"}},
		{name: "region glob", limits: `{"allowed_regions": ["us-*"]}`, shape: cpuShape, workers: 1, idle: -1},
		{name: "no region (local backend) skipped", limits: `{"allowed_regions": ["eu-west-1"]}`, shape: Shape{Provider: "local"}, workers: 1, idle: -1},
		{name: "instance type exact", limits: `{"allowed_instance_types": ["m5.xlarge"]}`, shape: cpuShape, workers: 1, idle: -1},
		{name: "instance type glob", limits: `{"allowed_instance_types": ["m5.*"]}`, shape: withScheduler(withWorker(cpuShape, "m5.24xlarge"), "m5.large"), workers: 1, idle: -1},
		{name: "instance type glob does not match another family", limits: `{"allowed_instance_types": ["m5.*"]}`, shape: withWorker(cpuShape, "m5a.large"), workers: 1, idle: -1,
			limit: "allowed_instance_types", msgHas: []string{"instance type m5a.large is not allowed", "allowed: m5.*"}},
		{name: "instance type glob is anchored", limits: `{"allowed_instance_types": ["m5.*"]}`, shape: withWorker(cpuShape, "xm5.large"), workers: 1, idle: -1,
			limit: "allowed_instance_types", msgHas: []string{"instance type xm5.large"}},
		{name: "worker instance type refused", limits: `{"allowed_instance_types": ["t3.*", "m5.large"]}`, shape: withScheduler(withWorker(cpuShape, "c5.large"), "m5.large"), workers: 1, idle: -1,
			limit: "allowed_instance_types", msgHas: []string{"instance type c5.large is not allowed", "allowed: m5.large, t3.*"}},
		{name: "scheduler instance type refused", limits: `{"allowed_instance_types": ["m5.*"]}`, shape: withScheduler(cpuShape, "c5.large"), workers: 1, idle: -1,
			limit: "allowed_instance_types", msgHas: []string{"scheduler instance type c5.large is not allowed"}},
		{name: "empty instance types skipped", limits: `{"allowed_instance_types": ["m5.*"]}`, shape: Shape{Provider: "docker"}, workers: 3, idle: -1},
		{name: "any instance type", limits: `{"allowed_instance_types": ["*"]}`, shape: withWorker(cpuShape, "x1e.32xlarge"), workers: 1, idle: -1},
		{name: "malformed pattern matches itself", limits: `{"allowed_instance_types": ["m5[", "m5.xlarge"]}`, shape: withWorker(withScheduler(cpuShape, "m5["), "m5["), workers: 1, idle: -1},
		{name: "provider checked before region", limits: `{"allowed_providers": ["gcp"], "allowed_regions": ["x"]}`, shape: cpuShape, workers: 1, idle: -1,
			limit: "allowed_providers"},
		{name: "workers at the limit", limits: `{"max_workers_per_cluster": 10}`, shape: cpuShape, workers: 10, idle: -1},
		{name: "workers over the limit", limits: `{"max_workers_per_cluster": 10}`, shape: cpuShape, workers: 11, idle: -1,
			limit: "max_workers_per_cluster", msgHas: []string{"11 workers is over your limit of 10 workers per cluster"}},
		{name: "zero workers allowed", limits: `{"max_workers_per_cluster": 0}`, shape: cpuShape, workers: 0, idle: -1},
		{name: "unlimited workers", limits: `{"max_workers_per_cluster": "unlimited"}`, shape: cpuShape, workers: 1 << 30, idle: -1},
		{name: "idle under the maximum", limits: `{"max_idle_timeout": "2h"}`, shape: cpuShape, workers: 1, idle: time.Hour},
		{name: "idle at the maximum", limits: `{"max_idle_timeout": "2h"}`, shape: cpuShape, workers: 1, idle: 2 * time.Hour},
		{name: "idle over the maximum", limits: `{"max_idle_timeout": "2h"}`, shape: cpuShape, workers: 1, idle: 3 * time.Hour,
			limit: "max_idle_timeout", msgHas: []string{"an idle timeout of 3h0m0s is over your maximum idle timeout of 2h0m0s", "ask for idle_timeout up to 7200 seconds"}},
		{name: "idle 0 (never stop) is refused under a maximum", limits: `{"max_idle_timeout": "90m"}`, shape: cpuShape, workers: 1, idle: 0,
			limit: "max_idle_timeout", msgHas: []string{"never stopping when idle is over your maximum idle timeout of 1h30m0s", "up to 5400 seconds"}},
		{name: "idle below 0 is not checked", limits: `{"max_idle_timeout": "1m"}`, shape: cpuShape, workers: 1, idle: -1},
		{name: "idle 0 with an unlimited maximum", limits: `{"max_idle_timeout": "unlimited"}`, shape: cpuShape, workers: 1, idle: 0},
		{name: "long idle with an unlimited maximum", limits: `{"max_idle_timeout": "unlimited"}`, shape: cpuShape, workers: 1, idle: 1000 * time.Hour},
		{name: "budgets and totals are not CheckShape's", limits: `{"max_vcpus": 1, "max_clusters": 0, "monthly_vcpu_hours": 0}`, shape: cpuShape, workers: 100, idle: 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			eff := teamEff(t, tt.limits)
			err := eff.CheckShape(tt.shape, tt.workers, tt.idle)
			wantExceeded(t, err, tt.limit, teamSource, tt.msgHas...)
		})
	}
}

func TestCheckShapeSourceOfUnionedList(t *testing.T) {
	eff := Resolve(entriesOf(t,
		ent{subject: "group:a", config: `{"allowed_providers": ["gcp"]}`},
		ent{subject: "group:b", stored: `{"allowed_providers": ["local"]}`},
	), Who{Name: "ann", Groups: []string{"a", "b"}})
	err := eff.CheckShape(cpuShape, 1, -1)
	wantExceeded(t, err, "allowed_providers", "group:a (config), group:b (api)", "allowed: gcp, local")
}

func TestInUseAdd(t *testing.T) {
	var u InUse
	u.Add(cpuShape, 2) // 3 members of 4 vCPUs, 16 GiB
	u.Add(gpuShape, 3) // scheduler 2/8, 3 workers of 8/32 with one a100
	mixed := Shape{Worker: Size{VCPUs: 1, GPUs: 2, GPUType: "t4"}, Scheduler: Size{VCPUs: 1, GPUs: 1, GPUType: "l4"}}
	u.Add(mixed, 2)
	u.Add(cpuShape, 0) // a scheduler alone
	want := InUse{Clusters: 4, VCPUs: 12 + 26 + 3 + 4, MemoryGiB: 48 + 104 + 0 + 16, GPUs: 3 + 5,
		GPUsByType: map[string]int{"a100": 3, "t4": 4, "l4": 1}}
	if asJSON(t, u) != asJSON(t, want) {
		t.Errorf("InUse = %s, want %s", asJSON(t, u), asJSON(t, want))
	}
	var none InUse
	none.Add(cpuShape, 5)
	if none.GPUsByType != nil || none.GPUs != 0 {
		t.Errorf("a cluster without GPUs counts GPUs: %+v", none)
	}
}

func TestMonthStart(t *testing.T) {
	plus2 := time.FixedZone("+02", 2*3600)
	minus5 := time.FixedZone("-05", -5*3600)
	tests := []struct {
		in, want time.Time
	}{
		{time.Date(2025, 3, 15, 12, 0, 0, 0, time.UTC), time.Date(2025, 3, 1, 0, 0, 0, 0, time.UTC)},
		{time.Date(2025, 3, 1, 0, 0, 0, 0, time.UTC), time.Date(2025, 3, 1, 0, 0, 0, 0, time.UTC)},
		{time.Date(2025, 3, 31, 23, 59, 59, 999, time.UTC), time.Date(2025, 3, 1, 0, 0, 0, 0, time.UTC)},
		{time.Date(2025, 3, 1, 0, 30, 0, 0, plus2), time.Date(2025, 2, 1, 0, 0, 0, 0, time.UTC)},
		{time.Date(2024, 12, 31, 22, 0, 0, 0, minus5), time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)},
	}
	for _, tt := range tests {
		got := MonthStart(tt.in)
		if !got.Equal(tt.want) || got.Location() != time.UTC {
			t.Errorf("MonthStart(%v) = %v, want %v", tt.in, got, tt.want)
		}
	}
}

func inUseOf(shapes ...struct {
	s Shape
	n int
}) InUse {
	var u InUse
	for _, c := range shapes {
		u.Add(c.s, c.n)
	}
	return u
}

type sn = struct {
	s Shape
	n int
}

func TestAdmit(t *testing.T) {
	march := time.Date(2025, 3, 1, 0, 0, 0, 0, time.UTC)
	monthOf := func(vcpuH, gpuH float64) Month { return Month{Since: march, VCPUHours: vcpuH, GPUHours: gpuH} }
	fiveClusters := inUseOf(sn{cpuShape, 0}, sn{cpuShape, 0}, sn{cpuShape, 0}, sn{cpuShape, 0}, sn{cpuShape, 0})
	// The documented example: two clusters of a scheduler and two workers,
	// 4 vCPUs each: 24 vCPUs in total.
	twoUsing24 := inUseOf(sn{cpuShape, 2}, sn{cpuShape, 2})
	tests := []struct {
		name   string
		limits string
		inUse  InUse
		month  Month
		shape  Shape
		n      int
		limit  string
		msgHas []string
	}{
		{name: "no limits", limits: `{}`, inUse: fiveClusters, shape: gpuShape, n: 100},
		{name: "under max_clusters", limits: `{"max_clusters": 5}`, inUse: inUseOf(sn{cpuShape, 1}, sn{cpuShape, 1}, sn{cpuShape, 1}, sn{cpuShape, 1}), shape: cpuShape, n: 1},
		{name: "max_clusters reached", limits: `{"max_clusters": 5}`, inUse: fiveClusters, shape: cpuShape, n: 1,
			limit: "max_clusters", msgHas: []string{"would run 6 clusters of your 5", "5 clusters running: stop one first"}},
		{name: "max_clusters of 1", limits: `{"max_clusters": 1}`, inUse: inUseOf(sn{cpuShape, 1}), shape: cpuShape, n: 1,
			limit: "max_clusters", msgHas: []string{"would run 2 clusters of your 1", "1 cluster running"}},
		{name: "max_clusters of 0", limits: `{"max_clusters": 0}`, shape: cpuShape, n: 1,
			limit: "max_clusters", msgHas: []string{"your limit is 0 clusters"}},
		{name: "unlimited clusters", limits: `{"max_clusters": "unlimited"}`, inUse: fiveClusters, shape: cpuShape, n: 1},
		{name: "vCPUs: the documented example", limits: `{"max_vcpus": 32}`, inUse: twoUsing24, shape: cpuShape, n: 3, // 4 + 3x4 = 16
			limit: "max_vcpus", msgHas: []string{"would use 40 vCPUs of your 32", "24 in use by 2 clusters", "this request asks for 16"}},
		{name: "vCPUs: exactly at the limit", limits: `{"max_vcpus": 32}`, inUse: twoUsing24, shape: cpuShape, n: 1},
		{name: "vCPUs: first cluster over", limits: `{"max_vcpus": 8}`, shape: cpuShape, n: 2,
			limit: "max_vcpus", msgHas: []string{"would use 12 vCPUs of your 8", "0 in use by 0 clusters", "asks for 12"}},
		{name: "vCPUs: fractional sizes print without noise", limits: `{"max_vcpus": 1}`,
			shape: Shape{Worker: Size{VCPUs: 0.1}, Scheduler: Size{VCPUs: 0.25}}, n: 8, // 0.25 + 0.8 = 1.05
			limit: "max_vcpus", msgHas: []string{"would use 1.05 vCPUs of your 1", "asks for 1.05"}},
		{name: "vCPUs: fractional sizes within the limit", limits: `{"max_vcpus": 1}`,
			shape: Shape{Worker: Size{VCPUs: 0.1}, Scheduler: Size{VCPUs: 0.3}}, n: 7}, // 0.3 + 0.7 = 1.0000000000000002
		{name: "memory", limits: `{"max_memory_gib": 64}`, inUse: inUseOf(sn{cpuShape, 2}), shape: cpuShape, n: 1,
			limit: "max_memory_gib", msgHas: []string{"would use 80 GiB of memory of your 64", "48 in use by 1 cluster,", "asks for 32"}},
		{name: "memory within", limits: `{"max_memory_gib": 80}`, inUse: inUseOf(sn{cpuShape, 2}), shape: cpuShape, n: 1},
		{name: "GPUs", limits: `{"max_gpus": 4}`, inUse: inUseOf(sn{gpuShape, 3}), shape: gpuShape, n: 2,
			limit: "max_gpus", msgHas: []string{"would use 5 GPUs of your 4", "3 in use by 1 cluster", "asks for 2"}},
		{name: "GPUs within", limits: `{"max_gpus": 5}`, inUse: inUseOf(sn{gpuShape, 3}), shape: gpuShape, n: 2},
		{name: "no GPUs allowed, none asked", limits: `{"max_gpus": 0, "max_gpus_by_type": {"a100": 0}}`, shape: cpuShape, n: 4},
		{name: "no GPUs allowed", limits: `{"max_gpus": 0}`, shape: gpuShape, n: 1,
			limit: "max_gpus", msgHas: []string{"would use 1 GPUs of your 0"}},
		{name: "per GPU type", limits: `{"max_gpus": 100, "max_gpus_by_type": {"a100": 2, "t4": 8}}`, inUse: inUseOf(sn{gpuShape, 1}), shape: gpuShape, n: 2,
			limit: "max_gpus_by_type.a100", msgHas: []string{"would use 3 a100 GPUs of your 2", "1 in use by 1 cluster", "asks for 2"}},
		{name: "per GPU type: other types' use does not count", limits: `{"max_gpus_by_type": {"a100": 2}}`, inUse: inUseOf(sn{t4Shape, 4}), shape: gpuShape, n: 2},
		{name: "per GPU type: a type without a limit", limits: `{"max_gpus_by_type": {"a100": 0}}`, inUse: inUseOf(sn{gpuShape, 0}), shape: t4Shape, n: 3},
		{name: "per GPU type: unlimited", limits: `{"max_gpus_by_type": {"a100": "unlimited"}}`, shape: gpuShape, n: 1000},
		{name: "monthly vCPU budget used up", limits: `{"monthly_vcpu_hours": 100}`, month: monthOf(100, 0), shape: cpuShape, n: 1,
			limit: "monthly_vcpu_hours", msgHas: []string{"monthly budget used up: 100 of your 100 vCPU-hours since 2025-03-01", "you can stop clusters but not start new clusters until next month"}},
		{name: "monthly vCPU budget over", limits: `{"monthly_vcpu_hours": 100}`, month: monthOf(123.456, 0), shape: gpuShape, n: 1,
			limit: "monthly_vcpu_hours", msgHas: []string{"123.46 of your 100 vCPU-hours", "since 2025-03-01", "can stop clusters"}},
		{name: "monthly vCPU budget left", limits: `{"monthly_vcpu_hours": 100}`, month: monthOf(99.5, 0), shape: cpuShape, n: 1},
		{name: "monthly vCPU budget unlimited", limits: `{"monthly_vcpu_hours": "unlimited"}`, month: monthOf(1e12, 0), shape: cpuShape, n: 1},
		{name: "monthly GPU budget does not stop CPU clusters", limits: `{"monthly_gpu_hours": 10}`, month: monthOf(0, 50), shape: cpuShape, n: 4},
		{name: "monthly GPU budget stops GPU clusters", limits: `{"monthly_gpu_hours": 10}`, month: monthOf(0, 10), shape: gpuShape, n: 1,
			limit: "monthly_gpu_hours", msgHas: []string{"monthly budget used up: 10 of your 10 GPU-hours since 2025-03-01", "you can stop clusters but not start new clusters"}},
		{name: "monthly GPU budget stops a GPU scheduler", limits: `{"monthly_gpu_hours": 10}`, month: monthOf(0, 11),
			shape: Shape{Worker: cpuWorker, Scheduler: Size{VCPUs: 4, GPUs: 1, GPUType: "t4"}}, n: 0,
			limit: "monthly_gpu_hours", msgHas: []string{"11 of your 10 GPU-hours"}},
		{name: "monthly GPU budget left", limits: `{"monthly_gpu_hours": 10}`, month: monthOf(0, 9.99), shape: gpuShape, n: 1},
		{name: "zero budget", limits: `{"monthly_vcpu_hours": 0}`, month: monthOf(0, 0), shape: cpuShape, n: 1,
			limit: "monthly_vcpu_hours", msgHas: []string{"0 of your 0 vCPU-hours"}},
		{name: "shape checked first", limits: `{"allowed_providers": ["gcp"], "max_clusters": 0, "monthly_vcpu_hours": 0}`, shape: cpuShape, n: 1,
			limit: "allowed_providers"},
		{name: "workers per cluster checked", limits: `{"max_workers_per_cluster": 10}`, shape: cpuShape, n: 11,
			limit: "max_workers_per_cluster", msgHas: []string{"11 workers is over your limit of 10"}},
		{name: "idle timeout is not Admit's", limits: `{"max_idle_timeout": "1m"}`, shape: cpuShape, n: 1},
		{name: "max_clusters before the budget", limits: `{"max_clusters": 5, "monthly_vcpu_hours": 1}`, inUse: fiveClusters, month: monthOf(5, 0), shape: cpuShape, n: 1,
			limit: "max_clusters"},
		{name: "budget before the totals", limits: `{"max_vcpus": 1, "monthly_vcpu_hours": 1}`, month: monthOf(5, 0), shape: cpuShape, n: 1,
			limit: "monthly_vcpu_hours"},
		{name: "vCPUs before memory", limits: `{"max_vcpus": 1, "max_memory_gib": 1}`, shape: cpuShape, n: 1,
			limit: "max_vcpus"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			eff := teamEff(t, tt.limits)
			if tt.month.Since.IsZero() {
				tt.month.Since = march
			}
			err := eff.Admit(tt.inUse, tt.month, tt.shape, tt.n)
			wantExceeded(t, err, tt.limit, teamSource, tt.msgHas...)
		})
	}
}

// The limit's source in the error is the effective one, wherever it came
// from.
func TestAdmitSourceIsWhereTheLimitCameFrom(t *testing.T) {
	eff := Resolve(entriesOf(t,
		ent{subject: "default", config: `{"max_clusters": 1, "max_vcpus": 4}`},
		ent{subject: "group:gpu", config: `{"max_vcpus": 16}`},
		ent{subject: "user:ann", config: `{"max_vcpus": 2}`, stored: `{"max_vcpus": 64, "max_gpus_by_type": {"a100": 0}}`},
	), Who{Name: "ann", Groups: []string{"gpu"}})
	month := Month{Since: time.Date(2025, 3, 1, 0, 0, 0, 0, time.UTC)}

	err := eff.Admit(inUseOf(sn{cpuShape, 1}), month, cpuShape, 1)
	wantExceeded(t, err, "max_clusters", "default (config)", "would run 2 clusters of your 1")

	err = eff.Admit(InUse{}, month, cpuShape, 100) // 404 vCPUs
	wantExceeded(t, err, "max_vcpus", "user:ann (api)", "would use 404 vCPUs of your 64")

	err = eff.Admit(InUse{}, month, gpuShape, 1)
	wantExceeded(t, err, "max_gpus_by_type.a100", "user:ann (api)", "would use 1 a100 GPUs of your 0")
}

func TestWorkersAllowed(t *testing.T) {
	march := time.Date(2025, 3, 1, 0, 0, 0, 0, time.UTC)
	// shape: a 2-vCPU scheduler, 4-vCPU workers: 2 + 4n vCPUs, 8 + 16n GiB.
	shape := Shape{Provider: "aws", Worker: Size{VCPUs: 4, MemoryGiB: 16}, Scheduler: Size{VCPUs: 2, MemoryGiB: 8}}
	// another cluster holding 10 vCPUs and 40 GiB
	other := InUse{Clusters: 1, VCPUs: 10, MemoryGiB: 40}
	tests := []struct {
		name          string
		limits        string
		others        InUse
		month         Month
		shape         Shape
		current, want int
		wantN         int
		limit         string // the binding limit; "" for a nil error
		msgHas        []string
	}{
		{name: "no limits", limits: `{}`, others: other, shape: shape, current: 1, want: 500, wantN: 500},
		{name: "fits", limits: `{"max_vcpus": 32}`, others: other, shape: shape, current: 2, want: 5, wantN: 5}, // 10 + 2 + 20 = 32
		{name: "clamped by vCPUs to the largest fitting count", limits: `{"max_vcpus": 32}`, others: other, shape: shape, current: 2, want: 10, wantN: 5,
			limit: "max_vcpus", msgHas: []string{"would use 52 vCPUs of your 32", "10 in use by 1 cluster", "this cluster at 10 workers needs 42"}},
		{name: "clamped by one", limits: `{"max_vcpus": 33}`, others: other, shape: shape, current: 0, want: 6, wantN: 5,
			limit: "max_vcpus"},
		{name: "clamped by memory", limits: `{"max_memory_gib": 100}`, others: other, shape: shape, current: 1, want: 8, wantN: 3, // 40 + 8 + 48 = 96
			limit: "max_memory_gib", msgHas: []string{"GiB of memory of your 100"}},
		{name: "clamped by GPUs", limits: `{"max_gpus": 5}`, others: inUseOf(sn{gpuShape, 2}), shape: gpuShape, current: 1, want: 9, wantN: 3,
			limit: "max_gpus", msgHas: []string{"would use 11 GPUs of your 5", "2 in use by 1 cluster"}},
		{name: "clamped per GPU type", limits: `{"max_gpus_by_type": {"t4": 10}}`, others: inUseOf(sn{t4Shape, 1}), shape: t4Shape, current: 1, want: 6, wantN: 4, // 2 + 2n <= 10
			limit: "max_gpus_by_type.t4", msgHas: []string{"would use 14 t4 GPUs of your 10"}},
		{name: "never below current", limits: `{"max_vcpus": 32}`, others: InUse{Clusters: 2, VCPUs: 40}, shape: shape, current: 3, want: 6, wantN: 3,
			limit: "max_vcpus", msgHas: []string{"would use 66 vCPUs of your 32", "40 in use by 2 clusters"}},
		{name: "nothing above current fits", limits: `{"max_vcpus": 32}`, others: other, shape: shape, current: 5, want: 7, wantN: 5,
			limit: "max_vcpus"},
		{name: "per-cluster max", limits: `{"max_workers_per_cluster": 8}`, others: other, shape: shape, current: 2, want: 12, wantN: 8,
			limit: "max_workers_per_cluster", msgHas: []string{"12 workers is over your limit of 8 workers per cluster"}},
		{name: "per-cluster max, fractional", limits: `{"max_workers_per_cluster": 8.7}`, shape: shape, current: 2, want: 12, wantN: 8,
			limit: "max_workers_per_cluster"},
		{name: "per-cluster max exactly", limits: `{"max_workers_per_cluster": 8}`, shape: shape, current: 2, want: 8, wantN: 8},
		{name: "per-cluster max below current keeps current", limits: `{"max_workers_per_cluster": 4}`, shape: shape, current: 6, want: 10, wantN: 6,
			limit: "max_workers_per_cluster"},
		{name: "per-cluster max binds before the totals", limits: `{"max_workers_per_cluster": 4, "max_vcpus": 1000}`, others: other, shape: shape, current: 1, want: 10, wantN: 4,
			limit: "max_workers_per_cluster"},
		{name: "vCPUs bind below the per-cluster max", limits: `{"max_workers_per_cluster": 10, "max_vcpus": 32}`, others: other, shape: shape, current: 2, want: 20, wantN: 5,
			limit: "max_vcpus", msgHas: []string{"would use 92 vCPUs of your 32", "this cluster at 20 workers needs 82"}},
		{name: "vCPUs leave no room under the per-cluster max", limits: `{"max_workers_per_cluster": 10, "max_vcpus": 32}`, others: InUse{Clusters: 1, VCPUs: 30}, shape: shape, current: 2, want: 20, wantN: 2,
			limit: "max_vcpus", msgHas: []string{"would use 112 vCPUs of your 32", "30 in use by 1 cluster"}},
		{name: "memory binds where vCPUs do not", limits: `{"max_workers_per_cluster": 10, "max_vcpus": 1000, "max_memory_gib": 100}`, others: other, shape: shape, current: 1, want: 20, wantN: 3,
			limit: "max_memory_gib", msgHas: []string{"GiB of memory of your 100", "this cluster at 20 workers needs 328"}},
		{name: "vCPU budget used up returns current", limits: `{"monthly_vcpu_hours": 100}`, month: Month{VCPUHours: 150}, shape: shape, current: 3, want: 5, wantN: 3,
			limit: "monthly_vcpu_hours", msgHas: []string{"150 of your 100 vCPU-hours since 2025-03-01", "you can stop clusters but not add workers until next month"}},
		{name: "budget before the per-cluster max", limits: `{"monthly_vcpu_hours": 1, "max_workers_per_cluster": 2}`, month: Month{VCPUHours: 1}, shape: shape, current: 1, want: 5, wantN: 1,
			limit: "monthly_vcpu_hours"},
		{name: "GPU budget used up: CPU cluster grows", limits: `{"monthly_gpu_hours": 1}`, month: Month{GPUHours: 5}, shape: shape, current: 1, want: 5, wantN: 5},
		{name: "GPU budget used up: GPU cluster keeps its workers", limits: `{"monthly_gpu_hours": 1}`, month: Month{GPUHours: 5}, shape: gpuShape, current: 1, want: 5, wantN: 1,
			limit: "monthly_gpu_hours", msgHas: []string{"GPU-hours", "not add workers"}},
		{name: "want below current", limits: `{"max_vcpus": 1, "monthly_vcpu_hours": 0}`, others: other, shape: shape, current: 5, want: 2, wantN: 2},
		{name: "want equal to current", limits: `{"max_vcpus": 1, "monthly_vcpu_hours": 0}`, others: other, shape: shape, current: 5, want: 5, wantN: 5},
		{name: "want zero", limits: `{"max_workers_per_cluster": 0}`, shape: shape, current: 3, want: 0, wantN: 0},
		{name: "from zero", limits: `{"max_vcpus": 10}`, shape: shape, current: 0, want: 4, wantN: 2, limit: "max_vcpus"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			eff := teamEff(t, tt.limits)
			if tt.month.Since.IsZero() {
				tt.month.Since = march
			}
			n, err := eff.WorkersAllowed(tt.others, tt.month, tt.shape, tt.current, tt.want)
			if n != tt.wantN {
				t.Errorf("WorkersAllowed(current %d, want %d) = %d, want %d (err: %v)", tt.current, tt.want, n, tt.wantN, err)
			}
			wantExceeded(t, err, tt.limit, teamSource, tt.msgHas...)
			if err == nil && n != tt.want {
				t.Errorf("clamped to %d with no error", n)
			}
		})
	}
}

// WorkersAllowed agrees with the totals Admit checks: the count it allows
// fits, and one more does not (unless it is want or the per-cluster max).
func TestWorkersAllowedIsTheLargestFit(t *testing.T) {
	shape := Shape{Worker: Size{VCPUs: 3, MemoryGiB: 7, GPUs: 1, GPUType: "a100"}, Scheduler: Size{VCPUs: 1, MemoryGiB: 2}}
	for _, limits := range []string{`{"max_vcpus": 50}`, `{"max_memory_gib": 90}`, `{"max_gpus": 7}`, `{"max_gpus_by_type": {"a100": 9}}`, `{"max_vcpus": 40, "max_memory_gib": 70}`} {
		eff := teamEff(t, limits)
		for used := 0; used <= 30; used += 5 {
			others := InUse{Clusters: 1, VCPUs: float64(used), MemoryGiB: float64(used), GPUs: used / 5, GPUsByType: map[string]int{"a100": used / 5}}
			for current := 0; current <= 6; current += 3 {
				n, err := eff.WorkersAllowed(others, Month{}, shape, current, 40)
				if n < current {
					t.Fatalf("%s used %d: %d is below current %d", limits, used, n, current)
				}
				if n > current && eff.totals(others, shape, n, "") != nil {
					t.Errorf("%s used %d current %d: %d workers do not fit", limits, used, current, n)
				}
				if n < 40 {
					if eff.totals(others, shape, n+1, "") == nil {
						t.Errorf("%s used %d current %d: allowed %d but %d fit", limits, used, current, n, n+1)
					}
					if !errors.Is(err, ErrExceeded) {
						t.Errorf("%s used %d current %d: clamped to %d, err = %v", limits, used, current, n, err)
					}
				}
			}
		}
	}
}
