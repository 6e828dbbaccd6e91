package devissuer

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/zitadel/oidc/v3/pkg/oidc"
	"github.com/zitadel/oidc/v3/pkg/op"
)

// storage is the in-memory op.Storage of the issuer. Every instant it keeps
// is read on Config.Now; instants handed to the library, which compares them
// with time.Now, are converted with Issuer.realTime.
type storage struct {
	iss    *Issuer
	client *client

	mu            sync.Mutex
	key           *signingKey
	oldKeys       []*signingKey
	authRequests  map[string]*authRequest  // by id
	codes         map[string]string        // authorization code -> auth request id
	accessTokens  map[string]*accessToken  // by id
	refreshTokens map[string]*refreshToken // by token (the token is its own id)
	devices       map[string]*deviceAuth   // by device code
	userCodes     map[string]string        // user code -> device code
}

var (
	_ op.Storage                    = (*storage)(nil)
	_ op.DeviceAuthorizationStorage = (*storage)(nil)
	_ op.CanSetUserinfoFromRequest  = (*storage)(nil)
)

func newStorage(iss *Issuer, key *signingKey) *storage {
	return &storage{
		iss:           iss,
		client:        newClient(iss),
		key:           key,
		authRequests:  make(map[string]*authRequest),
		codes:         make(map[string]string),
		accessTokens:  make(map[string]*accessToken),
		refreshTokens: make(map[string]*refreshToken),
		devices:       make(map[string]*deviceAuth),
		userCodes:     make(map[string]string),
	}
}

// randomToken returns n random bytes, base64url encoded.
func randomToken(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b) // never fails (crypto/rand panics instead)
	return base64.RawURLEncoding.EncodeToString(b)
}

// filterScopes keeps the supported scopes, once each, in request order.
func filterScopes(scopes []string) []string {
	out := make([]string, 0, len(scopes))
	for _, s := range scopes {
		if slices.Contains(supportedScopes, s) && !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	return out
}

// purgeLocked drops everything that has expired.
func (s *storage) purgeLocked() {
	now := s.iss.now()
	for id, ar := range s.authRequests {
		if now.After(ar.expires) {
			s.deleteAuthRequestLocked(id)
		}
	}
	for id, at := range s.accessTokens {
		if now.After(at.expires) {
			delete(s.accessTokens, id)
		}
	}
	for tok, rt := range s.refreshTokens {
		if now.After(rt.expires) {
			delete(s.refreshTokens, tok)
		}
	}
	for code, d := range s.devices {
		// Kept a little past expiry so that polling gets expired_token.
		if now.After(d.expires.Add(time.Minute)) {
			delete(s.devices, code)
			delete(s.userCodes, d.userCode)
		}
	}
}

// ---- signing keys ----

func (s *storage) rotateKey(k *signingKey) (previousKID string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	previousKID = s.key.id
	s.oldKeys = append(s.oldKeys, s.key)
	s.key = k
	return previousKID
}

func (s *storage) dropOldKeys() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := len(s.oldKeys)
	s.oldKeys = nil
	return n
}

func (s *storage) currentKey() *signingKey {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.key
}

func (s *storage) SigningKey(context.Context) (op.SigningKey, error) {
	return s.currentKey(), nil
}

func (s *storage) SignatureAlgorithms(context.Context) ([]jose.SignatureAlgorithm, error) {
	return []jose.SignatureAlgorithm{jose.RS256}, nil
}

func (s *storage) KeySet(context.Context) ([]op.Key, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	keys := []op.Key{s.key.public()}
	for _, k := range slices.Backward(s.oldKeys) {
		keys = append(keys, k.public())
	}
	return keys, nil
}

// ---- clients ----

func (s *storage) GetClientByClientID(_ context.Context, clientID string) (op.Client, error) {
	if clientID != s.iss.cfg.ClientID {
		return nil, oidc.ErrInvalidClient().WithDescription("unknown client_id")
	}
	return s.client, nil
}

func (s *storage) AuthorizeClientIDSecret(_ context.Context, clientID, _ string) error {
	if clientID != s.iss.cfg.ClientID {
		return oidc.ErrInvalidClient().WithDescription("unknown client_id")
	}
	return oidc.ErrInvalidClient().WithDescription("the client is public and has no secret")
}

