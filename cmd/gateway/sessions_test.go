package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/gatewayhq/gateway/api"
	"github.com/gatewayhq/gateway/api/apitype"
	"github.com/gatewayhq/gateway/auth"
	"github.com/gatewayhq/gateway/auth/authtest"
	"github.com/gatewayhq/gateway/client"
	"github.com/gatewayhq/gateway/store"
)

// sessionGateway is the real API with browser sessions in a real store;
// "ann" and "bob" are bearer tokens.
type sessionGateway struct {
	url      string
	sessions *auth.Sessions
}

func newSessionGateway(t *testing.T) *sessionGateway {
	t.Helper()
	sessions, db := authtest.StoredSessions(t)
	who := tokens{"ann": {ID: "id-ann", Name: "ann"}, "bob": {ID: "id-bob", Name: "bob"}}
	s := api.New(api.Config{Version: "test"}, &core{rec: &records{quotas: map[string]store.QuotaRow{}, now: time.Now}}, who, sessions, nil)
	s.SetSessionStore(db)
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)
	return &sessionGateway{url: srv.URL, sessions: sessions}
}

// signIn starts a browser session for a user and returns its cookie.
func (sg *sessionGateway) signIn(t *testing.T, id, name string) *http.Cookie {
	t.Helper()
	c, err := sg.sessions.Start(context.Background(), auth.User{ID: id, Name: name}, "login")
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func (sg *sessionGateway) valid(c *http.Cookie) bool {
	r := httptest.NewRequest(http.MethodGet, "/clusters/x/status", nil)
	r.AddCookie(c)
	_, err := sg.sessions.FromRequest(r)
	return err == nil
}

// cli runs the CLI with args (no --token: the credentials file decides).
func cli(t *testing.T, args ...string) (string, string, error) {
	t.Helper()
	root := newRootCmd()
	var out, errOut bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&errOut)
	root.SetArgs(args)
	err := root.ExecuteContext(context.Background())
	return out.String(), errOut.String(), err
}

// TestSessionsCommand: gateway sessions lists the caller's browser sessions
// and ends one or all of them; mistakes say what to type.
func TestSessionsCommand(t *testing.T) {
	sg := newSessionGateway(t)
	t.Setenv("XDG_CONFIG_HOME", t.TempDir())
	t.Setenv("GATEWAY_TOKEN", "")
	run := func(token string, args ...string) (string, error) {
		t.Helper()
		out, _, err := cli(t, append(args, "--gateway", sg.url, "--token", token)...)
		return out, err
	}
	if out, err := run("ann", "sessions"); err != nil || !strings.Contains(out, "No active browser sessions") {
		t.Fatalf("no sessions: %v %s", err, out)
	}
	first, second := sg.signIn(t, "id-ann", "ann"), sg.signIn(t, "id-ann", "ann")
	bobs := sg.signIn(t, "id-bob", "bob")
	var list []apitype.SessionJSON
	out, err := run("ann", "sessions", "-o", "json")
	if err != nil || decodeJSON(out, &list) != nil || len(list) != 2 {
		t.Fatalf("ann's sessions: %v %s", err, out)
	}
	if out, err := run("ann", "sessions"); err != nil || !strings.Contains(out, list[0].ID) || !strings.Contains(out, "login") {
		t.Errorf("table: %v %s", err, out)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"sessions", "revoke"}, "name one session"},
		{[]string{"sessions", "revoke", list[0].ID, "--all"}, "name one session"},
		{[]string{"sessions", "revoke", "ses_nobody"}, "no active session ses_nobody"},
	} {
		if out, err := run("ann", tc.args...); err == nil || !strings.Contains(err.Error()+out, tc.want) {
			t.Errorf("%v: %v %s, want an error saying %q", tc.args, err, out, tc.want)
		}
	}
	if out, err := run("bob", "sessions", "revoke", list[0].ID); err == nil {
		t.Errorf("bob ended ann's session: %s", out)
	}
	if out, err := run("ann", "sessions", "revoke", list[0].ID); err != nil || !strings.Contains(out, "ended") {
		t.Fatalf("revoke: %v %s", err, out)
	}
	if out, err := run("ann", "sessions", "revoke", "--all"); err != nil || !strings.Contains(out, "1 browser session(s) ended") {
		t.Fatalf("revoke --all: %v %s", err, out)
	}
	if sg.valid(first) || sg.valid(second) || !sg.valid(bobs) {
		t.Errorf("after ann ended hers: ann's %v %v (want false), bob's %v (want true)", sg.valid(first), sg.valid(second), sg.valid(bobs))
	}
}

// TestLogoutEndsSessions: gateway logout ends the user's browser sessions,
// then forgets the login; --keep-sessions leaves them; a gateway that
// cannot be reached does not keep the login from being forgotten.
func TestLogoutEndsSessions(t *testing.T) {
	sg := newSessionGateway(t)
	t.Setenv("XDG_CONFIG_HOME", t.TempDir())
	t.Setenv("GATEWAY_TOKEN", "")
	t.Setenv("GATEWAY_URL", "")
	login := func(url, token string) {
		t.Helper()
		if err := storeLogin(client.Key(url), client.Entry{Token: token}, ""); err != nil {
			t.Fatal(err)
		}
	}
	loggedIn := func(url string) bool {
		creds, err := client.LoadCredentials()
		if err != nil {
			t.Fatal(err)
		}
		return creds.Gateways[client.Key(url)].Token != ""
	}

	c := sg.signIn(t, "id-ann", "ann")
	login(sg.url, "ann")
	out, _, err := cli(t, "logout", "--keep-sessions")
	if err != nil || strings.Contains(out, "Ended") || !sg.valid(c) || loggedIn(sg.url) {
		t.Fatalf("logout --keep-sessions: %v %s (session valid %v)", err, out, sg.valid(c))
	}

	login(sg.url, "ann")
	out, _, err = cli(t, "logout")
	if err != nil || !strings.Contains(out, "Ended 1 browser session") || sg.valid(c) || loggedIn(sg.url) {
		t.Fatalf("logout: %v %s (session valid %v, still logged in %v)", err, out, sg.valid(c), loggedIn(sg.url))
	}

	// A gateway that is gone: the sessions cannot be ended, which is said,
	// and the login is forgotten all the same.
	dead := httptest.NewServer(http.NotFoundHandler())
	deadURL := dead.URL
	dead.Close()
	login(deadURL, "ann")
	out, errOut, err := cli(t, "logout")
	if err != nil || !strings.Contains(errOut, "were not ended") || loggedIn(deadURL) {
		t.Errorf("logout from an unreachable gateway: %v %s %s", err, out, errOut)
	}
}

func decodeJSON(s string, v any) error {
	if strings.TrimSpace(s) == "" {
		return errors.New("empty output")
	}
	return json.Unmarshal([]byte(s), v)
}
