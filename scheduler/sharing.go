package scheduler

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/gatewayhq/gateway/sharing"
	"github.com/gatewayhq/gateway/store"
)

// ErrForbidden: the cluster is shared with the caller, but not for what
// they asked (scaling, stopping, sharing it on), or sharing itself is
// not allowed to them. 403.
var ErrForbidden = errors.New("forbidden")

// ShareRequest is an owner's share: with whom (user:NAME, group:NAME, each
// alone or comma-separated), and what beyond viewing and connecting
// (scale, stop).
type ShareRequest struct {
	With  []string
	Allow []string
}

// Shared is a cluster of another owner that reaches a user through shares.
type Shared struct {
	Cluster *store.Cluster
	Grant   sharing.Grant
}

// Sharing is the gateway's cluster.sharing.
func (c *Core) Sharing() sharing.Setting { return c.cfg.Sharing }

// Reach returns the cluster name if who may do need with it. Its owner may
// do anything; someone it is shared with (package sharing, under the
// gateway's setting) may view it and connect to it, and scale or stop it
// when a share allows. A cluster that is not theirs to see is not found,
// as another user's always was; one they may see but not change is
// ErrForbidden, saying what is missing.
func (c *Core) Reach(ctx context.Context, who Who, name string, need sharing.Action) (*store.Cluster, sharing.Grant, error) {
	if !ValidName(name) {
		return nil, sharing.Grant{}, fmt.Errorf("%w: %q", ErrNotFound, name)
	}
	cl, err := c.store.GetCluster(ctx, name)
	if errors.Is(err, store.ErrNotFound) {
		return nil, sharing.Grant{}, fmt.Errorf("%w: %s", ErrNotFound, name)
	}
	if err != nil {
		return nil, sharing.Grant{}, fmt.Errorf("scheduler: %w", err)
	}
	g, err := c.grant(ctx, cl, who)
	if err != nil {
		return nil, sharing.Grant{}, err
	}
	if !g.Owner && !g.Shared() {
		return nil, sharing.Grant{}, fmt.Errorf("%w: %s", ErrNotFound, name)
	}
	if !g.May(need) {
		return nil, g, fmt.Errorf("%w: cluster %s is shared with you (%s) without %s: only its owner %s may %s it, or share it with you with --allow %s",
			ErrForbidden, name, strings.Join(g.Via, ", "), need, ownerLabel(cl), need, need)
	}
	return cl, g, nil
}

// grant is what who may do with cl.
func (c *Core) grant(ctx context.Context, cl *store.Cluster, who Who) (sharing.Grant, error) {
	if cl.Owner == who.ID {
		return sharing.Grant{Owner: true}, nil
	}
	if c.cfg.Sharing == sharing.Off {
		return sharing.Grant{}, nil
	}
	shares, err := c.store.ClusterShares(ctx, cl.Name)
	if err != nil {
		return sharing.Grant{}, fmt.Errorf("scheduler: %w", err)
	}
	return sharing.Decide(c.cfg.Sharing, cl.Owner, shares, who.ID, who.Groups), nil
}

func ownerLabel(cl *store.Cluster) string {
	if cl.OwnerName != "" {
		return cl.OwnerName
	}
	return cl.Owner
}

// WaitAs is Wait for anyone the cluster reaches (Reach with View),
// checked again at every look: a share ended meanwhile ends the wait.
func (c *Core) WaitAs(ctx context.Context, who Who, name string, timeout time.Duration) (*store.Cluster, sharing.Grant, error) {
	var g sharing.Grant
	cl, err := c.waitFor(ctx, name, timeout, func() (*store.Cluster, error) {
		cl, gr, err := c.Reach(ctx, who, name, sharing.View)
		g = gr
		return cl, err
	})
	return cl, g, err
}

// SharedWith returns the clusters of other owners that reach who through
// shares (under the gateway's setting), newest first, in statuses when
// given.
func (c *Core) SharedWith(ctx context.Context, who Who, statuses []store.Status) ([]Shared, error) {
	if c.cfg.Sharing == sharing.Off || who.ID == "" {
		return nil, nil
	}
	found, err := c.store.SharedWith(ctx, who.ID, who.Groups, statuses)
	if err != nil {
		return nil, fmt.Errorf("scheduler: %w", err)
	}
	var out []Shared
	for _, f := range found {
		if g := sharing.Decide(c.cfg.Sharing, f.Cluster.Owner, f.Shares, who.ID, who.Groups); g.Shared() {
			out = append(out, Shared{Cluster: f.Cluster, Grant: g})
		}
	}
	return out, nil
}

