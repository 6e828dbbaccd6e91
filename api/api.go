// Package api serves the gateway's REST API under /api. Paths, fields and
// status names follow dask-gateway's API so that its Python client works
// unchanged; the gateway's own CLI uses the same API, asking for a richer
// view where it needs one (?view=detail), because dask-gateway's client
// rejects fields it does not know.
package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/gatewayhq/gateway/api/apitype"
	"github.com/gatewayhq/gateway/auth"
	"github.com/gatewayhq/gateway/internal/crosssite"
	"github.com/gatewayhq/gateway/internal/jsonkind"
	"github.com/gatewayhq/gateway/internal/reqbound"
	"github.com/gatewayhq/gateway/providers/catalog"
	"github.com/gatewayhq/gateway/quota"
	"github.com/gatewayhq/gateway/scheduler"
	"github.com/gatewayhq/gateway/sharing"
	"github.com/gatewayhq/gateway/store"
)

// Core is what the API needs of the scheduling core.
type Core interface {
	Create(ctx context.Context, who quota.Who, raw map[string]json.RawMessage) (*store.Cluster, error)
	Get(ctx context.Context, owner, name string) (*store.Cluster, error)
	Wait(ctx context.Context, owner, name string, timeout time.Duration) (*store.Cluster, error)
	List(ctx context.Context, owner string, statuses []store.Status) ([]*store.Cluster, error)
	Events(ctx context.Context, owner, name string) ([]store.Event, error)
	Scale(ctx context.Context, who quota.Who, name string, count int) (string, error)
	Adapt(ctx context.Context, who quota.Who, name string, minimum, maximum int, active bool) (string, error)
	ListAll(ctx context.Context, statuses []store.Status) ([]*store.Cluster, error)
	AdminStop(ctx context.Context, by store.Actor, name string) error
	InstanceTypes(ctx context.Context, who quota.Who) ([]catalog.InstanceType, error)
	Stop(ctx context.Context, owner, name, why string) error
	Logs(ctx context.Context, owner, name string, tail int, w io.Writer) error
	Limits() scheduler.Limits

	// Shared clusters (see package sharing): every route on a named
	// cluster reaches it through Reach, so that someone it is shared with
	// may view it and do what their shares allow.
	Reach(ctx context.Context, who quota.Who, name string, need sharing.Action) (*store.Cluster, sharing.Grant, error)
	WaitAs(ctx context.Context, who quota.Who, name string, timeout time.Duration) (*store.Cluster, sharing.Grant, error)
	StopAs(ctx context.Context, who quota.Who, name string) error
	SharedWith(ctx context.Context, who quota.Who, statuses []store.Status) ([]scheduler.Shared, error)
	CreateShared(ctx context.Context, who quota.Who, raw map[string]json.RawMessage, req scheduler.ShareRequest) (*store.Cluster, error)
	Shares(ctx context.Context, who quota.Who, name string) ([]store.Share, error)
	Share(ctx context.Context, who quota.Who, name string, req scheduler.ShareRequest) ([]store.Share, error)
	Unshare(ctx context.Context, who quota.Who, name string, with []string) (removed, kept []store.Share, err error)
	NoteAccess(ctx context.Context, who quota.Who, cl *store.Cluster, g sharing.Grant, action string) error
	Sharing() sharing.Setting
}

// Config configures the API.
type Config struct {
	Version string
	// Provider and Region are this gateway's backend, recorded with each
	// benchmark run (the server's word, not the client's).
	Provider, Region string
	// PublicURL is where browsers and clients reach the gateway
	// (http://host:port); dashboard links and scheduler addresses derive from it.
	PublicURL string
	// WaitTimeout bounds ?wait long polls.
	WaitTimeout time.Duration
	// Issuer and ClientID tell the CLI where to log in.
	Issuer   string
	ClientID string
	// OnExceed is what a scale beyond quota does (clamp or refuse), shown
	// to users with their quota.
	OnExceed string
	// DashboardProblem says, for a provider's name, why its clusters'
	// dashboards cannot work, or "" (nil: nothing known).
	DashboardProblem func(provider string) string
	// MaxUserBodyBytes bounds the request body bytes one user has in
	// flight at once (0: DefaultUserBodyBytes).
	MaxUserBodyBytes int64
	// UploadDir is where environment uploads are spooled while a request
	// is handled (default: os.TempDir()).
	UploadDir string
}

