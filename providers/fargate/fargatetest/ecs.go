package fargatetest

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"net/http"
	"net/netip"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
)

const ecsTargetPrefix = "AmazonEC2ContainerServiceV20141113."

// ---- wire shapes (ECS uses camelCase member names) ----

type ecsTag struct {
	Key   string `json:"key"`
	Value string `json:"value"`
}

type keyValue struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

type secretRef struct {
	Name      string `json:"name"`
	ValueFrom string `json:"valueFrom"`
}

type portMapping struct {
	ContainerPort *int   `json:"containerPort,omitempty"`
	Protocol      string `json:"protocol,omitempty"`
}

type logConfiguration struct {
	LogDriver string            `json:"logDriver"`
	Options   map[string]string `json:"options,omitempty"`
}

// containerDefinition holds what the fake checks; the definition is echoed
// back from the raw request so that nothing the provider sent is lost.
type containerDefinition struct {
	Name             string            `json:"name"`
	Image            string            `json:"image"`
	Essential        *bool             `json:"essential"`
	EntryPoint       []string          `json:"entryPoint"`
	Command          []string          `json:"command"`
	Environment      []keyValue        `json:"environment"`
	Secrets          []secretRef       `json:"secrets"`
	PortMappings     []portMapping     `json:"portMappings"`
	LogConfiguration *logConfiguration `json:"logConfiguration"`
}

type registerTaskDefinitionInput struct {
	Family                  string                `json:"family"`
	TaskRoleArn             string                `json:"taskRoleArn"`
	ExecutionRoleArn        string                `json:"executionRoleArn"`
	NetworkMode             string                `json:"networkMode"`
	ContainerDefinitions    json.RawMessage       `json:"containerDefinitions"`
	RequiresCompatibilities []string              `json:"requiresCompatibilities"`
	CPU                     string                `json:"cpu"`
	Memory                  string                `json:"memory"`
	Tags                    []ecsTag              `json:"tags"`
	RuntimePlatform         json.RawMessage       `json:"runtimePlatform"`
	parsed                  []containerDefinition `json:"-"`
}

type taskDef struct {
	arn          string
	family       string
	revision     int
	status       string // ACTIVE, INACTIVE, DELETE_IN_PROGRESS
	in           registerTaskDefinitionInput
	registeredAt time.Time
	tags         []ecsTag
}

func (d *taskDef) wire() map[string]any {
	m := map[string]any{
		"taskDefinitionArn":       d.arn,
		"family":                  d.family,
		"revision":                d.revision,
		"status":                  d.status,
		"containerDefinitions":    d.in.ContainerDefinitions,
		"networkMode":             d.in.NetworkMode,
		"requiresCompatibilities": d.in.RequiresCompatibilities,
		"compatibilities":         []string{"EC2", "FARGATE"},
		"cpu":                     d.in.CPU,
		"memory":                  d.in.Memory,
		"registeredAt":            epoch(d.registeredAt),
	}
	if d.in.TaskRoleArn != "" {
		m["taskRoleArn"] = d.in.TaskRoleArn
	}
	if d.in.ExecutionRoleArn != "" {
		m["executionRoleArn"] = d.in.ExecutionRoleArn
	}
	if len(d.in.RuntimePlatform) > 0 {
		m["runtimePlatform"] = d.in.RuntimePlatform
	}
	return m
}

type awsVpcConfiguration struct {
	Subnets        []string `json:"subnets"`
	SecurityGroups []string `json:"securityGroups"`
	AssignPublicIP string   `json:"assignPublicIp"`
}

type capacityProviderStrategyItem struct {
	CapacityProvider string `json:"capacityProvider"`
	Weight           int    `json:"weight"`
	Base             int    `json:"base"`
}

type containerOverride struct {
	Name        string     `json:"name"`
	Command     []string   `json:"command"`
	Environment []keyValue `json:"environment"`
}

type taskOverride struct {
	ContainerOverrides []containerOverride `json:"containerOverrides"`
	CPU                string              `json:"cpu"`
	Memory             string              `json:"memory"`
}

type runTaskInput struct {
	Cluster                  string                         `json:"cluster"`
	TaskDefinition           string                         `json:"taskDefinition"`
	Count                    *int                           `json:"count"`
	LaunchType               string                         `json:"launchType"`
	CapacityProviderStrategy []capacityProviderStrategyItem `json:"capacityProviderStrategy"`
	PlatformVersion          string                         `json:"platformVersion"`
	NetworkConfiguration     *struct {
		AwsvpcConfiguration *awsVpcConfiguration `json:"awsvpcConfiguration"`
	} `json:"networkConfiguration"`
	Overrides            json.RawMessage `json:"overrides"`
	Tags                 []ecsTag        `json:"tags"`
	EnableECSManagedTags bool            `json:"enableECSManagedTags"`
	PropagateTags        string          `json:"propagateTags"`
	StartedBy            string          `json:"startedBy"`
	Group                string          `json:"group"`
	ClientToken          string          `json:"clientToken"`
}

// task is one ECS task as the fake keeps it.
type task struct {
	arn, id, cluster  string
	containerArn      string
	def               *taskDef
	startedBy, group  string
	capacityProvider  string
	lastStatus        string
	desiredStatus     string
	stopCode          string
	stoppedReason     string
	exitCode          *int
	containerReason   string
	subnet            string
	securityGroups    []string
	assignPublicIP    string
	ip, az            string
	tags              []ecsTag
	overrides         json.RawMessage
	createdAt         time.Time
	startedAt         time.Time
	stoppingAt        time.Time
	stoppedAt         time.Time
	failStart         string // why the task will fail to start (a missing secret)
	listed            bool   // visible to ListTasks despite a list lag
	unknown           int    // DescribeTasks/StopTask calls that will not know it yet
	cpu, memory       string
	enableManagedTags bool
	propagateTags     string
}