// Shares returns whom the owner's cluster is shared with; to anyone else
// it shares with, that is not theirs to see.
func (c *Core) Shares(ctx context.Context, who Who, name string) ([]store.Share, error) {
	if _, err := c.ownerOnly(ctx, who, name, "see whom it is shared with"); err != nil {
		return nil, err
	}
	shares, err := c.store.ClusterShares(ctx, name)
	if err != nil {
		return nil, fmt.Errorf("scheduler: %w", err)
	}
	return shares, nil
}

// ownerOnly returns the cluster when who owns it: ErrForbidden to someone
// it is shared with (they know it exists), not found to anyone else.
func (c *Core) ownerOnly(ctx context.Context, who Who, name, what string) (*store.Cluster, error) {
	cl, g, err := c.Reach(ctx, who, name, sharing.View)
	if err != nil {
		return nil, err
	}
	if !g.Owner {
		return nil, fmt.Errorf("%w: only its owner %s may %s cluster %s", ErrForbidden, ownerLabel(cl), what, name)
	}
	return cl, nil
}

// Share shares the owner's cluster as req says: each target is added, or
// its allowed actions replaced. Every share is in the audit log.
func (c *Core) Share(ctx context.Context, who Who, name string, req ShareRequest) ([]store.Share, error) {
	add, err := c.prepareShares(ctx, who, req)
	if err != nil {
		return nil, err
	}
	cl, err := c.ownerOnly(ctx, who, name, "share")
	if err != nil {
		return nil, err
	}
	if !cl.Status.Live() {
		return nil, fmt.Errorf("%w: cluster %s is %s; only a pending or running cluster can be shared", ErrConflict, name, cl.Status)
	}
	return c.addShares(ctx, who, name, add)
}

func (c *Core) addShares(ctx context.Context, who Who, name string, add []store.Share) ([]store.Share, error) {
	_, after, err := c.store.UpdateShares(ctx, name, actor(who), "cluster.share", func(owner string, cur []store.Share) ([]store.Share, error) {
		if owner != who.ID {
			return nil, fmt.Errorf("%w: %s", ErrNotFound, name)
		}
		for _, sh := range add {
			cur = slices.DeleteFunc(cur, func(x store.Share) bool { return x.Kind == sh.Kind && x.Subject == sh.Subject })
			cur = append(cur, sh)
		}
		if len(cur) > sharing.MaxShares {
			return nil, fmt.Errorf("%w: a cluster is shared with at most %d users and groups; it would be %d", ErrInvalid, sharing.MaxShares, len(cur))
		}
		return cur, nil
	})
	if err != nil {
		return nil, shareErr(name, err)
	}
	c.log.Info("cluster shared", "cluster", name, "owner", who.Name, "with", SharesLabel(after))
	return after, nil
}

// shareErr is the error of a change of name's shares.
func shareErr(name string, err error) error {
	switch {
	case errors.Is(err, store.ErrNotFound):
		return fmt.Errorf("%w: %s", ErrNotFound, name)
	case errors.Is(err, ErrNotFound):
		return err
	}
	return fmt.Errorf("scheduler: %w", err)
}

// Unshare ends shares of the owner's cluster: those naming with (user:NAME
// by name or id, group:NAME), or all of them when with is empty. What it
// removed is in the audit log; naming a share that does not exist is no
// error (removed says what went). The cluster's owner may always unshare,
// whatever cluster.sharing says.
func (c *Core) Unshare(ctx context.Context, who Who, name string, with []string) (removed, kept []store.Share, err error) {
	targets, err := sharing.ParseTargets(with)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %s", ErrInvalid, detailOf(err, sharing.ErrInvalid))
	}
	if _, err := c.ownerOnly(ctx, who, name, "unshare"); err != nil {
		return nil, nil, err
	}
	before, after, err := c.store.UpdateShares(ctx, name, actor(who), "cluster.unshare", func(owner string, cur []store.Share) ([]store.Share, error) {
		if owner != who.ID {
			return nil, fmt.Errorf("%w: %s", ErrNotFound, name)
		}
		if len(targets) == 0 {
			return nil, nil
		}
		return slices.DeleteFunc(cur, func(sh store.Share) bool { return namedBy(sh, targets) }), nil
	})
	if err != nil {
		return nil, nil, shareErr(name, err)
	}
	for _, sh := range before {
		if !slices.ContainsFunc(after, func(x store.Share) bool { return x.Kind == sh.Kind && x.Subject == sh.Subject }) {
			removed = append(removed, sh)
		}
	}
	if len(removed) > 0 {
		c.log.Info("cluster unshared", "cluster", name, "owner", who.Name, "from", SharesLabel(removed))
	}
	return removed, after, nil
}

