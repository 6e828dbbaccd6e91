// Package config loads the gateway server's configuration.
//
// Sources, highest precedence first: command-line flags, GATEWAY_*
// environment variables (the key in upper case with dots as underscores:
// cluster.max_workers is GATEWAY_CLUSTER_MAX_WORKERS), the YAML file named by
// --config or GATEWAY_CONFIG, then the built-in defaults below. Every key has
// a default, which is what makes it known to the environment layer.
//
// The backends' keys (providers.<name>.*) are not here: each backend
// declares its Section, and a Schema made of the sections loads them.
package config

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"time"
)

// EnvPrefix prefixes every environment variable.
const EnvPrefix = "GATEWAY"

// Config is the server configuration. Fields tagged secret:"true" are
// redacted by Redacted.
type Config struct {
	// Listen is the one public address: API, dashboards and scheduler traffic.
	Listen string `mapstructure:"listen" doc:"address of the single public port (API, dashboards, Dask traffic)"`
	// PublicURL is how users reach Listen; derived from Listen when empty.
	PublicURL string `mapstructure:"public_url" doc:"URL users and clients reach the gateway at; derived from listen when empty"`
	DataDir   string `mapstructure:"data_dir" doc:"directory for the SQLite database, logs and local clusters"`
	GatewayID string `mapstructure:"gateway_id" doc:"ownership tag put on every resource this gateway starts"`
	ReplicaID string `mapstructure:"replica_id" doc:"this process among replicas sharing one database (default: made once per data_dir); a restart keeps its leases"`
	Dev       bool   `mapstructure:"dev" doc:"development mode: plain HTTP allowed, dev credentials (set by gateway dev)"`
	// MetricsListen serves Prometheus metrics on their own port.
	MetricsListen string `mapstructure:"metrics_listen" doc:"address of the Prometheus /metrics listener, which also serves /health with the details /api/health tells admins only (empty: none)"`

	Database struct {
		URL string `mapstructure:"url" secret:"true" doc:"sqlite:///path/to/gateway.db (default: in data_dir)"`
		// Password replaces url's password, so that a platform's secret
		// store can hold the password alone (RDS, Cloud SQL) while the
		// rest of the URL is plain configuration.
		Password       string `mapstructure:"password" secret:"true" doc:"PostgreSQL password, replacing the one in url (for secret stores that hold the password alone)"`
		MaxConnections int    `mapstructure:"max_connections" doc:"most connections this process opens to PostgreSQL (replicas add up against the server's max_connections)"`
	} `mapstructure:"database"`

	TLS struct {
		CertFile string `mapstructure:"cert_file" doc:"PEM certificate for the gateway's HTTPS; self-signed in data_dir when empty"`
		KeyFile  string `mapstructure:"key_file" doc:"PEM key for cert_file"`
		// CertPEM and KeyPEM carry the same as text, for platforms that
		// inject secrets as environment variables rather than files.
		CertPEM string `mapstructure:"cert_pem" doc:"PEM certificate chain for the gateway's HTTPS, as text (instead of cert_file)"`
		KeyPEM  string `mapstructure:"key_pem" secret:"true" doc:"PEM key for cert_pem, as text (instead of key_file)"`
		// AllowPlainHTTP also serves plain HTTP; on by default only in dev.
		AllowPlainHTTP bool   `mapstructure:"allow_plain_http" doc:"also serve plain HTTP on the public port (default true only in dev)"`
		ClusterDomain  string `mapstructure:"cluster_domain" doc:"also route TLS server names <cluster>.<cluster_domain> to schedulers"`
	} `mapstructure:"tls"`

	Auth struct {
		OIDC struct {
			Issuer         string        `mapstructure:"issuer" doc:"OpenID Connect issuer URL (gateway dev embeds one)"`
			ClientID       string        `mapstructure:"client_id" doc:"public OIDC client of the CLI and the browser login; also the audience"`
			ClientSecret   string        `mapstructure:"client_secret" secret:"true" doc:"client secret, for providers that require one for the browser login"`
			Audience       string        `mapstructure:"audience" doc:"audience ID tokens must carry (default: client_id)"`
			UsernameClaims []string      `mapstructure:"username_claims" doc:"claims tried in order for the user name"`
			GroupsClaim    string        `mapstructure:"groups_claim" doc:"claim holding the user's groups"`
			ClockSkew      time.Duration `mapstructure:"clock_skew" doc:"tolerated clock difference for exp, nbf and iat"`
		} `mapstructure:"oidc"`
		// JupyterHub makes a hub's users users of the gateway: their hub
		// tokens (what dask-gateway's JupyterHubAuth sends) and, as the
		// hub's OAuth client, their browser sign-in.
		JupyterHub struct {
			APIURL            string        `mapstructure:"api_url" doc:"the JupyterHub's REST API, e.g. http://hub:8081/hub/api: hub users' tokens are accepted, checked with the hub (empty: no JupyterHub)"`
			APIToken          string        `mapstructure:"api_token" secret:"true" doc:"the api_token of the gateway's service on the hub (also its OAuth client secret)"`
			CacheTTL          time.Duration `mapstructure:"cache_ttl" doc:"how long the hub's answer about a token, yes or no, is reused: a token revoked on the hub stops within it"`
			Identity          string        `mapstructure:"identity" doc:"whose a hub user is: jupyterhub (jupyterhub:<name>, a user of its own) or oidc_subject (oidc:<name>: the hub's user names are the subjects of auth.oidc.issuer, the same users)"`
			OAuthClientID     string        `mapstructure:"oauth_client_id" doc:"the oauth_client_id of the gateway's hub service (service-<name>): browsers sign in with the hub (empty: no hub sign-in)"`
			OAuthRedirectURI  string        `mapstructure:"oauth_redirect_uri" doc:"the oauth_redirect_uri of the gateway's hub service (default: <public_url>/auth/jupyterhub/callback; its path must be that)"`
			OAuthAuthorizeURL string        `mapstructure:"oauth_authorize_url" doc:"the hub's authorization page as browsers reach it, e.g. https://hub.example/hub/api/oauth2/authorize (default: <api_url>/oauth2/authorize)"`
		} `mapstructure:"jupyterhub"`
		// BrowserLogin picks the sign-in of browsers when both OIDC and a
		// hub could do it.
		BrowserLogin    string        `mapstructure:"browser_login" doc:"how browsers sign in: oidc or jupyterhub (default: jupyterhub when auth.jupyterhub.oauth_client_id is set, else oidc when there is an OIDC provider)"`
		AdminGroups     []string      `mapstructure:"admin_groups" doc:"members of these groups are admins"`
		AdminUsers      []string      `mapstructure:"admin_users" doc:"these users are admins"`
		SessionTTL      time.Duration `mapstructure:"session_ttl" doc:"lifetime of a browser session (dashboards); sessions are kept in the store and end at logout or revocation"`
		GroupsMaxAge    time.Duration `mapstructure:"groups_max_age" doc:"how long the groups of a user's last OIDC login count for their API tokens and browser sessions; after it they keep no group-derived admin or quota until the next login"`
		FailedPerMinute int           `mapstructure:"failed_per_minute" doc:"failed authentications allowed per client address per minute before 429"`
		DevIssuerListen string        `mapstructure:"dev_issuer_listen" doc:"loopback address of the development OIDC issuer that gateway dev embeds"`
		// DevTokenLifetime is short in tests of renewal.
		DevTokenLifetime time.Duration `mapstructure:"dev_token_lifetime" doc:"how long the development issuer's ID and access tokens last (gateway dev; the CLI renews them with their refresh token)"`
	} `mapstructure:"auth"`

	Provider string `mapstructure:"provider" doc:"backend for new clusters (Schema.Docs lists the registered ones)"`
	// providers holds each registered backend's section (providers.<name>.*),
	// decoded into the type its Section declares.
	providers map[string]any

	Images struct {
		Repository    string           `mapstructure:"repository" doc:"registry repository environment images are pushed to (ECR, Artifact Registry, any OCI registry); empty: the local Docker engine only (docker provider)"`
		Auth          string           `mapstructure:"auth" doc:"registry credentials: auto (ECR or Google by host, else basic when a username is set, else docker's config), none, basic, ecr or google"`
		Username      string           `mapstructure:"username" doc:"registry user name (basic auth)"`
		Password      string           `mapstructure:"password" secret:"true" doc:"registry password or token (basic auth)"`
		AWSRegion     string           `mapstructure:"aws_region" doc:"region of the ECR registry (default: from the repository host)"`
		Bases         []map[string]any `mapstructure:"bases" doc:"base images environments are built on: a list of {python: 3.11, image: <ref>, gpu: false, platform: linux/amd64}"`
		PipIndexURL   string           `mapstructure:"pip_index_url" doc:"package index builds install missing packages from (empty: pip's default)"`
		MaxCodeMiB    int              `mapstructure:"max_code_mib" doc:"largest user code (editable packages and local modules) an environment may carry, MiB"`
		BuildTimeout  time.Duration    `mapstructure:"build_timeout" doc:"longest one image build may take before it is stopped"`
		BuildNetwork  string           `mapstructure:"build_network" doc:"Docker network builds run in: host (an index on the gateway host's loopback works) or bridge (builds cannot reach the host's loopback)"`
		Builder       string           `mapstructure:"builder" doc:"how environment images are made: auto (one layer per wheel, no engine needed; packages without a fitting wheel go to the Docker builder when an engine answers), layers (wheels only, never an engine) or docker (pip in a Docker build)"`
		WheelCacheDir string           `mapstructure:"wheel_cache_dir" doc:"where downloaded wheels and the layers made of them are cached, in wheels/ and layers/ (default: <data_dir>/cache; one gateway per directory)"`
		WheelCacheMiB int              `mapstructure:"wheel_cache_mib" doc:"largest size of the wheel cache, and of the layer cache, MiB each (least recently used files are removed past it)"`
		MaxPackageMiB int              `mapstructure:"max_package_mib" doc:"largest wheel or conda package a build accepts, MiB, compressed and unpacked"`
		CondaChannels []map[string]any `mapstructure:"conda_channels" doc:"conda channels builds fetch conda packages from, by the name clients use: a list of {name: conda-forge, url: https://conda.anaconda.org/conda-forge}; a channel not listed is refused"`
		SourceBuilds  bool             `mapstructure:"source_builds" doc:"let builds install source distributions, which runs their build scripts; by default only wheels are installed"`
		Environments  []map[string]any `mapstructure:"environments" doc:"environments published to every user: a list of {name: <name>, image: <ref>, description: <text>}"`
		// AllowedRegistries is the admin's allow-list for images users name
		// themselves; the environment repository and published images are
		// always allowed (to those entitled to them).
		AllowedRegistries []string      `mapstructure:"allowed_registries" doc:"images users may name with --image, as globs over the full reference (registry/repository:tag or @digest; * matches any characters including /), e.g. ghcr.io/myorg/*; Docker Hub images match as python:3.11 or docker.io/library/python:3.11; published images and the provider's default image are always allowed, environment images only to the users who asked for them; image IDs never"`
		Retention         time.Duration `mapstructure:"retention" doc:"built environment images that no cluster uses and nobody asked for within this long are removed from the engine (checked hourly; 0: never)"`
	} `mapstructure:"images"`

	// API bounds what users' requests may cost the gateway.
	API struct {
		MaxUserBodyMiB int `mapstructure:"max_user_body_mib" doc:"request body bytes one user may have in flight at once, over all their requests, MiB; over it, requests are answered 429 unread (at least images.max_code_mib x 4/3 + 4, so that one environment upload fits)"`
	} `mapstructure:"api"`

	// Proxy bounds the Dask (TLS passthrough) connections the public port
	// holds, so that a flood cannot exhaust the gateway's descriptors.
	Proxy struct {
		HandshakeTimeout         time.Duration `mapstructure:"handshake_timeout" doc:"a passthrough connection must finish its TLS handshake with the scheduler within this (under TLS 1.2: and send its first data)"`
		IdleTimeout              time.Duration `mapstructure:"idle_timeout" doc:"a passthrough connection with no bytes either way this long is closed (Dask clients may sit idle: keep it long)"`
		MaxConnections           int           `mapstructure:"max_connections" doc:"most passthrough connections at once in total (0: a third of the descriptor limit, as each holds two descriptors)"`
		MaxConnectionsPerCluster int           `mapstructure:"max_connections_per_cluster" doc:"most passthrough connections at once to one cluster (0: no cap)"`
		MaxConnectionsPerSource  int           `mapstructure:"max_connections_per_source" doc:"most passthrough connections at once from one client IP address (0: no cap)"`
		// The HTTP side: caps like the passthrough's, and short bounds on
		// what anyone may send before authenticating.
		MaxHTTPConnections             int           `mapstructure:"max_http_connections" doc:"most HTTP connections (HTTPS or plain, and connections that have not sent their first bytes yet) at once in total (0: a sixth of the descriptor limit)"`
		MaxHTTPConnectionsPerSource    int           `mapstructure:"max_http_connections_per_source" doc:"most HTTP connections at once from one client IP address (0: a sixteenth of max_http_connections, at least 8)"`
		HTTPHeaderTimeout              time.Duration `mapstructure:"http_header_timeout" doc:"a request's headers (and an HTTPS connection's TLS handshake) must arrive within this"`
		HTTPUnauthenticatedBodyTimeout time.Duration `mapstructure:"http_unauthenticated_body_timeout" doc:"a request body sent without valid credentials (a sign-in form) must arrive within this of its headers; such a body is at most 64 KiB"`
		HTTPBodyTimeout                time.Duration `mapstructure:"http_body_timeout" doc:"an authenticated request's body (an environment's code) must arrive within this"`
	} `mapstructure:"proxy"`

	Cluster struct {
		MaxWorkers        int           `mapstructure:"max_workers" doc:"most workers one cluster may have (scale requests are clamped)"`
		MaxWorkerThreads  int           `mapstructure:"max_worker_threads" doc:"most threads per worker"`
		MaxWorkerMemory   float64       `mapstructure:"max_worker_memory" doc:"most memory per worker, GiB"`
		StartTimeout      time.Duration `mapstructure:"start_timeout" doc:"a scheduler not ready this long after the request fails the cluster (0: 60s for local, 10m for cloud backends, which boot machines and pull images)"`
		PollInterval      time.Duration `mapstructure:"poll_interval" doc:"how often running clusters are health-checked"`
		LeaseTTL          time.Duration `mapstructure:"lease_ttl" doc:"how long a replica's hold on a cluster lasts unless renewed; a dead replica's clusters move on after it"`
		WorkerRestarts    int           `mapstructure:"worker_restarts" doc:"unexpected worker exits replaced before the cluster is failed"`
		OnShutdown        string        `mapstructure:"on_shutdown" doc:"what gateway shutdown does to local clusters: stop, or leave them to be re-adopted"`
		IdleTimeout       time.Duration `mapstructure:"idle_timeout" doc:"clusters with no tasks and no clients this long are stopped (0: never), unless a request sets its own"`
		MaxIdleTimeout    time.Duration `mapstructure:"max_idle_timeout" doc:"the longest idle timeout a request may set (0: no bound)"`
		MaxLifetime       time.Duration `mapstructure:"max_lifetime" doc:"clusters running this long are stopped, busy or not (0: never)"`
		HeartbeatTimeout  time.Duration `mapstructure:"heartbeat_timeout" doc:"a running cluster whose scheduler does not answer this long is failed"`
		HeartbeatInterval time.Duration `mapstructure:"heartbeat_interval" doc:"how often an idle cluster's scheduler says it is there; only a frozen scheduler process waits this long to be noticed"`
		ReapInterval      time.Duration `mapstructure:"reap_interval" doc:"how often resources under this gateway's ownership tag that no active cluster owns are looked for (0: never)"`
		ReapGrace         time.Duration `mapstructure:"reap_grace" doc:"leftover resources younger than this are spared"`
		ReapDryRun        bool          `mapstructure:"reap_dry_run" doc:"only log what the reaper would stop"`
		SchedulerGPU      bool          `mapstructure:"scheduler_gpu" doc:"give the scheduler of a GPU cluster a small GPU of the workers' model (cloud backends; Dask deserialises graphs on the scheduler)"`
		Sharing           string        `mapstructure:"sharing" doc:"what owners may share their clusters with: off (nothing; shares already made grant nothing), groups (only groups they belong to) or any (any user or group)"`
	} `mapstructure:"cluster"`

	Quotas struct {
		OnExceed string `mapstructure:"on_exceed" doc:"what a scale beyond a user's quota does: clamp (scale to what fits, and say so) or refuse"`
		// Entries are decoded strictly by the quota package: a list, so
		// that subjects keep their case and dots (map keys would not).
		Entries []map[string]any `mapstructure:"entries" doc:"quota entries: a list of {subject: default | user:<name> | group:<name>, <limit>: <value>, ...} (see README, Quotas)"`
	} `mapstructure:"quotas"`

	Pricing struct {
		InstanceTypes []map[string]any `mapstructure:"instance_types" doc:"per instance type: a list of {name: <instance type>, price_hour: <USD>, gpus: <count>, gpu_type: <short name>}; price_hour overrides the built-in approximate table, gpus/gpu_type declare GPUs the gateway does not count by itself (only NVIDIA's count)"`
		VCPUHour      float64          `mapstructure:"vcpu_hour" doc:"estimated USD per vCPU-hour of members without an instance type (local, docker)"`
		MemoryGiBHour float64          `mapstructure:"memory_gib_hour" doc:"estimated USD per GiB-hour of memory of members without an instance type"`
	} `mapstructure:"pricing"`

	// Bench configures the benchmark schedules the gateway runs itself.
	Bench struct {
		AlertWebhook string `mapstructure:"alert_webhook" secret:"true" doc:"URL a JSON alert is POSTed to when a scheduled benchmark run finds a regression (empty: none); treated as a secret, since such URLs often carry a token"`
		// Python turns scheduled runs on: a suite is the user's Python
		// code, and a scheduled run executes it on the gateway's host as
		// the gateway's own Unix user.
		Python string `mapstructure:"python" doc:"the Python (with dask.distributed, the environments' versions) that runs scheduled benchmark suites on the gateway's host, as the gateway's own Unix user: set it only if every user may act as the gateway; empty: no schedules (gateway dev: providers.local.python, the clusters' Python)"`
		// ScheduleInterval is how often each replica looks for due schedules.
		ScheduleInterval time.Duration `mapstructure:"schedule_interval" doc:"how often each replica looks for benchmark schedules that are due"`
		// RunLease bounds how long a run outlives its client.
		RunLease time.Duration `mapstructure:"run_lease" doc:"how long a benchmark run is kept without news from its client (gateway bench run renews it every third of this); after it the gateway stops the run's clusters and marks it failed"`
	} `mapstructure:"bench"`

	Log struct {
		Level  string `mapstructure:"level" doc:"debug, info, warn or error"`
		Format string `mapstructure:"format" doc:"text or json"`
		// File keeps the logs out of a terminal that shows other things:
		// scripts/dev.sh's banner, the first cluster's progress and snippet.
		File string `mapstructure:"file" doc:"file the logs are appended to (created 0600 with its folder); empty or -: standard error"`
	} `mapstructure:"log"`
}

