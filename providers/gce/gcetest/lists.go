package gcetest

import (
	"maps"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// regexFilterRE is the regular-expression form of a Compute Engine list
// filter: one un-parenthesized "field eq|ne literal", the literal bare or
// quoted.
var regexFilterRE = regexp.MustCompile(`^\s*([A-Za-z][A-Za-z0-9_.]*)\s+(eq|ne)\s+(?:"((?:[^"\\]|\\.)*)"|'([^']*)'|(\S+))\s*$`)

// listFirewalls is firewalls.list: a filter in either form the API takes
// (the comparisons parseFilter reads, or "field eq|ne literal" where the
// literal is an RE2 expression that must match the whole field), pages of
// maxResults (at most the server's page size).
func (s *Server) listFirewalls(q url.Values) (any, *apiError) {
	match, err := firewallFilter(q.Get("filter"))
	if err != nil {
		return nil, err
	}
	var items []any
	for _, name := range slices.Sorted(maps.Keys(s.firewalls)) {
		f := s.firewalls[name]
		if match(map[string]string{"name": f.Name, "description": f.Description, "network": f.Network, "direction": f.Direction}) {
			items = append(items, *f)
		}
	}
	return s.page(items, q, "compute#firewallList")
}

func firewallFilter(expr string) (func(map[string]string) bool, *apiError) {
	if m := regexFilterRE.FindStringSubmatch(expr); m != nil {
		lit := m[3] + m[4] + m[5]
		if m[3] != "" {
			if uq, err := strconv.Unquote(`"` + m[3] + `"`); err == nil {
				lit = uq
			}
		}
		re, err := regexp.Compile(`^(?:` + lit + `)$`)
		if err != nil {
			return nil, computeErr(400, "invalid", "Invalid list filter expression '%s'.", expr)
		}
		field, eq := m[1], m[2] == "eq"
		return func(fields map[string]string) bool {
			v, ok := fields[field]
			return ok && re.MatchString(v) == eq
		}, nil
	}
	if strings.Contains(expr, " eq ") || strings.Contains(expr, " ne ") {
		return nil, computeErr(400, "invalid", "Invalid list filter expression '%s'.", expr)
	}
	terms, err := parseFilter(expr)
	if err != nil {
		return nil, err
	}
	return terms.match, nil
}

// listSecrets is secrets.list: the filter takes "labels.KEY=VALUE" (exact)
// and "labels.KEY:VALUE" terms, ANDed; pageSize is 1 to 25000 (default
// 25000 here, the service's maximum); pageToken continues.
func (s *Server) listSecrets(q url.Values) (any, *apiError) {
	var terms [][3]string
	for _, t := range strings.Fields(strings.ReplaceAll(q.Get("filter"), " AND ", " ")) {
		m := regexp.MustCompile(`^(labels\.[a-z][a-z0-9_-]*)(=|:)([a-z0-9_-]*)$`).FindStringSubmatch(t)
		if m == nil {
			return nil, secretErr(400, "INVALID_ARGUMENT", "Invalid filter: %q (the fake takes labels.KEY=VALUE terms)", q.Get("filter"))
		}
		terms = append(terms, [3]string{strings.TrimPrefix(m[1], "labels."), m[2], m[3]})
	}
	size := 25000
	if v := q.Get("pageSize"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 25000 {
			return nil, secretErr(400, "INVALID_ARGUMENT", "pageSize must be between 1 and 25000")
		}
		size = n
	}
	if s.pageSize < size {
		size = s.pageSize
	}
	var ids []string
	for _, id := range slices.Sorted(maps.Keys(s.secrets)) {
		sec := s.secrets[id]
		ok := true
		for _, t := range terms {
			v, has := sec.Labels[t[0]]
			if !has || (t[1] == "=" && v != t[2]) || (t[1] == ":" && !strings.Contains(v, t[2])) {
				ok = false
			}
		}
		if ok {
			ids = append(ids, id)
		}
	}
	start := 0
	if t := q.Get("pageToken"); t != "" {
		n, err := strconv.Atoi(t)
		if err != nil || n < 0 || n > len(ids) {
			return nil, secretErr(400, "INVALID_ARGUMENT", "Invalid page token.")
		}
		start = n
	}
	end := min(start+size, len(ids))
	list := []Secret{}
	for _, id := range ids[start:end] {
		list = append(list, *s.secrets[id])
	}
	out := map[string]any{"secrets": list, "totalSize": len(ids)}
	if end < len(ids) {
		out["nextPageToken"] = strconv.Itoa(end)
	}
	return out, nil
}
