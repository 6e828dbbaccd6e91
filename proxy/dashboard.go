package proxy

import (
	"context"
	"crypto/tls"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/gatewayhq/gateway/auth"
	"github.com/gatewayhq/gateway/internal/crosssite"
	"github.com/gatewayhq/gateway/internal/errpage"
	"github.com/gatewayhq/gateway/internal/quietnet"
	"github.com/gatewayhq/gateway/internal/reqbound"
	"github.com/gatewayhq/gateway/proxy/routes"
)

// Authenticator resolves the user of an HTTP request.
type Authenticator func(r *http.Request) (*auth.User, error)

// DashboardPrefix is the path under which cluster dashboards are served.
const DashboardPrefix = "/clusters/"

// WorkerPath is the path element, under a cluster's dashboard, of its
// workers' own HTTP servers: /clusters/<name>/worker/<worker>/... goes to
// that worker's server, which serves under that prefix as the scheduler
// does under its own.
const WorkerPath = "worker/"

// Dashboard proxies /clusters/<name>/... to the cluster's scheduler HTTP
// server, and /clusters/<name>/worker/<worker>/... to that worker's, for
// the cluster's owner (and people it is shared with) only. Schedulers are started with this
// prefix, so paths pass through unchanged and links in their pages resolve.
// An https dashboard must present the cluster's own certificate
// (pki.MemberTLS); each cluster has its own connection pool, dropped
// when its route goes away.
type Dashboard struct {
	lookup func(string) (routes.Route, bool)
	authn  Authenticator
	login  func(next string) string
	log    *slog.Logger
	rp     *httputil.ReverseProxy
	pool   *routes.Pool
	fwd    *forwarder // plain GET and HEAD; rp the rest
	// publicURL is the gateway's origin for the cross-site check; empty:
	// the request's own.
	publicURL string
	// watch lets people a cluster is shared with in, and ends their open
	// requests when that ends (nil: owners only).
	watch *viewerWatch
	// problems says which clusters' dashboards cannot work (nil: none).
	problems *problems
}

// DashboardHandler returns the dashboard proxy.
func (s *Server) DashboardHandler(authn Authenticator) http.Handler {
	dialer := &net.Dialer{Timeout: s.cfg.DialTimeout, KeepAlive: 30 * time.Second}
	pool := routes.NewPool(func(tc *tls.Config) *http.Transport {
		return &http.Transport{
			DialContext:           quietnet.Dial(dialer),
			TLSClientConfig:       tc,
			TLSHandshakeTimeout:   s.cfg.DialTimeout,
			MaxIdleConnsPerHost:   64,
			IdleConnTimeout:       90 * time.Second,
			ResponseHeaderTimeout: 60 * time.Second,
			// Bodies pass as the scheduler sent them: without this the
			// transport would ask for gzip on a client's behalf and
			// unpack it again.
			DisableCompression: true,
		}
	})
	s.routes.OnGone(pool.Drop)
	bufs := &copyBuffers{}
	d := &Dashboard{authn: authn, log: s.log, login: s.loginRedirect, pool: pool, publicURL: s.publicURL}
	if s.dashProblem != nil {
		d.problems = &problems{ask: s.dashProblem, m: map[string]DashboardProblem{}}
		s.routes.OnGone(d.problems.drop)
	}
	if s.viewers != nil {
		d.watch = &viewerWatch{viewers: s.viewers, every: s.viewerRecheck}
	}
	d.fwd = &forwarder{dialer: dialer, tlsTimeout: s.cfg.DialTimeout, headerTimeout: 60 * time.Second,
		idleTimeout: 90 * time.Second, maxIdle: 64, now: time.Now, bufs: bufs, idle: map[string][]*backendConn{},
		onBackendError: d.backendError}
	s.routes.OnGone(d.fwd.Drop)
	d.lookup = func(name string) (routes.Route, bool) {
		r, ok := s.routes.Lookup(name)
		if !ok || r.Dashboard == nil {
			return routes.Route{}, false
		}
		return r, true
	}
	d.rp = &httputil.ReverseProxy{
		Transport:  memberTransport{pool},
		BufferPool: bufs,
		Rewrite: func(pr *httputil.ProxyRequest) {
			t, _ := pr.In.Context().Value(targetKey{}).(target)
			pr.Out.URL.Scheme, pr.Out.URL.Host = t.route.Dashboard.Scheme, t.route.Dashboard.Host
			pr.Out.Host = t.route.Dashboard.Host
			pr.SetXForwarded()
			// A page of the gateway's own origin is, to the scheduler, a page
			// of its own: Tornado (Dask's websockets) refuses an upgrade whose
			// Origin is not the Host it was sent to, and the Host here is the
			// scheduler's. Any other Origin passes unchanged, so the scheduler
			// still sees a foreign page as foreign.
			if o, err := url.Parse(pr.In.Header.Get("Origin")); err == nil && o.Host != "" && strings.EqualFold(o.Host, pr.In.Host) {
				pr.Out.Header.Set("Origin", t.route.Dashboard.Scheme+"://"+t.route.Dashboard.Host)
			}
			// The gateway's credentials are for the gateway, not the scheduler.
			pr.Out.Header.Del("Authorization")
			removeCookie(pr.Out, auth.SessionCookie)
		},
		ErrorHandler: d.backendError,
	}
	return d
}

