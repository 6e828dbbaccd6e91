package capture

import (
	"errors"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/gatewayhq/gateway/images"
)

const requirementsTxt = `# pinned by pip freeze
--index-url https://pypi.example/simple

dask==2024.8.0
Distributed == 2024.8.0  # the scheduler's
numpy==2.0.1 \
    --hash=sha256:aaaa \
    --hash=sha256:bbbb
    # via pandas
pandas[performance,excel]==2.2.2
zope.interface===6.4
-r sub/more.txt
--requirement=sub/more.txt
-c constraints.txt
--pre
`

const environmentYml = `name: analysis
channels:
  - conda-forge
  - defaults
dependencies:
  - python=3.12.4=hab00c5b_0_cpython
  - dask==2024.8.0
  - distributed=2024.8.0=pyhd8ed1ab_0
  - bioconda::samtools=1.20
  - _libgcc_mutex=0.1=conda_forge
  - libzlib 1.3.1 h4ab18f5_1
  - pip
  - pip:
    - cloudpickle==3.0.0
    - --extra-index-url https://pypi.example/simple
    - -r requirements-pip.txt
`

// condaBuildsYml pins conda builds, some from a named channel.
const condaBuildsYml = `channels: [conda-forge]
dependencies:
  - python=3.12
  - conda-forge::distributed=2024.8.0=pyhd8ed1ab_0
  - https://conda.example.org/forge::numpy==2.0.1=py312h1234567_0
  - tzdata=2024a=*
  - PyYAML=6.0.1=py312h_0
`

const pylockToml = `lock-version = "1.0"
requires-python = ">=3.10,<3.13"
created-by = "pip"

[[packages]]
name = "dask"
version = "2024.8.0"

[[packages.wheels]]
url = "https://files.example/dask-2024.8.0-py3-none-any.whl"
hashes = {sha256 = "0000"}

[[packages]]
name = "Distributed"
version = "2024.8.0"
index = "https://pypi.org/simple"
`

func pkgs(pairs ...string) []images.Package {
	var out []images.Package
	for i := 0; i+1 < len(pairs); i += 2 {
		out = append(out, images.Package{Name: pairs[i], Version: pairs[i+1]})
	}
	return out
}

