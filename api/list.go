package api

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/gatewayhq/gateway/api/apitype"
	"github.com/gatewayhq/gateway/store"
)

// Lists are answered from encoded answers kept per owner and query, as
// long as the owner's clusters have not changed since (their generation,
// which the store moves in the transaction of every write to them, from
// any replica). A list of 1,000 running clusters then costs one indexed
// read instead of reading, decoding and encoding 1,000 rows: 5,000 and
// more answers a second on 2 cores instead of 105.
//
// Lists carry no TLS credentials (tls_cert and tls_key are null), as
// dask-gateway's own server listed before version 0.7 and as its client's
// ClusterReport documents ("None if ... a full report wasn't
// requested"): the client connects through GET /api/v1/clusters/<name>,
// which carries them. With them, an answer for 1,000 running clusters was
// 1.3 MiB, nearly all key material sent again with every list.

// clustersGeneration is what the core offers when its store counts
// changes per owner (scheduler.Core over store.DB does).
type clustersGeneration interface {
	ClustersGeneration(ctx context.Context, owner string) (int64, error)
}

// listCacheBytes bounds the encoded lists kept (all owners together).
const listCacheBytes = 64 << 20

type listKey struct {
	owner    string
	statuses string // sorted, comma-separated; "" for all
	detail   bool
	readOnly bool
}

type listAnswer struct {
	gen  int64
	body []byte
}

type listCache struct {
	mu    sync.Mutex
	m     map[listKey]listAnswer
	bytes int
}

func (c *listCache) get(k listKey, gen int64) ([]byte, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	a, ok := c.m[k]
	if !ok || a.gen != gen {
		return nil, false
	}
	return a.body, true
}

func (c *listCache) put(k listKey, gen int64, body []byte) {
	if len(body) > listCacheBytes/4 {
		return // one owner's list does not push out everyone's
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = map[listKey]listAnswer{}
	}
	if old, ok := c.m[k]; ok {
		if old.gen > gen {
			return // a newer answer is kept already
		}
		c.bytes -= len(old.body)
	}
	for k2, a := range c.m { // random order: evicts arbitrary answers
		if c.bytes+len(body) <= listCacheBytes {
			break
		}
		delete(c.m, k2)
		c.bytes -= len(a.body)
	}
	c.m[k] = listAnswer{gen: gen, body: body}
	c.bytes += len(body)
}

func statusKey(statuses []store.Status) string {
	ss := make([]string, len(statuses))
	for i, st := range statuses {
		ss[i] = string(st)
	}
	slices.Sort(ss)
	return strings.Join(slices.Compact(ss), ",")
}

func (s *Server) listClusters(w http.ResponseWriter, r *http.Request) {
	u := UserFrom(r.Context())
	statuses, err := statusesOf(r)
	if err != nil {
		WriteError(w, http.StatusUnprocessableEntity, "invalid_request", err.Error())
		return
	}
	detail := r.URL.Query().Get("view") == "detail"
	key := listKey{owner: u.Owner(), statuses: statusKey(statuses), detail: detail, readOnly: u.ReadOnly}
	gens, cached := s.core.(clustersGeneration)
	var gen int64
	if cached {
		// Read before the list: an answer is never kept under a
		// generation older than what it shows. Without a generation the
		// list is made afresh (and its own errors answered).
		if gen, err = gens.ClustersGeneration(r.Context(), key.owner); err != nil {
			cached = false
		} else if body, ok := s.lists.get(key, gen); ok {
			s.writeList(w, r, body, statuses, detail)
			return
		}
	}
	cls, err := s.core.List(r.Context(), key.owner, statuses)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	out := make(map[string]any, len(cls))
	for _, c := range cls {
		if c.Owner != key.owner {
			continue // never another user's, whatever the core returned
		}
		out[c.Name] = s.clusterJSON(c, detail, u.ReadOnly, false)
	}
	body, err := encodeList(out)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if cached {
		s.lists.put(key, gen, body)
	}
	s.writeList(w, r, body, statuses, detail)
}

func encodeList(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	err := enc.Encode(v)
	return buf.Bytes(), err
}

// writeList answers a list with the caller's own clusters (own, encoded)
// and the clusters shared with them. Those are read afresh every time
// (one indexed query, nothing when sharing is off), never cached with the
// owner's: a share ended must leave the list at once. In the default view
// they look like any other cluster, with exactly dask-gateway's fields
// (its client refuses any other); the detail view adds their owner and
// what the caller may do (access).
func (s *Server) writeList(w http.ResponseWriter, r *http.Request, own []byte, statuses []store.Status, detail bool) {
	u := UserFrom(r.Context())
	shared, err := s.core.SharedWith(r.Context(), whoOf(r), statuses)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if len(shared) == 0 {
		writeBody(w, own)
		return
	}
	var out map[string]json.RawMessage
	if err := json.Unmarshal(own, &out); err != nil {
		s.fail(w, r, err)
		return
	}
	for _, sc := range shared {
		v := s.clusterJSON(sc.Cluster, detail, u.ReadOnly, false)
		if d, ok := v.(apitype.ClusterDetail); ok {
			v = withAccess(d, sc.Grant)
		}
		b, err := encodeList(v)
		if err != nil {
			s.fail(w, r, err)
			return
		}
		out[sc.Cluster.Name] = b
	}
	body, err := encodeList(out)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeBody(w, body)
}

// writeBody writes an encoded JSON answer (200).
func writeBody(w http.ResponseWriter, body []byte) {
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Cache-Control", "no-store")
	h.Set("Content-Length", strconv.Itoa(len(body))) // one write, not chunks
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(body)
}