// Browser sign-ins (auth.browser_login).
const (
	BrowserLoginOIDC       = "oidc"
	BrowserLoginJupyterHub = "jupyterhub"
)

// HubCallbackPath is where JupyterHub sends browsers back to the gateway.
const HubCallbackPath = "/auth/jupyterhub/callback"

// hubProblems checks auth.jupyterhub.* and auth.browser_login, and fills in
// the sign-in the browsers get (empty: none, with a hub that is no OAuth
// client and no OIDC provider).
func (c *Config) hubProblems() []string {
	var problems []string
	h := &c.Auth.JupyterHub
	if h.APIURL != "" {
		if u, err := url.Parse(h.APIURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			problems = append(problems, fmt.Sprintf("auth.jupyterhub.api_url %q must be the hub's http:// or https:// API URL, e.g. http://hub:8081/hub/api", h.APIURL))
		}
		if h.APIToken == "" {
			problems = append(problems, "auth.jupyterhub.api_token must be the api_token of the gateway's service on the hub (see docs/operating.md, JupyterHub)")
		}
	} else if h.APIToken != "" || h.OAuthClientID != "" {
		problems = append(problems, "auth.jupyterhub.api_url must name the hub's API for auth.jupyterhub.api_token and oauth_client_id to work")
	}
	if h.CacheTTL <= 0 || h.CacheTTL > 5*time.Minute {
		problems = append(problems, "auth.jupyterhub.cache_ttl must be positive and at most 5m (e.g. 30s): a token revoked on the hub works until it ends")
	}
	if h.Identity != "jupyterhub" && h.Identity != "oidc_subject" {
		problems = append(problems, fmt.Sprintf("auth.jupyterhub.identity %q must be jupyterhub or oidc_subject", h.Identity))
	}
	if h.OAuthClientID != "" && !strings.HasPrefix(h.OAuthClientID, "service-") {
		problems = append(problems, fmt.Sprintf("auth.jupyterhub.oauth_client_id %q must start with service- (JupyterHub requires it of services)", h.OAuthClientID))
	}
	if h.OAuthRedirectURI != "" {
		if u, err := url.Parse(h.OAuthRedirectURI); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.Path != HubCallbackPath {
			problems = append(problems, fmt.Sprintf("auth.jupyterhub.oauth_redirect_uri %q must be an http:// or https:// URL of the gateway ending in %s", h.OAuthRedirectURI, HubCallbackPath))
		}
	}
	if h.OAuthAuthorizeURL != "" {
		if u, err := url.Parse(h.OAuthAuthorizeURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			problems = append(problems, fmt.Sprintf("auth.jupyterhub.oauth_authorize_url %q must be an http:// or https:// URL", h.OAuthAuthorizeURL))
		}
	}
	switch c.Auth.BrowserLogin {
	case "":
		switch {
		case h.OAuthClientID != "":
			c.Auth.BrowserLogin = BrowserLoginJupyterHub
		case c.Auth.OIDC.Issuer != "" || c.Dev:
			c.Auth.BrowserLogin = BrowserLoginOIDC
		}
	case BrowserLoginOIDC:
		if c.Auth.OIDC.Issuer == "" && !c.Dev {
			problems = append(problems, "auth.browser_login oidc needs auth.oidc.issuer")
		}
	case BrowserLoginJupyterHub:
		if h.OAuthClientID == "" {
			problems = append(problems, "auth.browser_login jupyterhub needs auth.jupyterhub.oauth_client_id (and api_url, api_token)")
		}
	default:
		problems = append(problems, fmt.Sprintf("auth.browser_login %q must be oidc or jupyterhub", c.Auth.BrowserLogin))
	}
	return problems
}