// Server is the API handler.
type Server struct {
	cfg  Config
	core Core
	auth auth.Authenticator
	log  *slog.Logger
	mux  *http.ServeMux

	sessions *auth.Sessions // nil: no browser sessions
	tokens   TokenStore     // nil: no API tokens
	limiter  *auth.FailureLimiter
	browser  *BrowserLogin // nil: no OIDC browser login
	quotas   Quotas        // nil: no quotas, usage or admin API
	envs     Envs          // nil: no environment builds
	bench    BenchStore    // nil: no benchmark results
	// benchLeases holds runs while their clients renew (SetBenchLeases).
	benchLeases BenchLeases
	benchLease  time.Duration
	records     Records

	sessionStore SessionStore // nil: browser sessions are not listed or ended through the API
	cookie       *apiCookie   // nil: no API cookie (see apicookie.go)
	lists        listCache    // encoded cluster lists (see list.go)
	bodies       *bodyBudget  // request bytes in flight by user (bodybudget.go)

	schedules      BenchSchedules // nil: no benchmark schedules (bench_schedules.go)
	schedulesNow   func() time.Time
	schedulesReady func(context.Context) error // nil: always

	dbHealth healthCheck // what /api/health reports of the database (health.go)
}

// New builds the API. sessions may be nil.
func New(cfg Config, core Core, a auth.Authenticator, sessions *auth.Sessions, log *slog.Logger) *Server {
	if cfg.WaitTimeout <= 0 {
		cfg.WaitTimeout = 20 * time.Second
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &Server{cfg: cfg, core: core, auth: a, sessions: sessions, log: log, mux: http.NewServeMux(), bodies: newBodyBudget(cfg.MaxUserBodyBytes)}
	s.routes()
	return s
}

func (s *Server) routes() {
	m := s.mux
	m.HandleFunc("GET /api/health", s.health)
	m.HandleFunc("GET /api/version", s.version)
	m.HandleFunc("GET /api/v1/auth/config", s.authConfig)
	m.HandleFunc("GET /api/v1/whoami", s.authed(s.whoami))
	m.HandleFunc("GET /api/v1/options", s.authed(s.options))
	m.HandleFunc("GET /api/v1/instance-types", s.authed(s.instanceTypes))
	m.HandleFunc("GET /api/v1/clusters/{$}", s.authed(s.listClusters))
	m.HandleFunc("GET /api/v1/clusters", s.authed(s.listClusters))
	m.HandleFunc("POST /api/v1/clusters/{$}", s.authed(s.createCluster))
	m.HandleFunc("POST /api/v1/clusters", s.authed(s.createCluster))
	m.HandleFunc("GET /api/v1/clusters/{name}", s.authed(s.getCluster))
	m.HandleFunc("DELETE /api/v1/clusters/{name}", s.authed(s.deleteCluster))
	m.HandleFunc("POST /api/v1/clusters/{name}/scale", s.authed(s.scaleCluster))
	m.HandleFunc("POST /api/v1/clusters/{name}/adapt", s.authed(s.adaptCluster))
	m.HandleFunc("GET /api/v1/clusters/{name}/logs", s.authed(s.clusterLogs))
	m.HandleFunc("GET /api/v1/clusters/{name}/events", s.authed(s.clusterEvents))
	m.HandleFunc("POST /api/v1/clusters/{name}/dashboard-link", s.authedReadOnly(s.dashboardLink))
	m.HandleFunc("GET /api/v1/clusters/{name}/shares", s.authed(s.clusterShares))
	m.HandleFunc("POST /api/v1/clusters/{name}/share", s.authed(s.shareCluster))
	m.HandleFunc("POST /api/v1/clusters/{name}/unshare", s.authed(s.unshareCluster))
	m.HandleFunc("POST /api/v1/tokens", s.authed(s.tokensEnabled(s.createToken)))
	m.HandleFunc("GET /api/v1/tokens", s.authed(s.tokensEnabled(s.listTokens)))
	m.HandleFunc("DELETE /api/v1/tokens/{id}", s.authed(s.tokensEnabled(s.revokeToken)))
	m.HandleFunc("GET /api/v1/sessions", s.authed(s.sessionsEnabled(s.listSessions)))
	m.HandleFunc("DELETE /api/v1/sessions", s.authed(s.sessionsEnabled(s.revokeSessions)))
	m.HandleFunc("DELETE /api/v1/sessions/{id}", s.authed(s.sessionsEnabled(s.revokeSession)))
	s.adminRoutes()
	s.envRoutes()
	s.benchRoutes()
	s.benchScheduleRoutes()
	m.HandleFunc("GET /auth/ticket", s.confirmTicket)
	m.HandleFunc("POST /auth/ticket", s.redeemTicket)
	m.HandleFunc("POST /auth/logout", s.logout)
	m.HandleFunc("GET /auth/logout", s.logoutPage)
	m.HandleFunc("GET /auth/login", s.startLogin)
	m.HandleFunc("GET /auth/callback", s.finishLogin)
	m.HandleFunc("GET /auth/jupyterhub/callback", s.finishLogin)
	m.HandleFunc("/api/", func(w http.ResponseWriter, r *http.Request) {
		WriteError(w, http.StatusNotFound, "not_found", fmt.Sprintf("no API route %s %s", r.Method, r.URL.Path))
	})
}

// ServeHTTP implements http.Handler.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.mux.ServeHTTP(w, r) }

// WriteError writes an error answer.
func WriteError(w http.ResponseWriter, status int, code, msg string) {
	if status == http.StatusUnauthorized {
		w.Header().Set("WWW-Authenticate", `Bearer realm="gateway"`)
	}
	writeJSON(w, status, apitype.Error{Error: msg, Code: code, Message: msg})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store") // answers may hold TLS keys
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false) // messages quote <name> placeholders; this is JSON, not HTML
	_ = enc.Encode(v)
}

