// Package terraform_test checks the deployment modules without a cloud
// account: every .tf file parses, variables and outputs are declared,
// typed and documented, providers are pinned, the gateway settings the
// modules render exist in the gateway's configuration, and the permissions
// granted to the gateway are exactly those its code can use.
package terraform_test

import (
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/gatewayhq/gateway/images/build"
	"github.com/gatewayhq/gateway/internal/config"
	"github.com/gatewayhq/gateway/providers/ec2"
	"github.com/gatewayhq/gateway/providers/fargate"
	"github.com/gatewayhq/gateway/providers/gce"
	"github.com/gatewayhq/gateway/server"
	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/hashicorp/hcl/v2/hclwrite"
	"github.com/zclconf/go-cty/cty"
)

// The modules, and the examples that call them.
var (
	modules  = []string{"aws", "gcp"}
	examples = []string{"examples/aws", "examples/gcp"}
)

// module is one directory's .tf files, parsed.
type module struct {
	dir    string
	bodies []*hclsyntax.Body
	// text is every .tf and .tftpl file's content, for what HCL does not
	// show as syntax (names inside heredocs and templates).
	text map[string]string
}

func load(t *testing.T, dir string) *module {
	t.Helper()
	m := &module{dir: dir, text: map[string]string{}}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatalf("module %s: %v", dir, err)
	}
	for _, e := range entries {
		name := filepath.Join(dir, e.Name())
		switch filepath.Ext(name) {
		case ".tf":
			src, err := os.ReadFile(name)
			if err != nil {
				t.Fatal(err)
			}
			f, diags := hclsyntax.ParseConfig(src, name, hcl.InitialPos)
			if diags.HasErrors() {
				t.Fatalf("%s does not parse: %s", name, diags.Error())
			}
			m.bodies = append(m.bodies, f.Body.(*hclsyntax.Body))
			m.text[name] = string(src)
		case ".tftpl":
			src, err := os.ReadFile(name)
			if err != nil {
				t.Fatal(err)
			}
			m.text[name] = string(src)
		}
	}
	if len(m.bodies) == 0 {
		t.Fatalf("module %s has no .tf files", dir)
	}
	return m
}

// blocks returns the top-level blocks of a type, e.g. "variable".
func (m *module) blocks(typ string) []*hclsyntax.Block {
	var out []*hclsyntax.Block
	for _, b := range m.bodies {
		for _, blk := range b.Blocks {
			if blk.Type == typ {
				out = append(out, blk)
			}
		}
	}
	return out
}

// block returns the top-level block with these labels, or nil.
func (m *module) block(typ string, labels ...string) *hclsyntax.Block {
	for _, b := range m.blocks(typ) {
		if slices.Equal(b.Labels, labels) {
			return b
		}
	}
	return nil
}

// refs returns the names referenced as root.<name> anywhere in the module
// (var.x, local.x), with where each is first used.
func (m *module) refs(root string) map[string]string {
	out := map[string]string{}
	for _, b := range m.bodies {
		hclsyntax.VisitAll(b, func(n hclsyntax.Node) hcl.Diagnostics {
			e, ok := n.(*hclsyntax.ScopeTraversalExpr)
			if !ok || e.Traversal.RootName() != root || len(e.Traversal) < 2 {
				return nil
			}
			if a, ok := e.Traversal[1].(hcl.TraverseAttr); ok {
				if _, seen := out[a.Name]; !seen {
					out[a.Name] = e.SrcRange.String()
				}
			}
			return nil
		})
	}
	return out
}

// literalString is the value of a literal string attribute ("" if absent
// or not literal).
func literalString(body *hclsyntax.Body, name string) string {
	a := body.Attributes[name]
	if a == nil {
		return ""
	}
	v, diags := a.Expr.Value(nil)
	if diags.HasErrors() || !v.Type().Equals(cty.String) || v.IsNull() {
		return ""
	}
	return v.AsString()
}

// literalStrings is the value of an attribute that must be a literal list
// of literal strings.
func literalStrings(t *testing.T, a *hclsyntax.Attribute) []string {
	t.Helper()
	v, diags := a.Expr.Value(nil)
	if diags.HasErrors() || !(v.Type().IsTupleType() || v.Type().IsListType()) {
		t.Errorf("%s: %s must be a literal list of strings, so that it can be checked without a cloud", a.SrcRange, a.Name)
		return nil
	}
	var out []string
	for it := v.ElementIterator(); it.Next(); {
		_, e := it.Element()
		if !e.Type().Equals(cty.String) || e.IsNull() {
			t.Errorf("%s: %s holds a non-string", a.SrcRange, a.Name)
			continue
		}
		out = append(out, e.AsString())
	}
	return out
}

