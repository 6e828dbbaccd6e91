package store_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gatewayhq/gateway/internal/testdb"
	"github.com/gatewayhq/gateway/store"
)

func tokenHash(secret string) string {
	sum := sha256.Sum256([]byte(secret))
	return hex.EncodeToString(sum[:])
}

func newToken(id, owner string) *store.APIToken {
	return &store.APIToken{ID: id, Owner: owner, Name: "token " + id, Hash: tokenHash("secret-" + id)}
}

func mustCreateToken(t *testing.T, db *store.DB, tok *store.APIToken) {
	t.Helper()
	if err := db.CreateToken(context.Background(), tok); err != nil {
		t.Fatalf("CreateToken(%s): %v", tok.ID, err)
	}
}

func mustToken(t *testing.T, db *store.DB, hash string) *store.APIToken {
	t.Helper()
	tok, err := db.TokenByHash(context.Background(), hash)
	if err != nil {
		t.Fatalf("TokenByHash(%s): %v", hash, err)
	}
	return tok
}

// assertTokenEqual compares tokens field by field, times with Equal and
// groups as lists (nil and empty alike).
func assertTokenEqual(t *testing.T, got *store.APIToken, want store.APIToken) {
	t.Helper()
	times := []struct {
		name      string
		got, want time.Time
	}{
		{"CreatedAt", got.CreatedAt, want.CreatedAt},
		{"ExpiresAt", got.ExpiresAt, want.ExpiresAt},
		{"LastUsed", got.LastUsed, want.LastUsed},
		{"RevokedAt", got.RevokedAt, want.RevokedAt},
	}
	for _, tm := range times {
		if tm.want.IsZero() != tm.got.IsZero() || !tm.got.Equal(tm.want) {
			t.Errorf("token %s: %s = %v (zero=%v), want %v (zero=%v)", want.ID, tm.name, tm.got, tm.got.IsZero(), tm.want, tm.want.IsZero())
		}
	}
	if len(got.Groups) != 0 || len(want.Groups) != 0 {
		if !slices.Equal(got.Groups, want.Groups) {
			t.Errorf("token %s: Groups = %q, want %q", want.ID, got.Groups, want.Groups)
		}
	}
	g, w := *got, want
	g.CreatedAt, g.ExpiresAt, g.LastUsed, g.RevokedAt, g.Groups = time.Time{}, time.Time{}, time.Time{}, time.Time{}, nil
	w.CreatedAt, w.ExpiresAt, w.LastUsed, w.RevokedAt, w.Groups = time.Time{}, time.Time{}, time.Time{}, time.Time{}, nil
	if !reflect.DeepEqual(g, w) {
		t.Errorf("token mismatch:\n got  %+v\n want %+v", g, w)
	}
}

