package store_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/gatewayhq/gateway/internal/testdb"
	"github.com/gatewayhq/gateway/store"
)

// add returns a ShareChange that adds (or replaces) shares.
func add(shares ...store.Share) store.ShareChange {
	return func(_ string, cur []store.Share) ([]store.Share, error) {
		for _, sh := range shares {
			cur = slices.DeleteFunc(cur, func(x store.Share) bool { return x.Kind == sh.Kind && x.Subject == sh.Subject })
			cur = append(cur, sh)
		}
		return cur, nil
	}
}

func shareLabels(shares []store.Share) []string {
	var out []string
	for _, sh := range shares {
		out = append(out, fmt.Sprintf("%s:%s%v", sh.Kind, sh.Subject, sh.Allow))
	}
	return out
}

func auditOf(t *testing.T, db *store.DB, target string) []store.AuditEntry {
	t.Helper()
	es, err := db.AuditLog(context.Background(), store.AuditFilter{Target: target})
	if err != nil {
		t.Fatal(err)
	}
	return es
}

// TestShares: shares are stored, read back in order, replaced, and
// removed; each change that changes something is one audit row with the
// shares before and after, and moves the owner's generation; a change
// that changes nothing writes nothing and keeps the shares' creation.
func TestShares(t *testing.T) {
	testdb.Each(t, func(t *testing.T, url string) {
		ctx := context.Background()
		db, clk := openTestDB(t, url)
		mustCreate(t, db, newCluster("c1", "oidc:alice"))
		by := store.Actor{ID: "oidc:alice", Name: "alice"}
		gen0, err := db.ClustersGeneration(ctx, "oidc:alice")
		if err != nil {
			t.Fatal(err)
		}

		bob := store.Share{Kind: "user", Subject: "oidc:bob", SubjectName: "bob", Allow: []string{"stop", "scale"}}
		ops := store.Share{Kind: "group", Subject: "ops", OwnerMember: true}
		before, after, err := db.UpdateShares(ctx, "c1", by, "cluster.share", add(ops, bob))
		if err != nil {
			t.Fatal(err)
		}
		if len(before) != 0 || !slices.Equal(shareLabels(after), []string{"user:oidc:bob[scale stop]", "group:ops[]"}) {
			t.Fatalf("share: before %v, after %v", shareLabels(before), shareLabels(after))
		}
		got, err := db.ClusterShares(ctx, "c1")
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(shareLabels(got), shareLabels(after)) || got[0].SubjectName != "bob" || got[0].CreatedBy != "alice" ||
			!got[1].OwnerMember || !got[0].CreatedAt.Equal(clk.Now()) {
			t.Fatalf("read back %+v, want %+v", got, after)
		}
		if gen, _ := db.ClustersGeneration(ctx, "oidc:alice"); gen == gen0 {
			t.Error("sharing did not move the owner's generation (their list shows whom clusters are shared with)")
		}
		audit := auditOf(t, db, "cluster:c1")
		if len(audit) != 1 || audit[0].Action != "cluster.share" || audit[0].ActorID != "oidc:alice" || audit[0].Before != "" ||
			audit[0].After != `[{"with":"user:oidc:bob","name":"bob","allow":["scale","stop"]},{"with":"group:ops","allow":[]}]` {
			t.Fatalf("audit after sharing: %+v", audit)
		}

		// The same again: nothing written, creation kept.
		clk.Advance(time.Minute)
		if _, again, err := db.UpdateShares(ctx, "c1", by, "cluster.share", add(ops)); err != nil || !again[1].CreatedAt.Equal(after[1].CreatedAt) {
			t.Fatalf("share again unchanged: %+v %v", again, err)
		}
		if n := len(auditOf(t, db, "cluster:c1")); n != 1 {
			t.Errorf("sharing again unchanged wrote %d audit rows, want none more", n-1)
		}
		// Other rights: replaced, recorded.
		ops.Allow = []string{"scale"}
		if _, again, err := db.UpdateShares(ctx, "c1", by, "cluster.share", add(ops)); err != nil || !slices.Equal(again[1].Allow, []string{"scale"}) {
			t.Fatalf("share with other rights: %+v %v", again, err)
		}
		// Unshare everyone.
		before, after, err = db.UpdateShares(ctx, "c1", by, "cluster.unshare", func(string, []store.Share) ([]store.Share, error) { return nil, nil })
		if err != nil || len(before) != 2 || len(after) != 0 {
			t.Fatalf("unshare: %v %v %v", shareLabels(before), shareLabels(after), err)
		}
		if got, _ := db.ClusterShares(ctx, "c1"); len(got) != 0 {
			t.Fatalf("shares left after unsharing all: %v", shareLabels(got))
		}
		audit = auditOf(t, db, "cluster:c1")
		if len(audit) != 3 || audit[0].Action != "cluster.unshare" || audit[0].After != "" || audit[0].Before == "" {
			t.Fatalf("audit after unsharing: %+v", audit)
		}

		// A change that fails writes nothing; an unknown cluster is not found.
		boom := errors.New("refused")
		if _, _, err := db.UpdateShares(ctx, "c1", by, "cluster.share", func(string, []store.Share) ([]store.Share, error) { return []store.Share{bob}, boom }); !errors.Is(err, boom) {
			t.Errorf("a refused change: %v", err)
		}
		if got, _ := db.ClusterShares(ctx, "c1"); len(got) != 0 {
			t.Errorf("a refused change was written: %v", shareLabels(got))
		}
		if _, _, err := db.UpdateShares(ctx, "nope", by, "cluster.share", add(bob)); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("sharing an unknown cluster: %v, want ErrNotFound", err)
		}
	})
}

