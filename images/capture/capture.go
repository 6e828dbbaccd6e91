// Package capture describes a user's Python environment as an images.Spec
// plus the user's own code as zip files (code parts), either by inspecting
// the interpreter the user's Dask client runs (Capture) or by reading an
// environment file: a pinned requirements file, a conda environment.yml or
// a PEP 751 pylock.toml (FromFile).
//
// User code is what the cluster cannot install from a package index: the
// editable installs of the environment (pip install -e), each as a code part
// named after its distribution, and the plain local modules of a directory
// (Options.Dir), as the code part "local". Code parts are deterministic zip
// files: the same code always gives the same bytes, hence the same digest
// and the same image hash.
package capture

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/gatewayhq/gateway/images"
)

// DefaultMaxCodeBytes is the limit for all code parts together when
// Options.MaxCodeBytes is 0.
const DefaultMaxCodeBytes = 50 << 20

// ProbeTimeout bounds the interpreter probe when the context has no
// deadline of its own.
var ProbeTimeout = time.Minute

// LocalPart is the name of the code part holding Options.Dir's modules.
const LocalPart = "local"

// ErrNoInterpreter is wrapped by the error of Capture, and of FromFile when
// it needs an interpreter, when the Python interpreter cannot be found.
var ErrNoInterpreter = errors.New("no Python interpreter")

// ErrNoDask is wrapped by Capture's error when the interpreter has no Dask
// distributed: it is not the Python a Dask client runs.
var ErrNoDask = errors.New("no Dask distributed")

// Options say what to inspect and how.
type Options struct {
	// Python is the interpreter to inspect: a path, or a name looked up on
	// PATH. "" means "python3" on PATH, then "python".
	Python string
	// Dir is the directory whose plain local modules (*.py files and
	// package directories with an __init__.py, directly in Dir) are user
	// code, the code part "local". "" means no local modules.
	Dir string
	// MaxCodeBytes is the limit for all code zips together; 0 means
	// DefaultMaxCodeBytes (50 MiB).
	MaxCodeBytes int64
	// GPU is "auto" (or ""): from the environment's GPU packages (cupy,
	// cudf, nvidia-*, ...); "yes" or "no" force it.
	GPU string
	// Platform is the image's platform, "linux/amd64" or "linux/arm64"
	// ("amd64", "x86_64", "arm64" and "aarch64" are accepted too).
	// "" means the Linux platform of the inspected interpreter's machine
	// architecture (a macOS or Windows client maps to Linux on the same
	// architecture), or linux/amd64 when no interpreter is inspected.
	Platform string
	// Env are extra "KEY=value" variables for the interpreter, after the
	// process's own environment (PYTHONPATH, for example).
	Env []string
}

// Env is a captured environment.
type Env struct {
	// Spec is the normalised environment; Spec.Code lists the code parts.
	Spec images.Spec
	// Code holds each code part's zip bytes by name; each is in Spec.Code
	// with its digest.
	Code map[string][]byte
	// Interpreter is the interpreter that was inspected (an absolute path),
	// "" when none was.
	Interpreter string
	// Notes are human-readable remarks: which editable packages and local
	// modules became code, what was skipped and why, where the Python
	// version came from.
	Notes []string
}

// settings are the checked options.
type settings struct {
	maxBytes int64
	gpu      string // auto, yes, no
	platform string // "" or a normalised platform
}

func checkOptions(opts Options) (settings, error) {
	s := settings{maxBytes: opts.MaxCodeBytes}
	if s.maxBytes < 0 {
		return settings{}, fmt.Errorf("code size limit %d is negative", opts.MaxCodeBytes)
	}
	if s.maxBytes == 0 {
		s.maxBytes = DefaultMaxCodeBytes
	}
	switch g := strings.ToLower(strings.TrimSpace(opts.GPU)); g {
	case "", "auto":
		s.gpu = "auto"
	case "yes", "no":
		s.gpu = g
	default:
		return settings{}, fmt.Errorf("GPU setting %q is not one of auto, yes, no", opts.GPU)
	}
	if opts.Dir != "" {
		if fi, err := os.Stat(opts.Dir); errors.Is(err, fs.ErrNotExist) {
			return settings{}, fmt.Errorf("code directory %s does not exist", opts.Dir)
		} else if err != nil {
			return settings{}, fmt.Errorf("code directory %s: %w", opts.Dir, err)
		} else if !fi.IsDir() {
			return settings{}, fmt.Errorf("code directory %s is not a directory", opts.Dir)
		}
	}
	if opts.Platform != "" {
		p, ok := linuxPlatform(opts.Platform)
		if !ok {
			return settings{}, fmt.Errorf("platform %q is not one of %s, %s", opts.Platform, images.PlatformAMD64, images.PlatformARM64)
		}
		s.platform = p
	}
	return s, nil
}