func TestModulesParseAndDeclare(t *testing.T) {
	for _, dir := range append(slices.Clone(modules), examples...) {
		t.Run(dir, func(t *testing.T) {
			m := load(t, dir)
			declared := map[string]*hclsyntax.Block{}
			for _, v := range m.blocks("variable") {
				name := v.Labels[0]
				declared[name] = v
				if literalString(v.Body, "description") == "" {
					t.Errorf("%s: variable %q has no description", v.DefRange(), name)
				}
				if v.Body.Attributes["type"] == nil {
					t.Errorf("%s: variable %q has no type", v.DefRange(), name)
				}
				for _, val := range v.Body.Blocks {
					if val.Type == "validation" && val.Body.Attributes["error_message"] == nil {
						t.Errorf("%s: a validation of %q has no error_message", val.DefRange(), name)
					}
				}
			}
			used := m.refs("var")
			for name, at := range used {
				if declared[name] == nil {
					t.Errorf("%s: var.%s is not declared", at, name)
				}
			}
			for name, v := range declared {
				if _, ok := used[name]; !ok {
					t.Errorf("%s: variable %q is declared but never used", v.DefRange(), name)
				}
			}
			locals := map[string]bool{}
			for _, l := range m.blocks("locals") {
				for name := range l.Body.Attributes {
					locals[name] = true
				}
			}
			for name, at := range m.refs("local") {
				if !locals[name] {
					t.Errorf("%s: local.%s is not defined", at, name)
				}
			}
			outputs := m.blocks("output")
			if len(outputs) == 0 {
				t.Error("the module has no outputs")
			}
			for _, o := range outputs {
				if literalString(o.Body, "description") == "" {
					t.Errorf("%s: output %q has no description", o.DefRange(), o.Labels[0])
				}
			}
			if _, err := os.Stat(filepath.Join(dir, "README.md")); err != nil {
				t.Errorf("%s has no README.md", dir)
			}
		})
	}
}

// requiredProviders returns the module's required_providers: name to
// (source, version).
func requiredProviders(t *testing.T, m *module) map[string][2]string {
	t.Helper()
	out := map[string][2]string{}
	for _, tf := range m.blocks("terraform") {
		if literalString(tf.Body, "required_version") == "" && tf.Body.Attributes["required_version"] != nil {
			t.Errorf("%s: required_version must be a literal", tf.DefRange())
		}
		for _, rp := range tf.Body.Blocks {
			if rp.Type != "required_providers" {
				continue
			}
			for name, a := range rp.Body.Attributes {
				v, diags := a.Expr.Value(nil)
				if diags.HasErrors() || !v.Type().IsObjectType() || !v.Type().HasAttribute("source") || !v.Type().HasAttribute("version") {
					t.Errorf("%s: provider %s needs a literal source and version", a.SrcRange, name)
					continue
				}
				out[name] = [2]string{v.GetAttr("source").AsString(), v.GetAttr("version").AsString()}
			}
		}
	}
	return out
}