func (s *storage) Health(context.Context) error { return nil }

// ---- authorization requests (code flow) ----

// authRequest implements op.AuthRequest. The storage hands out copies, so
// the library never reads one that the login page is changing.
type authRequest struct {
	id            string
	expires       time.Time
	clientID      string
	redirectURI   string
	state         string
	nonce         string
	scopes        []string
	responseType  oidc.ResponseType
	responseMode  oidc.ResponseMode
	codeChallenge *oidc.CodeChallenge
	code          string

	done     bool
	subject  string
	authTime time.Time
}

var _ op.AuthRequest = (*authRequest)(nil)

func (a *authRequest) GetID() string                         { return a.id }
func (a *authRequest) GetACR() string                        { return "" }
func (a *authRequest) GetAMR() []string                      { return nil }
func (a *authRequest) GetAudience() []string                 { return []string{a.clientID} }
func (a *authRequest) GetAuthTime() time.Time                { return a.authTime }
func (a *authRequest) GetClientID() string                   { return a.clientID }
func (a *authRequest) GetCodeChallenge() *oidc.CodeChallenge { return a.codeChallenge }
func (a *authRequest) GetNonce() string                      { return a.nonce }
func (a *authRequest) GetRedirectURI() string                { return a.redirectURI }
func (a *authRequest) GetResponseType() oidc.ResponseType    { return a.responseType }
func (a *authRequest) GetResponseMode() oidc.ResponseMode    { return a.responseMode }
func (a *authRequest) GetScopes() []string                   { return a.scopes }
func (a *authRequest) GetState() string                      { return a.state }
func (a *authRequest) GetSubject() string                    { return a.subject }
func (a *authRequest) Done() bool                            { return a.done }

func (a *authRequest) clone() *authRequest {
	c := *a
	return &c
}

