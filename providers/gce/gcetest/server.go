package gcetest

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"hash/crc32"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/api/option"

	"github.com/gatewayhq/gateway/providers/gce/gcerules"
)

// Options configures a Server.
type Options struct {
	// Project is the only project the fake knows (default "test-project").
	Project string
	// Zones are the zones it knows (default us-central1-a, us-central1-b,
	// us-central1-c).
	Zones []string
	// PageSize is how many items a list returns per page at most (default
	// 500, the API's); small values exercise paging.
	PageSize int
	// MachineTypes and AcceleratorTypes are what every zone offers
	// (default DefaultMachineTypes and DefaultAcceleratorTypes).
	MachineTypes     []MachineType
	AcceleratorTypes []AcceleratorType
}

// Request is one request as the fake received it.
type Request struct {
	Method string
	Path   string
	Query  url.Values
	Body   []byte
}

// Server is the fake. Its methods are safe for concurrent use.
type Server struct {
	URL     string
	Project string

	srv *httptest.Server

	mu           sync.Mutex
	zones        []string
	pageSize     int
	machineTypes map[string][]MachineType // by zone
	accelTypes   map[string][]AcceleratorType
	instances    map[string]*instance // by zone + "/" + name
	firewalls    map[string]*Firewall
	secrets      map[string]*Secret
	ops          map[string]*operation // by name
	opOrder      []string
	requestIDs   map[string]string // requestId -> operation name
	opFaults     []*opFault
	httpFaults   []*httpFault
	lostAnswers  []*httpFault
	hidden       map[string]bool // instance names lists leave out
	unreachable  map[string]bool // zone -> answered with an UNREACHABLE warning (true) or in unreachables (false)
	hang         bool
	holdStaging  bool
	autoReady    bool
	requests     []Request
	injected     int
	seq          int64
	nextIP       int
}

type instance struct {
	Instance
	guest map[string]string // "namespace/key" -> value
}

type operation struct {
	Operation
	pending func() // applied when the operation finishes
	fail    *opFault
	hung    bool
}

type opFault struct {
	zone, machineType, code string
	times                   int // < 0: for ever
}

type httpFault struct {
	method, pathContains string
	status, times        int
	throttle             bool // answer as a rate limit: 403 rateLimitExceeded (Compute), 429 (Secret Manager)
}

// New starts a fake and stops it when the test ends.
func New(tb testing.TB, opts Options) *Server {
	tb.Helper()
	s := NewServer(opts)
	tb.Cleanup(s.Close)
	return s
}

// NewServer starts a fake; Close stops it.
func NewServer(opts Options) *Server {
	if opts.Project == "" {
		opts.Project = "test-project"
	}
	if len(opts.Zones) == 0 {
		opts.Zones = []string{"us-central1-a", "us-central1-b", "us-central1-c"}
	}
	if opts.PageSize <= 0 {
		opts.PageSize = 500
	}
	if opts.MachineTypes == nil {
		opts.MachineTypes = DefaultMachineTypes()
	}
	if opts.AcceleratorTypes == nil {
		opts.AcceleratorTypes = DefaultAcceleratorTypes()
	}
	s := &Server{
		Project:      opts.Project,
		zones:        slices.Clone(opts.Zones),
		pageSize:     opts.PageSize,
		machineTypes: map[string][]MachineType{},
		accelTypes:   map[string][]AcceleratorType{},
		instances:    map[string]*instance{},
		firewalls:    map[string]*Firewall{},
		secrets:      map[string]*Secret{},
		ops:          map[string]*operation{},
		requestIDs:   map[string]string{},
		hidden:       map[string]bool{},
		unreachable:  map[string]bool{},
		autoReady:    true,
		nextIP:       2,
	}
	for _, z := range opts.Zones {
		s.machineTypes[z] = slices.Clone(opts.MachineTypes)
		s.accelTypes[z] = slices.Clone(opts.AcceleratorTypes)
	}
	s.srv = httptest.NewServer(http.HandlerFunc(s.serve))
	s.URL = s.srv.URL
	return s
}

// Close stops the server.
func (s *Server) Close() { s.srv.Close() }

// ClientOptions are what a client needs to talk to the fake: its endpoint
// and no credentials (so that nothing looks for them, on disk or at a
// metadata server).
func (s *Server) ClientOptions() []option.ClientOption {
	return []option.ClientOption{option.WithEndpoint(s.URL), option.WithoutAuthentication()}
}

// DefaultMachineTypes is a small, real subset of Compute Engine's machine
// types.
func DefaultMachineTypes() []MachineType {
	mt := func(name string, cpus, memMb int32) MachineType {
		return MachineType{Name: name, GuestCpus: cpus, MemoryMb: memMb}
	}
	gpu := func(name string, cpus, memMb int32, accel string, n int32) MachineType {
		m := mt(name, cpus, memMb)
		m.Accelerators = []MachineTypeAccelerator{{GuestAcceleratorType: accel, GuestAcceleratorCount: n}}
		return m
	}
	micro := mt("e2-micro", 2, 1024)
	micro.IsSharedCpu = true
	old := mt("n1-standard-1", 1, 3840)
	old.Deprecated = &Deprecation{State: "DEPRECATED", Replacement: "n2-standard-2"}
	return []MachineType{
		micro, old,
		mt("e2-standard-2", 2, 8192), mt("e2-standard-4", 4, 16384), mt("e2-standard-8", 8, 32768),
		mt("n1-standard-4", 4, 15360), mt("n1-standard-8", 8, 30720), mt("n1-standard-96", 96, 368640),
		mt("c4-standard-4", 4, 15360), mt("n4-standard-4", 4, 16384),
		mt("n2-standard-2", 2, 8192), mt("n2-standard-4", 4, 16384), mt("n2-standard-8", 8, 32768),
		mt("n2-standard-32", 32, 131072), mt("n2-highmem-4", 4, 32768), mt("c2-standard-4", 4, 16384),
		gpu("g2-standard-4", 4, 16384, "nvidia-l4", 1),
		gpu("a2-highgpu-1g", 12, 87040, "nvidia-tesla-a100", 1),
		gpu("a2-highgpu-2g", 24, 174080, "nvidia-tesla-a100", 2),
		gpu("a2-ultragpu-1g", 12, 174080, "nvidia-a100-80gb", 1),
		gpu("a3-highgpu-1g", 26, 239616, "nvidia-h100-80gb", 1),
		gpu("a3-highgpu-8g", 208, 1916928, "nvidia-h100-80gb", 8),
		gpu("a3-megagpu-8g", 208, 1916928, "nvidia-h100-mega-80gb", 8),
	}
}

// DefaultAcceleratorTypes are the GPUs every zone of the fake offers.
func DefaultAcceleratorTypes() []AcceleratorType {
	return []AcceleratorType{
		{Name: "nvidia-tesla-t4", Description: "NVIDIA T4", MaximumCardsPerInstance: 4},
		{Name: "nvidia-tesla-v100", Description: "NVIDIA V100", MaximumCardsPerInstance: 8},
		{Name: "nvidia-tesla-p100", Description: "NVIDIA P100", MaximumCardsPerInstance: 4},
		{Name: "nvidia-l4", Description: "NVIDIA L4", MaximumCardsPerInstance: 8},
		{Name: "nvidia-tesla-a100", Description: "NVIDIA A100 40GB", MaximumCardsPerInstance: 16},
		{Name: "nvidia-a100-80gb", Description: "NVIDIA A100 80GB", MaximumCardsPerInstance: 8},
		{Name: "nvidia-h100-80gb", Description: "NVIDIA H100 80GB", MaximumCardsPerInstance: 8},
		{Name: "nvidia-h100-mega-80gb", Description: "NVIDIA H100 Mega 80GB", MaximumCardsPerInstance: 8},
	}
}

