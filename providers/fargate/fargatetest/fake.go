package fargatetest

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"
)

// Defaults of a new fake.
const (
	DefaultRegion  = "us-east-1"
	DefaultAccount = "123456789012"
	DefaultCluster = "gateway"
	DefaultVPC     = "vpc-0a1b2c3d"
)

// Subnets every new fake knows: two in DefaultVPC, one in another VPC.
const (
	SubnetA     = "subnet-0aaa"
	SubnetB     = "subnet-0bbb"
	SubnetOther = "subnet-0ccc" // in vpc-0other
)

// Server is the fake. Its exported methods are safe for concurrent use.
type Server struct {
	ECS            *httptest.Server
	SecretsManager *httptest.Server
	EC2            *httptest.Server
	Logs           *httptest.Server // CloudWatch Logs

	Region  string
	Account string

	mu           sync.Mutex
	clusters     map[string]bool
	capProviders map[string]bool // associated with every cluster
	families     map[string][]*taskDef
	tasks        map[string]*task // by ARN
	taskOrder    []string
	tokens       map[string]string // RunTask clientToken -> task ARN
	secrets      map[string]*secret
	groups       map[string]*group
	vpcs         map[string]bool
	subnets      map[string]subnet
	calls        map[string]int
	requests     []Request
	faults       []*fault
	runFaults    []*RunFault
	autoAdvance  bool
	pageSize     int
	listLag      int // ListTasks answers that miss a new task
	describeLag  int // DescribeTasks/StopTask calls naming a new task that do not know it yet
	ipSeq        int
	logs         map[string]map[string][]logEvent // group -> stream -> events
	now          func() time.Time
	detachDelay  time.Duration
	stoppedKept  time.Duration  // how long DescribeTasks still reports a STOPPED task
	injected     map[string]int // answers faults made, by code ("" a hang-up)
}

// Request is one call the fake received.
type Request struct {
	Action string // "ecs:RunTask", "secretsmanager:CreateSecret", "ec2:CreateSecurityGroup"
	Body   []byte
}

type subnet struct{ id, vpc, az, cidr string }

// New starts the fake's three servers; they stop when the test ends.
func New(t testing.TB) *Server {
	s := &Server{
		Region: DefaultRegion, Account: DefaultAccount,
		clusters:     map[string]bool{DefaultCluster: true},
		capProviders: map[string]bool{"FARGATE": true, "FARGATE_SPOT": true},
		families:     map[string][]*taskDef{},
		tasks:        map[string]*task{},
		tokens:       map[string]string{},
		secrets:      map[string]*secret{},
		groups:       map[string]*group{},
		vpcs:         map[string]bool{DefaultVPC: true, "vpc-0other": true},
		subnets: map[string]subnet{
			SubnetA:     {SubnetA, DefaultVPC, DefaultRegion + "a", "10.1.0.0/20"},
			SubnetB:     {SubnetB, DefaultVPC, DefaultRegion + "b", "10.1.16.0/20"},
			SubnetOther: {SubnetOther, "vpc-0other", DefaultRegion + "c", "10.2.0.0/20"},
		},
		calls:       map[string]int{},
		autoAdvance: true,
		pageSize:    100,
		now:         time.Now,
		stoppedKept: time.Hour,
		injected:    map[string]int{},
	}
	s.ECS = httptest.NewServer(http.HandlerFunc(s.serveECS))
	s.SecretsManager = httptest.NewServer(http.HandlerFunc(s.serveSecrets))
	s.EC2 = httptest.NewServer(http.HandlerFunc(s.serveEC2))
	s.Logs = httptest.NewServer(http.HandlerFunc(s.serveLogs))
	t.Cleanup(func() {
		s.ECS.Close()
		s.SecretsManager.Close()
		s.EC2.Close()
		s.Logs.Close()
	})
	return s
}

// ---- configuration and fault injection ----

// SetAutoAdvance turns the status transitions on or off: when on (the
// default), every DescribeTasks that reports a task moves it one step along
// PROVISIONING, PENDING, ACTIVATING, RUNNING, or along DEACTIVATING,
// STOPPING, DEPROVISIONING, STOPPED once it is asked to stop.
func (s *Server) SetAutoAdvance(on bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.autoAdvance = on
}

