package quota

import (
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

// Rows lists the limits l sets, in FieldNames order, written as
// ParseText reads them, one row per GPU type.
func (l Limits) Rows() []Row {
	text := l.Text()
	var out []Row
	for _, name := range FieldNames() {
		if name == gpuTypeField {
			for _, t := range slices.Sorted(maps.Keys(l.MaxGPUsByType)) {
				out = append(out, Row{Name: gpuTypeField + "." + t, Value: l.MaxGPUsByType[t].String()})
			}
			continue
		}
		if v, ok := text[name]; ok {
			out = append(out, Row{Name: name, Value: v})
		}
	}
	return out
}

// Rows lists every limit of the effective set, those that limit nothing
// too ("unlimited", or "any" for an allow-list), with where each came
// from (Sources; "" when nothing limits it).
func (e Effective) Rows() []Row {
	text := e.Limits.Text()
	var out []Row
	for _, name := range FieldNames() {
		if name == gpuTypeField {
			types := slices.Sorted(maps.Keys(e.Limits.MaxGPUsByType))
			if len(types) == 0 {
				out = append(out, Row{Name: name, Value: KindGPUMap.UnsetValue()})
			}
			for _, t := range types {
				key := gpuTypeField + "." + t
				out = append(out, Row{Name: key, Value: e.Limits.MaxGPUsByType[t].String(), Source: e.Sources[key]})
			}
			continue
		}
		v, ok := text[name]
		if !ok {
			v = KindOf(name).UnsetValue()
		}
		out = append(out, Row{Name: name, Value: v, Source: e.Sources[name]})
	}
	return out
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