// ---- test controls ----

// FailInserts makes the next n instance inserts in zone ("" for any) fail
// their operation with code, e.g. ZONE_RESOURCE_POOL_EXHAUSTED or
// QUOTA_EXCEEDED; n <= 0 fails them all.
func (s *Server) FailInserts(zone string, n int, code string) {
	s.FailInsertsOf("", zone, n, code)
}

// FailInsertsOf is FailInserts for one machine type ("" for any).
func (s *Server) FailInsertsOf(machineType, zone string, n int, code string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.opFaults = append(s.opFaults, &opFault{zone: zone, machineType: machineType, code: code, times: n})
}

// FailRequests answers the next n requests whose method is method ("" for
// any) and whose path contains pathContains with HTTP status (429, 503,
// ...) and the API's error body; n <= 0 answers them all so.
func (s *Server) FailRequests(method, pathContains string, n, status int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.httpFaults = append(s.httpFaults, &httpFault{method: method, pathContains: pathContains, status: status, times: n})
}

// LoseAnswers makes the next n requests whose method is method and whose
// path contains pathContains take effect but answer HTTP 503, as when an
// answer is lost on the way: the client cannot tell whether it acted.
func (s *Server) LoseAnswers(method, pathContains string, n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.lostAnswers = append(s.lostAnswers, &httpFault{method: method, pathContains: pathContains, status: 503, times: n})
}

// LoseAnswersReset is LoseAnswers with the connection closed where the
// answer should be, as when a network fails after the API acted.
func (s *Server) LoseAnswersReset(method, pathContains string, n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.lostAnswers = append(s.lostAnswers, &httpFault{method: method, pathContains: pathContains, status: 0, times: n})
}

// Throttle answers the next n requests, whatever they are, as a project
// over its API rate: Compute Engine with 403 rateLimitExceeded ("Rate
// Limit Exceeded"), Secret Manager with 429 RESOURCE_EXHAUSTED.
func (s *Server) Throttle(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.httpFaults = append(s.httpFaults, &httpFault{status: 403, times: n, throttle: true})
}

// Injected reports how many answers the injected request faults and lost
// answers made (throttles included).
func (s *Server) Injected() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.injected
}

// ClearFaults removes every injected failure still pending.
func (s *Server) ClearFaults() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.opFaults, s.httpFaults, s.lostAnswers = nil, nil, nil
}

// HideFromLists leaves the named instance out of list answers (true), as
// an eventually consistent listing may right after it was made, while
// get and insert still see it.
func (s *Server) HideFromLists(name string, hide bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.hidden[name] = hide
}

// PutInstance places an instance in a zone directly, as if made outside the
// provider (another gateway, an operator). Status defaults to RUNNING.
func (s *Server) PutInstance(zone string, in Instance) {
	s.mu.Lock()
	defer s.mu.Unlock()
	in.Kind, in.ID = "compute#instance", s.nextID()
	in.Zone, in.SelfLink = s.link("zones/"+zone), s.link("zones/"+zone+"/instances/"+in.Name)
	if in.Status == "" {
		in.Status = "RUNNING"
	}
	if len(in.NetworkInterfaces) == 0 {
		in.NetworkInterfaces = []NetworkInterface{{Network: "global/networks/default"}}
	}
	if in.NetworkInterfaces[0].NetworkIP == "" {
		in.NetworkInterfaces[0].NetworkIP = fmt.Sprintf("10.128.9.%d", s.nextIP%250+2)
		s.nextIP++
	}
	in.CreationTimestamp = s.now()
	s.instances[zone+"/"+in.Name] = &instance{Instance: in, guest: map[string]string{}}
}

// HangOperations makes operations created from now on never finish (true)
// or finish as usual (false); a wait on a hung operation returns it
// RUNNING after a short while, as the real wait does after two minutes.
func (s *Server) HangOperations(hang bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.hang = hang
	if !hang {
		for _, op := range s.ops {
			op.hung = false
		}
	}
}

// HoldStaging keeps new instances in STAGING (true) instead of moving them
// to RUNNING.
func (s *Server) HoldStaging(hold bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.holdStaging = hold
}

// AutoReady sets whether instances that reach RUNNING get the guest
// attribute gateway/ready=1 at once, as the provider's startup script sets
// it once Dask listens (default true).
func (s *Server) AutoReady(on bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.autoReady = on
}

// SetGuestAttribute sets a guest attribute of the named instance, as its
// guest would.
func (s *Server) SetGuestAttribute(name, namespace, key, value string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	in := s.findByName(name)
	if in == nil {
		return fmt.Errorf("gcetest: no instance %s", name)
	}
	in.guest[namespace+"/"+key] = value
	return nil
}

// Preempt preempts the named Spot instance as Compute Engine does: it is
// TERMINATED and a compute.instances.preempted operation records it.
// Remove then deletes it, as instanceTerminationAction DELETE does.
func (s *Server) Preempt(name string) error {
	return s.stopOnItsOwn(name, "compute.instances.preempted", "Instance was preempted.")
}

// PowerOff stops the named instance from inside, as the startup script
// does when Dask exits, with the message it leaves in the guest attribute
// gateway/status.
func (s *Server) PowerOff(name, status string) error {
	s.mu.Lock()
	if in := s.findByName(name); in != nil && status != "" {
		in.guest["gateway/status"] = status
	}
	s.mu.Unlock()
	return s.stopOnItsOwn(name, "compute.instances.guestTerminate", "Instance terminated by guest OS shutdown.")
}

func (s *Server) stopOnItsOwn(name, opType, msg string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	in := s.findByName(name)
	if in == nil {
		return fmt.Errorf("gcetest: no instance %s", name)
	}
	now := s.now()
	in.Status, in.LastStopTimestamp = "TERMINATED", now
	op := s.newOp(in.Zone, opType, in.SelfLink, in.ID, nil)
	op.Status, op.StatusMessage, op.EndTime, op.Progress = "DONE", msg, now, 100
	op.User = "system"
	return nil
}

// Remove deletes the named instance without an operation of the
// provider's: what a Spot VM's DELETE termination action, or someone else,
// does.
func (s *Server) Remove(name string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for k, in := range s.instances {
		if in.Name == name {
			delete(s.instances, k)
			return nil
		}
	}
	return fmt.Errorf("gcetest: no instance %s", name)
}

// SetStatus sets the named instance's status (RUNNING, TERMINATED, ...).
func (s *Server) SetStatus(name, status string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	in := s.findByName(name)
	if in == nil {
		return fmt.Errorf("gcetest: no instance %s", name)
	}
	in.Status = status
	return nil
}

// Unreachable makes instances.aggregatedList answer without the zone's
// instances, as Compute Engine does for a scope it cannot reach: the scope
// carries a warning with code UNREACHABLE (warning true) or is named in the
// list's unreachables (warning false); the zone's own methods answer 503
// meanwhile. Reachable(zone) ends it.
func (s *Server) Unreachable(zone string, warning bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.unreachable[zone] = warning
}

// Reachable ends Unreachable for the zone.
func (s *Server) Reachable(zone string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.unreachable, zone)
}

// SetZoneMachineTypes replaces what one zone offers.
func (s *Server) SetZoneMachineTypes(zone string, types []MachineType) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.machineTypes[zone] = slices.Clone(types)
}

