package devissuer

import (
	"fmt"
	"net"
	"net/http"
	"strings"
)

// LoopbackHosts returns the Host header values that name a loopback
// listener on port: 127.0.0.1:port, localhost:port and [::1]:port.
func LoopbackHosts(port string) []string {
	return []string{
		net.JoinHostPort("127.0.0.1", port),
		net.JoinHostPort("localhost", port),
		net.JoinHostPort("::1", port),
	}
}

// RequireHost serves only the requests whose Host header is one of hosts
// (host:port, compared without regard to case; a Host without a port means
// the scheme's default port) and hands the others to refuse.
//
// A server on loopback is still reachable from web pages: a page at
// evil.example that re-points its name at 127.0.0.1 (DNS rebinding) makes
// the browser send same-origin requests to the loopback port, carrying
// Host: evil.example:PORT. Answering only to the names this server is
// reached by defeats that, since the attacker's page cannot choose the
// Host header its browser sends.
func RequireHost(next http.Handler, hosts []string, refuse http.HandlerFunc) http.Handler {
	allowed := make(map[string]bool, len(hosts))
	for _, h := range hosts {
		allowed[strings.ToLower(h)] = true
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !allowed[hostWithPort(r)] {
			refuse(w, r)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// hostWithPort is the request's Host in lower case with the port made
// explicit.
func hostWithPort(r *http.Request) string {
	h := strings.ToLower(r.Host)
	if _, _, err := net.SplitHostPort(h); err == nil {
		return h
	}
	port := "80"
	if r.TLS != nil {
		port = "443"
	}
	return net.JoinHostPort(strings.Trim(h, "[]"), port)
}

// issuerHosts returns the Host values an issuer answers to: the issuer
// URL's own, and for a loopback issuer every loopback name on its port.
func issuerHosts(scheme, host, port string) []string {
	if port == "" {
		port = "80"
		if scheme == "https" {
			port = "443"
		}
	}
	hosts := []string{net.JoinHostPort(host, port)}
	if isLoopbackHost(host) {
		hosts = append(hosts, LoopbackHosts(port)...)
	}
	return hosts
}

// refuseHost is the issuer's answer to a request for another host name.
func refuseHost(w http.ResponseWriter, r *http.Request) {
	http.Error(w, fmt.Sprintf("The development identity provider answers only at its loopback address (127.0.0.1, localhost or [::1] with its port); "+
		"this request was addressed to %q, as a web page that re-points its name at this machine would (DNS rebinding), and is refused.", r.Host),
		http.StatusMisdirectedRequest)
}
