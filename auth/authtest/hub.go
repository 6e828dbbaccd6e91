package authtest

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/gatewayhq/gateway/auth"
)

// HubServiceToken is the token of the gateway's service, "gateway", on
// every Hub.
const HubServiceToken = "svc-0123456789abcdef0123456789abcdef"

// HubClientID is the gateway service's OAuth client on every Hub.
const HubClientID = "service-gateway"

// HubAccess is the scope that lets a token reach the gateway's service.
const HubAccess = "access:services!service=gateway"

// HubToken is whose a token is, as JupyterHub's GET /hub/api/user says.
type HubToken struct {
	Kind   string // "user" or "service"
	Name   string
	Groups []string
	Scopes []string
}

// Hub stands in for the parts of JupyterHub's REST API that the gateway
// uses (GET /hub/api/user, and the OAuth authorization and token
// endpoints), for unit tests of the code around them; the integration tests
// run the real JupyterHub.
type Hub struct {
	*httptest.Server

	mu       sync.Mutex
	tokens   map[string]HubToken
	asks     map[string]int // GET /user requests, by the token they carried
	status   int            // when not 0, every answer
	hang     bool           // close connections unanswered
	signedIn string         // the user the authorization endpoint signs in
	codes    map[string]string
	redirect string        // the service's oauth_redirect_uri
	gate     chan struct{} // when set, GET /user waits for it to close
	arrived  chan<- string // told of each request that waits
}

// NewHub starts a hub whose service "gateway" has HubServiceToken and
// sends OAuth answers to redirect; it stops when the test ends.
func NewHub(t testing.TB, redirect string) *Hub {
	t.Helper()
	h := &Hub{tokens: map[string]HubToken{}, asks: map[string]int{}, codes: map[string]string{}, redirect: redirect}
	h.tokens[HubServiceToken] = HubToken{Kind: "service", Name: "gateway"}
	h.Server = httptest.NewServer(http.HandlerFunc(h.serve))
	t.Cleanup(h.Close)
	return h
}

// APIURL is the hub's API, as auth.jupyterhub.api_url names it.
func (h *Hub) APIURL() string { return h.URL + "/hub/api" }

// AddToken makes tok a token of owner.
func (h *Hub) AddToken(tok string, owner HubToken) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.tokens[tok] = owner
}

// Revoke forgets tok, as revoking it on the hub does.
func (h *Hub) Revoke(tok string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.tokens, tok)
}

// Asks is how many GET /user requests carried tok.
func (h *Hub) Asks(tok string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.asks[tok]
}

// SetStatus makes every answer this status (0: answer normally).
func (h *Hub) SetStatus(code int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.status = code
}

// SetHang makes the hub close every connection without an answer.
func (h *Hub) SetHang(hang bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.hang = hang
}

// Hold makes GET /user requests wait until the returned function is
// called; arrived receives once for each request that waits.
func (h *Hub) Hold(arrived chan<- string) (release func()) {
	gate := make(chan struct{})
	h.mu.Lock()
	h.gate, h.arrived = gate, arrived
	h.mu.Unlock()
	return func() {
		h.mu.Lock()
		h.gate, h.arrived = nil, nil
		h.mu.Unlock()
		close(gate)
	}
}

// SignIn makes the authorization endpoint sign name in, as a hub with
// that user's cookie does.
func (h *Hub) SignIn(name string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.signedIn = name
}

func (h *Hub) serve(w http.ResponseWriter, r *http.Request) {
	h.mu.Lock()
	status, hang := h.status, h.hang
	h.mu.Unlock()
	if hang {
		panic(http.ErrAbortHandler) // the connection closes with no answer
	}
	if status != 0 {
		http.Error(w, http.StatusText(status), status)
		return
	}
	switch r.URL.Path {
	case "/hub/api/user":
		h.user(w, r)
	case "/hub/api/oauth2/authorize":
		h.authorize(w, r)
	case "/hub/api/oauth2/token":
		h.token(w, r)
	default:
		http.NotFound(w, r)
	}
}

func (h *Hub) user(w http.ResponseWriter, r *http.Request) {
	tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "token ")
	if !ok {
		http.Error(w, `{"status": 403, "message": "Forbidden"}`, http.StatusForbidden)
		return
	}
	h.mu.Lock()
	h.asks[tok]++
	gate, arrived := h.gate, h.arrived
	h.mu.Unlock()
	if gate != nil && tok != HubServiceToken {
		if arrived != nil {
			arrived <- tok
		}
		<-gate
	}
	h.mu.Lock()
	owner, known := h.tokens[tok]
	h.mu.Unlock()
	if !known {
		http.Error(w, `{"status": 403, "message": "Forbidden"}`, http.StatusForbidden)
		return
	}
	m := map[string]any{"kind": owner.Kind, "name": owner.Name, "scopes": owner.Scopes, "admin": false}
	if owner.Kind == "user" {
		m["groups"] = owner.Groups
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(m)
}

func (h *Hub) authorize(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	h.mu.Lock()
	defer h.mu.Unlock()
	if q.Get("client_id") != HubClientID || q.Get("redirect_uri") != h.redirect || q.Get("response_type") != "code" || h.signedIn == "" {
		http.Error(w, "bad authorization request", http.StatusBadRequest)
		return
	}
	code := auth.NewToken("code_")
	h.codes[code] = h.signedIn
	http.Redirect(w, r, h.redirect+"?"+url.Values{"code": {code}, "state": {q.Get("state")}}.Encode(), http.StatusFound)
}

func (h *Hub) token(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseForm(); err != nil {
		http.Error(w, "bad form", http.StatusBadRequest)
		return
	}
	f := r.PostForm
	h.mu.Lock()
	defer h.mu.Unlock()
	name, ok := h.codes[f.Get("code")]
	delete(h.codes, f.Get("code"))
	if !ok || f.Get("client_id") != HubClientID || f.Get("client_secret") != HubServiceToken || f.Get("redirect_uri") != h.redirect ||
		f.Get("grant_type") != "authorization_code" {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		_, _ = w.Write([]byte(`{"error": "invalid_grant"}`))
		return
	}
	access := auth.NewToken("")
	groups := []string{}
	for _, t := range h.tokens {
		if t.Kind == "user" && t.Name == name {
			groups = t.Groups
		}
	}
	h.tokens[access] = HubToken{Kind: "user", Name: name, Groups: groups, Scopes: []string{HubAccess, "read:users:name!user=" + name, "read:users:groups!user=" + name}}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{"access_token": access, "token_type": "Bearer", "expires_in": 3600})
}