// SetZoneAcceleratorTypes replaces the GPUs one zone offers.
func (s *Server) SetZoneAcceleratorTypes(zone string, types []AcceleratorType) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.accelTypes[zone] = slices.Clone(types)
}

// Instances returns a copy of every instance, sorted by name.
func (s *Server) Instances() []Instance {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Instance, 0, len(s.instances))
	for _, in := range s.instances {
		out = append(out, in.Instance)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Instance returns a copy of the named instance.
func (s *Server) Instance(name string) (Instance, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if in := s.findByName(name); in != nil {
		return in.Instance, true
	}
	return Instance{}, false
}

// Firewalls returns a copy of every firewall rule, sorted by name.
func (s *Server) Firewalls() []Firewall {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Firewall, 0, len(s.firewalls))
	for _, f := range s.firewalls {
		out = append(out, *f)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Secrets returns a copy of every secret, by secret ID.
func (s *Server) Secrets() map[string]Secret {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string]Secret, len(s.secrets))
	for id, sec := range s.secrets {
		c := *sec
		c.Versions = slices.Clone(sec.Versions)
		out[id] = c
	}
	return out
}

// Operations returns a copy of every operation, oldest first.
func (s *Server) Operations() []Operation {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Operation, 0, len(s.opOrder))
	for _, name := range s.opOrder {
		out = append(out, s.ops[name].Operation)
	}
	return out
}

// Requests returns every request received so far.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.requests)
}

// RequestsTo returns the requests with this method whose path ends with
// suffix.
func (s *Server) RequestsTo(method, suffix string) []Request {
	var out []Request
	for _, r := range s.Requests() {
		if r.Method == method && strings.HasSuffix(r.Path, suffix) {
			out = append(out, r)
		}
	}
	return out
}

// ---- serving ----

// apiError is an error as the APIs return it.
type apiError struct {
	code    int
	reason  string // Compute Engine's errors[].reason
	status  string // Secret Manager's (google.rpc) status
	message string
}

func (e *apiError) Error() string { return e.message }

func computeErr(code int, reason, format string, args ...any) *apiError {
	return &apiError{code: code, reason: reason, message: fmt.Sprintf(format, args...)}
}

func secretErr(code int, status, format string, args ...any) *apiError {
	return &apiError{code: code, status: status, message: fmt.Sprintf(format, args...)}
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	s.mu.Lock()
	s.requests = append(s.requests, Request{Method: r.Method, Path: r.URL.Path, Query: r.URL.Query(), Body: body})
	secretAPI := strings.HasPrefix(r.URL.Path, "/v1/")
	if f := s.takeHTTPFault(r); f != nil {
		s.injected++
		s.mu.Unlock()
		if f.throttle {
			writeError(w, throttleError(secretAPI))
			return
		}
		writeError(w, faultError(f.status, secretAPI))
		return
	}
	s.advance()
	var (
		resp any
		err  *apiError
		wait *operation
	)
	switch {
	case strings.HasPrefix(r.URL.Path, "/compute/v1/projects/"):
		resp, wait, err = s.compute(r, body)
	case secretAPI:
		resp, err = s.secretManager(r, body)
	default:
		err = computeErr(404, "notFound", "no such API path %s", r.URL.Path)
	}
	if wait != nil && wait.hung {
		// A wait on an operation that does not finish returns it
		// unfinished after a while, as the real one does after two
		// minutes; here briefly, or when the client gives up.
		s.mu.Unlock()
		select {
		case <-r.Context().Done():
		case <-time.After(20 * time.Millisecond):
		}
		s.mu.Lock()
		resp = wait.Operation
	}
	if err == nil {
		if f := takeFault(&s.lostAnswers, r); f != nil {
			s.injected++
			if f.status == 0 {
				s.mu.Unlock()
				hangUp(w)
				return
			}
			err = faultError(f.status, secretAPI)
		}
	}
	s.mu.Unlock()
	if err != nil {
		writeError(w, err)
		return
	}
	w.Header().Set("Content-Type", "application/json; charset=UTF-8")
	_ = json.NewEncoder(w).Encode(resp)
}

func (s *Server) takeHTTPFault(r *http.Request) *httpFault { return takeFault(&s.httpFaults, r) }

func takeFault(list *[]*httpFault, r *http.Request) *httpFault {
	for i, f := range *list {
		if (f.method == "" || f.method == r.Method) && strings.Contains(r.URL.Path, f.pathContains) {
			if f.times > 0 {
				f.times--
				if f.times == 0 {
					*list = slices.Delete(*list, i, i+1)
				}
			}
			return f
		}
	}
	return nil
}

func faultError(status int, secretAPI bool) *apiError {
	reason, st := "backendError", "UNAVAILABLE"
	switch status {
	case 429:
		reason, st = "rateLimitExceeded", "RESOURCE_EXHAUSTED"
	case 500:
		st = "INTERNAL"
	case 403:
		reason, st = "forbidden", "PERMISSION_DENIED"
	}
	if secretAPI {
		return secretErr(status, st, "injected failure (HTTP %d)", status)
	}
	return computeErr(status, reason, "injected failure (HTTP %d)", status)
}

// throttleError is what a project over its rate gets.
func throttleError(secretAPI bool) *apiError {
	if secretAPI {
		return secretErr(429, "RESOURCE_EXHAUSTED", "Quota exceeded for quota metric 'Access requests' and limit 'Access requests per minute'.")
	}
	return computeErr(403, "rateLimitExceeded", "Rate Limit Exceeded")
}

// hangUp closes the connection without an answer.
func hangUp(w http.ResponseWriter) {
	hj, ok := w.(http.Hijacker)
	if !ok {
		panic("gcetest: cannot hijack the connection")
	}
	if conn, _, err := hj.Hijack(); err == nil {
		_ = conn.Close()
	}
}

func writeError(w http.ResponseWriter, e *apiError) {
	w.Header().Set("Content-Type", "application/json; charset=UTF-8")
	w.WriteHeader(e.code)
	inner := map[string]any{"code": e.code, "message": e.message}
	if e.status != "" {
		inner["status"] = e.status
	} else {
		inner["errors"] = []map[string]string{{"message": e.message, "domain": "global", "reason": e.reason}}
	}
	_ = json.NewEncoder(w).Encode(map[string]any{"error": inner})
}

// advance moves the world one step: operations finish, instances that
// were STAGING run.
func (s *Server) advance() {
	for _, in := range s.instances {
		if in.Status == "STAGING" && !s.holdStaging {
			in.Status, in.LastStartTimestamp = "RUNNING", s.now()
			if s.autoReady {
				in.guest["gateway/ready"] = "1"
			}
		}
	}
	for _, name := range s.opOrder {
		if op := s.ops[name]; op.Status != "DONE" && !op.hung {
			s.finish(op)
		}
	}
}

func (s *Server) finish(op *operation) {
	op.Status, op.Progress, op.EndTime = "DONE", 100, s.now()
	if op.fail != nil {
		msg := fmt.Sprintf("The zone '%s' does not have enough resources available to fulfill the request.  Try a different zone, or try again later.", op.Zone)
		status, text := int32(503), "SERVICE UNAVAILABLE"
		if strings.HasPrefix(op.fail.code, "QUOTA") {
			msg = fmt.Sprintf("Quota 'CPUS' exceeded.  Limit: 24.0 in region %s.", regionOf(shortZone(op.Zone)))
			status, text = 403, "FORBIDDEN"
		}
		op.Error = &OperationError{Errors: []OperationErrorItem{{Code: op.fail.code, Message: msg}}}
		op.HTTPErrorStatusCode, op.HTTPErrorMessage = status, text
		return
	}
	if op.pending != nil {
		op.pending()
		op.pending = nil
	}
}