// TestSharedWith: the clusters shared with a user by id or through one of
// their groups, newest first, in the statuses asked for, each with the
// shares that name the user; never the user's own clusters, and a
// cluster's shares go with it.
func TestSharedWith(t *testing.T) {
	testdb.Each(t, func(t *testing.T, url string) {
		ctx := context.Background()
		db, clk := openTestDB(t, url)
		mustCreate(t, db, newCluster("old", "oidc:alice"))
		clk.Advance(time.Second)
		mustCreate(t, db, newCluster("new", "oidc:alice"))
		clk.Advance(time.Second)
		mustCreate(t, db, newCluster("mine", "oidc:carol"))
		alice := store.Actor{ID: "oidc:alice", Name: "alice"}
		carol := store.Actor{ID: "oidc:carol", Name: "carol"}
		for _, c := range []struct {
			cluster string
			by      store.Actor
			shares  []store.Share
		}{
			{"old", alice, []store.Share{{Kind: "group", Subject: "ops"}, {Kind: "group", Subject: "dev"}}},
			{"new", alice, []store.Share{{Kind: "user", Subject: "oidc:carol", Allow: []string{"stop"}}, {Kind: "group", Subject: "ops", Allow: []string{"scale"}}}},
			{"mine", carol, []store.Share{{Kind: "group", Subject: "ops"}}},
		} {
			if _, _, err := db.UpdateShares(ctx, c.cluster, c.by, "cluster.share", add(c.shares...)); err != nil {
				t.Fatal(err)
			}
		}
		names := func(id string, groups []string, st []store.Status) []string {
			t.Helper()
			got, err := db.SharedWith(ctx, id, groups, st)
			if err != nil {
				t.Fatal(err)
			}
			var out []string
			for _, sc := range got {
				out = append(out, sc.Cluster.Name+"="+fmt.Sprint(shareLabels(sc.Shares)))
			}
			return out
		}
		for _, tc := range []struct {
			name   string
			id     string
			groups []string
			st     []store.Status
			want   []string
		}{
			{"by id and group, own excluded", "oidc:carol", []string{"ops"}, nil,
				[]string{"new=[user:oidc:carol[stop] group:ops[scale]]", "old=[group:ops[]]"}},
			{"by groups only", "oidc:dave", []string{"dev", "ops"}, nil,
				[]string{"mine=[group:ops[]]", "new=[group:ops[scale]]", "old=[group:dev[] group:ops[]]"}},
			{"nothing", "oidc:erin", []string{"finance"}, nil, nil},
			{"no groups", "oidc:erin", nil, nil, nil},
			{"statuses", "oidc:dave", []string{"ops"}, []store.Status{store.Running}, nil},
		} {
			if got := names(tc.id, tc.groups, tc.st); !slices.Equal(got, tc.want) {
				t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
			}
		}
		if got := names("oidc:carol", []string{"ops"}, []store.Status{store.Pending}); len(got) != 2 {
			t.Errorf("pending only: %v", got)
		}
		// A cluster's shares go with it (SQLite enforces the reference on
		// connections that ask, as the store's do).
		conn, err := rawDB(t, url).Conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		if !isPostgres(url) {
			if _, err := conn.ExecContext(ctx, `PRAGMA foreign_keys = ON`); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := conn.ExecContext(ctx, `DELETE FROM clusters WHERE name = 'old'`); err != nil {
			t.Fatal(err)
		}
		if n := rawCount(t, url, `SELECT COUNT(*) FROM cluster_shares WHERE cluster = 'old'`); n != 0 {
			t.Errorf("%d shares of a deleted cluster are left", n)
		}
	})
}

// TestUpdateSharesConcurrent: share changes of one cluster from three
// handles at once (three replicas) are serialised: none is lost.
func TestUpdateSharesConcurrent(t *testing.T) {
	testdb.Each(t, func(t *testing.T, url string) {
		ctx := context.Background()
		var dbs []*store.DB
		for range 3 {
			db, _ := openTestDB(t, url)
			dbs = append(dbs, db)
		}
		mustCreate(t, dbs[0], newCluster("c1", "oidc:alice"))
		const n = 30
		var wg sync.WaitGroup
		errs := make([]error, n)
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, _, errs[i] = dbs[i%3].UpdateShares(ctx, "c1", store.Actor{Name: "alice"}, "cluster.share",
					add(store.Share{Kind: "group", Subject: fmt.Sprintf("g%02d", i)}))
			}()
		}
		wg.Wait()
		for i, err := range errs {
			if err != nil {
				t.Errorf("share %d: %v", i, err)
			}
		}
		if got, _ := dbs[1].ClusterShares(ctx, "c1"); len(got) != n {
			t.Errorf("%d shares after %d concurrent additions", len(got), n)
		}
		if got := auditOf(t, dbs[2], "cluster:c1"); len(got) != n {
			t.Errorf("%d audit rows for %d additions", len(got), n)
		}
	})
}