// linuxPlatform normalises "linux/amd64"-like platforms and bare
// architectures ("x86_64", "arm64").
func linuxPlatform(p string) (string, bool) {
	p = strings.ToLower(strings.TrimSpace(p))
	p = strings.TrimPrefix(p, "linux/")
	switch p {
	case "amd64", "x86_64", "x64":
		return images.PlatformAMD64, true
	case "arm64", "aarch64", "arm64/v8":
		return images.PlatformARM64, true
	}
	return "", false
}

// imagePlatform is the image platform for a probed one ("linux/x86_64",
// "darwin/arm64", "win32/amd64"), with a note when the client is not Linux.
func imagePlatform(probed string) (platform, note string, err error) {
	osName, arch, _ := strings.Cut(strings.ToLower(probed), "/")
	p, ok := linuxPlatform(arch)
	if !ok {
		return "", "", fmt.Errorf("the client's platform %s has no Linux image (supported: %s, %s)", probed, images.PlatformAMD64, images.PlatformARM64)
	}
	if osName != "linux" {
		note = fmt.Sprintf("the client runs on %s; the image is for %s, the same architecture", probed, p)
	}
	return p, note, nil
}

// Capture inspects the interpreter opts.Python with images.ProbeScript and
// returns its environment: every installed distribution except editable
// installs, pinned (conda's packages and channels too in a conda
// environment), and as code parts each editable install's importable
// packages (named after the distribution) and Options.Dir's local modules
// ("local"). The interpreter must have Dask distributed installed.
func Capture(ctx context.Context, opts Options) (Env, error) {
	set, err := checkOptions(opts)
	if err != nil {
		return Env{}, err
	}
	probe, interp, err := runProbe(ctx, opts.Python, opts.Env)
	if err != nil {
		return Env{}, err
	}
	if !slices.ContainsFunc(probe.Packages, func(p images.ProbePackage) bool { return images.NormalizeName(p.Name) == "distributed" }) {
		return Env{}, fmt.Errorf("the Python at %s has %w installed; pass --python with the interpreter your Dask client runs", interp, ErrNoDask)
	}
	env := Env{Interpreter: interp}
	spec := probe.Spec()
	env.Notes = append(env.Notes, fmt.Sprintf("Python %s and %d packages from %s", probe.Python, len(spec.Packages), interp))
	if probe.Implementation != "" && probe.Implementation != "cpython" {
		env.Notes = append(env.Notes, fmt.Sprintf("the client runs %s; the image runs CPython %s", probe.Implementation, probe.Python))
	}
	if set.platform != "" {
		spec.Platform = set.platform
	} else {
		if err := setPlatform(&spec, &env, probe.Platform, interp); err != nil {
			return Env{}, err
		}
	}
	switch set.gpu {
	case "yes":
		spec.GPU = true
	case "no":
		spec.GPU = false
	default:
		spec.GPU = len(probe.GPUPackages) > 0
		if spec.GPU {
			env.Notes = append(env.Notes, "GPU image: the environment has GPU packages "+strings.Join(probe.GPUPackages, ", "))
		}
	}

	var sources []partSource
	for _, pkg := range probe.Packages {
		if !pkg.Editable {
			continue
		}
		src, notes := editableSource(pkg)
		env.Notes = append(env.Notes, notes...)
		if src != nil {
			sources = append(sources, *src)
		}
	}
	if err := finish(&env, spec, sources, opts.Dir, set.maxBytes); err != nil {
		return Env{}, err
	}
	return env, nil
}

