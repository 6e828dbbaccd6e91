package ec2test

import (
	"bytes"
	"encoding/xml"
	"fmt"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
)

// ec2Namespace is the XML namespace of every EC2 answer.
const ec2Namespace = "http://ec2.amazonaws.com/doc/2016-11-15/"

// apiError is an error answer: an AWS error code, its message and the HTTP
// status EC2 (or SSM) sends it with.
type apiError struct {
	code, message string
	status        int
}

func (e *apiError) Error() string { return e.code + ": " + e.message }

func errorf(code, format string, args ...any) *apiError {
	return &apiError{code: code, message: fmt.Sprintf(format, args...), status: statusOf(code)}
}

// statusOf is the HTTP status EC2 answers an error code with: its server
// errors (capacity, throttling, internal) come with 5xx, client errors with
// 4xx.
func statusOf(code string) int {
	switch code {
	case "RequestLimitExceeded", "Unavailable", "ServiceUnavailable", "Throttling", "ThrottlingException":
		return http.StatusServiceUnavailable
	case "InternalError", "InternalFailure", "InsufficientInstanceCapacity", "InsufficientCapacity",
		"InsufficientAddressCapacity", "InsufficientHostCapacity", "InsufficientReservedInstanceCapacity":
		return http.StatusInternalServerError
	case "UnauthorizedOperation", "AccessDeniedException":
		return http.StatusForbidden
	case "AuthFailure":
		return http.StatusUnauthorized
	}
	return http.StatusBadRequest
}

// writeEC2Error writes an error in the EC2 Query protocol's shape.
func writeEC2Error(w http.ResponseWriter, e *apiError, requestID string) {
	var b bytes.Buffer
	b.WriteString(xml.Header)
	b.WriteString("<Response><Errors><Error><Code>")
	_ = xml.EscapeText(&b, []byte(e.code))
	b.WriteString("</Code><Message>")
	_ = xml.EscapeText(&b, []byte(e.message))
	b.WriteString("</Message></Error></Errors><RequestID>")
	_ = xml.EscapeText(&b, []byte(requestID))
	b.WriteString("</RequestID></Response>")
	w.Header().Set("Content-Type", "text/xml;charset=UTF-8")
	w.WriteHeader(e.status)
	_, _ = w.Write(b.Bytes())
}

// writeEC2 writes a successful answer: <ActionResponse xmlns=...> with the
// requestId and the children of body.
func writeEC2(w http.ResponseWriter, action, requestID string, body any) error {
	inner, err := xml.Marshal(body)
	if err != nil {
		return err
	}
	// Keep only the children of body's own root element.
	if i := bytes.IndexByte(inner, '>'); i >= 0 && !bytes.HasSuffix(inner[:i+1], []byte("/>")) {
		inner = inner[i+1 : bytes.LastIndex(inner, []byte("</"))]
	} else {
		inner = nil
	}
	var b bytes.Buffer
	b.WriteString(xml.Header)
	fmt.Fprintf(&b, "<%sResponse xmlns=%q><requestId>%s</requestId>", action, ec2Namespace, requestID)
	b.Write(inner)
	fmt.Fprintf(&b, "</%sResponse>", action)
	w.Header().Set("Content-Type", "text/xml;charset=UTF-8")
	_, err = w.Write(b.Bytes())
	return err
}

// sub returns the parameters under prefix ("IpPermissions.1"), with the
// prefix and its dot removed.
func sub(v url.Values, prefix string) url.Values {
	out := url.Values{}
	p := prefix + "."
	for k, vals := range v {
		if strings.HasPrefix(k, p) {
			out[k[len(p):]] = vals
		}
	}
	return out
}

// members returns the numbered structures of a flattened list
// (Filter.1.Name, Filter.2.Name, ...), in order.
func members(v url.Values, prefix string) []url.Values {
	idx := map[int]bool{}
	p := prefix + "."
	for k := range v {
		if !strings.HasPrefix(k, p) {
			continue
		}
		n, _, _ := strings.Cut(k[len(p):], ".")
		if i, err := strconv.Atoi(n); err == nil {
			idx[i] = true
		}
	}
	keys := make([]int, 0, len(idx))
	for i := range idx {
		keys = append(keys, i)
	}
	sort.Ints(keys)
	out := make([]url.Values, 0, len(keys))
	for _, i := range keys {
		out = append(out, sub(v, fmt.Sprintf("%s.%d", prefix, i)))
	}
	return out
}

