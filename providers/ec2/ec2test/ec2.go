package ec2test

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// AccountID is the account the fakes pretend to be.
const AccountID = "123456789012"

// Subnet is a subnet the test seeds.
type Subnet struct {
	ID, VPC, Zone, CIDR string
}

// Image is an AMI the test seeds.
type Image struct {
	ID, Arch, RootDevice string
}

// InstanceType is an instance type DescribeInstanceTypes lists.
type InstanceType struct {
	Name               string
	VCPUs              int
	MemoryMiB          int64
	Archs              []string
	GPUs               int
	GPUName            string
	GPUManufacturer    string
	GPUMemoryMiB       int
	PreviousGeneration bool
}

// Volume is an instance's root volume as RunInstances asked for it.
type Volume struct {
	Device              string
	SizeGiB             int
	Type                string
	DeleteOnTermination bool
	Encrypted           bool
	Tags                map[string]string
}

// Instance is the fake's record of one instance.
type Instance struct {
	ID, Type, Subnet, VPC, Zone, ImageID string
	PrivateIP                            string
	AssociatePublicIP                    string // "true", "false" or "" (the subnet decides)
	State                                string // pending, running, shutting-down, terminated, stopping, stopped
	StateReasonCode, StateReasonMessage  string
	TransitionReason                     string
	Spot                                 bool
	SpotRequestID                        string
	SpotStatus                           string // the spot request's status code
	SecurityGroups                       []string
	Tags                                 map[string]string
	Volume                               Volume
	UserData                             string // decoded
	ClientToken                          string
	LaunchTime                           time.Time
	InstanceProfile                      string // name or ARN as given
	HTTPTokens                           string
	HopLimit                             int
	MetadataEndpoint                     string
	ShutdownBehavior                     string
	SpotInstanceType, SpotInterruption   string
	// Console is what the instance printed on its console
	// (GetConsoleOutput answers with its last 64 KB); see Print.
	Console string

	describes    int       // DescribeInstances answers that included it
	hidden       int       // DescribeInstances calls that will not list it yet
	terminatedAt time.Time // on the fake's clock; zero until terminated
}

// Rule is one source of one ingress or egress rule.
type Rule struct {
	Protocol    string
	From, To    int
	CIDR        string // IPv4 or IPv6 range, or "" for a group
	GroupID     string // source security group, or ""
	Description string
}

// SecurityGroup is the fake's record of one security group.
type SecurityGroup struct {
	ID, Name, Description, VPC string
	Tags                       map[string]string
	Ingress, Egress            []Rule
}

// Request is one API call as the fake received it.
type Request struct {
	Action    string
	Params    url.Values // EC2: the form; SSM: the JSON body's top-level fields, as strings
	Body      string     // SSM: the JSON body
	AccessKey string
	Region    string
	Service   string
}

// Fault makes calls fail: the next Times calls of Action (0 means once, a
// negative number always) that match the RunInstances selectors answer
// with Code.
type Fault struct {
	Action  string
	Code    string
	Message string // default: a message like EC2's
	Status  int    // default: the status EC2 answers Code with
	Times   int
	// RunInstances only: match calls for this instance type, subnet or
	// market ("spot", "on-demand"); empty matches any.
	InstanceType, Subnet, Market string
	// After makes the call take effect first and then lose its answer:
	// the client gets Code (with Status) instead of the result, or, with
	// Code empty, a connection closed without an answer. See LoseAnswers.
	After bool
}

// EC2 is a fake EC2 endpoint.
type EC2 struct {
	// URL is the endpoint to configure the SDK with.
	URL string

	srv *httptest.Server

	mu sync.Mutex
	// PendingDescribes is how many DescribeInstances answers show a new
	// instance pending before it is running (0: running at once).
	pendingDescribes int
	// terminateDescribes is the same for shutting-down -> terminated.
	terminateDescribes int
	visibilityDelay    int
	pageSize           int
	now                func() time.Time
	detachDelay        time.Duration
	terminatedListing  time.Duration
	region             string
	subnets            []Subnet
	images             map[string]Image
	types              []InstanceType
	instances          []*Instance
	groups             []*SecurityGroup
	tokens             map[string]tokenRecord
	faults             []*Fault
	injected           map[string]int // answers faults made, by code ("" a hang-up)
	requests           []Request
	seq                int
	ips                int
	ignored            map[string]bool // filter names taken out of every request (IgnoreFilter)
}

type tokenRecord struct {
	instanceID, params string
}

// NewEC2 starts a fake EC2 endpoint for region, closed when the test ends.
// It holds two subnets of one VPC (subnet-0a000000000000001 in <region>a and
// subnet-0b000000000000002 in <region>b), the AMIs of DefaultImages, and
// the instance types of DefaultTypes; instances run at once.
func NewEC2(t testing.TB, region string) *EC2 {
	f := &EC2{
		region:             region,
		terminateDescribes: 1,
		now:                time.Now,
		terminatedListing:  time.Hour,
		images:             map[string]Image{},
		tokens:             map[string]tokenRecord{},
		injected:           map[string]int{},
		types:              DefaultTypes(),
	}
	f.subnets = []Subnet{
		{ID: "subnet-0a000000000000001", VPC: "vpc-0c000000000000001", Zone: region + "a", CIDR: "10.0.1.0/24"},
		{ID: "subnet-0b000000000000002", VPC: "vpc-0c000000000000001", Zone: region + "b", CIDR: "10.0.2.0/24"},
	}
	for _, im := range DefaultImages() {
		f.images[im.ID] = im
	}
	f.srv = httptest.NewServer(http.HandlerFunc(f.serve))
	f.URL = f.srv.URL
	t.Cleanup(f.srv.Close)
	return f
}

// DefaultImages are the AMIs NewEC2 knows: one per architecture, and a
// GPU one.
func DefaultImages() []Image {
	return []Image{
		{ID: "ami-0123456789abcdef0", Arch: "x86_64", RootDevice: "/dev/xvda"},
		{ID: "ami-0aaaaaaaaaaaaaaa1", Arch: "arm64", RootDevice: "/dev/xvda"},
		{ID: "ami-0ffffffffffffff01", Arch: "x86_64", RootDevice: "/dev/xvda"},
	}
}

