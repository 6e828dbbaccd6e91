package report

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/gatewayhq/gateway/store"
)

// MaxAuditLimit is the most audit entries one read returns.
const MaxAuditLimit = 10000

// AuditFilter reads the audit log's filter as the admin routes take it:
// since (a date or time), target and actor (matched exactly) and limit
// (from 1 to MaxAuditLimit; "" for the store's default).
func AuditFilter(since, target, actor, limit string) (store.AuditFilter, error) {
	f := store.AuditFilter{Target: target, Actor: actor}
	var err error
	if f.Since, err = ParseDate(since); err != nil {
		return f, fmt.Errorf("since: %w", err)
	}
	if limit != "" {
		if f.Limit, err = strconv.Atoi(limit); err != nil || f.Limit <= 0 || f.Limit > MaxAuditLimit {
			return f, fmt.Errorf("limit must be a whole number from 1 to %d", MaxAuditLimit)
		}
	}
	return f, nil
}

// compactJSON shows a JSON value on one line; null and absent show "-".
func compactJSON(raw []byte) string {
	if len(bytes.TrimSpace(raw)) == 0 || string(bytes.TrimSpace(raw)) == "null" {
		return "-"
	}
	var b bytes.Buffer
	if json.Compact(&b, raw) != nil {
		return string(raw)
	}
	return b.String()
}

// Change shows an audited change compactly: for two objects only the keys
// that differ ("max_vcpus: 8 -> 16"), otherwise before -> after.
func Change(before, after []byte) string {
	obj := func(raw []byte) (map[string]json.RawMessage, bool) {
		t := bytes.TrimSpace(raw)
		if len(t) == 0 || string(t) == "null" {
			return map[string]json.RawMessage{}, true
		}
		var m map[string]json.RawMessage
		return m, json.Unmarshal(t, &m) == nil && m != nil
	}
	b, okB := obj(before)
	a, okA := obj(after)
	if !okA || !okB {
		return compactJSON(before) + " -> " + compactJSON(after)
	}
	keys := map[string]bool{}
	for k := range b {
		keys[k] = true
	}
	for k := range a {
		keys[k] = true
	}
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(keys)) {
		x, y := compactJSON(b[k]), compactJSON(a[k])
		if x != y {
			parts = append(parts, k+": "+x+" -> "+y)
		}
	}
	if len(parts) == 0 {
		return "(no change)"
	}
	return strings.Join(parts, ", ")
}