// finish adds the local part of dir to sources, zips every part within the
// size limit, and sets env.Spec (normalised) and env.Code.
func finish(env *Env, spec images.Spec, sources []partSource, dir string, maxBytes int64) error {
	if dir != "" {
		src, notes, err := localSource(dir, sources)
		if err != nil {
			return err
		}
		env.Notes = append(env.Notes, notes...)
		if src != nil {
			sources = append(sources, *src)
		}
	}
	code, parts, err := zipParts(sources, maxBytes)
	if err != nil {
		return err
	}
	spec.Code = parts
	n, err := spec.Normalize()
	if err != nil {
		return err
	}
	env.Spec, env.Code = n, code
	return nil
}

// probePrefix runs before ProbeScript: "python -c" puts the current
// directory first on sys.path, where a local json.py or platform.py would
// shadow the standard library and a stray *.dist-info would look installed.
const probePrefix = "import sys\nif sys.path and sys.path[0] in ('', '.'):\n    del sys.path[0]\n"

// findInterpreter returns the absolute path of the interpreter to run.
func findInterpreter(python string) (string, error) {
	const hint = "pass --python with the interpreter your Dask client runs"
	if python == "" {
		for _, name := range []string{"python3", "python"} {
			if p, err := exec.LookPath(name); err == nil {
				return filepath.Abs(p)
			}
		}
		return "", fmt.Errorf("%w: neither python3 nor python is on PATH; %s", ErrNoInterpreter, hint)
	}
	p, err := exec.LookPath(python)
	if err != nil {
		if strings.ContainsRune(python, filepath.Separator) {
			if _, serr := os.Stat(python); serr != nil {
				return "", fmt.Errorf("%w: the Python interpreter %s does not exist; %s", ErrNoInterpreter, python, hint)
			}
			return "", fmt.Errorf("%w: the Python interpreter %s is not an executable file; %s", ErrNoInterpreter, python, hint)
		}
		return "", fmt.Errorf("%w: the Python interpreter %q is not on PATH; %s", ErrNoInterpreter, python, hint)
	}
	return filepath.Abs(p)
}

// runProbe runs ProbeScript with the interpreter and returns its report and
// the absolute path of the interpreter it describes.
func runProbe(ctx context.Context, python string, extraEnv []string) (images.Probe, string, error) {
	path, err := findInterpreter(python)
	if err != nil {
		return images.Probe{}, "", err
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, ProbeTimeout)
		defer cancel()
	}
	cmd := exec.CommandContext(ctx, path, "-c", probePrefix+images.ProbeScript)
	cmd.Env = append(os.Environ(), extraEnv...)
	cmd.WaitDelay = 5 * time.Second
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		if ctxErr := ctx.Err(); ctxErr != nil {
			if errors.Is(ctxErr, context.DeadlineExceeded) {
				return images.Probe{}, "", fmt.Errorf("inspecting the Python at %s: timed out", path)
			}
			return images.Probe{}, "", fmt.Errorf("inspecting the Python at %s: %w", path, ctxErr)
		}
		msg := strings.TrimSpace(stderr.String())
		if len(msg) > 2000 {
			msg = "..." + msg[len(msg)-2000:]
		}
		if msg != "" {
			msg = ":\n" + msg
		}
		return images.Probe{}, "", fmt.Errorf("inspecting the Python at %s: %v%s", path, err, msg)
	}
	probe, err := images.ParseProbe(stdout.Bytes())
	if err != nil {
		return images.Probe{}, "", fmt.Errorf("inspecting the Python at %s: %w", path, err)
	}
	if filepath.IsAbs(probe.Executable) {
		// The real interpreter behind a shim (pyenv) or a wrapper.
		path = probe.Executable
	}
	return probe, path, nil
}

// setPlatform sets the image platform from the client Python's, noting
// when they differ.
func setPlatform(spec *images.Spec, env *Env, platform, interp string) error {
	p, note, err := imagePlatform(platform)
	if err != nil {
		return fmt.Errorf("the Python at %s: %w; set the platform explicitly", interp, err)
	}
	spec.Platform = p
	if note != "" {
		env.Notes = append(env.Notes, note)
	}
	return nil
}