func (s *storage) CreateAuthRequest(_ context.Context, req *oidc.AuthRequest, _ string) (op.AuthRequest, error) {
	ar := &authRequest{
		id:           randomToken(16),
		expires:      s.iss.now().Add(authRequestLifetime),
		clientID:     req.ClientID,
		redirectURI:  req.RedirectURI,
		state:        req.State,
		nonce:        req.Nonce,
		scopes:       slices.Clone(req.Scopes),
		responseType: req.ResponseType,
		responseMode: req.ResponseMode,
	}
	if req.CodeChallenge != "" {
		ar.codeChallenge = &oidc.CodeChallenge{Challenge: req.CodeChallenge, Method: req.CodeChallengeMethod}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.purgeLocked()
	s.authRequests[ar.id] = ar
	return ar.clone(), nil
}

var errUnknownAuthRequest = errors.New("unknown or expired authorization request")

func (s *storage) authRequestLocked(id string) (*authRequest, error) {
	ar, ok := s.authRequests[id]
	if !ok || s.iss.now().After(ar.expires) {
		return nil, errUnknownAuthRequest
	}
	return ar, nil
}

func (s *storage) AuthRequestByID(_ context.Context, id string) (op.AuthRequest, error) {
	ar, err := s.authRequestSnapshot(id)
	if err != nil {
		return nil, err // not a typed nil inside the interface
	}
	return ar, nil
}

func (s *storage) AuthRequestByCode(_ context.Context, code string) (op.AuthRequest, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	id, ok := s.codes[code]
	if !ok {
		return nil, errors.New("unknown or already used authorization code")
	}
	ar, err := s.authRequestLocked(id)
	if err != nil {
		return nil, err
	}
	return ar.clone(), nil
}

func (s *storage) SaveAuthCode(_ context.Context, id, code string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	ar, err := s.authRequestLocked(id)
	if err != nil {
		return err
	}
	if ar.code != "" {
		delete(s.codes, ar.code)
	}
	ar.code = code
	s.codes[code] = id
	return nil
}

func (s *storage) DeleteAuthRequest(_ context.Context, id string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.deleteAuthRequestLocked(id)
	return nil
}

func (s *storage) deleteAuthRequestLocked(id string) {
	if ar, ok := s.authRequests[id]; ok && ar.code != "" {
		delete(s.codes, ar.code)
	}
	delete(s.authRequests, id)
}

// completeAuthRequest marks the request as authenticated for subject (the
// login page's POST).
func (s *storage) completeAuthRequest(id, subject string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	ar, err := s.authRequestLocked(id)
	if err != nil {
		return err
	}
	ar.done = true
	ar.subject = subject
	ar.authTime = s.iss.now()
	return nil
}

// authRequestSnapshot returns a copy for the login page.
func (s *storage) authRequestSnapshot(id string) (*authRequest, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ar, err := s.authRequestLocked(id)
	if err != nil {
		return nil, err
	}
	return ar.clone(), nil
}

// ---- tokens ----

type accessToken struct {
	id           string
	subject      string
	clientID     string
	scopes       []string
	expires      time.Time
	refreshToken string // the refresh token issued with it, if any
}

type refreshToken struct {
	token         string
	subject       string
	clientID      string
	scopes        []string
	amr           []string
	authTime      time.Time
	expires       time.Time
	accessTokenID string
}

// refreshTokenRequest implements op.RefreshTokenRequest; it is a copy, so
// SetCurrentScopes only narrows what the new tokens get.
type refreshTokenRequest struct {
	token    string
	subject  string
	clientID string
	scopes   []string
	amr      []string
	authTime time.Time
}

var _ op.RefreshTokenRequest = (*refreshTokenRequest)(nil)

func (r *refreshTokenRequest) GetAMR() []string                 { return r.amr }
func (r *refreshTokenRequest) GetAudience() []string            { return []string{r.clientID} }
func (r *refreshTokenRequest) GetAuthTime() time.Time           { return r.authTime }
func (r *refreshTokenRequest) GetClientID() string              { return r.clientID }
func (r *refreshTokenRequest) GetScopes() []string              { return r.scopes }
func (r *refreshTokenRequest) GetSubject() string               { return r.subject }
func (r *refreshTokenRequest) SetCurrentScopes(scopes []string) { r.scopes = scopes }

// grantInfo is what the token requests the library hands back (our
// authRequest and refreshTokenRequest, *op.DeviceAuthorizationState) carry
// beyond op.TokenRequest.
func grantInfo(req op.TokenRequest) (clientID string, authTime time.Time, amr []string) {
	if r, ok := req.(interface{ GetClientID() string }); ok {
		clientID = r.GetClientID()
	}
	if r, ok := req.(interface{ GetAuthTime() time.Time }); ok {
		authTime = r.GetAuthTime()
	}
	if r, ok := req.(interface{ GetAMR() []string }); ok {
		amr = slices.Clone(r.GetAMR())
	}
	return clientID, authTime, amr
}

func (s *storage) newAccessTokenLocked(req op.TokenRequest, refresh string) *accessToken {
	clientID, _, _ := grantInfo(req)
	at := &accessToken{
		id:           randomToken(16),
		subject:      req.GetSubject(),
		clientID:     clientID,
		scopes:       slices.Clone(req.GetScopes()),
		expires:      s.iss.now().Add(s.iss.cfg.AccessTokenLifetime),
		refreshToken: refresh,
	}
	s.accessTokens[at.id] = at
	return at
}

func (s *storage) CreateAccessToken(_ context.Context, req op.TokenRequest) (string, time.Time, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.purgeLocked()
	at := s.newAccessTokenLocked(req, "")
	return at.id, s.iss.realTime(at.expires), nil
}

func (s *storage) CreateAccessAndRefreshTokens(_ context.Context, req op.TokenRequest, current string) (string, string, time.Time, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.purgeLocked()
	if current != "" {
		// Rotation: the presented refresh token is spent.
		old, ok := s.refreshTokens[current]
		if !ok {
			return "", "", time.Time{}, oidc.ErrInvalidGrant().WithDescription("refresh token is unknown, expired or already used")
		}
		delete(s.refreshTokens, current)
		delete(s.accessTokens, old.accessTokenID)
	}
	clientID, authTime, amr := grantInfo(req)
	rt := &refreshToken{
		token:    randomToken(32),
		subject:  req.GetSubject(),
		clientID: clientID,
		scopes:   slices.Clone(req.GetScopes()),
		amr:      amr,
		authTime: authTime,
		expires:  s.iss.now().Add(s.iss.cfg.RefreshTokenLifetime),
	}
	at := s.newAccessTokenLocked(req, rt.token)
	rt.accessTokenID = at.id
	s.refreshTokens[rt.token] = rt
	return at.id, rt.token, s.iss.realTime(at.expires), nil
}

func (s *storage) TokenRequestByRefreshToken(_ context.Context, token string) (op.RefreshTokenRequest, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	rt, ok := s.refreshTokens[token]
	if !ok || s.iss.now().After(rt.expires) {
		return nil, errors.New("refresh token is unknown, expired or already used")
	}
	return &refreshTokenRequest{
		token:    rt.token,
		subject:  rt.subject,
		clientID: rt.clientID,
		scopes:   slices.Clone(rt.scopes),
		amr:      slices.Clone(rt.amr),
		authTime: rt.authTime,
	}, nil
}

func (s *storage) TerminateSession(_ context.Context, userID, clientID string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for id, at := range s.accessTokens {
		if at.subject == userID && at.clientID == clientID {
			delete(s.accessTokens, id)
		}
	}
	for tok, rt := range s.refreshTokens {
		if rt.subject == userID && rt.clientID == clientID {
			delete(s.refreshTokens, tok)
		}
	}
	return nil
}

func (s *storage) GetRefreshTokenInfo(_ context.Context, clientID, token string) (string, string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	rt, ok := s.refreshTokens[token]
	if !ok || rt.clientID != clientID {
		return "", "", op.ErrInvalidRefreshToken
	}
	return rt.subject, rt.token, nil
}

func (s *storage) RevokeToken(_ context.Context, tokenOrID, _ string, clientID string) *oidc.Error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if rt, ok := s.refreshTokens[tokenOrID]; ok {
		if rt.clientID != clientID {
			return oidc.ErrInvalidClient().WithDescription("token was not issued to this client")
		}
		delete(s.refreshTokens, tokenOrID)
		delete(s.accessTokens, rt.accessTokenID)
		return nil
	}
	if at, ok := s.accessTokens[tokenOrID]; ok {
		if at.clientID != clientID {
			return oidc.ErrInvalidClient().WithDescription("token was not issued to this client")
		}
		delete(s.accessTokens, tokenOrID)
	}
	// Unknown tokens are not an error (RFC 7009, section 2.2).
	return nil
}

