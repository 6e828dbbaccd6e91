package ec2test

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// Parameter is the SSM fake's record of one parameter.
type Parameter struct {
	Name, Type, Value, Tier, KeyID, Description string
	Version                                     int64
	Tags                                        map[string]string
	Modified                                    time.Time // LastModifiedDate: each put
}

// SSM is a fake SSM endpoint (JSON 1.1: POST / with X-Amz-Target
// AmazonSSM.<Action>).
type SSM struct {
	URL string

	srv      *httptest.Server
	mu       sync.Mutex
	region   string
	params   map[string]*Parameter
	faults   []*Fault
	injected map[string]int
	requests []Request
	seq      int
	ignored  map[string]bool // filter keys DescribeParameters leaves out (IgnoreFilter)
}

// NewSSM starts a fake SSM endpoint for region, closed when the test ends.
// It holds the public AMI parameters the ec2 provider reads by default,
// naming the images of DefaultImages.
func NewSSM(t testing.TB, region string) *SSM {
	s := &SSM{region: region, params: map[string]*Parameter{}, injected: map[string]int{}}
	im := DefaultImages()
	s.Set("/aws/service/ecs/optimized-ami/amazon-linux-2023/recommended/image_id", im[0].ID)
	s.Set("/aws/service/ecs/optimized-ami/amazon-linux-2023/arm64/recommended/image_id", im[1].ID)
	s.Set("/aws/service/ecs/optimized-ami/amazon-linux-2023/gpu/recommended/image_id", im[2].ID)
	s.srv = httptest.NewServer(http.HandlerFunc(s.serve))
	s.URL = s.srv.URL
	t.Cleanup(s.srv.Close)
	return s
}

// Set seeds a plain String parameter (a public one, say).
func (s *SSM) Set(name, value string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.params[name] = &Parameter{Name: name, Type: "String", Value: value, Tier: "Standard", Version: 1, Tags: map[string]string{}, Modified: time.Now()}
}

// Delete removes a parameter.
func (s *SSM) Delete(name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.params, name)
}

// Parameter returns a copy of a parameter.
func (s *SSM) Parameter(name string) (Parameter, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p, ok := s.params[name]
	if !ok {
		return Parameter{}, false
	}
	c := *p
	c.Tags = cloneMap(p.Tags)
	return c, true
}

// Fail adds a fault (Action is the operation name, e.g. "PutParameter").
func (s *SSM) Fail(f Fault) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if f.Times == 0 {
		f.Times = 1
	}
	s.faults = append(s.faults, &f)
}

// Throttle makes the next n calls, whatever their action, answer as a
// throttled account does: 400 ThrottlingException ("Rate exceeded").
func (s *SSM) Throttle(n int) {
	s.Fail(Fault{Action: "*", Code: "ThrottlingException", Message: "Rate exceeded", Times: n})
}

// LoseAnswers makes the next n calls of action take effect and then lose
// their answer: with code "" the connection is closed where the answer
// should be, else the client gets code (InternalServerError: 500).
func (s *SSM) LoseAnswers(action string, n int, code string) {
	s.Fail(Fault{Action: action, Code: code, Times: n, After: true})
}

// Injected reports how many answers the injected faults made with code
// ("" counts connections closed without an answer).
func (s *SSM) Injected(code string) int { s.mu.Lock(); defer s.mu.Unlock(); return s.injected[code] }

// Requests returns the calls received, of one action ("" for all).
func (s *SSM) Requests(action string) []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Request
	for _, r := range s.requests {
		if action == "" || r.Action == action {
			out = append(out, r)
		}
	}
	return out
}

