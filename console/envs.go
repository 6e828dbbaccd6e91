package console

import (
	"context"
	"net/http"
	"strings"
	"time"

	"github.com/gatewayhq/gateway/api/apitype"
	"github.com/gatewayhq/gateway/auth"
	"github.com/gatewayhq/gateway/bench/report"
	"github.com/gatewayhq/gateway/quota"
)

// Envs is what the environments section needs of the environment service
// (envs.Service, the one the API uses).
type Envs interface {
	// Builds are the builds of the environments who asked for, the most
	// recently asked first.
	Builds(ctx context.Context, who quota.Who, limit int) ([]apitype.EnvStatus, error)
	// Status and Logs answer only those who asked for the environment
	// (else not found), by its hash or a unique prefix of it.
	Status(ctx context.Context, who quota.Who, hash string) (apitype.EnvStatus, error)
	Logs(ctx context.Context, who quota.Who, hash string) ([]byte, error)
	Published(ctx context.Context) ([]apitype.PublishedEnv, error)
	// BuildGeneration moves whenever a build (by its whole hash) or its
	// stored log changes, on any replica: a build's open pages watch it.
	BuildGeneration(ctx context.Context, hash string) (int64, error)
}

// envDeps is what this section needs of the rest of the gateway.
type envDeps struct {
	envs Envs // nil: this gateway builds no environments
	// builds watches the generation of each build with an open page, once
	// per interval however many pages show it; frags keeps each build's
	// live part as last rendered, by generation.
	builds *hub
	frags  fragments
}

// SetEnvs adds the environments section: the user's builds, their
// progress and logs, and the published environments. e is nil when the
// gateway builds no environments (its backend runs no container images):
// the section then says so, since a person looking for it expects to
// learn why there is nothing.
func (s *Server) SetEnvs(e Envs) {
	s.envs.envs = e
	if e != nil {
		s.envs.builds = newHub(e.BuildGeneration, s.cfg.Generations, s.log)
	}
	s.section(navItem{Key: "environments", Title: "Environments", Path: "/environments"}, func(m *http.ServeMux) {
		m.HandleFunc("GET /environments", s.page(s.envsPage))
		m.HandleFunc("GET /environments/{hash}", s.page(s.buildPage))
		m.HandleFunc("GET /environments/{hash}/log", s.page(s.buildLog))
	})
}

// envsOff is what the section says on a gateway that builds no
// environments.
const envsOff = "This gateway's backend runs no container images, so it builds no environments: " +
	"clusters run the gateway host's Python. Environments need the docker, ec2, fargate or gce provider."

const (
	// maxBuilds is how many of the user's builds the list shows.
	maxBuilds = 100
	// buildLogTail is how many of a build log's last lines its page shows
	// (and sends again at each change); the whole log is a link away.
	buildLogTail = 400
)

// buildRow is a build as the pages show it.
type buildRow struct {
	apitype.EnvStatus
	Short    string // the hash's first 16 digits, as the CLI shows it
	Progress string // the latest step
	Took     string // how long it ran, or has been running
	Running  bool
	// PublishedAs are the names it is published under: everyone may run
	// it then, not only those who asked for it.
	PublishedAs []string
	Versions    string // "dask 2024.8.0, python 3.11"
}

func rowOfBuild(st apitype.EnvStatus, published []apitype.PublishedEnv, now time.Time) buildRow {
	r := buildRow{EnvStatus: st, Short: st.Hash, Running: st.State == "building"}
	if len(r.Short) > 16 {
		r.Short = r.Short[:16]
	}
	if n := len(st.Steps); n > 0 {
		r.Progress = st.Steps[n-1]
	}
	switch {
	case st.StartedAt.IsZero():
	case !st.FinishedAt.IsZero():
		r.Took = humanDuration(st.FinishedAt.Sub(st.StartedAt))
	case r.Running:
		r.Took = humanDuration(now.Sub(st.StartedAt))
	}
	for _, p := range published {
		if st.Image != "" && p.Image == st.Image {
			r.PublishedAs = append(r.PublishedAs, p.Name)
		}
	}
	r.Versions = report.Packages(st.Versions)
	return r
}

type publishedRow struct {
	apitype.PublishedEnv
	VersionList string
}

type envsData struct {
	Off       string // why there are no environments here, if there are none
	Builds    []buildRow
	Published []publishedRow
}

func (s *Server) envsPage(w http.ResponseWriter, r *http.Request, u *auth.User) {
	d := envsData{}
	if s.envs.envs == nil {
		d.Off = envsOff
		s.render(w, r, http.StatusOK, "environments", view{Title: "Environments", User: u, Nav: "environments", Data: d})
		return
	}
	published, err := s.envs.envs.Published(r.Context())
	if err != nil {
		s.fail(w, r, u, err)
		return
	}
	builds, err := s.envs.envs.Builds(r.Context(), whoOf(u), maxBuilds)
	if err != nil {
		s.fail(w, r, u, err)
		return
	}
	now := time.Now()
	for _, b := range builds {
		d.Builds = append(d.Builds, rowOfBuild(b, published, now))
	}
	for _, p := range published {
		d.Published = append(d.Published, publishedRow{PublishedEnv: p, VersionList: report.Packages(p.Versions)})
	}
	s.render(w, r, http.StatusOK, "environments", view{Title: "Environments", User: u, Nav: "environments", Data: d})
}