type ctxKey struct{}

// UserFrom returns the user the request was authenticated as.
func UserFrom(ctx context.Context) *auth.User {
	u, _ := ctx.Value(ctxKey{}).(*auth.User)
	return u
}

// Authenticate resolves the request's user, for other handlers (the
// dashboard proxy) that share the API's credentials.
func Authenticate(r *http.Request, a auth.Authenticator) (*auth.User, error) {
	tok, err := auth.BearerToken(r)
	if err != nil {
		return nil, err
	}
	return a.Authenticate(r.Context(), tok)
}

// SetFailureLimiter limits failed authentications per client address.
func (s *Server) SetFailureLimiter(l *auth.FailureLimiter) { s.limiter = l }

func (s *Server) authed(h http.HandlerFunc) http.HandlerFunc { return s.authedAs(h, false) }

// authedReadOnly is authed for a POST that a read-only token may make too:
// one that changes no cluster and grants nothing beyond the token (the
// dashboard link: its session is read-only, as the token is).
func (s *Server) authedReadOnly(h http.HandlerFunc) http.HandlerFunc { return s.authedAs(h, true) }

func (s *Server) authedAs(h http.HandlerFunc, readOnlyPost bool) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		ip := remoteIP(r)
		// Checked before any verification: an address over the limit
		// costs neither signature checks nor key set fetches.
		if s.limiter != nil && s.limiter.Blocked(ip) {
			w.Header().Set("Retry-After", "60")
			WriteError(w, http.StatusTooManyRequests, "too_many_failures", "too many failed authentications from your address; wait a minute")
			return
		}
		if r.Header.Get("Authorization") != "" && crosssite.Ambient(r) && !ambientMayAuthenticate(r, s.cfg.PublicURL) {
			// Basic credentials, which a browser that has them sends to
			// any page's request: held to the API cookie's rule.
			s.log.Info("cross-site request with Basic credentials refused", "remote", ip, "method", r.Method, "path", r.URL.Path,
				"origin", r.Header.Get("Origin"), "sec_fetch_site", r.Header.Get("Sec-Fetch-Site"))
			WriteError(w, http.StatusForbidden, "cross_site", "cross-site request refused: send the token as \"Authorization: Bearer <token>\", or from the gateway's own pages")
			return
		}
		u, err := Authenticate(r, s.auth)
		var cookieCred string // the credential the API cookie carried, if it authenticates
		if errors.Is(err, auth.ErrNoCredentials) && s.cookie != nil {
			if tok, ok := s.cookie.credential(r, s.cfg.PublicURL); ok {
				// The credential is checked again, every time: a revoked
				// token stops its cookie at once.
				cookieCred = tok
				u, err = s.auth.Authenticate(r.Context(), tok)
			}
		}
		if errors.Is(err, auth.ErrInvalid) && cookieCred != "" {
			// Only a cookie whose token is refused goes: one that could not
			// be checked (the database away) stays for when it is back.
			s.cookie.clear(w)
		}
		if err != nil {
			msg := "authentication required: send \"Authorization: Bearer <token>\" (run: gateway login)"
			if !errors.Is(err, auth.ErrNoCredentials) {
				if !errors.Is(err, auth.ErrInvalid) {
					if errors.Is(err, auth.ErrUnavailable) {
						// JupyterHub did not answer: the credential may
						// be good, so nothing is counted or cleared. The
						// caller, nobody yet, is not told the hub's address.
						s.log.Warn("authentication unavailable", "remote", ip, "path", r.URL.Path, "err", err)
						w.Header().Set("Retry-After", "5")
						WriteError(w, http.StatusServiceUnavailable, "auth_unavailable", "cannot check credentials right now: the JupyterHub that vouches for them does not answer; try again")
						return
					}
					// Credentials are checked against the store; the caller
					// is nobody yet, so is not told where it is.
					if s.databaseDownTo(w, r, err, false) {
						return
					}
					s.log.Error("authentication error", "err", err)
					WriteError(w, http.StatusServiceUnavailable, "auth_unavailable", "cannot check credentials right now; try again")
					return
				}
				// Failures are counted; once over the limit, the address
				// is refused above until the minute ends. Expired or
				// revoked credentials are genuine, not guesses: not counted.
				if s.limiter != nil && !errors.Is(err, auth.ErrEnded) && s.limiter.Fail(ip) {
					w.Header().Set("Retry-After", "60")
					WriteError(w, http.StatusTooManyRequests, "too_many_failures", "too many failed authentications from your address; wait a minute")
					return
				}
				msg = "authentication failed: " + detail(err, auth.ErrInvalid)
				s.log.Info("authentication failed", "remote", ip, "path", r.URL.Path, "reason", msg) // never the token
			}
			WriteError(w, http.StatusUnauthorized, "unauthenticated", msg)
			return
		}
		// Its body may now be large and slow (an environment's code).
		reqbound.Authenticated(r)
		if u.ReadOnly && !readOnlyPost && r.Method != http.MethodGet && r.Method != http.MethodHead {
			WriteError(w, http.StatusForbidden, "read_only", "this token is read-only")
			return
		}
		if s.cookie != nil && cookieCred == "" {
			// Authenticated by its header: the next call may use the cookie.
			if tok, err := auth.BearerToken(r); err == nil {
				s.cookie.issue(w, tok, u.Expires)
			}
		}
		// Someone waits for the answer: the request's writes go ahead of
		// the reconcile loop's on SQLite (see store.Interactive).
		ctx := store.Interactive(context.WithValue(r.Context(), ctxKey{}, u))
		release, ok := s.bodies.admit(w, r, u.Owner())
		if !ok {
			return
		}
		defer release()
		h(w, r.WithContext(ctx))
	}
}

