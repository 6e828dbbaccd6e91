package proxy

import (
	"context"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gatewayhq/gateway/auth"
	"github.com/gatewayhq/gateway/proxy/routes"
	"github.com/gatewayhq/gateway/store"
)

// benchPage is about the size of the dashboard's status page in figure 4
// of integration/bench.
var benchPage = "<!DOCTYPE html><html><head><title>Dask: status</title></head><body>" +
	strings.Repeat("<div class=\"bk-root\"></div>\n", 60) + "</body></html>"

// BenchmarkDashboardRequest measures one small dashboard request (a status
// page, keep-alive, one client) sent directly to the backend and through
// the dashboard proxy, authenticated as the gateway does it (auth.FromRequest):
// an API token checked against a real SQLite store, behind the failure
// limiter and the session fallback. cpu-µs/op is the CPU of the whole process (client,
// proxy and backend) per request: proxied minus direct is the proxy's own.
// Everything is on loopback.
func BenchmarkDashboardRequest(b *testing.B) {
	backend := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		_, _ = io.WriteString(w, benchPage)
	}), ReadHeaderTimeout: 5 * time.Second}
	bln, err := net.Listen("tcp", loopback)
	if err != nil {
		b.Fatal(err)
	}
	go func() { _ = backend.Serve(bln) }()
	b.Cleanup(func() { backend.Close() })

	ctx := context.Background()
	db, err := store.Open(ctx, "sqlite://"+filepath.Join(b.TempDir(), "g.db"))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { db.Close() })
	secret := auth.NewToken(auth.APITokenPrefix)
	if err := db.CreateToken(ctx, &store.APIToken{ID: "t1", Owner: "alice", Name: "bench", Hash: auth.HashToken(secret),
		ExpiresAt: time.Now().Add(time.Hour)}); err != nil {
		b.Fatal(err)
	}
	sessions, err := auth.NewSessions([]byte(strings.Repeat("k", 32)), time.Hour, false)
	if err != nil {
		b.Fatal(err)
	}
	sessions.SetStore(db, auth.Access{})
	authn := auth.FromRequest(auth.Chain{auth.NewAPITokens(db, nil, nil)}, sessions, auth.NewFailureLimiter(100))

	rt := routes.New()
	rt.SetRoute("bench", "alice", "127.0.0.1:1", "http://"+bln.Addr().String(), nil, nil)
	h := startProxy(b, Config{AllowPlainHTTP: true, DialTimeout: 2 * time.Second}, rt, func(s *Server) http.Handler {
		mux := http.NewServeMux()
		mux.Handle(DashboardPrefix, s.DashboardHandler(authn))
		return mux
	})

	for _, c := range []struct{ name, host string }{
		{"direct", bln.Addr().String()},
		{"proxied", h.addr},
	} {
		b.Run(c.name, func(b *testing.B) {
			tr := &http.Transport{MaxIdleConnsPerHost: 1}
			defer tr.CloseIdleConnections()
			hc := &http.Client{Transport: tr, Timeout: ioTimeout}
			url := "http://" + c.host + "/clusters/bench/status"
			get := func() {
				req, _ := http.NewRequest(http.MethodGet, url, nil)
				req.Header.Set("Authorization", "Bearer "+secret)
				resp, err := hc.Do(req)
				if err != nil {
					b.Fatal(err)
				}
				n, _ := io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK || n != int64(len(benchPage)) {
					b.Fatalf("%s: %s, %d bytes", url, resp.Status, n)
				}
			}
			get() // connections open, caches warm
			cpu0 := processCPU()
			for b.Loop() {
				get()
			}
			b.ReportMetric(float64((processCPU()-cpu0).Microseconds())/float64(b.N), "cpu-µs/op")
		})
	}
}

// processCPU is the CPU time (user and system) this process has used.
func processCPU() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
