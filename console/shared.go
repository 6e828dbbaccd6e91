package console

import (
	"context"
	"encoding/binary"
	"errors"
	"hash/fnv"
	"strings"
	"sync"

	"github.com/gatewayhq/gateway/auth"
	"github.com/gatewayhq/gateway/quota"
	"github.com/gatewayhq/gateway/sharing"
	"github.com/gatewayhq/gateway/store"
)

// SharedCluster is a cluster of another owner that reaches a user through
// shares (package sharing), with what the shares allow.
type SharedCluster struct {
	Cluster *store.Cluster
	Grant   sharing.Grant
}

// Sharing is what the console needs of the gateway's cluster sharing: the
// clusters shared with a user, and the one check every route on a named
// cluster makes (the API's own).
type Sharing interface {
	SharedWith(ctx context.Context, who quota.Who, statuses []store.Status) ([]SharedCluster, error)
	// Reach returns the cluster if who may do need with it: not found
	// when it is not theirs to see, forbidden when a share does not
	// allow need.
	Reach(ctx context.Context, who quota.Who, name string, need sharing.Action) (*store.Cluster, sharing.Grant, error)
	// StopAs stops the cluster for its owner or for someone a share
	// allows to stop it (audited).
	StopAs(ctx context.Context, who quota.Who, name string) error
}

// sharedDeps are the shared clusters' dependencies (SetSharing).
type sharedDeps struct {
	shares Sharing
	// groups are the groups of each user with an open page, as their
	// session last said: the hub reads shares by user id alone.
	mu     sync.Mutex
	groups map[string][]string
}

// SetSharing shows the clusters shared with each user on their list and
// lets them open their pages, with the controls their shares allow.
func (s *Server) SetSharing(sh Sharing) { s.shared.shares = sh }

// noteGroups keeps u's groups for the hub's reads of their shares.
func (s *Server) noteGroups(u *auth.User) {
	if s.shared.shares == nil {
		return
	}
	s.shared.mu.Lock()
	defer s.shared.mu.Unlock()
	if s.shared.groups == nil || len(s.shared.groups) >= maxFragments {
		s.shared.groups = map[string][]string{} // a bound; a user's next page notes them again
	}
	s.shared.groups[u.Owner()] = u.Groups
}

// listGeneration is what the list's stream watches for owner: their own
// clusters' generation and, when clusters are shared with them, a
// fingerprint of those, so that a shared cluster's change (or a share
// made or ended) moves it too. Without shares it is the store's number.
func (s *Server) listGeneration(ctx context.Context, owner string) (int64, error) {
	gen, err := s.clusters.ClustersGeneration(ctx, owner)
	if err != nil || s.shared.shares == nil {
		return gen, err
	}
	s.shared.mu.Lock()
	groups := s.shared.groups[owner]
	s.shared.mu.Unlock()
	shared, err := s.shared.shares.SharedWith(ctx, quota.Who{ID: owner, Groups: groups}, nil)
	if err != nil || len(shared) == 0 {
		return gen, err
	}
	h := fnv.New64a()
	_ = binary.Write(h, binary.LittleEndian, gen)
	for _, sc := range shared {
		c := sc.Cluster
		h.Write([]byte(strings.Join([]string{c.Name, string(c.Status), c.Phase, c.Reason, c.DashboardAddress,
			strings.Join(sc.Grant.Via, ","), strings.Join(sharing.Strings(sc.Grant.Allow), ",")}, "\x00")))
		_ = binary.Write(h, binary.LittleEndian, []int64{int64(c.ReadyWorkers), int64(c.DesiredWorkers), c.StartedAt.UnixNano(), c.StoppedAt.UnixNano()})
	}
	// Non-negative: a negative generation means unknown.
	return int64(h.Sum64() >> 1), nil
}

// errNotTheirs: the loop answered another user's cluster to a lookup by
// owner (it never should).
var errNotTheirs = errors.New("console: not the user's cluster")

// access is what the viewer may do with a cluster on its pages.
type access struct {
	Owner    string // whose it is: the id the loop's reads take
	SharedBy string // "" for the viewer's own; else its owner's name
	Via      string // the shares that let the viewer in
	Scale    bool
	Stop     bool
}

// reach returns the cluster name as u may see it: their own, or one shared
// with them; else the loop's answer (not found).
func (s *Server) reach(ctx context.Context, u *auth.User, name string) (*store.Cluster, access, error) {
	c, err := s.clusters.Get(ctx, u.Owner(), name)
	if err == nil && c.Owner == u.Owner() {
		return c, access{Owner: c.Owner, Scale: true, Stop: true}, nil
	}
	if s.shared.shares == nil {
		if err == nil {
			err = errNotTheirs
		}
		return nil, access{}, err
	}
	c, g, rerr := s.shared.shares.Reach(ctx, whoOf(u), name, sharing.View)
	if rerr != nil {
		return nil, access{}, rerr
	}
	if g.Owner {
		return c, access{Owner: c.Owner, Scale: true, Stop: true}, nil
	}
	return c, sharedAccess(c, g), nil
}

func sharedAccess(c *store.Cluster, g sharing.Grant) access {
	return access{Owner: c.Owner, SharedBy: ownerName(c), Via: strings.Join(g.Via, ", "),
		Scale: g.May(sharing.Scale), Stop: g.May(sharing.Stop)}
}

// sharedClusters are the clusters shared with u, live and recently ended.
func (s *Server) sharedClusters(ctx context.Context, u *auth.User) ([]SharedCluster, error) {
	if s.shared.shares == nil {
		return nil, nil
	}
	return s.shared.shares.SharedWith(ctx, whoOf(u), nil)
}
