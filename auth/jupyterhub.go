package auth

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"golang.org/x/sync/singleflight"

	"github.com/gatewayhq/gateway/store"
)

// ErrUnavailable is a credential that could not be checked: the service
// that vouches for it (JupyterHub) did not answer, or answered nonsense.
// It is not ErrInvalid: the caller is told to try again (503), and no
// cookie or session is dropped because of it.
var ErrUnavailable = errors.New("credentials cannot be checked right now")

// DefaultHubCacheTTL is how long an answer of JupyterHub is reused when
// JupyterHubConfig does not say: a token revoked on the hub stops within it.
const DefaultHubCacheTTL = 30 * time.Second

// Hub identities (JupyterHubConfig.Identity).
const (
	// HubIdentityHub makes a hub user "jupyterhub:<name>", an identity of
	// its own.
	HubIdentityHub = "jupyterhub"
	// HubIdentityOIDCSubject makes a hub user "oidc:<name>": for hubs whose
	// user names are the subjects of the gateway's own OIDC provider.
	HubIdentityOIDCSubject = "oidc_subject"
)

// JupyterHubConfig configures JupyterHub tokens.
type JupyterHubConfig struct {
	// APIURL is the hub's REST API, such as http://hub:8081/hub/api.
	APIURL string
	// APIToken is the gateway's own hub service's token. It names the
	// service, whose access scope users' tokens must carry.
	APIToken string
	// CacheTTL is how long an answer of the hub, yes or no, is reused
	// (DefaultHubCacheTTL when zero).
	CacheTTL time.Duration
	// Identity is HubIdentityHub (when empty) or HubIdentityOIDCSubject.
	Identity    string
	AdminUsers  []string
	AdminGroups []string
	// Users, when set, records each hub user's name and groups whenever
	// the hub vouches for them, for their browser sessions and API tokens
	// (see Access).
	Users      ClaimsRecorder
	HTTPClient *http.Client
	Now        func() time.Time
}

// JupyterHub authenticates the tokens of a JupyterHub's users, as
// dask-gateway's JupyterHubAuthenticator does: the hub says whose a token
// is (GET <api>/user with it). A token must also carry the hub's
// permission to use the gateway's hub service (access:services, for all
// services or for the gateway's), so that a token the hub issued to another
// service or server (another user's notebook server, say) is not accepted
// here.
//
// Answers, yes and no, are reused for CacheTTL, so a busy client, and a
// forged token tried again and again, cost the hub one request per token
// per CacheTTL; concurrent requests with one token share one hub request.
type JupyterHub struct {
	cfg     JupyterHubConfig
	userURL string
	flight  singleflight.Group

	mu    sync.Mutex
	cache map[[32]byte]hubAnswer

	smu     sync.Mutex
	service string // the gateway's service name on the hub, once learned
}

type hubAnswer struct {
	user  *User // nil: refused, with err
	err   error
	until time.Time
}

// maxHubAnswers bounds the answers kept; past it expired ones are swept,
// then an arbitrary one goes.
const maxHubAnswers = 10000

// hubTimeout bounds one request to the hub.
const hubTimeout = 10 * time.Second

// maxHubToken is the longest credential sent to the hub.
const maxHubToken = 4096