func TestProvidersPinned(t *testing.T) {
	pinned := regexp.MustCompile(`^(~>|=)\s*\d+\.\d+`)
	byModule := map[string]map[string][2]string{}
	for _, dir := range append(slices.Clone(modules), examples...) {
		m := load(t, dir)
		req := requiredProviders(t, m)
		byModule[dir] = req
		if len(req) == 0 {
			t.Errorf("%s declares no required_providers", dir)
		}
		for name, sv := range req {
			if !strings.HasPrefix(sv[0], "hashicorp/") && !strings.Contains(sv[0], "/") {
				t.Errorf("%s: provider %s has source %q: name its registry namespace", dir, name, sv[0])
			}
			if !pinned.MatchString(sv[1]) {
				t.Errorf("%s: provider %s has version %q: pin it (~> x.y or = x.y.z)", dir, name, sv[1])
			}
		}
		hasRequired := false
		for _, tf := range m.blocks("terraform") {
			hasRequired = hasRequired || tf.Body.Attributes["required_version"] != nil
		}
		if !hasRequired {
			t.Errorf("%s sets no required_version", dir)
		}
		// Every resource, data source and ephemeral resource comes from a
		// declared provider (its type's prefix).
		for _, kind := range []string{"resource", "data", "ephemeral"} {
			for _, b := range m.blocks(kind) {
				prefix, _, _ := strings.Cut(b.Labels[0], "_")
				if _, ok := req[prefix]; !ok {
					t.Errorf("%s: %s %q is from provider %q, which required_providers does not pin", b.DefRange(), kind, b.Labels[0], prefix)
				}
			}
		}
		for _, p := range m.blocks("provider") {
			if slices.Contains(modules, dir) {
				t.Errorf("%s: a reusable module must not configure providers (the caller does)", p.DefRange())
			}
		}
	}
	// An example pins at least what the module it calls needs, the same way.
	for _, ex := range examples {
		mod := filepath.Base(ex)
		for name, sv := range byModule[mod] {
			if got, ok := byModule[ex][name]; !ok || got != sv {
				t.Errorf("%s pins provider %s as %v, the module %s as %v", ex, name, got, mod, sv)
			}
		}
	}
}

// TestExamplesCallModules: each example calls its module with inputs the
// module declares, and gives every input that has no default.
func TestExamplesCallModules(t *testing.T) {
	meta := map[string]bool{"source": true, "version": true, "providers": true, "count": true, "for_each": true, "depends_on": true}
	for _, ex := range examples {
		t.Run(ex, func(t *testing.T) {
			m := load(t, ex)
			calls := m.blocks("module")
			if len(calls) == 0 {
				t.Fatal("the example calls no module")
			}
			for _, call := range calls {
				src := literalString(call.Body, "source")
				if !strings.HasPrefix(src, "../") {
					t.Errorf("%s: module source %q must be the repository's module (a relative path)", call.DefRange(), src)
					continue
				}
				mod := load(t, filepath.Join(ex, src))
				vars := map[string]*hclsyntax.Block{}
				for _, v := range mod.blocks("variable") {
					vars[v.Labels[0]] = v
				}
				for name, a := range call.Body.Attributes {
					if !meta[name] && vars[name] == nil {
						t.Errorf("%s: the module %s has no input %q", a.SrcRange, src, name)
					}
				}
				for name, v := range vars {
					if v.Body.Attributes["default"] == nil && call.Body.Attributes[name] == nil {
						t.Errorf("%s: the module %s needs input %q, which has no default", call.DefRange(), src, name)
					}
				}
			}
		})
	}
}

// TestGatewaySettingsExist: every GATEWAY_* variable the modules set is a
// key of the gateway's configuration.
func TestGatewaySettingsExist(t *testing.T) {
	known := map[string]bool{}
	for _, k := range server.ConfigSchema().Keys() {
		known[config.EnvName(k)] = true
	}
	re := regexp.MustCompile(`\bGATEWAY_[A-Z0-9_]+`)
	for _, dir := range modules {
		m := load(t, dir)
		seen := 0
		for name, text := range m.text {
			for _, env := range re.FindAllString(text, -1) {
				seen++
				if !known[env] {
					t.Errorf("%s sets %s, which is not a gateway setting (see the table in docs/configuration.md)", name, env)
				}
			}
		}
		if seen < 5 {
			t.Errorf("%s sets only %d GATEWAY_* settings: the gateway cannot run from that", dir, seen)
		}
	}
}

// diff says what a has that b lacks and the other way round.
func diff(a, b []string) (extra, missing []string) {
	for _, x := range a {
		if !slices.Contains(b, x) {
			extra = append(extra, x)
		}
	}
	for _, x := range b {
		if !slices.Contains(a, x) {
			missing = append(missing, x)
		}
	}
	return extra, missing
}

