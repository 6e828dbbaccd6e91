package console

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/gatewayhq/gateway/auth"
	"github.com/gatewayhq/gateway/clusteropts"
	"github.com/gatewayhq/gateway/quota"
	"github.com/gatewayhq/gateway/store"
)

// ClusterLoop is what the cluster pages need of the control loop beyond
// Clusters: the options it publishes (GET /api/v1/options), its check of
// a request without creating anything, Create itself (the API's), and
// its idle clock.
type ClusterLoop interface {
	// OptionSpec is the options as published to who: the gateway's
	// limits within who's quota.
	OptionSpec(ctx context.Context, who quota.Who) ([]clusteropts.Field, error)
	// CheckCreate answers what Create would (the refusal, word for word)
	// without creating anything, with the shape the cluster would have
	// and the workers it would start with.
	CheckCreate(ctx context.Context, who quota.Who, raw map[string]json.RawMessage) (quota.Shape, int, error)
	Create(ctx context.Context, who quota.Who, raw map[string]json.RawMessage) (*store.Cluster, error)
	// IdleLeft is how long the running cluster may stay idle before the
	// loop stops it; false when it has no idle timeout or the loop keeps
	// no idle clock for it here.
	IdleLeft(cl *store.Cluster) (time.Duration, bool)
}

// Ledger is the usage ledger (the store's): each member of each cluster,
// what it ran on, from when to when, at what price.
type Ledger interface {
	Intervals(ctx context.Context, f store.LedgerFilter) ([]store.Interval, error)
}

// createDeps is what the cluster pages need beyond Clusters: the
// new-cluster form, and what the list and a cluster's page show of costs,
// members and idle time. Unset, the form is not served and the list shows
// no costs.
type createDeps struct {
	loop    ClusterLoop
	ledger  Ledger
	follows follows // the streams that follow logs, by user
}

// SetClusterPages adds the new-cluster form (/new), and costs, members
// and idle time to the clusters list and each cluster's page.
func (s *Server) SetClusterPages(loop ClusterLoop, ledger Ledger) {
	s.create.loop, s.create.ledger = loop, ledger
	s.section(navItem{Key: "new", Title: "New cluster", Path: "/new"}, func(m *http.ServeMux) {
		m.HandleFunc("GET /new", s.page(s.newPage))
		m.HandleFunc("GET /new/estimate", s.page(s.estimatePage))
		m.HandleFunc("POST /new", s.action(s.createCluster))
	})
}

// optionInput is one option of the form, made from its published spec.
type optionInput struct {
	Name, Label string
	// Kind is the input: "number", "text", "checkbox", "select" or
	// "mapping" (a textarea of name=value lines).
	Kind     string
	Value    string // as typed, or the default
	Checked  bool
	Min, Max string
	Step     string // "1", or "any" for fractions
	Choices  []string
	def      string // the default as the form shows it
}

// newData is the new-cluster page.
type newData struct {
	Inputs   []optionInput
	Estimate estimate
	ReadOnly bool
	Error    string // why the last submission was refused
}

// estimate is what the form's options would start: its cost, and the
// quota (or the option) that would refuse it.
type estimate struct {
	Known              bool // the options made a cluster's shape
	Workers            int
	PerHour            string
	Scheduler, Worker  string // each member's machine
	Priced             bool
	Limit, Source, Why string // the quota that would refuse it
	Problem            string // an option that would be refused (the API's words)
}

// formKey marks a form that was sent (as against defaults to show): a
// checkbox left out is then false.
const formKey = "form"

// inputs are the options' inputs, with the values of form q when it was
// sent, else the defaults.
func inputs(spec []clusteropts.Field, q url.Values) []optionInput {
	sent := q.Get(formKey) != ""
	out := make([]optionInput, 0, len(spec))
	for _, f := range spec {
		in := optionInput{Name: f.Field, Label: f.Label, def: formValue(f.Default)}
		kind, _ := f.Spec["type"].(string)
		switch kind {
		case "int", "float":
			in.Kind, in.Min, in.Max, in.Step = "number", formValue(f.Spec["min"]), formValue(f.Spec["max"]), "1"
			if kind == "float" {
				in.Step = "any"
			}
		case "bool":
			in.Kind = "checkbox"
		case "select":
			in.Kind = "select"
			if opts, ok := f.Spec["options"].([]string); ok {
				in.Choices = opts
			}
		case "mapping":
			in.Kind = "mapping"
		default:
			in.Kind = "text"
		}
		in.Value = in.def
		if sent {
			in.Value = q.Get(f.Field)
		}
		in.Checked = in.Kind == "checkbox" && (sent && in.Value != "" || !sent && in.def == "true")
		out = append(out, in)
	}
	return out
}

// formValue is a default or bound as the form shows it.
func formValue(v any) string {
	switch x := v.(type) {
	case nil:
		return ""
	case string:
		return x
	case map[string]string:
		var lines []string
		for _, k := range slices.Sorted(maps.Keys(x)) {
			lines = append(lines, k+"="+x[k])
		}
		return strings.Join(lines, "\n")
	}
	return fmt.Sprint(v)
}

