package schedule

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/gatewayhq/gateway/api"
	"github.com/gatewayhq/gateway/auth"
	"github.com/gatewayhq/gateway/client"
)

// TestGrantsActAsOwnerInProcessOnly: a scheduled run's credential makes
// the API see the schedule's owner, only for requests made in process and
// only until the run ends; the same credential sent over the network is
// refused, and other credentials still work.
func TestGrantsActAsOwnerInProcessOnly(t *testing.T) {
	g := NewGrants()
	static := auth.NewStaticTokens(map[string]auth.User{"static-token": {Name: "bob"}})
	srv := api.New(api.Config{PublicURL: "http://127.0.0.1:1"}, nil, g.Wrap(static), nil, nil)
	ctx := context.Background()

	tok, revoke, err := g.issue(auth.User{ID: "oidc:alice", Name: "alice", Groups: []string{"team"}})
	if err != nil {
		t.Fatal(err)
	}
	in := client.NewWithHTTP("http://127.0.0.1:1", tok, &http.Client{Transport: inProcess{h: srv}})
	who, err := in.Whoami(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if who["id"] != "oidc:alice" || who["name"] != "alice" || who["admin"] != false {
		t.Errorf("in process the grant is %v, want alice (not admin)", who)
	}

	// Over the network: refused.
	hs := httptest.NewServer(srv)
	defer hs.Close()
	net, err := client.New(hs.URL, tok, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := net.Whoami(ctx); err == nil {
		t.Error("the grant was accepted over the network")
	}
	// Other credentials pass through.
	bob, _ := client.New(hs.URL, "static-token", nil)
	if who, err := bob.Whoami(ctx); err != nil || who["name"] != "bob" {
		t.Errorf("a static token through the wrapper: %v %v", who, err)
	}

	// After the run: refused in process too.
	revoke()
	if _, err := in.Whoami(ctx); err == nil {
		t.Error("the grant still works after its run ended")
	}
}

// forgetful counts the revocations passed on to it.
type forgetful struct {
	auth.Authenticator
	forgot int
}

func (f *forgetful) Forget() { f.forgot++ }

// The wrapper passes a revocation on to what it wraps, so that a revoked
// API token stops at once on the replica that revoked it (the gateway's
// API and console call Forget on the wrapped authenticator).
func TestGrantsPassForgetOn(t *testing.T) {
	inner := &forgetful{Authenticator: auth.NewStaticTokens(nil)}
	wrapped, ok := NewGrants().Wrap(inner).(interface{ Forget() })
	if !ok {
		t.Fatal("the wrapper has no Forget")
	}
	wrapped.Forget()
	if inner.forgot != 1 {
		t.Fatalf("Forget reached the wrapped authenticator %d times, want 1", inner.forgot)
	}
}