func (t *task) wire(withTags bool) map[string]any {
	container := map[string]any{
		"containerArn": t.containerArn,
		"taskArn":      t.arn,
		"name":         containerNameOf(t.def),
		"lastStatus":   containerStatus(t.lastStatus),
	}
	if t.exitCode != nil {
		container["exitCode"] = *t.exitCode
	}
	if t.containerReason != "" {
		container["reason"] = t.containerReason
	}
	if t.ip != "" {
		container["networkInterfaces"] = []map[string]any{{"attachmentId": "eni-attach-" + t.id[:8], "privateIpv4Address": t.ip}}
	}
	m := map[string]any{
		"taskArn":              t.arn,
		"clusterArn":           clusterARN(t.arn, t.cluster),
		"taskDefinitionArn":    t.def.arn,
		"lastStatus":           t.lastStatus,
		"desiredStatus":        t.desiredStatus,
		"launchType":           "FARGATE",
		"capacityProviderName": t.capacityProvider,
		"platformVersion":      "1.4.0",
		"platformFamily":       "Linux",
		"cpu":                  t.cpu,
		"memory":               t.memory,
		"availabilityZone":     t.az,
		"createdAt":            epoch(t.createdAt),
		"startedBy":            t.startedBy,
		"group":                t.group,
		"version":              1,
		"containers":           []map[string]any{container},
		"attachments": []map[string]any{{
			"id":     "att-" + t.id[:12],
			"type":   "ElasticNetworkInterface",
			"status": attachmentStatus(t.lastStatus),
			"details": []keyValue{
				{Name: "subnetId", Value: t.subnet},
				{Name: "networkInterfaceId", Value: "eni-" + t.id[:17]},
				{Name: "macAddress", Value: "0a:00:00:00:00:01"},
				{Name: "privateDnsName", Value: "ip-" + strings.ReplaceAll(t.ip, ".", "-") + ".ec2.internal"},
				{Name: "privateIPv4Address", Value: t.ip},
			},
		}},
	}
	if len(t.overrides) > 0 {
		m["overrides"] = t.overrides
	}
	for k, v := range map[string]time.Time{"startedAt": t.startedAt, "stoppingAt": t.stoppingAt, "stoppedAt": t.stoppedAt, "executionStoppedAt": t.stoppedAt} {
		if !v.IsZero() {
			m[k] = epoch(v)
		}
	}
	if t.stopCode != "" {
		m["stopCode"] = t.stopCode
	}
	if t.stoppedReason != "" {
		m["stoppedReason"] = t.stoppedReason
	}
	if withTags {
		tags := slices.Clone(t.tags)
		if t.propagateTags == "TASK_DEFINITION" {
			tags = mergeTags(t.def.tags, tags)
		}
		if t.enableManagedTags {
			tags = mergeTags(tags, []ecsTag{{Key: "aws:ecs:clusterName", Value: t.cluster}})
		}
		m["tags"] = tags
	}
	return m
}

// mergeTags adds over's tags to base, a later value replacing an earlier
// one of the same key (as ECS documents for tags of the same key).
func mergeTags(base, over []ecsTag) []ecsTag {
	out := slices.Clone(base)
	for _, t := range over {
		i := slices.IndexFunc(out, func(x ecsTag) bool { return x.Key == t.Key })
		if i >= 0 {
			out[i] = t
		} else {
			out = append(out, t)
		}
	}
	return out
}

func clusterARN(taskARN, cluster string) string {
	return taskARN[:strings.Index(taskARN, ":task/")] + ":cluster/" + cluster
}

func containerNameOf(d *taskDef) string {
	if len(d.in.parsed) > 0 {
		return d.in.parsed[0].Name
	}
	return ""
}

func containerStatus(last string) string {
	switch last {
	case "RUNNING", "DEACTIVATING", "STOPPING":
		return "RUNNING"
	case "DEPROVISIONING", "STOPPED":
		return "STOPPED"
	}
	return "PENDING"
}

func attachmentStatus(last string) string {
	switch last {
	case "PROVISIONING":
		return "PRECREATED"
	case "DEPROVISIONING":
		return "DELETING"
	case "STOPPED":
		return "DELETED"
	}
	return "ATTACHED"
}

// ---- the ECS endpoint ----

// jsonRequest reads an AWS JSON 1.1 request for service (its targets start
// with prefix) and answers its errors: a bad body or method, an unknown
// target or content type, no authentication, and a fault injected for the
// action. When ok, the action and body are returned with s.mu held, the
// call recorded.
func (s *Server) jsonRequest(w http.ResponseWriter, r *http.Request, prefix, service string) (action string, body []byte, ok bool) {
	body, err := readBody(r)
	if err != nil || r.Method != http.MethodPost {
		writeJSONError(w, clientErr("SerializationException", "bad request"))
		return "", nil, false
	}
	target := r.Header.Get("X-Amz-Target")
	if !strings.HasPrefix(target, prefix) || r.Header.Get("Content-Type") != "application/x-amz-json-1.1" {
		writeJSONError(w, clientErr("UnknownOperationException", "unknown target %q or content type %q", target, r.Header.Get("Content-Type")))
		return "", nil, false
	}
	if !checkAuth(r, service) {
		writeJSONError(w, &apiError{status: http.StatusForbidden, code: "MissingAuthenticationTokenException", message: "Missing Authentication Token"})
		return "", nil, false
	}
	action = strings.TrimPrefix(target, prefix)
	s.mu.Lock()
	s.record(service+":"+action, body)
	if f := s.takeFault(service + ":" + action); f != nil {
		s.mu.Unlock()
		writeJSONError(w, &apiError{status: f.status, code: f.code, message: f.message})
		return "", nil, false
	}
	return action, body, true
}

func (s *Server) serveECS(w http.ResponseWriter, r *http.Request) {
	action, body, ok := s.jsonRequest(w, r, ecsTargetPrefix, "ecs")
	if !ok {
		return
	}
	out, aerr := s.ecsAction(action, body)
	lose := s.takeLoss("ecs:" + action)
	s.mu.Unlock()
	if lose != nil {
		answerLoss(w, lose, writeJSONError)
		return
	}
	if aerr != nil {
		writeJSONError(w, aerr)
		return
	}
	writeJSON(w, out)
}

