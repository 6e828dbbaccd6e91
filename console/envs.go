package console

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/gatewayhq/gateway/api/apitype"
	"github.com/gatewayhq/gateway/auth"
	"github.com/gatewayhq/gateway/bench/report"
	"github.com/gatewayhq/gateway/images"
	"github.com/gatewayhq/gateway/images/capture"
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
	// BuildsGeneration moves whenever the list Builds gives a user (by
	// id) may change, on any replica: the open lists watch it.
	BuildsGeneration(ctx context.Context, user string) (int64, error)
	// Ensure asks for the environment of spec, as the API's POST
	// /api/v1/envs does: it starts its build, or finds its image.
	Ensure(ctx context.Context, who quota.Who, spec images.Spec, code images.Code) (apitype.EnvStatus, error)
}

// envDeps is what this section needs of the rest of the gateway.
type envDeps struct {
	envs Envs // nil: this gateway builds no environments
	// builds watches the generation of each build with an open page, once
	// per interval however many pages show it; frags keeps each build's
	// live part as last rendered, by generation.
	builds *hub
	frags  fragments
	// lists watches the builds generation of each user with the list
	// open.
	lists *hub
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
		s.envs.lists = newHub(e.BuildsGeneration, s.cfg.Generations, s.log)
	}
	s.section(navItem{Key: "environments", Title: "Environments", Path: "/environments"}, func(m *http.ServeMux) {
		m.HandleFunc("GET /environments", s.page(s.envsPage))
		m.HandleFunc("POST /environments", s.page(s.startBuild))
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
	// Generation is the user's builds' when the page was made: the list's
	// stream sends at once what changed since.
	Generation int64
	Form       buildForm
	ReadOnly   bool
}

// Kinds and Platforms are the build form's choices.
func (envsData) Kinds() []string     { return pasteKinds }
func (envsData) Platforms() []string { return []string{images.PlatformAMD64, images.PlatformARM64} }

// buildForm is the build form's inputs, kept when it is shown again with
// what to fix.
type buildForm struct {
	Text, Kind, Python, Platform string
	Error                        string
}

// Kinds of environment a person may paste, by the file name that tells
// capture.FromData its kind; specKind is the API's spec (JSON).
const specKind = "spec.json"

var pasteKinds = []string{"requirements.txt", "environment.yml", "pylock.toml", specKind}

func (s *Server) envsPage(w http.ResponseWriter, r *http.Request, u *auth.User) {
	s.showEnvs(w, r, u, http.StatusOK, buildForm{Kind: pasteKinds[0], Platform: images.PlatformAMD64})
}

// showEnvs renders the environments page, its build form as given.
func (s *Server) showEnvs(w http.ResponseWriter, r *http.Request, u *auth.User, status int, form buildForm) {
	d := envsData{Form: form, ReadOnly: u.ReadOnly}
	if s.envs.envs == nil {
		d.Off = envsOff
		s.render(w, r, status, "environments", view{Title: "Environments", User: u, Nav: "environments", Data: d})
		return
	}
	// Read before the list, as a build's page reads its generation.
	gen, err := s.envs.envs.BuildsGeneration(r.Context(), whoOf(u).ID)
	if err != nil {
		s.fail(w, r, u, err)
		return
	}
	if err := s.envsList(r.Context(), u, &d); err != nil {
		s.fail(w, r, u, err)
		return
	}
	d.Generation = gen
	s.render(w, r, status, "environments", view{Title: "Environments", User: u, Nav: "environments", Data: d})
}

// envsList reads the user's builds and the published environments.
func (s *Server) envsList(ctx context.Context, u *auth.User, d *envsData) error {
	published, err := s.envs.envs.Published(ctx)
	if err != nil {
		return err
	}
	builds, err := s.envs.envs.Builds(ctx, whoOf(u), maxBuilds)
	if err != nil {
		return err
	}
	now := time.Now()
	for _, b := range builds {
		d.Builds = append(d.Builds, rowOfBuild(b, published, now))
	}
	for _, p := range published {
		d.Published = append(d.Published, publishedRow{PublishedEnv: p, VersionList: report.Packages(p.Versions)})
	}
	return nil
}

// buildsFragment is the list of the user's builds at a generation, for
// the list's stream: rendered once per change however many of the user's
// pages show it.
func (s *Server) buildsFragment(ctx context.Context, u *auth.User, gen int64) (string, error) {
	return s.envs.frags.get(fragKey{owner: "builds of " + whoOf(u).ID, gen: gen}, func() (string, error) {
		var d envsData
		if err := s.envsList(ctx, u, &d); err != nil {
			return "", err
		}
		return s.fragment("environments", "builds", u, d)
	})
}

// maxEnvForm bounds the build form: the API's bound on a spec (2 MiB),
// and room for the form's other fields.
const maxEnvForm = 2<<20 + 64<<10

// startBuild starts the build of the environment the form gives (a file
// uploaded, or pasted with its kind), as `gateway env build --env-file`
// does, and goes to the build's page; what to fix is shown on the form.
func (s *Server) startBuild(w http.ResponseWriter, r *http.Request, u *auth.User) {
	if s.envs.envs == nil {
		s.notFound(w, r, envsOff)
		return
	}
	if !s.actionChecked(w, r, u) {
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, maxEnvForm)
	form, name, data, err := readBuildForm(r)
	if err != nil {
		status := http.StatusBadRequest
		if mbe := (*http.MaxBytesError)(nil); errors.As(err, &mbe) {
			status = http.StatusRequestEntityTooLarge
			err = fmt.Errorf("the environment is larger than this gateway's limit of %d MiB for one", maxEnvForm>>20)
		}
		form.Error = err.Error()
		s.showEnvs(w, r, u, status, form)
		return
	}
	spec, notes, err := specOf(name, data, form.Python, form.Platform)
	if err != nil {
		form.Error = err.Error()
		s.showEnvs(w, r, u, http.StatusUnprocessableEntity, form)
		return
	}
	st, err := s.envs.envs.Ensure(r.Context(), whoOf(u), spec, nil)
	if err != nil {
		status, msg, ok := s.cfg.Explain(r, err)
		if !ok {
			return
		}
		if status >= 500 {
			s.fail(w, r, u, err)
			return
		}
		form.Error = msg
		s.showEnvs(w, r, u, status, form)
		return
	}
	msg := "The image of this environment exists: nothing to build."
	switch {
	case st.State == "building":
		msg = "Build started: this page follows it."
	case st.State != "ready":
		msg = "This environment's last build " + st.State + "."
	}
	if len(notes) > 0 {
		msg += " " + strings.Join(notes, "; ")
		if len(msg) > 1000 {
			msg = msg[:1000] + "…"
		}
	}
	redirect(w, r, "/environments/"+st.Hash, msg)
}

// readBuildForm reads the build form: the file uploaded, else the text
// pasted, named by its kind (the name tells capture its kind).
func readBuildForm(r *http.Request) (form buildForm, name string, data []byte, err error) {
	if err := r.ParseMultipartForm(maxEnvForm); err != nil && !errors.Is(err, http.ErrNotMultipart) {
		return form, "", nil, fmt.Errorf("the form could not be read: %w", err)
	}
	form = buildForm{Text: r.PostFormValue("text"), Kind: r.PostFormValue("kind"),
		Python: strings.TrimSpace(r.PostFormValue("python")), Platform: r.PostFormValue("platform")}
	if !slices.Contains(pasteKinds, form.Kind) {
		return form, "", nil, fmt.Errorf("%q is not a kind of environment this form knows: choose one of %s", form.Kind, strings.Join(pasteKinds, ", "))
	}
	if form.Platform != images.PlatformAMD64 && form.Platform != images.PlatformARM64 {
		return form, "", nil, fmt.Errorf("platform %q is not one of %s, %s", form.Platform, images.PlatformAMD64, images.PlatformARM64)
	}
	file, hdr, ferr := r.FormFile("file")
	switch {
	case ferr == nil:
		defer file.Close()
		if hdr.Size > 0 || hdr.Filename != "" {
			if strings.TrimSpace(form.Text) != "" {
				return form, "", nil, errors.New("give the environment once: a file, or its text pasted, not both")
			}
			if data, err = io.ReadAll(file); err != nil {
				return form, "", nil, fmt.Errorf("reading %s: %w", hdr.Filename, err)
			}
			// A browser sends the name only; some, a whole path.
			return form, path.Base(strings.ReplaceAll(hdr.Filename, `\`, "/")), data, nil
		}
	case !errors.Is(ferr, http.ErrMissingFile) && !errors.Is(ferr, http.ErrNotMultipart):
		return form, "", nil, fmt.Errorf("the file could not be read: %w", ferr)
	}
	if strings.TrimSpace(form.Text) == "" {
		return form, "", nil, errors.New("no environment given: choose a file (" + capture.Supported + ", or a spec.json as the API takes), or paste one and say its kind")
	}
	return form, form.Kind, []byte(form.Text), nil
}

// specKeys are the keys of images.Spec's JSON.
var specKeys = []string{"python", "platform", "gpu", "packages", "channels", "code"}

// specOf is the environment an environment file (capture.FromData) or the
// API's spec (JSON) describes, with notes on what it read.
func specOf(name string, data []byte, python, platform string) (images.Spec, []string, error) {
	if !strings.HasSuffix(strings.ToLower(name), ".json") {
		env, err := capture.FromData(name, data, python, platform)
		return env.Spec, env.Notes, err
	}
	// The API's request ({"spec": {...}}), or its spec alone.
	var req struct {
		Spec json.RawMessage `json:"spec"`
	}
	if err := json.Unmarshal(data, &req); err != nil {
		return images.Spec{}, nil, fmt.Errorf("%s is not JSON: %w", name, err)
	}
	if req.Spec != nil {
		data = req.Spec
	}
	// A misspelt key would leave its part out of the environment unseen:
	// every key must be the spec's.
	var keys map[string]json.RawMessage
	if err := json.Unmarshal(data, &keys); err != nil {
		return images.Spec{}, nil, fmt.Errorf("%s is not an environment's spec (%s): %w", name, strings.Join(specKeys, ", "), err)
	}
	for k := range keys {
		if !slices.Contains(specKeys, k) {
			return images.Spec{}, nil, fmt.Errorf("%s is not an environment's spec (%s): it has %q", name, strings.Join(specKeys, ", "), k)
		}
	}
	var spec images.Spec
	if err := json.Unmarshal(data, &spec); err != nil {
		return images.Spec{}, nil, fmt.Errorf("%s is not an environment's spec (%s): %w", name, strings.Join(specKeys, ", "), err)
	}
	if len(spec.Code) > 0 {
		return images.Spec{}, nil, fmt.Errorf("%s has code parts, which this form cannot upload: build it with gateway env build --code-dir", name)
	}
	if spec.Python == "" {
		spec.Python = python
	}
	if spec.Platform == "" {
		spec.Platform = platform
	}
	n, err := spec.Normalize()
	if err != nil {
		return images.Spec{}, nil, fmt.Errorf("%s: %w", name, err)
	}
	return n, nil, nil
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