func (s *Server) now() string { return time.Now().UTC().Format("2006-01-02T15:04:05.000-07:00") }

func (s *Server) nextID() Int64 {
	s.seq++
	return Int64(1000000 + s.seq)
}

func (s *Server) link(path string) string {
	return "https://www.googleapis.com/compute/v1/projects/" + s.Project + "/" + path
}

func (s *Server) newOp(zone, opType, target string, targetID Int64, fail *opFault) *operation {
	id := s.nextID()
	name := fmt.Sprintf("operation-%d-%s", id, strings.ReplaceAll(opType, ".", "-"))
	scope := "global/operations/" + name
	zoneLink := ""
	if zone != "" {
		scope = "zones/" + zone + "/operations/" + name
		zoneLink = s.link("zones/" + zone)
	}
	op := &operation{Operation: Operation{
		Kind: "compute#operation", ID: id, Name: name, Zone: zoneLink, OperationType: opType,
		TargetLink: target, TargetID: targetID, Status: "RUNNING", User: "gateway@test-project.iam.gserviceaccount.com",
		InsertTime: s.now(), StartTime: s.now(), SelfLink: s.link(scope),
	}, fail: fail, hung: s.hang}
	s.ops[name] = op
	s.opOrder = append(s.opOrder, name)
	return op
}

func (s *Server) findByName(name string) *instance {
	for _, in := range s.instances {
		if in.Name == name {
			return in
		}
	}
	return nil
}

func (s *Server) knownZone(z string) bool { return slices.Contains(s.zones, z) }

// ---- Compute Engine ----

func (s *Server) compute(r *http.Request, body []byte) (any, *operation, *apiError) {
	rest := strings.TrimPrefix(r.URL.Path, "/compute/v1/projects/")
	project, rest, _ := strings.Cut(rest, "/")
	if project != s.Project {
		return nil, nil, computeErr(404, "notFound", "The resource 'projects/%s' was not found", project)
	}
	parts := strings.Split(rest, "/")
	q := r.URL.Query()
	if rid := q.Get("requestId"); rid != "" && r.Method != http.MethodGet {
		// "The request ID must be a valid UUID with the exception that
		// zero UUID is not supported"; a repeated one returns the first
		// request's operation instead of acting again.
		if !uuidRE.MatchString(rid) || rid == "00000000-0000-0000-0000-000000000000" {
			return nil, nil, computeErr(400, "invalid", "Invalid value for field 'requestId': '%s'. The request ID must be a valid UUID with the exception that zero UUID is not supported.", rid)
		}
		if name, ok := s.requestIDs[rid]; ok {
			return s.ops[name].Operation, nil, nil
		}
		resp, wait, err := s.computeOnce(r, parts, q, body)
		if op, ok := resp.(Operation); ok && err == nil {
			s.requestIDs[rid] = op.Name
		}
		return resp, wait, err
	}
	return s.computeOnce(r, parts, q, body)
}

// uuidRE is the form of a request ID.
var uuidRE = regexp.MustCompile(`^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$`)

func (s *Server) computeOnce(r *http.Request, parts []string, q url.Values, body []byte) (any, *operation, *apiError) {
	switch {
	case len(parts) == 2 && parts[0] == "aggregated" && parts[1] == "instances" && r.Method == http.MethodGet:
		resp, err := s.aggregatedInstances(q)
		return resp, nil, err
	case len(parts) >= 3 && parts[0] == "zones":
		zone := parts[1]
		if !s.knownZone(zone) {
			return nil, nil, computeErr(400, "invalid", "Invalid value for field 'zone': '%s'. Unknown zone.", zone)
		}
		if _, out := s.unreachable[zone]; out {
			return nil, nil, computeErr(503, "backendError", "Zone '%s' is unreachable; try again later.", zone)
		}
		return s.zonal(r, zone, parts[2:], q, body)
	case len(parts) >= 2 && parts[0] == "global" && parts[1] == "firewalls":
		resp, err := s.firewallsAPI(r, parts[2:], body)
		return resp, nil, err
	case len(parts) >= 3 && parts[0] == "global" && parts[1] == "operations":
		op := s.ops[parts[2]]
		if op == nil || op.Zone != "" {
			return nil, nil, computeErr(404, "notFound", "The resource 'projects/%s/global/operations/%s' was not found", s.Project, parts[2])
		}
		if len(parts) == 4 && parts[3] == "wait" && r.Method == http.MethodPost {
			return op.Operation, op, nil
		}
		return op.Operation, nil, nil
	}
	return nil, nil, computeErr(404, "notFound", "no such method: %s %s", r.Method, r.URL.Path)
}

func (s *Server) zonal(r *http.Request, zone string, parts []string, q url.Values, body []byte) (any, *operation, *apiError) {
	switch parts[0] {
	case "instances":
		switch {
		case len(parts) == 1 && r.Method == http.MethodPost:
			op, err := s.insertInstance(zone, q, body)
			return op, nil, err
		case len(parts) == 1 && r.Method == http.MethodGet:
			var items []any
			terms, err := parseFilter(q.Get("filter"))
			if err != nil {
				return nil, nil, err
			}
			for _, in := range s.sortedInstances() {
				if shortZone(in.Zone) == zone && !s.hidden[in.Name] && terms.match(instanceFields(in.Instance)) {
					items = append(items, in.Instance)
				}
			}
			resp, perr := s.page(items, q, "compute#instanceList")
			return resp, nil, perr
		case len(parts) == 2 && r.Method == http.MethodGet:
			in := s.instances[zone+"/"+parts[1]]
			if in == nil {
				return nil, nil, s.notFound("zones/" + zone + "/instances/" + parts[1])
			}
			return in.Instance, nil, nil
		case len(parts) == 2 && r.Method == http.MethodDelete:
			op, err := s.deleteInstance(zone, parts[1])
			return op, nil, err
		case len(parts) == 3 && parts[2] == "getGuestAttributes" && r.Method == http.MethodGet:
			resp, err := s.guestAttributes(zone, parts[1], q.Get("queryPath"))
			return resp, nil, err
		}
	case "operations":
		if len(parts) == 1 && r.Method == http.MethodGet {
			terms, err := parseFilter(q.Get("filter"))
			if err != nil {
				return nil, nil, err
			}
			var items []any
			for _, name := range s.opOrder {
				op := s.ops[name]
				if shortZone(op.Zone) == zone && terms.match(opFields(op.Operation)) {
					items = append(items, op.Operation)
				}
			}
			resp, perr := s.page(items, q, "compute#operationList")
			return resp, nil, perr
		}
		if len(parts) >= 2 {
			op := s.ops[parts[1]]
			if op == nil || shortZone(op.Zone) != zone {
				return nil, nil, s.notFound("zones/" + zone + "/operations/" + parts[1])
			}
			if len(parts) == 3 && parts[2] == "wait" && r.Method == http.MethodPost {
				return op.Operation, op, nil
			}
			if len(parts) == 2 && r.Method == http.MethodGet {
				return op.Operation, nil, nil
			}
		}
	case "machineTypes":
		if len(parts) == 1 && r.Method == http.MethodGet {
			var items []any
			for _, m := range s.machineTypes[zone] {
				m.Kind, m.Zone = "compute#machineType", zone
				m.SelfLink = s.link("zones/" + zone + "/machineTypes/" + m.Name)
				items = append(items, m)
			}
			resp, err := s.page(items, q, "compute#machineTypeList")
			return resp, nil, err
		}
	case "acceleratorTypes":
		if len(parts) == 1 && r.Method == http.MethodGet {
			var items []any
			for _, a := range s.accelTypes[zone] {
				a.Kind, a.Zone = "compute#acceleratorType", s.link("zones/"+zone)
				a.SelfLink = s.link("zones/" + zone + "/acceleratorTypes/" + a.Name)
				items = append(items, a)
			}
			resp, err := s.page(items, q, "compute#acceleratorTypeList")
			return resp, nil, err
		}
	}
	return nil, nil, computeErr(404, "notFound", "no such method: %s %s", r.Method, r.URL.Path)
}