// namedBy says whether one of targets names sh: a user by their id or by
// the name they had when shared with.
func namedBy(sh store.Share, targets []sharing.Target) bool {
	for _, t := range targets {
		if string(t.Kind) == sh.Kind && (t.Name == sh.Subject || (t.Kind == sharing.User && t.Name == sh.SubjectName)) {
			return true
		}
	}
	return false
}

// prepareShares checks a share request against the gateway's setting and
// turns its targets into shares: users are found by name (or id) among
// those who have logged in; groups must be the owner's own under
// cluster.sharing: groups.
func (c *Core) prepareShares(ctx context.Context, who Who, req ShareRequest) ([]store.Share, error) {
	if c.cfg.Sharing == sharing.Off {
		return nil, fmt.Errorf("%w: sharing clusters is turned off on this gateway (cluster.sharing: off)", ErrForbidden)
	}
	targets, err := sharing.ParseTargets(req.With)
	if err == nil && len(targets) == 0 {
		err = fmt.Errorf("%w: say whom to share with: user:NAME or group:NAME", sharing.ErrInvalid)
	}
	var allow []sharing.Action
	if err == nil {
		allow, err = sharing.ParseActions(req.Allow)
	}
	if err != nil {
		return nil, fmt.Errorf("%w: %s", ErrInvalid, detailOf(err, sharing.ErrInvalid))
	}
	out := make([]store.Share, 0, len(targets))
	for _, t := range targets {
		sh := store.Share{Kind: string(t.Kind), Subject: t.Name, Allow: sharing.Strings(allow)}
		switch {
		case t.Kind == sharing.Group:
			sh.OwnerMember = slices.Contains(who.Groups, t.Name)
			if c.cfg.Sharing == sharing.Groups && !sh.OwnerMember {
				return nil, fmt.Errorf("%w: this gateway lets you share only with groups you belong to (cluster.sharing: groups), and %s is not one of yours (%s)",
					ErrForbidden, t, groupsLabel(who.Groups))
			}
		case c.cfg.Sharing == sharing.Groups:
			return nil, fmt.Errorf("%w: this gateway lets you share only with groups you belong to (cluster.sharing: groups), not with %s; yours: %s",
				ErrForbidden, t, groupsLabel(who.Groups))
		default:
			if sh.Subject, sh.SubjectName, err = c.user(ctx, t.Name); err != nil {
				return nil, err
			}
			if sh.Subject == who.ID {
				return nil, fmt.Errorf("%w: %s is you: the cluster is yours already", ErrInvalid, t)
			}
		}
		out = append(out, sh)
	}
	return out, nil
}

func groupsLabel(groups []string) string {
	if len(groups) == 0 {
		return "none"
	}
	return "group:" + strings.Join(groups, ", group:")
}

// user is the id and name of the user named name: by the name of their
// latest login, or by their id.
func (c *Core) user(ctx context.Context, name string) (id, userName string, err error) {
	ids, err := c.store.UserIDsByName(ctx, name)
	if err != nil {
		return "", "", fmt.Errorf("scheduler: %w", err)
	}
	switch len(ids) {
	case 1:
		return ids[0], name, nil
	case 0:
		claims, err := c.store.GetUserClaims(ctx, name)
		if err == nil {
			return name, claims.Name, nil
		}
		if !errors.Is(err, store.ErrNotFound) {
			return "", "", fmt.Errorf("scheduler: %w", err)
		}
		return "", "", fmt.Errorf("%w: no user named %s has logged in to this gateway: they must log in once (gateway login) before a cluster can be shared with them", ErrInvalid, name)
	}
	return "", "", fmt.Errorf("%w: %d users are named %s; name one by id: user:%s", ErrInvalid, len(ids), name, strings.Join(ids, " or user:"))
}

// CreateShared is Create, then Share: the share request is checked before
// anything is made, so a refused share creates nothing. If the shares
// cannot be recorded after all (the database), the cluster is stopped.
func (c *Core) CreateShared(ctx context.Context, who Who, raw map[string]json.RawMessage, req ShareRequest) (*store.Cluster, error) {
	add, err := c.prepareShares(ctx, who, req)
	if err != nil {
		return nil, err
	}
	cl, err := c.Create(ctx, who, raw)
	if err != nil {
		return nil, err
	}
	if _, err := c.addShares(ctx, who, cl.Name, add); err != nil {
		if serr := c.stop(ctx, cl.Name, "its shares could not be recorded", nil); serr != nil {
			c.log.Error("stop a cluster whose shares failed", "cluster", cl.Name, "err", serr)
		}
		return nil, err
	}
	return cl, nil
}