func remoteIP(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}

// writeClamped answers a scale or adapt in dask-gateway's form: ok, or a
// message saying how the request was clamped (its client shows it as a
// warning).
func writeClamped(w http.ResponseWriter, msg string) {
	resp := map[string]any{"ok": msg == "", "msg": nil}
	if msg != "" {
		resp["msg"] = msg
	}
	writeJSON(w, http.StatusOK, resp)
}

// detail is err's message without the sentinel's own text, which only
// classifies it (the status code and error code say that already).
func detail(err, sentinel error) string {
	return strings.TrimPrefix(err.Error(), sentinel.Error()+": ")
}

// decode reads a JSON object body of at most 1 MiB into v.
func decode(w http.ResponseWriter, r *http.Request, v any) bool {
	return decodeLimit(w, r, v, 1<<20, "request body over 1 MiB")
}

// decodeLimit reads a JSON object body of at most limit bytes into v.
// Bodies that are not JSON at all are 400 malformed_json; well-formed JSON
// with a value of the wrong type is 422, as every other bad value is:
// dask-gateway's client turns 422 into a ValueError naming the problem.
func decodeLimit(w http.ResponseWriter, r *http.Request, v any, limit int64, tooLarge string) bool {
	body := http.MaxBytesReader(w, r.Body, limit)
	dec := json.NewDecoder(body)
	if err := dec.Decode(v); err != nil {
		bodyError(w, err, tooLarge)
		return false
	}
	if dec.More() {
		WriteError(w, http.StatusBadRequest, "malformed_json", "request body has data after the JSON object")
		return false
	}
	return true
}