func TestCreateTokenAndTokenByHash(t *testing.T) {
	testdb.Each(t, func(t *testing.T, url string) {
		db, clk := openTestDB(t, url)
		ctx := context.Background()
		now := clk.Advance(1500 * time.Millisecond)

		full := &store.APIToken{
			ID: "tok-full", Owner: "alice", OwnerName: "Alice Ëxample", Name: "CI deploy — prod", Hash: tokenHash("s1"),
			Groups: []string{"admins", "dev ops", "ünïcode"}, ReadOnly: true,
			ExpiresAt: time.Date(2025, 1, 2, 3, 4, 5, 678_900_000, time.UTC),
		}
		mustCreateToken(t, db, full)
		if !full.CreatedAt.Equal(now) {
			t.Errorf("CreateToken set CreatedAt = %v, want the clock's %v", full.CreatedAt, now)
		}
		assertTokenEqual(t, mustToken(t, db, full.Hash), store.APIToken{
			ID: "tok-full", Owner: "alice", OwnerName: "Alice Ëxample", Name: "CI deploy — prod", Hash: tokenHash("s1"),
			Groups: []string{"admins", "dev ops", "ünïcode"}, ReadOnly: true,
			CreatedAt: now, ExpiresAt: time.Date(2025, 1, 2, 3, 4, 5, 678_000_000, time.UTC),
		})

		// No groups, writable, no expiry, a creation time of the caller's
		// (kept to the millisecond).
		created := time.Date(2024, 2, 3, 4, 5, 6, 789_654_321, time.UTC)
		minimal := &store.APIToken{ID: "tok-min", Owner: "bob", Name: "", Hash: tokenHash("s2"), CreatedAt: created}
		mustCreateToken(t, db, minimal)
		got := mustToken(t, db, minimal.Hash)
		assertTokenEqual(t, got, store.APIToken{
			ID: "tok-min", Owner: "bob", Hash: tokenHash("s2"), CreatedAt: created.Truncate(time.Millisecond),
		})
		if got.ReadOnly || !got.ExpiresAt.IsZero() {
			t.Errorf("minimal token came back %+v", got)
		}

		for _, hash := range []string{tokenHash("never issued"), "", full.Hash[:10]} {
			tok, err := db.TokenByHash(ctx, hash)
			if !errors.Is(err, store.ErrNotFound) || tok != nil {
				t.Errorf("TokenByHash(%q) = %+v, %v; want nil, ErrNotFound", hash, tok, err)
			}
			if errors.Is(err, store.ErrExists) {
				t.Errorf("ErrNotFound error also matches ErrExists: %v", err)
			}
		}
	})
}

// TestCreateTokenDuplicate: an ID or a hash is never stored twice, and the
// failed create leaves the original alone.
func TestCreateTokenDuplicate(t *testing.T) {
	testdb.Each(t, func(t *testing.T, url string) {
		db, _ := openTestDB(t, url)
		ctx := context.Background()
		orig := newToken("tok", "alice")
		mustCreateToken(t, db, orig)

		sameID := newToken("tok", "mallory")
		sameID.Hash = tokenHash("other")
		sameHash := newToken("tok-2", "mallory")
		sameHash.Hash = orig.Hash
		for name, tok := range map[string]*store.APIToken{"same ID": sameID, "same hash": sameHash} {
			if err := db.CreateToken(ctx, tok); err == nil {
				t.Errorf("%s: CreateToken succeeded, want an error", name)
			}
		}
		if got := mustToken(t, db, orig.Hash); got.ID != "tok" || got.Owner != "alice" {
			t.Errorf("original token now %+v", got)
		}
		if toks, err := db.ListTokens(ctx, "mallory"); err != nil || len(toks) != 0 {
			t.Errorf("ListTokens(mallory) = %v, %v; want none", toks, err)
		}
	})
}

func TestListTokens(t *testing.T) {
	testdb.Each(t, func(t *testing.T, url string) {
		db, clk := openTestDB(t, url)
		ctx := context.Background()
		// Created oldest first; t-c and t-b share a creation time, so the ID
		// breaks the tie whatever the insertion order.
		seed := []struct {
			id, owner string
			advance   time.Duration
		}{
			{"t-a", "alice", time.Second},
			{"b-1", "bob", time.Second},
			{"t-c", "alice", time.Second},
			{"t-b", "alice", 0},
			{"t-d", "alice", time.Millisecond},
			{"b-2", "bob", time.Second},
		}
		for _, s := range seed {
			clk.Advance(s.advance)
			mustCreateToken(t, db, newToken(s.id, s.owner))
		}
		clk.Advance(time.Minute)
		if err := db.RevokeToken(ctx, "alice", "t-d"); err != nil { // revoked tokens are listed too
			t.Fatalf("RevokeToken: %v", err)
		}

		for _, tt := range []struct {
			owner string
			want  []string
		}{
			{"alice", []string{"t-d", "t-b", "t-c", "t-a"}},
			{"bob", []string{"b-2", "b-1"}},
			{"carol", nil},
			{"", nil},
		} {
			got, err := db.ListTokens(ctx, tt.owner)
			if err != nil {
				t.Fatalf("ListTokens(%q): %v", tt.owner, err)
			}
			var ids []string
			for _, tok := range got {
				ids = append(ids, tok.ID)
				if tok.Owner != tt.owner {
					t.Errorf("ListTokens(%q) returned %s of %s", tt.owner, tok.ID, tok.Owner)
				}
				// Listed tokens are complete, like TokenByHash's.
				assertTokenEqual(t, tok, *mustToken(t, db, tok.Hash))
			}
			if !slices.Equal(ids, tt.want) {
				t.Errorf("ListTokens(%q) = %v, want %v", tt.owner, ids, tt.want)
			}
		}
		alice, _ := db.ListTokens(ctx, "alice")
		if alice[0].RevokedAt.IsZero() {
			t.Errorf("revoked t-d listed without its revocation time")
		}
	})
}