func (s *SSM) serve(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	s.seq++
	requestID := fmt.Sprintf("11111111-0000-4000-8000-%012d", s.seq)
	s.mu.Unlock()
	w.Header().Set("X-Amzn-RequestId", requestID)
	action, ok := strings.CutPrefix(r.Header.Get("X-Amz-Target"), "AmazonSSM.")
	if r.Method != http.MethodPost || !ok || r.Header.Get("Content-Type") != "application/x-amz-json-1.1" {
		writeSSMError(w, &apiError{"UnknownOperationException", "expected POST with X-Amz-Target AmazonSSM.* and Content-Type application/x-amz-json-1.1", http.StatusBadRequest})
		return
	}
	body, _ := io.ReadAll(r.Body)
	var in map[string]any
	if err := json.Unmarshal(body, &in); err != nil {
		writeSSMError(w, &apiError{"SerializationException", err.Error(), http.StatusBadRequest})
		return
	}
	key, region, service, aerr := parseAuth(r)
	params := url.Values{}
	for k, v := range in {
		params.Set(k, fmt.Sprint(v))
	}
	s.mu.Lock()
	s.requests = append(s.requests, Request{Action: action, Params: params, Body: string(body), AccessKey: key, Region: region, Service: service})
	s.mu.Unlock()
	switch {
	case aerr != nil:
		writeSSMError(w, &apiError{"UnrecognizedClientException", aerr.message, http.StatusBadRequest})
		return
	case service != "ssm" || (s.region != "" && region != s.region):
		writeSSMError(w, &apiError{"InvalidSignatureException", fmt.Sprintf("credential scope %s/%s does not match ssm in %s", region, service, s.region), http.StatusBadRequest})
		return
	}
	if e := s.fault(action, false); e != nil {
		writeSSMError(w, e)
		return
	}
	s.mu.Lock()
	out, err := s.handle(action, body)
	s.mu.Unlock()
	if err == nil {
		if e := s.fault(action, true); e != nil {
			if e.code == "" {
				hangUp(w)
				return
			}
			err = e
		}
	}
	if err != nil {
		writeSSMError(w, err)
		return
	}
	w.Header().Set("Content-Type", "application/x-amz-json-1.1")
	_ = json.NewEncoder(w).Encode(out)
}

func (s *SSM) fault(action string, after bool) *apiError {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, f := range s.faults {
		if f.Action != action && f.Action != "*" || f.After != after {
			continue
		}
		s.injected[f.Code]++
		if f.Code == "" {
			if f.Times > 0 {
				f.Times--
				if f.Times == 0 {
					s.faults = slices.Delete(s.faults, i, i+1)
				}
			}
			return &apiError{} // hang up
		}
		if f.Times > 0 {
			f.Times--
			if f.Times == 0 {
				s.faults = slices.Delete(s.faults, i, i+1)
			}
		}
		status := f.Status
		if status == 0 {
			status = http.StatusBadRequest
			if f.Code == "InternalServerError" {
				status = http.StatusInternalServerError
			}
		}
		return &apiError{f.Code, orDefault(f.Message, f.Code), status}
	}
	return nil
}

// writeSSMError writes an error as the JSON protocols do: the code in
// __type and in the X-Amzn-ErrorType header.
func writeSSMError(w http.ResponseWriter, e *apiError) {
	w.Header().Set("Content-Type", "application/x-amz-json-1.1")
	w.Header().Set("X-Amzn-ErrorType", e.code)
	w.WriteHeader(e.status)
	_ = json.NewEncoder(w).Encode(map[string]string{"__type": "com.amazonaws.ssm#" + e.code, "message": e.message})
}

// ssmTagOK is SSM's pattern for tag keys and values.
var ssmTagOK = regexp.MustCompile(`^[\p{L}\p{Z}\p{N}_.:/=+\-@]+$`)

type ssmTag struct {
	Key, Value string
}

// IgnoreFilter is EC2.IgnoreFilter for DescribeParameters: its
// ParameterFilters with this key (such as "tag:gateway-id") are taken as
// not sent.
func (s *SSM) IgnoreFilter(key string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ignored == nil {
		s.ignored = map[string]bool{}
	}
	s.ignored[key] = true
}