// DefaultTypes are the instance types NewEC2 lists.
func DefaultTypes() []InstanceType {
	x86 := []string{"x86_64"}
	return []InstanceType{
		{Name: "m6i.large", VCPUs: 2, MemoryMiB: 8192, Archs: x86},
		{Name: "m6i.xlarge", VCPUs: 4, MemoryMiB: 16384, Archs: x86},
		{Name: "m5.xlarge", VCPUs: 4, MemoryMiB: 16384, Archs: x86},
		{Name: "m5a.xlarge", VCPUs: 4, MemoryMiB: 16384, Archs: x86},
		{Name: "c6i.xlarge", VCPUs: 4, MemoryMiB: 8192, Archs: x86},
		{Name: "m6g.xlarge", VCPUs: 4, MemoryMiB: 16384, Archs: []string{"arm64"}},
		{Name: "g5.xlarge", VCPUs: 4, MemoryMiB: 16384, Archs: x86, GPUs: 1, GPUName: "A10G", GPUManufacturer: "NVIDIA", GPUMemoryMiB: 22888},
		{Name: "p4de.24xlarge", VCPUs: 96, MemoryMiB: 1179648, Archs: x86, GPUs: 8, GPUName: "A100", GPUManufacturer: "NVIDIA", GPUMemoryMiB: 81920},
		{Name: "brandnew.large", VCPUs: 2, MemoryMiB: 4096, Archs: x86},
		{Name: "m4.xlarge", VCPUs: 4, MemoryMiB: 16384, Archs: x86, PreviousGeneration: true},
	}
}

// SetPendingDescribes makes new instances pending for n DescribeInstances
// answers before they run.
func (f *EC2) SetPendingDescribes(n int) { f.mu.Lock(); f.pendingDescribes = n; f.mu.Unlock() }

// SetTerminateDescribes makes terminated instances shutting-down for n
// DescribeInstances answers first (default 1).
func (f *EC2) SetTerminateDescribes(n int) { f.mu.Lock(); f.terminateDescribes = n; f.mu.Unlock() }

// SetVisibilityDelay makes new instances missing from the next n
// DescribeInstances answers, as EC2's eventual consistency can.
func (f *EC2) SetVisibilityDelay(n int) { f.mu.Lock(); f.visibilityDelay = n; f.mu.Unlock() }

// SetClock makes the fake read the time from now (a test's simulated
// clock) instead of the wall clock: the detach delay and how long
// terminated instances stay listed are measured on it.
func (f *EC2) SetClock(now func() time.Time) { f.mu.Lock(); f.now = now; f.mu.Unlock() }

// SetDetachDelay makes a terminated instance's network interface hold its
// security groups for d after the instance is reported terminated, as
// EC2's interfaces detach some time after their instance ends: until then
// DeleteSecurityGroup answers DependencyViolation (default 0).
func (f *EC2) SetDetachDelay(d time.Duration) { f.mu.Lock(); f.detachDelay = d; f.mu.Unlock() }

// SetTerminatedListing sets how long DescribeInstances keeps listing a
// terminated instance (default an hour, as EC2: "terminated instances
// remain visible ... for approximately one hour").
func (f *EC2) SetTerminatedListing(d time.Duration) {
	f.mu.Lock()
	f.terminatedListing = d
	f.mu.Unlock()
}

// SetPageSize caps every Describe answer at n items (0: no cap unless
// MaxResults asks), so that tests exercise pagination.
func (f *EC2) SetPageSize(n int) { f.mu.Lock(); f.pageSize = n; f.mu.Unlock() }

// AddSubnet seeds a subnet.
func (f *EC2) AddSubnet(s Subnet) { f.mu.Lock(); f.subnets = append(f.subnets, s); f.mu.Unlock() }

// AddImage seeds an AMI.
func (f *EC2) AddImage(im Image) { f.mu.Lock(); f.images[im.ID] = im; f.mu.Unlock() }

// AddSecurityGroup seeds a security group (made by someone else, say); an
// empty ID is filled in.
func (f *EC2) AddSecurityGroup(g SecurityGroup) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if g.ID == "" {
		f.ips++
		g.ID = fmt.Sprintf("sg-%017x", 0x50000+f.ips)
	}
	if g.Tags == nil {
		g.Tags = map[string]string{}
	}
	f.groups = append(f.groups, &g)
}

// SetTypes replaces the instance types.
func (f *EC2) SetTypes(ts []InstanceType) { f.mu.Lock(); f.types = ts; f.mu.Unlock() }

// Fail adds a fault.
func (f *EC2) Fail(fault Fault) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if fault.Times == 0 {
		fault.Times = 1
	}
	f.faults = append(f.faults, &fault)
}

// FailNext makes the next n calls of action fail with code.
func (f *EC2) FailNext(action string, n int, code string) {
	f.Fail(Fault{Action: action, Code: code, Times: n})
}

// Throttle makes the next n calls, whatever their action, answer as a
// throttled account does: 503 RequestLimitExceeded.
func (f *EC2) Throttle(n int) {
	f.Fail(Fault{Action: "*", Code: "RequestLimitExceeded", Times: n})
}

// LoseAnswers makes the next n calls of action take effect and then lose
// their answer: with code "" the connection is closed where the answer
// should be (a reset), else the client gets code (e.g. InternalError, 500).
// A client must repeat the call and get the same outcome, not a second
// resource.
func (f *EC2) LoseAnswers(action string, n int, code string) {
	f.Fail(Fault{Action: action, Code: code, Times: n, After: true})
}

// Injected reports how many answers the injected faults made with code
// ("" counts connections closed without an answer).
func (f *EC2) Injected(code string) int { f.mu.Lock(); defer f.mu.Unlock(); return f.injected[code] }

// IgnoreFilter is a fault: from now on the fake answers every Describe
// as if filters named name (such as "tag:gateway-id") were not in the
// request, as a server that lets more through than asked would (an
// emulator without tag filters, or a wildcard in a tag value). A client's
// own check of what it gets is then all that stands between it and
// resources that are not its own. Requests keeps the filters sent.
func (f *EC2) IgnoreFilter(name string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.ignored == nil {
		f.ignored = map[string]bool{}
	}
	f.ignored[name] = true
}

// Requests returns the calls received, of one action ("" for all).
func (f *EC2) Requests(action string) []Request {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []Request
	for _, r := range f.requests {
		if action == "" || r.Action == action {
			out = append(out, r)
		}
	}
	return out
}

// Instances returns copies of every instance, in launch order.
func (f *EC2) Instances() []Instance {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]Instance, 0, len(f.instances))
	for _, in := range f.instances {
		out = append(out, in.copy())
	}
	return out
}

// Instance returns a copy of the instance of a member, the latest launched.
func (f *EC2) Instance(cluster, member string) (Instance, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for i := len(f.instances) - 1; i >= 0; i-- {
		in := f.instances[i]
		if in.Tags["gateway-cluster"] == cluster && in.Tags["gateway-member"] == member {
			return in.copy(), true
		}
	}
	return Instance{}, false
}

// SecurityGroups returns copies of every security group.
func (f *EC2) SecurityGroups() []SecurityGroup {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]SecurityGroup, 0, len(f.groups))
	for _, g := range f.groups {
		c := *g
		c.Tags = cloneMap(g.Tags)
		c.Ingress = slices.Clone(g.Ingress)
		c.Egress = slices.Clone(g.Egress)
		out = append(out, c)
	}
	return out
}

// Interrupt ends a spot instance as AWS does when it reclaims capacity.
func (f *EC2) Interrupt(id string) {
	f.setState(id, "terminated", "Server.SpotInstanceTermination", "Server.SpotInstanceTermination: Spot instance termination", "instance-terminated-no-capacity")
}

