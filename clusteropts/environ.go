package clusteropts

import (
	"fmt"
	"regexp"
	"sort"
	"strings"
)

// Bounds of Options.Environ: enough for a handful of Dask settings, small
// enough to fit a cloud's user data and metadata with room to spare.
const (
	MaxEnviron         = 64
	MaxEnvironName     = 128
	MaxEnvironValue    = 4096
	maxEnvironTotalLen = 32 << 10
)

var environName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// Names a request may not set: what the members' boot, TLS, the
// gateway's marking of its members and the dynamic loader rely on.
// Compared in upper case.
var (
	reservedNames = map[string]bool{
		"PATH": true, "HOME": true, "USER": true, "SHELL": true, "IFS": true,
		"LD_PRELOAD": true, "LD_LIBRARY_PATH": true, "LD_AUDIT": true,
		"PYTHONPATH": true, "PYTHONSTARTUP": true, "PYTHONHOME": true,
		"PYTHONUSERBASE": true, "PYTHONEXECUTABLE": true, "PYTHONINSPECT": true,
		"PYTHONUNBUFFERED": true, "PYTHONSAFEPATH": true, "PYTHONNOUSERSITE": true,
		"PYTHONPLATLIBDIR": true, "PYTHONWARNINGS": true, "PYTHONBREAKPOINT": true,
		"PYTHONDEVMODE": true, "PYTHONMALLOC": true, "PYTHONDONTWRITEBYTECODE": true,
		"BASH_ENV": true, "ENV": true,
		"DASK_CONFIG": true, "DASK_ROOT_CONFIG": true,
		"AWS_CONTAINER_CREDENTIALS_RELATIVE_URI": true, "AWS_CONTAINER_CREDENTIALS_FULL_URI": true,
		"ECS_CONTAINER_METADATA_URI": true, "ECS_CONTAINER_METADATA_URI_V4": true,
	}
	reservedPrefixes = []string{
		"GATEWAY_",                               // the gateway's own settings and member markers
		"DASK_GATEWAY_",                          // the dask-gateway client and members' settings
		"DASK_DISTRIBUTED__COMM__",               // TLS, the comm the gateway proxies
		"DASK_DISTRIBUTED__SCHEDULER__DASHBOARD", // the dashboard the gateway publishes
		"DASK_DISTRIBUTED__DASHBOARD__",
		"DASK_INTERNAL_",
		"LD_",
		"DYLD_",
	}
)

// CheckEnviron says whether env may be a cluster's Environ: every problem
// at once, each naming the variable (never its value) and what to fix.
func CheckEnviron(env map[string]string) []string {
	if len(env) > MaxEnviron {
		return []string{fmt.Sprintf("environ sets %d variables; at most %d are allowed", len(env), MaxEnviron)}
	}
	names := make([]string, 0, len(env))
	for k := range env {
		names = append(names, k)
	}
	sort.Strings(names)
	var problems []string
	total := 0
	for _, k := range names {
		v := env[k]
		total += len(k) + len(v)
		switch {
		case len(k) > MaxEnvironName:
			problems = append(problems, fmt.Sprintf("environ variable %.40q...: the name is longer than %d characters", k, MaxEnvironName))
		case !environName.MatchString(k):
			problems = append(problems, fmt.Sprintf("environ variable %q: a name is letters, digits and _, not starting with a digit", k))
		case reserved(k):
			problems = append(problems, fmt.Sprintf("environ variable %s is reserved (the gateway, TLS, the dashboard or the interpreter's start rely on it); leave it out", k))
		case len(v) > MaxEnvironValue:
			problems = append(problems, fmt.Sprintf("environ variable %s: the value is longer than %d bytes", k, MaxEnvironValue))
		case strings.ContainsAny(v, "\x00\n\r"):
			// Cloud members read their variables as lines of Docker's
			// --env-file: a value is one line on every backend.
			problems = append(problems, fmt.Sprintf("environ variable %s: the value holds a line break or NUL byte; give one line", k))
		}
	}
	if total > maxEnvironTotalLen {
		problems = append(problems, fmt.Sprintf("environ holds %d bytes of names and values; at most %d are allowed", total, maxEnvironTotalLen))
	}
	return problems
}

func reserved(name string) bool {
	u := strings.ToUpper(name)
	if reservedNames[u] {
		return true
	}
	for _, p := range reservedPrefixes {
		if strings.HasPrefix(u, p) {
			return true
		}
	}
	return false
}

// DaskConfigVar is the environment variable that sets a Dask config value
// given by its dotted key (distributed.worker.memory.target gives
// DASK_DISTRIBUTED__WORKER__MEMORY__TARGET), as Dask reads its
// configuration from DASK_-prefixed variables. Dask matches keys with -
// and _ alike; the name keeps _.
func DaskConfigVar(key string) (string, error) {
	parts := strings.Split(key, ".")
	for _, p := range parts {
		if p == "" {
			return "", fmt.Errorf("dask config key %q: want a dotted key such as distributed.worker.memory.target", key)
		}
	}
	name := "DASK_" + strings.ToUpper(strings.ReplaceAll(strings.Join(parts, "__"), "-", "_"))
	if !environName.MatchString(name) {
		return "", fmt.Errorf("dask config key %q: a key is letters, digits, - and _ between dots", key)
	}
	return name, nil
}
