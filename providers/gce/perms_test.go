package gce

import (
	"go/ast"
	"slices"
	"strings"
	"testing"

	"github.com/gatewayhq/gateway/internal/perms"
)

// TestCallPermissions: every call the provider makes on its clients
// (p.<client>.<Method>) has its permissions in callPermissions, and every
// entry there is a call the code makes.
func TestCallPermissions(t *testing.T) {
	clients := map[string]bool{"instances": true, "zoneOps": true, "globalOps": true, "firewalls": true, "machineTypes": true, "accelTypes": true, "secrets": true}
	called := map[string]bool{}
	err := perms.VisitCalls(".", func(sel *ast.SelectorExpr) {
		if recv, ok := sel.X.(*ast.SelectorExpr); ok && clients[recv.Sel.Name] {
			called[recv.Sel.Name+"."+sel.Sel.Name] = true
		}
	})
	if err != nil {
		t.Fatal(err)
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
