package main

import (
	"context"
	"fmt"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/gatewayhq/gateway/api"
	"github.com/gatewayhq/gateway/auth"
	"github.com/gatewayhq/gateway/providers/local"
	"github.com/gatewayhq/gateway/scheduler"
	"github.com/gatewayhq/gateway/sharing"
	"github.com/gatewayhq/gateway/store"
)

// newSharingGateway is the real API over the real control loop's requests
// and a real store (SQLite), with its loop not running: clusters stay
// PENDING, which is all the share commands need. Users are ann (groups
// ops, team), bob and carol (ops), by token.
func newSharingGateway(t *testing.T, setting sharing.Setting) *testGateway {
	t.Helper()
	ctx := context.Background()
	db, err := store.Open(ctx, "sqlite://"+t.TempDir()+"/gateway.db")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	p, err := local.New(local.Config{Dir: t.TempDir(), Python: "/usr/bin/python3", Host: "127.0.0.1", GatewayID: "gw-test"})
	if err != nil {
		t.Fatal(err)
	}
	core := scheduler.New(scheduler.Config{GatewayID: "gw-test", Sharing: setting}, db, p, nopRouter{}, nil)
	users := tokens{ // as their logins: they may make API tokens
		"ann":   {ID: "oidc:ann", Name: "ann", Groups: []string{"ops", "team"}, Via: "oidc"},
		"bob":   {ID: "oidc:bob", Name: "bob", Via: "oidc"},
		"carol": {ID: "oidc:carol", Name: "carol", Groups: []string{"ops"}, Via: "oidc"},
	}
	claims := []store.UserClaims{{ID: "oidc:sam1", Name: "sam"}, {ID: "oidc:sam2", Name: "sam"}} // one name, two people
	for _, u := range users {
		claims = append(claims, store.UserClaims{ID: u.ID, Name: u.Name, Groups: u.Groups})
	}
	for _, c := range claims {
		c.ClaimsAt = time.Now()
		if _, err := db.RecordUserClaims(ctx, &c); err != nil {
			t.Fatal(err)
		}
	}
	a := api.New(api.Config{Version: "test"}, core, users, nil, nil)
	a.SetTokenStore(db)
	srv := httptest.NewServer(a)
	t.Cleanup(srv.Close)
	return &testGateway{url: srv.URL, db: db}
}

type nopRouter struct{}

func (nopRouter) SetRoute(string, string, string, string, []byte, []byte) {}
func (nopRouter) DeleteRoute(string)                                      {}

var _ auth.Authenticator = tokens{}

// TestShareCommands: new-cluster --share, share, unshare, list and show as
// the owner and as the people a cluster is shared with, and what they
// refuse.
func TestShareCommands(t *testing.T) {
	tg := newSharingGateway(t, sharing.Any)
	out, stderr, err := tg.runStderr(t, "ann", "new-cluster", "--no-wait", "--share", "group:ops", "--share-allow", "scale")
	if err != nil {
		t.Fatalf("new-cluster --share: %v\n%s%s", err, out, stderr)
	}
	name := strings.TrimSpace(out)
	if !strings.Contains(stderr, "Shared with group:ops") {
		t.Errorf("new-cluster --share does not say it shared: %s", stderr)
	}
	out = tg.mustRun(t, "ann", "share", name, "--with", "user:bob", "--allow", "stop")
	for _, want := range []string{"shared with:", "user:bob", "may view, connect, stop", "group:ops", "may view, connect, scale",
		"Gateway().connect(\"" + name + "\")", "counts against your quota only", "work until the cluster stops"} {
		if !strings.Contains(out, want) {
			t.Errorf("share's output lacks %q:\n%s", want, out)
		}
	}
	if out := tg.mustRun(t, "ann", "share", name); !strings.Contains(out, "user:bob") || strings.Contains(out, "Gateway()") {
		t.Errorf("share NAME lists the shares only:\n%s", out)
	}

	// The people it is shared with see it, marked, with its owner.
	for user, want := range map[string]string{"bob": "ann (shared: stop)", "carol": "ann (shared: scale)", "ann": "you"} {
		out := tg.mustRun(t, user, "list")
		if !regexp.MustCompile(name + `\s+PENDING\s+0/0\s+\S+\s+\S+\s+` + regexp.QuoteMeta(want)).MatchString(out) {
			t.Errorf("%s's list does not show %s as %q:\n%s", user, name, want, out)
		}
	}
	if out := tg.mustRun(t, "bob", "show", name); !strings.Contains(out, "Shared:    with you (user:bob) by ann: you may view, connect, stop") {
		t.Errorf("bob's show:\n%s", out)
	}
	if out := tg.mustRun(t, "ann", "show", name); !strings.Contains(out, "Shared with:\n  user:bob") || !strings.Contains(out, "group:ops") {
		t.Errorf("ann's show:\n%s", out)
	}
	// stop --all stops the caller's own clusters, not those shared with them.
	if out := tg.mustRun(t, "bob", "stop", "--all", "--wait=false"); !strings.Contains(out, "No active clusters") {
		t.Errorf("bob's stop --all:\n%s", out)
	}

	// Refusals, each saying why.
	for _, c := range []struct {
		user string
		args []string
		want string
	}{
		{"bob", []string{"share", name, "--with", "group:x"}, "only its owner ann may share"},
		{"bob", []string{"unshare", name}, "only its owner ann may unshare"},
		{"bob", []string{"scale", name, "--workers", "2"}, "without scale"},
		{"carol", []string{"stop", name}, "without stop"},
		{"ann", []string{"share", name, "--with", "bob"}, "user:NAME or group:NAME"},
		{"ann", []string{"share", name, "--with", "user:nobody"}, "no user named nobody has logged in"},
		{"ann", []string{"share", name, "--with", "user:ann"}, "is you"},
		{"ann", []string{"share", name, "--with", "user:sam"}, "2 users are named sam; name one by id: user:oidc:sam1 or user:oidc:sam2"},
		{"ann", []string{"share", name, "--with", "group:ops", "--allow", "delete"}, `unknown action "delete"`},
		{"ann", []string{"share", name, "--allow", "stop"}, "say whom --allow is for"},
		{"ann", []string{"new-cluster", "--no-wait", "--share-allow", "stop"}, "name them with --share"},
	} {
		if out, err := tg.run(t, c.user, c.args...); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: gateway %s: %v\n%s\nwant an error saying %q", c.user, strings.Join(c.args, " "), err, out, c.want)
		}
	}

	if out := tg.mustRun(t, "ann", "share", name, "--with", "user:oidc:sam2"); !strings.Contains(out, "user:sam ") {
		t.Errorf("sharing with a user by id:\n%s", out)
	}
	tg.mustRun(t, "ann", "unshare", name, "--with", "user:oidc:sam2")

	// Unsharing says plainly what it ends and what it cannot.
	out = tg.mustRun(t, "ann", "unshare", name, "--with", "user:bob")
	for _, want := range []string{"no longer shared with:\n  user:bob", "still shared with:\n  group:ops", "Dask connections they already made stay open",
		"keep working while the cluster runs", "gateway stop " + name} {
		if !strings.Contains(out, want) {
			t.Errorf("unshare's output lacks %q:\n%s", want, out)
		}
	}
	if out := tg.mustRun(t, "bob", "list"); strings.Contains(out, name) {
		t.Errorf("bob still lists the cluster after the unshare:\n%s", out)
	}
	if out := tg.mustRun(t, "ann", "unshare", name, "--with", "user:bob"); !strings.Contains(out, "was not shared with user:bob: nothing changed") {
		t.Errorf("unsharing again:\n%s", out)
	}
	if out := tg.mustRun(t, "ann", "unshare", name); !strings.Contains(out, "no longer shared with:\n  group:ops") {
		t.Errorf("unshare all:\n%s", out)
	}
	// Not shared any more: not found to bob, as any cluster of another's;
	// a cluster on its way out cannot be shared.
	if out, err := tg.run(t, "bob", "share", name, "--with", "group:ops"); err == nil || !strings.Contains(err.Error(), "cluster "+name+" not found") {
		t.Errorf("bob shares a cluster not shared with him: %v\n%s", err, out)
	}
	tg.mustRun(t, "ann", "stop", name, "--wait=false")
	if out, err := tg.run(t, "ann", "share", name, "--with", "group:ops"); err == nil || !strings.Contains(err.Error(), "only a pending or running cluster can be shared") {
		t.Errorf("sharing a stopping cluster: %v\n%s", err, out)
	}
}