func (s *SSM) handle(action string, body []byte) (any, *apiError) {
	switch action {
	case "DescribeParameters":
		return s.describeParameters(body)
	case "GetParameter":
		var in struct {
			Name           string
			WithDecryption bool
		}
		if err := json.Unmarshal(body, &in); err != nil || in.Name == "" {
			return nil, &apiError{"ValidationException", "Name is required", http.StatusBadRequest}
		}
		p, ok := s.params[in.Name]
		if !ok {
			return nil, &apiError{"ParameterNotFound", "", http.StatusBadRequest}
		}
		value := p.Value
		if p.Type == "SecureString" && !in.WithDecryption {
			// What SSM returns without decryption: the ciphertext.
			value = "AQICAH" + base64.StdEncoding.EncodeToString([]byte(p.Value))
		}
		return map[string]any{"Parameter": map[string]any{
			"Name": p.Name, "Type": p.Type, "Value": value, "Version": p.Version, "DataType": "text",
			"ARN":              fmt.Sprintf("arn:aws:ssm:%s:%s:parameter/%s", s.region, AccountID, strings.TrimPrefix(p.Name, "/")),
			"LastModifiedDate": float64(time.Now().Unix()),
		}}, nil
	case "PutParameter":
		var in struct {
			Name, Value, Type, Tier, KeyId, Description string
			Overwrite                                   bool
			Tags                                        []ssmTag
		}
		if err := json.Unmarshal(body, &in); err != nil || in.Name == "" || in.Value == "" {
			return nil, &apiError{"ValidationException", "Name and Value are required", http.StatusBadRequest}
		}
		if in.Overwrite && len(in.Tags) > 0 {
			return nil, &apiError{"ValidationException", "Invalid request: tags and overwrite can't be used together. To create a parameter with tags, please remove overwrite flag. To update tags for an existing parameter, please use AddTagsToResource or RemoveTagsFromResource.", http.StatusBadRequest}
		}
		for _, t := range in.Tags {
			if !ssmTagOK.MatchString(t.Key) || !ssmTagOK.MatchString(t.Value) && t.Value != "" {
				return nil, &apiError{"ValidationException", fmt.Sprintf("1 validation error detected: Value '%s' at 'tags.1.member.value' failed to satisfy constraint: Member must satisfy regular expression pattern: ^([\\p{L}\\p{Z}\\p{N}_.:/=+\\-@]*)$", t.Value), http.StatusBadRequest}
			}
		}
		limit := 4096
		if in.Tier == "Advanced" {
			limit = 8192
		}
		if len(in.Value) > limit {
			return nil, &apiError{"ValidationException", fmt.Sprintf("Parameter value exceeds %d characters for the %s tier", limit, orDefault(in.Tier, "Standard")), http.StatusBadRequest}
		}
		p, exists := s.params[in.Name]
		switch {
		case exists && !in.Overwrite:
			return nil, &apiError{"ParameterAlreadyExists", "The parameter already exists. To overwrite this value, set the overwrite option in the request to true.", http.StatusBadRequest}
		case !exists && in.Type == "":
			return nil, &apiError{"ValidationException", "A parameter type is required when you create a parameter.", http.StatusBadRequest}
		case !exists:
			p = &Parameter{Name: in.Name, Tags: map[string]string{}}
			s.params[in.Name] = p
		}
		p.Value, p.Description = in.Value, in.Description
		p.Type = orDefault(in.Type, p.Type)
		p.Tier = orDefault(in.Tier, orDefault(p.Tier, "Standard"))
		p.KeyID = in.KeyId
		if p.Type == "SecureString" && p.KeyID == "" {
			p.KeyID = "alias/aws/ssm"
		}
		for _, t := range in.Tags {
			p.Tags[t.Key] = t.Value
		}
		p.Version++
		p.Modified = time.Now()
		return map[string]any{"Version": p.Version, "Tier": p.Tier}, nil
	case "DeleteParameter":
		var in struct{ Name string }
		_ = json.Unmarshal(body, &in)
		if _, ok := s.params[in.Name]; !ok {
			return nil, &apiError{"ParameterNotFound", "", http.StatusBadRequest}
		}
		delete(s.params, in.Name)
		return map[string]any{}, nil
	}
	return nil, &apiError{"UnknownOperationException", "unknown operation " + action, http.StatusBadRequest}
}