func (s *Server) notFound(path string) *apiError {
	return computeErr(404, "notFound", "The resource 'projects/%s/%s' was not found", s.Project, path)
}

func (s *Server) sortedInstances() []*instance {
	out := make([]*instance, 0, len(s.instances))
	for _, in := range s.instances {
		out = append(out, in)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Zone != out[j].Zone {
			return out[i].Zone < out[j].Zone
		}
		return out[i].Name < out[j].Name
	})
	return out
}

// page returns one page of items: maxResults (at most the server's page
// size) from the offset the pageToken names.
func (s *Server) page(items []any, q url.Values, kind string) (map[string]any, *apiError) {
	start, end, next, err := s.pageBounds(len(items), q)
	if err != nil {
		return nil, err
	}
	resp := map[string]any{"kind": kind, "items": items[start:end]}
	if next != "" {
		resp["nextPageToken"] = next
	}
	return resp, nil
}

func (s *Server) pageBounds(n int, q url.Values) (start, end int, next string, err *apiError) {
	size := s.pageSize
	if m := q.Get("maxResults"); m != "" {
		v, perr := strconv.Atoi(m)
		if perr != nil || v < 0 || v > 500 {
			// "Acceptable values are 0 to 500, inclusive."
			return 0, 0, "", computeErr(400, "invalid", "Invalid value for field 'maxResults': '%s'. Must be less than or equal to 500", m)
		}
		if v > 0 && v < size {
			size = v
		}
	}
	if t := q.Get("pageToken"); t != "" {
		v, perr := strconv.Atoi(t)
		if perr != nil || v < 0 || v > n {
			return 0, 0, "", computeErr(400, "invalid", "Invalid value for field 'pageToken': '%s'.", t)
		}
		start = v
	}
	end = min(start+size, n)
	if end < n {
		next = strconv.Itoa(end)
	}
	return start, end, next, nil
}

func (s *Server) aggregatedInstances(q url.Values) (any, *apiError) {
	terms, err := parseFilter(q.Get("filter"))
	if err != nil {
		return nil, err
	}
	var matched []*instance
	for _, in := range s.sortedInstances() {
		if _, out := s.unreachable[shortZone(in.Zone)]; out {
			continue
		}
		if !s.hidden[in.Name] && terms.match(instanceFields(in.Instance)) {
			matched = append(matched, in)
		}
	}
	start, end, next, perr := s.pageBounds(len(matched), q)
	if perr != nil {
		return nil, perr
	}
	items := map[string]any{}
	byZone := map[string][]Instance{}
	for _, in := range matched[start:end] {
		z := shortZone(in.Zone)
		byZone[z] = append(byZone[z], in.Instance)
	}
	var unreachables []string
	for _, z := range s.zones {
		if warn, out := s.unreachable[z]; out {
			if !warn {
				unreachables = append(unreachables, "zones/"+z)
				continue
			}
			items["zones/"+z] = map[string]any{"warning": map[string]any{
				"code": "UNREACHABLE", "message": "Scope 'zones/" + z + "' is unreachable.",
				"data": []map[string]string{{"key": "scope", "value": "zones/" + z}},
			}}
			continue
		}
		if list := byZone[z]; len(list) > 0 {
			items["zones/"+z] = map[string]any{"instances": list}
		} else {
			items["zones/"+z] = map[string]any{"warning": map[string]any{
				"code": "NO_RESULTS_ON_PAGE", "message": "There are no results for scope 'zones/" + z + "' on this page.",
				"data": []map[string]string{{"key": "scope", "value": "zones/" + z}},
			}}
		}
	}
	resp := map[string]any{"kind": "compute#instanceAggregatedList", "items": items}
	if len(unreachables) > 0 {
		resp["unreachables"] = unreachables
	}
	if next != "" {
		resp["nextPageToken"] = next
	}
	return resp, nil
}