func writeJSON(w http.ResponseWriter, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		writeJSONError(w, &apiError{status: 500, code: "InternalFailure", message: err.Error()})
		return
	}
	w.Header().Set("Content-Type", "application/x-amz-json-1.1")
	w.Header().Set("X-Amzn-RequestId", requestID())
	_, _ = w.Write(b)
}

func writeJSONError(w http.ResponseWriter, e *apiError) {
	w.Header().Set("Content-Type", "application/x-amz-json-1.1")
	w.Header().Set("X-Amzn-RequestId", requestID())
	w.WriteHeader(e.status)
	b, _ := json.Marshal(map[string]string{"__type": e.code, "message": e.message})
	_, _ = w.Write(b)
}

func (s *Server) ecsAction(action string, body []byte) (any, *apiError) {
	switch action {
	case "RegisterTaskDefinition":
		return s.registerTaskDefinition(body)
	case "DescribeTaskDefinition":
		return s.describeTaskDefinition(body)
	case "ListTaskDefinitions":
		return s.listTaskDefinitions(body)
	case "ListTaskDefinitionFamilies":
		return s.listTaskDefinitionFamilies(body)
	case "DeregisterTaskDefinition":
		return s.deregisterTaskDefinition(body)
	case "DeleteTaskDefinitions":
		return s.deleteTaskDefinitions(body)
	case "RunTask":
		return s.runTask(body)
	case "ListTasks":
		return s.listTasks(body)
	case "DescribeTasks":
		return s.describeTasks(body)
	case "StopTask":
		return s.stopTask(body)
	}
	return nil, clientErr("UnknownOperationException", "the fake does not implement %s", action)
}

func decode(body []byte, v any) *apiError {
	if err := json.Unmarshal(body, v); err != nil {
		return clientErr("SerializationException", "cannot parse the request: %v", err)
	}
	return nil
}

var (
	familyRE    = regexp.MustCompile(`^[A-Za-z0-9_-]{1,255}$`)
	startedByRE = regexp.MustCompile(`^[A-Za-z0-9_/-]{1,36}$`)
	arnRE       = regexp.MustCompile(`^arn:aws[a-z-]*:iam::\d{12}:role/[A-Za-z0-9+=,.@_/-]+$`)
)

// fargateMemory lists the memory (MiB) Fargate accepts for each CPU value
// (Linux tasks).
func fargateMemory(cpu int) []int {
	span := func(lo, hi, step int) []int {
		var out []int
		for m := lo; m <= hi; m += step {
			out = append(out, m)
		}
		return out
	}
	switch cpu {
	case 256:
		return []int{512, 1024, 2048}
	case 512:
		return span(1024, 4096, 1024)
	case 1024:
		return span(2048, 8192, 1024)
	case 2048:
		return span(4096, 16384, 1024)
	case 4096:
		return span(8192, 30720, 1024)
	case 8192:
		return span(16384, 61440, 4096)
	case 16384:
		return span(32768, 122880, 8192)
	}
	return nil
}

// maxOverrides is RunTask's bound on the overrides' JSON; maxTaskDef is
// ECS's quota on the size of a task definition (64 KiB).
const (
	maxOverrides = 8192
	maxTaskDef   = 64 << 10
)

func (s *Server) registerTaskDefinition(body []byte) (any, *apiError) {
	if len(body) > maxTaskDef {
		return nil, clientErr("ClientException", "Task definition size %d exceeds the maximum of %d bytes.", len(body), maxTaskDef)
	}
	var in registerTaskDefinitionInput
	if e := decode(body, &in); e != nil {
		return nil, e
	}
	if !familyRE.MatchString(in.Family) {
		return nil, clientErr("ClientException", "Family must be 1-255 letters, numbers, hyphens or underscores: %q", in.Family)
	}
	if err := json.Unmarshal(in.ContainerDefinitions, &in.parsed); err != nil || len(in.parsed) == 0 {
		return nil, clientErr("ClientException", "Container list cannot be empty.")
	}
	if slices.Contains(in.RequiresCompatibilities, "FARGATE") {
		if in.NetworkMode != "awsvpc" {
			return nil, clientErr("ClientException", "Fargate only supports network mode 'awsvpc'.")
		}
		cpu, _ := strconv.Atoi(in.CPU)
		mem, _ := strconv.Atoi(in.Memory)
		if !slices.Contains(fargateMemory(cpu), mem) {
			return nil, clientErr("ClientException", "No Fargate configuration exists for given values: %s CPU, %s memory.", in.CPU, in.Memory)
		}
	}
	for _, role := range []string{in.TaskRoleArn, in.ExecutionRoleArn} {
		if role != "" && !arnRE.MatchString(role) {
			return nil, clientErr("ClientException", "Role is not valid: %s", role)
		}
	}
	for _, c := range in.parsed {
		if c.Name == "" || c.Image == "" {
			return nil, clientErr("ClientException", "Container.name and Container.image should not be null or empty.")
		}
		needsExec := len(c.Secrets) > 0 || (c.LogConfiguration != nil && c.LogConfiguration.LogDriver == "awslogs")
		if needsExec && in.ExecutionRoleArn == "" {
			return nil, clientErr("ClientException", "Fargate requires task definition to have execution role ARN to support secrets and log configuration.")
		}
		for _, sec := range c.Secrets {
			if sec.Name == "" || sec.ValueFrom == "" {
				return nil, clientErr("ClientException", "Secret name and valueFrom are required.")
			}
		}
	}
	if err := checkTags(in.Tags); err != nil {
		return nil, err
	}
	revs := s.families[in.Family]
	d := &taskDef{
		family: in.Family, revision: len(revs) + 1, status: "ACTIVE", in: in, registeredAt: s.now(), tags: in.Tags,
	}
	d.arn = fmt.Sprintf("arn:aws:ecs:%s:%s:task-definition/%s:%d", s.Region, s.Account, in.Family, d.revision)
	s.families[in.Family] = append(revs, d)
	return map[string]any{"taskDefinition": d.wire(), "tags": d.tags}, nil
}