type buildData struct {
	buildRow
	Log       string
	LogLines  int  // shown
	LogCut    bool // only the last lines are shown
	LogReason string
	// Generation is the build's when the page was made: its stream sends
	// at once what changed since.
	Generation int64
}

// buildData is what a build's page shows; hash is the user's (whole or a
// prefix), checked by the service.
func (s *Server) buildData(r *http.Request, u *auth.User, hash string) (buildData, error) {
	ctx := r.Context()
	st, err := s.envs.envs.Status(ctx, whoOf(u), hash)
	if err != nil {
		return buildData{}, err
	}
	published, err := s.envs.envs.Published(ctx)
	if err != nil {
		return buildData{}, err
	}
	d := buildData{buildRow: rowOfBuild(st, published, time.Now())}
	log, err := s.envs.envs.Logs(ctx, whoOf(u), st.Hash)
	if err != nil {
		// The build is shown; its log may not exist (nothing was built)
		// or not yet: the service says which, as the API would.
		d.LogReason = err.Error()
		if _, msg, ok := s.cfg.Explain(r, err); ok {
			d.LogReason = msg
		}
		return d, nil
	}
	d.Log, d.LogLines, d.LogCut = tailLines(string(log), buildLogTail)
	return d, nil
}

// tailLines is the last n lines of s, how many it kept, and whether it
// left any out.
func tailLines(s string, n int) (string, int, bool) {
	lines := strings.SplitAfter(s, "\n")
	if lines[len(lines)-1] == "" {
		lines = lines[:len(lines)-1]
	}
	if len(lines) <= n {
		return s, len(lines), false
	}
	return strings.Join(lines[len(lines)-n:], ""), n, true
}

func (s *Server) buildPage(w http.ResponseWriter, r *http.Request, u *auth.User) {
	if s.envs.envs == nil {
		s.notFound(w, r, envsOff)
		return
	}
	st, err := s.envs.envs.Status(r.Context(), whoOf(u), r.PathValue("hash"))
	if err != nil {
		s.fail(w, r, u, err)
		return
	}
	// Read before the build's data, the generation can only be older
	// than what the page shows, and the page's stream sends what changed
	// in between at once; read after, it could be newer, and the stream
	// would not send the difference.
	gen, err := s.envs.envs.BuildGeneration(r.Context(), st.Hash)
	if err != nil {
		s.fail(w, r, u, err)
		return
	}
	d, err := s.buildData(r, u, st.Hash)
	if err != nil {
		s.fail(w, r, u, err)
		return
	}
	d.Generation = gen
	s.render(w, r, http.StatusOK, "build", view{Title: "Environment " + d.Short, User: u, Nav: "environments", Data: d})
}

// buildLog is a build's whole log, as text.
func (s *Server) buildLog(w http.ResponseWriter, r *http.Request, u *auth.User) {
	if s.envs.envs == nil {
		s.notFound(w, r, envsOff)
		return
	}
	log, err := s.envs.envs.Logs(r.Context(), whoOf(u), r.PathValue("hash"))
	if err != nil {
		s.fail(w, r, u, err)
		return
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	_, _ = w.Write(log)
}

// buildFragment is the live part of a build's page at a generation, for
// its stream: rendered once per change whoever watches it (only those
// who asked for the build may: buildStream).
func (s *Server) buildFragment(r *http.Request, u *auth.User, hash string, gen int64) (string, error) {
	return s.envs.frags.get(fragKey{owner: hash, gen: gen}, func() (string, error) {
		d, err := s.buildData(r, u, hash)
		if err != nil {
			return "", err
		}
		return s.fragment("build", "build", u, d)
	})
}

// buildStream checks that a build's page may have its stream: the build
// is one the user asked for (else the API's answer: not found). It
// returns the build's whole hash and its generation now.
func (s *Server) buildStream(w http.ResponseWriter, r *http.Request, u *auth.User, hash string) (string, int64, bool) {
	if s.envs.envs == nil {
		http.Error(w, envsOff, http.StatusNotFound)
		return "", 0, false
	}
	st, err := s.envs.envs.Status(r.Context(), whoOf(u), hash)
	var gen int64
	if err == nil {
		gen, err = s.envs.envs.BuildGeneration(r.Context(), st.Hash)
	}
	if err != nil {
		if status, msg, ok := s.cfg.Explain(r, err); ok {
			http.Error(w, msg, status)
		}
		return "", 0, false
	}
	return st.Hash, gen, true
}
