package gateway_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// module is the import path of this repository's root.
const module = "github.com/gatewayhq/gateway"

// layerRule is one line of the Architecture section of docs/internals.md: the
// packages matching from may not depend on those matching forbid, directly
// or through another package.
type layerRule struct {
	from string // a package pattern: "envs/..." is envs and everything under it, "..." every package
	// fromExcept are packages that from matches but the rule leaves alone.
	fromExcept []string
	forbid     []string // package patterns
	except     []string // patterns that forbid would match but are allowed
	// only, when set, lists the project packages that from may import
	// directly (any other project package is forbidden).
	only []string
	// tests says whether the packages' test files obey the rule too.
	tests bool
	why   string
}

// backendFolders are the backends' packages, each with its fakes and
// helpers.
var backendFolders = []string{"providers/local/...", "providers/docker/...", "providers/ec2/...", "providers/fargate/...", "providers/gce/..."}

// layering is the enforced part of the Architecture section of docs/internals.md.
var layering = []layerRule{
	{from: "internal/...", only: []string{"internal/..."}, tests: true,
		why: "internal/ holds leaf utilities: they import no package of the gateway's domain, and neither do their tests"},
	{from: "clusteropts", only: []string{"internal/..."}, tests: true,
		why: "a cluster's options are shared by the server, the control loop, envs, the client and the CLI: they import only leaf utilities"},
	{from: "api/apitype", only: []string{"images", "bench/schedspec", "quota"},
		forbid: []string{"api", "server/...", "scheduler/...", "proxy/...", "auth/...", "envs/...", "providers/...", "bench", "bench/schedule/..."}, tests: true,
		why: "the wire types import nothing of the server: the client and the CLI link them without it"},
	{from: "envs/...", forbid: []string{"api/...", "scheduler/...", "server/..."}, except: []string{"api/apitype"},
		why: "the environment service is used by the API and the control loop through interfaces they declare; it knows neither; " +
			"its upload tests (package envs_test) drive it through the real API in process"},
	{from: "bench/...", forbid: []string{"api/...", "scheduler/...", "server/..."}, except: []string{"api/apitype"},
		why: "the benchmark runner talks to the gateway over the REST API (client, apitype), as users do; " +
			"its tests may run the real API in process (bench/schedule's grants test)"},
	{from: "...", fromExcept: []string{"cmd/...", "server/...", "api/...", "proxy/...", "integration/...", "console/..."},
		forbid: []string{"api/...", "proxy/...", "server/..."}, except: []string{"api/apitype"},
		why: "the domain (control loop, stores, providers, images, environments, benchmarks, the client) knows neither the HTTP servers nor the composition root; " +
			"tests may assemble the real API (bench/schedule's grants test)"},
	{from: "...", fromExcept: append([]string{"server", "cmd/...", "integration/..."}, backendFolders...), forbid: backendFolders,
		why: "backends register themselves: server's one list (Backends) is the only code that names them; " +
			"the rest of the gateway reaches the configured one through providers.Provider and its providers.Registration"},
	{from: "console/...", forbid: []string{"api/...", "scheduler/...", "proxy/...", "server/...", "envs/...", "bench/..."}, except: []string{"api/apitype", "bench/schedspec", "bench/report"}, tests: true,
		why: "the console reaches the gateway through interfaces it declares (console.Clusters, ...), wired by server, as the API does; " +
			"it answers domain errors with the API's one mapping, which server hands it (api.Explain)"},
	{from: "scheduler/...", forbid: []string{"proxy/..."}, tests: true,
		why: "the control loop writes routes through an interface it declares and verifies members with internal/pki; the proxy reads routes"},
}

// TestLayering fails on an import that the Architecture section of docs/internals.md
// forbids, naming the chain of imports that brings it in.
func TestLayering(t *testing.T) {
	pkgs := goList(t)
	for _, r := range layering {
		for _, v := range r.violations(pkgs) {
			t.Errorf("%s\n\t(rule for %s: %s)", v, r.from, r.why)
		}
	}
}

// TestLayeringRules checks the checker on a made-up graph: a forbidden
// package brought in through another one is found, with its chain; an
// exception and a test-only import (for a rule without tests) are not.
func TestLayeringRules(t *testing.T) {
	pkgs := map[string]*listedPackage{}
	add := func(path string, imports, testImports []string) {
		p := &listedPackage{ImportPath: module + "/" + path, TestImports: prefixed(testImports)}
		p.Imports = prefixed(imports)
		pkgs[p.ImportPath] = p
	}
	add("envs", []string{"images", "api/apitype"}, nil)
	add("images", []string{"quota"}, []string{"scheduler"})
	add("quota", []string{"scheduler"}, nil)
	add("scheduler", nil, nil)
	add("api/apitype", nil, nil)
	add("bench", []string{"api/apitype"}, []string{"api"})
	add("api", nil, nil)
	add("internal/x", []string{"internal/y"}, []string{"store"})
	add("internal/y", nil, nil)
	add("store", nil, nil)

	envs := layerRule{from: "envs/...", forbid: []string{"api/...", "scheduler/..."}, except: []string{"api/apitype"}, tests: true}
	got := envs.violations(pkgs)
	want := []string{"envs imports scheduler (envs -> images -> quota -> scheduler)"}
	if !slices.Equal(got, want) {
		t.Errorf("envs: %q, want %q", got, want)
	}
	bench := layerRule{from: "bench/...", forbid: []string{"api/..."}, except: []string{"api/apitype"}}
	if got := bench.violations(pkgs); len(got) != 0 {
		t.Errorf("bench, tests not checked: %q", got)
	}
	bench.tests = true
	if got, want := bench.violations(pkgs), []string{"bench's tests import api (bench [test] -> api)"}; !slices.Equal(got, want) {
		t.Errorf("bench, tests checked: %q, want %q", got, want)
	}
	internal := layerRule{from: "internal/...", only: []string{"internal/..."}, tests: true}
	if got, want := internal.violations(pkgs), []string{"internal/x's tests import store (internal/x [test] -> store): only internal/... may be imported"}; !slices.Equal(got, want) {
		t.Errorf("internal: %q, want %q", got, want)
	}
}

