// Package server is the composition root: it assembles the server: store, provider, scheduling core,
// route table, API and the public listener, and runs them until shutdown.
package server

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/gatewayhq/gateway/api"
	"github.com/gatewayhq/gateway/auth"
	"github.com/gatewayhq/gateway/auth/devissuer"
	"github.com/gatewayhq/gateway/console"
	"github.com/gatewayhq/gateway/envs"
	"github.com/gatewayhq/gateway/images/build"
	"github.com/gatewayhq/gateway/internal/config"
	"github.com/gatewayhq/gateway/internal/crashpoint"
	"github.com/gatewayhq/gateway/internal/pki"
	"github.com/gatewayhq/gateway/internal/reqbound"
	"github.com/gatewayhq/gateway/providers"
	"github.com/gatewayhq/gateway/providers/local"
	"github.com/gatewayhq/gateway/proxy"
	"github.com/gatewayhq/gateway/proxy/routes"
	"github.com/gatewayhq/gateway/quota"
	"github.com/gatewayhq/gateway/scheduler"
	"github.com/gatewayhq/gateway/sharing"
	"github.com/gatewayhq/gateway/store"
)

// maxUnauthenticatedBody bounds a request body sent before its
// credentials were checked: sign-in forms are a few hundred bytes.
const maxUnauthenticatedBody = 64 << 10

// Gateway is one running gateway process.
type Gateway struct {
	cfg      *config.Config
	log      *slog.Logger
	store    *store.DB
	provider providers.Provider
	core     *scheduler.Core
	routes   *routes.Table
	proxy    *proxy.Server
	http     *http.Server
	ln       net.Listener

	builder       io.Closer // the image builder, when there is one
	console       *console.Server
	envs          *envs.Service
	devIssuer     *devissuer.Issuer
	devServer     *http.Server
	metricsServer *http.Server
	metricsAddr   net.Addr // nil: no metrics listener

	// PublicURL is where clients reach this gateway.
	PublicURL string
	// Issuer is the OIDC issuer the gateway trusts (the embedded one in dev).
	Issuer string

	dash dashboardCheck // whether local clusters can serve dashboards

	bench *benchWiring // benchmark schedules (bench.go)
	// benchSweep fails runs whose client went away (benchsweep.go).
	benchSweep *benchSweeper
}