var (
	nameRE       = regexp.MustCompile(`^[a-z]([-a-z0-9]{0,61}[a-z0-9])?$`)
	labelKeyRE   = regexp.MustCompile(`^[a-z][a-z0-9_-]{0,62}$`)
	labelValueRE = regexp.MustCompile(`^[a-z0-9_-]{0,63}$`)
	metaKeyRE    = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,128}$`)
)

func (s *Server) insertInstance(zone string, q url.Values, body []byte) (any, *apiError) {
	// A repeated requestId is answered in compute, before this.
	var in Instance
	if err := json.Unmarshal(body, &in); err != nil {
		return nil, computeErr(400, "parseError", "Invalid JSON payload received. %v", err)
	}
	if err := s.validateInstance(zone, &in); err != nil {
		return nil, err
	}
	if s.instances[zone+"/"+in.Name] != nil {
		return nil, computeErr(409, "alreadyExists", "The resource 'projects/%s/zones/%s/instances/%s' already exists", s.Project, zone, in.Name)
	}
	mt := path1(in.MachineType, "machineTypes")
	selfLink := s.link("zones/" + zone + "/instances/" + in.Name)
	var fault *opFault
	for i, f := range s.opFaults {
		if (f.zone == "" || f.zone == zone) && (f.machineType == "" || f.machineType == mt) {
			fault = &opFault{zone: zone, machineType: mt, code: f.code}
			if f.times > 0 {
				f.times--
				if f.times == 0 {
					s.opFaults = slices.Delete(s.opFaults, i, i+1)
				}
			}
			break
		}
	}
	id := s.nextID()
	op := s.newOp(zone, "insert", selfLink, id, fault)
	if fault != nil {
		// A stock-out or quota failure creates nothing.
		return op.Operation, nil
	}
	in.Kind, in.ID, in.Zone, in.SelfLink = "compute#instance", id, s.link("zones/"+zone), selfLink
	in.MachineType = s.link("zones/" + zone + "/machineTypes/" + mt)
	in.Status, in.CreationTimestamp = "PROVISIONING", s.now()
	ip := s.nextIP
	s.nextIP++
	in.NetworkInterfaces[0].NetworkIP = fmt.Sprintf("10.128.%d.%d", ip/250, ip%250+2)
	in.NetworkInterfaces[0].Name = "nic0"
	if in.Metadata == nil {
		in.Metadata = &Metadata{}
	}
	in.Metadata.Kind, in.Metadata.Fingerprint = "compute#metadata", "fp-"+strconv.FormatInt(int64(id), 10)
	stored := &instance{Instance: in, guest: map[string]string{}}
	s.instances[zone+"/"+in.Name] = stored
	op.pending = func() {
		if stored.Status == "PROVISIONING" {
			stored.Status = "STAGING"
		}
	}
	return op.Operation, nil
}

// validateInstance refuses what the real API refuses, for the fields the
// provider sets.
func (s *Server) validateInstance(zone string, in *Instance) *apiError {
	invalid := func(field, format string, args ...any) *apiError {
		return computeErr(400, "invalid", "Invalid value for field 'resource.%s': %s", field, fmt.Sprintf(format, args...))
	}
	if !nameRE.MatchString(in.Name) {
		return invalid("name", "'%s'. Must be a match of regex '(?:[a-z](?:[-a-z0-9]{0,61}[a-z0-9])?)'", in.Name)
	}
	mtZone, mt := zoneAndName(in.MachineType, "machineTypes")
	if mt == "" || (mtZone != "" && mtZone != zone) {
		return invalid("machineType", "'%s'. Must be zones/%s/machineTypes/TYPE", in.MachineType, zone)
	}
	var machine *MachineType
	for i := range s.machineTypes[zone] {
		if s.machineTypes[zone][i].Name == mt {
			machine = &s.machineTypes[zone][i]
		}
	}
	if machine == nil {
		return invalid("machineType", "'%s'. Machine type with name '%s' does not exist in zone '%s'.", in.MachineType, mt, zone)
	}
	boot := 0
	for i, d := range in.Disks {
		if d.Boot {
			boot++
			if d.InitializeParams == nil || d.InitializeParams.SourceImage == "" {
				return invalid(fmt.Sprintf("disks[%d].initializeParams.sourceImage", i), "a boot disk needs a source image")
			}
		}
		if d.InitializeParams != nil && d.InitializeParams.DiskType != "" {
			// Without a type, Compute Engine picks the series' default,
			// which it takes.
			_, dt := zoneAndName(d.InitializeParams.DiskType, "diskTypes")
			if err := gcerules.CheckBootDisk(mt, dt); err != nil {
				return computeErr(400, "badRequest", "Invalid value for field 'resource.disks[%d].initializeParams.diskType': '%s'. %v", i, d.InitializeParams.DiskType, err)
			}
		}
	}
	if boot != 1 {
		return invalid("disks", "exactly one boot disk is required, got %d", boot)
	}
	if len(in.NetworkInterfaces) == 0 {
		return invalid("networkInterfaces", "at least one network interface is required")
	}
	if len(in.Labels) > 64 {
		return invalid("labels", "at most 64 labels")
	}
	for k, v := range in.Labels {
		if !labelKeyRE.MatchString(k) || !labelValueRE.MatchString(v) {
			return invalid("labels", "label %q=%q is not a valid key and value", k, v)
		}
	}
	if in.Tags != nil {
		for _, t := range in.Tags.Items {
			if !nameRE.MatchString(t) {
				return invalid("tags.items", "'%s'. Must be a match of regex '(?:[a-z](?:[-a-z0-9]{0,61}[a-z0-9])?)'", t)
			}
		}
	}
	if in.Metadata != nil {
		seen := map[string]bool{}
		total := 0
		for _, it := range in.Metadata.Items {
			if !metaKeyRE.MatchString(it.Key) || seen[it.Key] {
				return invalid("metadata", "key %q is invalid or repeated", it.Key)
			}
			seen[it.Key] = true
			if len(it.Value) > 256<<10 {
				return invalid("metadata", "value of %q exceeds 256 KiB", it.Key)
			}
			total += len(it.Key) + len(it.Value)
		}
		if total > 512<<10 {
			return invalid("metadata", "metadata exceeds 512 KiB")
		}
	}
	sched := in.Scheduling
	if sched == nil {
		sched = &Scheduling{}
	}
	gpus := len(machine.Accelerators) > 0
	if gpus && len(in.GuestAccelerators) > 0 {
		return computeErr(400, "badRequest", "Machine type '%s' comes with its GPUs; guestAccelerators cannot be set (%s).", mt, gcerules.RefAccelerator)
	}
	if len(in.GuestAccelerators) > 1 {
		return invalid("guestAccelerators", "at most one accelerator type per instance")
	}
	for i, a := range in.GuestAccelerators {
		aZone, aName := zoneAndName(a.AcceleratorType, "acceleratorTypes")
		if aZone != "" && aZone != zone {
			return invalid(fmt.Sprintf("guestAccelerators[%d].acceleratorType", i), "'%s' is in another zone", a.AcceleratorType)
		}
		if !slices.ContainsFunc(s.accelTypes[zone], func(t AcceleratorType) bool { return t.Name == aName }) {
			return invalid(fmt.Sprintf("guestAccelerators[%d].acceleratorType", i), "Accelerator type '%s' does not exist in zone %s.", a.AcceleratorType, zone)
		}
		if a.AcceleratorCount <= 0 {
			return invalid(fmt.Sprintf("guestAccelerators[%d].acceleratorCount", i), "must be positive")
		}
		if err := gcerules.CheckN1GPUs(mt, aName, int(a.AcceleratorCount), int(machine.GuestCpus), float64(machine.MemoryMb)/1024); err != nil {
			return computeErr(400, "badRequest", "Invalid value for field 'resource.guestAccelerators[%d]': %v", i, err)
		}
		gpus = true
	}
	if gpus && sched.OnHostMaintenance != "TERMINATE" {
		return computeErr(400, "badRequest", "Instances with guest accelerators do not support live migration.")
	}
	spot := sched.ProvisioningModel == "SPOT" || sched.Preemptible
	if err := gcerules.CheckProvisioning(mt, sched.ProvisioningModel == "SPOT"); err != nil {
		return computeErr(400, "badRequest", "Invalid value for field 'resource.scheduling.provisioningModel': '%s'. %v", sched.ProvisioningModel, err)
	}
	if spot && (sched.OnHostMaintenance != "TERMINATE" || sched.AutomaticRestart == nil || *sched.AutomaticRestart) {
		return computeErr(400, "badRequest", "Scheduling must have preemptible be false when OnHostMaintenance isn't TERMINATE, and automaticRestart must be false.")
	}
	if sched.InstanceTerminationAction != "" && !spot {
		return invalid("scheduling.instanceTerminationAction", "only Spot VMs take a termination action here")
	}
	return nil
}

func (s *Server) deleteInstance(zone, name string) (any, *apiError) {
	key := zone + "/" + name
	in := s.instances[key]
	if in == nil {
		return nil, s.notFound("zones/" + zone + "/instances/" + name)
	}
	op := s.newOp(zone, "delete", in.SelfLink, in.ID, nil)
	in.Status = "STOPPING"
	op.pending = func() {
		if s.instances[key] == in {
			delete(s.instances, key)
		}
	}
	return op.Operation, nil
}

func (s *Server) guestAttributes(zone, name, queryPath string) (any, *apiError) {
	in := s.instances[zone+"/"+name]
	if in == nil {
		return nil, s.notFound("zones/" + zone + "/instances/" + name)
	}
	ns := strings.TrimSuffix(queryPath, "/")
	var items []map[string]string
	keys := make([]string, 0, len(in.guest))
	for k := range in.guest {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		n, key, _ := strings.Cut(k, "/")
		if ns == "" || n == ns {
			items = append(items, map[string]string{"namespace": n, "key": key, "value": in.guest[k]})
		}
	}
	if len(items) == 0 {
		// What the API answers for a path with no attributes.
		return nil, computeErr(404, "notFound", "The resource 'projects/%s/zones/%s/instances/%s/guestAttributes/%s' was not found", s.Project, zone, name, queryPath)
	}
	return map[string]any{"kind": "compute#guestAttributes", "queryPath": queryPath, "queryValue": map[string]any{"items": items}}, nil
}

func (s *Server) firewallsAPI(r *http.Request, parts []string, body []byte) (any, *apiError) {
	switch {
	case len(parts) == 0 && r.Method == http.MethodGet:
		return s.listFirewalls(r.URL.Query())
	case len(parts) == 0 && r.Method == http.MethodPost:
		var f Firewall
		if err := json.Unmarshal(body, &f); err != nil {
			return nil, computeErr(400, "parseError", "Invalid JSON payload received. %v", err)
		}
		if err := validateFirewall(&f); err != nil {
			return nil, err
		}
		if s.firewalls[f.Name] != nil {
			return nil, computeErr(409, "alreadyExists", "The resource 'projects/%s/global/firewalls/%s' already exists", s.Project, f.Name)
		}
		f.Kind, f.ID, f.CreationTimestamp = "compute#firewall", s.nextID(), s.now()
		f.SelfLink = s.link("global/firewalls/" + f.Name)
		return s.storeFirewall("insert", f), nil
	case len(parts) == 1 && r.Method == http.MethodGet:
		f := s.firewalls[parts[0]]
		if f == nil {
			return nil, s.notFound("global/firewalls/" + parts[0])
		}
		return *f, nil
	case len(parts) == 1 && r.Method == http.MethodPut:
		// update: the whole resource is replaced (fields left out are
		// cleared), under the same name.
		cur := s.firewalls[parts[0]]
		if cur == nil {
			return nil, s.notFound("global/firewalls/" + parts[0])
		}
		var f Firewall
		if err := json.Unmarshal(body, &f); err != nil {
			return nil, computeErr(400, "parseError", "Invalid JSON payload received. %v", err)
		}
		if f.Name != cur.Name {
			return nil, computeErr(400, "invalid", "Invalid value for field 'resource.name': '%s'. The name of a firewall cannot be changed.", f.Name)
		}
		if err := validateFirewall(&f); err != nil {
			return nil, err
		}
		f.Kind, f.ID, f.CreationTimestamp, f.SelfLink = cur.Kind, cur.ID, cur.CreationTimestamp, cur.SelfLink
		return s.storeFirewall("update", f), nil
	case len(parts) == 1 && r.Method == http.MethodDelete:
		f := s.firewalls[parts[0]]
		if f == nil {
			return nil, s.notFound("global/firewalls/" + parts[0])
		}
		op := s.newOp("", "delete", f.SelfLink, f.ID, nil)
		name := f.Name
		op.pending = func() { delete(s.firewalls, name) }
		return op.Operation, nil
	}
	return nil, computeErr(404, "notFound", "no such method: %s %s", r.Method, r.URL.Path)
}

// storeFirewall fills in the defaults of f's fields left out and returns
// the operation (of opType) that stores f when it completes.
func (s *Server) storeFirewall(opType string, f Firewall) Operation {
	if f.Priority == 0 {
		f.Priority = 1000
	}
	if f.Direction == "" {
		f.Direction = "INGRESS"
	}
	op := s.newOp("", opType, f.SelfLink, f.ID, nil)
	op.pending = func() { s.firewalls[f.Name] = &f }
	return op.Operation
}

func validateFirewall(f *Firewall) *apiError {
	invalid := func(field, format string, args ...any) *apiError {
		return computeErr(400, "invalid", "Invalid value for field 'resource.%s': %s", field, fmt.Sprintf(format, args...))
	}
	if !nameRE.MatchString(f.Name) {
		return invalid("name", "'%s'", f.Name)
	}
	if f.Network == "" {
		return invalid("network", "a network is required")
	}
	if f.Direction != "" && f.Direction != "INGRESS" && f.Direction != "EGRESS" {
		return invalid("direction", "'%s'", f.Direction)
	}
	if len(f.Allowed) == 0 && len(f.Denied) == 0 {
		return invalid("allowed", "a rule needs allowed or denied entries")
	}
	for i, a := range f.Allowed {
		if a.IPProtocol == "" {
			return invalid(fmt.Sprintf("allowed[%d].IPProtocol", i), "required")
		}
		for _, p := range a.Ports {
			if !regexp.MustCompile(`^[0-9]{1,5}(-[0-9]{1,5})?$`).MatchString(p) {
				return invalid(fmt.Sprintf("allowed[%d].ports", i), "'%s'", p)
			}
		}
	}
	ingress := f.Direction == "" || f.Direction == "INGRESS"
	if ingress && len(f.SourceRanges) == 0 && len(f.SourceTags) == 0 && len(f.SourceServiceAccounts) == 0 {
		return invalid("sourceRanges", "an ingress rule needs sourceRanges, sourceTags or sourceServiceAccounts (without them it allows 0.0.0.0/0)")
	}
	for _, t := range append(slices.Clone(f.SourceTags), f.TargetTags...) {
		if !nameRE.MatchString(t) {
			return invalid("targetTags", "'%s'", t)
		}
	}
	// Google's rules for service accounts in firewall rules: they select
	// instances by the account they run as, and cannot be mixed with
	// network tags in one rule, in either role.
	tags := len(f.SourceTags) + len(f.TargetTags)
	switch {
	case len(f.SourceServiceAccounts) > 0 && tags > 0:
		return invalid("sourceServiceAccounts", "sourceServiceAccounts cannot be used at the same time as sourceTags or targetTags")
	case len(f.TargetServiceAccounts) > 0 && tags > 0:
		return invalid("targetServiceAccounts", "targetServiceAccounts cannot be used at the same time as targetTags or sourceTags")
	case !ingress && (len(f.SourceServiceAccounts) > 0 || len(f.SourceTags) > 0):
		return invalid("sourceServiceAccounts", "an egress rule cannot have sources")
	case len(f.SourceServiceAccounts) > 10 || len(f.TargetServiceAccounts) > 10:
		return invalid("sourceServiceAccounts", "at most 10 service accounts")
	}
	for _, a := range append(slices.Clone(f.SourceServiceAccounts), f.TargetServiceAccounts...) {
		if !serviceAccountRE.MatchString(a) {
			return invalid("serviceAccounts", "'%s' is not a service account email", a)
		}
	}
	return nil
}

var serviceAccountRE = regexp.MustCompile(`^[a-z0-9._%+-]+@[a-z0-9.-]+\.[a-z]+$`)

// ---- filters ----

type term struct{ field, op, value string }

type terms []term

var termRE = regexp.MustCompile(`\(?\s*([A-Za-z][A-Za-z0-9_.\-]*)\s*(!=|=|:)\s*("(?:[^"\\]|\\.)*"|[^\s()"]+)\s*\)?`)

// parseFilter parses the subset of the list filter language the provider
// uses: comparisons "field = value", "field != value" and "field : value"
// (with quoted or bare values), each optionally in parentheses, joined by
// AND or by juxtaposition. Anything else is refused, as a filter the fake
// does not understand would otherwise silently match everything.
func parseFilter(expr string) (terms, *apiError) {
	if strings.TrimSpace(expr) == "" {
		return nil, nil
	}
	var out terms
	rest := termRE.ReplaceAllStringFunc(expr, func(m string) string {
		sm := termRE.FindStringSubmatch(m)
		v := sm[3]
		if strings.HasPrefix(v, `"`) {
			if uq, err := strconv.Unquote(v); err == nil {
				v = uq
			}
		}
		out = append(out, term{field: sm[1], op: sm[2], value: v})
		return " "
	})
	if strings.TrimSpace(strings.ReplaceAll(rest, "AND", " ")) != "" || len(out) == 0 {
		return nil, computeErr(400, "invalid", "Invalid list filter expression '%s'.", expr)
	}
	return out, nil
}