// TestAWSPolicyMatchesCode: the gateway's role grants exactly the actions
// the code can call, for each backend and for the image repository, with
// no wildcards in any policy of the module.
func TestAWSPolicyMatchesCode(t *testing.T) {
	m := load(t, "aws")
	want := map[string][]string{
		"gateway_ec2":     ec2.IAMActions(),
		"gateway_fargate": fargate.IAMActions(),
		"gateway_ecr":     build.ECRActions(),
	}
	for doc, actions := range want {
		b := m.block("data", "aws_iam_policy_document", doc)
		if b == nil {
			t.Errorf("terraform/aws has no data \"aws_iam_policy_document\" %q", doc)
			continue
		}
		var granted []string
		for _, st := range b.Body.Blocks {
			if st.Type != "statement" {
				continue
			}
			if st.Body.Attributes["not_actions"] != nil {
				t.Errorf("%s: not_actions grants everything else: list actions", st.DefRange())
			}
			if a := st.Body.Attributes["actions"]; a != nil {
				granted = append(granted, literalStrings(t, a)...)
			}
		}
		slices.Sort(granted)
		granted = slices.Compact(granted)
		extra, missing := diff(granted, actions)
		if len(extra) > 0 {
			t.Errorf("%s grants actions the code does not call: %v", doc, extra)
		}
		if len(missing) > 0 {
			t.Errorf("%s lacks actions the code calls: %v", doc, missing)
		}
	}
	for _, b := range m.blocks("data") {
		if b.Labels[0] != "aws_iam_policy_document" {
			continue
		}
		for _, st := range b.Body.Blocks {
			if a := st.Body.Attributes["actions"]; st.Type == "statement" && a != nil {
				for _, act := range literalStrings(t, a) {
					if strings.Contains(act, "*") {
						t.Errorf("%s: policy %s grants the wildcard action %q", a.SrcRange, b.Labels[1], act)
					}
				}
			}
		}
	}
	for name, text := range m.text {
		if regexp.MustCompile(`"Action"\s*[:=]\s*"\*"`).MatchString(text) {
			t.Errorf("%s has a policy granting every action", name)
		}
	}

	// Image statements, each on its own resources: the registry token on
	// "*", push and read on the environment repository, read alone on the
	// bases and the other repositories.
	doc := m.block("data", "aws_iam_policy_document", "gateway_ecr")
	if doc == nil {
		return
	}
	scopes := []struct {
		what   string
		match  func(resources hclsyntax.Expression) bool
		want   []string
		source string
		found  bool
	}{
		{"\"*\"", func(r hclsyntax.Expression) bool { return m.source(r.Range()) == `["*"]` }, build.ECRUnscopedActions(), "build.ECRUnscopedActions()", false},
		{"the environment repository", func(r hclsyntax.Expression) bool {
			return references(r, "aws_ecr_repository.environments") && !references(r, "aws_ecr_repository.bases")
		}, build.ECRRepositoryActions(), "build.ECRRepositoryActions()", false},
		{"the bases and image_pull_repository_arns", func(r hclsyntax.Expression) bool {
			return references(r, "aws_ecr_repository.bases") && references(r, "var.image_pull_repository_arns") && !references(r, "aws_ecr_repository.environments")
		}, build.ECRReadActions(), "build.ECRReadActions()", false},
	}
	for _, st := range doc.Body.Blocks {
		if st.Type != "statement" {
			t.Errorf("%s: gateway_ecr has a %s block: its statements are checked only when literal", st.DefRange(), st.Type)
			continue
		}
		res := st.Body.Attributes["resources"]
		if res == nil {
			t.Errorf("%s: a statement of gateway_ecr names no resources", st.DefRange())
			continue
		}
		matched := false
		for i := range scopes {
			sc := &scopes[i]
			if !sc.match(res.Expr) {
				continue
			}
			matched, sc.found = true, true
			granted := literalStrings(t, st.Body.Attributes["actions"])
			slices.Sort(granted)
			want := slices.Sorted(slices.Values(sc.want))
			if !slices.Equal(granted, want) {
				t.Errorf("%s: gateway_ecr grants %v on %s; the builder needs %v there (%s)", st.DefRange(), granted, sc.what, want, sc.source)
			}
		}
		if !matched {
			t.Errorf("%s: gateway_ecr grants on %s, none of the resources the builder's lists are for", st.DefRange(), m.source(res.Expr.Range()))
		}
	}
	for _, sc := range scopes {
		if !sc.found {
			t.Errorf("gateway_ecr has no statement on %s (%s)", sc.what, sc.source)
		}
	}
}