// MinUserBodyMiB is the smallest api.max_user_body_mib that lets one
// environment upload through: its code base64-encoded (4/3 of its size),
// and up to 4 MiB of spec.
func MinUserBodyMiB(maxCodeMiB int) int { return (maxCodeMiB*4+2)/3 + 4 }

// defaults lists every key with its default value.
func defaults() map[string]any {
	return map[string]any{
		"listen":                                  "127.0.0.1:8000",
		"public_url":                              "",
		"data_dir":                                defaultDataDir(),
		"gateway_id":                              "",
		"replica_id":                              "",
		"dev":                                     false,
		"metrics_listen":                          "",
		"database.url":                            "",
		"database.max_connections":                32,
		"database.password":                       "",
		"tls.cert_pem":                            "",
		"tls.key_pem":                             "",
		"tls.cert_file":                           "",
		"tls.key_file":                            "",
		"tls.allow_plain_http":                    false,
		"tls.cluster_domain":                      "",
		"auth.oidc.issuer":                        "",
		"auth.oidc.client_id":                     "gateway",
		"auth.oidc.client_secret":                 "",
		"auth.oidc.audience":                      "",
		"auth.oidc.username_claims":               []string{"preferred_username", "email", "sub"},
		"auth.oidc.groups_claim":                  "groups",
		"auth.oidc.clock_skew":                    "30s",
		"auth.jupyterhub.api_url":                 "",
		"auth.jupyterhub.api_token":               "",
		"auth.jupyterhub.cache_ttl":               "30s",
		"auth.jupyterhub.identity":                "jupyterhub",
		"auth.jupyterhub.oauth_client_id":         "",
		"auth.jupyterhub.oauth_redirect_uri":      "",
		"auth.jupyterhub.oauth_authorize_url":     "",
		"auth.browser_login":                      "",
		"auth.admin_groups":                       []string{},
		"auth.admin_users":                        []string{},
		"auth.session_ttl":                        "8h",
		"auth.groups_max_age":                     "24h",
		"auth.failed_per_minute":                  30,
		"auth.dev_issuer_listen":                  "127.0.0.1:0",
		"images.repository":                       "",
		"images.auth":                             "auto",
		"images.username":                         "",
		"images.password":                         "",
		"images.aws_region":                       "",
		"images.bases":                            []map[string]any{},
		"images.pip_index_url":                    "",
		"images.max_code_mib":                     50,
		"images.build_timeout":                    "30m",
		"images.build_network":                    "host",
		"images.source_builds":                    false,
		"images.builder":                          "auto",
		"images.wheel_cache_dir":                  "",
		"images.wheel_cache_mib":                  4096,
		"images.max_package_mib":                  512,
		"images.conda_channels":                   []map[string]any{},
		"images.environments":                     []map[string]any{},
		"images.allowed_registries":               []string{},
		"images.retention":                        "168h",
		"api.max_user_body_mib":                   128,
		"proxy.handshake_timeout":                 "10s",
		"proxy.idle_timeout":                      "4h",
		"proxy.max_connections":                   0,
		"proxy.max_connections_per_cluster":       1000,
		"proxy.max_connections_per_source":        500,
		"proxy.max_http_connections":              0,
		"proxy.max_http_connections_per_source":   0,
		"proxy.http_header_timeout":               "5s",
		"proxy.http_unauthenticated_body_timeout": "10s",
		"proxy.http_body_timeout":                 "2m",
		"cluster.max_workers":                     50,
		"cluster.max_worker_threads":              64,
		"cluster.max_worker_memory":               256.0,
		"cluster.start_timeout":                   "0s",
		"cluster.poll_interval":                   "5s",
		"cluster.lease_ttl":                       "15s",
		"cluster.worker_restarts":                 5,
		"cluster.on_shutdown":                     "stop",
		"cluster.idle_timeout":                    "20m",
		"cluster.max_idle_timeout":                "0s",
		"cluster.max_lifetime":                    "0s",
		"cluster.heartbeat_timeout":               "30s",
		"cluster.heartbeat_interval":              "5m",
		"cluster.reap_interval":                   "1m",
		"cluster.reap_grace":                      "2m",
		"cluster.reap_dry_run":                    false,
		"log.level":                               "info",
		"log.format":                              "text",
		"log.file":                                "",
		"cluster.scheduler_gpu":                   true,
		"cluster.sharing":                         "groups",
		"quotas.on_exceed":                        "clamp",
		"quotas.entries":                          []map[string]any{},
		"pricing.instance_types":                  []map[string]any{},
		"pricing.vcpu_hour":                       0.0,
		"pricing.memory_gib_hour":                 0.0,
		"bench.alert_webhook":                     "",
		"bench.python":                            "",
		"bench.schedule_interval":                 "30s",
		"bench.run_lease":                         "3m",
		"auth.dev_token_lifetime":                 "10m",
	}
}

