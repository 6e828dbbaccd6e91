package auth

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gatewayhq/gateway/store"
)

func TestAPITokens(t *testing.T) {
	ctx := context.Background()
	db, err := store.Open(ctx, "sqlite://"+filepath.Join(t.TempDir(), "g.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	now := time.Now()
	mk := func(id, owner string, ro bool, exp time.Time) string {
		secret := NewToken(APITokenPrefix)
		if err := db.CreateToken(ctx, &store.APIToken{ID: id, Owner: owner, Name: id, Hash: HashToken(secret), Groups: []string{"ops"}, ReadOnly: ro, ExpiresAt: exp}); err != nil {
			t.Fatal(err)
		}
		return secret
	}
	ok := mk("t1", "alice", false, now.Add(time.Hour))
	ro := mk("t2", "alice", true, now.Add(time.Hour))
	expired := mk("t3", "alice", false, now.Add(-time.Minute))
	revoked := mk("t4", "alice", false, now.Add(time.Hour))
	if err := db.RevokeToken(ctx, "alice", "t4"); err != nil {
		t.Fatal(err)
	}
	if err := db.RevokeToken(ctx, "bob", "t1"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("bob revoked alice's token: %v", err)
	}
	// alice's groups come from her latest login, not from the tokens.
	if _, err := db.RecordUserClaims(ctx, &store.UserClaims{ID: "alice", Name: "alice", Groups: []string{"ops"}, ClaimsAt: now}); err != nil {
		t.Fatal(err)
	}
	a := NewAPITokens(db, nil, []string{"ops"})
	u, err := a.Authenticate(ctx, ok)
	if err != nil || u.Name != "alice" || !u.Admin || u.ReadOnly || u.Via != "token" {
		t.Fatalf("valid token: %+v %v", u, err)
	}
	if u, err := a.Authenticate(ctx, ro); err != nil || !u.ReadOnly {
		t.Fatalf("read-only token: %+v %v", u, err)
	}
	for name, tc := range map[string]struct{ tok, want string }{
		"expired": {expired, "expired"},
		"revoked": {revoked, "revoked"},
		"unknown": {APITokenPrefix + "nope", "unknown API token"},
	} {
		if _, err := a.Authenticate(ctx, tc.tok); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v", name, err)
		}
	}
	if _, err := a.Authenticate(ctx, "eyJ.x.y"); !errors.Is(err, ErrNoCredentials) {
		t.Errorf("a JWT is not an API token: %v", err)
	}
	list, err := db.ListTokens(ctx, "alice")
	if err != nil || len(list) != 4 {
		t.Fatalf("list: %d %v", len(list), err)
	}
	for _, tk := range list {
		if tk.ID == "t1" && tk.LastUsed.IsZero() {
			t.Error("last use not recorded")
		}
		if strings.Contains(tk.Hash, ok) {
			t.Error("the secret is stored")
		}
	}
}