func TestFromFile(t *testing.T) {
	needPython(t)
	t.Parallel()
	ctx := testContext(t)
	base := map[string]string{
		"requirements.txt":          requirementsTxt,
		"sub/more.txt":              "cloudpickle==3.0.0\n-r ../common.txt\n",
		"common.txt":                "msgpack==1.0.8\r\n",
		"constraints.txt":           "numpy<3\n",
		"environment.yml":           environmentYml,
		"requirements-pip.txt":      "toolz==0.12.1\n",
		"pylock.toml":               pylockToml,
		"pylock.dev.toml":           pylockToml,
		"gpu-requirements.txt":      "distributed==2024.8.0\ncupy-cuda12x==13.2.0\n",
		"env.yaml":                  "dependencies:\n  - python==3.11\n  - distributed=2024.8.0\n",
		"builds.yml":                condaBuildsYml,
		"code/helpers.py":           "H = 1\n",
		"code/requirements.txt":     "not a module",
		"code/pkg/__init__.py":      "",
		"code/pkg/data/__init__.py": "",
	}
	reqPkgs := pkgs("cloudpickle", "3.0.0", "dask", "2024.8.0", "distributed", "2024.8.0", "msgpack", "1.0.8",
		"numpy", "2.0.1", "pandas", "2.2.2", "zope-interface", "6.4")
	tests := []struct {
		name      string
		file      string
		opts      func(*Options)
		python    string
		platform  string
		gpu       bool
		packages  []images.Package
		channels  []string
		parts     []string
		notes     []string
		noInterp  bool
		localZips []string
	}{
		{name: "requirements with includes, continuations, hashes, extras and options", file: "requirements.txt",
			python: "3.11", platform: "linux/amd64", packages: reqPkgs,
			notes: []string{
				"requirements.txt:2: ignored option --index-url",
				"requirements.txt:14: ignored constraints file constraints.txt (constraints install nothing)",
				"requirements.txt:15: ignored option --pre",
				"Python 3.11.2 from /usr/bin/python3 (",
			}},
		{name: "requirements with local code", file: "requirements.txt", opts: func(o *Options) { o.Dir = "code" },
			python: "3.11", platform: "linux/amd64", packages: reqPkgs, parts: []string{"local"},
			localZips: []string{"helpers.py", "pkg/", "pkg/__init__.py", "pkg/data/", "pkg/data/__init__.py"}},
		{name: "requirements on another platform", file: "requirements.txt", opts: func(o *Options) { o.Platform = "linux/arm64" },
			python: "3.11", platform: "linux/arm64", packages: reqPkgs},
		{name: "GPU packages", file: "gpu-requirements.txt", python: "3.11", platform: "linux/amd64", gpu: true,
			packages: pkgs("cupy-cuda12x", "13.2.0", "distributed", "2024.8.0"), notes: []string{"GPU image: the environment has GPU packages cupy-cuda12x"}},
		{name: "GPU packages, GPU off", file: "gpu-requirements.txt", opts: func(o *Options) { o.GPU = "no" }, python: "3.11", platform: "linux/amd64",
			packages: pkgs("cupy-cuda12x", "13.2.0", "distributed", "2024.8.0")},
		{name: "conda environment", file: "environment.yml", python: "3.12", platform: "linux/amd64",
			// name=version=build and "name version build" keep conda's exact
			// build (and conda's spelling of the name).
			packages: []images.Package{{Name: "_libgcc_mutex", Version: "0.1", Build: "conda_forge"}, {Name: "cloudpickle", Version: "3.0.0"},
				{Name: "dask", Version: "2024.8.0"}, {Name: "distributed", Version: "2024.8.0", Build: "pyhd8ed1ab_0"},
				{Name: "libzlib", Version: "1.3.1", Build: "h4ab18f5_1"}, {Name: "samtools", Version: "1.20"}, {Name: "toolz", Version: "0.12.1"}},
			channels: []string{"conda-forge", "defaults", "bioconda"},
			notes: []string{
				"environment.yml:12: pip has no version; left out",
				"environment.yml:15: ignored option --extra-index-url",
				"environment.yml:6 says Python 3.12; the Python at /usr/bin/python3 is 3.11; the image has 3.12",
			}},
		{name: "conda builds with channels", file: "builds.yml", python: "3.12", platform: "linux/amd64",
			packages: []images.Package{{Name: "distributed", Version: "2024.8.0", Build: "pyhd8ed1ab_0", Channel: "conda-forge"},
				{Name: "numpy", Version: "2.0.1", Build: "py312h1234567_0", Channel: "https://conda.example.org/forge"},
				{Name: "pyyaml", Version: "6.0.1", Build: "py312h_0"}, {Name: "tzdata", Version: "2024a"}},
			channels: []string{"conda-forge", "https://conda.example.org/forge"}},
		{name: "conda environment with python==, GPU forced", file: "env.yaml", opts: func(o *Options) { o.GPU = "yes" },
			python: "3.11", platform: "linux/amd64", gpu: true, packages: pkgs("distributed", "2024.8.0")},
		{name: "conda environment with python, platform given: no interpreter needed", file: "env.yaml",
			opts: func(o *Options) { o.Python = "/nonexistent/python"; o.Platform = "arm64" }, noInterp: true,
			python: "3.11", platform: "linux/arm64", packages: pkgs("distributed", "2024.8.0")},
		{name: "pylock", file: "pylock.toml", python: "3.11", platform: "linux/amd64", packages: pkgs("dask", "2024.8.0", "distributed", "2024.8.0")},
		{name: "named pylock", file: "pylock.dev.toml", python: "3.11", platform: "linux/amd64", packages: pkgs("dask", "2024.8.0", "distributed", "2024.8.0")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			writeFiles(t, dir, base)
			opts := Options{Python: systemPython}
			if tt.opts != nil {
				tt.opts(&opts)
			}
			if opts.Dir != "" {
				opts.Dir = filepath.Join(dir, opts.Dir)
			}
			path := filepath.Join(dir, tt.file)
			env, err := FromFile(ctx, path, opts)
			if err != nil {
				t.Fatal(err)
			}
			s := env.Spec
			if s.Python != tt.python || s.Platform != tt.platform || s.GPU != tt.gpu {
				t.Errorf("python %q platform %q gpu %v, want %q %q %v", s.Python, s.Platform, s.GPU, tt.python, tt.platform, tt.gpu)
			}
			if !reflect.DeepEqual(s.Packages, tt.packages) {
				t.Errorf("packages\n%v\nwant\n%v", s.Packages, tt.packages)
			}
			if !reflect.DeepEqual(s.Channels, tt.channels) {
				t.Errorf("channels %q, want %q", s.Channels, tt.channels)
			}
			var parts []string
			for _, cp := range s.Code {
				parts = append(parts, cp.Name)
				if images.DigestOf(env.Code[cp.Name]) != cp.Digest {
					t.Errorf("part %s: digest does not match", cp.Name)
				}
			}
			if !reflect.DeepEqual(parts, tt.parts) || len(env.Code) != len(tt.parts) {
				t.Errorf("code parts %q, want %q", parts, tt.parts)
			}
			if tt.localZips != nil {
				if got := zipNames(t, env.Code[LocalPart]); !reflect.DeepEqual(got, tt.localZips) {
					t.Errorf("local part %q, want %q", got, tt.localZips)
				}
			}
			if want := systemPython; tt.noInterp {
				if env.Interpreter != "" {
					t.Errorf("interpreter %q, want none", env.Interpreter)
				}
			} else if env.Interpreter != want {
				t.Errorf("interpreter %q, want %q", env.Interpreter, want)
			}
			notes := strings.Join(env.Notes, "\n")
			for _, want := range tt.notes {
				if !strings.Contains(notes, want) {
					t.Errorf("notes do not mention %q:\n%s", want, notes)
				}
			}
		})
	}
}

