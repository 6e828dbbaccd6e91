package baseinfo

import (
	"context"
	"errors"
	"fmt"
	"path"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"unicode"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// Info is what Inspect found in a base image. Paths are absolute paths in
// the image.
type Info struct {
	Python      string // "3.11"
	Interpreter string // the python3.X executable that entry points and shebangs use
	// Prefix is the installation scheme's prefix (where .data/data goes):
	// /usr/local for Debian's python and python:3.x images, the conda
	// prefix, the venv.
	Prefix       string
	SitePackages string // purelib = platlib: where pip installs
	Scripts      string // where pip puts console scripts
	// Headers is the directory pip puts a wheel's .data/headers under
	// (followed by the distribution's name): <prefix>/include/python3.X,
	// <venv>/include/site/python3.X in a venv, and, as pip does with
	// Debian's scheme, /usr/include/python3.X for Debian's python.
	Headers string
	Glibc   string // "2.36"; "" for musl or no libc
	Arch    string // "x86_64", "aarch64", ... (uname -m, as in wheel tags)
	Conda   string // the conda prefix when the interpreter's prefix has conda-meta
	Venv    string // the venv when the interpreter runs in one
	// Packages holds the installed distributions, PEP 503 name -> version,
	// from every site directory on the interpreter's default sys.path (the
	// first one found wins, as for importlib.metadata).
	Packages map[string]string
	// DistInfo holds, for each of Packages, the path of the .dist-info or
	// .egg-info it was read from: a layer that installs another version
	// into the same site directory has to white that one out (and the
	// files its RECORD lists).
	DistInfo map[string]string
	// CondaPackages holds the packages of the conda environment (from
	// conda-meta/<name>-<version>-<build>.json), by name.
	CondaPackages map[string]CondaPackage
	// SysPath lists the site directories that exist, in sys.path order.
	SysPath []string
	// ExternallyManaged says the base's python carries PEP 668's marker:
	// pip itself would refuse to install outside a venv without
	// --break-system-packages. Installing into SitePackages is what that
	// option does.
	ExternallyManaged bool
}

// CondaPackage is one package of a conda environment.
type CondaPackage struct {
	Version string
	Build   string
}

// Limits bound what Inspect reads from a base image.
type Limits struct {
	MaxEntries   int   // tar entries over all layers (and directories they imply); default 2,000,000
	MaxReadBytes int64 // bytes of file contents read; default 64 MiB
}

func (l Limits) withDefaults() Limits {
	if l.MaxEntries <= 0 {
		l.MaxEntries = 2_000_000
	}
	if l.MaxReadBytes <= 0 {
		l.MaxReadBytes = 64 << 20
	}
	return l
}

// Image labels that override detection (see the package documentation).
const (
	LabelInterpreter  = "io.gateway.python.interpreter"
	LabelVersion      = "io.gateway.python.version"
	LabelSitePackages = "io.gateway.python.site-packages"
	LabelScripts      = "io.gateway.python.scripts"
	LabelPrefix       = "io.gateway.python.prefix"
	LabelGlibc        = "io.gateway.glibc"
)

// More errors a caller can match with errors.Is.
var (
	ErrNoPython = errors.New("no python found in the base image")
	ErrScheme   = errors.New("cannot tell where pip installs in the base image")
	ErrLabel    = errors.New("bad base image label")
	ErrGlibc    = errors.New("cannot tell the base image's glibc")
	ErrArch     = errors.New("unknown base image architecture")
)

// Docker's PATH for a container whose image sets none.
const defaultPATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

var (
	pythonCmd     = regexp.MustCompile(`^python(3(\.\d+)?)?$`)
	pythonVersion = regexp.MustCompile(`^python(3\.\d+)$`)
	versionRe     = regexp.MustCompile(`^3\.\d+$`)
	glibcLabelRe  = regexp.MustCompile(`^\d+\.\d+$`)
	cfgVersionRe  = regexp.MustCompile(`^(3\.\d+)(\.|$)`)
)

// Inspect reads img (its config and layers, nothing else) and tells where
// pip would install packages in it and what is there, within the default
// Limits.
func Inspect(ctx context.Context, img v1.Image) (Info, error) {
	return InspectLimits(ctx, img, Limits{})
}

// InspectLimits is Inspect with other limits (zero fields take defaults).
func InspectLimits(ctx context.Context, img v1.Image, lim Limits) (Info, error) {
	info, _, err := inspect(ctx, img, lim)
	return info, err
}

func inspect(ctx context.Context, img v1.Image, lim Limits) (Info, *fsys, error) {
	lim = lim.withDefaults()
	cf, err := img.ConfigFile()
	if err != nil {
		return Info{}, nil, fmt.Errorf("reading the base image's config: %w", err)
	}
	labels, err := readLabels(cf.Config.Labels)
	if err != nil {
		return Info{}, nil, err
	}
	arch, err := archName(cf.Architecture, cf.Variant)
	if err != nil {
		return Info{}, nil, err
	}
	layers, err := img.Layers()
	if err != nil {
		return Info{}, nil, fmt.Errorf("listing the base image's layers: %w", err)
	}
	f, err := loadFS(ctx, layers, lim)
	if err != nil {
		return Info{}, nil, fmt.Errorf("reading the base image: %w", err)
	}
	d := &detector{f: f, cfg: cf.Config, env: envMap(cf.Config.Env), labels: labels}
	info, err := d.detect(ctx)
	if err != nil {
		return Info{}, f, err
	}
	info.Arch = arch
	return info, f, nil
}

type labelSet struct {
	interpreter, version, site, scripts, prefix, glibc string
	glibcSet                                           bool
}

func readLabels(m map[string]string) (labelSet, error) {
	var l labelSet
	for _, p := range []struct {
		key string
		dst *string
	}{
		{LabelInterpreter, &l.interpreter},
		{LabelSitePackages, &l.site},
		{LabelScripts, &l.scripts},
		{LabelPrefix, &l.prefix},
	} {
		v, ok := m[p.key]
		if !ok {
			continue
		}
		if err := checkPath(v, p.key == LabelInterpreter); err != nil {
			return l, fmt.Errorf("%w %s=%q: %v", ErrLabel, p.key, v, err)
		}
		*p.dst = v
	}
	if v, ok := m[LabelVersion]; ok {
		if !versionRe.MatchString(v) {
			return l, fmt.Errorf("%w %s=%q: want a version like 3.11", ErrLabel, LabelVersion, v)
		}
		l.version = v
	}
	if v, ok := m[LabelGlibc]; ok {
		switch {
		case v == "none":
		case glibcLabelRe.MatchString(v):
			l.glibc = v
		default:
			return l, fmt.Errorf("%w %s=%q: want a release like 2.36, or none", ErrLabel, LabelGlibc, v)
		}
		l.glibcSet = true
	}
	return l, nil
}

// checkPath accepts clean absolute paths without control characters (they
// end up in shebangs, RECORD files and tar names); an interpreter path must
// also have no spaces, which a shebang cannot carry.
func checkPath(p string, noSpace bool) error {
	if !strings.HasPrefix(p, "/") || path.Clean(p) != p {
		return errors.New("want a clean absolute path")
	}
	for _, r := range p {
		if unicode.IsControl(r) || (noSpace && unicode.IsSpace(r)) {
			return errors.New("has a space or control character")
		}
	}
	return nil
}

func archName(arch, variant string) (string, error) {
	switch arch {
	case "amd64":
		return "x86_64", nil
	case "arm64":
		return "aarch64", nil
	case "386":
		return "i686", nil
	case "ppc64le", "s390x", "riscv64":
		return arch, nil
	case "arm":
		switch variant {
		case "v6":
			return "armv6l", nil
		case "v7", "":
			return "armv7l", nil
		}
	}
	return "", fmt.Errorf("%w: %q (variant %q)", ErrArch, arch, variant)
}

func envMap(env []string) map[string]string {
	m := map[string]string{}
	for _, kv := range env {
		if k, v, ok := strings.Cut(kv, "="); ok {
			m[k] = v
		}
	}
	return m
}

type detector struct {
	f      *fsys
	cfg    v1.Config
	env    map[string]string
	labels labelSet
}

// pythonFile is an interpreter found in the image.
type pythonFile struct {
	invoked string // the path as named (PATH entry, command or label)
	real    string // the executable, symlinks resolved
	version string // from a python3.X name on the way, or ""
}

func (d *detector) pathDirs() []string {
	p, ok := d.env["PATH"]
	if !ok {
		p = defaultPATH
	}
	var dirs []string
	for _, dir := range strings.Split(p, ":") {
		if strings.HasPrefix(dir, "/") {
			dirs = append(dirs, path.Clean(dir))
		}
	}
	return dirs
}

// tryPython says whether p is an executable file in the image.
func (d *detector) tryPython(p string) (pythonFile, bool, error) {
	real, n, err := d.f.stat(p)
	if err != nil {
		return pythonFile{}, false, fmt.Errorf("%w: following %s: %w", ErrNoPython, p, err)
	}
	if n == nil || n.typ != typeFile || n.mode&0o111 == 0 {
		return pythonFile{}, false, nil
	}
	v, err := d.chainVersion(p, real, n)
	if err != nil {
		return pythonFile{}, false, err
	}
	return pythonFile{invoked: p, real: real, version: v}, true, nil
}

// chainVersion finds the version in the names from p to its real file: the
// python3.X nearest to the real file; else a python3.X beside the real
// file that is the same file (by symlink or hard link).
func (d *detector) chainVersion(p, real string, n *node) (string, error) {
	version := ""
	cur := p
	for i := 0; i <= maxSymlinkHops; i++ {
		if m := pythonVersion.FindStringSubmatch(path.Base(cur)); m != nil {
			version = m[1]
		}
		dir, target, ok, err := d.f.link(cur)
		if err != nil || !ok {
			break
		}
		if strings.HasPrefix(target, "/") {
			cur = path.Clean(target)
		} else {
			cur = path.Join(dir, target)
		}
	}
	if version != "" {
		return version, nil
	}
	dir, names, err := d.f.readDir(path.Dir(real))
	if err != nil {
		return "", err
	}
	for _, name := range names {
		m := pythonVersion.FindStringSubmatch(name)
		if m == nil {
			continue
		}
		r, sn, err := d.f.stat(path.Join(dir, name))
		if err == nil && sn != nil && (r == real || (sn.layer == n.layer && sn.tarName == n.tarName)) {
			return m[1], nil
		}
	}
	return "", nil
}

func (d *detector) command() string {
	if len(d.cfg.Entrypoint) > 0 {
		return d.cfg.Entrypoint[0]
	}
	if len(d.cfg.Cmd) > 0 {
		return d.cfg.Cmd[0]
	}
	return ""
}

func (d *detector) findPython() (pythonFile, error) {
	if p := d.labels.interpreter; p != "" {
		py, ok, err := d.tryPython(p)
		if err != nil {
			return py, err
		}
		if !ok {
			return py, fmt.Errorf("%w %s=%s: not an executable file in the image", ErrLabel, LabelInterpreter, p)
		}
		return py, nil
	}
	dirs := d.pathDirs()
	var tried []string
	if cmd := d.command(); pythonCmd.MatchString(path.Base(cmd)) {
		var cands []string
		if strings.HasPrefix(cmd, "/") {
			cands = []string{path.Clean(cmd)}
		} else if !strings.Contains(cmd, "/") {
			for _, dir := range dirs {
				cands = append(cands, path.Join(dir, cmd))
			}
		}
		for _, c := range cands {
			tried = append(tried, c)
			if py, ok, err := d.tryPython(c); err != nil || ok {
				return py, err
			}
		}
	}
	for _, dir := range dirs {
		cands := []string{path.Join(dir, "python3")}
		_, names, err := d.f.readDir(dir)
		if err != nil {
			return pythonFile{}, fmt.Errorf("%w: reading PATH directory %s: %w", ErrNoPython, dir, err)
		}
		var minors []int
		for _, name := range names {
			if m := pythonVersion.FindStringSubmatch(name); m != nil {
				minor, _ := strconv.Atoi(strings.TrimPrefix(m[1], "3."))
				minors = append(minors, minor)
			}
		}
		sort.Sort(sort.Reverse(sort.IntSlice(minors)))
		for _, m := range minors {
			cands = append(cands, path.Join(dir, fmt.Sprintf("python3.%d", m)))
		}
		for _, c := range cands {
			if py, ok, err := d.tryPython(c); err != nil || ok {
				return py, err
			}
		}
		tried = append(tried, path.Join(dir, "python3[.X]"))
	}
	return pythonFile{}, fmt.Errorf("%w: looked for the image's command naming python, then python3 or python3.X in each PATH directory (%s); if the image has one elsewhere, the label %s can name it (and %s, %s, %s the rest)",
		ErrNoPython, strings.Join(tried, ", "), LabelInterpreter, LabelVersion, LabelSitePackages, LabelScripts)
}

// scheme is where pip installs, as detected.
type scheme struct {
	prefix, site, scripts, headers string
	interpreter                    string
	conda, venv                    string
	sysPath                        []string
	externallyManaged              bool
}

func (d *detector) detect(ctx context.Context) (Info, error) {
	py, err := d.findPython()
	if err != nil {
		return Info{}, err
	}
	version := py.version
	if d.labels.version != "" {
		version = d.labels.version
	}
	// A venv: pyvenv.cfg beside the executable's directory, as site.py
	// looks for it (from the path as invoked, symlinks not resolved).
	exeDir := path.Dir(py.invoked)
	venv, cfg := "", map[string]string{}
	for _, c := range []string{path.Join(exeDir, "pyvenv.cfg"), path.Join(path.Dir(exeDir), "pyvenv.cfg")} {
		_, ok, err := d.f.isFile(c)
		if err != nil {
			return Info{}, fmt.Errorf("%w: %w", ErrScheme, err)
		}
		if ok {
			venv = path.Dir(exeDir)
			if cfg, err = d.readVenvCfg(ctx, c); err != nil {
				return Info{}, err
			}
			break
		}
	}
	if version == "" {
		if m := cfgVersionRe.FindStringSubmatch(cfg["version"] + cfg["version_info"]); m != nil {
			version = m[1]
		}
	}
	if version == "" {
		return Info{}, fmt.Errorf("%w: found %s (%s) but no python3.X name leads to it; the label %s can give the version",
			ErrNoPython, py.invoked, py.real, LabelVersion)
	}

	var s scheme
	var schemeErr error
	if venv != "" {
		s, schemeErr = d.venvScheme(ctx, py, venv, version, cfg)
	} else {
		s, schemeErr = d.systemScheme(ctx, py, version)
	}
	if schemeErr != nil {
		// Only a scheme that cannot be read is left to the labels; a
		// loop, a limit or a layer that cannot be read is an error.
		if !errors.Is(schemeErr, ErrScheme) || errors.Is(schemeErr, ErrSymlinkLoop) {
			return Info{}, schemeErr
		}
		s.prefix, s.site, s.scripts, s.headers = "", "", "", ""
	}

	info := Info{
		Python:            version,
		Interpreter:       s.interpreter,
		Prefix:            s.prefix,
		SitePackages:      s.site,
		Scripts:           s.scripts,
		Headers:           s.headers,
		Conda:             s.conda,
		Venv:              s.venv,
		ExternallyManaged: s.externallyManaged,
	}
	if info.Interpreter == "" {
		info.Interpreter = py.real
	}
	if l := d.labels; l.interpreter != "" {
		info.Interpreter = l.interpreter
	}
	if l := d.labels; l.site != "" {
		info.SitePackages = l.site
	}
	if l := d.labels; l.scripts != "" {
		info.Scripts = l.scripts
	}
	if l := d.labels; l.prefix != "" {
		info.Prefix = l.prefix
		info.Headers = path.Join(l.prefix, "include", "python"+version)
	}
	if info.Prefix == "" && d.labels.scripts != "" && path.Base(d.labels.scripts) == "bin" {
		info.Prefix = path.Dir(d.labels.scripts)
		info.Headers = path.Join(info.Prefix, "include", "python"+version)
	}
	if info.SitePackages == "" || info.Scripts == "" || info.Prefix == "" {
		if schemeErr == nil {
			schemeErr = fmt.Errorf("%w: incomplete labels", ErrScheme)
		}
		return Info{}, fmt.Errorf("%w; the labels %s, %s and %s can say where pip installs", schemeErr, LabelSitePackages, LabelScripts, LabelPrefix)
	}
	if err := checkPath(info.Interpreter, true); err != nil {
		return Info{}, fmt.Errorf("%w: the interpreter %q %v (the label %s can name another)", ErrScheme, info.Interpreter, err, LabelInterpreter)
	}
	for _, p := range []string{info.SitePackages, info.Scripts, info.Prefix} {
		if err := checkPath(p, false); err != nil {
			return Info{}, fmt.Errorf("%w: %q %v", ErrScheme, p, err)
		}
	}

	// sys.path: PYTHONPATH, then the site directories, with the labelled
	// site-packages in front of them.
	var sysPath []string
	for _, p := range strings.Split(d.env["PYTHONPATH"], ":") {
		if strings.HasPrefix(p, "/") {
			sysPath = append(sysPath, path.Clean(p))
		}
	}
	if d.labels.site != "" {
		sysPath = append(sysPath, d.labels.site)
	}
	sysPath = append(sysPath, s.sysPath...)
	if info.SysPath, info.Packages, info.DistInfo, err = d.packages(ctx, sysPath); err != nil {
		return Info{}, err
	}
	if info.Conda != "" {
		if info.CondaPackages, err = d.condaPackages(info.Conda); err != nil {
			return Info{}, err
		}
	}
	if info.Glibc, err = d.glibc(ctx); err != nil {
		return Info{}, err
	}
	return info, nil
}

func (d *detector) readVenvCfg(ctx context.Context, p string) (map[string]string, error) {
	_, n, err := d.f.stat(p)
	if err != nil || n == nil {
		return nil, fmt.Errorf("%w: reading %s: %v", ErrScheme, p, err)
	}
	w := want{n: n, kind: kindSmall}
	if err := d.f.fetch(ctx, []want{w}); err != nil {
		return nil, fmt.Errorf("reading %s: %w", p, err)
	}
	cfg := map[string]string{}
	for _, line := range strings.Split(string(d.f.content(w)), "\n") {
		if k, v, ok := strings.Cut(line, "="); ok {
			cfg[strings.ToLower(strings.TrimSpace(k))] = strings.TrimSpace(v)
		}
	}
	return cfg, nil
}

// prefixOf finds the prefix of a real executable as CPython's getpath does:
// the first directory from the executable's up that has lib/python3.X.
func (d *detector) prefixOf(real, version string) (string, error) {
	dir := path.Dir(real)
	for i := 0; i < 256; i++ {
		_, ok, err := d.f.isDir(path.Join(dir, "lib", "python"+version))
		if err != nil {
			return "", fmt.Errorf("%w: %w", ErrScheme, err)
		}
		if ok {
			return dir, nil
		}
		if dir == "/" {
			break
		}
		dir = path.Dir(dir)
	}
	return "", fmt.Errorf("%w: no lib/python%s in any directory above %s", ErrScheme, version, real)
}

// schemeMarks reads which patched scheme the stdlib's sysconfig has
// (source, package or compiled): "" for upstream, or a marker.
func (d *detector) schemeMarks(ctx context.Context, stdlib, version string) (string, error) {
	cands := []string{path.Join(stdlib, "sysconfig.py"), path.Join(stdlib, "sysconfig", "__init__.py")}
	tag := "cpython-3" + strings.TrimPrefix(version, "3.")
	cands = append(cands,
		path.Join(stdlib, "__pycache__", "sysconfig."+tag+".pyc"),
		path.Join(stdlib, "sysconfig", "__pycache__", "__init__."+tag+".pyc"),
		path.Join(stdlib, "sysconfig.pyc"),
		path.Join(stdlib, "sysconfig", "__init__.pyc"))
	for _, c := range cands {
		_, n, err := d.f.stat(c)
		if err != nil {
			return "", fmt.Errorf("%w: %w", ErrScheme, err)
		}
		if n == nil || n.typ != typeFile {
			continue
		}
		w := want{n: n, kind: kindScheme}
		if err := d.f.fetch(ctx, []want{w}); err != nil {
			return "", fmt.Errorf("reading %s: %w", c, err)
		}
		marks := strings.TrimPrefix(string(d.f.content(w)), "scanned:")
		switch {
		case strings.Contains(marks, "rpm_prefix"):
			return "rpm_prefix", nil
		case strings.Contains(marks, "posix_local"):
			return "posix_local", nil
		}
		return "", nil
	}
	return "", fmt.Errorf("%w: python%s's sysconfig is not in %s, so its installation scheme is unknown", ErrScheme, version, stdlib)
}

// siteDirs lists the global site directories of a (non-venv) prefix in
// site.getsitepackages' order.
func siteDirs(prefix, version, marks string) []string {
	py := "python" + version
	if marks == "posix_local" {
		return []string{
			path.Join(prefix, "local/lib", py, "dist-packages"),
			path.Join(prefix, "lib/python3/dist-packages"),
			path.Join(prefix, "lib", py, "dist-packages"),
		}
	}
	return []string{path.Join(prefix, "lib", py, "site-packages")}
}

// samePlatlib refuses a prefix whose lib64/python3.X is another directory
// than lib/python3.X: packages with compiled parts would go there.
func (d *detector) samePlatlib(prefix, version string) error {
	lib, _, err := d.f.isDir(path.Join(prefix, "lib", "python"+version))
	if err != nil {
		return fmt.Errorf("%w: %w", ErrScheme, err)
	}
	lib64, ok, err := d.f.isDir(path.Join(prefix, "lib64", "python"+version))
	if err != nil {
		return fmt.Errorf("%w: %w", ErrScheme, err)
	}
	if ok && lib64 != lib {
		return fmt.Errorf("%w: %s has both lib and lib64/python%s, so pure and compiled packages may go to different places", ErrScheme, prefix, version)
	}
	return nil
}

func (d *detector) userSite(version string) []string {
	if _, off := d.env["PYTHONNOUSERSITE"]; off {
		return nil
	}
	home := d.env["HOME"]
	if home == "" {
		switch strings.SplitN(d.cfg.User, ":", 2)[0] {
		case "", "root", "0":
			home = "/root"
		default:
			return nil
		}
	}
	if !strings.HasPrefix(home, "/") {
		return nil
	}
	return []string{path.Join(home, ".local/lib", "python"+version, "site-packages")}
}

func (d *detector) systemScheme(ctx context.Context, py pythonFile, version string) (scheme, error) {
	s := scheme{interpreter: py.real}
	prefix, err := d.prefixOf(py.real, version)
	if err != nil {
		return s, err
	}
	stdlib := path.Join(prefix, "lib", "python"+version)
	_, s.externallyManaged, err = d.f.isFile(path.Join(stdlib, "EXTERNALLY-MANAGED"))
	if err != nil {
		return s, fmt.Errorf("%w: %w", ErrScheme, err)
	}
	py3 := "python" + version
	s.sysPath = d.userSite(version)
	if _, ok, err := d.f.isDir(path.Join(prefix, "conda-meta")); err != nil {
		return s, fmt.Errorf("%w: %w", ErrScheme, err)
	} else if ok {
		s.conda = prefix
		s.sysPath = append(s.sysPath, siteDirs(prefix, version, "")...)
		if err := d.samePlatlib(prefix, version); err != nil {
			return s, err
		}
		s.prefix, s.site, s.scripts = prefix, path.Join(stdlib, "site-packages"), path.Join(prefix, "bin")
		s.headers = path.Join(prefix, "include", py3)
		return s, nil
	}
	marks, err := d.schemeMarks(ctx, stdlib, version)
	if err != nil {
		return s, err
	}
	s.sysPath = append(s.sysPath, siteDirs(prefix, version, marks)...)
	switch marks {
	case "rpm_prefix":
		return s, fmt.Errorf("%w: python%s at %s has Fedora's rpm_prefix scheme, whose purelib and platlib differ", ErrScheme, version, py.real)
	case "posix_local":
		// Debian's sysconfig: posix_local unless the image asks for
		// the packaging layout.
		switch d.env["DEB_PYTHON_INSTALL_LAYOUT"] {
		case "deb", "deb_system":
			s.prefix, s.site, s.scripts = prefix, path.Join(prefix, "lib/python3/dist-packages"), path.Join(prefix, "bin")
		default:
			local := path.Join(prefix, "local")
			s.prefix, s.site, s.scripts = local, path.Join(local, "lib", py3, "dist-packages"), path.Join(local, "bin")
		}
		// The include directory is installed_base's in both schemes.
		s.headers = path.Join(prefix, "include", py3)
		return s, nil
	}
	if err := d.samePlatlib(prefix, version); err != nil {
		return s, err
	}
	s.prefix, s.site, s.scripts = prefix, path.Join(stdlib, "site-packages"), path.Join(prefix, "bin")
	s.headers = path.Join(prefix, "include", py3)
	return s, nil
}

func (d *detector) venvScheme(ctx context.Context, py pythonFile, venv, version string, cfg map[string]string) (scheme, error) {
	py3 := "python" + version
	s := scheme{
		venv: venv, prefix: venv, scripts: path.Join(venv, "bin"),
		site:    path.Join(venv, "lib", py3, "site-packages"),
		headers: path.Join(venv, "include", "site", py3),
	}
	// Scripts must run the venv's python (sys.prefix comes from where it
	// was invoked), not the base's real executable.
	s.interpreter = py.invoked
	cand := path.Join(path.Dir(py.invoked), py3)
	if _, ok, err := d.f.isFile(cand); err != nil {
		return s, fmt.Errorf("%w: %w", ErrScheme, err)
	} else if ok {
		s.interpreter = cand
	}
	if _, ok, err := d.f.isDir(path.Join(venv, "lib", py3)); err != nil {
		return s, fmt.Errorf("%w: %w", ErrScheme, err)
	} else if !ok {
		return s, fmt.Errorf("%w: the venv %s has no lib/%s", ErrScheme, venv, py3)
	}
	if err := d.samePlatlib(venv, version); err != nil {
		return s, err
	}
	s.sysPath = []string{s.site}
	if !strings.EqualFold(cfg["include-system-site-packages"], "true") {
		return s, nil
	}
	// The base's global site directories follow the venv's.
	base := py.real
	if strings.HasPrefix(base, venv+"/") {
		if home := cfg["home"]; strings.HasPrefix(home, "/") {
			r, ok, err := d.f.isFile(path.Join(home, py3))
			if err != nil {
				return s, fmt.Errorf("%w: %w", ErrScheme, err)
			}
			if ok {
				base = r
			}
		}
	}
	prefix, err := d.prefixOf(base, version)
	if err != nil {
		return s, nil // the venv's own packages are still known
	}
	marks, err := d.schemeMarks(ctx, path.Join(prefix, "lib", py3), version)
	if err != nil && errors.Is(err, ErrLimit) {
		return s, err
	}
	s.sysPath = append(s.sysPath, siteDirs(prefix, version, marks)...)
	return s, nil
}

// packages reads the distributions in the site directories that exist, in
// order; the first of a name wins.
func (d *detector) packages(ctx context.Context, dirs []string) ([]string, map[string]string, map[string]string, error) {
	type dist struct {
		dir, entry string
		w          want
	}
	var dists []dist
	var wants []want
	var exist []string
	seen := map[string]bool{}
	for _, dir := range dirs {
		real, ok, err := d.f.isDir(dir)
		if err != nil {
			return nil, nil, nil, fmt.Errorf("reading site directory %s: %w", dir, err)
		}
		if !ok || seen[real] {
			continue
		}
		seen[real] = true
		exist = append(exist, dir)
		_, names, err := d.f.readDir(real)
		if err != nil {
			return nil, nil, nil, err
		}
		for _, name := range names {
			var file string
			switch {
			case strings.HasSuffix(name, ".dist-info"):
				file = path.Join(real, name, "METADATA")
			case strings.HasSuffix(name, ".egg-info"):
				file = path.Join(real, name)
				if _, ok, _ := d.f.isDir(file); ok {
					file = path.Join(file, "PKG-INFO")
				}
			default:
				continue
			}
			_, n, err := d.f.stat(file)
			if err != nil {
				return nil, nil, nil, fmt.Errorf("reading %s: %w", file, err)
			}
			if n == nil || n.typ != typeFile {
				continue
			}
			w := want{n: n, kind: kindHeaders}
			dists = append(dists, dist{dir: real, entry: name, w: w})
			wants = append(wants, w)
		}
	}
	if err := d.f.fetch(ctx, wants); err != nil {
		return nil, nil, nil, fmt.Errorf("reading installed distributions: %w", err)
	}
	pkgs, where := map[string]string{}, map[string]string{}
	for _, ds := range dists {
		name, version := parseMetadata(d.f.content(ds.w))
		if name == "" || version == "" {
			n, v := nameFromEntry(ds.entry)
			if name == "" {
				name = n
			}
			if version == "" {
				version = v
			}
		}
		if name == "" || version == "" {
			continue
		}
		key := NormalizeName(name)
		if _, dup := pkgs[key]; !dup {
			pkgs[key] = version
			where[key] = path.Join(ds.dir, ds.entry)
		}
	}
	return exist, pkgs, where, nil
}

func parseMetadata(b []byte) (name, version string) {
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, " ") || strings.HasPrefix(line, "\t") {
			continue // a folded header's continuation
		}
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		v = strings.TrimSpace(v)
		switch strings.ToLower(strings.TrimSpace(k)) {
		case "name":
			if name == "" {
				name = v
			}
		case "version":
			if version == "" {
				version = v
			}
		}
	}
	return name, version
}