func defaultDataDir() string {
	if d := os.Getenv("XDG_DATA_HOME"); d != "" {
		return filepath.Join(d, "gateway")
	}
	if h, err := os.UserHomeDir(); err == nil {
		return filepath.Join(h, ".local", "share", "gateway")
	}
	return "gateway-data"
}

// EnvName is the environment variable of a key.
func EnvName(key string) string {
	return EnvPrefix + "_" + strings.ToUpper(strings.ReplaceAll(key, ".", "_"))
}

// jsonListOfMapsHook decodes a string into a list of maps (images.bases,
// images.environments, images.conda_channels) as JSON: an environment
// variable can only be a string, and deployments that configure the gateway
// through its environment alone (the Terraform modules) need these keys too.
func jsonListOfMapsHook(from, to reflect.Type, data any) (any, error) {
	if from.Kind() != reflect.String || to.Kind() != reflect.Slice || to.Elem().Kind() != reflect.Map {
		return data, nil
	}
	s := strings.TrimSpace(data.(string))
	if s == "" {
		return []map[string]any{}, nil
	}
	var out []map[string]any
	if err := json.Unmarshal([]byte(s), &out); err != nil {
		return nil, fmt.Errorf("want a JSON list of objects, such as [{\"python\": \"3.11\", \"image\": \"...\"}]: %w", err)
	}
	return out, nil
}