// TestFromFileNoInterpreter reads files with no Python on PATH.
func TestFromFileNoInterpreter(t *testing.T) {
	ctx := testContext(t)
	t.Setenv("PATH", t.TempDir())
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{
		"environment.yml":  "dependencies:\n  - python=3.12\n  - distributed=2024.8.0\n",
		"requirements.txt": "distributed==2024.8.0\n",
	})

	env, err := FromFile(ctx, filepath.Join(dir, "environment.yml"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if env.Spec.Python != "3.12" || env.Spec.Platform != "linux/amd64" || env.Interpreter != "" {
		t.Errorf("python %q platform %q interpreter %q", env.Spec.Python, env.Spec.Platform, env.Interpreter)
	}
	if !strings.Contains(strings.Join(env.Notes, "\n"), "no Python interpreter to tell the platform; the image is for linux/amd64") {
		t.Errorf("notes %q", env.Notes)
	}

	req := filepath.Join(dir, "requirements.txt")
	_, err = FromFile(ctx, req, Options{})
	if !errors.Is(err, ErrNoInterpreter) || !strings.Contains(err.Error(), req+" does not say which Python version") ||
		!strings.Contains(err.Error(), "neither python3 nor python is on PATH; pass --python") {
		t.Errorf("FromFile(requirements.txt) with no Python: %v", err)
	}
}

func TestFromFileErrors(t *testing.T) {
	needPython(t)
	t.Parallel()
	ctx := testContext(t)
	const dist = "distributed==2024.8.0\n"
	tests := []struct {
		name  string
		file  string
		files map[string]string
		opts  Options
		want  []string // "$" is the directory
	}{
		{"unknown kind", "environment.json", map[string]string{"environment.json": "{}"}, Options{},
			[]string{"$/environment.json: unknown kind of environment file; use a pinned requirements file (requirements*.txt", "environment.yml", "pylock.toml or pylock.<name>.toml"}},
		{"pyproject is not a lock file", "pyproject.toml", map[string]string{"pyproject.toml": ""}, Options{}, []string{"$/pyproject.toml: unknown kind"}},
		{"missing file", "requirements.txt", nil, Options{}, []string{"environment file $/requirements.txt:", "no such file"}},

		// requirements
		{"no version", "requirements.txt", map[string]string{"requirements.txt": dist + "\nnumpy\n"}, Options{},
			[]string{`$/requirements.txt:3: "numpy" has no version; pin every package to one version with ==, as ` + "`pip freeze` or `pip list --format=freeze`"}},
		{"lower bound", "requirements.txt", map[string]string{"requirements.txt": "numpy>=1.26\n"}, Options{},
			[]string{`$/requirements.txt:1: "numpy>=1.26" is not pinned to one version`, "pip list --format=freeze"}},
		{"compatible release", "requirements.txt", map[string]string{"requirements.txt": "numpy~=1.26.0\n"}, Options{}, []string{`requirements.txt:1: "numpy~=1.26.0" is not pinned`}},
		{"wildcard", "requirements.txt", map[string]string{"requirements.txt": "numpy==1.26.*\n"}, Options{}, []string{`requirements.txt:1: "numpy==1.26.*" is not pinned`}},
		{"two specifiers", "requirements.txt", map[string]string{"requirements.txt": "numpy==1.26.4,<2\n"}, Options{}, []string{`requirements.txt:1: "numpy==1.26.4,<2" is not pinned`}},
		{"direct URL", "requirements.txt", map[string]string{"requirements.txt": "mylib @ https://example.com/mylib-1.0-py3-none-any.whl\n"}, Options{},
			[]string{`requirements.txt:1: "mylib @ https://example.com/mylib-1.0-py3-none-any.whl" is a URL or a path, not a pinned version`, "pip list --format=freeze"}},
		{"VCS URL", "requirements.txt", map[string]string{"requirements.txt": "git+https://github.com/x/y.git#egg=y\n"}, Options{}, []string{"requirements.txt:1:", "is a URL or a path"}},
		{"local path", "requirements.txt", map[string]string{"requirements.txt": "./vendor/pkg\n"}, Options{}, []string{"requirements.txt:1:", "is a URL or a path"}},
		{"editable", "requirements.txt", map[string]string{"requirements.txt": dist + "-e .\n"}, Options{},
			[]string{`$/requirements.txt:2: "-e ." is an editable install`, "pip freeze", "pip list --format=freeze"}},
		{"marker", "requirements.txt", map[string]string{"requirements.txt": `numpy==2.0.1 ; python_version < "3.12"` + "\n"}, Options{},
			[]string{`$/requirements.txt:1: "numpy==2.0.1 ; python_version < \"3.12\"" has an environment marker (python_version < "3.12"), which is not supported`}},
		{"continued line", "requirements.txt", map[string]string{"requirements.txt": dist + "numpy>=1 \\\n    --hash=sha256:aaaa\n"}, Options{},
			[]string{`$/requirements.txt:2: "numpy>=1" is not pinned`}},
		{"not a requirement", "requirements.txt", map[string]string{"requirements.txt": "==1.0\n"}, Options{}, []string{`requirements.txt:1: "==1.0" is not a requirement`}},
		{"missing include", "requirements.txt", map[string]string{"requirements.txt": dist + "-r missing.txt\n"}, Options{},
			[]string{"$/requirements.txt:2: including missing.txt:", "no such file"}},
		{"include without a file", "requirements.txt", map[string]string{"requirements.txt": "-r\n"}, Options{}, []string{"requirements.txt:1: -r needs a file name"}},
		{"remote include", "requirements.txt", map[string]string{"requirements.txt": "-r https://example.com/r.txt\n"}, Options{}, []string{"requirements.txt:1: including https://example.com/r.txt: only local files"}},
		{"include cycle", "requirements.txt", map[string]string{"requirements.txt": "-r sub/b.txt\n", "sub/b.txt": dist + "-r ../requirements.txt\n"}, Options{},
			[]string{"$/sub/b.txt:2: including ../requirements.txt: an include cycle ($/requirements.txt -> $/sub/b.txt -> $/requirements.txt)"}},
		{"file includes itself", "requirements.txt", map[string]string{"requirements.txt": "-r ./requirements.txt\n"}, Options{},
			[]string{"$/requirements.txt:1: including ./requirements.txt: an include cycle ($/requirements.txt -> $/requirements.txt)"}},
		{"error in an included file", "requirements.txt", map[string]string{"requirements.txt": dist + "-r sub/b.txt\n", "sub/b.txt": "\n\ntoolz\n"}, Options{},
			[]string{`$/sub/b.txt:3: "toolz" has no version`}},
		{"conflicting pins", "requirements.txt", map[string]string{"requirements.txt": dist + "numpy==1.26.4\n-r other.txt\n", "other.txt": "NumPy==2.0.1\n"}, Options{},
			[]string{"$/other.txt:1: NumPy 2.0.1 conflicts with numpy 1.26.4 at $/requirements.txt:2"}},
		{"no distributed", "requirements.txt", map[string]string{"requirements.txt": "dask==2024.8.0\n"}, Options{},
			[]string{"$/requirements.txt does not list Dask distributed; the cluster needs it"}},
		{"interpreter missing", "requirements.txt", map[string]string{"requirements.txt": dist}, Options{Python: "/nonexistent/python3"},
			[]string{"$/requirements.txt does not say which Python version the environment has", "/nonexistent/python3 does not exist; pass --python"}},
		{"explicit interpreter missing, file says python", "environment.yml", map[string]string{"environment.yml": "dependencies: [python=3.11, distributed=2024.8.0]\n"},
			Options{Python: "/nonexistent/python3"}, []string{"$/environment.yml: no Python interpreter: the Python interpreter /nonexistent/python3 does not exist; pass --python"}},
		{"bad option", "requirements.txt", map[string]string{"requirements.txt": dist}, Options{GPU: "sometimes"}, []string{`$/requirements.txt: GPU setting "sometimes"`}},

		// environment.yml
		{"conda: no version", "environment.yml", map[string]string{"environment.yml": "channels: [conda-forge]\ndependencies:\n  - distributed=2024.8.0\n  - numpy\n"}, Options{},
			[]string{`$/environment.yml:4: "numpy" has no version; pin every package to one version (name=version or name=version=build), as ` + "`conda env export`"}},
		{"conda: range", "environment.yml", map[string]string{"environment.yml": "dependencies:\n  - numpy>=1.26\n"}, Options{}, []string{`environment.yml:2: "numpy>=1.26" is not pinned to one version`}},
		{"conda: fuzzy version", "environment.yml", map[string]string{"environment.yml": "dependencies:\n  - numpy=1.26.*\n"}, Options{}, []string{`environment.yml:2: "numpy=1.26.*" is not pinned to one version`}},
		{"conda: pip entry without a version", "environment.yml", map[string]string{"environment.yml": "dependencies:\n  - distributed=2024.8.0\n  - pip:\n    - requests\n"}, Options{},
			[]string{`$/environment.yml:4: "requests" has no version`, "pip list --format=freeze"}},
		{"conda: pip include error", "environment.yml", map[string]string{"environment.yml": "dependencies:\n  - pip:\n    - -r reqs.txt\n", "reqs.txt": "x>1\n"}, Options{},
			[]string{`$/reqs.txt:1: "x>1" is not pinned`}},
		{"conda: python range", "environment.yml", map[string]string{"environment.yml": "dependencies:\n  - python>=3.10\n"}, Options{}, []string{`environment.yml:2: "python>=3.10" is not pinned`}},
		{"conda: bad python", "environment.yml", map[string]string{"environment.yml": "dependencies:\n  - python=three\n"}, Options{}, []string{`environment.yml:2: python version "three" is not a version like 3.12`}},
		{"conda: two pythons", "environment.yml", map[string]string{"environment.yml": "dependencies:\n  - python=3.11\n  - python=3.12\n"}, Options{},
			[]string{"$/environment.yml:3: python 3.12 conflicts with python 3.11 at $/environment.yml:2"}},
		{"conda: not YAML", "environment.yml", map[string]string{"environment.yml": "dependencies: [\n"}, Options{}, []string{"$/environment.yml: yaml:"}},
		{"conda: empty", "environment.yml", map[string]string{"environment.yml": ""}, Options{}, []string{"$/environment.yml: empty file"}},
		{"conda: not a mapping", "environment.yml", map[string]string{"environment.yml": "- numpy=1\n"}, Options{}, []string{"$/environment.yml:1: want a conda environment"}},
		{"conda: no dependencies", "environment.yml", map[string]string{"environment.yml": "name: x\nchannels: [conda-forge]\n"}, Options{}, []string{"$/environment.yml: lists no dependencies"}},
		{"conda: dependencies not a list", "environment.yml", map[string]string{"environment.yml": "dependencies:\n  numpy: 1\n"}, Options{}, []string{"$/environment.yml:2: dependencies must be a list"}},
		{"conda: channels not a list", "environment.yml", map[string]string{"environment.yml": "channels: conda-forge\ndependencies: []\n"}, Options{}, []string{"$/environment.yml:1: channels must be a list"}},
		{"conda: other mapping", "environment.yml", map[string]string{"environment.yml": "dependencies:\n  - conda:\n    - numpy\n"}, Options{}, []string{`$/environment.yml:2: unsupported dependency entry "conda"`}},
		{"conda: pip not a list", "environment.yml", map[string]string{"environment.yml": "dependencies:\n  - pip: numpy==1\n"}, Options{}, []string{"$/environment.yml:2: pip: must be a list"}},
		{"conda: invalid name", "environment.yml", map[string]string{"environment.yml": "dependencies:\n  - distributed=2024.8.0\n  - _=1.0\n"}, Options{},
			[]string{`$/environment.yml: invalid environment spec: package name "_" is not valid`}},
		{"conda: conflict with pip", "environment.yml", map[string]string{"environment.yml": "dependencies:\n  - numpy=1.26.4\n  - pip:\n    - numpy==2.0.1\n"}, Options{},
			[]string{"$/environment.yml:4: numpy 2.0.1 conflicts with numpy 1.26.4 at $/environment.yml:2"}},
		{"conda: bad build", "environment.yml", map[string]string{"environment.yml": "dependencies:\n  - numpy=1.26.4=py312-h1\n"}, Options{},
			[]string{`$/environment.yml:2: "numpy=1.26.4=py312-h1" has build "py312-h1", which is not a conda build string`}},
		{"conda: two builds", "environment.yml", map[string]string{"environment.yml": "dependencies:\n  - numpy=1.26.4=py312_0\n  - numpy 1.26.4 py312_1\n"}, Options{},
			[]string{"$/environment.yml:3: numpy 1.26.4 build py312_1 conflicts with build py312_0 at $/environment.yml:2"}},
		{"conda: channel with credentials", "environment.yml", map[string]string{"environment.yml": "dependencies:\n  - https://u:hunter2@conda.example.org/c::numpy=1.26.4=py312_0\n"}, Options{},
			[]string{"$/environment.yml:2: invalid environment spec: a conda channel URL carries credentials"}},

		// pylock.toml
		{"pylock: no version", "pylock.toml", map[string]string{"pylock.toml": "lock-version = \"1.0\"\n\n[[packages]]\nname = \"distributed\"\nversion = \"2024.8.0\"\n\n[[packages]]\nname = \"mylib\"\ndirectory = {path = \".\", editable = true}\n"}, Options{},
			[]string{"$/pylock.toml:7: package mylib has no version"}},
		{"pylock: no lock-version", "pylock.toml", map[string]string{"pylock.toml": "[[packages]]\nname = \"distributed\"\nversion = \"1\"\n"}, Options{}, []string{"$/pylock.toml: no lock-version"}},
		{"pylock: lock-version 2", "pylock.dev.toml", map[string]string{"pylock.dev.toml": "lock-version = \"2.0\"\n"}, Options{}, []string{`$/pylock.dev.toml: lock-version "2.0" is not supported`}},
		{"pylock: no packages", "pylock.toml", map[string]string{"pylock.toml": "lock-version = \"1.0\"\n"}, Options{}, []string{"$/pylock.toml: lists no [[packages]]"}},
		{"pylock: no name", "pylock.toml", map[string]string{"pylock.toml": "lock-version = \"1.0\"\n[[packages]]\nversion = \"1.0\"\n"}, Options{}, []string{"$/pylock.toml:2: a package has no name"}},
		{"pylock: marker", "pylock.toml", map[string]string{"pylock.toml": "lock-version = \"1.0\"\n[[packages]]\nname = \"colorama\"\nversion = \"0.4.6\"\nmarker = \"sys_platform == 'win32'\"\n"}, Options{},
			[]string{"$/pylock.toml:2: package colorama has an environment marker (sys_platform == 'win32'), which is not supported"}},
		{"pylock: inline packages", "pylock.toml", map[string]string{"pylock.toml": "lock-version = \"1.0\"\npackages = [{name = \"a\", version = \"1\"}, {name = \"b\"}]\n"}, Options{},
			[]string{"$/pylock.toml: packages[1]: package b has no version"}},
		{"pylock: not TOML", "pylock.toml", map[string]string{"pylock.toml": "lock-version = \n"}, Options{}, []string{"$/pylock.toml: toml: line 1"}},
		{"pylock: bad requires-python", "pylock.toml", map[string]string{"pylock.toml": "lock-version = \"1.0\"\nrequires-python = \"banana\"\n[[packages]]\nname = \"distributed\"\nversion = \"1\"\n"}, Options{},
			[]string{`$/pylock.toml: requires-python "banana": "banana" is not a version specifier`}},
		{"pylock: requires another Python", "pylock.toml", map[string]string{"pylock.toml": "lock-version = \"1.0\"\nrequires-python = \">=3.12\"\n[[packages]]\nname = \"distributed\"\nversion = \"1\"\n"}, Options{},
			[]string{`$/pylock.toml: requires-python ">=3.12" excludes Python 3.11.2, the version of the Python at /usr/bin/python3; pass --python with a matching interpreter`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			writeFiles(t, dir, tt.files)
			opts := tt.opts
			if opts.Python == "" {
				opts.Python = systemPython
			}
			_, err := FromFile(ctx, filepath.Join(dir, tt.file), opts)
			if err == nil {
				t.Fatal("FromFile() succeeded")
			}
			for _, want := range tt.want {
				want = strings.ReplaceAll(want, "$", dir)
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q\nwant it to contain %q", err, want)
				}
			}
		})
	}
}