// list returns the values of a flattened list of strings (InstanceId.1,
// InstanceId.2, ...), in order.
func list(v url.Values, prefix string) []string {
	idx := map[int]string{}
	p := prefix + "."
	for k, vals := range v {
		if !strings.HasPrefix(k, p) || len(vals) == 0 {
			continue
		}
		if i, err := strconv.Atoi(k[len(p):]); err == nil {
			idx[i] = vals[0]
		}
	}
	keys := make([]int, 0, len(idx))
	for i := range idx {
		keys = append(keys, i)
	}
	sort.Ints(keys)
	out := make([]string, 0, len(keys))
	for _, i := range keys {
		out = append(out, idx[i])
	}
	return out
}

// filterSet is the Filter.N.Name / Filter.N.Value.M parameters of a
// Describe call.
type filterSet map[string][]string

func parseFilters(v url.Values) filterSet {
	f := filterSet{}
	for _, m := range members(v, "Filter") {
		name := m.Get("Name")
		f[name] = append(f[name], list(m, "Value")...)
	}
	return f
}

// withoutFilters is v without the Filter.N parameters whose name is in
// ignored (v itself when none is).
func withoutFilters(v url.Values, ignored map[string]bool) url.Values {
	if len(ignored) == 0 {
		return v
	}
	out := url.Values{}
	drop := map[string]bool{}
	for k, vals := range v {
		if n, rest, ok := strings.Cut(strings.TrimPrefix(k, "Filter."), "."); strings.HasPrefix(k, "Filter.") && ok && rest == "Name" && ignored[vals[0]] {
			drop["Filter."+n+"."] = true
		}
	}
	for k, vals := range v {
		n, _, _ := strings.Cut(strings.TrimPrefix(k, "Filter."), ".")
		if !strings.HasPrefix(k, "Filter.") || !drop["Filter."+n+"."] {
			out[k] = vals
		}
	}
	return out
}

// check rejects filter names the fake does not implement, as EC2 rejects
// names it does not know, so that a typo in the provider shows up.
func (f filterSet) check(known ...string) *apiError {
	for name := range f {
		if strings.HasPrefix(name, "tag:") {
			continue
		}
		ok := false
		for _, k := range known {
			ok = ok || k == name
		}
		if !ok {
			return errorf("InvalidParameterValue", "The filter '%s' is invalid", name)
		}
	}
	return nil
}

// match reports whether a resource passes every filter: for each name,
// one of its values must match (values may use * and ? wildcards).
func (f filterSet) match(get func(name string) []string) bool {
	for name, want := range f {
		have := get(name)
		ok := false
		for _, w := range want {
			for _, h := range have {
				if wildcard(w, h) {
					ok = true
				}
			}
		}
		if !ok {
			return false
		}
	}
	return true
}

// wildcard matches EC2 filter patterns: * any run, ? any one character.
func wildcard(pattern, s string) bool {
	if pattern == "" {
		return s == ""
	}
	switch pattern[0] {
	case '*':
		for i := 0; i <= len(s); i++ {
			if wildcard(pattern[1:], s[i:]) {
				return true
			}
		}
		return false
	case '?':
		return s != "" && wildcard(pattern[1:], s[1:])
	}
	return s != "" && s[0] == pattern[0] && wildcard(pattern[1:], s[1:])
}

// page cuts items to one page of at most size, from the position a
// NextToken names; it returns the next token, "" on the last page.
func page[T any](items []T, token string, size int) ([]T, string, *apiError) {
	start := 0
	if token != "" {
		n, err := strconv.Atoi(strings.TrimPrefix(token, "page-"))
		if err != nil || !strings.HasPrefix(token, "page-") || n < 0 || n > len(items) {
			return nil, "", errorf("InvalidParameterValue", "Invalid NextToken %q", token)
		}
		start = n
	}
	end := len(items)
	if size > 0 && start+size < end {
		end = start + size
	}
	next := ""
	if end < len(items) {
		next = fmt.Sprintf("page-%d", end)
	}
	return items[start:end], next, nil
}
