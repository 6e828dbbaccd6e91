package build

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/ecr"
	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"
	"golang.org/x/oauth2"
	"golang.org/x/oauth2/google"

	"github.com/gatewayhq/gateway/images"
	"github.com/gatewayhq/gateway/internal/sdkhttp"
)

// Auth kinds.
const (
	AuthAuto   = "auto"
	AuthNone   = "none"
	AuthBasic  = "basic"
	AuthECR    = "ecr"
	AuthGoogle = "google"
	// authKeychain is what "auto" resolves to when nothing else fits.
	authKeychain = "keychain"
)

var (
	reECRHost    = regexp.MustCompile(`^[0-9]{12}\.dkr\.ecr(?:-fips)?\.([a-z0-9-]+)\.amazonaws\.com(?:\.cn)?$`)
	reGoogleHost = regexp.MustCompile(`(?:^|\.)gcr\.io$|-docker\.pkg\.dev$`)
)

// authKind returns the kind Auth resolves to for a registry host: kind
// itself unless it is "auto" (or empty).
func authKind(kind, host, username string) string {
	switch kind = strings.ToLower(strings.TrimSpace(kind)); kind {
	case "", AuthAuto:
	default:
		return kind
	}
	host = strings.ToLower(host)
	if h, _, ok := strings.Cut(host, ":"); ok {
		host = h
	}
	switch {
	case reECRHost.MatchString(host):
		return AuthECR
	case reGoogleHost.MatchString(host):
		return AuthGoogle
	case username != "":
		return AuthBasic
	default:
		return authKeychain
	}
}

// registryAuth authenticates to the repository's registry: an
// authn.Authenticator whose credentials (ECR and Google tokens) are fetched
// when needed and cached until shortly before they expire.
type registryAuth struct {
	cfg    Auth
	kind   string
	reg    name.Registry // the repository's; zero when there is none
	region string        // ecr
	secret *redactor

	mu        sync.Mutex
	ecrAuth   *authn.AuthConfig
	ecrExpiry time.Time
	ts        oauth2.TokenSource // google
}

func newRegistryAuth(a Auth, repo *name.Repository, sec *redactor) (*registryAuth, error) {
	ra := &registryAuth{cfg: a, secret: sec}
	host := ""
	if repo != nil {
		ra.reg = repo.Registry
		host = repo.RegistryStr()
	}
	ra.kind = authKind(a.Kind, host, a.Username)
	switch ra.kind {
	case AuthNone, authKeychain:
	case AuthBasic:
		if a.Username == "" {
			return nil, errors.New("images.auth: kind basic needs a username")
		}
	case AuthECR:
		ra.region = a.AWSRegion
		if m := reECRHost.FindStringSubmatch(strings.ToLower(host)); m != nil {
			ra.region = m[1] // the registry's own region
		}
		if ra.region == "" {
			return nil, fmt.Errorf("images.auth: kind ecr needs a region: the repository host %q does not name one (<account>.dkr.ecr.<region>.amazonaws.com), so set images.auth.aws_region", host)
		}
	case AuthGoogle:
		if a.TokenSource != nil {
			ra.ts = oauth2.ReuseTokenSource(nil, a.TokenSource)
		}
	default:
		return nil, fmt.Errorf("images.auth: kind %q is not one of auto, none, basic, ecr, google", a.Kind)
	}
	return ra, nil
}

// describe says which credentials are used, for error messages (never the
// secrets themselves).
func (ra *registryAuth) describe() string {
	switch ra.kind {
	case AuthNone:
		return "no credentials (images.auth.kind none)"
	case AuthBasic:
		return fmt.Sprintf("basic auth as user %q", ra.cfg.Username)
	case AuthECR:
		return fmt.Sprintf("an ECR authorization token (region %s)", ra.region)
	case AuthGoogle:
		return "a Google OAuth2 access token"
	default:
		return "the default keychain (Docker's config.json and credential helpers)"
	}
}

// repoAuth returns the authenticator of the repository's registry.
func (ra *registryAuth) repoAuth() authn.Authenticator {
	switch ra.kind {
	case AuthNone:
		return authn.Anonymous
	case AuthBasic:
		return &authn.Basic{Username: ra.cfg.Username, Password: ra.cfg.Password}
	case AuthECR, AuthGoogle:
		return ra
	default:
		return keychainAuth{ra.reg}
	}
}