func prefixed(paths []string) []string {
	out := make([]string, len(paths))
	for i, p := range paths {
		out[i] = module + "/" + p
	}
	return out
}

type listedPackage struct {
	ImportPath   string
	Imports      []string
	TestImports  []string
	XTestImports []string
	Error        *struct{ Err string }
}

// goList lists the module's packages with their imports.
func goList(t *testing.T) map[string]*listedPackage {
	t.Helper()
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the layering test lists packages with the go command: %v", err)
	}
	var stdout, stderr bytes.Buffer
	cmd := exec.Command(goBin, "list", "-e", "-json=ImportPath,Imports,TestImports,XTestImports,Error", "./...")
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("go list: %v\n%s", err, stderr.Bytes())
	}
	pkgs := map[string]*listedPackage{}
	dec := json.NewDecoder(&stdout)
	for {
		p := new(listedPackage)
		if err := dec.Decode(p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("go list's output: %v", err)
		}
		if p.Error != nil {
			t.Fatalf("go list: %s: %s", p.ImportPath, p.Error.Err)
		}
		pkgs[p.ImportPath] = p
	}
	if len(pkgs) == 0 {
		t.Fatal("go list found no packages")
	}
	return pkgs
}

// rel is a project package's path without the module's; ok is false for
// other modules' packages and the standard library.
func rel(path string) (string, bool) {
	if path == module {
		return ".", true
	}
	return strings.CutPrefix(path, module+"/")
}

func matchAny(patterns []string, pkg string) bool {
	for _, p := range patterns {
		if p == "..." {
			return true
		}
		if base, ok := strings.CutSuffix(p, "/..."); ok {
			if pkg == base || strings.HasPrefix(pkg, base+"/") {
				return true
			}
		} else if pkg == p {
			return true
		}
	}
	return false
}

// violations lists what the rule forbids in pkgs, each with the chain of
// imports that brings it in, sorted.
func (r layerRule) violations(pkgs map[string]*listedPackage) []string {
	var out []string
	for path, p := range pkgs {
		from, ok := rel(path)
		if !ok || !matchAny([]string{r.from}, from) || matchAny(r.fromExcept, from) {
			continue
		}
		out = append(out, r.check(pkgs, from, p.Imports, "")...)
		if r.tests {
			var imports []string
			for _, imp := range append(slices.Clone(p.TestImports), p.XTestImports...) {
				if imp != path { // an external test imports its own package
					imports = append(imports, imp)
				}
			}
			out = append(out, r.check(pkgs, from, imports, " [test]")...)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// check walks the project packages reachable from imports (breadth first,
// so that each forbidden package is reported with its shortest chain).
func (r layerRule) check(pkgs map[string]*listedPackage, from string, imports []string, test string) []string {
	var out []string
	who := from
	if test != "" {
		who += "'s tests"
	}
	if r.only != nil {
		for _, imp := range imports {
			if name, ok := rel(imp); ok && !matchAny(r.only, name) {
				out = append(out, who+" import"+verbS(test)+" "+name+" ("+from+test+" -> "+name+"): only "+strings.Join(r.only, ", ")+" may be imported")
			}
		}
	}
	if len(r.forbid) == 0 {
		return out
	}
	type step struct{ pkg, chain string }
	seen := map[string]bool{}
	var queue []step
	for _, imp := range imports {
		if name, ok := rel(imp); ok && !seen[name] {
			seen[name] = true
			queue = append(queue, step{name, from + test + " -> " + name})
		}
	}
	for len(queue) > 0 {
		s := queue[0]
		queue = queue[1:]
		if matchAny(r.forbid, s.pkg) && !matchAny(r.except, s.pkg) {
			out = append(out, who+" import"+verbS(test)+" "+s.pkg+" ("+s.chain+")")
			continue
		}
		p := pkgs[module+"/"+s.pkg]
		if p == nil { // not a package of this module's build
			continue
		}
		for _, imp := range p.Imports {
			if name, ok := rel(imp); ok && !seen[name] {
				seen[name] = true
				queue = append(queue, step{name, s.chain + " -> " + name})
			}
		}
	}
	return out
}

func verbS(test string) string {
	if test != "" {
		return ""
	}
	return "s"
}
