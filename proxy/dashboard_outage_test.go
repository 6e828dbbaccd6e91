package proxy

import (
	"errors"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/gatewayhq/gateway/auth"
	"github.com/gatewayhq/gateway/proxy/routes"
)

// TestDashboardCredentialsUncheckable: when credentials cannot be checked
// at all (the database away), a dashboard request gets a 503 that says to
// try again: not a 401 that calls the credential bad, and for a browser
// not a trip through sign-in, which could not help.
func TestDashboardCredentialsUncheckable(t *testing.T) {
	down := errors.New("auth: look up session: the database is unavailable: cannot reach PostgreSQL at 127.0.0.1:5432")
	authn := func(r *http.Request) (*auth.User, error) {
		switch r.Header.Get("Authorization") {
		case "Bearer bad":
			return nil, fmt.Errorf("%w: unknown token", auth.ErrInvalid)
		case "":
			if _, err := r.Cookie("gateway_session"); err != nil {
				return nil, auth.ErrNoCredentials
			}
		}
		return nil, fmt.Errorf("auth: %w", down)
	}
	rt := routes.New()
	rt.SetRoute("c1", "alice", "127.0.0.1:1", "http://127.0.0.1:1", nil, nil)
	h := startProxy(t, Config{AllowPlainHTTP: true, DialTimeout: 2 * time.Second}, rt, func(s *Server) http.Handler {
		s.SetLoginRedirect(func(next string) string { return "/auth/login?next=" + next })
		mux := http.NewServeMux()
		mux.Handle(DashboardPrefix, s.DashboardHandler(authn))
		return mux
	})
	client := &http.Client{Timeout: ioTimeout, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	cases := []struct {
		name       string
		hdr        map[string]string
		wantStatus int
	}{
		{"token, database away", map[string]string{"Authorization": "Bearer good-but-uncheckable"}, http.StatusServiceUnavailable},
		{"browser session, database away", map[string]string{"Cookie": "gateway_session=s1", "Accept": "text/html"}, http.StatusServiceUnavailable},
		{"bad token still 401", map[string]string{"Authorization": "Bearer bad"}, http.StatusUnauthorized},
		{"browser without session still signs in", map[string]string{"Accept": "text/html"}, http.StatusFound},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			req, _ := http.NewRequest(http.MethodGet, "http://"+h.addr+"/clusters/c1/status", nil)
			for k, v := range tc.hdr {
				req.Header.Set(k, v)
			}
			resp, err := client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != tc.wantStatus {
				t.Fatalf("status %d (Location %q), want %d", resp.StatusCode, resp.Header.Get("Location"), tc.wantStatus)
			}
			if tc.wantStatus == http.StatusServiceUnavailable && resp.Header.Get("Retry-After") == "" {
				t.Error("503 without Retry-After")
			}
		})
	}
}