func TestRequiresPython(t *testing.T) {
	tests := []struct {
		spec, python string
		ok           bool
	}{
		{">=3.10", "3.11.2", true},
		{">=3.10,<3.11", "3.11.2", false},
		{"==3.11.*", "3.11.9", true},
		{"==3.11.*", "3.12.0", false},
		{"!=3.11.*", "3.11.0", false},
		{"~=3.10", "3.13.1", true},
		{"~=3.10", "4.0", false},
		{"~=3.11.1", "3.11.0", false},
		{"~=3.11.1", "3.12.0", false},
		{"==3.11", "3.11.0", true},
		{"==3.11", "3.11.2", false},
		{"<=3.11", "3.11.0", true},
		{">3.11", "3.11.0", false},
		{"> 3.9 , != 3.10.1", "3.10.1rc1", false},
	}
	for _, tt := range tests {
		if err := checkRequiresPython(tt.spec, tt.python); (err == nil) != tt.ok {
			t.Errorf("checkRequiresPython(%q, %q) = %v, want ok %v", tt.spec, tt.python, err, tt.ok)
		}
	}
	for _, bad := range []string{"", "3.11", ">=3.x", "~=3", ">=3.10.*"} {
		if _, err := parseSpecifiers(bad); err == nil {
			t.Errorf("parseSpecifiers(%q) succeeded", bad)
		}
	}
}