// New opens everything the gateway needs and binds its port, but serves
// nothing until Run.
func New(ctx context.Context, cfg *config.Config, log *slog.Logger, version string) (_ *Gateway, err error) {
	if err := os.MkdirAll(cfg.DataDir, 0o700); err != nil {
		return nil, fmt.Errorf("gateway: create data_dir: %w", err)
	}
	g := &Gateway{cfg: cfg, log: log, routes: routes.New(), PublicURL: cfg.PublicURL}
	defer func() {
		if err != nil {
			g.closeAll()
		}
	}()
	// Names, not secrets: short is fine.
	gwID, err := persistentID(cfg.GatewayID, cfg.DataDir, "gateway-id", "gw-", 15)
	if err != nil {
		return nil, err
	}
	replicaID, err := persistentID(cfg.ReplicaID, cfg.DataDir, "replica-id", "r-", 14)
	if err != nil {
		return nil, err
	}

	if g.store, err = store.Open(ctx, cfg.Database.URL); err != nil {
		return nil, err
	}
	g.store.SetMaxOpenConns(cfg.Database.MaxConnections)

	b, err := backend(Backends(), cfg.Provider)
	if err != nil {
		return nil, err
	}
	quotas, err := newQuotas(cfg, g.store)
	if err != nil {
		return nil, fmt.Errorf("gateway: %w", err)
	}
	// Environments first: the docker provider pulls with the builder's
	// registry credentials.
	var pullAuth func(context.Context, string) (string, error)
	if b.RunsImages {
		var builder *build.Builder
		if g.envs, builder, err = setupEnvs(ctx, b, cfg, g.store, replicaID, quotas, log); err != nil {
			return nil, err
		}
		if builder != nil {
			g.builder, pullAuth = builder, builder.PullAuth
		}
	}
	if g.provider, err = newProvider(ctx, b, cfg, gwID, pullAuth, log); err != nil {
		return nil, err
	}
	if lp, ok := g.provider.(*local.Provider); ok {
		g.dash.start(ctx, lp, log, cfg.Dev)
	}

	if builder, ok := g.builder.(*build.Builder); ok {
		envs.StartImageGC(builder, g.store, cfg.Images.Retention)
	}
	price, gpus, err := pricing(cfg)
	if err != nil {
		return nil, err
	}
	var resolver scheduler.EnvResolver
	if g.envs != nil {
		resolver = g.envs
	}

	g.core = scheduler.New(scheduler.Config{
		GatewayID: gwID,
		Limits: scheduler.Limits{MaxWorkers: cfg.Cluster.MaxWorkers, MaxWorkerThreads: cfg.Cluster.MaxWorkerThreads,
			MaxWorkerMemory: cfg.Cluster.MaxWorkerMemory, DefaultIdleTimeout: cfg.Cluster.IdleTimeout, MaxIdleTimeout: cfg.Cluster.MaxIdleTimeout,
			Images: b.RunsImages},
		Envs:              resolver,
		MaxLifetime:       cfg.Cluster.MaxLifetime,
		HeartbeatTimeout:  cfg.Cluster.HeartbeatTimeout,
		HeartbeatInterval: cfg.Cluster.HeartbeatInterval,
		ReplicaID:         replicaID,
		LeaseTTL:          cfg.Cluster.LeaseTTL,
		Reaper:            scheduler.ReaperConfig{Interval: cfg.Cluster.ReapInterval, Grace: cfg.Cluster.ReapGrace, DryRun: cfg.Cluster.ReapDryRun},
		StartTimeout:      startTimeout(b, cfg),
		PollInterval:      cfg.Cluster.PollInterval,
		WorkerRestarts:    cfg.Cluster.WorkerRestarts,
		Quotas:            quotas,
		Price:             price,
		InstanceGPUs:      gpus,
		SchedulerGPU:      cfg.Cluster.SchedulerGPU,
		Sharing:           sharing.Setting(cfg.Cluster.Sharing),
	}, g.store, g.provider, g.routes, log)

	tlsCfg, err := g.tlsConfig()
	if err != nil {
		return nil, err
	}
	// With replicas, clusters reconciled elsewhere are routed from the store.
	g.routes.SetFallback(func(name string) (routes.Route, bool) {
		cl, err := g.store.GetCluster(context.Background(), name)
		if err != nil || cl.Status != store.Running || cl.SchedulerAddress == "" {
			return routes.Route{}, false
		}
		return routes.RouteFrom(cl.Owner, cl.SchedulerAddress, cl.DashboardAddress, cl.TLSCert, cl.TLSKey), true
	})
	g.proxy = proxy.New(proxy.Config{TLS: tlsCfg, AllowPlainHTTP: cfg.TLS.AllowPlainHTTP, ClusterDomain: cfg.TLS.ClusterDomain, Logger: log,
		HandshakeTimeout: cfg.Proxy.HandshakeTimeout, IdleTimeout: cfg.Proxy.IdleTimeout, MaxConnections: cfg.Proxy.MaxConnections,
		MaxConnectionsPerCluster: cfg.Proxy.MaxConnectionsPerCluster, MaxConnectionsPerSource: cfg.Proxy.MaxConnectionsPerSource,
		MaxHTTPConnections: cfg.Proxy.MaxHTTPConnections, MaxHTTPConnectionsPerSource: cfg.Proxy.MaxHTTPConnectionsPerSource}, g.routes)

	if g.ln, err = net.Listen("tcp", cfg.Listen); err != nil {
		return nil, fmt.Errorf("gateway: listen on %s: %w (is another gateway running? set listen or --listen)", cfg.Listen, err)
	}
	if u, err := url.Parse(g.PublicURL); err == nil && u.Port() == "0" {
		// Listening on port 0 (tests): publish the port actually bound.
		_, port, _ := net.SplitHostPort(g.ln.Addr().String())
		u.Host = net.JoinHostPort(u.Hostname(), port)
		g.PublicURL = u.String()
	}

	as, err := g.setupAuth(ctx)
	if err != nil {
		return nil, err
	}
	access := as.access
	authn := g.wrapBenchAuth(as.authn)
	// Shared through the store: replicas behind one load balancer must
	// accept each other's browser sessions.
	key, err := g.store.SharedKey(ctx, "session-key", 32)
	if err != nil {
		return nil, err
	}
	sessions, err := auth.NewSessions(key, cfg.Auth.SessionTTL, strings.HasPrefix(g.PublicURL, "https://"))
	if err != nil {
		return nil, err
	}
	sessions.SetStore(g.store, access)
	limiter := auth.NewFailureLimiter(cfg.Auth.FailedPerMinute)
	// Environment uploads are spooled here, each file unlinked as soon as
	// it is made: nothing is left behind, whatever ends a request.
	uploads := filepath.Join(cfg.DataDir, "tmp", "uploads")
	if err := os.MkdirAll(uploads, 0o700); err != nil {
		return nil, fmt.Errorf("gateway: create the upload directory: %w", err)
	}
	apiSrv := api.New(api.Config{Version: version, Provider: cfg.Provider, Region: b.Region(cfg.ProviderSection(b.Name)), PublicURL: g.PublicURL, Issuer: g.Issuer, ClientID: cfg.Auth.OIDC.ClientID,
		OnExceed: cfg.Quotas.OnExceed, DashboardProblem: g.dash.forProvider,
		MaxUserBodyBytes: int64(cfg.API.MaxUserBodyMiB) << 20, UploadDir: uploads}, g.core, authn, sessions, log)
	apiSrv.SetAdmin(quotas, g.store)
	apiSrv.SetTokenStore(g.store)
	apiSrv.SetDatabase(g.store) // /api/health reports it; its outages answer 503
	apiSrv.SetBench(g.store)
	apiSrv.SetBenchLeases(g.store, cfg.Bench.RunLease)
	g.benchSweep = &benchSweeper{store: g.store, clusters: g.core, lease: cfg.Bench.RunLease, now: time.Now, log: log}
	// One handler for the API and the dashboards: scheduled benchmarks
	// use both, in process.
	mux := http.NewServeMux()
	g.setupBench(apiSrv, mux, replicaID, version)
	apiSrv.SetSessionStore(g.store)
	apiSrv.SetFailureLimiter(limiter)
	// Shared like the session key: a cookie one replica set works on all.
	cookieKey, err := g.store.SharedKey(ctx, "api-cookie-key", 32)
	if err != nil {
		return nil, err
	}
	if err := apiSrv.SetAPICookie(cookieKey, strings.HasPrefix(g.PublicURL, "https://")); err != nil {
		return nil, err
	}
	browser := g.browserLogin(as)
	if browser != nil {
		apiSrv.SetBrowserLogin(browser)
	}
	if g.envs != nil {
		apiSrv.SetEnvs(g.envs)
	}
	g.proxy.SetLoginRedirect(api.LoginURL)
	g.proxy.SetPublicURL(g.PublicURL)
	g.proxy.SetViewers(viewers{g.core}, 0)
	g.proxy.SetDashboardProblem(g.dashboardProblem)
	mux.Handle(proxy.DashboardPrefix, g.proxy.DashboardHandler(dashboardAuth(authn, sessions, limiter)))
	// The console has the rest of the paths: the root, for browsers.
	g.console, err = console.New(console.Config{PublicURL: g.PublicURL, Version: version, SignIn: browser != nil, SignInAtOnce: browser != nil && browser.Hub != nil,
		LoginURL: api.LoginURL, Explain: api.Explain}, g.core, sessions, log)
	if err != nil {
		return nil, err
	}
	g.console.SetClusterPages(g.core, g.store)
	g.console.SetSharing(consoleSharing{g.core})
	// The account pages use what the API's token, session, quota and
	// usage endpoints use.
	g.console.SetAccount(console.Account{Tokens: g.store, Sessions: g.store, Quotas: quotas, Records: g.store,
		Forget: apiSrv.Forget, OnExceed: string(quotas.OnExceed())})
	g.console.SetAdmin(g.core, quotas, g.store)
	// The same environment service and results store the API has; a
	// gateway that builds no environments says so in the section.
	var consoleEnvs console.Envs
	if g.envs != nil {
		consoleEnvs = g.envs
	}
	g.console.SetEnvs(consoleEnvs)
	if err := g.console.SetBench(g.store); err != nil {
		return nil, err
	}
	mux.Handle("/api/", apiSrv)
	mux.Handle("/auth/", apiSrv)
	mux.Handle("/", g.console)
	if cfg.MetricsListen != "" {
		mln, err := g.serveMetrics(cfg.MetricsListen, apiSrv.HealthDetails())
		if err != nil {
			return nil, err
		}
		g.metricsAddr = mln.Addr()
		log.Info("metrics", "url", "http://"+mln.Addr().String()+"/metrics")
	}
	var handler http.Handler = mux
	if cfg.Dev {
		handler = devHostGuard(mux, g.ln.Addr(), g.PublicURL)
	}
	// Outermost: it sets the connection's read deadline.
	handler = reqbound.Handler(reqbound.Bounds{Unauthenticated: cfg.Proxy.HTTPUnauthenticatedBodyTimeout,
		MaxUnauthenticated: maxUnauthenticatedBody, Authenticated: cfg.Proxy.HTTPBodyTimeout}, handler)
	points := crashpoint.From(ctx)
	g.http = &http.Server{
		Handler: handler,
		// Requests carry the crash test's points, as the core's work does.
		BaseContext: func(net.Listener) context.Context { return crashpoint.With(context.Background(), points) },
		// Tells reqbound's marks to the connection: one that serves
		// nothing may be closed to make room at the HTTP cap.
		ConnContext: g.proxy.ConnContext,
		// Also bounds an HTTPS connection's handshake. Requests arrive
		// before anyone knows who sent them: keep it short.
		ReadHeaderTimeout: cfg.Proxy.HTTPHeaderTimeout,
		// Bounds slow request bodies once authenticated (reqbound bounds
		// them until then); dashboard websockets clear it when they
		// upgrade.
		ReadTimeout: cfg.Proxy.HTTPBodyTimeout,
		IdleTimeout: 120 * time.Second,
		ErrorLog:    slog.NewLogLogger(log.Handler(), slog.LevelDebug),
	}
	// The console's event streams end when the server shuts down, which
	// would otherwise wait for them.
	g.http.RegisterOnShutdown(g.console.Close)
	return g, nil
}