// TestGCPRoleMatchesCode: the gateway's custom role holds exactly the
// permissions the Compute Engine backend's calls need; the image
// repository and the members' service account are granted on those
// resources alone.
func TestGCPRoleMatchesCode(t *testing.T) {
	m := load(t, "gcp")
	role := m.block("resource", "google_project_iam_custom_role", "gateway")
	if role == nil {
		t.Fatal(`terraform/gcp has no resource "google_project_iam_custom_role" "gateway"`)
	}
	a := role.Body.Attributes["permissions"]
	if a == nil {
		t.Fatal("the gateway role lists no permissions")
	}
	granted := literalStrings(t, a)
	slices.Sort(granted)
	extra, missing := diff(granted, gce.Permissions())
	if len(extra) > 0 {
		t.Errorf("the gateway role grants permissions the code does not need: %v", extra)
	}
	if len(missing) > 0 {
		t.Errorf("the gateway role lacks permissions the code needs: %v", missing)
	}
	if b := m.block("resource", "google_service_account_iam_member", "gateway_acts_as_members"); b == nil || literalString(b.Body, "role") != "roles/iam.serviceAccountUser" {
		t.Error("terraform/gcp does not grant roles/iam.serviceAccountUser on the members' service account alone")
	}
	// The repositories: the gateway pushes to the environment repository
	// and only reads the bases; members only read either.
	type grant struct{ who, repo string }
	repoRoles := map[grant][]string{}
	for _, b := range m.blocks("resource") {
		if b.Labels[0] != "google_artifact_registry_repository_iam_member" {
			continue
		}
		repo, member := b.Body.Attributes["repository"], b.Body.Attributes["member"]
		if repo == nil || member == nil {
			t.Errorf("%s: a repository binding without repository or member", b.DefRange())
			continue
		}
		var g grant
		for _, who := range []string{"gateway", "members"} {
			if references(member.Expr, "google_service_account."+who) {
				g.who = who
			}
		}
		for _, r := range []string{"environments", "bases"} {
			if references(repo.Expr, "google_artifact_registry_repository."+r) {
				g.repo = r
			}
		}
		if g.repo == "" {
			continue // the gateway image's repository, when it is in Artifact Registry
		}
		repoRoles[g] = append(repoRoles[g], literalString(b.Body, "role"))
	}
	for g, want := range map[grant][]string{
		{"gateway", "environments"}: {build.GoogleRegistryRole},
		{"gateway", "bases"}:        {build.GoogleReadRole},
		{"members", "environments"}: {"roles/artifactregistry.reader"},
		{"members", "bases"}:        {"roles/artifactregistry.reader"},
	} {
		if !slices.Equal(repoRoles[g], want) {
			t.Errorf("terraform/gcp grants %s %v on the %s repository, want %v", g.who, repoRoles[g], g.repo, want)
		}
		delete(repoRoles, g)
	}
	for g, roles := range repoRoles {
		t.Errorf("terraform/gcp grants %q %v on the %s repository", g.who, roles, g.repo)
	}
	// Project-wide, the gateway gets its custom role and nothing broad.
	broad := regexp.MustCompile(`^roles/(owner|editor|compute\.|iam\.|secretmanager\.admin|resourcemanager\.)`)
	for _, b := range m.blocks("resource") {
		if b.Labels[0] == "google_project_iam_member" || b.Labels[0] == "google_project_iam_binding" {
			if r := literalString(b.Body, "role"); broad.MatchString(r) {
				t.Errorf("%s: %s grants %s project-wide; use the custom role", b.DefRange(), b.Labels[1], r)
			}
		}
	}
}

// tfBinary is terraform or OpenTofu, when either is installed.
func tfBinary(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"tofu", "terraform"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Skip("neither tofu nor terraform is on PATH: `fmt -check` and `validate` not run (the HCL checks above ran)")
	return ""
}

// TestCanonicalFormat: every .tf file is as hclwrite.Format leaves it, the
// formatter `terraform fmt` is built on; this runs where no binary is.
func TestCanonicalFormat(t *testing.T) {
	for _, dir := range append(slices.Clone(modules), examples...) {
		for name, text := range load(t, dir).text {
			if filepath.Ext(name) == ".tf" && string(hclwrite.Format([]byte(text))) != text {
				t.Errorf("%s is not formatted: run `terraform fmt -recursive terraform` (or `tofu fmt`)", name)
			}
		}
	}
}

func TestFormatted(t *testing.T) {
	bin := tfBinary(t)
	out, err := exec.Command(bin, "fmt", "-check", "-recursive", "-diff", ".").CombinedOutput()
	if err != nil {
		t.Errorf("%s fmt -check: %v; run `%s fmt -recursive terraform`:\n%s", filepath.Base(bin), err, filepath.Base(bin), out)
	}
}

