package console

import (
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/gatewayhq/gateway/auth"
	"github.com/gatewayhq/gateway/quota"
)

// quotaLimitRow is one limit of a quota entry as the page shows and edits
// it.
type quotaLimitRow struct {
	Name, Doc string
	// Value and From are what the entry sets, stored over config over
	// built-in, and where that comes from ("" and "": it sets nothing).
	Value, From string
	// Stored is what the admin API (this page, gateway admin quota set)
	// stored: the field's value. Under is what applies without it, the
	// field's placeholder.
	Stored, Under string
}

type quotaEntryView struct {
	Subject   string
	UpdatedBy string
	UpdatedAt time.Time
	Rows      []quotaLimitRow
	// For a user asked for: what applies to them, with which groups.
	Effective  []quota.Row
	Groups     string
	GroupsFrom string
	ReadOnly   bool // no form: the session may only look
}

type adminQuotasData struct {
	adminTab
	Subject  string          // asked for (?subject=)
	Selected *quotaEntryView // its entry, first on the page, also when it has none yet
	Entries  []quotaEntryView
	ReadOnly bool
}

// adminQuotasPage lists every quota entry, each limit with its value and
// source (built-in, config, api), and edits them in place: each entry is
// a form whose fields are the stored limits. ?subject= opens a subject's
// entry first, one without any too, and for a user what applies to them.
func (s *Server) adminQuotasPage(w http.ResponseWriter, r *http.Request, u *auth.User) {
	ctx := r.Context()
	d := adminQuotasData{adminTab: adminTab{"quotas"}, Subject: r.URL.Query().Get("subject"), ReadOnly: u.ReadOnly}
	entries, err := s.admin.quotas.List(ctx)
	if err != nil {
		s.fail(w, r, u, err)
		return
	}
	for _, e := range entries {
		d.Entries = append(d.Entries, entryView(e))
	}
	if d.Subject != "" {
		subj, err := quota.ParseSubject(d.Subject)
		if err != nil {
			s.fail(w, r, u, err)
			return
		}
		e, err := s.admin.quotas.Entry(ctx, subj)
		if err != nil {
			s.fail(w, r, u, err)
			return
		}
		v := entryView(e)
		if name, isUser := strings.CutPrefix(string(subj), "user:"); isUser {
			if err := s.effectiveFor(r, &v, name); err != nil {
				s.fail(w, r, u, err)
				return
			}
		}
		d.Selected = &v
		d.Entries = slices.DeleteFunc(d.Entries, func(x quotaEntryView) bool { return x.Subject == v.Subject })
	}
	for i := range d.Entries {
		d.Entries[i].ReadOnly = u.ReadOnly
	}
	if d.Selected != nil {
		d.Selected.ReadOnly = u.ReadOnly
	}
	s.render(w, r, http.StatusOK, "admin_quotas", view{Title: "Quotas", User: u, Nav: "admin", Data: d})
}

// effectiveFor adds what applies to the user: resolved with the groups
// given in ?groups=, or else those of their latest cluster, as the API's
// GET /api/v1/admin/quotas/user:NAME does.
func (s *Server) effectiveFor(r *http.Request, v *quotaEntryView, name string) error {
	var groups []string
	v.GroupsFrom = "none known: the user has made no cluster"
	if q := r.URL.Query().Get("groups"); q != "" {
		for _, g := range strings.Split(q, ",") {
			if g = strings.TrimSpace(g); g != "" {
				groups = append(groups, g)
			}
		}
		v.GroupsFrom = "this page's address (groups=)"
	} else if g, at, err := s.admin.records.LastGroups(r.Context(), name); err != nil {
		return err
	} else if !at.IsZero() {
		groups, v.GroupsFrom = g, "their latest cluster ("+at.UTC().Format(time.RFC3339)+")"
	}
	eff, err := s.admin.quotas.Effective(r.Context(), quota.Who{Name: name, Groups: groups})
	if err != nil {
		return err
	}
	v.Effective, v.Groups = eff.Rows(), strings.Join(groups, ", ")
	return nil
}