// bodyError answers a request whose body could not be read or decoded;
// tooLarge is the message of one over its route's limit.
func bodyError(w http.ResponseWriter, err error, tooLarge string) {
	var mbe *http.MaxBytesError
	var ute *json.UnmarshalTypeError
	var bbe *BodyBudgetError
	switch {
	case errors.As(err, &mbe), errors.Is(err, errCodeTooLarge):
		WriteError(w, http.StatusRequestEntityTooLarge, "too_large", tooLarge)
	case errors.As(err, &bbe):
		writeBudgetError(w, bbe)
	case errors.As(err, &ute):
		WriteError(w, http.StatusUnprocessableEntity, "invalid_request", typeMessage(ute))
	case errors.Is(err, io.EOF):
		WriteError(w, http.StatusBadRequest, "malformed_json", "request body is empty; send a JSON object")
	case errors.Is(err, errMalformed):
		WriteError(w, http.StatusBadRequest, "malformed_json", err.Error())
	case errors.As(err, new(*json.SyntaxError)), errors.Is(err, io.ErrUnexpectedEOF):
		WriteError(w, http.StatusBadRequest, "malformed_json", "request body is not valid JSON: "+err.Error())
	case errors.Is(err, errBadValue):
		WriteError(w, http.StatusUnprocessableEntity, "invalid_request", detail(err, errBadValue))
	default:
		// Valid JSON with a value a field's own decoding refuses
		// (bad base64, a spec field's check): the value is wrong.
		WriteError(w, http.StatusUnprocessableEntity, "invalid_request", "request body: "+err.Error())
	}
}

// typeMessage says which field had a value of the wrong type, in JSON's
// terms rather than Go's.
func typeMessage(e *json.UnmarshalTypeError) string {
	want := jsonkind.Of(e.Type)
	got := e.Value
	if e.Field == "" {
		return fmt.Sprintf("the request body must be %s, not %s", want, got)
	}
	return fmt.Sprintf("%s must be %s, not %s", e.Field, want, got)
}

func (s *Server) version(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, map[string]string{"version": s.cfg.Version})
}

