package ec2test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
)

// SetTagged seeds a SecureString parameter with tags, as another gateway
// (or an earlier process of this one) would have put it.
func (s *SSM) SetTagged(name, value string, tags map[string]string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.params[name] = &Parameter{Name: name, Type: "SecureString", Value: value, Tier: "Standard", KeyID: "alias/aws/ssm",
		Version: 1, Tags: cloneMap(tags), Modified: time.Now()}
}

// describeParameters follows the API reference of DescribeParameters:
// metadata only (never a value); ParameterFilters are ANDed, the values
// of one filter ORed; Path takes Option OneLevel (the default: direct
// children only) or Recursive (every descendant), by whole path segments;
// Name takes Equals (the default), BeginsWith or Contains; tag:<key>
// takes Equals only and matches the tag's value exactly; MaxResults is
// 1 to 50 (default 50); pages by NextToken.
func (s *SSM) describeParameters(body []byte) (any, *apiError) {
	var in struct {
		ParameterFilters []struct {
			Key, Option string
			Values      []string
		}
		MaxResults *int
		NextToken  string
	}
	if err := json.Unmarshal(body, &in); err != nil {
		return nil, &apiError{"ValidationException", err.Error(), http.StatusBadRequest}
	}
	limit := 50
	if in.MaxResults != nil {
		if *in.MaxResults < 1 || *in.MaxResults > 50 {
			return nil, &apiError{"ValidationException", fmt.Sprintf("1 validation error detected: Value '%d' at 'maxResults' failed to satisfy constraint: Member must have value less than or equal to 50", *in.MaxResults), http.StatusBadRequest}
		}
		limit = *in.MaxResults
	}
	type test func(*Parameter) bool
	var tests []test
	for _, f := range in.ParameterFilters {
		if s.ignored[f.Key] {
			continue
		}
		if len(f.Values) == 0 {
			return nil, &apiError{"InvalidFilterValue", "The filter value must be specified.", http.StatusBadRequest}
		}
		values := f.Values
		switch key := f.Key; {
		case key == "Path":
			opt := orDefault(f.Option, "OneLevel")
			if opt != "OneLevel" && opt != "Recursive" {
				return nil, &apiError{"InvalidFilterOption", fmt.Sprintf("The filter option %q is not valid for key Path. Valid options: OneLevel, Recursive.", f.Option), http.StatusBadRequest}
			}
			for _, v := range values {
				if !strings.HasPrefix(v, "/") {
					return nil, &apiError{"InvalidFilterValue", fmt.Sprintf("The parameter path %q must begin with a forward slash (/).", v), http.StatusBadRequest}
				}
			}
			tests = append(tests, func(p *Parameter) bool {
				return slices.ContainsFunc(values, func(v string) bool {
					rest, ok := strings.CutPrefix(p.Name, strings.TrimRight(v, "/")+"/")
					return ok && rest != "" && (opt == "Recursive" || !strings.Contains(rest, "/"))
				})
			})
		case key == "Name":
			opt := orDefault(f.Option, "Equals")
			if opt != "Equals" && opt != "BeginsWith" && opt != "Contains" {
				return nil, &apiError{"InvalidFilterOption", fmt.Sprintf("The filter option %q is not valid for key Name.", f.Option), http.StatusBadRequest}
			}
			tests = append(tests, func(p *Parameter) bool {
				return slices.ContainsFunc(values, func(v string) bool {
					switch opt {
					case "BeginsWith":
						return strings.HasPrefix(p.Name, v)
					case "Contains":
						return strings.Contains(p.Name, v)
					}
					return p.Name == v
				})
			})
		case strings.HasPrefix(key, "tag:"):
			if f.Option != "" && f.Option != "Equals" {
				return nil, &apiError{"InvalidFilterOption", fmt.Sprintf("The filter option %q is not valid for tag keys. Valid option: Equals.", f.Option), http.StatusBadRequest}
			}
			k := strings.TrimPrefix(key, "tag:")
			tests = append(tests, func(p *Parameter) bool {
				v, ok := p.Tags[k]
				return ok && slices.Contains(values, v)
			})
		case key == "Type", key == "KeyId", key == "Tier", key == "DataType", key == "Label":
			return nil, &apiError{"InvalidFilterKey", fmt.Sprintf("the fake does not implement the filter key %s", key), http.StatusBadRequest}
		default:
			return nil, &apiError{"InvalidFilterKey", fmt.Sprintf("The filter key %q is not valid.", key), http.StatusBadRequest}
		}
	}
	var names []string
	for name, p := range s.params {
		if !slices.ContainsFunc(tests, func(t test) bool { return !t(p) }) {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	start := 0
	if in.NextToken != "" {
		n, err := strconv.Atoi(in.NextToken)
		if err != nil || n < 0 || n > len(names) {
			return nil, &apiError{"InvalidNextToken", "The specified token is not valid.", http.StatusBadRequest}
		}
		start = n
	}
	end := min(start+limit, len(names))
	items := []map[string]any{}
	for _, name := range names[start:end] {
		p := s.params[name]
		item := map[string]any{
			"Name": p.Name, "Type": p.Type, "Tier": p.Tier, "Version": p.Version, "DataType": "text",
			"ARN":              fmt.Sprintf("arn:aws:ssm:%s:%s:parameter/%s", s.region, AccountID, strings.TrimPrefix(p.Name, "/")),
			"LastModifiedDate": float64(p.Modified.UnixMilli()) / 1000,
		}
		if p.KeyID != "" {
			item["KeyId"] = p.KeyID
		}
		if p.Description != "" {
			item["Description"] = p.Description
		}
		items = append(items, item)
	}
	out := map[string]any{"Parameters": items}
	if end < len(names) {
		out["NextToken"] = strconv.Itoa(end)
	}
	return out, nil
}
