package console

import (
	"bytes"
	"errors"
	"io"
	"mime/multipart"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"

	"github.com/gatewayhq/gateway/api/apitype"
	"github.com/gatewayhq/gateway/auth"
)

// postMultipart posts the build form as a browser does (multipart, from
// the gateway's own page), with a file when name is not "".
func (b *browser) postMultipart(path string, fields map[string]string, name, file string, header map[string]string) answer {
	b.tc.t.Helper()
	var body bytes.Buffer
	mw := multipart.NewWriter(&body)
	for k, v := range fields {
		_ = mw.WriteField(k, v)
	}
	if name != "\x00" {
		fw, err := mw.CreateFormFile("file", name)
		if err != nil {
			b.tc.t.Fatal(err)
		}
		_, _ = io.WriteString(fw, file)
	}
	_ = mw.Close()
	req, err := http.NewRequest("POST", b.tc.srv.URL+path, &body)
	if err != nil {
		b.tc.t.Fatal(err)
	}
	req.Header.Set("Content-Type", mw.FormDataContentType())
	req.Header.Set("Origin", b.tc.srv.URL)
	req.Header.Set("Sec-Fetch-Site", "same-origin")
	return b.send(req, header)
}

const formRequirements = "dask==2024.8.0\ndistributed==2024.8.0\n"