func (s *Server) whoami(w http.ResponseWriter, r *http.Request) {
	u := UserFrom(r.Context())
	groups := u.Groups
	if groups == nil {
		groups = []string{}
	}
	out := map[string]any{"name": u.Name, "id": u.Owner(), "subject": u.Subject, "email": u.Email, "groups": groups, "admin": u.Admin,
		"via": u.Via, "read_only": u.ReadOnly}
	if !u.Expires.IsZero() {
		out["expires"] = u.Expires.UTC().Format(time.RFC3339)
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) authConfig(w http.ResponseWriter, r *http.Request) {
	if s.cfg.Issuer == "" {
		WriteError(w, http.StatusNotFound, "not_found", "this gateway has no OpenID Connect login")
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"issuer": s.cfg.Issuer, "client_id": s.cfg.ClientID,
		"scopes": []string{"openid", "profile", "email", "groups", "offline_access"}})
}

func (s *Server) options(w http.ResponseWriter, r *http.Request) {
	lim := s.core.Limits()
	if s.quotas != nil {
		// The spec is the caller's: a quota's tighter bounds show in it,
		// so that clients offer only what will be admitted.
		eff, err := s.quotas.Effective(r.Context(), whoOf(r))
		if err != nil {
			s.fail(w, r, err)
			return
		}
		lim = lim.Within(eff)
	}
	writeJSON(w, http.StatusOK, map[string]any{"cluster_options": lim.Spec()})
}

// instanceTypes lists the machine types the caller may use, cheapest
// first; ?gpu=true keeps those with GPUs.
func (s *Server) instanceTypes(w http.ResponseWriter, r *http.Request) {
	types, err := s.core.InstanceTypes(r.Context(), whoOf(r))
	if err != nil {
		s.fail(w, r, err)
		return
	}
	gpu := queryFlag(r, "gpu")
	out := make([]catalog.InstanceType, 0, len(types))
	for _, t := range types {
		if !gpu || t.GPUs > 0 {
			out = append(out, t)
		}
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) createCluster(w http.ResponseWriter, r *http.Request) {
	var req apitype.CreateClusterRequest
	if !decode(w, r, &req) {
		return
	}
	var c *store.Cluster
	var err error
	if req.Share != nil {
		c, err = s.core.CreateShared(r.Context(), whoOf(r), req.ClusterOptions, scheduler.ShareRequest{With: req.Share.With, Allow: req.Share.Allow})
	} else {
		c, err = s.core.Create(r.Context(), whoOf(r), req.ClusterOptions)
	}
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusCreated, map[string]string{"name": c.Name})
}

func queryFlag(r *http.Request, key string) bool {
	if !r.URL.Query().Has(key) {
		return false
	}
	v := r.URL.Query().Get(key)
	if v == "" {
		return true
	}
	b, err := strconv.ParseBool(v)
	return err == nil && b
}

// getCluster answers one cluster, to its owner or to someone it is shared
// with, with its TLS credentials when running (not to read-only tokens):
// what dask-gateway's client connects with. Credentials handed to someone
// other than the owner are recorded in the audit log.
func (s *Server) getCluster(w http.ResponseWriter, r *http.Request) {
	u := UserFrom(r.Context())
	who := whoOf(r)
	name := r.PathValue("name")
	var c *store.Cluster
	var g sharing.Grant
	var err error
	if queryFlag(r, "wait") {
		c, g, err = s.core.WaitAs(r.Context(), who, name, s.cfg.WaitTimeout)
	} else {
		c, g, err = s.core.Reach(r.Context(), who, name, sharing.View)
	}
	if err == nil && c.Status == store.Running && !u.ReadOnly {
		err = s.core.NoteAccess(r.Context(), who, c, g, "cluster.connect")
	}
	if err != nil {
		s.fail(w, r, err)
		return
	}
	detail := r.URL.Query().Get("view") == "detail"
	out := s.clusterJSON(c, detail, u.ReadOnly, true)
	if d, ok := out.(apitype.ClusterDetail); ok {
		if g.Owner {
			shares, err := s.core.Shares(r.Context(), who, name)
			if err != nil {
				s.fail(w, r, err)
				return
			}
			d.SharedWith = sharesJSON(shares)
		}
		out = withAccess(d, g)
	}
	writeJSON(w, http.StatusOK, out)
}