// NoticeInterruption marks a running spot instance for interruption (the
// two-minute notice): its spot request's status becomes
// marked-for-termination.
func (f *EC2) NoticeInterruption(id string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if in := f.find(id); in != nil {
		in.SpotStatus = "marked-for-termination"
	}
}

// ShutDown ends an instance as a shutdown from inside it does (with
// shutdown behaviour terminate).
func (f *EC2) ShutDown(id string) {
	f.setState(id, "terminated", "Client.InstanceInitiatedShutdown", "Client.InstanceInitiatedShutdown: Instance initiated shutdown", "")
}

// Terminate ends an instance as someone else's TerminateInstances does.
func (f *EC2) Terminate(id string) {
	f.setState(id, "terminated", "Client.UserInitiatedShutdown", "Client.UserInitiatedShutdown: User initiated shutdown", "")
}

// Print adds text to what the instance printed on its console, as its
// boot script and units do.
func (f *EC2) Print(id, text string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if in := f.find(id); in != nil {
		in.Console += text
	}
}

// maxConsole is how much console output EC2 keeps: "Only the most recent
// 64 KB of console output is available" (GetConsoleOutput).
const maxConsole = 64 << 10

// getConsoleOutput answers with the instance's console output, base64
// encoded, as EC2 does for any instance it still lists (terminated ones
// included, for at least an hour after the last post).
func (f *EC2) getConsoleOutput(v url.Values) (any, *apiError) {
	id := v.Get("InstanceId")
	if id == "" {
		return nil, errorf("MissingParameter", "The request must contain the parameter InstanceId")
	}
	if !strings.HasPrefix(id, "i-") {
		return nil, errorf("InvalidInstanceID.Malformed", "Invalid id: \"%s\"", id)
	}
	in := f.find(id)
	if in == nil || in.hidden > 0 || f.forgotten(in) {
		return nil, errorf("InvalidInstanceID.NotFound", "The instance ID '%s' does not exist", id)
	}
	out := in.Console
	if len(out) > maxConsole {
		out = out[len(out)-maxConsole:]
	}
	x := xConsole{InstanceID: id, Timestamp: f.now().UTC().Format(time.RFC3339)}
	if out != "" {
		x.Output = base64.StdEncoding.EncodeToString([]byte(out))
	}
	return x, nil
}

// SetRunning makes a pending instance run now.
func (f *EC2) SetRunning(id string) { f.setState(id, "running", "", "", "") }

func (f *EC2) setState(id, state, code, msg, spot string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	in := f.find(id)
	if in == nil {
		return
	}
	in.State, in.StateReasonCode, in.StateReasonMessage = state, code, msg
	if state == "terminated" {
		in.TransitionReason = fmt.Sprintf("Service initiated (%s)", f.now().UTC().Format("2006-01-02 15:04:05 MST"))
		in.terminatedAt = f.now()
	}
	if spot != "" && in.Spot {
		in.SpotStatus = spot
	}
}

func (f *EC2) find(id string) *Instance {
	for _, in := range f.instances {
		if in.ID == id {
			return in
		}
	}
	return nil
}

func (in *Instance) copy() Instance {
	c := *in
	c.Tags = cloneMap(in.Tags)
	c.Volume.Tags = cloneMap(in.Volume.Tags)
	c.SecurityGroups = slices.Clone(in.SecurityGroups)
	return c
}

func cloneMap(m map[string]string) map[string]string {
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// ---- the protocol ----

func (f *EC2) serve(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	f.seq++
	requestID := fmt.Sprintf("00000000-0000-4000-8000-%012d", f.seq)
	f.mu.Unlock()
	if r.Method != http.MethodPost {
		writeEC2Error(w, &apiError{"InvalidAction", "the Query API takes POST requests here", http.StatusBadRequest}, requestID)
		return
	}
	if ct := r.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/x-www-form-urlencoded") {
		writeEC2Error(w, errorf("InvalidParameterValue", "unexpected Content-Type %q", ct), requestID)
		return
	}
	if err := r.ParseForm(); err != nil {
		writeEC2Error(w, errorf("MalformedQueryString", "%v", err), requestID)
		return
	}
	form := r.PostForm
	action := form.Get("Action")
	key, region, service, aerr := parseAuth(r)
	f.mu.Lock()
	f.requests = append(f.requests, Request{Action: action, Params: form, AccessKey: key, Region: region, Service: service})
	form = withoutFilters(form, f.ignored)
	f.mu.Unlock()
	switch {
	case aerr != nil:
		writeEC2Error(w, aerr, requestID)
		return
	case service != "ec2" || (f.region != "" && region != f.region):
		writeEC2Error(w, errorf("AuthFailure", "credential scope %s/%s does not match ec2 in %s", region, service, f.region), requestID)
		return
	case form.Get("Version") != "2016-11-15":
		writeEC2Error(w, errorf("InvalidParameterValue", "unsupported Version %q", form.Get("Version")), requestID)
		return
	}
	if e := f.fault(action, form, false); e != nil {
		writeEC2Error(w, e, requestID)
		return
	}
	var body any
	var err *apiError
	f.mu.Lock()
	switch action {
	case "RunInstances":
		body, err = f.runInstances(form)
	case "DescribeInstances":
		body, err = f.describeInstances(form)
	case "TerminateInstances":
		body, err = f.terminateInstances(form)
	case "DescribeSubnets":
		body, err = f.describeSubnets(form)
	case "DescribeImages":
		body, err = f.describeImages(form)
	case "CreateSecurityGroup":
		body, err = f.createSecurityGroup(form)
	case "AuthorizeSecurityGroupIngress":
		body, err = f.authorizeIngress(form)
	case "RevokeSecurityGroupIngress":
		body, err = f.revokeIngress(form)
	case "DescribeSecurityGroups":
		body, err = f.describeSecurityGroups(form)
	case "DeleteSecurityGroup":
		body, err = f.deleteSecurityGroup(form)
	case "DescribeInstanceTypes":
		body, err = f.describeInstanceTypes(form)
	case "DescribeSpotInstanceRequests":
		body, err = f.describeSpotRequests(form)
	case "GetConsoleOutput":
		body, err = f.getConsoleOutput(form)
	default:
		err = &apiError{"InvalidAction", fmt.Sprintf("The action %s is not valid for this web service.", action), http.StatusBadRequest}
	}
	f.mu.Unlock()
	if err == nil {
		if e := f.fault(action, form, true); e != nil {
			if e.code == "" {
				hangUp(w)
				return
			}
			err = e
		}
	}
	if err != nil {
		writeEC2Error(w, err, requestID)
		return
	}
	_ = writeEC2(w, action, requestID, body)
}