// TestValidate runs `validate` on the examples when providers can be had
// without the network: from GATEWAY_TEST_TERRAFORM_PLUGIN_DIR (a
// directory that `terraform providers mirror` filled). Tests here may not
// download them.
func TestValidate(t *testing.T) {
	bin := tfBinary(t)
	plugins := os.Getenv("GATEWAY_TEST_TERRAFORM_PLUGIN_DIR")
	if plugins == "" {
		t.Skip("GATEWAY_TEST_TERRAFORM_PLUGIN_DIR is not set: validate needs the aws, google and random providers, which tests may not download")
	}
	for _, ex := range examples {
		t.Run(ex, func(t *testing.T) {
			work := t.TempDir()
			// Copy the example beside a copy of its module, so that
			// .terraform is made in a temporary directory.
			for _, d := range []string{ex, filepath.Base(ex)} {
				if err := os.CopyFS(filepath.Join(work, d), os.DirFS(d)); err != nil {
					t.Fatal(err)
				}
			}
			dir := filepath.Join(work, ex)
			for _, args := range [][]string{{"init", "-backend=false", "-input=false", "-plugin-dir=" + plugins}, {"validate", "-no-color"}} {
				cmd := exec.Command(bin, args...)
				cmd.Dir = dir
				if out, err := cmd.CombinedOutput(); err != nil {
					t.Fatalf("%s %s: %v\n%s", filepath.Base(bin), strings.Join(args, " "), err, out)
				}
			}
		})
	}
}

func TestMain(m *testing.M) {
	for _, d := range append(slices.Clone(modules), examples...) {
		if _, err := os.Stat(d); err != nil {
			fmt.Fprintf(os.Stderr, "terraform tests: %v (run them from the terraform directory)\n", err)
			os.Exit(1)
		}
	}
	os.Exit(m.Run())
}

// source is the text of an expression as written.
func (m *module) source(r hcl.Range) string {
	text := m.text[r.Filename]
	if r.End.Byte > len(text) {
		return ""
	}
	return text[r.Start.Byte:r.End.Byte]
}

// references reports whether an expression refers to root.name (such as
// aws_iam_role.dask_task or data.aws_iam_policy_document.x, given as
// "data.aws_iam_policy_document.x").
func references(e hclsyntax.Expression, path string) bool {
	for _, tr := range e.Variables() {
		var parts []string
		parts = append(parts, tr.RootName())
		for _, st := range tr[1:] {
			if a, ok := st.(hcl.TraverseAttr); ok {
				parts = append(parts, a.Name)
			}
		}
		if strings.HasPrefix(strings.Join(parts, "."), path) {
			return true
		}
	}
	return false
}