// TestShareCommandsUnderSettings: what each cluster.sharing refuses, in
// the owner's terms.
func TestShareCommandsUnderSettings(t *testing.T) {
	for _, c := range []struct {
		setting sharing.Setting
		with    string
		want    string // "" for success
	}{
		{sharing.Off, "group:ops", "sharing clusters is turned off on this gateway (cluster.sharing: off)"},
		{sharing.Groups, "user:bob", "only with groups you belong to (cluster.sharing: groups), not with user:bob; yours: group:ops, group:team"},
		{sharing.Groups, "group:finance", "group:finance is not one of yours"},
		{sharing.Groups, "group:ops", ""},
		{sharing.Any, "group:finance", ""},
	} {
		tg := newSharingGateway(t, c.setting)
		out, err := tg.run(t, "ann", "new-cluster", "--no-wait", "--share", c.with)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s: new-cluster --share %s: %v\n%s", c.setting, c.with, err, out)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%s: new-cluster --share %s: %v\n%s\nwant an error saying %q", c.setting, c.with, err, out, c.want)
		case c.want != "":
			if out := tg.mustRun(t, "ann", "list"); strings.Contains(out, "PENDING") {
				t.Errorf("%s: a cluster was made though its share was refused:\n%s", c.setting, out)
			}
		}
	}
}

// TestShareLimits: a cluster is shared with at most sharing.MaxShares users
// and groups, sharing.MaxTargets at a time.
func TestShareLimits(t *testing.T) {
	tg := newSharingGateway(t, sharing.Any)
	name := strings.TrimSpace(tg.mustRun(t, "ann", "new-cluster", "--no-wait"))
	groups := func(from, n int) string {
		var g []string
		for i := from; i < from+n; i++ {
			g = append(g, fmt.Sprintf("group:g%04d", i))
		}
		return strings.Join(g, ",")
	}
	if out, err := tg.run(t, "ann", "share", name, "--with", groups(0, sharing.MaxTargets+1)); err == nil || !strings.Contains(err.Error(), "at most 100 users and groups at once") {
		t.Errorf("sharing with %d at once: %v\n%s", sharing.MaxTargets+1, err, out)
	}
	for i := 0; i < sharing.MaxShares; i += sharing.MaxTargets {
		tg.mustRun(t, "ann", "share", name, "--with", groups(i, sharing.MaxTargets))
	}
	if out, err := tg.run(t, "ann", "share", name, "--with", "group:one-more"); err == nil || !strings.Contains(err.Error(), "at most 1000 users and groups; it would be 1001") {
		t.Errorf("the share past the limit: %v\n%s", err, out)
	}
	if out := tg.mustRun(t, "ann", "share", name, "--with", "group:g0001", "--allow", "stop"); !strings.Contains(out, "group:g0001") {
		t.Errorf("changing a share at the limit:\n%s", out)
	}
}
