package providers_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/gatewayhq/gateway/server"
)

// TestErrorsNameExistingKeys: every configuration key an error message of
// a backend tells the operator to set is one the configuration accepts.
// It reads the string literals of the messages (fmt.Errorf, errors.New and
// the validators' add and bad) in each backend's source: a full key
// (providers.<backend>.<key>) must be a key of the configuration (server.ConfigSchema), and so must a bare
// snake_case name, as providers.<backend>.<name>. Names the configuration
// does not have are what the operator cannot do anything with: a message
// once said "set ami_parameter", which the configuration refuses.
func TestErrorsNameExistingKeys(t *testing.T) {
	keys := map[string]bool{}
	for _, k := range server.ConfigSchema().Keys() {
		keys[k] = true
	}
	full := regexp.MustCompile(`\bproviders\.[a-z0-9_]+\.[a-z0-9_]+`)
	bare := regexp.MustCompile(`(^|[^a-zA-Z0-9_.:/-])([a-z][a-z0-9]*(?:_[a-z0-9]+)+)\b`)
	// Words of messages that look like keys and are not.
	notKeys := map[string]bool{"x86_64": true}
	checked := 0
	for _, backend := range []string{"ec2", "fargate", "gce", "docker", "local"} {
		files, err := filepath.Glob(filepath.Join(backend, "*.go"))
		if err != nil {
			t.Fatal(err)
		}
		for _, file := range files {
			if strings.HasSuffix(file, "_test.go") {
				continue
			}
			fset := token.NewFileSet()
			f, err := parser.ParseFile(fset, file, nil, 0)
			if err != nil {
				t.Fatal(err)
			}
			ast.Inspect(f, func(n ast.Node) bool {
				call, ok := n.(*ast.CallExpr)
				if !ok || !isMessage(call) {
					return true
				}
				for _, arg := range call.Args {
					ast.Inspect(arg, func(n ast.Node) bool {
						lit, ok := n.(*ast.BasicLit)
						if !ok || lit.Kind != token.STRING {
							return true
						}
						s, err := strconv.Unquote(lit.Value)
						if err != nil {
							return true
						}
						where := fset.Position(lit.Pos())
						for _, k := range full.FindAllString(s, -1) {
							checked++
							if !keys[k] {
								t.Errorf("%s: message names %s, which is not a configuration key: %q", where, k, s)
							}
						}
						for _, m := range bare.FindAllStringSubmatch(full.ReplaceAllString(s, ""), -1) {
							if notKeys[m[2]] {
								continue
							}
							checked++
							if k := "providers." + backend + "." + m[2]; !keys[k] {
								t.Errorf("%s: message names %s, but %s is not a configuration key: %q", where, m[2], k, s)
							}
						}
						return true
					})
				}
				return true
			})
		}
	}
	if checked == 0 {
		t.Fatal("no configuration key found in any message: the walk is broken")
	}
	t.Logf("%d key names in error messages checked", checked)
}

// isMessage reports whether a call makes an error message: fmt.Errorf,
// errors.New, or a validator's add or bad.
func isMessage(call *ast.CallExpr) bool {
	switch fn := call.Fun.(type) {
	case *ast.SelectorExpr:
		pkg, ok := fn.X.(*ast.Ident)
		return ok && slices.Contains([]string{"fmt.Errorf", "errors.New"}, pkg.Name+"."+fn.Sel.Name)
	case *ast.Ident:
		return fn.Name == "add" || fn.Name == "bad"
	}
	return false
}