// TestFargateTaskRoleReadsNoSecrets: users' code on Fargate holds the task
// role's credentials, so that role is granted no read of secrets or
// parameters by the module, and denies reading the clusters' TLS secrets
// and parameters whatever policies the operator attaches; the execution
// role, which ECS alone uses, reads only this gateway's cluster secrets.
func TestFargateTaskRoleReadsNoSecrets(t *testing.T) {
	m := load(t, "aws")
	reads := regexp.MustCompile(`^(secretsmanager|ssm|kms):`)
	denied := map[string]string{}
	policies := 0
	for _, b := range m.blocks("resource") {
		role := b.Body.Attributes["role"]
		if b.Labels[0] != "aws_iam_role_policy" || role == nil || !references(role.Expr, "aws_iam_role.dask_task") {
			continue
		}
		policies++
		pol := b.Body.Attributes["policy"]
		var doc *hclsyntax.Block
		for _, d := range m.blocks("data") {
			if d.Labels[0] == "aws_iam_policy_document" && pol != nil && references(pol.Expr, "data.aws_iam_policy_document."+d.Labels[1]) {
				doc = d
			}
		}
		if doc == nil {
			t.Errorf("%s: the task role's policy %s is not an aws_iam_policy_document of the module, so it cannot be checked", b.DefRange(), b.Labels[1])
			continue
		}
		for _, st := range doc.Body.Blocks {
			if st.Type != "statement" || st.Body.Attributes["actions"] == nil {
				continue
			}
			effect := literalString(st.Body, "effect")
			resources := ""
			if r := st.Body.Attributes["resources"]; r != nil {
				resources = m.source(r.Expr.Range())
			}
			for _, act := range literalStrings(t, st.Body.Attributes["actions"]) {
				switch {
				case effect != "Deny" && reads.MatchString(act):
					t.Errorf("%s: the Dask task role is granted %s", st.DefRange(), act)
				case effect == "Deny":
					denied[act] += resources
				}
			}
		}
	}
	if policies == 0 {
		t.Fatal("no policy is attached to aws_iam_role.dask_task: nothing denies it the clusters' secrets")
	}
	for act, where := range map[string]string{
		"secretsmanager:GetSecretValue":      "secret:gateway/*",
		"secretsmanager:BatchGetSecretValue": "secret:gateway/*",
		"ssm:GetParameter":                   "parameter/gateway/*",
		"ssm:GetParameters":                  "parameter/gateway/*",
		"ssm:GetParametersByPath":            "parameter/gateway/*",
	} {
		if !strings.Contains(denied[act], where) {
			t.Errorf("the Dask task role does not deny %s on %s (denied: %v)", act, where, denied)
		}
	}
	// The task definitions never give the task role to anything but Dask:
	// the gateway passes it as task_role_arn, distinct from the execution role.
	exec := m.block("data", "aws_iam_policy_document", "dask_execution")
	if exec == nil {
		t.Fatal(`no data "aws_iam_policy_document" "dask_execution"`)
	}
	found := false
	for _, st := range exec.Body.Blocks {
		if st.Type != "statement" || st.Body.Attributes["actions"] == nil || !slices.Contains(literalStrings(t, st.Body.Attributes["actions"]), "secretsmanager:GetSecretValue") {
			continue
		}
		found = true
		if r := m.source(st.Body.Attributes["resources"].Expr.Range()); !strings.Contains(r, "secret:gateway/${local.gateway_key}/*") {
			t.Errorf("%s: the Dask execution role reads %s; want this gateway's cluster secrets only (secret:gateway/${local.gateway_key}/*)", st.DefRange(), r)
		}
	}
	if !found {
		t.Error("the Dask execution role cannot read the clusters' TLS secrets, which ECS needs")
	}
	if !regexp.MustCompile(`gateway_key\s*=\s*substr\(sha256\(var\.gateway_id\), 0, 8\)`).MatchString(m.text[filepath.Join("aws", "main.tf")]) {
		t.Error("local.gateway_key is not substr(sha256(var.gateway_id), 0, 8), the prefix providers/fargate names secrets with")
	}
}

// TestMembersAdmitTheGatewayByIdentity: the modules tell the backends to
// admit the gateway by its security group (AWS) or service account (GCP),
// never by an address range that other clusters' members share.
func TestMembersAdmitTheGatewayByIdentity(t *testing.T) {
	for _, tc := range []struct {
		dir  string
		want []*regexp.Regexp
	}{
		{"aws", []*regexp.Regexp{
			regexp.MustCompile(`"GATEWAY_PROVIDERS_EC2_GATEWAY_SECURITY_GROUP"\s*=\s*local\.is_ec2 \? aws_security_group\.gateway\.id`),
			regexp.MustCompile(`"GATEWAY_PROVIDERS_FARGATE_GATEWAY_SECURITY_GROUP"\s*=\s*local\.is_fargate \? aws_security_group\.gateway\.id`),
		}},
		{"gcp", []*regexp.Regexp{
			regexp.MustCompile(`"GATEWAY_PROVIDERS_GCE_GATEWAY_SERVICE_ACCOUNT"\s*=\s*google_service_account\.gateway\.email`),
		}},
	} {
		m := load(t, tc.dir)
		all := strings.Join(slices.Collect(maps.Values(m.text)), "\n")
		for _, re := range tc.want {
			if !re.MatchString(all) {
				t.Errorf("terraform/%s does not set %s", tc.dir, re)
			}
		}
		if strings.Contains(all, "_GATEWAY_CIDRS") {
			t.Errorf("terraform/%s still admits the gateway to members by address range (GATEWAY_CIDRS)", tc.dir)
		}
	}
	// The gateway tasks on AWS run in the group the members admit.
	m := load(t, "aws")
	if !strings.Contains(m.text[filepath.Join("aws", "ecs.tf")], "security_groups  = [aws_security_group.gateway.id]") {
		t.Error("the gateway's ECS service does not run in aws_security_group.gateway")
	}
}