// ---- claims ----

// fillUserinfo sets the claims of subject for scopes: preferred_username and
// name for "profile", email and email_verified for "email", groups always.
func (s *storage) fillUserinfo(info *oidc.UserInfo, subject string, scopes []string) error {
	u, ok := s.iss.userBySubject(subject)
	if !ok {
		return fmt.Errorf("unknown subject %q", subject)
	}
	info.Subject = u.Subject
	if slices.Contains(scopes, oidc.ScopeProfile) {
		info.PreferredUsername = u.Username
		info.Name = u.Name
	}
	if slices.Contains(scopes, oidc.ScopeEmail) && u.Email != "" {
		info.Email = u.Email
		info.EmailVerified = true
	}
	groups := slices.Clone(u.Groups)
	if groups == nil {
		groups = []string{}
	}
	info.AppendClaims(claimGroups, groups)
	return nil
}

// SetUserinfoFromScopes is deprecated in the library; SetUserinfoFromRequest
// does the work.
func (s *storage) SetUserinfoFromScopes(context.Context, *oidc.UserInfo, string, string, []string) error {
	return nil
}

func (s *storage) SetUserinfoFromRequest(_ context.Context, info *oidc.UserInfo, req op.IDTokenRequest, scopes []string) error {
	return s.fillUserinfo(info, req.GetSubject(), scopes)
}