// TestUserIDsByNameAndRecordAudit: users are found by their latest
// login's name (all of them when a name is reused); an audit entry made
// on its own is kept.
func TestUserIDsByNameAndRecordAudit(t *testing.T) {
	testdb.Each(t, func(t *testing.T, url string) {
		ctx := context.Background()
		db, clk := openTestDB(t, url)
		for _, c := range []store.UserClaims{{ID: "oidc:s2", Name: "sam"}, {ID: "oidc:s1", Name: "sam"}, {ID: "oidc:b", Name: "bob"}} {
			c.ClaimsAt = clk.Now()
			if _, err := db.RecordUserClaims(ctx, &c); err != nil {
				t.Fatal(err)
			}
		}
		for name, want := range map[string][]string{"sam": {"oidc:s1", "oidc:s2"}, "bob": {"oidc:b"}, "nobody": nil} {
			if got, err := db.UserIDsByName(ctx, name); err != nil || !slices.Equal(got, want) {
				t.Errorf("users named %s: %v %v, want %v", name, got, err, want)
			}
		}
		e := store.AuditEntry{Actor: "bob", ActorID: "oidc:b", Action: "cluster.connect", Target: "cluster:c1", After: `{"owner":"alice"}`}
		if err := db.RecordAudit(ctx, e); err != nil {
			t.Fatal(err)
		}
		got := auditOf(t, db, "cluster:c1")
		if len(got) != 1 || got[0].Action != e.Action || got[0].ActorID != e.ActorID || got[0].After != e.After || !got[0].At.Equal(clk.Now()) {
			t.Fatalf("audit: %+v", got)
		}
	})
}