// finish fills derived values and validates.
func (c *Config) finish(sections []Section) error {
	var problems []string
	host, port, err := net.SplitHostPort(c.Listen)
	if err != nil {
		problems = append(problems, fmt.Sprintf("listen %q must be host:port, e.g. 127.0.0.1:8000", c.Listen))
	}
	if c.Dev {
		c.TLS.AllowPlainHTTP = true
	}
	if c.PublicURL == "" && err == nil {
		if host == "" || host == "0.0.0.0" || host == "::" {
			host = "127.0.0.1"
		}
		scheme := "https"
		if c.TLS.AllowPlainHTTP {
			scheme = "http"
		}
		c.PublicURL = scheme + "://" + net.JoinHostPort(host, port)
	}
	if u, err := url.Parse(c.PublicURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		problems = append(problems, fmt.Sprintf("public_url %q must be an http:// or https:// URL", c.PublicURL))
	}
	if c.DataDir == "" {
		problems = append(problems, "data_dir must not be empty")
	} else if abs, err := filepath.Abs(c.DataDir); err == nil {
		c.DataDir = abs
	}
	if c.Database.URL == "" {
		c.Database.URL = "sqlite://" + filepath.Join(c.DataDir, "gateway.db")
	}
	if c.Database.Password != "" {
		u, err := url.Parse(c.Database.URL)
		switch {
		case err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql"):
			problems = append(problems, "database.password is for PostgreSQL: database.url must be a postgres://user@host/db URL")
		case u.User == nil || u.User.Username() == "":
			problems = append(problems, "database.password needs the user name in database.url (postgres://user@host/db)")
		default:
			u.User = url.UserPassword(u.User.Username(), c.Database.Password)
			c.Database.URL = u.String()
		}
	}
	problems = append(problems, c.sectionProblems(sections)...)
	if (c.TLS.CertFile == "") != (c.TLS.KeyFile == "") {
		problems = append(problems, "tls.cert_file and tls.key_file must be set together")
	}
	if (c.TLS.CertPEM == "") != (c.TLS.KeyPEM == "") {
		problems = append(problems, "tls.cert_pem and tls.key_pem must be set together")
	}
	if c.TLS.CertPEM != "" && c.TLS.CertFile != "" {
		problems = append(problems, "set the gateway's certificate once: tls.cert_file/key_file or tls.cert_pem/key_pem")
	}
	switch c.Cluster.OnShutdown {
	case "stop", "leave":
	default:
		problems = append(problems, fmt.Sprintf("cluster.on_shutdown %q must be stop or leave", c.Cluster.OnShutdown))
	}
	switch c.Cluster.Sharing {
	case "off", "groups", "any":
	default:
		problems = append(problems, fmt.Sprintf("cluster.sharing %q must be off, groups or any", c.Cluster.Sharing))
	}
	if c.Database.MaxConnections < 1 {
		problems = append(problems, "database.max_connections must be at least 1")
	}
	if c.Cluster.MaxWorkers < 1 {
		problems = append(problems, "cluster.max_workers must be at least 1")
	}
	if c.Auth.OIDC.Issuer == "" && !c.Dev && c.Auth.JupyterHub.APIURL == "" {
		problems = append(problems, "auth.oidc.issuer must name your OpenID Connect provider, or auth.jupyterhub.api_url your JupyterHub (gateway dev embeds a provider)")
	}
	problems = append(problems, c.hubProblems()...)
	if c.Auth.OIDC.ClientID == "" {
		problems = append(problems, "auth.oidc.client_id must not be empty")
	}
	if c.Auth.SessionTTL <= 0 {
		problems = append(problems, "auth.session_ttl must be positive (e.g. 8h)")
	}
	if c.Auth.GroupsMaxAge <= 0 {
		problems = append(problems, "auth.groups_max_age must be positive (e.g. 24h)")
	}
	if c.Auth.FailedPerMinute < 1 {
		problems = append(problems, "auth.failed_per_minute must be at least 1")
	}
	if host, _, err := net.SplitHostPort(c.Auth.DevIssuerListen); c.Dev && (err != nil || !isLoopback(host)) {
		problems = append(problems, fmt.Sprintf("auth.dev_issuer_listen %q must be a loopback host:port: the development issuer signs anyone in", c.Auth.DevIssuerListen))
	}
	if c.Cluster.MaxWorkerThreads < 1 {
		problems = append(problems, "cluster.max_worker_threads must be at least 1")
	}
	if c.Cluster.MaxWorkerMemory < 0.25 {
		problems = append(problems, "cluster.max_worker_memory must be at least 0.25 (GiB)")
	}
	if c.Cluster.IdleTimeout < 0 || c.Cluster.MaxIdleTimeout < 0 || c.Cluster.MaxLifetime < 0 {
		problems = append(problems, "cluster.idle_timeout, max_idle_timeout and max_lifetime must not be negative")
	}
	if c.Cluster.MaxIdleTimeout > 0 && (c.Cluster.IdleTimeout == 0 || c.Cluster.IdleTimeout > c.Cluster.MaxIdleTimeout) {
		problems = append(problems, fmt.Sprintf("cluster.idle_timeout %s must be set and at most cluster.max_idle_timeout %s", c.Cluster.IdleTimeout, c.Cluster.MaxIdleTimeout))
	}
	if c.Cluster.WorkerRestarts < 0 {
		problems = append(problems, "cluster.worker_restarts must not be negative")
	}
	if c.Proxy.HandshakeTimeout <= 0 || c.Proxy.IdleTimeout <= 0 {
		problems = append(problems, "proxy.handshake_timeout and proxy.idle_timeout must be positive durations, e.g. 10s and 4h")
	}
	if c.Proxy.MaxConnections < 0 || c.Proxy.MaxConnectionsPerCluster < 0 || c.Proxy.MaxConnectionsPerSource < 0 {
		problems = append(problems, "proxy.max_connections, max_connections_per_cluster and max_connections_per_source must not be negative (0: see each key)")
	}
	if c.Proxy.MaxHTTPConnections < 0 || c.Proxy.MaxHTTPConnectionsPerSource < 0 {
		problems = append(problems, "proxy.max_http_connections and max_http_connections_per_source must not be negative (0: derived from the descriptor limit)")
	}
	if c.Proxy.HTTPHeaderTimeout <= 0 || c.Proxy.HTTPUnauthenticatedBodyTimeout <= 0 || c.Proxy.HTTPBodyTimeout <= 0 {
		problems = append(problems, "proxy.http_header_timeout, http_unauthenticated_body_timeout and http_body_timeout must be positive durations, e.g. 5s, 10s and 2m")
	}
	if c.Cluster.StartTimeout != 0 && c.Cluster.StartTimeout < time.Second {
		problems = append(problems, "cluster.start_timeout must be at least 1s (or 0 for the backend's default)")
	}
	if c.Cluster.LeaseTTL < time.Second || c.Cluster.LeaseTTL < 2*c.Cluster.PollInterval {
		problems = append(problems, "cluster.lease_ttl must be at least 1s and at least twice cluster.poll_interval (leases are renewed at each poll)")
	}
	if c.Cluster.HeartbeatInterval < time.Second || c.Cluster.HeartbeatInterval > time.Hour {
		problems = append(problems, "cluster.heartbeat_interval must be between 1s and 1h, e.g. 5m")
	}
	if c.Cluster.PollInterval < 100*time.Millisecond {
		problems = append(problems, "cluster.poll_interval must be at least 100ms")
	}
	if c.Quotas.OnExceed != "clamp" && c.Quotas.OnExceed != "refuse" {
		problems = append(problems, fmt.Sprintf("quotas.on_exceed %q must be clamp or refuse", c.Quotas.OnExceed))
	}
	switch c.Images.Auth {
	case "auto", "none", "basic", "ecr", "google":
	default:
		problems = append(problems, fmt.Sprintf("images.auth %q must be auto, none, basic, ecr or google", c.Images.Auth))
	}
	if c.Images.BuildTimeout < time.Minute {
		problems = append(problems, "images.build_timeout must be at least 1m")
	}
	switch c.Images.Builder {
	case "auto", "layers", "docker":
	default:
		problems = append(problems, fmt.Sprintf("images.builder %q must be auto, layers or docker", c.Images.Builder))
	}
	if c.Images.WheelCacheMiB < 64 {
		problems = append(problems, "images.wheel_cache_mib must be at least 64")
	}
	if c.Images.MaxPackageMiB < 1 || c.Images.MaxPackageMiB > 8192 {
		problems = append(problems, "images.max_package_mib must be between 1 and 8192")
	}
	if c.Images.BuildNetwork == "" || strings.ContainsAny(c.Images.BuildNetwork, " /:") {
		problems = append(problems, fmt.Sprintf("images.build_network %q must name a Docker network (host, bridge or one of yours)", c.Images.BuildNetwork))
	}
	if c.Images.MaxCodeMiB < 1 || c.Images.MaxCodeMiB > 1024 {
		problems = append(problems, "images.max_code_mib must be between 1 and 1024")
	} else if need := MinUserBodyMiB(c.Images.MaxCodeMiB); c.API.MaxUserBodyMiB < need {
		problems = append(problems, fmt.Sprintf("api.max_user_body_mib (%d) must be at least %d: one environment upload of images.max_code_mib (%d) is that large, its code in base64", c.API.MaxUserBodyMiB, need, c.Images.MaxCodeMiB))
	}
	if c.Pricing.VCPUHour < 0 || c.Pricing.MemoryGiBHour < 0 {
		problems = append(problems, "pricing.vcpu_hour and pricing.memory_gib_hour must not be negative")
	}
	if c.Bench.ScheduleInterval < time.Second {
		problems = append(problems, "bench.schedule_interval must be at least 1s")
	}
	if c.Auth.DevTokenLifetime < 10*time.Second {
		problems = append(problems, "auth.dev_token_lifetime must be at least 10s")
	}
	if c.Bench.RunLease < 3*time.Second {
		problems = append(problems, "bench.run_lease must be at least 3s (its client renews it every third of it)")
	}
	if w := c.Bench.AlertWebhook; w != "" {
		// The URL itself is a secret: the problem names the key only.
		if u, err := url.Parse(w); err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
			problems = append(problems, "bench.alert_webhook must be an http:// or https:// URL")
		}
	}
	switch strings.ToLower(c.Log.Level) {
	case "debug", "info", "warn", "error":
	default:
		problems = append(problems, fmt.Sprintf("log.level %q must be debug, info, warn or error", c.Log.Level))
	}
	switch c.Log.Format {
	case "text", "json":
	default:
		problems = append(problems, fmt.Sprintf("log.format %q must be text or json", c.Log.Format))
	}
	if len(problems) > 0 {
		return fmt.Errorf("config: %w: %s", ErrInvalid, strings.Join(problems, "; "))
	}
	return nil
}