func (s *storage) SetUserinfoFromToken(_ context.Context, info *oidc.UserInfo, tokenID, subject, _ string) error {
	s.mu.Lock()
	at, ok := s.accessTokens[tokenID]
	var scopes []string
	if ok {
		ok = at.subject == subject && !s.iss.now().After(at.expires)
		scopes = slices.Clone(at.scopes)
	}
	s.mu.Unlock()
	if !ok {
		return oidc.ErrAccessDenied().WithDescription("access token is invalid or expired")
	}
	return s.fillUserinfo(info, subject, scopes)
}

func (s *storage) SetIntrospectionFromToken(context.Context, *oidc.IntrospectionResponse, string, string, string) error {
	return errors.New("token introspection is not supported by the development issuer")
}

func (s *storage) GetPrivateClaimsFromScopes(context.Context, string, string, []string) (map[string]any, error) {
	return nil, nil
}

func (s *storage) GetKeyByIDAndClientID(context.Context, string, string) (*jose.JSONWebKey, error) {
	return nil, errors.New("JWT client authentication is not supported by the development issuer")
}

func (s *storage) ValidateJWTProfileScopes(context.Context, string, []string) ([]string, error) {
	return nil, errors.New("the JWT profile grant is not supported by the development issuer")
}

// ---- device authorization (RFC 8628) ----

type deviceAuth struct {
	clientID   string
	deviceCode string
	userCode   string
	scopes     []string
	expires    time.Time

	done     bool
	denied   bool
	subject  string
	authTime time.Time
}

func (s *storage) StoreDeviceAuthorization(_ context.Context, clientID, deviceCode, userCode string, expires time.Time, scopes []string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.purgeLocked()
	if _, dup := s.userCodes[userCode]; dup {
		return op.ErrDuplicateUserCode
	}
	if _, dup := s.devices[deviceCode]; dup {
		return errors.New("duplicate device code")
	}
	s.devices[deviceCode] = &deviceAuth{
		clientID:   clientID,
		deviceCode: deviceCode,
		userCode:   userCode,
		scopes:     filterScopes(scopes),
		// The library computed expires on time.Now; keep the lifetime, on our clock.
		expires: s.iss.now().Add(time.Until(expires)),
	}
	s.userCodes[userCode] = deviceCode
	return nil
}

func (s *storage) GetDeviceAuthorizatonState(_ context.Context, clientID, deviceCode string) (*op.DeviceAuthorizationState, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	d, ok := s.devices[deviceCode]
	if !ok || d.clientID != clientID {
		return nil, errors.New("unknown device code")
	}
	state := &op.DeviceAuthorizationState{
		ClientID: d.clientID,
		Audience: []string{d.clientID},
		Scopes:   slices.Clone(d.scopes),
		Expires:  s.iss.realTime(d.expires),
		Done:     d.done,
		Denied:   d.denied,
		Subject:  d.subject,
		AuthTime: d.authTime,
	}
	if d.done || d.denied {
		// A device code yields tokens (or access_denied) once.
		delete(s.devices, deviceCode)
		delete(s.userCodes, d.userCode)
	}
	return state, nil
}

var errUnknownUserCode = errors.New("unknown or expired user code")

// deviceByUserCode returns a copy of the pending device authorization.
func (s *storage) deviceByUserCode(userCode string) (*deviceAuth, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	d, err := s.pendingDeviceLocked(userCode)
	if err != nil {
		return nil, err
	}
	c := *d
	return &c, nil
}

func (s *storage) pendingDeviceLocked(userCode string) (*deviceAuth, error) {
	dc, ok := s.userCodes[userCode]
	if !ok {
		return nil, errUnknownUserCode
	}
	d, ok := s.devices[dc]
	if !ok || s.iss.now().After(d.expires) {
		return nil, errUnknownUserCode
	}
	if d.done || d.denied {
		return nil, errors.New("this user code has already been used")
	}
	return d, nil
}

// decideDevice approves (subject != "") or denies the device authorization
// of userCode.
func (s *storage) decideDevice(userCode, subject string, deny bool) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	d, err := s.pendingDeviceLocked(userCode)
	if err != nil {
		return err
	}
	if deny {
		d.denied = true
		return nil
	}
	d.done = true
	d.subject = subject
	d.authTime = s.iss.now()
	return nil
}