func TestRevokeToken(t *testing.T) {
	testdb.Each(t, func(t *testing.T, url string) {
		db, clk := openTestDB(t, url)
		ctx := context.Background()
		mine, other, theirs := newToken("mine", "alice"), newToken("other", "alice"), newToken("theirs", "bob")
		for _, tok := range []*store.APIToken{mine, other, theirs} {
			mustCreateToken(t, db, tok)
		}

		// Another owner's token, or an unknown one: ErrNotFound, nothing changes.
		for _, tt := range []struct{ owner, id string }{
			{"alice", "theirs"},
			{"bob", "mine"},
			{"alice", "nope"},
			{"", "mine"},
		} {
			err := db.RevokeToken(ctx, tt.owner, tt.id)
			if !errors.Is(err, store.ErrNotFound) {
				t.Errorf("RevokeToken(%s, %s) = %v, want ErrNotFound", tt.owner, tt.id, err)
			}
		}
		for _, tok := range []*store.APIToken{mine, other, theirs} {
			if got := mustToken(t, db, tok.Hash); !got.RevokedAt.IsZero() {
				t.Errorf("%s revoked by a refused RevokeToken: %v", tok.ID, got.RevokedAt)
			}
		}

		// The owner revokes: the time is the clock's.
		revokedAt := clk.Advance(time.Hour)
		if err := db.RevokeToken(ctx, "alice", "mine"); err != nil {
			t.Fatalf("RevokeToken(alice, mine): %v", err)
		}
		if got := mustToken(t, db, mine.Hash); !got.RevokedAt.Equal(revokedAt) {
			t.Errorf("RevokedAt = %v, want %v", got.RevokedAt, revokedAt)
		}

		// Revoking again succeeds and keeps the first revocation time.
		clk.Advance(time.Hour)
		if err := db.RevokeToken(ctx, "alice", "mine"); err != nil {
			t.Errorf("second RevokeToken(alice, mine) = %v, want nil", err)
		}
		if got := mustToken(t, db, mine.Hash); !got.RevokedAt.Equal(revokedAt) {
			t.Errorf("after a second revoke RevokedAt = %v, want the first %v", got.RevokedAt, revokedAt)
		}
		// A revoked token is still another owner's to nobody else.
		if err := db.RevokeToken(ctx, "bob", "mine"); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("RevokeToken(bob, mine) after revocation = %v, want ErrNotFound", err)
		}

		// The others are untouched.
		for _, tok := range []*store.APIToken{other, theirs} {
			if got := mustToken(t, db, tok.Hash); !got.RevokedAt.IsZero() {
				t.Errorf("%s revoked along with mine: %v", tok.ID, got.RevokedAt)
			}
		}
	})
}

