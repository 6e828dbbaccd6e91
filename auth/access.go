package auth

import (
	"context"
	"strings"
	"time"

	"github.com/gatewayhq/gateway/store"
)

// DefaultGroupsMaxAge is how long a login's groups count for the user's API
// tokens and browser sessions when Access does not say.
const DefaultGroupsMaxAge = 24 * time.Hour

// Access decides what a stored credential (an API token, a browser session)
// grants. Groups, and the admin rights and quotas that follow from them, come
// from the owner's latest login (recorded by OIDC), not from the moment the
// credential was made, and only while that login is at most GroupsMaxAge old:
// someone removed from a group loses it at their next login, or at the latest
// GroupsMaxAge after their last one. Admins by name are checked against the
// configuration in force at each use.
type Access struct {
	AdminUsers   []string
	AdminGroups  []string
	GroupsMaxAge time.Duration // DefaultGroupsMaxAge when zero
}

// apply fills in u's name, groups and admin from c (the owner's latest
// claims, nil when none) as of now.
func (a Access) apply(u *User, c *store.UserClaims, now time.Time) {
	if sub, ok := strings.CutPrefix(u.Owner(), "oidc:"); ok {
		u.Subject = sub
	}
	u.Groups = nil
	if c != nil {
		if c.Name != "" {
			u.Name = c.Name
		}
		u.Email = c.Email
		maxAge := a.GroupsMaxAge
		if maxAge <= 0 {
			maxAge = DefaultGroupsMaxAge
		}
		if now.Sub(c.ClaimsAt) <= maxAge {
			u.Groups = c.Groups
		}
	}
	u.Admin = isAdmin(u, a.AdminUsers, a.AdminGroups)
}

// ClaimsRecorder keeps each OIDC user's latest claims (store.DB).
type ClaimsRecorder interface {
	RecordUserClaims(ctx context.Context, c *store.UserClaims) (bool, error)
}