// forRegistry returns the authenticator for an image in reg: the
// configured one for the repository's registry, else the default keychain.
func (ra *registryAuth) forRegistry(reg name.Registry) authn.Authenticator {
	if ra.reg.RegistryStr() != "" && reg.RegistryStr() == ra.reg.RegistryStr() {
		return ra.repoAuth()
	}
	return keychainAuth{reg}
}

// keychainAuth resolves the default keychain when credentials are needed.
type keychainAuth struct{ reg name.Registry }

func (k keychainAuth) Authorization() (*authn.AuthConfig, error) {
	return k.AuthorizationContext(context.Background())
}

func (k keychainAuth) AuthorizationContext(ctx context.Context) (*authn.AuthConfig, error) {
	a, err := authn.DefaultKeychain.Resolve(k.reg)
	if err != nil {
		return nil, fmt.Errorf("default keychain: %w", err)
	}
	return authn.Authorization(ctx, a)
}

func (ra *registryAuth) Authorization() (*authn.AuthConfig, error) {
	return ra.AuthorizationContext(context.Background())
}

func (ra *registryAuth) AuthorizationContext(ctx context.Context) (*authn.AuthConfig, error) {
	switch ra.kind {
	case AuthECR:
		return ra.ecr(ctx)
	case AuthGoogle:
		return ra.google(ctx)
	}
	return authn.Authorization(ctx, ra.repoAuth())
}

func (ra *registryAuth) ecr(ctx context.Context) (*authn.AuthConfig, error) {
	ra.mu.Lock()
	defer ra.mu.Unlock()
	if ra.ecrAuth != nil && time.Now().Before(ra.ecrExpiry) {
		return ra.ecrAuth, nil
	}
	cfg, err := awsconfig.LoadDefaultConfig(ctx, awsconfig.WithRegion(ra.region))
	if err != nil {
		return nil, fmt.Errorf("ECR credentials: AWS configuration: %w", err)
	}
	cfg.HTTPClient = sdkhttp.Client(cfg.HTTPClient)
	var client ecrAPI = ecr.NewFromConfig(cfg, func(o *ecr.Options) {
		if ra.cfg.ECREndpoint != "" {
			o.BaseEndpoint = aws.String(ra.cfg.ECREndpoint)
		}
	})
	out, err := client.GetAuthorizationToken(ctx, &ecr.GetAuthorizationTokenInput{})
	if err != nil {
		return nil, fmt.Errorf("ECR credentials: GetAuthorizationToken (region %s): %w", ra.region, err)
	}
	if len(out.AuthorizationData) == 0 || out.AuthorizationData[0].AuthorizationToken == nil {
		return nil, fmt.Errorf("ECR credentials: GetAuthorizationToken (region %s) returned no token", ra.region)
	}
	data := out.AuthorizationData[0]
	ra.secret.add(*data.AuthorizationToken)
	raw, err := base64.StdEncoding.DecodeString(*data.AuthorizationToken)
	if err != nil {
		return nil, fmt.Errorf("ECR credentials: the authorization token is not base64: %w", err)
	}
	user, pass, ok := strings.Cut(string(raw), ":")
	if !ok || user == "" || pass == "" {
		return nil, errors.New("ECR credentials: the authorization token is not user:password")
	}
	ra.secret.add(pass)
	expiry := time.Now().Add(time.Hour)
	if data.ExpiresAt != nil {
		expiry = data.ExpiresAt.Add(-5 * time.Minute)
	}
	ra.ecrAuth = &authn.AuthConfig{Username: user, Password: pass}
	ra.ecrExpiry = expiry
	return ra.ecrAuth, nil
}

func (ra *registryAuth) google(ctx context.Context) (*authn.AuthConfig, error) {
	ra.mu.Lock()
	if ra.ts == nil {
		ts, err := google.DefaultTokenSource(context.WithoutCancel(ctx), "https://www.googleapis.com/auth/cloud-platform")
		if err != nil {
			ra.mu.Unlock()
			return nil, fmt.Errorf("Google credentials (application default credentials): %w", err)
		}
		ra.ts = ts
	}
	ts := ra.ts
	ra.mu.Unlock()
	tok, err := ts.Token()
	if err != nil {
		return nil, fmt.Errorf("Google credentials: access token: %w", err)
	}
	ra.secret.add(tok.AccessToken)
	return &authn.AuthConfig{Username: "oauth2accesstoken", Password: tok.AccessToken}, nil
}

