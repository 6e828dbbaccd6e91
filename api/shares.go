package api

import (
	"net/http"

	"github.com/gatewayhq/gateway/api/apitype"
	"github.com/gatewayhq/gateway/scheduler"
	"github.com/gatewayhq/gateway/sharing"
	"github.com/gatewayhq/gateway/store"
)

// The share routes follow dask-gateway's style for actions on a cluster
// (POST /api/v1/clusters/{name}/scale): POST .../share and .../unshare
// with a JSON body, and GET .../shares. Only the cluster's owner may use
// them; someone it is shared with gets 403, anyone else 404.

func (s *Server) clusterShares(w http.ResponseWriter, r *http.Request) {
	shares, err := s.core.Shares(r.Context(), whoOf(r), r.PathValue("name"))
	s.answerShares(w, r, shares, nil, err)
}

func (s *Server) shareCluster(w http.ResponseWriter, r *http.Request) {
	var req apitype.ShareRequest
	if !decode(w, r, &req) {
		return
	}
	shares, err := s.core.Share(r.Context(), whoOf(r), r.PathValue("name"), scheduler.ShareRequest{With: req.With, Allow: req.Allow})
	s.answerShares(w, r, shares, nil, err)
}

func (s *Server) unshareCluster(w http.ResponseWriter, r *http.Request) {
	var req apitype.UnshareRequest
	if !decode(w, r, &req) {
		return
	}
	removed, kept, err := s.core.Unshare(r.Context(), whoOf(r), r.PathValue("name"), req.With)
	s.answerShares(w, r, kept, removed, err)
}

// answerShares answers a share route: the cluster's shares, and what an
// unshare removed.
func (s *Server) answerShares(w http.ResponseWriter, r *http.Request, shares, removed []store.Share, err error) {
	if err != nil {
		s.fail(w, r, err)
		return
	}
	out := apitype.Shares{Cluster: r.PathValue("name"), Sharing: string(s.core.Sharing()), Shares: sharesJSON(shares)}
	if removed != nil {
		out.Removed = sharesJSON(removed)
	}
	writeJSON(w, http.StatusOK, out)
}

// sharesJSON is shares as the API shows them (never nil: [] for none).
func sharesJSON(shares []store.Share) []apitype.Share {
	out := make([]apitype.Share, 0, len(shares))
	for _, sh := range shares {
		j := apitype.Share{With: sh.Kind + ":" + sh.Subject, Allow: sh.Allow, CreatedAt: sh.CreatedAt.UTC(), CreatedBy: sh.CreatedBy}
		if j.Allow == nil {
			j.Allow = []string{}
		}
		if sh.Kind == string(sharing.User) {
			j.Name = sh.SubjectName
		}
		out = append(out, j)
	}
	return out
}

// withAccess adds to a cluster's detail what the caller may do with it
// when it reaches them through shares.
func withAccess(d apitype.ClusterDetail, g sharing.Grant) apitype.ClusterDetail {
	if g.Shared() {
		d.Access = &apitype.Access{Shared: true, Via: g.Via, Allow: sharing.Strings(g.Allow)}
	}
	return d
}
