package api

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/gatewayhq/gateway/images"
	"github.com/gatewayhq/gateway/quota"
	"github.com/gatewayhq/gateway/store"
)

// Errors an Envs implementation wraps so that the API answers with the
// right status.
var (
	// ErrEnvNotFound: no such environment, or not one of the caller's. 404.
	ErrEnvNotFound = errors.New("environment not found")
	// ErrCodeRequired: the image must be built and the request did not
	// carry the user code's bytes; the client sends them again. 409.
	ErrCodeRequired = errors.New("the environment's code is needed to build it")
	// ErrNoBuilder: this gateway cannot build images. 501.
	ErrNoBuilder = errors.New("this gateway builds no environments")
	// ErrEnvInvalid: a publish request that is not one. 422.
	ErrEnvInvalid = errors.New("invalid environment request")
	// ErrEnvConflict: the name is taken, or the environment is not ready
	// to be published. 409.
	ErrEnvConflict = errors.New("environment conflict")
)

// EnvStatus is what the environment routes answer.
type EnvStatus struct {
	Hash  string `json:"hash"`
	Image string `json:"image,omitempty"`
	// Digest is the image's manifest digest, when known.
	Digest string `json:"digest,omitempty"`
	// State is building, ready or failed.
	State string `json:"state"`
	// Built is false when the image already existed (nothing was built
	// for this request).
	Built bool     `json:"built"`
	Steps []string `json:"steps,omitempty"`
	Error string   `json:"error,omitempty"`
	// Versions are the image's versions of the checked packages.
	Versions map[string]string `json:"versions,omitempty"`
}

// EnvRequest asks for the image of an environment. Code holds the user
// code parts' zip files by name (base64 in JSON); it may be left out until
// the gateway answers code_required. The gateway reads it as a stream
// (envupload.go), not with this type: clients send it.
type EnvRequest struct {
	Spec images.Spec       `json:"spec"`
	Code map[string][]byte `json:"code,omitempty"`
}

// PublishedEnv is an environment an admin published under a name.
type PublishedEnv struct {
	Name        string            `json:"name"`
	Image       string            `json:"image"`
	Description string            `json:"description,omitempty"`
	Versions    map[string]string `json:"versions,omitempty"`
}

// Envs is what the API needs of the environment service.
type Envs interface {
	// Admit is asked before a request that may carry code is read: it
	// refuses one that could not start a build (over the user's
	// max_builds, or no builder), and else holds one of the user's builds
	// until release is called.
	Admit(ctx context.Context, who quota.Who) (release func(), err error)
	// Ensure gets code whose parts are readable until it returns.
	Ensure(ctx context.Context, who quota.Who, spec images.Spec, code images.Code) (EnvStatus, error)
	Status(ctx context.Context, who quota.Who, hash string) (EnvStatus, error)
	Logs(ctx context.Context, who quota.Who, hash string) ([]byte, error)
	Published(ctx context.Context) ([]PublishedEnv, error)
	// MaxCodeBytes bounds the user code of one environment.
	MaxCodeBytes() int64
}

// PublishEnvRequest publishes an environment under a name: the image of a
// built environment (Env, its hash or a unique prefix of it), or an image.
type PublishEnvRequest struct {
	Env         string `json:"env,omitempty"`
	Image       string `json:"image,omitempty"`
	Description string `json:"description,omitempty"`
}

// EnvPublisher is what the admin routes need of an environment service
// that lets admins publish environments at run time.
type EnvPublisher interface {
	Publish(ctx context.Context, by store.Actor, name string, req PublishEnvRequest) (PublishedEnv, error)
	Unpublish(ctx context.Context, by store.Actor, name string) error
}

// SetEnvs enables the environment routes.
func (s *Server) SetEnvs(e Envs) { s.envs = e }

func (s *Server) envRoutes() {
	m := s.mux
	m.HandleFunc("GET /api/v1/envs", s.authed(s.envsEnabled(s.listEnvs)))
	m.HandleFunc("POST /api/v1/envs", s.authed(s.envsEnabled(s.ensureEnv)))
	m.HandleFunc("GET /api/v1/envs/{hash}", s.authed(s.envsEnabled(s.envStatus)))
	m.HandleFunc("GET /api/v1/envs/{hash}/logs", s.authed(s.envsEnabled(s.envLogs)))
}

func (s *Server) envsEnabled(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if s.envs == nil {
			WriteError(w, http.StatusNotImplemented, "envs_disabled", "this gateway's provider runs no container images: environments need the docker, ec2, fargate or gce provider")
			return
		}
		h(w, r)
	}
}

func (s *Server) listEnvs(w http.ResponseWriter, r *http.Request) {
	envs, err := s.envs.Published(r.Context())
	if err != nil {
		s.envError(w, r, err)
		return
	}
	if envs == nil {
		envs = []PublishedEnv{}
	}
	writeJSON(w, http.StatusOK, envs)
}

