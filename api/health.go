package api

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"time"

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

func (s *Server) health(w http.ResponseWriter, r *http.Request) {
	if s.dbHealth.db == nil {
		writeJSON(w, http.StatusOK, healthJSON{Status: "pass"})
		return
	}
	err := s.dbHealth.check(r.Context())
	at := time.Now().UTC().Format(time.RFC3339)
	if err == nil {
		writeJSON(w, http.StatusOK, healthJSON{Status: "pass",
			Checks: map[string][]healthCheckJSON{"database": {{Status: "pass", Time: at}}}})
		return
	}
	msg := err.Error()
	var ue *store.UnavailableError
	if !errors.As(err, &ue) {
		msg = "the database does not answer; the gateway's log has the details"
	}
	w.Header().Set("Retry-After", "5")
	writeJSON(w, http.StatusServiceUnavailable, healthJSON{Status: "fail", Output: msg,
		Checks: map[string][]healthCheckJSON{"database": {{Status: "fail", Output: msg, Time: at}}}})
}

// databaseDown answers 503 database_unavailable when err means the store
// cannot be reached or written, reporting whether it did.
func (s *Server) databaseDown(w http.ResponseWriter, r *http.Request, err error) bool {
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
	if !errors.Is(u, store.ErrDiskFull) {
		msg += " (try again)" // a full disk needs someone first
	}
	WriteError(w, http.StatusServiceUnavailable, "database_unavailable", msg)
	return true
}