// nameFromEntry reads "name-version.dist-info" (or .egg-info, where a
// "-py3.11" may follow the version).
func nameFromEntry(entry string) (string, string) {
	stem := strings.TrimSuffix(strings.TrimSuffix(entry, ".dist-info"), ".egg-info")
	name, rest, ok := strings.Cut(stem, "-")
	if !ok {
		return "", ""
	}
	version, _, _ := strings.Cut(rest, "-")
	return name, version
}

var normRe = regexp.MustCompile(`[-_.]+`)

// NormalizeName is PEP 503's normalised form of a distribution name.
func NormalizeName(name string) string {
	return strings.ToLower(normRe.ReplaceAllString(name, "-"))
}

func (d *detector) condaPackages(prefix string) (map[string]CondaPackage, error) {
	_, names, err := d.f.readDir(path.Join(prefix, "conda-meta"))
	if err != nil {
		return nil, fmt.Errorf("reading %s/conda-meta: %w", prefix, err)
	}
	out := map[string]CondaPackage{}
	for _, n := range names {
		stem, ok := strings.CutSuffix(n, ".json")
		if !ok {
			continue
		}
		// Conda versions and build strings have no "-"; names may.
		i := strings.LastIndex(stem, "-")
		if i <= 0 {
			continue
		}
		j := strings.LastIndex(stem[:i], "-")
		if j <= 0 {
			continue
		}
		out[stem[:j]] = CondaPackage{Version: stem[j+1 : i], Build: stem[i+1:]}
	}
	return out, nil
}