func (s *Server) ensureEnv(w http.ResponseWriter, r *http.Request) {
	who := whoOf(r)
	if r.ContentLength < 0 || r.ContentLength > codelessBytes {
		// Decided before a byte of the body is read: a request that
		// cannot start a build is refused without costing its upload.
		release, err := s.envs.Admit(r.Context(), who)
		if err != nil {
			s.envError(w, r, err)
			return
		}
		defer release()
	}
	maxCode := s.envs.MaxCodeBytes()
	// Code travels base64-encoded: 4/3 of its size, plus the spec.
	body := http.MaxBytesReader(w, r.Body, maxCode/3*4+envSpecBytes)
	req, err := readEnvUpload(body, s.cfg.UploadDir, maxCode)
	if err != nil {
		bodyError(w, err, fmt.Sprintf("the environment's code is larger than this gateway's limit of %d MiB", maxCode>>20))
		return
	}
	defer req.Close()
	st, err := s.envs.Ensure(r.Context(), who, req.Spec, req.Code)
	if err != nil {
		s.envError(w, r, err)
		return
	}
	status := http.StatusOK
	if st.State == "building" {
		status = http.StatusAccepted
	}
	writeJSON(w, status, st)
}

func (s *Server) envStatus(w http.ResponseWriter, r *http.Request) {
	st, err := s.envs.Status(r.Context(), whoOf(r), r.PathValue("hash"))
	if err != nil {
		s.envError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, st)
}

func (s *Server) envLogs(w http.ResponseWriter, r *http.Request) {
	b, err := s.envs.Logs(r.Context(), whoOf(r), r.PathValue("hash"))
	if err != nil {
		s.envError(w, r, err)
		return
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	_, _ = w.Write(b)
}

// publisher is the environment service's publishing, when it has one.
func (s *Server) publisher(w http.ResponseWriter) (EnvPublisher, bool) {
	p, ok := s.envs.(EnvPublisher)
	if !ok {
		WriteError(w, http.StatusNotImplemented, "envs_disabled", "this gateway does not publish environments: its provider runs no container images")
	}
	return p, ok
}

func (s *Server) adminPublishEnv(w http.ResponseWriter, r *http.Request) {
	p, ok := s.publisher(w)
	if !ok {
		return
	}
	var req PublishEnvRequest
	if !decodeLimit(w, r, &req, 64<<10, "the request is larger than 64 KiB") {
		return
	}
	pub, err := p.Publish(r.Context(), actorOf(r), r.PathValue("name"), req)
	if err != nil {
		s.envError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, pub)
}

func (s *Server) adminUnpublishEnv(w http.ResponseWriter, r *http.Request) {
	p, ok := s.publisher(w)
	if !ok {
		return
	}
	if err := p.Unpublish(r.Context(), actorOf(r), r.PathValue("name")); err != nil {
		s.envError(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (s *Server) envError(w http.ResponseWriter, r *http.Request, err error) {
	if s.databaseDown(w, r, err) {
		return
	}
	switch {
	case errors.Is(err, ErrEnvNotFound):
		WriteError(w, http.StatusNotFound, "env_not_found", err.Error())
	case errors.Is(err, ErrCodeRequired):
		WriteError(w, http.StatusConflict, "code_required", err.Error())
	case errors.Is(err, images.ErrInvalidSpec):
		WriteError(w, http.StatusUnprocessableEntity, "invalid_request", err.Error())
	case errors.Is(err, images.ErrUnavailable):
		// The package index or a registry could not be reached: the same
		// request may succeed later.
		w.Header().Set("Retry-After", "30")
		WriteError(w, http.StatusServiceUnavailable, "unavailable", err.Error())
	case errors.Is(err, ErrNoBuilder):
		WriteError(w, http.StatusNotImplemented, "no_builder", err.Error())
	case errors.Is(err, ErrEnvInvalid):
		WriteError(w, http.StatusUnprocessableEntity, "invalid_request", detail(err, ErrEnvInvalid))
	case errors.Is(err, ErrEnvConflict):
		WriteError(w, http.StatusConflict, "conflict", detail(err, ErrEnvConflict))
	case errors.Is(err, quota.ErrExceeded):
		// A cap on builds at once: the same request succeeds once one of
		// the user's builds ends, hence 429 rather than the 403 of a
		// cluster over its quota.
		WriteError(w, http.StatusTooManyRequests, "quota_exceeded", "quota exceeded: "+err.Error())
	case errors.Is(err, context.Canceled):
	default:
		s.log.Error("environment request failed", "path", r.URL.Path, "err", err)
		WriteError(w, http.StatusInternalServerError, "internal", "internal error; the gateway's log has the details")
	}
}