func checkTags(tags []ecsTag) *apiError {
	if len(tags) > 50 {
		return clientErr("InvalidParameterException", "at most 50 tags")
	}
	for _, t := range tags {
		if t.Key == "" || len(t.Key) > 128 || len(t.Value) > 256 || strings.HasPrefix(strings.ToLower(t.Key), "aws:") {
			return clientErr("InvalidParameterException", "invalid tag %q=%q", t.Key, t.Value)
		}
	}
	return nil
}

// lookupTaskDef resolves a family, family:revision or ARN; a bare family
// names its latest ACTIVE revision.
func (s *Server) lookupTaskDef(ref string) *taskDef {
	if i := strings.Index(ref, ":task-definition/"); i >= 0 {
		ref = ref[i+len(":task-definition/"):]
	}
	family, rev, hasRev := strings.Cut(ref, ":")
	revs := s.families[family]
	if hasRev {
		n, err := strconv.Atoi(rev)
		if err != nil || n < 1 || n > len(revs) {
			return nil
		}
		return revs[n-1]
	}
	for i := len(revs) - 1; i >= 0; i-- {
		if revs[i].status == "ACTIVE" {
			return revs[i]
		}
	}
	return nil
}

func (s *Server) describeTaskDefinition(body []byte) (any, *apiError) {
	var in struct {
		TaskDefinition string   `json:"taskDefinition"`
		Include        []string `json:"include"`
	}
	if e := decode(body, &in); e != nil {
		return nil, e
	}
	d := s.lookupTaskDef(in.TaskDefinition)
	if d == nil || d.status == "DELETE_IN_PROGRESS" {
		return nil, clientErr("ClientException", "Unable to describe task definition.")
	}
	out := map[string]any{"taskDefinition": d.wire()}
	if slices.Contains(in.Include, "TAGS") {
		out["tags"] = d.tags
	}
	return out, nil
}

// listTaskDefinitions follows AWS's API model: familyPrefix is the full
// family name and matches exactly (not as a prefix); status defaults to
// ACTIVE.
func (s *Server) listTaskDefinitions(body []byte) (any, *apiError) {
	var in struct {
		FamilyPrefix string `json:"familyPrefix"`
		Status       string `json:"status"`
		NextToken    string `json:"nextToken"`
		MaxResults   int    `json:"maxResults"`
	}
	if e := decode(body, &in); e != nil {
		return nil, e
	}
	switch in.Status {
	case "":
		in.Status = "ACTIVE"
	case "ACTIVE", "INACTIVE", "DELETE_IN_PROGRESS":
	default:
		return nil, clientErr("InvalidParameterException", "status must be ACTIVE, INACTIVE or DELETE_IN_PROGRESS")
	}
	var arns []string
	for _, f := range sortedKeys(s.families) {
		if in.FamilyPrefix != "" && f != in.FamilyPrefix {
			continue
		}
		for _, d := range s.families[f] {
			if d.status == in.Status {
				arns = append(arns, d.arn)
			}
		}
	}
	page, next, err := s.paginate(arns, in.NextToken, in.MaxResults)
	if err != nil {
		return nil, err
	}
	out := map[string]any{"taskDefinitionArns": page}
	if next != "" {
		out["nextToken"] = next
	}
	return out, nil
}

// listTaskDefinitionFamilies follows AWS's API model: familyPrefix matches
// the start of the family name; status ACTIVE lists the families with an
// ACTIVE revision, INACTIVE those without, ALL (the default) both.
func (s *Server) listTaskDefinitionFamilies(body []byte) (any, *apiError) {
	var in struct {
		FamilyPrefix string `json:"familyPrefix"`
		Status       string `json:"status"`
		NextToken    string `json:"nextToken"`
		MaxResults   int    `json:"maxResults"`
	}
	if e := decode(body, &in); e != nil {
		return nil, e
	}
	switch in.Status {
	case "":
		in.Status = "ALL"
	case "ACTIVE", "INACTIVE", "ALL":
	default:
		return nil, clientErr("InvalidParameterException", "status must be ACTIVE, INACTIVE or ALL")
	}
	var families []string
	for _, f := range sortedKeys(s.families) {
		if !strings.HasPrefix(f, in.FamilyPrefix) {
			continue
		}
		active := slices.ContainsFunc(s.families[f], func(d *taskDef) bool { return d.status == "ACTIVE" })
		if (in.Status == "ACTIVE" && !active) || (in.Status == "INACTIVE" && active) {
			continue
		}
		families = append(families, f)
	}
	page, next, err := s.paginate(families, in.NextToken, in.MaxResults)
	if err != nil {
		return nil, err
	}
	out := map[string]any{"families": page}
	if next != "" {
		out["nextToken"] = next
	}
	return out, nil
}

func (s *Server) paginate(items []string, token string, max int) ([]string, string, *apiError) {
	start := 0
	if token != "" {
		n, err := strconv.Atoi(strings.TrimPrefix(token, "page-"))
		if err != nil || n < 0 || n > len(items) {
			return nil, "", clientErr("InvalidParameterException", "Invalid nextToken")
		}
		start = n
	}
	if max < 0 || max > 100 {
		return nil, "", clientErr("InvalidParameterException", "maxResults must be between 1 and 100")
	}
	size := s.pageSize
	if max > 0 && max < size {
		size = max
	}
	end := min(start+size, len(items))
	next := ""
	if end < len(items) {
		next = "page-" + strconv.Itoa(end)
	}
	return items[start:end], next, nil
}

func (s *Server) deregisterTaskDefinition(body []byte) (any, *apiError) {
	var in struct {
		TaskDefinition string `json:"taskDefinition"`
	}
	if e := decode(body, &in); e != nil {
		return nil, e
	}
	if !strings.Contains(in.TaskDefinition, ":") {
		return nil, clientErr("ClientException", "Revision must be specified.")
	}
	d := s.lookupTaskDef(in.TaskDefinition)
	if d == nil || d.status == "DELETE_IN_PROGRESS" {
		return nil, clientErr("ClientException", "The specified task definition does not exist.")
	}
	d.status = "INACTIVE"
	return map[string]any{"taskDefinition": d.wire()}, nil
}

