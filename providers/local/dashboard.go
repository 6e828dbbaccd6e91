package local

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/gatewayhq/gateway/internal/pyversion"
)

// dashboardProbe asks the interpreter what distributed itself checks before
// it serves the dashboard (distributed/dashboard/core.py): bokeh importable,
// and its version within distributed.versions' MIN_BOKEH_VERSION and, where
// that release has one, MAX_BOKEH_VERSION. It imports distributed.versions
// rather than the dashboard, so that it costs one import of distributed and
// prints nothing but its JSON line.
const dashboardProbe = `
import json, os, sys, sysconfig
out = {"python": sys.executable}
try:
    import distributed, distributed.versions as v
    out["distributed"] = distributed.__version__
    out["min"] = getattr(v, "MIN_BOKEH_VERSION", None)
    out["max"] = getattr(v, "MAX_BOKEH_VERSION", None)
except Exception as e:
    out["error"] = "cannot import distributed: %s" % e
else:
    try:
        import bokeh
        out["bokeh"] = str(bokeh.__version__)
    except Exception:
        out["bokeh"] = None
out["managed"] = sys.prefix == sys.base_prefix and os.path.exists(os.path.join(sysconfig.get_path("stdlib"), "EXTERNALLY-MANAGED"))
print(json.dumps(out))
`

// DashboardSupport is whether a Python's Dask can serve its dashboard.
type DashboardSupport struct {
	// Checked is false when the check could not run (a custom command, or
	// the interpreter failed); then nothing is known and nothing is said.
	Checked     bool
	OK          bool
	Python      string
	Distributed string
	Bokeh       string // "" when bokeh is not importable
	// Requirement is the pip requirement distributed states, e.g.
	// "bokeh>=2.4.2,<=2.4.3".
	Requirement string
	// Problem is one line for people, with the install command; "" when OK.
	Problem string
	// Missing says what is missing, in a few words ("distributed 2022.12.1
	// without bokeh needs bokeh >=2.4.2,<=2.4.3"), and Fix is the command
	// that installs it for this interpreter; both "" when OK. The
	// gateway's dashboard page shows them apart.
	Missing, Fix string
}

type probeResult struct {
	Python      string  `json:"python"`
	Distributed string  `json:"distributed"`
	Min         *string `json:"min"`
	Max         *string `json:"max"`
	Bokeh       *string `json:"bokeh"`
	Managed     bool    `json:"managed"`
	Error       string  `json:"error"`
}

// CheckDashboard runs python once and says whether its distributed can
// serve the dashboard and, if not, how to fix it. env is added to the
// interpreter's environment (nil: the gateway's own).
func CheckDashboard(ctx context.Context, python string, env []string) (DashboardSupport, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, python, "-c", dashboardProbe)
	if env != nil {
		cmd.Env = env
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return DashboardSupport{Python: python}, fmt.Errorf("local provider: check %s for the dashboard: %w: %s", python, err, strings.TrimSpace(stderr.String()))
	}
	var pr probeResult
	if err := json.Unmarshal(lastLine(stdout.Bytes()), &pr); err != nil {
		return DashboardSupport{Python: python}, fmt.Errorf("local provider: check %s for the dashboard: unreadable answer %q: %w", python, stdout.String(), err)
	}
	return pr.support(python), nil
}

func lastLine(b []byte) []byte {
	b = bytes.TrimSpace(b)
	if i := bytes.LastIndexByte(b, '\n'); i >= 0 {
		return b[i+1:]
	}
	return b
}

func (pr probeResult) support(python string) DashboardSupport {
	s := DashboardSupport{Checked: true, Python: python, Distributed: pr.Distributed}
	if pr.Error != "" {
		// The clusters themselves will fail and say why; this check is
		// only about the dashboard.
		s.Checked = false
		return s
	}
	if pr.Bokeh != nil {
		s.Bokeh = *pr.Bokeh
	}
	var bounds []string
	if pr.Min != nil {
		bounds = append(bounds, ">="+*pr.Min)
	}
	if pr.Max != nil {
		bounds = append(bounds, "<="+*pr.Max)
	}
	s.Requirement = "bokeh" + strings.Join(bounds, ",")
	inRange := s.Bokeh != "" &&
		(pr.Min == nil || compareVersions(s.Bokeh, *pr.Min) >= 0) &&
		(pr.Max == nil || compareVersions(s.Bokeh, *pr.Max) <= 0)
	if inRange {
		s.OK = true
		return s
	}
	have := "without bokeh"
	if s.Bokeh != "" {
		have = "with bokeh " + s.Bokeh
	}
	pip := python + " -m pip install"
	if pr.Managed {
		// Debian's interpreter refuses pip (PEP 668) without this, and
		// Debian packages no bokeh that distributed accepts.
		pip += " --user --break-system-packages"
	}
	need := strings.Replace(s.Requirement, "bokeh", "bokeh ", 1)
	s.Missing = fmt.Sprintf("%s has distributed %s %s, and it needs %s", python, pr.Distributed, have, need)
	s.Fix = fmt.Sprintf("%s '%s'", pip, s.Requirement)
	s.Problem = fmt.Sprintf("cluster dashboards will not work: %s; install it: %s", s.Missing, s.Fix)
	return s
}

// DashboardSupport checks, once, whether the Python that runs this
// provider's clusters can serve their dashboards. With a custom command
// the interpreter is unknown and nothing is checked.
func (p *Provider) DashboardSupport(ctx context.Context) DashboardSupport {
	p.dashOnce.Do(func() {
		if p.cfg.Command != "" {
			return
		}
		s, err := CheckDashboard(ctx, p.cfg.Python, nil)
		if err != nil {
			p.log.Warn("cannot check whether clusters can serve their dashboards", "err", err)
		}
		p.dash = s
	})
	return p.dash
}

// dashboardState is the cached answer of DashboardSupport.
type dashboardState struct {
	dashOnce sync.Once
	dash     DashboardSupport
}

// compareVersions orders release numbers such as "2.4.2" and "3.1.0" by
// their numeric parts; a suffix such as "rc1" or ".dev0" is ignored, which
// is close enough for the bounds distributed states (final releases).
func compareVersions(a, b string) int {
	return pyversion.CompareRelease(releaseParts(a), releaseParts(b))
}

func releaseParts(v string) []int {
	var out []int
	for _, f := range strings.Split(v, ".") {
		end := 0
		for end < len(f) && f[end] >= '0' && f[end] <= '9' {
			end++
		}
		if end == 0 {
			break
		}
		n, _ := strconv.Atoi(f[:end])
		out = append(out, n)
		if end < len(f) {
			break
		}
	}
	return out
}