// TestFromData: a file's contents given by a browser, read with no
// interpreter to inspect: the Python version from the file, else the one
// given, else an error saying to give it.
func TestFromData(t *testing.T) {
	tests := []struct {
		name, file, python, platform string
		wantPython, wantPlatform     string
		wantErr                      string
	}{
		{name: "requirements", file: "requirements.txt", python: "3.11.4", wantPython: "3.11", wantPlatform: images.PlatformAMD64},
		{name: "requirements, arm", file: "requirements-dev.txt", python: "3.12", platform: "aarch64", wantPython: "3.12", wantPlatform: images.PlatformARM64},
		{name: "requirements, no python", file: "requirements.txt", wantErr: "does not say which Python version the environment has: give it"},
		{name: "requirements, bad python", file: "requirements.txt", python: "three", wantErr: "three"},
		{name: "conda says python", file: "environment.yml", python: "3.10", wantPython: "3.12", wantPlatform: images.PlatformAMD64},
		{name: "pylock", file: "pylock.toml", python: "3.12", wantPython: "3.12", wantPlatform: images.PlatformAMD64},
		{name: "pylock excludes", file: "pylock.toml", python: "3.13", wantErr: `requires-python ">=3.10,<3.13" excludes Python 3.13`},
		{name: "unknown kind", file: "setup.cfg", python: "3.12", wantErr: "setup.cfg: unknown kind of environment file"},
		{name: "bad platform", file: "requirements.txt", python: "3.12", platform: "windows", wantErr: `platform "windows" is not one of`},
	}
	// requirementsTxt and environmentYml include other files, which a
	// file from elsewhere cannot (below).
	noIncludes := func(s string) string {
		var out []string
		for _, l := range strings.Split(s, "\n") {
			if t := strings.TrimLeft(l, " -"); !strings.HasPrefix(t, "r ") && !strings.HasPrefix(t, "requirement") {
				out = append(out, l)
			}
		}
		return strings.Join(out, "\n")
	}
	data := map[string]string{"requirements.txt": noIncludes(requirementsTxt), "requirements-dev.txt": noIncludes(requirementsTxt),
		"environment.yml": noIncludes(environmentYml), "pylock.toml": pylockToml, "setup.cfg": "[metadata]\n"}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env, err := FromData(tt.file, []byte(data[tt.file]), tt.python, tt.platform)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) || !strings.Contains(err.Error(), tt.file) {
					t.Fatalf("err = %v, want one naming %s and saying %q", err, tt.file, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if env.Spec.Python != tt.wantPython || env.Spec.Platform != tt.wantPlatform || len(env.Spec.Code) != 0 || len(env.Code) != 0 {
				t.Errorf("spec: python %q platform %q code %v; want %q %q and no code", env.Spec.Python, env.Spec.Platform, env.Spec.Code, tt.wantPython, tt.wantPlatform)
			}
			if !slices.ContainsFunc(env.Spec.Packages, func(p images.Package) bool { return images.NormalizeName(p.Name) == "distributed" }) {
				t.Errorf("no distributed in %v", env.Spec.Packages)
			}
		})
	}
	// An include names a file of the machine that reads it: never read
	// for a file from elsewhere (a browser's upload naming the server's
	// files), whatever it names.
	for _, inc := range []string{"-r /etc/passwd", "--requirement=../../etc/hosts", "-r sub/more.txt"} {
		file := "distributed==2024.8.0\n" + inc + "\n"
		if _, err := FromData("requirements.txt", []byte(file), "3.12", ""); err == nil || !strings.Contains(err.Error(), "requirements.txt:2:") ||
			!strings.Contains(err.Error(), "includes another file, which the gateway cannot read") {
			t.Errorf("%s: %v", inc, err)
		}
	}
	yml := "dependencies:\n  - python=3.12\n  - distributed=2024.8.0\n  - pip:\n    - -r /etc/passwd\n"
	if _, err := FromData("environment.yml", []byte(yml), "", ""); err == nil || !strings.Contains(err.Error(), "includes another file") {
		t.Errorf("conda's pip include: %v", err)
	}
	// The same checks of the packages as FromFile's.
	if _, err := FromData("requirements.txt", []byte("dask==2024.8.0\n"), "3.12", ""); err == nil || !strings.Contains(err.Error(), "does not list Dask distributed") {
		t.Errorf("no distributed: %v", err)
	}
	if _, err := FromData("requirements.txt", []byte("distributed>=2024\n"), "3.12", ""); err == nil || !strings.Contains(err.Error(), "requirements.txt:1") {
		t.Errorf("unpinned: %v", err)
	}
}