func (g *Gateway) tlsConfig() (*tls.Config, error) {
	var cert tls.Certificate
	var err error
	switch {
	case g.cfg.TLS.CertFile != "":
		cert, err = tls.LoadX509KeyPair(g.cfg.TLS.CertFile, g.cfg.TLS.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("gateway: load tls.cert_file/tls.key_file: %w", err)
		}
	case g.cfg.TLS.CertPEM != "":
		cert, err = tls.X509KeyPair([]byte(g.cfg.TLS.CertPEM), []byte(g.cfg.TLS.KeyPEM))
		if err != nil {
			return nil, fmt.Errorf("gateway: tls.cert_pem/tls.key_pem: %w", err)
		}
	default:
		host, _, _ := net.SplitHostPort(g.cfg.Listen)
		hosts := []string{"localhost", "127.0.0.1", "::1"}
		if u, err := url.Parse(g.cfg.PublicURL); err == nil {
			hosts = append(hosts, u.Hostname())
		}
		if host != "" {
			hosts = append(hosts, host)
		}
		cert, err = pki.LoadOrCreateServing(g.cfg.DataDir, hosts, time.Now())
		if err != nil {
			return nil, err
		}
	}
	return &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12, NextProtos: []string{"http/1.1"}}, nil
}

// Addr is the bound public address.
func (g *Gateway) Addr() net.Addr { return g.ln.Addr() }