// NoteAccess records in the audit log what someone the cluster is shared
// with did with it that changed nothing stored (action: cluster.connect,
// cluster.logs, cluster.dashboard); its owner's own use is not recorded.
func (c *Core) NoteAccess(ctx context.Context, who Who, cl *store.Cluster, g sharing.Grant, action string) error {
	if g.Owner {
		return nil
	}
	if err := c.store.RecordAudit(ctx, shareAudit(who, cl, g, action, nil)); err != nil {
		return fmt.Errorf("scheduler: %w", err)
	}
	return nil
}

// shareAudit is the audit entry of what who did with cl through g.
func shareAudit(who Who, cl *store.Cluster, g sharing.Grant, action string, extra map[string]any) store.AuditEntry {
	after := map[string]any{"owner": ownerLabel(cl), "owner_id": cl.Owner, "via": g.Via}
	for k, v := range extra {
		after[k] = v
	}
	b, _ := json.Marshal(after)
	return store.AuditEntry{Actor: who.Name, ActorID: who.ID, Action: action, Target: "cluster:" + cl.Name, After: string(b)}
}

func actor(who Who) store.Actor { return store.Actor{ID: who.ID, Name: who.Name} }

// SharesLabel is shares as a person reads them: group:ops (scale), user:bob.
func SharesLabel(shares []store.Share) string {
	parts := make([]string, len(shares))
	for i, sh := range shares {
		parts[i] = sh.Kind + ":" + sh.Label()
		if len(sh.Allow) > 0 {
			parts[i] += " (" + strings.Join(sh.Allow, ",") + ")"
		}
	}
	return strings.Join(parts, ", ")
}

// detailOf is err's message without its sentinel's text.
func detailOf(err, sentinel error) string {
	return strings.TrimPrefix(err.Error(), sentinel.Error()+": ")
}

// viewNotes remembers, per replica, when each person last had a shared
// cluster's dashboard recorded in the audit log: a dashboard is dozens of
// requests a page, and a row each would bury everything else.
type viewNotes struct {
	mu   sync.Mutex
	last map[[2]string]time.Time
}

// viewNoteEvery is how often one person's viewing of one cluster's
// dashboard is recorded, at most, per replica.
const viewNoteEvery = time.Minute

// due says whether key's viewing is to be recorded now, and remembers it.
func (v *viewNotes) due(key [2]string, now time.Time) bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	if t, ok := v.last[key]; ok && now.Sub(t) < viewNoteEvery {
		return false
	}
	if v.last == nil || len(v.last) > 10000 {
		v.last = map[[2]string]time.Time{} // forgetting costs an extra row each, no more
	}
	v.last[key] = now
	return true
}

// MayView says whether who, who does not own the cluster, may view its
// dashboard now: a share reaches them under the gateway's setting. With
// note, the viewing is recorded in the audit log (once a minute per
// person and cluster on this replica).
func (c *Core) MayView(ctx context.Context, who Who, name string, note bool) (bool, error) {
	cl, g, err := c.Reach(ctx, who, name, sharing.View)
	if errors.Is(err, ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	if note && !g.Owner && c.views.due([2]string{who.ID, name}, c.now()) {
		if err := c.NoteAccess(ctx, who, cl, g, "cluster.dashboard"); err != nil {
			return false, err
		}
	}
	return true, nil
}

// sharedAudit is the audit entry of a change someone other than the owner
// makes through a share, to record with the change; nil for the owner's.
func sharedAudit(who Who, cl *store.Cluster, g sharing.Grant, action string, extra map[string]any) *store.AuditEntry {
	if g.Owner {
		return nil
	}
	e := shareAudit(who, cl, g, action, extra)
	return &e
}

// quotaWho is whose quota a change by who through g counts against: the
// owner's, always; the owner's request carries their current groups.
func (c *Core) quotaWho(who Who, cl *store.Cluster, g sharing.Grant) Who {
	if g.Owner {
		return who
	}
	return whoOf(cl)
}

// whoseQuota names the quota a change by someone through g is held to.
func whoseQuota(g sharing.Grant, cl *store.Cluster) string {
	if g.Owner {
		return "your quota"
	}
	return "the quota of its owner " + ownerLabel(cl)
}

// quotaText is a quota refusal's message as the person who asked reads
// it: the limits are the owner's, not theirs.
func quotaText(why error, g sharing.Grant, cl *store.Cluster) string {
	if g.Owner {
		return quotaMessage(why)
	}
	return strings.ReplaceAll(quotaMessage(why), "your ", ownerLabel(cl)+"'s ")
}