// SetClock makes the fake read the time from now (a test's simulated
// clock) instead of the wall clock: the detach delay and how long stopped
// tasks stay visible are measured on it.
func (s *Server) SetClock(now func() time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.now = now
}

// SetDetachDelay makes a stopped task's elastic network interface hold its
// security groups for d after the task is STOPPED, as Fargate deletes the
// interface some time after the task ends: until then DeleteSecurityGroup
// answers DependencyViolation (default 0).
func (s *Server) SetDetachDelay(d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.detachDelay = d
}

// SetStoppedListing sets how long DescribeTasks and ListTasks keep
// reporting a STOPPED task (default an hour, as ECS: "stopped tasks ...
// appear ... for at least one hour"); after it, DescribeTasks answers
// MISSING.
func (s *Server) SetStoppedListing(d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stoppedKept = d
}

// SetPageSize caps the results of one ListTasks or ListTaskDefinitions
// page (AWS: 100), to exercise pagination.
func (s *Server) SetPageSize(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.pageSize = n
}

// SetListLag makes the next n ListTasks answers leave out tasks created
// since the lag was set, as ECS's eventually consistent listing can.
func (s *Server) SetListLag(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.listLag = n
	for _, t := range s.tasks {
		t.listed = true
	}
}

// SetDescribeLag makes tasks started from now on unknown to the next n
// DescribeTasks (MISSING) or StopTask (InvalidParameterException) calls
// that name each of them, as ECS's eventual consistency can right after
// RunTask.
func (s *Server) SetDescribeLag(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.describeLag = n
}

// AddSubnet adds a subnet of DefaultVPC; tasks started in it get their
// private addresses from cidr (a loopback range lets a test serve, on a
// task's address, what the software in the task would).
func (s *Server) AddSubnet(id, az, cidr string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.subnets[id] = subnet{id, DefaultVPC, az, cidr}
}

// SetCapacityProviders sets the capacity providers associated with the
// ECS cluster (default FARGATE and FARGATE_SPOT).
func (s *Server) SetCapacityProviders(names ...string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.capProviders = map[string]bool{}
	for _, n := range names {
		s.capProviders[n] = true
	}
}

type fault struct {
	action  string // "*": any action of any service
	times   int
	status  int
	code    string
	message string
	lose    bool // act, then hang up (or answer code, if set)
}

// FailNext makes the next n calls of action ("ecs:RunTask",
// "secretsmanager:CreateSecret", "ec2:DeleteSecurityGroup", ...) answer with
// the error code and HTTP status given.
func (s *Server) FailNext(action string, n, status int, code, message string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults = append(s.faults, &fault{action: action, times: n, status: status, code: code, message: message})
}

// Throttle makes the next n calls of action answer as a throttled call of
// its service does: 400 ThrottlingException (ECS, Secrets Manager) or 503
// RequestLimitExceeded (EC2).
func (s *Server) Throttle(action string, n int) {
	if strings.HasPrefix(action, "ec2:") {
		s.FailNext(action, n, http.StatusServiceUnavailable, "RequestLimitExceeded", "Request limit exceeded.")
		return
	}
	s.FailNext(action, n, http.StatusBadRequest, "ThrottlingException", "Rate exceeded")
}

// ThrottleAll makes the next n calls, whatever their service and action,
// answer as a throttled account does (see Throttle).
func (s *Server) ThrottleAll(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults = append(s.faults, &fault{action: "*", times: n, code: "throttle"})
}

// RunFault makes RunTask calls answer with a failures[] entry instead of a
// task, as ECS does when Fargate has no capacity.
type RunFault struct {
	Times int // how many matching calls fail; 0 means every one
	// Subnet and CapacityProvider ("FARGATE", "FARGATE_SPOT") restrict the
	// calls that fail; empty matches any.
	Subnet           string
	CapacityProvider string
	Reason           string // e.g. "RESOURCE:FARGATE" or "Capacity is unavailable at this time. ..."
	Detail           string
}

// FailRunTask adds a RunTask failure.
func (s *Server) FailRunTask(f RunFault) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ff := f
	s.runFaults = append(s.runFaults, &ff)
}

// LoseAnswers makes the next n calls of action take effect but never
// answer: the connection is closed where the response should be, as when a
// network fails after AWS acted. A client must repeat the call and get the
// same outcome (idempotency), not a second resource.
func (s *Server) LoseAnswers(action string, n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults = append(s.faults, &fault{action: action, times: n, lose: true})
}

