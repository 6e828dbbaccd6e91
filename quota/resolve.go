package quota

import (
	"slices"
	"sort"
	"strings"
	"time"
)

// Who is the user a decision is about.
type Who struct {
	ID     string // the stable owner id clusters are kept under
	Name   string // the user name quota entries are written for
	Groups []string
}

// Entry is what one subject has: the configuration file's limits and the
// limits stored through the admin API (which override field by field).
type Entry struct {
	Subject Subject `json:"subject"`
	// Builtin is the gateway's own defaults (BuiltinDefaults), on the
	// default subject only: the lowest layer, so that the configuration
	// file and the admin API raise or lift them field by field.
	Builtin   *Limits   `json:"builtin,omitempty"`
	Config    *Limits   `json:"config,omitempty"`
	Stored    *Limits   `json:"stored,omitempty"`
	UpdatedAt time.Time `json:"updated_at,omitzero"`
	UpdatedBy string    `json:"updated_by,omitempty"`
}

// Origins of a limit, as the API reports them.
const (
	FromBuiltin = "built-in"
	FromConfig  = "config"
	FromAPI     = "api"
)

// BuiltinSource is the source of a limit that comes from the gateway's
// built-in defaults rather than from any entry someone wrote.
const BuiltinSource = "built-in default"

// layer returns the entry's limits (stored over config over built-in) and,
// per field, where each came from.
func (e Entry) layer() (Limits, map[string]string) {
	var l Limits
	origin := map[string]string{}
	for _, src := range []struct {
		lim    *Limits
		origin string
	}{{e.Builtin, FromBuiltin}, {e.Config, FromConfig}, {e.Stored, FromAPI}} {
		if src.lim == nil {
			continue
		}
		l.Merge(src.lim)
		for _, f := range fields() {
			if f.isSet(src.lim) {
				origin[f.name] = src.origin
			}
		}
		for k := range src.lim.MaxGPUsByType {
			origin[gpuTypeField+"."+k] = src.origin
		}
	}
	return l, origin
}

// Origins says, per limit (a GPU type as max_gpus_by_type.<type>), whether
// the entry's value comes from the built-in defaults, the configuration
// file or the admin API.
func (e Entry) Origins() map[string]string {
	_, o := e.layer()
	return o
}

// Limits returns the entry's limits, stored over config over built-in.
func (e Entry) Limits() Limits {
	l, _ := e.layer()
	return l
}

// Effective is one user's resolved limits and where each came from, as
// "user:ann (api)", "group:gpu (config)", "default (config)" or
// BuiltinSource. A nil field is unlimited.
type Effective struct {
	Limits  Limits            `json:"limits"`
	Sources map[string]string `json:"sources"`
}

// Source names where a limit came from ("" when none applies).
func (e Effective) Source(field string) string { return e.Sources[field] }

type layered struct {
	subject Subject
	limits  Limits
	origin  map[string]string
}

func (l layered) source(field string) string {
	if l.origin[field] == FromBuiltin {
		return BuiltinSource
	}
	return string(l.subject) + " (" + l.origin[field] + ")"
}

// Resolve computes a user's effective limits from the entries (keyed by
// subject), following the order in the package comment.
func Resolve(entries map[Subject]Entry, who Who) Effective {
	get := func(s Subject) *layered {
		e, ok := entries[s]
		if !ok {
			return nil
		}
		l, o := e.layer()
		return &layered{subject: s, limits: l, origin: o}
	}
	// An entry for the user's stable id (user:oidc:<sub>, as whoami shows
	// it) wins over one for their name: names can change hands at some
	// identity providers, ids cannot.
	user := get(UserSubject(who.ID))
	if user == nil || who.ID == "" {
		user = get(UserSubject(who.Name))
	}
	def := get(DefaultSubject)
	groups := append([]string(nil), who.Groups...)
	sort.Strings(groups)
	groups = slices.Compact(groups)
	var gs []*layered
	for _, g := range groups {
		if l := get(GroupSubject(g)); l != nil {
			gs = append(gs, l)
		}
	}

	eff := Effective{Sources: map[string]string{}}
	for _, f := range fields() {
		switch {
		case user != nil && f.isSet(&user.limits):
			f.copy(&eff.Limits, &user.limits)
			eff.Sources[f.name] = user.source(f.name)
		case anySets(gs, f):
			var best *layered
			var names []string
			for _, g := range gs {
				if !f.isSet(&g.limits) {
					continue
				}
				names = append(names, g.source(f.name))
				if best == nil || f.moreGenerous(&g.limits, &best.limits) {
					best = g
				}
			}
			f.copy(&eff.Limits, &best.limits)
			eff.Sources[f.name] = best.source(f.name)
			if list := listOf(&eff.Limits, f.name); list != nil {
				// Allow-lists from several groups add up.
				*list = union(gs, f.name)
				eff.Sources[f.name] = strings.Join(names, ", ")
			}
		case def != nil && f.isSet(&def.limits):
			f.copy(&eff.Limits, &def.limits)
			eff.Sources[f.name] = def.source(f.name)
		}
	}

	// Each GPU type is a limit of its own.
	types := map[string]bool{}
	for _, l := range append([]*layered{user, def}, gs...) {
		if l != nil {
			for k := range l.limits.MaxGPUsByType {
				types[k] = true
			}
		}
	}
	for t := range types {
		key := gpuTypeField + "." + t
		var pick *layered
		var val Amount
		if v, ok := lookupGPU(user, t); ok {
			pick, val = user, v
		} else {
			for _, g := range gs {
				if v, ok := lookupGPU(g, t); ok && (pick == nil || v > val) {
					pick, val = g, v
				}
			}
			if pick == nil {
				if v, ok := lookupGPU(def, t); ok {
					pick, val = def, v
				}
			}
		}
		if eff.Limits.MaxGPUsByType == nil {
			eff.Limits.MaxGPUsByType = map[string]Amount{}
		}
		eff.Limits.MaxGPUsByType[t] = val
		eff.Sources[key] = pick.source(key)
	}
	return eff
}

func lookupGPU(l *layered, t string) (Amount, bool) {
	if l == nil {
		return 0, false
	}
	v, ok := l.limits.MaxGPUsByType[t]
	return v, ok
}

func anySets(gs []*layered, f field) bool {
	for _, g := range gs {
		if f.isSet(&g.limits) {
			return true
		}
	}
	return false
}

func listOf(l *Limits, name string) *[]string {
	switch name {
	case "allowed_instance_types":
		return &l.AllowedInstanceTypes
	case "allowed_providers":
		return &l.AllowedProviders
	case "allowed_regions":
		return &l.AllowedRegions
	}
	return nil
}

func union(gs []*layered, name string) []string {
	seen := map[string]bool{}
	var out []string
	for _, g := range gs {
		for _, s := range *listOf(&g.limits, name) {
			if s == "*" {
				return []string{"*"}
			}
			if !seen[s] {
				seen[s] = true
				out = append(out, s)
			}
		}
	}
	sort.Strings(out)
	return out
}