func (ts terms) match(fields map[string]string) bool {
	for _, t := range ts {
		v, ok := fields[t.field]
		switch t.op {
		case "=":
			if !ok || v != t.value {
				return false
			}
		case "!=":
			if ok && v == t.value {
				return false
			}
		case ":":
			if !ok || !strings.Contains(v, t.value) {
				return false
			}
		}
	}
	return true
}

func instanceFields(in Instance) map[string]string {
	f := map[string]string{
		"name": in.Name, "status": in.Status, "zone": shortZone(in.Zone),
		"id": strconv.FormatInt(int64(in.ID), 10), "machineType": path1(in.MachineType, "machineTypes"),
	}
	for k, v := range in.Labels {
		f["labels."+k] = v
	}
	return f
}

func opFields(op Operation) map[string]string {
	return map[string]string{
		"name": op.Name, "status": op.Status, "operationType": op.OperationType,
		"targetLink": op.TargetLink, "targetId": strconv.FormatInt(int64(op.TargetID), 10),
	}
}

// ---- Secret Manager ----

func (s *Server) secretManager(r *http.Request, body []byte) (any, *apiError) {
	rest := strings.TrimPrefix(r.URL.Path, "/v1/projects/")
	project, rest, _ := strings.Cut(rest, "/")
	if project != s.Project {
		return nil, secretErr(403, "PERMISSION_DENIED", "Permission denied on resource project %s.", project)
	}
	parts := strings.Split(rest, "/")
	if len(parts) == 0 || parts[0] != "secrets" {
		return nil, secretErr(404, "NOT_FOUND", "no such method: %s %s", r.Method, r.URL.Path)
	}
	if len(parts) == 1 && r.Method == http.MethodPost {
		return s.createSecret(r.URL.Query().Get("secretId"), body)
	}
	if len(parts) == 1 && r.Method == http.MethodGet {
		return s.listSecrets(r.URL.Query())
	}
	if len(parts) < 2 {
		return nil, secretErr(404, "NOT_FOUND", "no such method: %s %s", r.Method, r.URL.Path)
	}
	id, verb, _ := strings.Cut(parts[1], ":")
	sec := s.secrets[id]
	if sec == nil {
		return nil, secretErr(404, "NOT_FOUND", "Secret [projects/%s/secrets/%s] not found or has no versions.", s.Project, id)
	}
	switch {
	case len(parts) == 2 && verb == "" && r.Method == http.MethodGet:
		return *sec, nil
	case len(parts) == 2 && verb == "" && r.Method == http.MethodDelete:
		delete(s.secrets, id)
		return map[string]any{}, nil
	case len(parts) == 2 && verb == "addVersion" && r.Method == http.MethodPost:
		var req struct {
			Payload struct {
				Data       string `json:"data"`
				DataCrc32c *Int64 `json:"dataCrc32c"`
			} `json:"payload"`
		}
		if err := json.Unmarshal(body, &req); err != nil {
			return nil, secretErr(400, "INVALID_ARGUMENT", "Invalid JSON payload received. %v", err)
		}
		data, err := base64.StdEncoding.DecodeString(req.Payload.Data)
		if err != nil || len(data) == 0 {
			return nil, secretErr(400, "INVALID_ARGUMENT", "payload.data must be non-empty base64")
		}
		if req.Payload.DataCrc32c != nil && uint32(*req.Payload.DataCrc32c) != crc32.Checksum(data, crc32.MakeTable(crc32.Castagnoli)) {
			return nil, secretErr(400, "INVALID_ARGUMENT", "Checksum mismatch: data_crc32c does not match the payload.")
		}
		sec.Versions = append(sec.Versions, data)
		return map[string]any{"name": fmt.Sprintf("projects/%s/secrets/%s/versions/%d", s.Project, id, len(sec.Versions)), "state": "ENABLED", "createTime": s.now()}, nil
	case len(parts) == 2 && verb == "setIamPolicy" && r.Method == http.MethodPost:
		var req struct {
			Policy IAMPolicy `json:"policy"`
		}
		if err := json.Unmarshal(body, &req); err != nil {
			return nil, secretErr(400, "INVALID_ARGUMENT", "Invalid JSON payload received. %v", err)
		}
		for _, b := range req.Policy.Bindings {
			if !strings.HasPrefix(b.Role, "roles/") || len(b.Members) == 0 {
				return nil, secretErr(400, "INVALID_ARGUMENT", "Invalid binding %+v", b)
			}
		}
		req.Policy.Etag = "BwY" + strconv.FormatInt(int64(s.nextID()), 10)
		sec.Policy = req.Policy
		return req.Policy, nil
	case len(parts) == 4 && parts[2] == "versions" && parts[3] == "latest:access" && r.Method == http.MethodGet:
		if len(sec.Versions) == 0 {
			return nil, secretErr(404, "NOT_FOUND", "Secret Version [projects/%s/secrets/%s/versions/latest] not found.", s.Project, id)
		}
		data := sec.Versions[len(sec.Versions)-1]
		return map[string]any{
			"name":    fmt.Sprintf("projects/%s/secrets/%s/versions/%d", s.Project, id, len(sec.Versions)),
			"payload": map[string]any{"data": base64.StdEncoding.EncodeToString(data), "dataCrc32c": Int64(crc32.Checksum(data, crc32.MakeTable(crc32.Castagnoli)))},
		}, nil
	}
	return nil, secretErr(404, "NOT_FOUND", "no such method: %s %s", r.Method, r.URL.Path)
}