// workerLink maps the scheduler's link to a worker's page,
// proxy/<port>/<host>/<page>, to <worker>/<page> when a worker of rt is
// recorded at exactly that host and port.
func workerLink(rt routes.Route, sub string) (string, bool) {
	rest, ok := strings.CutPrefix(sub, "proxy/")
	if !ok || len(rt.Workers) == 0 {
		return "", false
	}
	port, rest, _ := strings.Cut(rest, "/")
	host, page, _ := strings.Cut(rest, "/")
	if port == "" || host == "" {
		return "", false
	}
	for name, u := range rt.Workers {
		if u != nil && u.Port() == port && strings.EqualFold(u.Hostname(), host) {
			return url.PathEscape(name) + "/" + page, true
		}
	}
	return "", false
}

// backendError answers a request the cluster's dashboard did not.
func (d *Dashboard) backendError(w http.ResponseWriter, r *http.Request, err error) {
	d.log.Warn("dashboard proxy error", "path", r.URL.Path, "err", err)
	dashError(w, r, http.StatusBadGateway, "the cluster's dashboard did not answer")
}

// copyBuffers lends the reverse proxy its copy buffers: otherwise it
// allocates (and the collector clears) 32 KiB for every request.
type copyBuffers struct{ p sync.Pool }

func (c *copyBuffers) Get() []byte {
	if b, ok := c.p.Get().(*[]byte); ok {
		return *b
	}
	return make([]byte, 32<<10)
}

func (c *copyBuffers) Put(b []byte) { c.p.Put(&b) }

// target is where one request goes: the cluster and its route.
type target struct {
	cluster string
	route   routes.Route
}

// memberTransport sends each request through its cluster's transport.
type memberTransport struct{ pool *routes.Pool }

func (m memberTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	t, ok := r.Context().Value(targetKey{}).(target)
	if !ok {
		return nil, errors.New("dashboard: request without a cluster")
	}
	return m.pool.Transport(t.cluster, t.route.ClusterCert, t.route.ClusterKey).RoundTrip(r)
}

type targetKey struct{}

