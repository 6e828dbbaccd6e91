package baseinfo

import (
	"context"
	"errors"
	"go/parser"
	"go/token"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

const (
	upstreamSysconfig = "_INSTALL_SCHEMES = {\n    'posix_prefix': {\n        'purelib': '{base}/lib/python{py_version_short}/site-packages',\n    },\n}\n"
	debianSysconfig   = upstreamSysconfig + "    'posix_local': {\n        'purelib': '{base}/local/lib/python{py_version_short}/dist-packages',\n    },\n"
	fedoraSysconfig   = upstreamSysconfig + "    'rpm_prefix': {\n        'platlib': '{platbase}/local/{platlibdir}/python{py_version_short}/site-packages',\n    },\n"
	debSite           = "usr/lib/python3/dist-packages"
	debLocalSite      = "usr/local/lib/python3.11/dist-packages"
	pySite            = "usr/local/lib/python3.12/site-packages"
)

// glibcLayer is the C library of a Debian-like base (usrmerge: /lib is a
// link to usr/lib); old is glibc before 2.34, whose libc.so.6 is a link to
// libc-2.X.so.
func glibcLayer(version string, old bool) []ent {
	ents := []ent{sym("lib", "usr/lib"), dirent("usr/lib/x86_64-linux-gnu/")}
	if old {
		return append(ents,
			reg("usr/lib/x86_64-linux-gnu/libc-"+version+".so", libcBody(version)),
			sym("usr/lib/x86_64-linux-gnu/libc.so.6", "libc-"+version+".so"))
	}
	return append(ents, reg("usr/lib/x86_64-linux-gnu/libc.so.6", libcBody(version)))
}

// debianPython is Debian bookworm's python3 with packages from apt in
// /usr/lib/python3/dist-packages and one from pip in /usr/local.
func debianPython() []ent {
	return append(glibcLayer("2.36", false),
		exe("usr/bin/python3.11"),
		sym("usr/bin/python3", "python3.11"),
		reg("usr/lib/python3.11/os.py", ""),
		reg("usr/lib/python3.11/sysconfig.py", debianSysconfig),
		reg("usr/lib/python3.11/EXTERNALLY-MANAGED", "[externally-managed]\n"),
		pkgInfo(debSite+"/six-1.16.0.egg-info", "six", "1.16.0"),
		pkgInfo(debSite+"/distributed-2022.12.1+ds.1.egg-info/PKG-INFO", "distributed", "2022.12.1+ds.1"),
		pkgInfo(debSite+"/toolz-0.12.0.egg-info/PKG-INFO", "toolz", "0.12.0"),
		meta(debLocalSite, "toolz", "0.12.1"),
	)
}

// officialPython is the layout of the python:3.12 images: a build in
// /usr/local on a Debian base without Debian's python.
func officialPython() []ent {
	return []ent{
		exe("usr/local/bin/python3.12"),
		sym("usr/local/bin/python3", "python3.12"),
		sym("usr/local/bin/python", "python3"),
		reg("usr/local/lib/python3.12/os.py", ""),
		reg("usr/local/lib/python3.12/sysconfig.py", upstreamSysconfig),
		meta(pySite, "pip", "24.0"),
	}
}

func condaEnv() []ent {
	return []ent{
		exe("opt/conda/bin/python3.10"),
		sym("opt/conda/bin/python3", "python3.10"),
		sym("opt/conda/bin/python", "python3.10"),
		reg("opt/conda/lib/python3.10/os.py", ""),
		reg("opt/conda/lib/python3.10/sysconfig.py", upstreamSysconfig),
		reg("opt/conda/conda-meta/history", ""),
		reg("opt/conda/conda-meta/python-3.10.13-h955ad1f_0.json", "{}"),
		reg("opt/conda/conda-meta/numpy-1.26.4-py310hb13e2d6_0.json", "{}"),
		reg("opt/conda/conda-meta/ca-certificates-2024.2.2-hbcca054_0.json", "{}"),
		meta("opt/conda/lib/python3.10/site-packages", "numpy", "1.26.4"),
		meta("opt/conda/lib/python3.10/site-packages", "Conda_Package_Handling", "2.2.0"),
	}
}

// venvOn is a venv in /opt/venv made from Debian's python3.11.
func venvOn(systemSite bool) []ent {
	cfg := "home = /usr/bin\ninclude-system-site-packages = false\nversion = 3.11.2\n"
	if systemSite {
		cfg = strings.Replace(cfg, "false", "true", 1)
	}
	return []ent{
		reg("opt/venv/pyvenv.cfg", cfg),
		sym("opt/venv/bin/python", "/usr/bin/python3.11"),
		sym("opt/venv/bin/python3", "python"),
		sym("opt/venv/bin/python3.11", "python"),
		sym("opt/venv/lib64", "lib"),
		meta("opt/venv/lib/python3.11/site-packages", "requests", "2.31.0"),
	}
}

func env(kv ...string) v1.Config { return v1.Config{Env: kv} }

const stdPath = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

func TestInspect(t *testing.T) {
	debianWant := Info{
		Python: "3.11", Interpreter: "/usr/bin/python3.11", Prefix: "/usr/local",
		SitePackages: "/usr/local/lib/python3.11/dist-packages", Scripts: "/usr/local/bin",
		Headers: "/usr/include/python3.11", Glibc: "2.36", Arch: "x86_64",
		Packages: map[string]string{"six": "1.16.0", "distributed": "2022.12.1+ds.1", "toolz": "0.12.1"},
		SysPath:  []string{"/usr/local/lib/python3.11/dist-packages", "/usr/lib/python3/dist-packages"},
		// Debian's python carries PEP 668's marker.
		ExternallyManaged: true,
	}
	officialWant := Info{
		Python: "3.12", Interpreter: "/usr/local/bin/python3.12", Prefix: "/usr/local",
		SitePackages: "/usr/local/lib/python3.12/site-packages", Scripts: "/usr/local/bin",
		Headers: "/usr/local/include/python3.12", Glibc: "2.36", Arch: "x86_64",
		Packages: map[string]string{"pip": "24.0"},
		SysPath:  []string{"/usr/local/lib/python3.12/site-packages"},
	}
	with := func(base Info, f func(*Info)) Info {
		base.Packages = copyMap(base.Packages)
		base.SysPath = append([]string(nil), base.SysPath...)
		f(&base)
		return base
	}
	venvWant := Info{
		Python: "3.11", Interpreter: "/opt/venv/bin/python3.11", Prefix: "/opt/venv",
		SitePackages: "/opt/venv/lib/python3.11/site-packages", Scripts: "/opt/venv/bin",
		Headers: "/opt/venv/include/site/python3.11", Glibc: "2.31", Arch: "aarch64", Venv: "/opt/venv",
		Packages: map[string]string{"requests": "2.31.0"},
		SysPath:  []string{"/opt/venv/lib/python3.11/site-packages"},
	}
	oldGlibcDebian := append(glibcLayer("2.31", true), debianPython()[len(glibcLayer("2.36", false)):]...)

	tests := []struct {
		name    string
		arch    string
		cfg     v1.Config
		layers  [][]ent
		lim     Limits
		want    Info
		wantErr error
		errHas  []string
		// secondPass: some file was not read while the first pass
		// streamed by, so a layer is opened again.
		secondPass bool
		// distInfo: some of DistInfo's entries (all of it has the
		// same names as Packages).
		distInfo map[string]string
	}{
		{
			name:   "debian system python installs into /usr/local dist-packages",
			cfg:    env(stdPath),
			layers: [][]ent{debianPython()},
			want:   debianWant,
			distInfo: map[string]string{
				"toolz":       "/usr/local/lib/python3.11/dist-packages/toolz-0.12.1.dist-info",
				"six":         "/usr/lib/python3/dist-packages/six-1.16.0.egg-info",
				"distributed": "/usr/lib/python3/dist-packages/distributed-2022.12.1+ds.1.egg-info",
			},
		},
		{
			name:   "debian python with the packaging layout",
			cfg:    env(stdPath, "DEB_PYTHON_INSTALL_LAYOUT=deb"),
			layers: [][]ent{debianPython()},
			want: with(debianWant, func(i *Info) {
				i.Prefix, i.SitePackages, i.Scripts = "/usr", "/usr/lib/python3/dist-packages", "/usr/bin"
			}),
		},
		{
			name:   "no PATH in the config uses docker's default",
			layers: [][]ent{debianPython()},
			want:   debianWant,
		},
		{
			name:   "official python image",
			cfg:    v1.Config{Env: []string{stdPath}, Cmd: []string{"python3"}},
			layers: [][]ent{glibcLayer("2.36", false), officialPython()},
			want:   officialWant,
		},
		{
			name: "symlink chain through absolute, relative and directory links",
			cfg:  env(stdPath),
			layers: [][]ent{glibcLayer("2.36", false), {
				sym("usr/local/bin/python3", "python3.12"),
				sym("usr/local/bin/python3.12", "/opt/python/current/bin/python3.12"),
				sym("opt/python/current", "3.12.1"),
				exe("opt/python/3.12.1/bin/python3.12"),
				reg("opt/python/3.12.1/lib/python3.12/sysconfig.py", upstreamSysconfig),
				meta("opt/python/3.12.1/lib/python3.12/site-packages", "pip", "24.0"),
			}},
			want: with(officialWant, func(i *Info) {
				i.Interpreter, i.Prefix = "/opt/python/3.12.1/bin/python3.12", "/opt/python/3.12.1"
				i.SitePackages, i.Scripts = "/opt/python/3.12.1/lib/python3.12/site-packages", "/opt/python/3.12.1/bin"
				i.Headers = "/opt/python/3.12.1/include/python3.12"
				i.SysPath = []string{i.SitePackages}
			}),
		},
		{
			name: "hard links, PYTHONPATH and metadata outside site directories (read in a second pass)",
			cfg:  env(stdPath, "PYTHONPATH=/app/lib:relative"),
			layers: [][]ent{glibcLayer("2.36", false), {
				exe("usr/local/bin/python3.12"),
				hard("usr/local/bin/python3", "usr/local/bin/python3.12"),
				reg("usr/local/lib/python3.12/os.py", ""),
				reg("usr/local/lib/python3.12/sysconfig.py", upstreamSysconfig),
				reg("usr/share/doc/wheel/METADATA", "Name: wheel\nVersion: 0.42.0\n"),
				hard(pySite+"/wheel-0.42.0.dist-info/METADATA", "usr/share/doc/wheel/METADATA"),
				meta("app/lib", "myapp", "1.0"),
				meta("app/lib", "pip", "99"),
				meta(pySite, "pip", "24.0"),
			}},
			secondPass: true,
			want: with(officialWant, func(i *Info) {
				i.Interpreter = "/usr/local/bin/python3"
				// PYTHONPATH comes first on sys.path.
				i.Packages = map[string]string{"pip": "99", "myapp": "1.0", "wheel": "0.42.0"}
				i.SysPath = []string{"/app/lib", "/usr/local/lib/python3.12/site-packages"}
			}),
		},
		{
			name:   "conda",
			cfg:    env("PATH=/opt/conda/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"),
			layers: [][]ent{glibcLayer("2.36", false), condaEnv()},
			want: Info{
				Python: "3.10", Interpreter: "/opt/conda/bin/python3.10", Prefix: "/opt/conda",
				SitePackages: "/opt/conda/lib/python3.10/site-packages", Scripts: "/opt/conda/bin",
				Headers: "/opt/conda/include/python3.10", Glibc: "2.36", Arch: "x86_64", Conda: "/opt/conda",
				Packages: map[string]string{"numpy": "1.26.4", "conda-package-handling": "2.2.0"},
				CondaPackages: map[string]CondaPackage{
					"python":          {"3.10.13", "h955ad1f_0"},
					"numpy":           {"1.26.4", "py310hb13e2d6_0"},
					"ca-certificates": {"2024.2.2", "hbcca054_0"},
				},
				SysPath: []string{"/opt/conda/lib/python3.10/site-packages"},
			},
		},
		{
			name:   "venv first on PATH",
			arch:   "arm64",
			cfg:    env("PATH=/opt/venv/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"),
			layers: [][]ent{oldGlibcDebian, venvOn(false)},
			want:   venvWant,
		},
		{
			name:   "venv with system site packages sees the base's",
			arch:   "arm64",
			cfg:    env("PATH=/opt/venv/bin:/usr/bin"),
			layers: [][]ent{oldGlibcDebian, venvOn(true)},
			want: with(venvWant, func(i *Info) {
				i.Packages = map[string]string{"requests": "2.31.0", "six": "1.16.0", "distributed": "2022.12.1+ds.1", "toolz": "0.12.1"}
				i.SysPath = append(i.SysPath, "/usr/local/lib/python3.11/dist-packages", "/usr/lib/python3/dist-packages")
			}),
		},
		{
			name: "entrypoint naming a python outside PATH wins",
			cfg:  v1.Config{Env: []string{stdPath}, Entrypoint: []string{"/opt/py/bin/python3.12", "-m", "app"}},
			layers: [][]ent{debianPython(), {
				exe("opt/py/bin/python3.12"),
				reg("opt/py/lib/python3.12/sysconfig.pyc", "\x00\x00compiled posix_prefix\x00"),
			}},
			secondPass: true,
			want: with(debianWant, func(i *Info) {
				i.Python, i.Interpreter, i.Prefix = "3.12", "/opt/py/bin/python3.12", "/opt/py"
				i.SitePackages, i.Scripts, i.Headers = "/opt/py/lib/python3.12/site-packages", "/opt/py/bin", "/opt/py/include/python3.12"
				i.Packages, i.SysPath, i.ExternallyManaged = map[string]string{}, nil, false
			}),
		},
		{
			name:     "a package whited out by an upper layer is gone",
			cfg:      env(stdPath),
			layers:   [][]ent{glibcLayer("2.36", false), officialPython(), {wh(pySite + "/pip-24.0.dist-info"), meta(pySite, "setuptools", "69.0.0")}},
			want:     with(officialWant, func(i *Info) { i.Packages = map[string]string{"setuptools": "69.0.0"} }),
			distInfo: map[string]string{"setuptools": "/usr/local/lib/python3.12/site-packages/setuptools-69.0.0.dist-info"},
		},
		{
			name: "an opaque directory hides everything below it",
			cfg:  env(stdPath),
			layers: [][]ent{glibcLayer("2.36", false), append(officialPython(), meta(pySite, "wheel", "0.42.0")),
				{meta(pySite, "packaging", "24.0"), opq(pySite)}},
			want: with(officialWant, func(i *Info) { i.Packages = map[string]string{"packaging": "24.0"} }),
		},
		{
			name:   "an upper layer's file replaces the lower one",
			cfg:    env(stdPath),
			layers: [][]ent{glibcLayer("2.36", false), officialPython(), {meta(pySite, "pip", "24.0")}, {reg(pySite+"/pip-24.0.dist-info/METADATA", "Name: pip\nVersion: 24.1\n")}},
			want:   with(officialWant, func(i *Info) { i.Packages = map[string]string{"pip": "24.1"} }),
		},
		{
			name:   "a file over a directory hides its contents",
			cfg:    env(stdPath),
			layers: [][]ent{glibcLayer("2.36", false), officialPython(), {reg(pySite+"/pip-24.0.dist-info", "")}},
			want:   with(officialWant, func(i *Info) { i.Packages = map[string]string{} }),
		},
		{
			name:   "root's user site comes before the global one",
			cfg:    env(stdPath),
			layers: [][]ent{glibcLayer("2.36", false), officialPython(), {meta("root/.local/lib/python3.12/site-packages", "pip", "25.0")}},
			want: with(officialWant, func(i *Info) {
				i.Packages["pip"] = "25.0"
				i.SysPath = []string{"/root/.local/lib/python3.12/site-packages", "/usr/local/lib/python3.12/site-packages"}
			}),
		},
		{
			name:   "another user's image does not read root's user site",
			cfg:    v1.Config{Env: []string{stdPath}, User: "app"},
			layers: [][]ent{glibcLayer("2.36", false), officialPython(), {meta("root/.local/lib/python3.12/site-packages", "pip", "25.0")}},
			want:   officialWant,
		},
		{
			name:    "a libc.so.6 without glibc's version string",
			cfg:     env(stdPath),
			layers:  [][]ent{officialPython(), {reg("lib/x86_64-linux-gnu/libc.so.6", "\x7fELF not glibc")}},
			wantErr: ErrGlibc,
			errHas:  []string{"/lib/x86_64-linux-gnu/libc.so.6", LabelGlibc},
		},
		{
			name:    "a venv without its lib directory",
			cfg:     env("PATH=/opt/venv/bin"),
			layers:  [][]ent{debianPython(), {reg("opt/venv/pyvenv.cfg", "home = /usr/bin\n"), sym("opt/venv/bin/python3", "/usr/bin/python3.11")}},
			wantErr: ErrScheme,
			errHas:  []string{"/opt/venv has no lib/python3.11", LabelSitePackages},
		},
		{
			name:    "python removed by an upper layer",
			cfg:     env(stdPath),
			layers:  [][]ent{glibcLayer("2.36", false), officialPython(), {wh("usr/local/bin/python3"), wh("usr/local/bin/python3.12")}},
			wantErr: ErrNoPython,
		},
		{
			name: "labels say what the rules cannot read",
			cfg: v1.Config{Env: []string{stdPath}, Labels: map[string]string{
				LabelInterpreter: "/usr/bin/python", LabelVersion: "3.9", LabelSitePackages: "/srv/py/lib/site",
				LabelScripts: "/srv/py/bin", LabelGlibc: "2.28",
			}},
			layers: [][]ent{{exe("usr/bin/python"), meta("srv/py/lib/site", "foo", "1.0")}},
			// Metadata outside (site|dist)-packages is read afterwards.
			secondPass: true,
			want: Info{
				Python: "3.9", Interpreter: "/usr/bin/python", Prefix: "/srv/py",
				SitePackages: "/srv/py/lib/site", Scripts: "/srv/py/bin", Headers: "/srv/py/include/python3.9",
				Glibc: "2.28", Arch: "x86_64", Packages: map[string]string{"foo": "1.0"}, SysPath: []string{"/srv/py/lib/site"},
			},
		},
		{
			name: "labels override what is detected",
			cfg: v1.Config{Env: []string{stdPath}, Labels: map[string]string{
				LabelSitePackages: "/opt/extra", LabelGlibc: "none", LabelPrefix: "/opt",
			}},
			layers:     [][]ent{glibcLayer("2.36", false), officialPython(), {meta("opt/extra", "extra", "2")}},
			secondPass: true,
			want: with(officialWant, func(i *Info) {
				i.SitePackages, i.Glibc, i.Prefix, i.Headers = "/opt/extra", "", "/opt", "/opt/include/python3.12"
				i.Packages["extra"] = "2"
				i.SysPath = []string{"/opt/extra", "/usr/local/lib/python3.12/site-packages"}
			}),
		},
		{
			name:    "a python without a python3.X name needs the version label",
			cfg:     v1.Config{Env: []string{stdPath}, Labels: map[string]string{LabelInterpreter: "/usr/bin/python"}},
			layers:  [][]ent{{exe("usr/bin/python")}},
			wantErr: ErrNoPython,
			errHas:  []string{"/usr/bin/python", LabelVersion},
		},
		{
			name:    "a python whose scheme cannot be found needs the site labels",
			cfg:     v1.Config{Env: []string{stdPath}, Labels: map[string]string{LabelInterpreter: "/usr/bin/python", LabelVersion: "3.9"}},
			layers:  [][]ent{{exe("usr/bin/python")}},
			wantErr: ErrScheme,
			errHas:  []string{"lib/python3.9", LabelSitePackages, LabelScripts},
		},
		{
			name:    "an interpreter label naming nothing in the image",
			cfg:     v1.Config{Labels: map[string]string{LabelInterpreter: "/opt/nothing/python3"}},
			layers:  [][]ent{debianPython()},
			wantErr: ErrLabel,
			errHas:  []string{"/opt/nothing/python3", "not an executable file"},
		},
		{
			name:    "a relative interpreter label",
			cfg:     v1.Config{Labels: map[string]string{LabelInterpreter: "bin/python3"}},
			layers:  [][]ent{debianPython()},
			wantErr: ErrLabel,
			errHas:  []string{LabelInterpreter, "absolute"},
		},
		{
			// A shebang cannot carry it.
			name:    "an interpreter label with a space",
			cfg:     v1.Config{Labels: map[string]string{LabelInterpreter: "/opt/my py/bin/python3.11"}},
			layers:  [][]ent{debianPython(), {exe("opt/my py/bin/python3.11"), reg("opt/my py/lib/python3.11/sysconfig.py", upstreamSysconfig)}},
			wantErr: ErrLabel,
			errHas:  []string{"space"},
		},
		{
			name:    "a detected interpreter with a space",
			cfg:     env("PATH=/opt/my py/bin"),
			layers:  [][]ent{debianPython(), {exe("opt/my py/bin/python3.11"), reg("opt/my py/lib/python3.11/sysconfig.py", upstreamSysconfig)}},
			wantErr: ErrScheme,
			errHas:  []string{"space", LabelInterpreter},
		},
		{
			name:    "a bad version label",
			cfg:     v1.Config{Labels: map[string]string{LabelVersion: "three"}},
			layers:  [][]ent{debianPython()},
			wantErr: ErrLabel,
			errHas:  []string{LabelVersion, "three"},
		},
		{
			name:    "a bad glibc label",
			cfg:     v1.Config{Labels: map[string]string{LabelGlibc: "latest"}},
			layers:  [][]ent{debianPython()},
			wantErr: ErrLabel,
		},
		{
			name: "musl",
			cfg:  env(stdPath),
			layers: [][]ent{{
				exe("lib/ld-musl-x86_64.so.1"),
				sym("lib/libc.musl-x86_64.so.1", "ld-musl-x86_64.so.1"),
				// Real file named python3; the version comes from its alias.
				exe("usr/bin/python3"),
				sym("usr/bin/python3.12", "python3"),
				reg("usr/lib/python3.12/sysconfig.py", upstreamSysconfig),
				meta("usr/lib/python3.12/site-packages", "pip", "24.0"),
			}},
			want: Info{
				Python: "3.12", Interpreter: "/usr/bin/python3", Prefix: "/usr",
				SitePackages: "/usr/lib/python3.12/site-packages", Scripts: "/usr/bin", Headers: "/usr/include/python3.12",
				Arch: "x86_64", Packages: map[string]string{"pip": "24.0"}, SysPath: []string{"/usr/lib/python3.12/site-packages"},
			},
		},
		{
			name:    "no python at all",
			cfg:     env(stdPath),
			layers:  [][]ent{glibcLayer("2.36", false)},
			wantErr: ErrNoPython,
			errHas:  []string{"python3", "/usr/bin/python3[.X]", LabelInterpreter},
		},
		{
			name:    "a symlink loop is an error, not a hang",
			cfg:     env(stdPath),
			layers:  [][]ent{{sym("usr/local/bin/python3", "python3.12"), sym("usr/local/bin/python3.12", "../bin/python3")}},
			wantErr: ErrSymlinkLoop,
		},
		{
			name:    "a directory symlink loop",
			cfg:     env(stdPath),
			layers:  [][]ent{{sym("usr/local/bin", "/usr/local/bin")}},
			wantErr: ErrSymlinkLoop,
		},
		{
			// The host has /usr/bin/python3.11 and Debian's
			// distributed in /usr/lib/python3/dist-packages: neither is
			// in the image, so neither may be seen.
			name: "absolute and climbing symlinks resolve inside the image, never on the host",
			cfg:  env("PATH=/usr/local/bin:/opt/bin"),
			layers: [][]ent{glibcLayer("2.36", false), {
				sym("usr/local/bin/python3", "/usr/bin/python3.11"),
				sym("opt/bin/python3", "../../../../../../../usr/bin/python3.11"),
			}},
			wantErr: ErrNoPython,
		},
		{
			name: "a site directory linking outside the image finds nothing",
			cfg:  env(stdPath),
			layers: [][]ent{glibcLayer("2.36", false), {
				exe("usr/local/bin/python3.12"),
				sym("usr/local/bin/python3", "python3.12"),
				reg("usr/local/lib/python3.12/sysconfig.py", upstreamSysconfig),
				sym(pySite, "/usr/lib/python3/dist-packages"),
			}},
			want: with(officialWant, func(i *Info) { i.Packages, i.SysPath = map[string]string{}, nil }),
		},
		{
			name: "a python with no sysconfig is refused, not guessed",
			cfg:  env(stdPath),
			layers: [][]ent{{
				exe("usr/local/bin/python3.12"),
				dirent("usr/local/lib/python3.12/"),
			}},
			wantErr: ErrScheme,
			errHas:  []string{"sysconfig", LabelSitePackages},
		},
		{
			name: "fedora's rpm_prefix scheme is refused",
			cfg:  env(stdPath),
			layers: [][]ent{{
				exe("usr/bin/python3.12"),
				reg("usr/lib/python3.12/sysconfig.py", fedoraSysconfig),
				dirent("usr/lib64/python3.12/"),
			}},
			wantErr: ErrScheme,
			errHas:  []string{"rpm_prefix", LabelSitePackages},
		},
		{
			name: "fedora's python with labels",
			cfg: v1.Config{Env: []string{stdPath}, Labels: map[string]string{
				LabelSitePackages: "/usr/local/lib/python3.12/site-packages", LabelScripts: "/usr/local/bin",
			}},
			layers: [][]ent{{
				exe("usr/bin/python3.12"),
				reg("usr/lib/python3.12/sysconfig.py", fedoraSysconfig),
			}},
			want: Info{
				Python: "3.12", Interpreter: "/usr/bin/python3.12", Prefix: "/usr/local",
				SitePackages: "/usr/local/lib/python3.12/site-packages", Scripts: "/usr/local/bin",
				Headers: "/usr/local/include/python3.12", Arch: "x86_64", Packages: map[string]string{},
			},
		},
		{
			name: "lib64 beside lib is refused",
			cfg:  env(stdPath),
			layers: [][]ent{{
				exe("usr/local/bin/python3.12"),
				reg("usr/local/lib/python3.12/sysconfig.py", upstreamSysconfig),
				dirent("usr/local/lib64/python3.12/"),
			}},
			wantErr: ErrScheme,
			errHas:  []string{"lib64"},
		},
		{
			name:    "too many entries",
			cfg:     env(stdPath),
			layers:  [][]ent{debianPython()},
			lim:     Limits{MaxEntries: 5},
			wantErr: ErrLimit,
			errHas:  []string{"more than 5 files"},
		},
		{
			name:    "deep names count their implied directories",
			cfg:     env(stdPath),
			layers:  [][]ent{{reg(strings.Repeat("d/", 500)+"f", "")}},
			lim:     Limits{MaxEntries: 100},
			wantErr: ErrLimit,
		},
		{
			name:    "too many bytes to read",
			cfg:     env(stdPath),
			layers:  [][]ent{debianPython()},
			lim:     Limits{MaxReadBytes: 1000},
			wantErr: ErrLimit,
			errHas:  []string{"1000 bytes"},
		},
		{
			name:    "an unknown architecture",
			arch:    "mips",
			layers:  [][]ent{debianPython()},
			wantErr: ErrArch,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			arch := tc.arch
			if arch == "" {
				arch = "amd64"
			}
			img := imageOf(t, arch, tc.cfg, tc.layers...)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			got, f, err := inspect(ctx, img, tc.lim)
			if tc.wantErr != nil {
				t.Logf("error: %v", err)
				if !errors.Is(err, tc.wantErr) {
					t.Fatalf("err = %v, want %v", err, tc.wantErr)
				}
				for _, s := range tc.errHas {
					if !strings.Contains(err.Error(), s) {
						t.Errorf("error %q does not say %q", err, s)
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(got.DistInfo) != len(got.Packages) {
				t.Errorf("DistInfo %v does not match Packages %v", got.DistInfo, got.Packages)
			}
			for name := range got.Packages {
				if got.DistInfo[name] == "" {
					t.Errorf("no DistInfo for %s", name)
				}
			}
			for name, p := range tc.distInfo {
				if got.DistInfo[name] != p {
					t.Errorf("DistInfo[%s] = %q, want %q", name, got.DistInfo[name], p)
				}
			}
			got.DistInfo = nil
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got  %+v\nwant %+v", got, tc.want)
			}
			if second := f.opened > len(tc.layers); second != tc.secondPass {
				t.Errorf("opened %d layer streams for %d layers, want a second pass: %v", f.opened, len(tc.layers), tc.secondPass)
			}
		})
	}
}

func copyMap(m map[string]string) map[string]string {
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

func TestInspectStopsWhenCancelled(t *testing.T) {
	img := imageOf(t, "amd64", env(stdPath), debianPython())
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := Inspect(ctx, img); !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
}

// The package reads images only: it must never look at the host's files,
// which a base's absolute symlinks name.
func TestNoHostFilesystemAccess(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	checked := 0
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		checked++
		for _, imp := range f.Imports {
			switch p, _ := strconv.Unquote(imp.Path.Value); p {
			case "os", "os/exec", "path/filepath", "syscall", "io/ioutil":
				t.Errorf("%s imports %s", name, p)
			}
		}
	}
	if checked == 0 {
		t.Fatal("no source files found")
	}
}
