package quota

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/gatewayhq/gateway/store"
)

// Store is what the service needs of the database.
type Store interface {
	QuotaEntries(ctx context.Context) ([]store.QuotaRow, error)
	UpdateQuota(ctx context.Context, subject string, by store.Actor, action string, change store.QuotaChange) (before, after string, err error)
}

// OnExceed says what a scale beyond quota does.
type OnExceed string

// The choices of quotas.on_exceed.
const (
	Clamp  OnExceed = "clamp"  // scale to what the quota allows, and say so
	Refuse OnExceed = "refuse" // refuse the whole request
)

// ConfigEntry is one entry of the configuration file's quotas.entries.
type ConfigEntry struct {
	Subject Subject
	Limits  Limits
}

// ParseConfig reads quotas.entries from the configuration file: a list of
// objects, each with a subject and the limits it sets. Problems are
// reported together, each naming the entry.
func ParseConfig(list []map[string]any) ([]ConfigEntry, error) {
	var out []ConfigEntry
	var problems []string
	seen := map[Subject]bool{}
	for i, m := range list {
		subj, _ := m["subject"].(string)
		s, err := ParseSubject(subj)
		if err != nil {
			problems = append(problems, fmt.Sprintf("entry %d: %v", i+1, strings.TrimPrefix(err.Error(), ErrInvalid.Error()+": ")))
			continue
		}
		if seen[s] {
			problems = append(problems, fmt.Sprintf("entry %d: %s appears twice", i+1, s))
			continue
		}
		seen[s] = true
		rest := map[string]any{}
		for k, v := range m {
			if k != "subject" {
				rest[k] = v
			}
		}
		b, err := json.Marshal(rest)
		if err != nil {
			problems = append(problems, fmt.Sprintf("entry %d (%s): %v", i+1, s, err))
			continue
		}
		l, err := ParseLimits(b)
		if err != nil {
			problems = append(problems, fmt.Sprintf("entry %d (%s): %s", i+1, s, strings.TrimPrefix(err.Error(), ErrInvalid.Error()+": ")))
			continue
		}
		out = append(out, ConfigEntry{Subject: s, Limits: l})
	}
	if len(problems) > 0 {
		return nil, fmt.Errorf("%w: quotas.entries: %s", ErrInvalid, strings.Join(problems, "; "))
	}
	return out, nil
}

// Service combines the built-in defaults, the configuration file's entries
// and those stored through the admin API.
type Service struct {
	builtin  Limits
	config   map[Subject]Limits
	st       Store
	onExceed OnExceed
}

// BuiltinDefaults are the limits of every user that no entry (the user's,
// a group's or the default one) sets: a few clusters and environment
// builds at once, so that one user cannot take a whole gateway that
// nobody configured quotas for. The default entry raises or lifts them
// field by field (gateway admin quota set default max_clusters=20, or
// quotas.entries: [{subject: default, max_clusters: unlimited}]).
func BuiltinDefaults() Limits {
	clusters, builds := Amount(5), Amount(2)
	return Limits{MaxClusters: &clusters, MaxBuilds: &builds}
}

// Option adjusts a Service.
type Option func(*Service)

// WithBuiltinDefaults replaces BuiltinDefaults; an empty Limits turns the
// built-in layer off (gateway dev, where one developer is every user).
func WithBuiltinDefaults(l Limits) Option {
	return func(s *Service) {
		s.builtin = Limits{}
		s.builtin.Merge(&l)
	}
}

// NewService makes a service, with BuiltinDefaults unless an option says
// otherwise.
func NewService(st Store, config []ConfigEntry, onExceed OnExceed, opts ...Option) (*Service, error) {
	switch onExceed {
	case "":
		onExceed = Clamp
	case Clamp, Refuse:
	default:
		return nil, fmt.Errorf("%w: quotas.on_exceed is %q; want clamp or refuse", ErrInvalid, onExceed)
	}
	m := map[Subject]Limits{}
	for _, e := range config {
		m[e.Subject] = e.Limits
	}
	s := &Service{builtin: BuiltinDefaults(), config: m, st: st, onExceed: onExceed}
	for _, o := range opts {
		o(s)
	}
	if err := s.builtin.Validate(); err != nil {
		return nil, err
	}
	return s, nil
}

// OnExceed is what a scale beyond quota does.
func (s *Service) OnExceed() OnExceed { return s.onExceed }