func (s *Server) deleteTaskDefinitions(body []byte) (any, *apiError) {
	var in struct {
		TaskDefinitions []string `json:"taskDefinitions"`
	}
	if e := decode(body, &in); e != nil {
		return nil, e
	}
	if len(in.TaskDefinitions) == 0 || len(in.TaskDefinitions) > 10 {
		return nil, clientErr("InvalidParameterException", "between 1 and 10 task definitions")
	}
	var done []map[string]any
	var failures []map[string]any
	for _, ref := range in.TaskDefinitions {
		d := s.lookupTaskDef(ref)
		switch {
		case d == nil:
			failures = append(failures, map[string]any{"arn": ref, "reason": "The specified task definition does not exist."})
		case d.status == "ACTIVE":
			failures = append(failures, map[string]any{"arn": ref, "reason": "The specified task definition is still in ACTIVE status. Please deregister the target and try again."})
		default:
			d.status = "DELETE_IN_PROGRESS"
			done = append(done, d.wire())
		}
	}
	return map[string]any{"taskDefinitions": done, "failures": failures}, nil
}

func (s *Server) runTask(body []byte) (any, *apiError) {
	var in runTaskInput
	if e := decode(body, &in); e != nil {
		return nil, e
	}
	cluster := clusterName(in.Cluster)
	if !s.clusters[cluster] {
		return nil, clientErr("ClusterNotFoundException", "Cluster not found.")
	}
	// "Up to 64 characters are allowed. The valid characters are
	// characters in the range of 33-126, inclusive."
	if len(in.ClientToken) > 64 || strings.ContainsFunc(in.ClientToken, func(r rune) bool { return r < 33 || r > 126 }) {
		return nil, clientErr("InvalidParameterException", "clientToken must be at most 64 characters in the range 33-126")
	}
	// RunTask: "A total of 8192 characters are allowed for overrides. This
	// limit includes the JSON formatting characters of the override
	// structure."
	if len(in.Overrides) > maxOverrides {
		return nil, clientErr("InvalidParameterException", "Container Overrides length must be at most %d", maxOverrides)
	}
	if arn, ok := s.tokens[in.ClientToken]; ok && in.ClientToken != "" {
		// Idempotency: the same token answers with the task it started.
		return map[string]any{"tasks": []any{s.tasks[arn].wire(true)}, "failures": []any{}}, nil
	}
	if in.Count != nil && (*in.Count < 1 || *in.Count > 10) {
		return nil, clientErr("InvalidParameterException", "count must be between 1 and 10")
	}
	if in.Count != nil && *in.Count != 1 {
		return nil, clientErr("InvalidParameterException", "the fake starts one task per call")
	}
	if in.StartedBy != "" && !startedByRE.MatchString(in.StartedBy) {
		return nil, clientErr("InvalidParameterException", "startedBy must be up to 36 letters, numbers, hyphens, forward slashes and underscores: %q", in.StartedBy)
	}
	if in.PropagateTags == "SERVICE" {
		return nil, clientErr("InvalidParameterException", "propagateTags SERVICE is only valid for services")
	}
	if err := checkTags(in.Tags); err != nil {
		return nil, err
	}
	capProvider := "FARGATE"
	switch {
	case in.LaunchType != "" && len(in.CapacityProviderStrategy) > 0:
		return nil, clientErr("InvalidParameterException", "Specifying both a launchType and capacityProviderStrategy is not supported.")
	case in.LaunchType != "":
		if in.LaunchType != "FARGATE" {
			return nil, clientErr("InvalidParameterException", "the fake runs FARGATE tasks only, not %s", in.LaunchType)
		}
	case len(in.CapacityProviderStrategy) == 1:
		capProvider = in.CapacityProviderStrategy[0].CapacityProvider
		if !s.capProviders[capProvider] {
			return nil, clientErr("InvalidParameterException", "The specified capacity provider strategy cannot contain a capacity provider that is not associated with the cluster. Associate the capacity provider with the cluster or specify a valid capacity provider and try again.")
		}
	default:
		return nil, clientErr("InvalidParameterException", "the fake needs a launchType or a one-item capacityProviderStrategy")
	}
	def := s.lookupTaskDef(in.TaskDefinition)
	if def == nil || def.status != "ACTIVE" {
		return nil, clientErr("ClientException", "TaskDefinition not found.")
	}
	if !slices.Contains(def.in.RequiresCompatibilities, "FARGATE") {
		return nil, clientErr("InvalidParameterException", "Task definition does not support launch_type FARGATE.")
	}
	if in.NetworkConfiguration == nil || in.NetworkConfiguration.AwsvpcConfiguration == nil {
		return nil, clientErr("InvalidParameterException", "Network Configuration must be provided when networkMode 'awsvpc' is specified.")
	}
	vpcCfg := in.NetworkConfiguration.AwsvpcConfiguration
	if len(vpcCfg.Subnets) == 0 || len(vpcCfg.Subnets) > 16 {
		return nil, clientErr("InvalidParameterException", "subnets can not be empty.")
	}
	var vpc string
	for _, id := range vpcCfg.Subnets {
		sn, ok := s.subnets[id]
		if !ok {
			return nil, clientErr("InvalidParameterException", "Error retrieving subnet information for [%s]: The subnet ID '%s' does not exist (ErrorCode: InvalidSubnetID.NotFound)", id, id)
		}
		if vpc != "" && sn.vpc != vpc {
			return nil, clientErr("InvalidParameterException", "Subnets must be in the same VPC.")
		}
		vpc = sn.vpc
	}
	for _, id := range vpcCfg.SecurityGroups {
		g, ok := s.groups[id]
		if !ok {
			return nil, clientErr("InvalidParameterException", "Error retrieving security group information for [%s]: The security group '%s' does not exist (ErrorCode: InvalidGroup.NotFound)", id, id)
		}
		if g.vpc != vpc {
			return nil, clientErr("InvalidParameterException", "Security group %s is not in the subnets' VPC.", id)
		}
	}
	switch vpcCfg.AssignPublicIP {
	case "", "ENABLED", "DISABLED":
	default:
		return nil, clientErr("InvalidParameterException", "assignPublicIp must be ENABLED or DISABLED")
	}
	if len(in.Overrides) > 0 {
		var ov taskOverride
		if e := decode(in.Overrides, &ov); e != nil {
			return nil, e
		}
		for _, c := range ov.ContainerOverrides {
			if !slices.ContainsFunc(def.in.parsed, func(d containerDefinition) bool { return d.Name == c.Name }) {
				return nil, clientErr("InvalidParameterException", "Override for container named %s is not a container in the TaskDefinition.", c.Name)
			}
		}
	}
	// Capacity: the subnet (one is chosen, the first) may have none.
	subnetID := vpcCfg.Subnets[0]
	for i, f := range s.runFaults {
		if (f.Subnet == "" || f.Subnet == subnetID) && (f.CapacityProvider == "" || f.CapacityProvider == capProvider) {
			if f.Times > 0 {
				f.Times--
				if f.Times == 0 {
					s.runFaults = slices.Delete(s.runFaults, i, i+1)
				}
			}
			fail := map[string]any{"reason": f.Reason}
			if f.Detail != "" {
				fail["detail"] = f.Detail
			}
			return map[string]any{"tasks": []any{}, "failures": []any{fail}}, nil
		}
	}
	t := s.newTask(cluster, def, in, capProvider, subnetID)
	if in.ClientToken != "" {
		s.tokens[in.ClientToken] = t.arn
	}
	return map[string]any{"tasks": []any{t.wire(true)}, "failures": []any{}}, nil
}