func TestTouchToken(t *testing.T) {
	testdb.Each(t, func(t *testing.T, url string) {
		db, _ := openTestDB(t, url)
		ctx := context.Background()
		a, b := newToken("a", "alice"), newToken("b", "alice")
		mustCreateToken(t, db, a)
		mustCreateToken(t, db, b)
		before := mustToken(t, db, a.Hash)
		if !before.LastUsed.IsZero() {
			t.Fatalf("new token LastUsed = %v, want zero", before.LastUsed)
		}

		for _, at := range []time.Time{
			time.Date(2024, 6, 1, 10, 0, 0, 123_456_789, time.UTC),
			time.Date(2024, 6, 1, 11, 30, 0, 999_999_999, time.FixedZone("CET", 3600)),
		} {
			if err := db.TouchToken(ctx, "a", at); err != nil {
				t.Fatalf("TouchToken(a, %v): %v", at, err)
			}
			got := mustToken(t, db, a.Hash)
			want := *before
			want.LastUsed = at.Truncate(time.Millisecond)
			assertTokenEqual(t, got, want) // only LastUsed changes
		}
		if got := mustToken(t, db, b.Hash); !got.LastUsed.IsZero() {
			t.Errorf("touching a changed b's LastUsed to %v", got.LastUsed)
		}
	})
}

// releasedTokensDDL is api_tokens as migration 0002_api_tokens created it in
// the released schema (commit 1c2441b), before owner_name.
const releasedTokensDDL = `CREATE TABLE api_tokens (
    id           TEXT PRIMARY KEY,
    owner        TEXT NOT NULL,
    name         TEXT NOT NULL,
    hash         TEXT NOT NULL UNIQUE,
    groups       TEXT NOT NULL DEFAULT '[]',
    read_only    INTEGER NOT NULL DEFAULT 0,
    created_at   BIGINT NOT NULL,
    expires_at   BIGINT NOT NULL DEFAULT 0,
    last_used_at BIGINT NOT NULL DEFAULT 0,
    revoked_at   BIGINT NOT NULL DEFAULT 0
)`

// TestTokensAfterUpgrade: a database migrated by the released schema keeps
// working with tokens once this build has opened it.
func TestTokensAfterUpgrade(t *testing.T) {
	testdb.Each(t, func(t *testing.T, url string) {
		ctx := context.Background()
		// The database as the released build left it: 0001 and the released
		// 0002 applied and recorded, and a token made then.
		init, err := os.ReadFile(filepath.Join("migrations", "0001_init.sql"))
		if err != nil {
			t.Fatal(err)
		}
		autoID := "INTEGER PRIMARY KEY AUTOINCREMENT"
		if isPostgres(url) {
			autoID = "BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY"
		}
		stmts := strings.Split(strings.ReplaceAll(string(init), "{{AUTOID}}", autoID), ";\n")
		stmts = append(stmts, releasedTokensDDL, `CREATE INDEX api_tokens_owner ON api_tokens (owner)`,
			`CREATE TABLE schema_migrations (version TEXT PRIMARY KEY, applied_at BIGINT NOT NULL)`,
			`INSERT INTO schema_migrations (version, applied_at) VALUES ('0001_init', 1), ('0002_api_tokens', 1)`,
			`INSERT INTO api_tokens (id, owner, name, hash, created_at) VALUES ('old', 'alice', 'before the upgrade', 'h-old', 1)`)
		raw := rawDB(t, url)
		for _, q := range stmts {
			if strings.TrimSpace(q) == "" {
				continue
			}
			if _, err := raw.ExecContext(ctx, q); err != nil {
				t.Fatalf("%s: %v", q, err)
			}
		}
		raw.Close()

		db, _ := openTestDB(t, url) // the upgrade
		if got, err := db.TokenByHash(ctx, "h-old"); err != nil || got.ID != "old" {
			t.Errorf("TokenByHash(token made before the upgrade) = %+v, %v", got, err)
		}
		tok := newToken("new", "alice")
		tok.OwnerName = "Alice"
		if err := db.CreateToken(ctx, tok); err != nil {
			t.Errorf("CreateToken after the upgrade: %v", err)
		}
		if toks, err := db.ListTokens(ctx, "alice"); err != nil || len(toks) != 2 {
			t.Errorf("ListTokens after the upgrade = %d tokens, %v; want 2", len(toks), err)
		}
	})
}