// request is the options the form asks for, as the API's cluster_options:
// an option left at its default is left out (the gateway's default then
// applies, as for a client that does not set it); a number that is not
// one goes as the text typed, for the API's own refusal to name it.
func request(ins []optionInput) map[string]json.RawMessage {
	raw := map[string]json.RawMessage{}
	for _, in := range ins {
		v := strings.TrimSpace(in.Value)
		if in.Kind == "checkbox" {
			if b := strconv.FormatBool(in.Checked); b != in.def {
				raw[in.Name] = json.RawMessage(b)
			}
			continue
		}
		if v == strings.TrimSpace(in.def) || v == "" {
			continue
		}
		switch in.Kind {
		case "number":
			if _, err := strconv.ParseFloat(v, 64); err == nil && json.Valid([]byte(v)) {
				raw[in.Name] = json.RawMessage(v)
				continue
			}
		case "mapping":
			m := map[string]string{}
			for _, line := range strings.Split(v, "\n") {
				if line = strings.TrimSpace(line); line != "" {
					k, val, _ := strings.Cut(line, "=")
					m[strings.TrimSpace(k)] = strings.TrimSpace(val)
				}
			}
			raw[in.Name] = asJSON(m)
			continue
		}
		raw[in.Name] = asJSON(v)
	}
	return raw
}

// asJSON is v (strings) as JSON, < > & as they are: the API's refusals
// quote a value as it was sent, and the page escapes it.
func asJSON(v any) json.RawMessage {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v) // strings and maps of strings always encode
	return bytes.TrimSuffix(b.Bytes(), []byte("\n"))
}

func whoOf(u *auth.User) quota.Who { return quota.Who{ID: u.Owner(), Name: u.Name, Groups: u.Groups} }

// form reads the options' spec for u and the form's inputs.
func (s *Server) form(r *http.Request, u *auth.User, q url.Values) ([]optionInput, error) {
	spec, err := s.create.loop.OptionSpec(r.Context(), whoOf(u))
	if err != nil {
		return nil, err
	}
	return inputs(spec, q), nil
}

// estimate checks the form's options as Create would, without creating.
func (s *Server) estimate(r *http.Request, u *auth.User, ins []optionInput) (estimate, bool) {
	shape, workers, err := s.create.loop.CheckCreate(r.Context(), whoOf(u), request(ins))
	e := estimate{Workers: workers}
	var x *quota.ExceededError
	switch {
	case errors.As(err, &x):
		e.Limit, e.Source, e.Why = x.Limit, x.Source, x.Msg
	case err != nil:
		status, msg, ok := s.cfg.Explain(r, err)
		if !ok {
			return e, false
		}
		if status >= 500 {
			s.log.Error("console: checking a new cluster", "err", err)
		}
		e.Problem = msg
		return e, true
	}
	if shape.Provider == "" {
		return e, true
	}
	e.Known = true
	e.Priced = shape.Scheduler.PriceHour > 0 || shape.Worker.PriceHour > 0
	e.PerHour = usd(shape.PriceHour(workers))
	e.Scheduler, e.Worker = machine(shape.Scheduler), machine(shape.Worker)
	return e, true
}

// machine says what a member runs on.
func machine(z quota.Size) string {
	var parts []string
	if z.InstanceType != "" {
		parts = append(parts, z.InstanceType)
	}
	if z.VCPUs > 0 || z.MemoryGiB > 0 {
		parts = append(parts, fmt.Sprintf("%g vCPU, %g GiB", z.VCPUs, z.MemoryGiB))
	}
	if z.GPUs > 0 {
		parts = append(parts, strings.TrimSpace(fmt.Sprintf("%d GPU %s", z.GPUs, z.GPUType)))
	}
	if z.PriceHour > 0 {
		parts = append(parts, usd(z.PriceHour)+"/h")
	}
	if len(parts) == 0 {
		return "as the backend sizes it"
	}
	return strings.Join(parts, ", ")
}

// usd is an estimated amount of US dollars.
func usd(v float64) string {
	if v > 0 && v < 0.01 {
		return fmt.Sprintf("$%.4f", v)
	}
	return fmt.Sprintf("$%.2f", v)
}

func (s *Server) newPage(w http.ResponseWriter, r *http.Request, u *auth.User) {
	s.renderNew(w, r, u, http.StatusOK, r.URL.Query(), "")
}

// renderNew renders the form with the values of q and their estimate.
func (s *Server) renderNew(w http.ResponseWriter, r *http.Request, u *auth.User, status int, q url.Values, problem string) {
	ins, err := s.form(r, u, q)
	if err != nil {
		s.fail(w, r, u, err)
		return
	}
	d := newData{Inputs: ins, ReadOnly: u.ReadOnly, Error: problem}
	var ok bool
	if d.Estimate, ok = s.estimate(r, u, ins); !ok {
		return
	}
	s.render(w, r, status, "new", view{Title: "New cluster", User: u, Nav: "new", Data: d})
}

// estimatePage is the estimate alone, for the form's script to put in
// place as the options change.
func (s *Server) estimatePage(w http.ResponseWriter, r *http.Request, u *auth.User) {
	ins, err := s.form(r, u, r.URL.Query())
	if err != nil {
		s.fail(w, r, u, err)
		return
	}
	e, ok := s.estimate(r, u, ins)
	if !ok {
		return
	}
	// The script takes only what says it is this fragment (not, say, a
	// sign-in page).
	w.Header().Set("X-Console-Fragment", "estimate")
	s.renderTemplate(w, r, http.StatusOK, "new", "estimate", view{User: u, Data: newData{Estimate: e}})
}

func (s *Server) createCluster(w http.ResponseWriter, r *http.Request, u *auth.User) {
	ins, err := s.form(r, u, r.PostForm)
	if err != nil {
		s.fail(w, r, u, err)
		return
	}
	c, err := s.create.loop.Create(r.Context(), whoOf(u), request(ins))
	if err != nil {
		status, msg, ok := s.cfg.Explain(r, err)
		if !ok {
			return
		}
		if status >= 500 {
			s.log.Error("console: creating a cluster", "err", err)
		}
		s.renderNew(w, r, u, status, r.PostForm, msg)
		return
	}
	redirect(w, r, "/c/"+c.Name, "Starting "+c.Name+".")
}