// NewJupyterHub authenticates the users of the hub whose API is at
// cfg.APIURL. It asks the hub nothing until a token arrives.
func NewJupyterHub(cfg JupyterHubConfig) (*JupyterHub, error) {
	if cfg.APIURL == "" || cfg.APIToken == "" {
		return nil, errors.New("auth: JupyterHub needs auth.jupyterhub.api_url and auth.jupyterhub.api_token")
	}
	switch cfg.Identity {
	case "":
		cfg.Identity = HubIdentityHub
	case HubIdentityHub, HubIdentityOIDCSubject:
	default:
		return nil, fmt.Errorf("auth: JupyterHub identity %q must be %s or %s", cfg.Identity, HubIdentityHub, HubIdentityOIDCSubject)
	}
	if cfg.CacheTTL <= 0 {
		cfg.CacheTTL = DefaultHubCacheTTL
	}
	if cfg.HTTPClient == nil {
		cfg.HTTPClient = http.DefaultClient
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &JupyterHub{cfg: cfg, userURL: strings.TrimRight(cfg.APIURL, "/") + "/user", cache: map[[32]byte]hubAnswer{}}, nil
}

// CacheTTL is how long answers are reused.
func (h *JupyterHub) CacheTTL() time.Duration { return h.cfg.CacheTTL }

// Authenticate implements Authenticator. It leaves the gateway's own API
// tokens and ID tokens to their authenticators; any other credential is
// the hub's to judge. A hub that cannot answer gives an error wrapping
// ErrUnavailable.
func (h *JupyterHub) Authenticate(ctx context.Context, token string) (*User, error) {
	if strings.HasPrefix(token, APITokenPrefix) || looksLikeJWT(token) {
		return nil, ErrNoCredentials
	}
	if !plausibleHubToken(token) {
		// Never sent: a header the hub cannot parse would read as the
		// hub failing (503) rather than the token being wrong.
		return nil, fmt.Errorf("%w: not a token this gateway or its JupyterHub issues", ErrInvalid)
	}
	k := sha256.Sum256([]byte(token))
	if a, ok := h.cached(k, h.cfg.Now()); ok {
		return a.result()
	}
	// One request per token at a time: callers that come while it is out
	// share its answer. It is not the first caller's to cancel.
	v, err, _ := h.flight.Do(hex.EncodeToString(k[:]), func() (any, error) {
		// A caller that missed the cache just before another's request
		// remembered its answer finds it here, and asks nothing.
		if a, ok := h.cached(k, h.cfg.Now()); ok {
			return a, nil
		}
		actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), hubTimeout)
		defer cancel()
		return h.ask(actx, k, token)
	})
	if err != nil {
		return nil, err
	}
	return v.(hubAnswer).result()
}

// result is the answer as Authenticate returns it: a copy of the user, or
// the refusal.
func (a hubAnswer) result() (*User, error) {
	if a.user == nil {
		return nil, a.err
	}
	u := *a.user
	return &u, nil
}

// cached returns the answer remembered for k, if one is still fresh.
func (h *JupyterHub) cached(k [32]byte, now time.Time) (hubAnswer, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	a, ok := h.cache[k]
	if ok && !now.Before(a.until) {
		delete(h.cache, k)
		ok = false
	}
	return a, ok
}

// remember keeps an answer until its time is up, within the bound.
func (h *JupyterHub) remember(k [32]byte, a hubAnswer, now time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.cache) >= maxHubAnswers {
		for key, old := range h.cache {
			if !now.Before(old.until) {
				delete(h.cache, key)
			}
		}
		for key := range h.cache {
			if len(h.cache) < maxHubAnswers {
				break
			}
			delete(h.cache, key)
		}
	}
	h.cache[k] = a
}

// plausibleHubToken: printable ASCII without spaces, of a sane length.
func plausibleHubToken(tok string) bool {
	if tok == "" || len(tok) > maxHubToken {
		return false
	}
	for i := 0; i < len(tok); i++ {
		if tok[i] <= ' ' || tok[i] > '~' {
			return false
		}
	}
	return true
}

// hubModel is what GET <api>/user answers, as far as it matters here.
type hubModel struct {
	Kind   string   `json:"kind"`
	Name   string   `json:"name"`
	Groups []string `json:"groups"`
	Scopes []string `json:"scopes"`
}