// parseAuth checks that the request is signed with SigV4 and returns the
// access key and the credential scope's region and service.
func parseAuth(r *http.Request) (key, region, service string, err *apiError) {
	h := r.Header.Get("Authorization")
	const prefix = "AWS4-HMAC-SHA256 Credential="
	if !strings.HasPrefix(h, prefix) || r.Header.Get("X-Amz-Date") == "" {
		return "", "", "", &apiError{"AuthFailure", "AWS was not able to validate the provided access credentials", http.StatusUnauthorized}
	}
	cred, _, _ := strings.Cut(h[len(prefix):], ",")
	parts := strings.Split(cred, "/")
	if len(parts) != 5 || parts[4] != "aws4_request" || !strings.Contains(h, "Signature=") {
		return "", "", "", &apiError{"AuthFailure", "malformed credential scope " + cred, http.StatusUnauthorized}
	}
	return parts[0], parts[2], parts[3], nil
}

// fault returns the injected error for this call, if any.
func (f *EC2) fault(action string, form url.Values, after bool) *apiError {
	f.mu.Lock()
	defer f.mu.Unlock()
	market := "on-demand"
	if form.Get("InstanceMarketOptions.MarketType") == "spot" {
		market = "spot"
	}
	for i, ft := range f.faults {
		if ft.Action != action && ft.Action != "*" || ft.After != after {
			continue
		}
		if action == "RunInstances" && (ft.InstanceType != "" && ft.InstanceType != form.Get("InstanceType") ||
			ft.Subnet != "" && ft.Subnet != launchSubnet(form) || ft.Market != "" && ft.Market != market) {
			continue
		}
		if ft.Times > 0 {
			ft.Times--
			if ft.Times == 0 {
				f.faults = slices.Delete(f.faults, i, i+1)
			}
		}
		f.injected[ft.Code]++
		if ft.Code == "" {
			return &apiError{} // hang up
		}
		e := errorf(ft.Code, "%s", orDefault(ft.Message, messageFor(ft.Code)))
		if ft.Status != 0 {
			e.status = ft.Status
		}
		return e
	}
	return nil
}