// MetricsAddr is the bound metrics address, nil without metrics_listen.
func (g *Gateway) MetricsAddr() net.Addr { return g.metricsAddr }

// Run serves until ctx ends, then shuts down: it stops accepting, drains
// HTTP requests, stops the reconcile loop, and stops or leaves the local
// clusters according to cluster.on_shutdown.
func (g *Gateway) Run(ctx context.Context) error {
	runCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	defer cancel()
	var wg sync.WaitGroup
	errc := make(chan error, 3)
	wg.Add(3)
	benchDone := make(chan struct{})
	go func() { // scheduled benchmark runs; stopped before the clusters are
		defer close(benchDone)
		go g.benchSweep.loop(runCtx)
		g.runBench(runCtx)
	}()
	go func() {
		defer wg.Done()
		if err := g.core.Run(runCtx); err != nil {
			errc <- err
		}
	}()
	go func() {
		defer wg.Done()
		if err := g.http.Serve(g.proxy.HTTPListener(g.ln.Addr())); err != nil && !errors.Is(err, http.ErrServerClosed) {
			errc <- err
		}
	}()
	go func() {
		defer wg.Done()
		if err := g.proxy.Serve(runCtx, g.ln); err != nil {
			errc <- err
		}
	}()
	g.log.Info("gateway listening", "addr", g.ln.Addr().String(), "public_url", config.RedactURL(g.PublicURL), "provider", g.provider.Name(), "data_dir", g.cfg.DataDir)

	var runErr error
	select {
	case <-ctx.Done():
	case runErr = <-errc:
		g.log.Error("gateway failed", "err", runErr)
	}
	g.log.Info("shutting down")
	shutCtx, shutCancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer shutCancel()
	_ = g.ln.Close()
	_ = g.http.Shutdown(shutCtx)
	cancel()
	wg.Wait()
	<-benchDone
	leave := g.cfg.Cluster.OnShutdown == "leave"
	if !leave {
		g.core.Shutdown(shutCtx)
	} else {
		g.core.ReleaseLeases(shutCtx) // other replicas take over at once
	}
	g.proxy.Close()
	if c, ok := g.provider.(providers.Closer); ok {
		if err := c.Close(shutCtx, leave); err != nil {
			g.log.Error("provider shutdown", "err", err)
		}
	}
	if leave {
		g.log.Info("leaving clusters running for the next gateway to re-adopt")
	}
	g.closeAll()
	g.log.Info("gateway stopped")
	return runErr
}

