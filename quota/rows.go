package quota

import (
	"encoding/json"
	"maps"
	"slices"
	"strconv"
	"strings"
)

// Row is one limit as people read it: its name (a GPU type's as
// max_gpus_by_type.<type>), its value as written ("4", "2h", "unlimited",
// lists comma-separated) and, for an effective set, where it came from
// ("" when nothing sets it). The CLI's tables and the console's pages
// show these.
type Row struct {
	Name, Value, Source string
}

// Rows lists the limits l sets, in FieldNames order, one row per GPU type.
func (l Limits) Rows() []Row {
	b, _ := json.Marshal(l)
	var m map[string]json.RawMessage
	_ = json.Unmarshal(b, &m)
	var out []Row
	names := FieldNames()
	for k := range m {
		if !slices.Contains(names, k) {
			names = append(names, k) // a limit newer than the reader's list
		}
	}
	for _, name := range names {
		raw, ok := m[name]
		if !ok {
			continue
		}
		if name == gpuTypeField {
			var byType map[string]json.RawMessage
			if json.Unmarshal(raw, &byType) == nil {
				for _, t := range slices.Sorted(maps.Keys(byType)) {
					out = append(out, Row{Name: gpuTypeField + "." + t, Value: rawValue(byType[t])})
				}
				continue
			}
		}
		out = append(out, Row{Name: name, Value: rawValue(raw)})
	}
	return out
}

// Rows lists every limit of the effective set, those that limit nothing
// too ("unlimited", or "any" for an allow-list), with where each came from.
func (e Effective) Rows() []Row {
	set := map[string]string{}
	for _, r := range e.Limits.Rows() {
		set[r.Name] = r.Value
	}
	var out []Row
	for _, name := range FieldNames() {
		if name == gpuTypeField {
			types := slices.Sorted(maps.Keys(e.Limits.MaxGPUsByType))
			if len(types) == 0 {
				out = append(out, Row{Name: name, Value: Unset(name)})
			}
			for _, t := range types {
				key := gpuTypeField + "." + t
				out = append(out, Row{Name: key, Value: set[key], Source: e.Sources[key]})
			}
			continue
		}
		v, ok := set[name]
		if !ok {
			v = Unset(name)
		}
		out = append(out, Row{Name: name, Value: v, Source: e.Sources[name]})
	}
	return out
}

// Unset is how a limit that nobody sets reads: an allow-list allows
// "any", anything else is "unlimited".
func Unset(name string) string {
	if strings.HasPrefix(name, "allowed_") {
		return "any"
	}
	return "unlimited"
}

// Of says how much of a limit the live clusters hold ("", false when the
// limit is not about what runs now: budgets, lifetimes, allow-lists).
func (u InUse) Of(limit string) (string, bool) {
	num := func(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) }
	switch limit {
	case "max_clusters":
		return strconv.Itoa(u.Clusters), true
	case "max_vcpus":
		return num(u.VCPUs), true
	case "max_memory_gib":
		return num(u.MemoryGiB), true
	case "max_gpus":
		return strconv.Itoa(u.GPUs), true
	}
	if typ, ok := strings.CutPrefix(limit, gpuTypeField+"."); ok {
		return strconv.Itoa(u.GPUsByType[typ]), true
	}
	return "", false
}

// rawValue shows a JSON limit value: strings bare, lists comma-separated.
func rawValue(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var list []string
	if json.Unmarshal(raw, &list) == nil {
		return strings.Join(list, ",")
	}
	return string(raw)
}