// describeRegistryError adds which credentials were refused to an
// authentication error, and masks secrets.
func (b *Builder) describeRegistryError(reg name.Registry, err error) error {
	var te *transport.Error
	if errors.As(err, &te) && (te.StatusCode == http.StatusUnauthorized || te.StatusCode == http.StatusForbidden) {
		how := "the default keychain"
		if b.repo != nil && reg.RegistryStr() == b.repo.RegistryStr() {
			how = b.auth.describe() + " (images.auth)"
		}
		return fmt.Errorf("registry %s refused %s: %s", reg.RegistryStr(), how, b.secret.redact(err.Error()))
	}
	return errors.New(b.secret.redact(err.Error()))
}

// exists is the one cheap request for whether the image ref exists.
func (b *Builder) exists(ctx context.Context, ref string) (bool, error) {
	if b.repo == nil {
		_, ok, err := b.engineImage(ctx, ref)
		return ok, err
	}
	tag, err := name.NewTag(ref)
	if err != nil {
		return false, err
	}
	_, err = b.puller().Head(ctx, tag)
	if err == nil {
		return true, nil
	}
	if images.IsNotFound(err) {
		return false, nil
	}
	b.dropPuller()
	werr := fmt.Errorf("look up %s: %w", ref, b.describeRegistryError(tag.Registry, err))
	if isUnreachable(err) {
		werr = fmt.Errorf("%w: %w", images.ErrUnavailable, werr)
	}
	return false, werr
}

// puller returns the Builder's remote.Puller for the repository, which
// keeps its authenticated transport between lookups (one request each).
func (b *Builder) puller() *remote.Puller {
	b.pullerMu.Lock()
	defer b.pullerMu.Unlock()
	if b.pullerV == nil {
		p, err := remote.NewPuller(remote.WithAuth(b.auth.repoAuth()))
		if err != nil { // only with invalid options
			panic(err)
		}
		b.pullerV = p
	}
	return b.pullerV
}

// dropPuller forgets the puller after an error, so that the next lookup
// authenticates afresh.
func (b *Builder) dropPuller() {
	b.pullerMu.Lock()
	defer b.pullerMu.Unlock()
	b.pullerV = nil
}

// store writes img as the job's ref: into the engine, or to the registry.
func (b *Builder) store(ctx context.Context, j *job, img v1.Image) error {
	tag, err := name.NewTag(j.ref)
	if err != nil {
		return err
	}
	if b.repo == nil {
		j.step("loading the image into the engine as %s", j.ref)
		return b.loadImage(ctx, j, j.ref, img)
	}

	j.step("pushing %s", j.ref)
	updates := make(chan v1.Update, 16)
	done := make(chan struct{})
	go func() {
		defer close(done)
		var last v1.Update
		for u := range updates {
			if u.Error != nil {
				continue
			}
			last = u
			j.progress(fmt.Sprintf("pushed %s of %s", mib(u.Complete), mib(u.Total)), false)
		}
		if last.Total > 0 {
			j.progress(fmt.Sprintf("pushed %s of %s", mib(last.Complete), mib(last.Total)), true)
		}
	}()
	counter := newPushCounter(remote.DefaultTransport)
	err = remote.Write(tag, img, remote.WithContext(ctx), remote.WithAuth(b.auth.repoAuth()), remote.WithProgress(updates), remote.WithTransport(counter))
	<-done
	if err != nil {
		werr := fmt.Errorf("push %s: %w", j.ref, b.describeRegistryError(tag.Registry, err))
		if isUnreachable(err) {
			werr = fmt.Errorf("%w: %w", images.ErrUnavailable, werr)
		}
		return werr
	}
	if sum, err := counter.summary(img); err == nil {
		j.step("%s", sum)
	}
	if d, err := img.Digest(); err == nil {
		j.logf("pushed %s@%s", j.ref, d)
		j.setDigest(d.String())
	}
	return nil
}

// isUnreachable reports whether a registry error means the registry could
// not be reached or answered that it is unavailable, so that the same
// request may succeed later.
func isUnreachable(err error) bool {
	var te *transport.Error
	if errors.As(err, &te) {
		switch te.StatusCode {
		case http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout, http.StatusTooManyRequests:
			return true
		}
		return false
	}
	var ne net.Error
	var oe *net.OpError
	return errors.As(err, &oe) || (errors.As(err, &ne) && ne.Timeout()) || errors.Is(err, io.ErrUnexpectedEOF)
}

func mib(n int64) string { return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20)) }