// persistentID is configured, or else made once and kept in dir/file, so
// that a restarted gateway is the same gateway (ownership tag) and the same
// replica (leases).
func persistentID(configured, dir, file, prefix string, length int) (string, error) {
	if configured != "" {
		return configured, nil
	}
	id, err := auth.LoadOrCreateToken(filepath.Join(dir, file), prefix)
	if err != nil {
		return "", err
	}
	return id[:length], nil
}

// Close releases what New acquired, for a gateway that will not Run.
func (g *Gateway) Close() { g.closeAll() }

func (g *Gateway) closeAll() {
	if g.console != nil {
		g.console.Close()
	}
	if g.builder != nil {
		g.builder.Close() // its builds, cancelled, are stored as failed
	}
	if g.envs != nil {
		g.envs.Close()
	}
	if g.devServer != nil {
		g.devServer.Close()
	}
	if g.metricsServer != nil {
		g.metricsServer.Close()
	}
	if g.ln != nil {
		g.ln.Close()
	}
	if g.store != nil {
		g.store.Close()
	}
}

// viewers lets the dashboards ask the core whether a cluster is shared
// with someone who does not own it.
type viewers struct{ core *scheduler.Core }

func (v viewers) MayView(ctx context.Context, cluster string, u *auth.User, note bool) (bool, error) {
	return v.core.MayView(ctx, quota.Who{ID: u.Owner(), Name: u.Name, Groups: u.Groups}, cluster, note)
}

// consoleSharing is the core's sharing as the console asks for it.
type consoleSharing struct{ *scheduler.Core }

func (c consoleSharing) SharedWith(ctx context.Context, who quota.Who, statuses []store.Status) ([]console.SharedCluster, error) {
	found, err := c.Core.SharedWith(ctx, who, statuses)
	out := make([]console.SharedCluster, len(found))
	for i, f := range found {
		out[i] = console.SharedCluster{Cluster: f.Cluster, Grant: f.Grant}
	}
	return out, err
}