// Entries returns every subject's entry.
func (s *Service) Entries(ctx context.Context) (map[Subject]Entry, error) {
	rows, err := s.st.QuotaEntries(ctx)
	if err != nil {
		return nil, err
	}
	out := map[Subject]Entry{}
	if !s.builtin.Empty() {
		var b Limits // deep copies: callers must not reach the service's own
		b.Merge(&s.builtin)
		out[DefaultSubject] = Entry{Subject: DefaultSubject, Builtin: &b}
	}
	for subj, l := range s.config {
		var c Limits
		c.Merge(&l)
		e := out[subj]
		e.Subject, e.Config = subj, &c
		out[subj] = e
	}
	for _, r := range rows {
		l, err := ParseLimits([]byte(r.Limits))
		if err != nil {
			// Written by this code; unreadable means a newer version or a
			// hand edit. Refuse to guess at limits.
			return nil, fmt.Errorf("%w: %s: %w; fix or remove it (gateway admin quota unset %s)", ErrUnreadable, r.Subject, err, r.Subject)
		}
		e := out[Subject(r.Subject)]
		e.Subject, e.Stored, e.UpdatedAt, e.UpdatedBy = Subject(r.Subject), &l, r.UpdatedAt, r.UpdatedBy
		out[e.Subject] = e
	}
	return out, nil
}

// List returns every entry, sorted: default, groups, users.
func (s *Service) List(ctx context.Context) ([]Entry, error) {
	m, err := s.Entries(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]Entry, 0, len(m))
	for _, e := range m {
		out = append(out, e)
	}
	rank := func(s Subject) int {
		switch {
		case s == DefaultSubject:
			return 0
		case strings.HasPrefix(string(s), "group:"):
			return 1
		}
		return 2
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i].Subject, out[j].Subject
		if rank(a) != rank(b) {
			return rank(a) < rank(b)
		}
		return a < b
	})
	return out, nil
}

// Effective resolves one user's limits.
func (s *Service) Effective(ctx context.Context, who Who) (Effective, error) {
	m, err := s.Entries(ctx)
	if err != nil {
		return Effective{}, err
	}
	return Resolve(m, who), nil
}

// ErrUnreadable marks a stored entry this version cannot read (written by
// a newer gateway, or edited by hand): limits are not guessed at, so
// decisions wait until an admin fixes or removes it.
var ErrUnreadable = errors.New("a stored quota entry cannot be read")

// ErrNoEntry is returned when unsetting a subject that has no stored entry.
var ErrNoEntry = errors.New("no stored quota entry")

// Set stores patch's fields for subject (merged into what is stored) and
// audits the change. It returns the subject's entry after the change.
func (s *Service) Set(ctx context.Context, by store.Actor, subject Subject, patch Limits) (Entry, error) {
	if err := patch.Validate(); err != nil {
		return Entry{}, err
	}
	if patch.Empty() {
		return Entry{}, fmt.Errorf("%w: nothing to set; give at least one limit (%s)", ErrInvalid, strings.Join(FieldNames(), ", "))
	}
	_, _, err := s.st.UpdateQuota(ctx, string(subject), by, "quota.set", func(old string, exists bool) (string, error) {
		var cur Limits
		if exists {
			var err error
			if cur, err = ParseLimits([]byte(old)); err != nil {
				return "", err
			}
		}
		cur.Merge(&patch)
		b, err := json.Marshal(cur)
		return string(b), err
	})
	if err != nil {
		return Entry{}, err
	}
	return s.entry(ctx, subject)
}

// Unset removes fields (all of them when none are named) from subject's
// stored entry and audits the change. The configuration file's entry, if
// any, applies again for what is removed.
func (s *Service) Unset(ctx context.Context, by store.Actor, subject Subject, names []string) (Entry, error) {
	var probe Limits
	if err := probe.Unset(names); err != nil {
		return Entry{}, err
	}
	_, _, err := s.st.UpdateQuota(ctx, string(subject), by, "quota.unset", func(old string, exists bool) (string, error) {
		if !exists {
			return "", fmt.Errorf("%w for %s (only entries set through the API can be unset; the configuration file's are changed there)", ErrNoEntry, subject)
		}
		if len(names) == 0 {
			return "", nil
		}
		cur, err := ParseLimits([]byte(old))
		if err != nil {
			return "", err
		}
		if err := cur.Unset(names); err != nil {
			return "", err
		}
		if cur.Empty() {
			return "", nil
		}
		b, err := json.Marshal(cur)
		return string(b), err
	})
	if err != nil {
		return Entry{}, err
	}
	return s.entry(ctx, subject)
}

func (s *Service) entry(ctx context.Context, subject Subject) (Entry, error) {
	m, err := s.Entries(ctx)
	if err != nil {
		return Entry{}, err
	}
	e, ok := m[subject]
	if !ok {
		e = Entry{Subject: subject}
	}
	return e, nil
}

// Entry returns one subject's entry (empty when it has none).
func (s *Service) Entry(ctx context.Context, subject Subject) (Entry, error) {
	return s.entry(ctx, subject)
}