// entryView lays an entry out limit by limit, in the API's order.
func entryView(e quota.Entry) quotaEntryView {
	v := quotaEntryView{Subject: string(e.Subject), UpdatedBy: e.UpdatedBy, UpdatedAt: e.UpdatedAt}
	all, origins := e.Limits(), e.Origins()
	under := quota.Entry{Subject: e.Subject, Builtin: e.Builtin, Config: e.Config}
	underLimits, underOrigins := under.Limits(), under.Origins()
	var stored quota.Limits
	if e.Stored != nil {
		stored = *e.Stored
	}
	allText, storedText, underText := all.Text(), stored.Text(), underLimits.Text()
	for _, d := range quota.FieldDocs() {
		name := d[0]
		row := quotaLimitRow{Name: name, Doc: d[1], Value: allText[name], From: originOf(origins, name), Stored: storedText[name],
			Under: quota.KindOf(name).Hint()}
		if t, ok := underText[name]; ok {
			row.Under = t + " (" + originOf(underOrigins, name) + ")"
		}
		v.Rows = append(v.Rows, row)
	}
	return v
}

// originOf names where a limit comes from; for max_gpus_by_type, whose
// types may each come from elsewhere, every source of its types.
func originOf(origins map[string]string, name string) string {
	if o, ok := origins[name]; ok {
		return o
	}
	var from []string
	for k, o := range origins {
		if strings.HasPrefix(k, name+".") && !slices.Contains(from, o) {
			from = append(from, o)
		}
	}
	slices.Sort(from)
	return strings.Join(from, ", ")
}

// adminSetQuota saves a quota entry's form: the limits whose field the
// admin changed (from was.NAME, the stored value the page showed, to
// set.NAME) are set, those emptied are removed, read and checked as
// `gateway admin quota set` and the API's PATCH read and check them
// (quota.ParseSubject, quota.ParseText, the service's own checks); the
// changes are audited under the admin's name.
func (s *Server) adminSetQuota(w http.ResponseWriter, r *http.Request, u *auth.User) {
	ctx := r.Context()
	subj, err := quota.ParseSubject(r.PostFormValue("subject"))
	if err != nil {
		s.fail(w, r, u, err)
		return
	}
	given := map[string]string{}
	var unset []string
	for _, name := range quota.FieldNames() {
		now, was := strings.TrimSpace(r.PostFormValue("set."+name)), strings.TrimSpace(r.PostFormValue("was."+name))
		switch {
		case now == was:
		case now == "":
			unset = append(unset, name)
		default:
			given[name] = now
		}
	}
	patch, err := quota.ParseText(given, func(name string) string { return name })
	if err != nil {
		s.fail(w, r, u, err)
		return
	}
	if _, ok := given["max_gpus_by_type"]; ok {
		// The field is the whole map: the GPU types it no longer lists go.
		e, err := s.admin.quotas.Entry(ctx, subj)
		if err != nil {
			s.fail(w, r, u, err)
			return
		}
		if e.Stored != nil {
			for t := range e.Stored.MaxGPUsByType {
				if _, kept := patch.MaxGPUsByType[t]; !kept {
					unset = append(unset, "max_gpus_by_type."+t)
				}
			}
		}
	}
	var did []string
	if len(given) > 0 {
		if _, err := s.admin.quotas.Set(ctx, actorOf(u), subj, patch); err != nil {
			s.fail(w, r, u, err)
			return
		}
		did = append(did, "set "+strings.Join(slices.Sorted(maps.Keys(given)), ", "))
	}
	if len(unset) > 0 {
		slices.Sort(unset)
		if _, err := s.admin.quotas.Unset(ctx, actorOf(u), subj, unset); err != nil {
			s.fail(w, r, u, err)
			return
		}
		did = append(did, "removed "+strings.Join(unset, ", "))
	}
	msg := "Nothing changed for " + string(subj) + "."
	if len(did) > 0 {
		s.log.Info("console: quota changed", "admin", u.Name, "subject", subj)
		msg = "Saved " + string(subj) + ": " + strings.Join(did, "; ") + "."
	}
	http.Redirect(w, r, "/admin/quotas?"+url.Values{"subject": {string(subj)}, "msg": {msg}}.Encode(), http.StatusSeeOther)
}