// deleteCluster stops a cluster, its owner's or one shared with the caller
// with stop allowed.
func (s *Server) deleteCluster(w http.ResponseWriter, r *http.Request) {
	err := s.core.StopAs(r.Context(), whoOf(r), r.PathValue("name"))
	if err != nil && !errors.Is(err, scheduler.ErrNotFound) {
		s.fail(w, r, err)
		return
	}
	// dask-gateway answers 204 for unknown names too, so stopping is idempotent.
	w.WriteHeader(http.StatusNoContent)
}

func (s *Server) scaleCluster(w http.ResponseWriter, r *http.Request) {
	var req apitype.ScaleRequest // Count is a pointer: see its type
	if !decode(w, r, &req) {
		return
	}
	if req.Count == nil {
		WriteError(w, http.StatusUnprocessableEntity, "invalid_request", `scale expects {"count": <number of workers>}`)
		return
	}
	n := *req.Count
	if n < 0 {
		WriteError(w, http.StatusUnprocessableEntity, "invalid_request", fmt.Sprintf("count must be a non-negative whole number of workers, not %d", n))
		return
	}
	msg, err := s.core.Scale(r.Context(), whoOf(r), r.PathValue("name"), n)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeClamped(w, msg)
}

func (s *Server) adaptCluster(w http.ResponseWriter, r *http.Request) {
	var req apitype.AdaptRequest
	if !decode(w, r, &req) {
		return
	}
	minimum, maximum, active := 0, s.core.Limits().MaxWorkers, true
	if req.Minimum != nil {
		minimum = *req.Minimum
	}
	if req.Maximum != nil {
		maximum = *req.Maximum
	}
	if req.Active != nil {
		active = *req.Active
	}
	msg, err := s.core.Adapt(r.Context(), whoOf(r), r.PathValue("name"), minimum, maximum, active)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeClamped(w, msg)
}

func (s *Server) clusterLogs(w http.ResponseWriter, r *http.Request) {
	tail := 0
	if t := r.URL.Query().Get("tail"); t != "" {
		n, err := strconv.Atoi(t)
		if err != nil || n < 0 {
			WriteError(w, http.StatusUnprocessableEntity, "invalid_request", "tail must be a non-negative whole number of lines")
			return
		}
		tail = n
	}
	// Check access before writing anything, so errors still get JSON.
	who := whoOf(r)
	c, g, err := s.core.Reach(r.Context(), who, r.PathValue("name"), sharing.View)
	if err == nil {
		err = s.core.NoteAccess(r.Context(), who, c, g, "cluster.logs")
	}
	if err != nil {
		s.fail(w, r, err)
		return
	}
	// Stream: logs can be large. The header goes out with the first byte,
	// so an error before any output still gets a JSON answer.
	lw := &lazyText{w: w}
	if err := s.core.Logs(r.Context(), c.Owner, c.Name, tail, lw); err != nil && !lw.started {
		s.fail(w, r, err)
	}
}

// lazyText sets the text content type on the first write.
type lazyText struct {
	w       http.ResponseWriter
	started bool
}

func (l *lazyText) Write(p []byte) (int, error) {
	if !l.started {
		l.started = true
		l.w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	}
	return l.w.Write(p)
}

func (s *Server) clusterEvents(w http.ResponseWriter, r *http.Request) {
	c, _, err := s.core.Reach(r.Context(), whoOf(r), r.PathValue("name"), sharing.View)
	var evs []store.Event
	if err == nil {
		evs, err = s.core.Events(r.Context(), c.Owner, c.Name)
	}
	if err != nil {
		s.fail(w, r, err)
		return
	}
	out := make([]apitype.EventJSON, 0, len(evs))
	for _, e := range evs {
		out = append(out, apitype.EventJSON{Time: e.At.UTC(), Kind: e.Kind, Message: e.Message})
	}
	writeJSON(w, http.StatusOK, out)
}