// glibc reads the release from libc.so.6 in the usual library directories
// (any "*-linux-gnu*" multiarch one included).
func (d *detector) glibc(ctx context.Context) (string, error) {
	if d.labels.glibcSet {
		return d.labels.glibc, nil
	}
	var cands []string
	for _, lib := range []string{"/lib", "/usr/lib", "/lib64", "/usr/lib64"} {
		dir, names, err := d.f.readDir(lib)
		if err != nil {
			return "", fmt.Errorf("%w: %w", ErrGlibc, err)
		}
		for _, n := range names {
			if strings.Contains(n, "-linux-gnu") {
				cands = append(cands, path.Join(dir, n, "libc.so.6"))
			}
		}
		cands = append(cands, path.Join(lib, "libc.so.6"))
	}
	for _, c := range cands {
		real, n, err := d.f.stat(c)
		if err != nil {
			return "", fmt.Errorf("%w: %w", ErrGlibc, err)
		}
		if n == nil || n.typ != typeFile {
			continue
		}
		w := want{n: n, kind: kindGlibc}
		if err := d.f.fetch(ctx, []want{w}); err != nil {
			return "", fmt.Errorf("reading %s: %w", real, err)
		}
		if v := string(d.f.content(w)); v != "" {
			return v, nil
		}
		return "", fmt.Errorf("%w: %s has no \"GNU C Library ... release version\" string in its first %d MiB; the label %s can give the release",
			ErrGlibc, real, maxGlibcBytes>>20, LabelGlibc)
	}
	return "", nil
}