func clusterName(ref string) string {
	if ref == "" {
		return "default"
	}
	if i := strings.Index(ref, ":cluster/"); i >= 0 {
		return ref[i+len(":cluster/"):]
	}
	return ref
}

func (s *Server) newTask(cluster string, def *taskDef, in runTaskInput, capProvider, subnetID string) *task {
	id := randomHex(32)
	s.ipSeq++
	t := &task{
		arn:          fmt.Sprintf("arn:aws:ecs:%s:%s:task/%s/%s", s.Region, s.Account, cluster, id),
		containerArn: fmt.Sprintf("arn:aws:ecs:%s:%s:container/%s/%s/%s", s.Region, s.Account, cluster, id, randomHex(36)),
		id:           id,
		cluster:      cluster, def: def,
		startedBy: in.StartedBy, group: in.Group,
		capacityProvider: capProvider,
		lastStatus:       "PROVISIONING", desiredStatus: "RUNNING",
		subnet:            subnetID,
		securityGroups:    in.NetworkConfiguration.AwsvpcConfiguration.SecurityGroups,
		assignPublicIP:    in.NetworkConfiguration.AwsvpcConfiguration.AssignPublicIP,
		ip:                taskIP(s.subnets[subnetID].cidr, s.ipSeq),
		az:                s.subnets[subnetID].az,
		tags:              in.Tags,
		overrides:         in.Overrides,
		createdAt:         s.now(),
		cpu:               def.in.CPU,
		memory:            def.in.Memory,
		enableManagedTags: in.EnableECSManagedTags,
		propagateTags:     in.PropagateTags,
		listed:            s.listLag == 0,
		unknown:           s.describeLag,
	}
	if t.group == "" {
		t.group = "family:" + def.family
	}
	// The execution role fetches the container secrets when the task starts:
	// a secret that does not exist fails the start, as on ECS.
	for _, c := range def.in.parsed {
		for _, sec := range c.Secrets {
			if s.secretByRef(sec.ValueFrom) == nil {
				t.failStart = fmt.Sprintf("ResourceInitializationError: unable to pull secrets or registry auth: retrieve secret from %s: ResourceNotFoundException: Secrets Manager can't find the specified secret.", sec.ValueFrom)
			}
		}
	}
	s.tasks[t.arn] = t
	s.taskOrder = append(s.taskOrder, t.arn)
	return t
}

// taskIP is the nth task's private address, from its subnet's range as
// an awsvpc interface's is (250 to a /24, the first two left out: AWS keeps
// the first addresses of a subnet).
func taskIP(cidr string, n int) string {
	p, err := netip.ParsePrefix(cidr)
	if err != nil || !p.Addr().Is4() {
		return fmt.Sprintf("10.1.%d.%d", n/250, n%250+2)
	}
	a := p.Masked().Addr().As4()
	v := binary.BigEndian.Uint32(a[:]) + uint32(n/250)*256 + uint32(n%250+2)
	binary.BigEndian.PutUint32(a[:], v)
	return netip.AddrFrom4(a).String()
}

func (s *Server) listTasks(body []byte) (any, *apiError) {
	var in struct {
		Cluster           string `json:"cluster"`
		StartedBy         string `json:"startedBy"`
		DesiredStatus     string `json:"desiredStatus"`
		Family            string `json:"family"`
		ServiceName       string `json:"serviceName"`
		ContainerInstance string `json:"containerInstance"`
		LaunchType        string `json:"launchType"`
		NextToken         string `json:"nextToken"`
		MaxResults        int    `json:"maxResults"`
	}
	if e := decode(body, &in); e != nil {
		return nil, e
	}
	cluster := clusterName(in.Cluster)
	if !s.clusters[cluster] {
		return nil, clientErr("ClusterNotFoundException", "Cluster not found.")
	}
	if in.StartedBy != "" && (in.Family != "" || in.ServiceName != "" || in.ContainerInstance != "" || in.LaunchType != "") {
		return nil, clientErr("InvalidParameterException", "startedBy must be the only filter besides desiredStatus")
	}
	if in.DesiredStatus == "" {
		in.DesiredStatus = "RUNNING"
	}
	lagging := false
	if in.NextToken == "" && s.listLag > 0 {
		s.listLag--
		lagging = true
	}
	var arns []string
	for _, arn := range s.taskOrder {
		t := s.tasks[arn]
		if t.cluster != cluster || t.desiredStatus != in.DesiredStatus {
			continue
		}
		if in.StartedBy != "" && t.startedBy != in.StartedBy {
			continue
		}
		if in.Family != "" && t.def.family != in.Family {
			continue
		}
		if lagging && !t.listed || s.expired(t) {
			continue
		}
		arns = append(arns, arn)
	}
	if !lagging && s.listLag == 0 {
		for _, t := range s.tasks {
			t.listed = true
		}
	}
	page, next, err := s.paginate(arns, in.NextToken, in.MaxResults)
	if err != nil {
		return nil, err
	}
	out := map[string]any{"taskArns": page}
	if next != "" {
		out["nextToken"] = next
	}
	return out, nil
}