func (d *Dashboard) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	rest := strings.TrimPrefix(r.URL.Path, DashboardPrefix)
	name, _, _ := strings.Cut(rest, "/")
	if name == "" {
		dashError(w, r, http.StatusNotFound, "no cluster named in the path; use /clusters/<name>/status")
		return
	}
	u, err := d.authn(r)
	if err != nil {
		if !errors.Is(err, auth.ErrNoCredentials) && !errors.Is(err, auth.ErrInvalid) {
			// The credentials could not be checked (the database away, say):
			// no sign-in would help, and a browser's session must not be
			// sent through one.
			d.log.Warn("dashboard: cannot check credentials", "path", r.URL.Path, "err", err)
			w.Header().Set("Retry-After", "5")
			dashError(w, r, http.StatusServiceUnavailable, "cannot check credentials right now; try again in a moment")
			return
		}
		if d.login != nil && r.Method == http.MethodGet && strings.Contains(r.Header.Get("Accept"), "text/html") &&
			r.Header.Get("Authorization") == "" {
			// A browser without a (valid) session: sign it in, then come back.
			http.Redirect(w, r, d.login(r.URL.RequestURI()), http.StatusFound)
			return
		}
		msg := "authentication required to view this dashboard"
		if !errors.Is(err, auth.ErrNoCredentials) {
			msg = "authentication failed"
		}
		w.Header().Set("WWW-Authenticate", `Bearer realm="gateway"`)
		dashError(w, r, http.StatusUnauthorized, msg)
		return
	}
	if why := d.crossSite(r); why != "" {
		// A session cookie, and Basic credentials once given, ride along
		// on any page's requests to the gateway: another site's page must
		// not post to a dashboard or open its websocket as the user.
		d.log.Info("refusing a cross-site dashboard request", "path", r.URL.Path, "method", r.Method, "why", why)
		dashError(w, r, http.StatusForbidden, "cross-site request refused: "+why)
		return
	}
	reqbound.Authenticated(r) // a dashboard's form may be posted slowly
	rt, ok := d.lookup(name)
	if !ok {
		d.pool.Drop(name) // routed from the store until now, perhaps
		d.fwd.Drop(name)
	}
	if ok && rt.Owner != u.Owner() {
		var done func()
		if r, done, ok = d.sharedViewer(w, r, name, u); r == nil {
			return
		}
		if done != nil {
			defer done()
		}
	}
	if !ok {
		// The same answer for "not yours" and "not running", so that
		// cluster names do not leak.
		dashError(w, r, http.StatusNotFound, "cluster "+name+" not found or not running")
		return
	}
	if u.ReadOnly && r.Method != http.MethodGet && r.Method != http.MethodHead {
		dashError(w, r, http.StatusForbidden, "this token is read-only")
		return
	}
	sub := strings.TrimPrefix(rest, name+"/")
	if wsub, isWorker := strings.CutPrefix(sub, WorkerPath); isWorker {
		// A worker's page: its address comes only from the gateway's
		// record of the cluster's members, never from the URL, so a made-up
		// name or a host:port in it reaches nothing.
		wname, wrest, _ := strings.Cut(wsub, "/")
		wu, found := rt.Workers[wname]
		if !found || wu == nil {
			dashError(w, r, http.StatusNotFound, "cluster "+name+" has no worker of that name with a dashboard")
			return
		}
		rt.Dashboard, sub = wu, wrest
	}
	if to, found := workerLink(rt, sub); found {
		// The scheduler's pages link a worker as proxy/<port>/<host>/...
		// (for jupyter-server-proxy): a worker the gateway has on record
		// at that address is sent to its own path; nothing else is.
		http.Redirect(w, r, DashboardPrefix+name+"/"+WorkerPath+to, http.StatusFound)
		return
	}
	if needsBokeh(sub) {
		// The gateway, not Dask, says what is missing and how to fix it.
		if p := d.problems.get(r.Context(), name); p.Missing != "" {
			missingDashboard(w, r, name, p)
			return
		}
	}
	if forwardable(r) {
		d.fwd.serve(w, r, name, rt)
		return
	}
	if r.Header.Get("Upgrade") != "" {
		// A websocket lives past the server's request read timeout: clear
		// the deadline before the connection is handed over.
		_ = http.NewResponseController(w).SetReadDeadline(time.Time{})
	}
	r = r.WithContext(context.WithValue(r.Context(), targetKey{}, target{cluster: name, route: rt}))
	d.rp.ServeHTTP(w, r)
}

