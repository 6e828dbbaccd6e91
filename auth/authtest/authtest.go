// Package authtest holds what tests of several packages need around
// authentication: browser sessions kept in a real store, and an
// authenticator that counts the credentials reaching it.
package authtest

import (
	"context"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gatewayhq/gateway/auth"
	"github.com/gatewayhq/gateway/store"
)

// StoredSessions is browser sessions of an hour, with cookies a plain-HTTP
// test server may set, kept in db: a fresh SQLite store that is closed when
// the test ends.
func StoredSessions(t testing.TB) (sessions *auth.Sessions, db *store.DB) {
	t.Helper()
	db, err := store.Open(context.Background(), "sqlite://"+filepath.Join(t.TempDir(), "g.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	sessions, err = auth.NewSessions(make([]byte, 32), time.Hour, false)
	if err != nil {
		t.Fatal(err)
	}
	sessions.SetStore(db, auth.Access{})
	return sessions, db
}

// Counting counts the credentials that reach its Authenticator's
// verification.
type Counting struct {
	auth.Authenticator
	n atomic.Int64
}

// Authenticate counts tok and verifies it.
func (c *Counting) Authenticate(ctx context.Context, tok string) (*auth.User, error) {
	c.n.Add(1)
	return c.Authenticator.Authenticate(ctx, tok)
}

// Count is how many credentials have reached verification.
func (c *Counting) Count() int64 { return c.n.Load() }