func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// ErrInvalid marks a configuration that cannot be used.
var ErrInvalid = errors.New("invalid configuration")

// Redacted returns the configuration as a nested map keyed like the YAML
// file, with secrets replaced: keys tagged secret, and in every other value
// (strings, lists, the maps of list entries) what a URL may carry of
// credentials, as RedactURL does. Whatever key an operator puts a URL
// with a password in, it is not printed.
func (c *Config) Redacted() map[string]any {
	out := structToMap(reflect.ValueOf(*c))
	sections := map[string]any{}
	for name, sec := range c.providers {
		sections[name] = structToMap(reflect.ValueOf(sec).Elem())
	}
	out["providers"] = sections
	return out
}

func structToMap(v reflect.Value) map[string]any {
	out := map[string]any{}
	t := v.Type()
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		key := f.Tag.Get("mapstructure")
		if key == "" {
			continue
		}
		fv := v.Field(i)
		switch {
		case fv.Kind() == reflect.Struct && fv.Type() != reflect.TypeOf(time.Duration(0)):
			out[key] = structToMap(fv)
		case f.Tag.Get("secret") == "true":
			out[key] = redact(fv.String())
		case fv.Kind() == reflect.Slice && fv.IsNil():
			out[key] = []string{}
		case fv.Type() == reflect.TypeOf(time.Duration(0)):
			out[key] = fv.Interface().(time.Duration).String()
		default:
			out[key] = redactValue(fv.Interface())
		}
	}
	return out
}