// LoseAnswersWith is LoseAnswers with an error answer instead of a closed
// connection: the call takes effect and the client gets status and code
// (500 InternalFailure, say).
func (s *Server) LoseAnswersWith(action string, n, status int, code string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults = append(s.faults, &fault{action: action, times: n, lose: true, status: status, code: code, message: "injected failure after the call took effect"})
}

// Injected reports how many answers the injected faults made with code
// ("" counts connections closed without an answer).
func (s *Server) Injected(code string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.injected[code]
}

// takeLoss returns the lost-answer fault of this call of action, if any.
func (s *Server) takeLoss(action string) *fault {
	for i, f := range s.faults {
		if f.action == action && f.lose {
			f.times--
			if f.times <= 0 {
				s.faults = slices.Delete(s.faults, i, i+1)
			}
			s.injected[f.code]++
			return f
		}
	}
	return nil
}

// answerLoss answers a call whose answer is lost: a closed connection, or
// the fault's error.
func answerLoss(w http.ResponseWriter, f *fault, write func(http.ResponseWriter, *apiError)) {
	if f.code == "" {
		hangUp(w)
		return
	}
	write(w, &apiError{status: f.status, code: f.code, message: f.message})
}

// hangUp closes the connection without a response.
func hangUp(w http.ResponseWriter) {
	hj, ok := w.(http.Hijacker)
	if !ok {
		panic("fargatetest: cannot hijack the connection")
	}
	conn, _, err := hj.Hijack()
	if err == nil {
		_ = conn.Close()
	}
}

// takeFault returns the injected error for this call of action, if any.
func (s *Server) takeFault(action string) *fault {
	for i, f := range s.faults {
		if (f.action == action || f.action == "*") && !f.lose {
			f.times--
			if f.times <= 0 {
				s.faults = slices.Delete(s.faults, i, i+1)
			}
			if f.code == "throttle" {
				if strings.HasPrefix(action, "ec2:") {
					f = &fault{status: http.StatusServiceUnavailable, code: "RequestLimitExceeded", message: "Request limit exceeded."}
				} else {
					f = &fault{status: http.StatusBadRequest, code: "ThrottlingException", message: "Rate exceeded"}
				}
			}
			s.injected[f.code]++
			return f
		}
	}
	return nil
}

func (s *Server) record(action string, body []byte) {
	s.calls[action]++
	s.requests = append(s.requests, Request{Action: action, Body: slices.Clone(body)})
}

// Calls reports how many calls of action the fake received, failed ones
// included.
func (s *Server) Calls(action string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls[action]
}

// Requests returns the bodies of every call received, in order; with
// actions given, only those.
func (s *Server) Requests(actions ...string) []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Request
	for _, r := range s.requests {
		if len(actions) == 0 || slices.Contains(actions, r.Action) {
			out = append(out, Request{Action: r.Action, Body: slices.Clone(r.Body)})
		}
	}
	return out
}

// ---- helpers shared by the three services ----

// checkAuth accepts only SigV4-signed requests: the provider must sign
// with real (static, in tests) credentials, never anonymously.
func checkAuth(r *http.Request, service string) bool {
	a := r.Header.Get("Authorization")
	return strings.HasPrefix(a, "AWS4-HMAC-SHA256 ") && strings.Contains(a, "/"+service+"/aws4_request")
}

func readBody(r *http.Request) ([]byte, error) {
	defer r.Body.Close()
	return io.ReadAll(io.LimitReader(r.Body, 8<<20))
}

func randomHex(n int) string {
	b := make([]byte, (n+1)/2)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)[:n]
}

func requestID() string {
	h := randomHex(32)
	return h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:32]
}

func epoch(t time.Time) *float64 {
	if t.IsZero() {
		return nil
	}
	f := float64(t.UnixNano()) / 1e9
	return &f
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// apiError is an error answer: status and the service's error code.
type apiError struct {
	status  int
	code    string
	message string
	lose    bool // act, then hang up
}

func (e *apiError) Error() string { return fmt.Sprintf("%d %s: %s", e.status, e.code, e.message) }

func clientErr(code, format string, args ...any) *apiError {
	return &apiError{status: http.StatusBadRequest, code: code, message: fmt.Sprintf(format, args...)}
}
