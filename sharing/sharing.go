// Package sharing decides who, besides its owner, may use a cluster. An
// owner shares a cluster with users and groups; everyone it is shared
// with may see it, connect to it and open its dashboard, and each share
// may also allow scaling and stopping it. The gateway's cluster.sharing
// setting bounds what owners may share, and applies to shares already
// made as soon as it changes: a share it no longer allows grants nothing.
package sharing

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"unicode"

	"github.com/gatewayhq/gateway/store"
)

// ErrInvalid is a share request that cannot be read: a malformed target or
// an unknown action.
var ErrInvalid = errors.New("invalid share")

// Setting is the gateway's cluster.sharing: what owners may share.
type Setting string

const (
	// Off: no cluster is shared; shares already made grant nothing.
	Off Setting = "off"
	// Groups: owners share with groups they belong to, never with single
	// users.
	Groups Setting = "groups"
	// Any: owners share with any user or group.
	Any Setting = "any"
)

// DefaultSetting is cluster.sharing when the configuration says nothing:
// teams share within their groups, and nobody outside them.
const DefaultSetting = Groups

// ParseSetting reads cluster.sharing.
func ParseSetting(s string) (Setting, error) {
	switch v := Setting(strings.ToLower(strings.TrimSpace(s))); v {
	case Off, Groups, Any:
		return v, nil
	case "":
		return DefaultSetting, nil
	}
	return "", fmt.Errorf("cluster.sharing %q must be off, groups or any", s)
}

// Action is what someone may do with a cluster.
type Action string

const (
	// View: see it (list, status, events, logs), connect to it (with the
	// cluster's TLS credentials) and open its dashboard. Every share
	// grants it.
	View Action = "view"
	// Scale: scale it and set its adaptive scaling.
	Scale Action = "scale"
	// Stop: stop it.
	Stop Action = "stop"
)

// grantable are the actions a share may allow beyond View, in the order
// they are shown.
var grantable = []Action{Scale, Stop}

// ParseActions reads --allow: actions named alone or comma-separated,
// returned without repeats in a fixed order.
func ParseActions(items []string) ([]Action, error) {
	seen := map[Action]bool{}
	for _, item := range items {
		for _, f := range strings.Split(item, ",") {
			a := Action(strings.ToLower(strings.TrimSpace(f)))
			switch {
			case a == "":
			case slices.Contains(grantable, a):
				seen[a] = true
			case a == View:
				// Every share lets its people view; naming it is no error.
			default:
				return nil, fmt.Errorf("%w: unknown action %q: a share may allow scale and stop (viewing and connecting come with every share)", ErrInvalid, quoted(f))
			}
		}
	}
	var out []Action
	for _, a := range grantable {
		if seen[a] {
			out = append(out, a)
		}
	}
	return out, nil
}

// Kind is what a share names: a user or a group.
type Kind string

const (
	User  Kind = "user"
	Group Kind = "group"
)

// Target is one user or group to share with, as a person names it
// (user:bob, group:ops).
type Target struct {
	Kind Kind
	Name string
}

func (t Target) String() string { return string(t.Kind) + ":" + t.Name }

// maxName bounds a target's name: group names come from claims, and
// nothing longer names anyone.
const maxName = 256

// ParseTargets reads --with: targets named alone or comma-separated, each
// user:NAME or group:NAME, returned without repeats.
func ParseTargets(items []string) ([]Target, error) {
	var out []Target
	for _, item := range items {
		for _, f := range strings.Split(item, ",") {
			f = strings.TrimSpace(f)
			if f == "" {
				continue
			}
			t, err := parseTarget(f)
			if err != nil {
				return nil, err
			}
			if !slices.Contains(out, t) {
				out = append(out, t)
			}
			if len(out) > MaxTargets {
				return nil, fmt.Errorf("%w: at most %d users and groups at once", ErrInvalid, MaxTargets)
			}
		}
	}
	return out, nil
}

func parseTarget(s string) (Target, error) {
	kind, name, ok := strings.Cut(s, ":")
	name = strings.TrimSpace(name)
	t := Target{Kind: Kind(strings.ToLower(strings.TrimSpace(kind))), Name: name}
	if !ok || (t.Kind != User && t.Kind != Group) {
		return Target{}, fmt.Errorf("%w: %q: name whom to share with as user:NAME or group:NAME", ErrInvalid, quoted(s))
	}
	if name == "" || len(name) > maxName || strings.ContainsFunc(name, unsafeRune) {
		return Target{}, fmt.Errorf("%w: %q: a %s name of 1 to %d printable characters, without commas", ErrInvalid, quoted(s), t.Kind, maxName)
	}
	return t, nil
}

// unsafeRune refuses what would make a name ambiguous in a list or unsafe
// to show: the list's separator and control characters. Spaces stay:
// groups have them ("Data Science"), and names are trimmed at the ends.
func unsafeRune(r rune) bool {
	return r == ',' || !unicode.IsPrint(r)
}

// MaxTargets bounds the users and groups of one share request, and
// MaxShares a cluster's shares: each is a row the store keeps and a list
// reads.
const (
	MaxTargets = 100
	MaxShares  = 1000
)

// quoted shortens what a message quotes back of a request.
func quoted(s string) string {
	if len(s) > 80 {
		return s[:80] + "..."
	}
	return s
}

// Grant is what one person may do with a cluster.
type Grant struct {
	// Owner: the cluster is theirs.
	Owner bool
	// Via are the shares that let someone else in (user:bob, group:ops),
	// under the gateway's setting; none: the cluster is not theirs to see.
	Via []string
	// Allow are the actions beyond View the shares allow together.
	Allow []Action
}

// Shared says whether the cluster reaches this person through shares.
func (g Grant) Shared() bool { return !g.Owner && len(g.Via) > 0 }

// May says whether the person may do a.
func (g Grant) May(a Action) bool {
	switch {
	case g.Owner:
		return true
	case !g.Shared():
		return false
	case a == View:
		return true
	}
	return slices.Contains(g.Allow, a)
}

// Counts says whether a stored share grants anything under setting: with
// Groups, only a group's share made while the owner belonged to it.
func Counts(setting Setting, s store.Share) bool {
	switch setting {
	case Any:
		return true
	case Groups:
		return s.Kind == string(Group) && s.OwnerMember
	}
	return false
}

// Decide is what the person with id (auth.User.Owner) and groups may do
// with a cluster of owner, given its shares, under setting.
func Decide(setting Setting, owner string, shares []store.Share, id string, groups []string) Grant {
	if id != "" && id == owner {
		return Grant{Owner: true}
	}
	var g Grant
	allowed := map[Action]bool{}
	for _, s := range shares {
		if !Counts(setting, s) || !matches(s, id, groups) {
			continue
		}
		g.Via = append(g.Via, string(s.Kind)+":"+s.Label())
		for _, a := range s.Allow {
			allowed[Action(a)] = true
		}
	}
	for _, a := range grantable {
		if allowed[a] {
			g.Allow = append(g.Allow, a)
		}
	}
	return g
}

func matches(s store.Share, id string, groups []string) bool {
	switch Kind(s.Kind) {
	case User:
		return id != "" && s.Subject == id
	case Group:
		return slices.Contains(groups, s.Subject)
	}
	return false
}

// Strings are actions as their names.
func Strings(as []Action) []string {
	out := make([]string, len(as))
	for i, a := range as {
		out[i] = string(a)
	}
	return out
}