// ask asks the hub whose token is, and remembers the answer when there is
// one (a user, or a refusal). A hub that does not answer is not
// remembered: the next request asks again.
func (h *JupyterHub) ask(ctx context.Context, k [32]byte, token string) (hubAnswer, error) {
	// The clock is read before the hub is asked: the answer is at least as
	// new as now, so a revocation on the hub after now shows by
	// now+CacheTTL at the latest.
	now := h.cfg.Now()
	service, err := h.serviceName(ctx)
	if err != nil {
		return hubAnswer{}, err
	}
	m, status, err := h.whoami(ctx, token)
	if err != nil {
		return hubAnswer{}, err
	}
	a := hubAnswer{until: now.Add(h.cfg.CacheTTL)}
	switch {
	case status == http.StatusUnauthorized || status == http.StatusForbidden || status == http.StatusNotFound:
		a.err = fmt.Errorf("%w: JupyterHub does not accept this token (unknown, revoked or expired)", ErrInvalid)
	case status != http.StatusOK:
		return hubAnswer{}, fmt.Errorf("%w: JupyterHub answered HTTP %d to GET %s", ErrUnavailable, status, h.userURL)
	case m.Kind != "user":
		a.err = fmt.Errorf("%w: this JupyterHub token is a %s's, not a user's", ErrInvalid, orDefault(m.Kind, "non-user"))
	case m.Name == "" || len(m.Name) > 255 || !utf8.ValidString(m.Name):
		a.err = fmt.Errorf("%w: JupyterHub named no usable user for this token", ErrInvalid)
	case !slices.Contains(m.Scopes, "access:services") && !slices.Contains(m.Scopes, "access:services!service="+service):
		a.err = fmt.Errorf("%w: this JupyterHub token does not grant access to the gateway's hub service %q (it lacks the scope access:services!service=%s; see docs/operating.md, JupyterHub)", ErrInvalid, service, service)
	default:
		u := h.userOf(m)
		if err := h.record(ctx, u, now); err != nil {
			return hubAnswer{}, err
		}
		a.user = u
	}
	h.remember(k, a, now)
	return a, nil
}

func orDefault(s, d string) string {
	if s == "" {
		return d
	}
	return s
}

// userOf is the gateway's user for the hub's.
func (h *JupyterHub) userOf(m *hubModel) *User {
	u := &User{Name: m.Name, Via: "jupyterhub", Groups: slices.Clone(m.Groups)}
	if h.cfg.Identity == HubIdentityOIDCSubject {
		u.ID, u.Subject = "oidc:"+m.Name, m.Name
	} else {
		u.ID = "jupyterhub:" + m.Name
	}
	u.Admin = isAdmin(u, h.cfg.AdminUsers, h.cfg.AdminGroups)
	return u
}

// record keeps what the hub just said of u, for the sessions and API
// tokens of the same user.
func (h *JupyterHub) record(ctx context.Context, u *User, at time.Time) error {
	if h.cfg.Users == nil {
		return nil
	}
	if _, err := h.cfg.Users.RecordUserClaims(ctx, &store.UserClaims{ID: u.Owner(), Name: u.Name, Groups: u.Groups, ClaimsAt: at}); err != nil {
		// Not ErrInvalid: the token is good, the store is not answering.
		return fmt.Errorf("auth: record the groups of %s: %w", u.Name, err)
	}
	return nil
}

// whoami asks the hub for the model of token's owner: the status, and the
// model when it is 200.
func (h *JupyterHub) whoami(ctx context.Context, token string) (*hubModel, int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, h.userURL, nil)
	if err != nil {
		return nil, 0, fmt.Errorf("%w: auth.jupyterhub.api_url: %v", ErrUnavailable, err)
	}
	req.Header.Set("Authorization", "token "+token)
	req.Header.Set("Accept", "application/json")
	resp, err := h.cfg.HTTPClient.Do(req)
	if err != nil {
		return nil, 0, fmt.Errorf("%w: JupyterHub does not answer: %v", ErrUnavailable, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
		return nil, resp.StatusCode, nil
	}
	var m hubModel
	if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&m); err != nil {
		return nil, 0, fmt.Errorf("%w: JupyterHub's answer to GET %s is not a user model: %v", ErrUnavailable, h.userURL, err)
	}
	return &m, resp.StatusCode, nil
}

// serviceName is the gateway's own service name on the hub, learned from
// its token once.
func (h *JupyterHub) serviceName(ctx context.Context) (string, error) {
	h.smu.Lock()
	defer h.smu.Unlock()
	if h.service != "" {
		return h.service, nil
	}
	m, status, err := h.whoami(ctx, h.cfg.APIToken)
	if err != nil {
		return "", err
	}
	switch {
	case status != http.StatusOK:
		return "", fmt.Errorf("%w: JupyterHub answered HTTP %d to the gateway's own token (auth.jupyterhub.api_token): is the gateway registered as a hub service with that api_token?", ErrUnavailable, status)
	case m.Kind != "service" || m.Name == "":
		return "", fmt.Errorf("%w: auth.jupyterhub.api_token must be the token of the gateway's hub service, not a %s's", ErrUnavailable, orDefault(m.Kind, "non-service"))
	}
	h.service = m.Name
	return h.service, nil
}
