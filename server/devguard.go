package server

import (
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"

	"github.com/gatewayhq/gateway/api"
	"github.com/gatewayhq/gateway/auth/devissuer"
	"github.com/gatewayhq/gateway/internal/config"
	"github.com/gatewayhq/gateway/quota"
)

// devHostGuard makes the development gateway answer only requests
// addressed to it by a loopback name and its port (or by its public_url):
// a web page the developer visits could otherwise re-point its own name at
// 127.0.0.1 (DNS rebinding) and drive the API, the dashboards and the
// sign-in, where the embedded issuer signs anyone in as admin. Outside dev
// the gateway is reached by its public name through load balancers, and no
// such check applies. Dask's TLS passthrough is not HTTP and never gets
// here.
func devHostGuard(next http.Handler, listener net.Addr, publicURL string) http.Handler {
	_, port, _ := net.SplitHostPort(listener.String())
	hosts := devissuer.LoopbackHosts(port)
	if u, err := url.Parse(publicURL); err == nil && u.Host != "" {
		p := u.Port()
		if p == "" {
			p = "80"
			if u.Scheme == "https" {
				p = "443"
			}
		}
		hosts = append(hosts, net.JoinHostPort(u.Hostname(), p))
	}
	names := strings.Join(devissuer.LoopbackHosts(port), ", ")
	return devissuer.RequireHost(next, hosts, func(w http.ResponseWriter, r *http.Request) {
		api.WriteError(w, http.StatusMisdirectedRequest, "misdirected_request", fmt.Sprintf(
			"gateway dev answers only requests addressed to %s or its public_url %s, not %q: a web page whose name points at this machine (DNS rebinding) must not reach it; "+
				"to reach it by another name, set public_url", names, publicURL, r.Host))
	})
}

// newQuotas builds the quota service: the configuration file's entries
// over the built-in defaults (quota.BuiltinDefaults). gateway dev has
// none: there one developer plays every user, and tests start many
// clusters as one user.
func newQuotas(cfg *config.Config, st quota.Store) (*quota.Service, error) {
	entries, err := quota.ParseConfig(cfg.Quotas.Entries)
	if err != nil {
		return nil, err
	}
	var opts []quota.Option
	if cfg.Dev {
		opts = append(opts, quota.WithBuiltinDefaults(quota.Limits{}))
	}
	return quota.NewService(st, entries, quota.OnExceed(cfg.Quotas.OnExceed), opts...)
}
