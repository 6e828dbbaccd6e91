package api

import (
	"context"
	"fmt"
	"net/http"

	"github.com/gatewayhq/gateway/api/apitype"
	"github.com/gatewayhq/gateway/images"
	"github.com/gatewayhq/gateway/quota"
	"github.com/gatewayhq/gateway/store"
)

// Envs is what the API needs of the environment service.
type Envs interface {
	// Admit is asked before a request that may carry code is read: it
	// refuses one that could not start a build (over the user's
	// max_builds, or no builder), and else holds one of the user's builds
	// until release is called.
	Admit(ctx context.Context, who quota.Who) (release func(), err error)
	// Ensure gets code whose parts are readable until it returns.
	Ensure(ctx context.Context, who quota.Who, spec images.Spec, code images.Code) (apitype.EnvStatus, error)
	Status(ctx context.Context, who quota.Who, hash string) (apitype.EnvStatus, error)
	Logs(ctx context.Context, who quota.Who, hash string) ([]byte, error)
	Published(ctx context.Context) ([]apitype.PublishedEnv, error)
	// MaxCodeBytes bounds the user code of one environment.
	MaxCodeBytes() int64
}

// EnvPublisher is what the admin routes need of an environment service
// that lets admins publish environments at run time.
type EnvPublisher interface {
	Publish(ctx context.Context, by store.Actor, name string, req apitype.PublishEnvRequest) (apitype.PublishedEnv, error)
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
		s.fail(w, r, err)
		return
	}
	if envs == nil {
		envs = []apitype.PublishedEnv{}
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
			s.fail(w, r, err)
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
		s.fail(w, r, err)
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
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, st)
}

func (s *Server) envLogs(w http.ResponseWriter, r *http.Request) {
	b, err := s.envs.Logs(r.Context(), whoOf(r), r.PathValue("hash"))
	if err != nil {
		s.fail(w, r, err)
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
	var req apitype.PublishEnvRequest
	if !decodeLimit(w, r, &req, 64<<10, "the request is larger than 64 KiB") {
		return
	}
	pub, err := p.Publish(r.Context(), actorOf(r), r.PathValue("name"), req)
	if err != nil {
		s.fail(w, r, err)
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
		s.fail(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}
