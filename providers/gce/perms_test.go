package gce

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestCallPermissions: every call the provider makes on its clients
// (p.<client>.<Method>) has its permissions in callPermissions, and every
// entry there is a call the code makes.
func TestCallPermissions(t *testing.T) {
	clients := map[string]bool{"instances": true, "zoneOps": true, "globalOps": true, "firewalls": true, "machineTypes": true, "accelTypes": true, "secrets": true}
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	called := map[string]bool{}
	fset := token.NewFileSet()
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		file, err := parser.ParseFile(fset, f, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(file, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok {
				return true
			}
			sel, ok := call.Fun.(*ast.SelectorExpr)
			if !ok {
				return true
			}
			if recv, ok := sel.X.(*ast.SelectorExpr); ok && clients[recv.Sel.Name] {
				called[recv.Sel.Name+"."+sel.Sel.Name] = true
			}
			return true
		})
	}
	table := callPermissions()
	for c := range called {
		if _, ok := table[c]; !ok && !strings.HasSuffix(c, ".Close") {
			t.Errorf("the provider calls %s, which callPermissions does not list: add the IAM permissions it needs", c)
		}
	}
	for c := range table {
		if !called[c] {
			t.Errorf("callPermissions lists %s, which nothing calls: remove it", c)
		}
	}
	if len(called) < 10 {
		t.Fatalf("found only %d calls (%v): the test no longer sees the provider's code", len(called), called)
	}
	ps := Permissions()
	if !slices.IsSorted(ps) || !slices.Contains(ps, "compute.instances.create") || slices.Contains(ps, "iam.serviceAccounts.actAs") {
		t.Errorf("Permissions() = %v", ps)
	}
}