var secretIDRE = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,255}$`)

func (s *Server) createSecret(id string, body []byte) (any, *apiError) {
	if !secretIDRE.MatchString(id) {
		return nil, secretErr(400, "INVALID_ARGUMENT", "Secret ID %q is invalid.", id)
	}
	var sec Secret
	if err := json.Unmarshal(body, &sec); err != nil {
		return nil, secretErr(400, "INVALID_ARGUMENT", "Invalid JSON payload received. %v", err)
	}
	if len(sec.Replication) == 0 || string(sec.Replication) == "{}" {
		return nil, secretErr(400, "INVALID_ARGUMENT", "Secret.replication is required.")
	}
	for k, v := range sec.Labels {
		if !labelKeyRE.MatchString(k) || !labelValueRE.MatchString(v) {
			return nil, secretErr(400, "INVALID_ARGUMENT", "Invalid label %q=%q.", k, v)
		}
	}
	if s.secrets[id] != nil {
		return nil, secretErr(409, "ALREADY_EXISTS", "Secret [projects/%s/secrets/%s] already exists.", s.Project, id)
	}
	sec.Name = "projects/" + s.Project + "/secrets/" + id
	sec.CreateTime, sec.Etag = s.now(), fmt.Sprintf(`"%d"`, s.nextID())
	s.secrets[id] = &sec
	return sec, nil
}

// ---- helpers ----

// shortZone turns a zone URL into its name.
func shortZone(z string) string {
	if i := strings.LastIndex(z, "/"); i >= 0 {
		return z[i+1:]
	}
	return z
}

func regionOf(zone string) string {
	if i := strings.LastIndex(zone, "-"); i > 0 {
		return zone[:i]
	}
	return zone
}

// zoneAndName splits "…zones/Z/<kind>/NAME" (a URL, a partial URL or a bare
// name) into Z ("" when absent) and NAME.
func zoneAndName(ref, kind string) (zone, name string) {
	parts := strings.Split(ref, "/")
	for i := 0; i+1 < len(parts); i++ {
		if parts[i] == "zones" {
			zone = parts[i+1]
		}
		if parts[i] == kind && i+1 < len(parts) {
			name = parts[i+1]
		}
	}
	if !strings.Contains(ref, "/") {
		name = ref
	}
	return zone, name
}

func path1(ref, kind string) string {
	_, n := zoneAndName(ref, kind)
	return n
}