// TestBuildForm: the environments page's form starts a build from a file
// uploaded or text pasted (an environment file, or the API's spec), and
// goes to the build's page; what is wrong is said on the form, kept as
// typed, and nothing is asked of the service.
func TestBuildForm(t *testing.T) {
	paste := func(kind, text, python string) map[string]string {
		return map[string]string{"kind": kind, "text": text, "python": python, "platform": "linux/amd64"}
	}
	noFile := "\x00"
	for _, tt := range []struct {
		name             string
		fields           map[string]string
		file, data       string
		status           int
		want             []string // in the answer's body
		wantPython       string   // of the spec asked for, when one is
		wantPackages     int
		wantMsgSubstring string
	}{
		{name: "requirements pasted", fields: paste("requirements.txt", formRequirements, "3.12.1"), file: noFile,
			status: http.StatusSeeOther, wantPython: "3.12", wantPackages: 2, wantMsgSubstring: "Build started"},
		{name: "environment.yml uploaded", fields: paste("requirements.txt", "", ""), file: `C:\Users\me\environment.yml`,
			data:   "channels: [conda-forge]\ndependencies:\n  - python=3.11\n  - distributed=2024.8.0\n  - pip:\n    - gwconsole==1.0\n",
			status: http.StatusSeeOther, wantPython: "3.11", wantPackages: 2},
		{name: "the API's spec pasted", fields: paste("spec.json", `{"spec": {"python": "3.12", "platform": "linux/amd64", "packages": [{"name": "distributed", "version": "2024.8.0"}]}}`, ""),
			file: noFile, status: http.StatusSeeOther, wantPython: "3.12", wantPackages: 1},
		{name: "a bare spec uploaded, its python from the form", fields: paste("requirements.txt", "", "3.10"), file: "spec.json",
			data: `{"packages": [{"name": "distributed", "version": "2024.8.0"}]}`, status: http.StatusSeeOther, wantPython: "3.10", wantPackages: 1},

		{name: "nothing given", fields: paste("requirements.txt", "  \n", ""), file: noFile, status: http.StatusBadRequest,
			want: []string{"no environment given: choose a file", `role="alert"`}},
		{name: "both given", fields: paste("requirements.txt", formRequirements, "3.12"), file: "requirements.txt", data: formRequirements,
			status: http.StatusBadRequest, want: []string{"a file, or its text pasted, not both"}},
		{name: "an unknown kind", fields: paste("setup.py", formRequirements, "3.12"), file: noFile, status: http.StatusBadRequest,
			want: []string{"&#34;setup.py&#34; is not a kind of environment this form knows"}},
		{name: "an unknown platform", fields: map[string]string{"kind": "requirements.txt", "text": formRequirements, "python": "3.12", "platform": "windows"},
			file: noFile, status: http.StatusBadRequest, want: []string{"platform &#34;windows&#34; is not one of linux/amd64, linux/arm64"}},
		{name: "an unknown kind of file", fields: paste("requirements.txt", "", "3.12"), file: "Pipfile.lock", data: "{}", status: http.StatusUnprocessableEntity,
			want: []string{"Pipfile.lock: unknown kind of environment file"}},
		{name: "unpinned", fields: paste("requirements.txt", "dask\ndistributed>=2024\n", "3.12"), file: noFile, status: http.StatusUnprocessableEntity,
			want: []string{"requirements.txt:1", "dask\ndistributed&gt;=2024\n</textarea>"}},
		{name: "no python", fields: paste("requirements.txt", formRequirements, ""), file: noFile, status: http.StatusUnprocessableEntity,
			want: []string{"does not say which Python version the environment has: give it"}},
		{name: "an include", fields: paste("requirements.txt", formRequirements+"-r /etc/passwd\n", "3.12"), file: noFile, status: http.StatusUnprocessableEntity,
			want: []string{"requirements.txt:3: -r /etc/passwd includes another file, which the gateway cannot read"}},
		{name: "a spec with code", fields: paste("spec.json", `{"python": "3.12", "packages": [{"name": "distributed", "version": "1"}], "code": [{"name": "local", "digest": "sha256:00"}]}`, ""),
			file: noFile, status: http.StatusUnprocessableEntity, want: []string{"spec.json has code parts, which this form cannot upload"}},
		{name: "not JSON", fields: paste("spec.json", `python: 3.12`, ""), file: noFile, status: http.StatusUnprocessableEntity, want: []string{"spec.json is not JSON"}},
		{name: "a spec with a stray field", fields: paste("spec.json", `{"python": "3.12", "packgaes": []}`, ""), file: noFile, status: http.StatusUnprocessableEntity,
			want: []string{"spec.json is not an environment&#39;s spec", "packgaes"}},
		{name: "a spec the service refuses", fields: paste("spec.json", `{"python": "three", "packages": [{"name": "distributed", "version": "1"}]}`, ""),
			file: noFile, status: http.StatusUnprocessableEntity, want: []string{"spec.json: ", "three"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f := envFixture()
			tc := envConsole(t, f)
			a := tc.browser(alice).postMultipart("/environments", tt.fields, tt.file, tt.data, nil)
			if a.Status != tt.status {
				t.Fatalf("%d, want %d\n%s", a.Status, tt.status, a.Body)
			}
			f.mu.Lock()
			ensured := f.ensured
			f.mu.Unlock()
			if tt.status != http.StatusSeeOther {
				if len(ensured) != 0 {
					t.Errorf("the service was asked for %+v", ensured)
				}
				expect(t, a, tt.status, append(tt.want, `<form method="post" action="/environments" enctype="multipart/form-data"`, hashReady[:16]), nil)
				return
			}
			if len(ensured) != 1 || ensured[0].Python != tt.wantPython || len(ensured[0].Packages) != tt.wantPackages || ensured[0].Platform != "linux/amd64" {
				t.Fatalf("asked for %+v, want one spec of python %s with %d packages", ensured, tt.wantPython, tt.wantPackages)
			}
			h, _ := ensured[0].Hash()
			loc, _ := url.Parse(a.Header.Get("Location"))
			if loc == nil || loc.Path != "/environments/"+h || !strings.Contains(loc.Query().Get("msg"), tt.wantMsgSubstring) {
				t.Fatalf("went to %q, want the build's page (%s)", a.Header.Get("Location"), h)
			}
			// The build is the user's, on its page and at the head of
			// the list.
			expect(t, tc.browser(alice).get(loc.RequestURI()), http.StatusOK, []string{"<h1>Environment <code>" + h[:16], "queued", tt.wantMsgSubstring}, nil)
			list := tc.browser(alice).get("/environments")
			if i, j := strings.Index(list.Body, h[:16]), strings.Index(list.Body, hashReady[:16]); i < 0 || i > j {
				t.Errorf("the new build is not first on the list:\n%s", list.Body)
			}
		})
	}

	// The service's refusals are its words, on the form; its failures a
	// page without them.
	f := envFixture()
	f.fail["Ensure"] = errors.New("the store is down")
	a := envConsole(t, f).browser(alice).postMultipart("/environments", paste("requirements.txt", formRequirements, "3.12"), noFile, "", nil)
	if a.Status != http.StatusInternalServerError || strings.Contains(a.Body, "the store is down") {
		t.Errorf("a failure: %d\n%s", a.Status, a.Body)
	}
	f.fail["Ensure"] = errors.Join(errInvalid, errors.New("you have 2 builds running (max_builds 2)"))
	a = envConsole(t, f).browser(alice).postMultipart("/environments", paste("requirements.txt", formRequirements, "3.12"), noFile, "", nil)
	expect(t, a, http.StatusUnprocessableEntity, []string{"max_builds 2", `role="alert"`}, nil)

	// A form over the bound is refused whole.
	f = envFixture()
	a = envConsole(t, f).browser(alice).postMultipart("/environments", paste("requirements.txt", "", "3.12"), "requirements.txt",
		strings.Repeat("# a comment\n", maxEnvForm/12+1), nil)
	if a.Status != http.StatusRequestEntityTooLarge || !strings.Contains(a.Body, "larger than this gateway&#39;s limit of 2 MiB") || len(f.ensured) != 0 {
		t.Errorf("too large: %d\n%s", a.Status, a.Body)
	}
}