func (s *Server) findTask(cluster, ref string) *task {
	if t, ok := s.tasks[ref]; ok && t.cluster == cluster {
		return t
	}
	for _, t := range s.tasks {
		if t.id == ref && t.cluster == cluster {
			return t
		}
	}
	return nil
}

func (s *Server) describeTasks(body []byte) (any, *apiError) {
	var in struct {
		Cluster string   `json:"cluster"`
		Tasks   []string `json:"tasks"`
		Include []string `json:"include"`
	}
	if e := decode(body, &in); e != nil {
		return nil, e
	}
	cluster := clusterName(in.Cluster)
	if !s.clusters[cluster] {
		return nil, clientErr("ClusterNotFoundException", "Cluster not found.")
	}
	if len(in.Tasks) == 0 || len(in.Tasks) > 100 {
		return nil, clientErr("InvalidParameterException", "Tasks cannot be empty and can hold at most 100 items.")
	}
	tasks := []any{}
	failures := []any{}
	for _, ref := range in.Tasks {
		t := s.findTask(cluster, ref)
		if t != nil && t.unknown > 0 {
			t.unknown--
			t = nil
		}
		if t == nil || s.expired(t) {
			failures = append(failures, map[string]any{"arn": ref, "reason": "MISSING"})
			continue
		}
		if s.autoAdvance {
			s.step(t)
		}
		tasks = append(tasks, t.wire(slices.Contains(in.Include, "TAGS")))
	}
	return map[string]any{"tasks": tasks, "failures": failures}, nil
}

// expired reports whether a STOPPED task is no longer reported.
func (s *Server) expired(t *task) bool {
	return t.lastStatus == "STOPPED" && !t.stoppedAt.IsZero() && !s.now().Before(t.stoppedAt.Add(s.stoppedKept))
}

// holdsGroups reports whether a task's interface still holds its security
// groups: until it is STOPPED and then for the detach delay.
func (s *Server) holdsGroups(t *task) bool {
	return t.lastStatus != "STOPPED" || s.now().Before(t.stoppedAt.Add(s.detachDelay))
}

// step moves a task one status along its lifecycle.
func (s *Server) step(t *task) {
	now := s.now()
	switch t.lastStatus {
	case "PROVISIONING":
		t.lastStatus = "PENDING"
	case "PENDING":
		if t.failStart != "" {
			t.desiredStatus, t.lastStatus = "STOPPED", "STOPPED"
			t.stopCode, t.stoppedReason = "TaskFailedToStart", t.failStart
			t.stoppingAt, t.stoppedAt = now, now
			return
		}
		t.lastStatus = "ACTIVATING"
	case "ACTIVATING":
		t.lastStatus, t.startedAt = "RUNNING", now
	case "DEACTIVATING":
		t.lastStatus = "STOPPING"
	case "STOPPING":
		t.lastStatus = "DEPROVISIONING"
		if t.exitCode == nil {
			code := 0
			t.exitCode = &code
		}
	case "DEPROVISIONING":
		t.lastStatus, t.stoppedAt = "STOPPED", now
	}
}

func (s *Server) stopTask(body []byte) (any, *apiError) {
	var in struct {
		Cluster string `json:"cluster"`
		Task    string `json:"task"`
		Reason  string `json:"reason"`
	}
	if e := decode(body, &in); e != nil {
		return nil, e
	}
	cluster := clusterName(in.Cluster)
	if !s.clusters[cluster] {
		return nil, clientErr("ClusterNotFoundException", "Cluster not found.")
	}
	t := s.findTask(cluster, in.Task)
	if t != nil && t.unknown > 0 {
		t.unknown--
		t = nil
	}
	if t == nil {
		return nil, clientErr("InvalidParameterException", "The referenced task was not found.")
	}
	if len(in.Reason) > 255 {
		return nil, clientErr("InvalidParameterException", "reason must be at most 255 characters")
	}
	if t.desiredStatus != "STOPPED" {
		reason := in.Reason
		if reason == "" {
			reason = "Task stopped by user"
		}
		s.beginStop(t, "UserInitiated", reason)
	}
	return map[string]any{"task": t.wire(false)}, nil
}

func (s *Server) beginStop(t *task, code, reason string) {
	t.desiredStatus, t.stopCode, t.stoppedReason, t.stoppingAt = "STOPPED", code, reason, s.now()
	switch t.lastStatus {
	case "PROVISIONING", "PENDING":
		t.lastStatus = "DEPROVISIONING"
	case "ACTIVATING", "RUNNING":
		t.lastStatus = "DEACTIVATING"
	}
}

// ---- test controls and views of tasks ----

// Task is a snapshot of one task.
type Task struct {
	ARN, Cluster, TaskDefinitionARN, Family string
	StartedBy, CapacityProvider             string
	LastStatus, DesiredStatus               string
	StopCode, StoppedReason                 string
	Subnet, AssignPublicIP, PrivateIP       string
	SecurityGroups                          []string
	Tags                                    map[string]string
	EnableECSManagedTags                    bool
	PropagateTags                           string
	Command                                 []string          // the container override's command
	Environment                             map[string]string // the container override's environment
	Overrides                               json.RawMessage
	CPU, Memory                             string
}