func messageFor(code string) string {
	switch code {
	case "RequestLimitExceeded":
		return "Request limit exceeded."
	case "InsufficientInstanceCapacity":
		return "We currently do not have sufficient capacity in the Availability Zone you requested."
	case "Unsupported":
		return "Your requested instance type is not supported in your requested Availability Zone."
	case "VcpuLimitExceeded":
		return "You have requested more vCPU capacity than your current vCPU limit of 32 allows for the instance bucket that the specified instance type belongs to."
	case "DependencyViolation":
		return "resource has a dependent object"
	}
	return code
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// hangUp closes the connection without an answer.
func hangUp(w http.ResponseWriter) {
	hj, ok := w.(http.Hijacker)
	if !ok {
		panic("ec2test: cannot hijack the connection")
	}
	if conn, _, err := hj.Hijack(); err == nil {
		_ = conn.Close()
	}
}

// ---- instances ----

var stateCodes = map[string]int{"pending": 0, "running": 16, "shutting-down": 32, "terminated": 48, "stopping": 64, "stopped": 80}

func (f *EC2) runInstances(v url.Values) (any, *apiError) {
	for _, req := range []string{"ImageId", "InstanceType", "MinCount", "MaxCount"} {
		if v.Get(req) == "" {
			return nil, errorf("MissingParameter", "The request must contain the parameter %s", req)
		}
	}
	if v.Get("MinCount") != "1" || v.Get("MaxCount") != "1" {
		return nil, errorf("InvalidParameterValue", "the fake launches one instance per call (MinCount=MaxCount=1)")
	}
	token := v.Get("ClientToken")
	if len(token) > 64 || strings.ContainsFunc(token, func(r rune) bool { return r > 126 || r < 32 }) {
		return nil, errorf("InvalidParameterValue", "Value (%s) for parameter clientToken is invalid. Maximum 64 ASCII characters", token)
	}
	params := paramsHash(v)
	if rec, ok := f.tokens[token]; ok && token != "" {
		if rec.params != params {
			return nil, errorf("IdempotentParameterMismatch", "Arguments on this idempotent request are inconsistent with arguments used in previous request(s).")
		}
		in := f.find(rec.instanceID)
		return xReservation{ReservationID: "r-" + in.ID[2:], OwnerID: AccountID, Instances: []xInstance{in.xml()}}, nil
	}
	im, ok := f.images[v.Get("ImageId")]
	if !ok {
		return nil, errorf("InvalidAMIID.NotFound", "The image id '[%s]' does not exist", v.Get("ImageId"))
	}
	var it *InstanceType
	for i := range f.types {
		if f.types[i].Name == v.Get("InstanceType") {
			it = &f.types[i]
		}
	}
	if it == nil {
		return nil, errorf("InvalidParameterValue", "Invalid value '%s' for InstanceType.", v.Get("InstanceType"))
	}
	if !slices.Contains(it.Archs, im.Arch) {
		return nil, errorf("InvalidParameterValue", "The architecture '%s' of the specified instance type does not match the architecture '%s' of the specified AMI.", it.Archs[0], im.Arch)
	}
	// The subnet and groups come either on the instance or on its first
	// network interface (which also says whether it gets a public address),
	// never both, as EC2 has it.
	subnetID, groups, publicIP := v.Get("SubnetId"), list(v, "SecurityGroupId"), ""
	if ni := v.Get("NetworkInterface.1.SubnetId"); ni != "" {
		if subnetID != "" || len(groups) > 0 {
			return nil, errorf("InvalidParameterCombination", "Network interfaces and an instance-level subnet ID or security groups may not be specified on the same request")
		}
		if v.Get("NetworkInterface.1.DeviceIndex") != "0" {
			return nil, errorf("InvalidParameterValue", "the first network interface needs DeviceIndex 0")
		}
		subnetID, groups, publicIP = ni, list(v, "NetworkInterface.1.SecurityGroupId"), v.Get("NetworkInterface.1.AssociatePublicIpAddress")
	}
	var subnet *Subnet
	for i := range f.subnets {
		if f.subnets[i].ID == subnetID {
			subnet = &f.subnets[i]
		}
	}
	if subnet == nil {
		return nil, errorf("InvalidSubnetID.NotFound", "The subnet ID '%s' does not exist", subnetID)
	}
	for _, g := range groups {
		sg := f.group(g)
		if sg == nil {
			return nil, errorf("InvalidGroup.NotFound", "The security group '%s' does not exist", g)
		}
		if sg.VPC != subnet.VPC {
			return nil, errorf("InvalidParameter", "Security group %s and subnet %s belong to different networks.", g, subnet.ID)
		}
	}
	ud, err := base64.StdEncoding.DecodeString(v.Get("UserData"))
	if err != nil {
		return nil, errorf("InvalidParameterValue", "Invalid BASE64 encoding of user data.")
	}
	if len(ud) > 16<<10 {
		return nil, errorf("InvalidParameterValue", "User data is limited to 16384 bytes")
	}
	f.ips++
	in := &Instance{
		ID:                fmt.Sprintf("i-%017x", 0xa0000+f.ips),
		Type:              it.Name,
		Subnet:            subnet.ID,
		VPC:               subnet.VPC,
		Zone:              subnet.Zone,
		ImageID:           im.ID,
		AssociatePublicIP: publicIP,
		PrivateIP:         privateIP(subnet.CIDR, f.ips),
		State:             "pending",
		SecurityGroups:    groups,
		Tags:              map[string]string{},
		UserData:          string(ud),
		ClientToken:       token,
		LaunchTime:        f.now().UTC().Truncate(time.Second),
		HTTPTokens:        orDefault(v.Get("MetadataOptions.HttpTokens"), "optional"),
		MetadataEndpoint:  orDefault(v.Get("MetadataOptions.HttpEndpoint"), "enabled"),
		ShutdownBehavior:  orDefault(v.Get("InstanceInitiatedShutdownBehavior"), "stop"),
		InstanceProfile:   v.Get("IamInstanceProfile.Name") + v.Get("IamInstanceProfile.Arn"),
	}
	in.hidden = f.visibilityDelay
	in.HopLimit, _ = strconv.Atoi(orDefault(v.Get("MetadataOptions.HttpPutResponseHopLimit"), "1"))
	if f.pendingDescribes == 0 {
		in.State = "running"
	}
	for _, bdm := range members(v, "BlockDeviceMapping") {
		in.Volume.Device = bdm.Get("DeviceName")
		in.Volume.SizeGiB, _ = strconv.Atoi(bdm.Get("Ebs.VolumeSize"))
		in.Volume.Type = bdm.Get("Ebs.VolumeType")
		in.Volume.DeleteOnTermination = bdm.Get("Ebs.DeleteOnTermination") == "true"
		in.Volume.Encrypted = bdm.Get("Ebs.Encrypted") == "true"
	}
	for _, ts := range members(v, "TagSpecification") {
		tags := map[string]string{}
		for _, t := range members(ts, "Tag") {
			tags[t.Get("Key")] = t.Get("Value")
		}
		if e := checkTags(tags); e != nil {
			return nil, e
		}
		switch ts.Get("ResourceType") {
		case "instance":
			in.Tags = tags
		case "volume":
			in.Volume.Tags = tags
		default:
			return nil, errorf("InvalidParameterValue", "'%s' is not a valid taggable resource type for this operation.", ts.Get("ResourceType"))
		}
	}
	if v.Get("InstanceMarketOptions.MarketType") == "spot" {
		in.Spot = true
		in.SpotRequestID = fmt.Sprintf("sir-%08x", f.ips)
		in.SpotStatus = "fulfilled"
		in.SpotInstanceType = v.Get("InstanceMarketOptions.SpotOptions.SpotInstanceType")
		in.SpotInterruption = v.Get("InstanceMarketOptions.SpotOptions.InstanceInterruptionBehavior")
	}
	f.instances = append(f.instances, in)
	if token != "" {
		f.tokens[token] = tokenRecord{instanceID: in.ID, params: params}
	}
	return xReservation{ReservationID: "r-" + in.ID[2:], OwnerID: AccountID, Instances: []xInstance{in.xml()}}, nil
}

// paramsHash identifies a RunInstances request's parameters, for client
// token idempotency.
func paramsHash(v url.Values) string {
	keys := make([]string, 0, len(v))
	for k := range v {
		if k != "ClientToken" {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	h := sha256.New()
	for _, k := range keys {
		fmt.Fprintf(h, "%s=%q\n", k, v[k])
	}
	return hex.EncodeToString(h.Sum(nil))
}

// launchSubnet is a RunInstances request's subnet, on the instance or on
// its first network interface.
func launchSubnet(v url.Values) string {
	if s := v.Get("SubnetId"); s != "" {
		return s
	}
	return v.Get("NetworkInterface.1.SubnetId")
}

// privateIP is the n-th address of a /24 subnet: data only, never dialled.
func privateIP(cidr string, n int) string {
	base, _, _ := strings.Cut(cidr, "/")
	octets := strings.Split(base, ".")
	if len(octets) != 4 {
		return fmt.Sprintf("10.0.0.%d", 10+n%240)
	}
	return fmt.Sprintf("%s.%s.%s.%d", octets[0], octets[1], octets[2], 10+n%240)
}

func (f *EC2) describeInstances(v url.Values) (any, *apiError) {
	filters := parseFilters(v)
	if e := filters.check("instance-state-name", "instance-id", "client-token", "subnet-id", "vpc-id", "tag-key"); e != nil {
		return nil, e
	}
	ids := list(v, "InstanceId")
	if len(ids) > 0 && v.Get("MaxResults") != "" {
		return nil, errorf("InvalidParameterCombination", "The parameter instancesSet cannot be used with the parameter maxResults")
	}
	if mr := v.Get("MaxResults"); mr != "" {
		if n, err := strconv.Atoi(mr); err != nil || n < 5 || n > 1000 {
			return nil, errorf("InvalidParameterValue", "MaxResults must be between 5 and 1000")
		}
	}
	// Instances launched a moment ago are not listed yet (eventual
	// consistency); each call brings them closer.
	var visible []*Instance
	for _, in := range f.instances {
		if in.hidden > 0 {
			in.hidden--
			continue
		}
		if f.forgotten(in) {
			continue
		}
		visible = append(visible, in)
	}
	for _, id := range ids {
		if !slices.ContainsFunc(visible, func(in *Instance) bool { return in.ID == id }) {
			return nil, errorf("InvalidInstanceID.NotFound", "The instance ID '%s' does not exist", id)
		}
	}
	var match []*Instance
	for _, in := range visible {
		if len(ids) > 0 && !slices.Contains(ids, in.ID) {
			continue
		}
		if filters.match(in.filterValues) {
			match = append(match, in)
		}
	}
	pg, next, err := page(match, v.Get("NextToken"), f.limit(v))
	if err != nil {
		return nil, err
	}
	out := xDescribeInstances{NextToken: next}
	for _, in := range pg {
		// State moves on as time passes, here counted in answers.
		in.describes++
		switch {
		case in.State == "pending" && in.describes > f.pendingDescribes:
			in.State = "running"
		case in.State == "shutting-down" && in.describes > f.terminateDescribes:
			in.State = "terminated"
			in.terminatedAt = f.now()
		}
		out.Reservations = append(out.Reservations, xReservation{ReservationID: "r-" + in.ID[2:], OwnerID: AccountID, Instances: []xInstance{in.xml()}})
	}
	return out, nil
}

// forgotten reports whether a terminated instance has dropped out of
// DescribeInstances.
func (f *EC2) forgotten(in *Instance) bool {
	return in.State == "terminated" && !in.terminatedAt.IsZero() && !f.now().Before(in.terminatedAt.Add(f.terminatedListing))
}

// holds reports whether an instance's network interface still holds its
// security groups: until it is terminated and then for the detach delay.
func (f *EC2) holds(in *Instance) bool {
	if in.State != "terminated" {
		return true
	}
	return f.now().Before(in.terminatedAt.Add(f.detachDelay))
}

func (f *EC2) limit(v url.Values) int {
	n, _ := strconv.Atoi(v.Get("MaxResults"))
	if f.pageSize > 0 && (n == 0 || f.pageSize < n) {
		return f.pageSize
	}
	return n
}

func (in *Instance) filterValues(name string) []string {
	if k, ok := strings.CutPrefix(name, "tag:"); ok {
		if v, ok := in.Tags[k]; ok {
			return []string{v}
		}
		return nil
	}
	switch name {
	case "instance-state-name":
		return []string{in.State}
	case "instance-id":
		return []string{in.ID}
	case "client-token":
		return []string{in.ClientToken}
	case "subnet-id":
		return []string{in.Subnet}
	case "vpc-id":
		return []string{in.VPC}
	case "tag-key":
		var keys []string
		for k := range in.Tags {
			keys = append(keys, k)
		}
		return keys
	}
	return nil
}

func (f *EC2) terminateInstances(v url.Values) (any, *apiError) {
	ids := list(v, "InstanceId")
	if len(ids) == 0 {
		return nil, errorf("MissingParameter", "The request must contain the parameter InstanceId")
	}
	for _, id := range ids {
		// A new instance unknown to the API yet (eventual consistency),
		// or one terminated long enough ago to be forgotten.
		if in := f.find(id); in == nil || in.hidden > 0 || f.forgotten(in) {
			if in != nil && in.hidden > 0 {
				in.hidden--
			}
			return nil, errorf("InvalidInstanceID.NotFound", "The instance ID '%s' does not exist", id)
		}
	}
	var out xTerminate
	for _, id := range ids {
		in := f.find(id)
		prev := in.State
		if in.State != "terminated" && in.State != "shutting-down" {
			in.State = "shutting-down"
			in.describes = 0
			in.StateReasonCode = "Client.UserInitiatedShutdown"
			in.StateReasonMessage = "Client.UserInitiatedShutdown: User initiated shutdown"
			in.TransitionReason = fmt.Sprintf("User initiated (%s)", f.now().UTC().Format("2006-01-02 15:04:05 MST"))
			if in.Spot {
				in.SpotStatus = "instance-terminated-by-user"
			}
		}
		out.Items = append(out.Items, xStateChange{ID: id, Current: xState{stateCodes[in.State], in.State}, Previous: xState{stateCodes[prev], prev}})
	}
	return out, nil
}

func (in *Instance) xml() xInstance {
	x := xInstance{
		InstanceID:   in.ID,
		ImageID:      in.ImageID,
		State:        xState{stateCodes[in.State], in.State},
		Reason:       in.TransitionReason,
		InstanceType: in.Type,
		LaunchTime:   in.LaunchTime.Format("2006-01-02T15:04:05.000Z"),
		Zone:         in.Zone,
		ClientToken:  in.ClientToken,
		Metadata:     xMetadata{State: "applied", HTTPTokens: in.HTTPTokens, HopLimit: in.HopLimit, Endpoint: in.MetadataEndpoint},
	}
	// EC2 reports no network details once an instance is terminated.
	if in.State != "terminated" {
		x.PrivateIP = in.PrivateIP
		x.SubnetID = in.Subnet
		x.VpcID = in.VPC
		for _, g := range in.SecurityGroups {
			x.Groups = append(x.Groups, xGroupRef{ID: g})
		}
	}
	if in.StateReasonCode != "" {
		x.StateReason = &xStateReason{Code: in.StateReasonCode, Message: in.StateReasonMessage}
	}
	if in.Spot {
		x.Lifecycle = "spot"
		x.SpotRequestID = in.SpotRequestID
	}
	x.Tags = xTagsOf(in.Tags)
	return x
}

func xTagsOf(m map[string]string) []xTag {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	out := make([]xTag, 0, len(keys))
	for _, k := range keys {
		out = append(out, xTag{k, m[k]})
	}
	return out
}

func (f *EC2) describeSpotRequests(v url.Values) (any, *apiError) {
	filters := parseFilters(v)
	if e := filters.check("instance-id", "state", "status-code"); e != nil {
		return nil, e
	}
	if e := maxResults(v, 5, 1000); e != nil {
		return nil, e
	}
	ids := list(v, "SpotInstanceRequestId")
	var out xSpotRequests
	for _, id := range ids {
		found := false
		for _, in := range f.instances {
			if in.SpotRequestID == id {
				found = true
			}
		}
		if !found {
			return nil, errorf("InvalidSpotInstanceRequestID.NotFound", "The spot instance request ID '%s' does not exist", id)
		}
	}
	for _, in := range f.instances {
		if !in.Spot || len(ids) > 0 && !slices.Contains(ids, in.SpotRequestID) {
			continue
		}
		state := "active"
		if in.State == "terminated" || in.State == "shutting-down" {
			state = "closed"
		}
		if !filters.match(func(name string) []string {
			switch name {
			case "instance-id":
				return []string{in.ID}
			case "state":
				return []string{state}
			case "status-code":
				return []string{in.SpotStatus}
			}
			return nil
		}) {
			continue
		}
		out.Items = append(out.Items, xSpotRequest{ID: in.SpotRequestID, InstanceID: in.ID, State: state, Type: in.SpotInstanceType,
			Status: xSpotStatus{Code: in.SpotStatus, Message: in.SpotStatus}})
	}
	return out, nil
}

// ---- network ----

func (f *EC2) describeSubnets(v url.Values) (any, *apiError) {
	filters := parseFilters(v)
	if e := filters.check("vpc-id", "subnet-id", "availability-zone"); e != nil {
		return nil, e
	}
	if e := maxResults(v, 5, 1000); e != nil {
		return nil, e
	}
	ids := list(v, "SubnetId")
	for _, id := range ids {
		if !slices.ContainsFunc(f.subnets, func(s Subnet) bool { return s.ID == id }) {
			return nil, errorf("InvalidSubnetID.NotFound", "The subnet ID '%s' does not exist", id)
		}
	}
	var match []Subnet
	for _, s := range f.subnets {
		if len(ids) > 0 && !slices.Contains(ids, s.ID) {
			continue
		}
		if filters.match(func(name string) []string {
			switch name {
			case "vpc-id":
				return []string{s.VPC}
			case "subnet-id":
				return []string{s.ID}
			case "availability-zone":
				return []string{s.Zone}
			}
			return nil
		}) {
			match = append(match, s)
		}
	}
	pg, next, err := page(match, v.Get("NextToken"), f.limit(v))
	if err != nil {
		return nil, err
	}
	out := xSubnets{NextToken: next}
	for _, s := range pg {
		out.Items = append(out.Items, xSubnet{ID: s.ID, VPC: s.VPC, Zone: s.Zone, CIDR: s.CIDR, State: "available", Free: 250})
	}
	return out, nil
}

func (f *EC2) describeImages(v url.Values) (any, *apiError) {
	var out xImages
	for _, id := range list(v, "ImageId") {
		im, ok := f.images[id]
		if !ok {
			return nil, errorf("InvalidAMIID.NotFound", "The image id '[%s]' does not exist", id)
		}
		out.Items = append(out.Items, xImage{ID: im.ID, Arch: im.Arch, RootDevice: im.RootDevice, RootType: "ebs", State: "available"})
	}
	return out, nil
}

func (f *EC2) group(id string) *SecurityGroup {
	for _, g := range f.groups {
		if g.ID == id {
			return g
		}
	}
	return nil
}

// validDescription is EC2's character set for group descriptions.
func validDescription(s string) bool {
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune(" ._-:/()#,@[]+=&;{}!$*", r)) {
			return false
		}
	}
	return s != "" && len(s) <= 255
}

func (f *EC2) createSecurityGroup(v url.Values) (any, *apiError) {
	name, desc, vpc := v.Get("GroupName"), v.Get("GroupDescription"), v.Get("VpcId")
	switch {
	case name == "" || desc == "":
		return nil, errorf("MissingParameter", "The request must contain the parameters GroupName and GroupDescription")
	case strings.HasPrefix(name, "sg-") || len(name) > 255:
		return nil, errorf("InvalidParameterValue", "Invalid security group name %q", name)
	case !validDescription(desc):
		return nil, errorf("InvalidParameterValue", "Invalid security group description: character sets beyond ASCII are not supported")
	case !slices.ContainsFunc(f.subnets, func(s Subnet) bool { return s.VPC == vpc }):
		return nil, errorf("InvalidVpcID.NotFound", "The vpc ID '%s' does not exist", vpc)
	}
	for _, g := range f.groups {
		if g.Name == name && g.VPC == vpc {
			return nil, errorf("InvalidGroup.Duplicate", "The security group '%s' already exists for VPC '%s'", name, vpc)
		}
	}
	f.ips++
	g := &SecurityGroup{
		ID: fmt.Sprintf("sg-%017x", 0x50000+f.ips), Name: name, Description: desc, VPC: vpc, Tags: map[string]string{},
		// EC2 gives every new group this egress rule.
		Egress: []Rule{{Protocol: "-1", CIDR: "0.0.0.0/0"}},
	}
	for _, ts := range members(v, "TagSpecification") {
		if ts.Get("ResourceType") != "security-group" {
			return nil, errorf("InvalidParameterValue", "'%s' is not a valid taggable resource type for this operation.", ts.Get("ResourceType"))
		}
		for _, t := range members(ts, "Tag") {
			g.Tags[t.Get("Key")] = t.Get("Value")
		}
		if e := checkTags(g.Tags); e != nil {
			return nil, e
		}
	}
	f.groups = append(f.groups, g)
	return xCreateGroup{Return: true, GroupID: g.ID, Tags: xTagsOf(g.Tags)}, nil
}

// ingressRules looks up the group an Authorize or Revoke call names and
// parses its IpPermissions, one Rule per source.
func (f *EC2) ingressRules(v url.Values) (*SecurityGroup, []Rule, *apiError) {
	g := f.group(v.Get("GroupId"))
	if g == nil {
		return nil, nil, errorf("InvalidGroup.NotFound", "The security group '%s' does not exist", v.Get("GroupId"))
	}
	var rules []Rule
	for _, perm := range members(v, "IpPermissions") {
		from, err1 := strconv.Atoi(perm.Get("FromPort"))
		to, err2 := strconv.Atoi(perm.Get("ToPort"))
		proto := perm.Get("IpProtocol")
		if proto == "" || err1 != nil || err2 != nil || from > to {
			return nil, nil, errorf("InvalidParameterValue", "invalid protocol or port range in IpPermissions")
		}
		for _, r := range members(perm, "IpRanges") {
			rules = append(rules, Rule{Protocol: proto, From: from, To: to, CIDR: r.Get("CidrIp"), Description: r.Get("Description")})
		}
		for _, r := range members(perm, "Ipv6Ranges") {
			rules = append(rules, Rule{Protocol: proto, From: from, To: to, CIDR: r.Get("CidrIpv6"), Description: r.Get("Description")})
		}
		for _, r := range members(perm, "Groups") {
			// UserIdGroupPairs: a VPC group is named by its id, and must be
			// in the same VPC as the group the rule is added to (or in a
			// peered VPC, which the fake does not have).
			src := f.group(r.Get("GroupId"))
			switch {
			case r.Get("GroupId") == "":
				return nil, nil, errorf("InvalidParameterValue", "a security group in a VPC must be referenced by its id (GroupId), not its name")
			case src == nil:
				return nil, nil, errorf("InvalidGroup.NotFound", "The security group '%s' does not exist", r.Get("GroupId"))
			case src.VPC != g.VPC:
				return nil, nil, errorf("InvalidGroup.NotFound", "The security group '%s' does not exist in VPC '%s'", r.Get("GroupId"), g.VPC)
			}
			rules = append(rules, Rule{Protocol: proto, From: from, To: to, GroupID: r.Get("GroupId"), Description: r.Get("Description")})
		}
	}
	if len(rules) == 0 {
		return nil, nil, errorf("MissingParameter", "No IpPermissions given")
	}
	return g, rules, nil
}

func (f *EC2) authorizeIngress(v url.Values) (any, *apiError) {
	g, rules, err := f.ingressRules(v)
	if err != nil {
		return nil, err
	}
	for _, r := range rules {
		if slices.ContainsFunc(g.Ingress, func(h Rule) bool { return sameRule(h, r) }) {
			return nil, errorf("InvalidPermission.Duplicate", "the specified rule \"peer: %s, TCP, from port: %d, to port: %d, ALLOW\" already exists", r.CIDR+r.GroupID, r.From, r.To)
		}
	}
	g.Ingress = append(g.Ingress, rules...)
	return xAuthorize{Return: true}, nil
}

// revokeIngress removes rules as EC2 does in a non-default VPC: every rule
// named must exist (matched on protocol, ports and source, whatever its
// description), else InvalidPermission.NotFound and nothing is removed.
func (f *EC2) revokeIngress(v url.Values) (any, *apiError) {
	g, rules, err := f.ingressRules(v)
	if err != nil {
		return nil, err
	}
	for _, r := range rules {
		if !slices.ContainsFunc(g.Ingress, func(h Rule) bool { return sameRule(h, r) }) {
			return nil, errorf("InvalidPermission.NotFound", "The specified rule does not exist in this security group.")
		}
	}
	g.Ingress = slices.DeleteFunc(g.Ingress, func(h Rule) bool {
		return slices.ContainsFunc(rules, func(r Rule) bool { return sameRule(h, r) })
	})
	return xAuthorize{Return: true}, nil
}

// checkTags applies EC2's tag restrictions: at most 50 tags per resource,
// keys of 1 to 128 characters not starting with "aws:", values of at most
// 256 characters.
func checkTags(tags map[string]string) *apiError {
	if len(tags) > 50 {
		return errorf("TagLimitExceeded", "The maximum number of tags per resource is 50")
	}
	for k, v := range tags {
		switch {
		case k == "" || len([]rune(k)) > 128:
			return errorf("InvalidParameterValue", "Tag key must be between 1 and 128 characters: %q", k)
		case strings.HasPrefix(strings.ToLower(k), "aws:"):
			return errorf("InvalidParameterValue", "Tag keys starting with 'aws:' are reserved for internal use")
		case len([]rune(v)) > 256:
			return errorf("InvalidParameterValue", "Tag value of %s exceeds the maximum length of 256 characters", k)
		}
	}
	return nil
}

// maxResults checks a MaxResults parameter against the action's range.
func maxResults(v url.Values, lo, hi int) *apiError {
	if mr := v.Get("MaxResults"); mr != "" {
		if n, err := strconv.Atoi(mr); err != nil || n < lo || n > hi {
			return errorf("InvalidParameterValue", "MaxResults must be between %d and %d", lo, hi)
		}
	}
	return nil
}

// sameRule: EC2 tells rules apart by protocol, ports and source, whatever
// their descriptions.
func sameRule(a, b Rule) bool {
	return a.Protocol == b.Protocol && a.From == b.From && a.To == b.To && a.CIDR == b.CIDR && a.GroupID == b.GroupID
}

func (f *EC2) describeSecurityGroups(v url.Values) (any, *apiError) {
	filters := parseFilters(v)
	if e := filters.check("group-name", "group-id", "vpc-id"); e != nil {
		return nil, e
	}
	if e := maxResults(v, 5, 1000); e != nil {
		return nil, e
	}
	ids := list(v, "GroupId")
	for _, id := range ids {
		if f.group(id) == nil {
			return nil, errorf("InvalidGroup.NotFound", "The security group '%s' does not exist", id)
		}
	}
	var match []*SecurityGroup
	for _, g := range f.groups {
		if len(ids) > 0 && !slices.Contains(ids, g.ID) {
			continue
		}
		if filters.match(func(name string) []string {
			if k, ok := strings.CutPrefix(name, "tag:"); ok {
				if val, ok := g.Tags[k]; ok {
					return []string{val}
				}
				return nil
			}
			switch name {
			case "group-name":
				return []string{g.Name}
			case "group-id":
				return []string{g.ID}
			case "vpc-id":
				return []string{g.VPC}
			}
			return nil
		}) {
			match = append(match, g)
		}
	}
	pg, next, err := page(match, v.Get("NextToken"), f.limit(v))
	if err != nil {
		return nil, err
	}
	out := xGroups{NextToken: next}
	for _, g := range pg {
		out.Items = append(out.Items, xGroup{OwnerID: AccountID, ID: g.ID, Name: g.Name, Description: g.Description, VPC: g.VPC,
			Ingress: xPerms(g.Ingress), Egress: xPerms(g.Egress), Tags: xTagsOf(g.Tags)})
	}
	return out, nil
}

// xPerms groups rules by protocol and ports, as EC2 reports them.
func xPerms(rules []Rule) []xPerm {
	var out []xPerm
	for _, r := range rules {
		i := slices.IndexFunc(out, func(p xPerm) bool { return p.Protocol == r.Protocol && p.From == r.From && p.To == r.To })
		if i < 0 {
			out = append(out, xPerm{Protocol: r.Protocol, From: r.From, To: r.To})
			i = len(out) - 1
		}
		switch {
		case r.GroupID != "":
			out[i].Groups = append(out[i].Groups, xPair{GroupID: r.GroupID, UserID: AccountID, Description: r.Description})
		case strings.Contains(r.CIDR, ":"):
			out[i].V6 = append(out[i].V6, xRange6{CIDR: r.CIDR, Description: r.Description})
		default:
			out[i].V4 = append(out[i].V4, xRange{CIDR: r.CIDR, Description: r.Description})
		}
	}
	return out
}

func (f *EC2) deleteSecurityGroup(v url.Values) (any, *apiError) {
	id := v.Get("GroupId")
	g := f.group(id)
	if g == nil {
		return nil, errorf("InvalidGroup.NotFound", "The security group '%s' does not exist", id)
	}
	for _, in := range f.instances {
		if f.holds(in) && slices.Contains(in.SecurityGroups, id) {
			return nil, errorf("DependencyViolation", "resource %s has a dependent object", id)
		}
	}
	// A rule of another group naming this one as its source is a
	// dependent object too (a group's rules naming itself are not).
	for _, other := range f.groups {
		if other.ID != id && slices.ContainsFunc(append(slices.Clone(other.Ingress), other.Egress...), func(r Rule) bool { return r.GroupID == id }) {
			return nil, errorf("DependencyViolation", "resource %s has a dependent object", id)
		}
	}
	f.groups = slices.DeleteFunc(f.groups, func(x *SecurityGroup) bool { return x.ID == id })
	return xDeleteGroup{Return: true, GroupID: id}, nil
}

// ---- instance types ----

func (f *EC2) describeInstanceTypes(v url.Values) (any, *apiError) {
	filters := parseFilters(v)
	if e := filters.check("current-generation"); e != nil {
		return nil, e
	}
	if mr := v.Get("MaxResults"); mr != "" {
		if n, err := strconv.Atoi(mr); err != nil || n < 5 || n > 100 {
			return nil, errorf("InvalidParameterValue", "MaxResults must be between 5 and 100")
		}
	}
	names := list(v, "InstanceType")
	var match []InstanceType
	for _, t := range f.types {
		if len(names) > 0 && !slices.Contains(names, t.Name) {
			continue
		}
		if filters.match(func(name string) []string {
			if name == "current-generation" {
				return []string{strconv.FormatBool(!t.PreviousGeneration)}
			}
			return nil
		}) {
			match = append(match, t)
		}
	}
	pg, next, err := page(match, v.Get("NextToken"), f.limit(v))
	if err != nil {
		return nil, err
	}
	out := xTypes{NextToken: next}
	for _, t := range pg {
		x := xType{Name: t.Name, Current: !t.PreviousGeneration, VCPU: xVCPU{t.VCPUs}, Memory: xMemory{t.MemoryMiB}}
		for _, a := range t.Archs {
			x.Processor.Archs = append(x.Processor.Archs, a)
		}
		if t.GPUs > 0 {
			x.GPU = &xGPUInfo{GPUs: []xGPU{{Name: t.GPUName, Manufacturer: t.GPUManufacturer, Count: t.GPUs, Memory: xGPUMemory{t.GPUMemoryMiB}}}}
		}
		out.Items = append(out.Items, x)
	}
	return out, nil
}
