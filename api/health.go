package api

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"time"

	"github.com/gatewayhq/gateway/auth"
	"github.com/gatewayhq/gateway/store"
)

// Database is what the API asks of the store about the store itself:
// whether it answers, and whether an error means it is unavailable.
type Database interface {
	// Ping answers nil while the database can be used; its error says
	// what is wrong, without credentials.
	Ping(ctx context.Context) error
	// Unavailable returns err as an error matching store.ErrUnavailable
	// when it means the database cannot be reached or written, else nil.
	Unavailable(err error) error
}

// healthTTL is how long a health answer is reused: a flood of health
// checks costs the database one ping per healthTTL.
const healthTTL = time.Second

// SetDatabase makes /api/health report the database, and answers that
// fail because it is unavailable 503 database_unavailable.
func (s *Server) SetDatabase(db Database) { s.dbHealth.db = db }

// healthCheck keeps the last answer about the database.
type healthCheck struct {
	db Database

	mu      sync.Mutex // held while pinging: one ping at a time
	checked time.Time
	err     error
}

func (h *healthCheck) check(ctx context.Context) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if time.Since(h.checked) < healthTTL {
		return h.err
	}
	// Not the request's context: the answer is shared with the requests
	// that follow, so one client going away must not make it a failure.
	h.err = h.db.Ping(context.WithoutCancel(ctx))
	h.checked = time.Now()
	return h.err
}

// healthJSON is the health-check draft's shape
// (draft-inadarei-api-health-check): status pass or fail, with the checks
// that decided it.
type healthJSON struct {
	Status string                       `json:"status"`
	Output string                       `json:"output,omitempty"`
	Checks map[string][]healthCheckJSON `json:"checks,omitempty"`
}

type healthCheckJSON struct {
	Status string `json:"status"`
	Output string `json:"output,omitempty"`
	Time   string `json:"time,omitempty"`
}

// health answers dask-gateway's health check. Anyone may ask, so anyone
// gets the status alone (200 pass, 503 fail); what failed, and where (the
// data directory of a full disk, PostgreSQL's host), goes only to an admin
// who authenticates the request, and to the metrics port (HealthDetails).
func (s *Server) health(w http.ResponseWriter, r *http.Request) {
	s.writeHealth(w, r, s.adminCaller(r))
}

// HealthDetails answers as /api/health does for an admin, whoever asks:
// for the metrics listener, which serves the operator alone.
func (s *Server) HealthDetails() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { s.writeHealth(w, r, true) })
}

func (s *Server) writeHealth(w http.ResponseWriter, r *http.Request, details bool) {
	if s.dbHealth.db == nil {
		writeJSON(w, http.StatusOK, healthJSON{Status: "pass"})
		return
	}
	err := s.dbHealth.check(r.Context())
	at := time.Now().UTC().Format(time.RFC3339)
	if err == nil {
		h := healthJSON{Status: "pass"}
		if details {
			h.Checks = map[string][]healthCheckJSON{"database": {{Status: "pass", Time: at}}}
		}
		writeJSON(w, http.StatusOK, h)
		return
	}
	w.Header().Set("Retry-After", "5")
	if !details {
		writeJSON(w, http.StatusServiceUnavailable, healthJSON{Status: "fail"})
		return
	}
	msg := err.Error()
	var ue *store.UnavailableError
	if !errors.As(err, &ue) {
		msg = "the database does not answer; the gateway's log has the details"
	}
	writeJSON(w, http.StatusServiceUnavailable, healthJSON{Status: "fail", Output: msg,
		Checks: map[string][]healthCheckJSON{"database": {{Status: "fail", Output: msg, Time: at}}}})
}

// adminCaller reports whether r carries the credential of an admin. A
// request without one, or with one that fails (while the database is away,
// stored credentials cannot be checked), is anonymous: an endpoint that
// needs no login never answers 401. Failures count against the address as
// anywhere else, so this is no way around the failure limit.
func (s *Server) adminCaller(r *http.Request) bool {
	if r.Header.Get("Authorization") == "" {
		return false
	}
	ip := remoteIP(r)
	if s.limiter != nil && s.limiter.Blocked(ip) {
		return false
	}
	u, err := Authenticate(r, s.auth)
	if err != nil {
		if errors.Is(err, auth.ErrInvalid) && !errors.Is(err, auth.ErrEnded) && s.limiter != nil {
			s.limiter.Fail(ip)
		}
		return false
	}
	return u.Admin
}

// databaseDown answers 503 database_unavailable when err means the store
// cannot be reached or written, reporting whether it did.
func (s *Server) databaseDown(w http.ResponseWriter, r *http.Request, err error) bool {
	return s.databaseDownTo(w, r, err, true)
}

// databaseDownTo is databaseDown for a caller who may (authenticated) or
// may not (the credential could not be checked) be told where the
// database is and what failed.
func (s *Server) databaseDownTo(w http.ResponseWriter, r *http.Request, err error, details bool) bool {
	var u error
	if s.dbHealth.db != nil {
		u = s.dbHealth.db.Unavailable(err)
	} else if errors.Is(err, store.ErrUnavailable) {
		u = err
	}
	if u == nil {
		return false
	}
	s.log.Warn("request failed: the database is unavailable", "method", r.Method, "path", r.URL.Path, "err", err)
	w.Header().Set("Retry-After", "5")
	msg := u.Error()
	if !details {
		msg = "the database is unavailable"
	}
	if !errors.Is(u, store.ErrDiskFull) || !details {
		msg += " (try again)" // a full disk needs someone first
	}
	WriteError(w, http.StatusServiceUnavailable, "database_unavailable", msg)
	return true
}