// redact hides the value of a key marked secret. Of a URL it keeps the
// scheme and the host, which say where it points; everything after them
// is hidden, not only what RedactURL recognises as a credential: a secret
// URL may carry its secret anywhere (a webhook's is in its path, a
// database's user name may be a token).
func redact(s string) string {
	if s == "" {
		return ""
	}
	if !strings.Contains(s, "://") {
		return redactedMark
	}
	u, err := url.Parse(strings.TrimSpace(s))
	if err != nil || u.Scheme == "" || u.Host == "" {
		return redactedMark
	}
	kept := (&url.URL{Scheme: u.Scheme, Host: u.Host}).String()
	if kept == strings.TrimSuffix(strings.TrimSpace(s), "/") {
		return kept // nothing but where it points
	}
	return kept + "/" + redactedMark
}

// redactedMark replaces what is hidden.
const redactedMark = "REDACTED"

// redactValue redacts the URLs found anywhere in a value of a non-secret
// key, and the values of map entries whose names say they are secret
// ({password: ...} in a list of maps).
func redactValue(v any) any {
	switch x := v.(type) {
	case string:
		return RedactURL(x)
	case []string:
		out := make([]string, len(x))
		for i, s := range x {
			out[i] = RedactURL(s)
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = redactValue(e)
		}
		return out
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			if sensitiveName(k) {
				out[k] = redactedMark
				continue
			}
			out[k] = redactValue(e)
		}
		return out
	case []map[string]any:
		out := make([]map[string]any, len(x))
		for i, m := range x {
			out[i] = redactValue(m).(map[string]any)
		}
		return out
	}
	return v
}

