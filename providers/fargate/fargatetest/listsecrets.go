package fargatetest

import (
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// filterValueRE is the API reference's pattern for a filter value.
var filterValueRE = regexp.MustCompile(`^!?[a-zA-Z0-9 :_@/+=.\-!]*$`)

// listSecrets follows the Secrets Manager API reference of ListSecrets:
// Filters are ANDed, a filter's values ORed, a value starting with "!"
// negated; name and tag-key and tag-value match prefixes, case-sensitive,
// and tag-key and tag-value each match any tag on its own (a secret with
// a tag key K and another tag's value V passes tag-key=K AND tag-value=V);
// description matches a prefix, not case-sensitive; 1 to 10 values of at
// most 512 characters each; MaxResults 1 to 100; secrets scheduled for
// deletion only with IncludePlannedDeletion; pages by NextToken.
func (s *Server) listSecrets(body []byte) (any, *apiError) {
	var in struct {
		Filters []struct {
			Key    string   `json:"Key"`
			Values []string `json:"Values"`
		} `json:"Filters"`
		MaxResults             *int   `json:"MaxResults"`
		NextToken              string `json:"NextToken"`
		IncludePlannedDeletion bool   `json:"IncludePlannedDeletion"`
	}
	if e := decode(body, &in); e != nil {
		return nil, e
	}
	limit := 100
	if in.MaxResults != nil {
		if *in.MaxResults < 1 || *in.MaxResults > 100 {
			return nil, clientErr("ValidationException", "1 validation error detected: Value at 'maxResults' failed to satisfy constraint: Member must have value between 1 and 100")
		}
		limit = *in.MaxResults
	}
	type test func(*secret) bool
	var tests []test
	for _, f := range in.Filters {
		if len(f.Values) < 1 || len(f.Values) > 10 {
			return nil, clientErr("ValidationException", "a filter takes 1 to 10 values")
		}
		for _, v := range f.Values {
			if len(v) > 512 || !filterValueRE.MatchString(v) {
				return nil, clientErr("ValidationException", "Invalid filter value %q", v)
			}
		}
		var match func(sec *secret, v string) bool
		switch f.Key {
		case "name":
			match = func(sec *secret, v string) bool { return strings.HasPrefix(sec.name, v) }
		case "description":
			match = func(sec *secret, v string) bool {
				return strings.HasPrefix(strings.ToLower(sec.description), strings.ToLower(v))
			}
		case "tag-key":
			match = func(sec *secret, v string) bool {
				return slices.ContainsFunc(sec.tags, func(t smTag) bool { return strings.HasPrefix(t.Key, v) })
			}
		case "tag-value":
			match = func(sec *secret, v string) bool {
				return slices.ContainsFunc(sec.tags, func(t smTag) bool { return strings.HasPrefix(t.Value, v) })
			}
		case "primary-region", "owning-service", "all":
			return nil, clientErr("ValidationException", "the fake does not implement the filter key %s", f.Key)
		default:
			return nil, clientErr("ValidationException", "1 validation error detected: Value '%s' at 'filters.1.member.key' failed to satisfy constraint: Member must satisfy enum value set: [all, name, tag-key, description, tag-value, primary-region, owning-service]", f.Key)
		}
		values := f.Values
		tests = append(tests, func(sec *secret) bool {
			return slices.ContainsFunc(values, func(v string) bool {
				if neg, ok := strings.CutPrefix(v, "!"); ok {
					return !match(sec, neg)
				}
				return match(sec, v)
			})
		})
	}
	var names []string
	for _, name := range sortedKeys(s.secrets) {
		sec := s.secrets[name]
		if !sec.deleted.IsZero() && !in.IncludePlannedDeletion {
			continue
		}
		if !slices.ContainsFunc(tests, func(t test) bool { return !t(sec) }) {
			names = append(names, name)
		}
	}
	start := 0
	if in.NextToken != "" {
		n, err := strconv.Atoi(in.NextToken)
		if err != nil || n < 0 || n > len(names) {
			return nil, clientErr("InvalidNextTokenException", "The NextToken value is invalid.")
		}
		start = n
	}
	end := min(start+limit, len(names))
	list := []map[string]any{}
	for _, name := range names[start:end] {
		sec := s.secrets[name]
		item := map[string]any{
			"ARN": sec.arn, "Name": sec.name, "Tags": sec.tags,
			"CreatedDate": epoch(sec.created), "LastChangedDate": epoch(sec.created),
		}
		if sec.description != "" {
			item["Description"] = sec.description
		}
		if sec.kmsKeyID != "" {
			item["KmsKeyId"] = sec.kmsKeyID
		}
		if !sec.deleted.IsZero() {
			item["DeletedDate"] = epoch(sec.deleted)
		}
		list = append(list, item)
	}
	out := map[string]any{"SecretList": list}
	if end < len(names) {
		out["NextToken"] = strconv.Itoa(end)
	}
	return out, nil
}