// Tasks returns every task the fake knows, oldest first.
func (s *Server) Tasks() []Task {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Task, 0, len(s.taskOrder))
	for _, arn := range s.taskOrder {
		t := s.tasks[arn]
		tags := map[string]string{}
		for _, tg := range t.tags {
			tags[tg.Key] = tg.Value
		}
		var ov taskOverride
		_ = json.Unmarshal(t.overrides, &ov)
		var cmd []string
		env := map[string]string{}
		if len(ov.ContainerOverrides) > 0 {
			cmd = ov.ContainerOverrides[0].Command
			for _, kv := range ov.ContainerOverrides[0].Environment {
				env[kv.Name] = kv.Value
			}
		}
		out = append(out, Task{
			ARN: t.arn, Cluster: t.cluster, TaskDefinitionARN: t.def.arn, Family: t.def.family,
			StartedBy: t.startedBy, CapacityProvider: t.capacityProvider,
			LastStatus: t.lastStatus, DesiredStatus: t.desiredStatus,
			StopCode: t.stopCode, StoppedReason: t.stoppedReason,
			Subnet: t.subnet, AssignPublicIP: t.assignPublicIP, PrivateIP: t.ip,
			SecurityGroups: slices.Clone(t.securityGroups), Tags: tags,
			EnableECSManagedTags: t.enableManagedTags, PropagateTags: t.propagateTags,
			Command: cmd, Environment: env, Overrides: slices.Clone(t.overrides), CPU: t.cpu, Memory: t.memory,
		})
	}
	return out
}

// TaskOf returns the newest task tagged with the cluster and member.
func (s *Server) TaskOf(cluster, member string) (Task, bool) {
	ts := s.Tasks()
	for i := len(ts) - 1; i >= 0; i-- {
		if ts[i].Tags["gateway-cluster"] == cluster && ts[i].Tags["gateway-member"] == member {
			return ts[i], true
		}
	}
	return Task{}, false
}

func (s *Server) withTask(arn string, f func(t *task)) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	t, ok := s.tasks[arn]
	if !ok {
		return fmt.Errorf("fargatetest: no task %s", arn)
	}
	f(t)
	return nil
}

// Advance moves a task n steps along its lifecycle.
func (s *Server) Advance(arn string, n int) error {
	return s.withTask(arn, func(t *task) {
		for range n {
			s.step(t)
		}
	})
}

// InterruptSpot reclaims a FARGATE_SPOT task as AWS does: stop code
// SpotInterruption; the task then stops like any other.
func (s *Server) InterruptSpot(arn string) error {
	var err error
	werr := s.withTask(arn, func(t *task) {
		if t.capacityProvider != "FARGATE_SPOT" {
			err = fmt.Errorf("fargatetest: task %s runs on %s, not FARGATE_SPOT", arn, t.capacityProvider)
			return
		}
		s.beginStop(t, "SpotInterruption", "Your Spot Task was interrupted.")
	})
	if werr != nil {
		return werr
	}
	return err
}

// Untag removes a tag from a task, as ecs:UntagResource would (a task
// someone retagged by hand). ECS copies propagated tags onto the task
// when it starts, so they are the task's own from then on: the fake,
// which merges them when it answers, makes them the task's here.
func (s *Server) Untag(arn, key string) error {
	return s.withTask(arn, func(t *task) {
		if t.propagateTags == "TASK_DEFINITION" {
			t.tags, t.propagateTags = mergeTags(t.def.tags, t.tags), ""
		}
		t.tags = slices.DeleteFunc(t.tags, func(tg ecsTag) bool { return tg.Key == key })
	})
}

// Exit ends a task as its essential container exiting with code does.
func (s *Server) Exit(arn string, code int, reason string) error {
	return s.withTask(arn, func(t *task) {
		c := code
		t.exitCode, t.containerReason = &c, reason
		s.beginStop(t, "EssentialContainerExited", "Essential container in task exited")
	})
}

// TaskDefinition is a snapshot of one registered revision.
type TaskDefinition struct {
	ARN, Family, Status string
	Revision            int
	CPU, Memory         string
	ExecutionRoleARN    string
	TaskRoleARN         string
	NetworkMode         string
	Compatibilities     []string
	Containers          []ContainerDefinition
	Tags                map[string]string
	Raw                 json.RawMessage // the RegisterTaskDefinition request
}

// ContainerDefinition is the part of a container definition tests look at.
type ContainerDefinition struct {
	Name, Image         string
	EntryPoint, Command []string
	Environment         map[string]string
	Secrets             map[string]string // name -> valueFrom
	Ports               []int
	LogDriver           string
	LogOptions          map[string]string
}

// TaskDefinitions returns every revision registered, in order.
func (s *Server) TaskDefinitions() []TaskDefinition {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []TaskDefinition
	for _, f := range sortedKeys(s.families) {
		for _, d := range s.families[f] {
			td := TaskDefinition{
				ARN: d.arn, Family: d.family, Status: d.status, Revision: d.revision,
				CPU: d.in.CPU, Memory: d.in.Memory, ExecutionRoleARN: d.in.ExecutionRoleArn, TaskRoleARN: d.in.TaskRoleArn,
				NetworkMode: d.in.NetworkMode, Compatibilities: d.in.RequiresCompatibilities,
				Tags: map[string]string{},
			}
			td.Raw, _ = json.Marshal(d.in)
			for _, t := range d.tags {
				td.Tags[t.Key] = t.Value
			}
			for _, c := range d.in.parsed {
				cd := ContainerDefinition{Name: c.Name, Image: c.Image, EntryPoint: c.EntryPoint, Command: c.Command,
					Environment: map[string]string{}, Secrets: map[string]string{}}
				for _, e := range c.Environment {
					cd.Environment[e.Name] = e.Value
				}
				for _, sec := range c.Secrets {
					cd.Secrets[sec.Name] = sec.ValueFrom
				}
				for _, p := range c.PortMappings {
					if p.ContainerPort != nil {
						cd.Ports = append(cd.Ports, *p.ContainerPort)
					}
				}
				if c.LogConfiguration != nil {
					cd.LogDriver, cd.LogOptions = c.LogConfiguration.LogDriver, c.LogConfiguration.Options
				}
				td.Containers = append(td.Containers, cd)
			}
			out = append(out, td)
		}
	}
	return out
}

// Forget drops a task, as ECS does some time after it stopped.
func (s *Server) Forget(arn string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.tasks, arn)
	s.taskOrder = slices.DeleteFunc(s.taskOrder, func(a string) bool { return a == arn })
}