// The build form refuses what the other actions refuse: a read-only
// session, which is shown no form, and a request from another site.
func TestBuildFormRefusals(t *testing.T) {
	f := envFixture()
	tc := envConsole(t, f)
	fields := map[string]string{"kind": "requirements.txt", "text": formRequirements, "python": "3.12", "platform": "linux/amd64"}
	for _, c := range []struct {
		name   string
		u      *auth.User
		header map[string]string
		want   string
	}{
		{"read-only", aliceRO, nil, "read-only token"},
		{"cross-site", alice, map[string]string{"Origin": "https://evil.example", "Sec-Fetch-Site": "cross-site"}, "did not come from the gateway&#39;s own pages"},
	} {
		a := tc.browser(c.u).postMultipart("/environments", fields, "\x00", "", c.header)
		if a.Status != http.StatusForbidden || !strings.Contains(a.Body, c.want) {
			t.Errorf("%s: %d\n%s", c.name, a.Status, a.Body)
		}
	}
	if len(f.ensured) != 0 {
		t.Errorf("the service was asked for %+v", f.ensured)
	}
	expect(t, tc.browser(aliceRO).get("/environments"), http.StatusOK, []string{hashReady[:16]}, []string{`action="/environments"`, "Build an environment"})
	// Signed out: no build, no form.
	if a := tc.browser(nil).postMultipart("/environments", fields, "\x00", "", nil); a.Status != http.StatusUnauthorized || len(f.ensured) != 0 {
		t.Errorf("signed out: %d\n%s", a.Status, a.Body)
	}
}

// What the person typed, and the file's name, are shown as text when the
// form comes back.
func TestBuildFormHostileValuesEscaped(t *testing.T) {
	const evil = `<img src=x onerror=alert(1)>"'`
	tc := envConsole(t, envFixture())
	b := tc.browser(alice)
	a := b.postMultipart("/environments", map[string]string{"kind": "requirements.txt", "text": evil + "\n</textarea><script>alert(1)</script>",
		"python": evil, "platform": "linux/amd64"}, "\x00", "", nil)
	a.Status = http.StatusOK
	expectEscaped(t, "the pasted text", a)
	a = b.postMultipart("/environments", map[string]string{"kind": "requirements.txt", "platform": "linux/amd64"}, evil+".txt", "dask\n", nil)
	a.Status = http.StatusOK
	expectEscaped(t, "the file's name", a)
}

// The list of builds follows the user's builds through its stream: a new
// one is sent at once, rendered as the page renders it.
func TestBuildsStream(t *testing.T) {
	f := envFixture()
	tc := envConsole(t, f)
	page := tc.browser(alice).get("/environments")
	gen, _ := f.BuildsGeneration(t.Context(), "alice")
	if want := `data-stream="/events?builds=1&amp;since=` + strconv.FormatInt(gen, 10) + `"`; !strings.Contains(page.Body, want) || !strings.Contains(page.Body, `data-on="builds"`) {
		t.Fatalf("the page lacks %s:\n%s", want, page.Body)
	}
	rd := openStreamAt(t, tc.browser(alice), "/events?builds=1&since="+strconv.FormatInt(gen, 10))
	f.change(hashBobs, func(st *apitype.EnvStatus, _ *string) { st.Steps = append(st.Steps, "bob's news") })
	f.change(hashBuilding, func(st *apitype.EnvStatus, _ *string) { st.State = "ready" })
	event, data := readEvent(t, rd)
	if event != "builds" || !strings.Contains(data, `<table class="builds">`) || strings.Count(data, `<span class="status status-ready">`) != 2 ||
		strings.Contains(data, hashBobs[:16]) || strings.Contains(data, "<html") {
		t.Fatalf("after a build ended: %q\n%s", event, data)
	}
	// A page older than the list gets it at once.
	rd = openStreamAt(t, tc.browser(alice), "/events?builds=1&since=0")
	if event, data := readEvent(t, rd); event != "builds" || !strings.Contains(data, hashReady[:16]) {
		t.Fatalf("an old page: %q\n%s", event, data)
	}
	// Off, there is no list to follow.
	if a := envConsole(t, nil).browser(alice).get("/events?builds=1"); a.Status != http.StatusNotFound {
		t.Errorf("off: %d", a.Status)
	}
}