// RedactURL hides the credentials a URL may carry, and returns any other
// string unchanged: the password of its user-info (or the whole user-info
// when there is no password, since a token is often given as the user
// name, as in https://<token>@host/simple), and the values of query and
// fragment parameters whose names say they are secret (password, token,
// key, X-Amz-Signature...; case does not matter). A string that looks like
// a URL but does not parse is hidden whole. For printing and logging
// configuration values, never for using them.
func RedactURL(s string) string {
	if !strings.Contains(s, "://") {
		return s
	}
	u, err := url.Parse(strings.TrimSpace(s))
	if err != nil || u.Scheme == "" {
		return redactedMark
	}
	if u.User != nil {
		if _, has := u.User.Password(); has {
			u.User = url.UserPassword(u.User.Username(), redactedMark)
		} else if u.User.Username() != "" {
			u.User = url.User(redactedMark)
		}
	}
	u.RawQuery = redactParams(u.RawQuery)
	// Implicit-flow style fragments carry tokens (#access_token=...).
	if frag := u.EscapedFragment(); frag != "" && redactParams(frag) != frag {
		u.Fragment, u.RawFragment = redactedMark, ""
	}
	return u.String()
}

// redactParams replaces the values of sensitive parameters in an encoded
// query, keeping the order and the spelling of everything else.
func redactParams(raw string) string {
	if raw == "" {
		return raw
	}
	parts := strings.Split(raw, "&")
	for i, p := range parts {
		name, _, hasValue := strings.Cut(p, "=")
		if n, err := url.QueryUnescape(name); err == nil {
			name = n
		}
		if sensitiveName(name) {
			if hasValue {
				parts[i] = url.QueryEscape(name) + "=" + redactedMark
			} else {
				parts[i] = redactedMark
			}
		}
	}
	return strings.Join(parts, "&")
}

// sensitiveName says whether a parameter or map key names a secret:
// PostgreSQL's password and sslpassword, tokens, API keys, AWS and Azure
// signed-URL parameters.
func sensitiveName(name string) bool {
	n := strings.ToLower(strings.TrimSpace(name))
	switch n {
	case "pwd", "pass", "passwd", "key", "sig", "auth", "authorization", "code", "apikey", "x-amz-credential":
		return true
	}
	for _, part := range []string{"password", "passwd", "secret", "token", "signature", "api_key", "api-key", "apikey", "access_key", "private_key", "credential"} {
		if strings.Contains(n, part) {
			return true
		}
	}
	return false
}

// docs adds each key of the struct type t, under prefix, with its
// description to out.
func docs(t reflect.Type, prefix string, out map[string]string) {
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		key := f.Tag.Get("mapstructure")
		if key == "" || key == "-" {
			continue
		}
		if f.Type.Kind() == reflect.Struct && f.Type != reflect.TypeOf(time.Duration(0)) {
			docs(f.Type, prefix+key+".", out)
			continue
		}
		out[prefix+key] = f.Tag.Get("doc")
	}
}