// sharedViewer decides a request of u, who does not own the cluster: ok
// when the cluster is shared with them, with the request to serve (whose
// context ends when their access does) and done to call after it; a nil
// request when it was answered (the check could not be made).
func (d *Dashboard) sharedViewer(w http.ResponseWriter, r *http.Request, name string, u *auth.User) (_ *http.Request, done func(), ok bool) {
	if d.watch == nil {
		return r, nil, false
	}
	ok, err := d.watch.viewers.MayView(r.Context(), name, u, true)
	if err != nil {
		d.log.Warn("dashboard: cannot check whether the cluster is shared", "cluster", name, "err", err)
		w.Header().Set("Retry-After", "5")
		dashError(w, r, http.StatusServiceUnavailable, "cannot check your access to this dashboard right now; try again in a moment")
		return nil, nil, false
	}
	if !ok {
		return r, nil, false
	}
	ctx, done := d.watch.hold(r.Context(), name, u)
	return r.WithContext(ctx), done, true
}

// crossSite says why a request must not be passed on ("" if it may): one
// with an unsafe method, or a websocket upgrade, that a browser marks as
// coming from another origin than the gateway's public one
// (crosssite.Reason), unless its credential is a bearer token, which no
// other site's page can make a browser send. A session cookie and Basic
// credentials are sent by the browser on its own (crosssite.Ambient).
func (d *Dashboard) crossSite(r *http.Request) string {
	if !crosssite.Ambient(r) {
		return ""
	}
	switch r.Method {
	case http.MethodGet, http.MethodHead, http.MethodOptions:
		if r.Header.Get("Upgrade") == "" {
			return ""
		}
	}
	return crosssite.Reason(r, d.publicURL)
}

// dashError answers the proxy's own errors: a page a person can read when
// a browser asked for HTML (a dashboard opened in a tab), the API's JSON
// error for API clients and for the dashboard's own scripts.
func dashError(w http.ResponseWriter, r *http.Request, status int, msg string) {
	e := errpage.Error{Status: status, Message: msg}
	switch status {
	case http.StatusUnauthorized:
		e.Code, e.Title = "unauthenticated", "Sign-in needed"
		e.Hint = "Open the link that gateway dashboard NAME prints, or open the dashboard URL in this browser to sign in."
	case http.StatusForbidden:
		e.Code, e.Title = "read_only", "Request refused"
	case http.StatusNotFound:
		e.Code, e.Title = "cluster_not_found", "Dashboard not found"
		e.Hint = "See your clusters with gateway list. If this browser is signed in as someone else, sign out at /auth/logout."
	case http.StatusServiceUnavailable:
		e.Code, e.Title = "unavailable", "Try again in a moment"
		e.Hint = "The gateway cannot check who you are right now (its database may be restarting)."
	case http.StatusBadGateway:
		e.Code, e.Title = "bad_gateway", "The dashboard did not answer"
		e.Hint = "The cluster's scheduler may be starting or stopping; try again in a moment (gateway show NAME says how it is)."
	}
	if strings.HasPrefix(msg, "cross-site") {
		e.Code = "cross_site"
		e.Hint = "Open the dashboard from its own address, not from another site's page."
	}
	errpage.Write(w, r, e)
}

// removeCookie drops one cookie from the request's Cookie headers and leaves
// every other byte as the browser sent it.
func removeCookie(r *http.Request, name string) {
	vals := r.Header.Values("Cookie")
	if len(vals) == 0 {
		return
	}
	var out []string
	changed := false
	for _, v := range vals {
		parts := strings.Split(v, ";")
		kept := parts[:0]
		for _, p := range parts {
			n, _, _ := strings.Cut(strings.TrimSpace(p), "=")
			if n == name {
				changed = true
				continue
			}
			kept = append(kept, p)
		}
		if joined := strings.TrimSpace(strings.Join(kept, ";")); joined != "" {
			out = append(out, joined)
		}
	}
	if !changed {
		return
	}
	r.Header.Del("Cookie")
	for _, v := range out {
		r.Header.Add("Cookie", v)
	}
}
