package terraform_test

import (
	"encoding/json"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/gatewayhq/gateway/envs"
	"github.com/gatewayhq/gateway/images/build"
	"github.com/gatewayhq/gateway/server"
	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/ext/tryfunc"
	"github.com/hashicorp/hcl/v2/ext/typeexpr"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/zclconf/go-cty/cty"
	"github.com/zclconf/go-cty/cty/convert"
	"github.com/zclconf/go-cty/cty/function"
	"github.com/zclconf/go-cty/cty/function/stdlib"
)

// The Terraform functions the image settings, validations and
// preconditions use, from go-cty's standard library where Terraform's are
// the same.
var tfFuncs = map[string]function.Function{
	"alltrue":    allTrueFunc,
	"can":        tryfunc.CanFunc,
	"ceil":       stdlib.CeilFunc,
	"coalesce":   stdlib.CoalesceFunc,
	"contains":   stdlib.ContainsFunc,
	"distinct":   stdlib.DistinctFunc,
	"floor":      stdlib.FloorFunc,
	"jsonencode": stdlib.JSONEncodeFunc,
	"length":     stdlib.LengthFunc,
	"regex":      stdlib.RegexFunc,
	"tostring":   stdlib.MakeToFunc(cty.String),
	"trimprefix": stdlib.TrimPrefixFunc,
}

// allTrueFunc is Terraform's alltrue: every element of a list of bools.
var allTrueFunc = function.New(&function.Spec{
	Params: []function.Parameter{{Name: "list", Type: cty.List(cty.Bool)}},
	Type:   function.StaticReturnType(cty.Bool),
	Impl: func(args []cty.Value, _ cty.Type) (cty.Value, error) {
		for it := args[0].ElementIterator(); it.Next(); {
			if _, v := it.Element(); v.IsNull() || v.False() {
				return cty.False, nil
			}
		}
		return cty.True, nil
	},
})

// local returns the expression of a local value of the module.
func (m *module) local(t *testing.T, name string) hclsyntax.Expression {
	t.Helper()
	for _, l := range m.blocks("locals") {
		if a := l.Body.Attributes[name]; a != nil {
			return a.Expr
		}
	}
	t.Fatalf("terraform/%s defines no local.%s", m.dir, name)
	return nil
}

// items returns the items of an object constructor, by their literal keys.
func items(t *testing.T, e hclsyntax.Expression) map[string]hclsyntax.Expression {
	t.Helper()
	obj, ok := e.(*hclsyntax.ObjectConsExpr)
	if !ok {
		t.Fatalf("%s: want an object constructor { ... }", e.Range())
	}
	out := map[string]hclsyntax.Expression{}
	for _, it := range obj.Items {
		k, diags := it.KeyExpr.Value(nil)
		if diags.HasErrors() || !k.Type().Equals(cty.String) {
			t.Fatalf("%s: keys must be literal strings", it.KeyExpr.Range())
		}
		out[k.AsString()] = it.ValueExpr
	}
	return out
}

// variableValue converts v to the type of the module's variable name, with
// its optional attributes' defaults, as Terraform does with an input.
func (m *module) variableValue(t *testing.T, name string, v cty.Value) cty.Value {
	t.Helper()
	blk := m.block("variable", name)
	if blk == nil {
		t.Fatalf("terraform/%s declares no variable %q", m.dir, name)
	}
	ty, defaults, diags := typeexpr.TypeConstraintWithDefaults(blk.Body.Attributes["type"].Expr)
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	if defaults != nil {
		v = defaults.Apply(v)
	}
	out, err := convert.Convert(v, ty)
	if err != nil {
		t.Fatalf("variable %q: %v", name, err)
	}
	return out
}

// defaultOf is the default of the module's variable name, converted.
func (m *module) defaultOf(t *testing.T, name string) cty.Value {
	t.Helper()
	v, diags := m.block("variable", name).Body.Attributes["default"].Expr.Value(nil)
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	return m.variableValue(t, name, v)
}

func literal(t *testing.T, src string) cty.Value {
	t.Helper()
	e, diags := hclsyntax.ParseExpression([]byte(src), "case.tf", hcl.InitialPos)
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	v, diags := e.Value(nil)
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	return v
}

func evalString(t *testing.T, e hclsyntax.Expression, ctx *hcl.EvalContext) (string, bool) {
	t.Helper()
	v, diags := e.Value(ctx)
	if diags.HasErrors() {
		t.Fatalf("%s: %s", e.Range(), diags.Error())
	}
	if v.IsNull() {
		return "", false
	}
	v, err := convert.Convert(v, cty.String)
	if err != nil {
		t.Fatalf("%s: %v", e.Range(), err)
	}
	return v.AsString(), true
}

// imageModule is what differs between the modules for environment images.
type imageModule struct {
	dir string
	// settings is the local holding the gateway's GATEWAY_* settings.
	settings string
	// environments is what GATEWAY_IMAGES_REPOSITORY must refer to.
	environments string
	// stubs are the values of the module's own resources and locals the
	// image settings refer to; basesRepo is the bases repository in them.
	stubs     map[string]cty.Value
	basesRepo string
	// disk is the variable bounding the disk the wheel cache is on.
	disk string
}

var imageModules = []imageModule{
	{
		dir: "aws", settings: "gateway_environment_map", environments: "aws_ecr_repository.environments",
		stubs: map[string]cty.Value{"aws_ecr_repository": cty.ObjectVal(map[string]cty.Value{
			"bases": cty.ObjectVal(map[string]cty.Value{"repository_url": cty.StringVal("123456789012.dkr.ecr.us-east-1.amazonaws.com/gateway-main/bases")}),
		})},
		basesRepo: "123456789012.dkr.ecr.us-east-1.amazonaws.com/gateway-main/bases",
		disk:      "gateway_ephemeral_storage_gib",
	},
	{
		dir: "gcp", settings: "settings_all", environments: "local.environments_repository",
		stubs: map[string]cty.Value{"local": cty.ObjectVal(map[string]cty.Value{
			"bases_repository": cty.StringVal("us-central1-docker.pkg.dev/p/gateway-main-bases"),
			"data_dir":         cty.StringVal("/var/lib/gateway"),
		})},
		basesRepo: "us-central1-docker.pkg.dev/p/gateway-main-bases",
		disk:      "boot_disk_gib",
	},
}

// evalContext is the stubs plus var (vars) and local.image_bases.
func (im imageModule) evalContext(t *testing.T, m *module, vars map[string]cty.Value) *hcl.EvalContext {
	t.Helper()
	ctx := &hcl.EvalContext{Variables: map[string]cty.Value{}, Functions: tfFuncs}
	for k, v := range im.stubs {
		ctx.Variables[k] = v
	}
	ctx.Variables["var"] = cty.ObjectVal(vars)
	bases, diags := m.local(t, "image_bases").Value(ctx)
	if diags.HasErrors() {
		t.Fatalf("local.image_bases: %s", diags.Error())
	}
	locals := map[string]cty.Value{"image_bases": bases}
	if l, ok := im.stubs["local"]; ok {
		for k, v := range l.AsValueMap() {
			locals[k] = v
		}
	}
	ctx.Variables["local"] = cty.ObjectVal(locals)
	return ctx
}

// TestImageBuildSettings: each module configures the deployed gateway to
// build environments without a Docker engine: the layers builder, the
// environment repository, the base images as the gateway's code reads them
// (images.bases, rendered from base_images), the wheel cache on the
// gateway's disk and within its bound, and the package index from a
// variable or, with credentials, from a secret only.
func TestImageBuildSettings(t *testing.T) {
	for _, im := range imageModules {
		t.Run(im.dir, func(t *testing.T) {
			m := load(t, im.dir)
			set := items(t, m.local(t, im.settings))
			for _, k := range []string{"GATEWAY_IMAGES_REPOSITORY", "GATEWAY_IMAGES_BUILDER", "GATEWAY_IMAGES_BASES", "GATEWAY_IMAGES_PIP_INDEX_URL", "GATEWAY_IMAGES_WHEEL_CACHE_DIR", "GATEWAY_IMAGES_WHEEL_CACHE_MIB", "GATEWAY_DATA_DIR"} {
				if set[k] == nil {
					t.Fatalf("terraform/%s does not set %s", im.dir, k)
				}
			}
			if !references(set["GATEWAY_IMAGES_REPOSITORY"], im.environments) {
				t.Errorf("GATEWAY_IMAGES_REPOSITORY is %s, not the environment repository (%s)", m.source(set["GATEWAY_IMAGES_REPOSITORY"].Range()), im.environments)
			}
			// Neither Fargate tasks nor the instance group's container
			// reach a Docker engine: the builder that needs none, and that
			// refuses a package without a wheel before anything starts.
			if v, _ := evalString(t, set["GATEWAY_IMAGES_BUILDER"], nil); v != build.ModeLayers {
				t.Errorf("GATEWAY_IMAGES_BUILDER = %q, want %q", v, build.ModeLayers)
			}
			if !references(set["GATEWAY_IMAGES_WHEEL_CACHE_MIB"], "var.wheel_cache_mib") {
				t.Errorf("GATEWAY_IMAGES_WHEEL_CACHE_MIB is %s, not var.wheel_cache_mib", m.source(set["GATEWAY_IMAGES_WHEEL_CACHE_MIB"].Range()))
			}

			vars := map[string]cty.Value{
				"base_images":          m.defaultOf(t, "base_images"),
				"pip_index_url":        cty.StringVal("https://pypi.example.com/simple/"),
				"pip_index_url_secret": cty.False,
				"wheel_cache_mib":      cty.NumberIntVal(4096),
			}
			ctx := im.evalContext(t, m, vars)
			dataDir, _ := evalString(t, set["GATEWAY_DATA_DIR"], ctx)
			if cache, _ := evalString(t, set["GATEWAY_IMAGES_WHEEL_CACHE_DIR"], ctx); !strings.HasPrefix(cache, dataDir+"/") {
				t.Errorf("the wheel cache %q is not in the data directory %q, on the disk the module sizes", cache, dataDir)
			}
			if u, ok := evalString(t, set["GATEWAY_IMAGES_PIP_INDEX_URL"], ctx); !ok || u != "https://pypi.example.com/simple/" {
				t.Errorf("with pip_index_url, GATEWAY_IMAGES_PIP_INDEX_URL = %q", u)
			}
			vars["pip_index_url_secret"] = cty.True
			vars["pip_index_url"] = cty.NullVal(cty.String)
			if u, ok := evalString(t, set["GATEWAY_IMAGES_PIP_INDEX_URL"], im.evalContext(t, m, vars)); ok {
				t.Errorf("with pip_index_url_secret, the settings still hold GATEWAY_IMAGES_PIP_INDEX_URL = %q: it must come from the secret alone", u)
			}

			// The bases the gateway gets, read by the code that reads them.
			for _, tc := range []struct {
				name  string
				value string // base_images; "" for the default
				want  []build.Base
			}{
				{"default", "", []build.Base{{Python: "3.11", Image: im.basesRepo + ":3.11", Platform: "linux/amd64"}}},
				{"several", `[{ python = "3.12", gpu = true }, { python = "3.11", platform = "linux/arm64" }, { python = "3.10", image = "registry.example/py:3.10@sha256:0123" }]`, []build.Base{
					{Python: "3.12", GPU: true, Image: im.basesRepo + ":3.12-gpu", Platform: "linux/amd64"},
					{Python: "3.11", Image: im.basesRepo + ":3.11-arm64", Platform: "linux/arm64"},
					{Python: "3.10", Image: "registry.example/py:3.10@sha256:0123", Platform: "linux/amd64"},
				}},
			} {
				if tc.value != "" {
					vars["base_images"] = m.variableValue(t, "base_images", literal(t, tc.value))
				} else {
					vars["base_images"] = m.defaultOf(t, "base_images")
				}
				js, ok := evalString(t, set["GATEWAY_IMAGES_BASES"], im.evalContext(t, m, vars))
				if !ok {
					t.Fatalf("%s: GATEWAY_IMAGES_BASES is null", tc.name)
				}
				t.Setenv("GATEWAY_PROVIDERS_LOCAL_TRUST_USERS", "true")
				t.Setenv("GATEWAY_AUTH_OIDC_ISSUER", "https://idp.example")
				t.Setenv("GATEWAY_DATA_DIR", t.TempDir())
				t.Setenv("GATEWAY_IMAGES_BASES", js)
				schema := server.ConfigSchema()
				cfg, err := schema.Load(schema.New(), "")
				if err != nil {
					t.Fatalf("%s: the gateway refuses GATEWAY_IMAGES_BASES=%s: %v", tc.name, js, err)
				}
				got, err := envs.ParseBases(cfg.Images.Bases)
				if err != nil {
					t.Fatalf("%s: images.bases %s: %v", tc.name, js, err)
				}
				if !reflect.DeepEqual(got, tc.want) {
					t.Errorf("%s: images.bases = %+v, want %+v (from %s)", tc.name, got, tc.want, js)
				}
			}
		})
	}
}

// TestImageVariablesValidate: bad image inputs are refused at plan, with
// the module's message, and good ones pass.
func TestImageVariablesValidate(t *testing.T) {
	cases := []struct {
		variable, value string
		ok              bool
	}{
		{"base_images", `[{ python = "3.11" }]`, true},
		{"base_images", `[{ python = "3.12", gpu = true }, { python = "3.12" }, { python = "3.12", platform = "linux/arm64" }]`, true},
		{"base_images", `[{ python = "3.10", image = "123456789012.dkr.ecr.us-east-1.amazonaws.com/py@sha256:0123" }]`, true},
		{"base_images", `[]`, false},
		{"base_images", `[{ python = "3" }]`, false},
		{"base_images", `[{ python = "3.11.4" }]`, false},
		{"base_images", `[{ python = "3.11", platform = "linux/s390x" }]`, false},
		{"base_images", `[{ python = "3.11", image = "a b" }]`, false},
		{"base_images", `[{ python = "3.11" }, { python = "3.11", image = "registry.example/py:3.11" }]`, false},
		{"pip_index_url", `null`, true},
		{"pip_index_url", `"https://pypi.example.com/simple/"`, true},
		{"pip_index_url", `"http://10.0.0.5:8080/simple"`, true},
		{"pip_index_url", `"https://user:token@pypi.example.com/simple/"`, false},
		{"pip_index_url", `"https://token@pypi.example.com/simple/"`, false},
		{"pip_index_url", `"ftp://pypi.example.com/simple/"`, false},
		{"wheel_cache_mib", `4096`, true},
		{"wheel_cache_mib", `32`, false},
		{"wheel_cache_mib", `100.5`, false},
	}
	for _, dir := range modules {
		m := load(t, dir)
		for _, tc := range cases {
			blk := m.block("variable", tc.variable)
			if blk == nil {
				t.Errorf("terraform/%s has no variable %q", dir, tc.variable)
				continue
			}
			v := literal(t, tc.value)
			if !v.IsNull() {
				v = m.variableValue(t, tc.variable, v)
			}
			ctx := &hcl.EvalContext{Functions: tfFuncs, Variables: map[string]cty.Value{"var": cty.ObjectVal(map[string]cty.Value{tc.variable: v})}}
			ok := true
			for _, val := range blk.Body.Blocks {
				if val.Type != "validation" {
					continue
				}
				c, diags := val.Body.Attributes["condition"].Expr.Value(ctx)
				if diags.HasErrors() {
					t.Fatalf("terraform/%s %s = %s: %s", dir, tc.variable, tc.value, diags.Error())
				}
				ok = ok && c.True()
			}
			if ok != tc.ok {
				t.Errorf("terraform/%s: %s = %s is accepted: %v, want %v", dir, tc.variable, tc.value, ok, tc.ok)
			}
		}
	}
}

// precondition returns the condition of the precondition of a resource
// that refers to ref.
func (m *module) precondition(t *testing.T, resource []string, ref string) hclsyntax.Expression {
	t.Helper()
	r := m.block("resource", resource...)
	if r == nil {
		t.Fatalf("terraform/%s has no resource %q", m.dir, resource)
	}
	for _, lc := range r.Body.Blocks {
		for _, pc := range lc.Body.Blocks {
			if c := pc.Body.Attributes["condition"]; lc.Type == "lifecycle" && pc.Type == "precondition" && c != nil && references(c.Expr, ref) {
				return c.Expr
			}
		}
	}
	t.Fatalf("terraform/%s: resource %q has no precondition on %s", m.dir, resource, ref)
	return nil
}

// TestWheelCacheFitsTheDisk: the wheel cache, the layers made from it and
// a build's scratch space must fit on the disk the gateway has: Fargate's
// ephemeral storage (raised only when asked for, since more is billed) or
// the instance group's boot disk.
func TestWheelCacheFitsTheDisk(t *testing.T) {
	for _, tc := range []struct {
		dir      string
		resource []string
		cache    int64
		disk     int64
		fits     bool
	}{
		{"aws", []string{"aws_ecs_task_definition", "gateway"}, 4096, 20, true},
		{"aws", []string{"aws_ecs_task_definition", "gateway"}, 9000, 20, false},
		{"aws", []string{"aws_ecs_task_definition", "gateway"}, 9000, 30, true},
		{"gcp", []string{"google_compute_instance_template", "gateway"}, 4096, 20, true},
		{"gcp", []string{"google_compute_instance_template", "gateway"}, 8192, 20, false},
		{"gcp", []string{"google_compute_instance_template", "gateway"}, 8192, 30, true},
	} {
		m := load(t, tc.dir)
		im := imageModules[slices.IndexFunc(imageModules, func(im imageModule) bool { return im.dir == tc.dir })]
		if def := m.defaultOf(t, "wheel_cache_mib"); !def.Equals(cty.NumberIntVal(4096)).True() {
			t.Errorf("terraform/%s: wheel_cache_mib defaults to %s, not the gateway's default 4096", tc.dir, def.GoString())
		}
		cond := m.precondition(t, tc.resource, "var.wheel_cache_mib")
		ctx := &hcl.EvalContext{Functions: tfFuncs, Variables: map[string]cty.Value{"var": cty.ObjectVal(map[string]cty.Value{
			"wheel_cache_mib": cty.NumberIntVal(tc.cache), im.disk: cty.NumberIntVal(tc.disk),
		})}}
		v, diags := cond.Value(ctx)
		if diags.HasErrors() {
			t.Fatalf("%s: %s", cond.Range(), diags.Error())
		}
		if v.True() != tc.fits {
			t.Errorf("terraform/%s: a %d MiB wheel cache on %d GiB passes the precondition: %v, want %v", tc.dir, tc.cache, tc.disk, v.True(), tc.fits)
		}
	}

	// Fargate: the ephemeral_storage block only above the free 20 GiB.
	m := load(t, "aws")
	var forEach hclsyntax.Expression
	for _, b := range m.block("resource", "aws_ecs_task_definition", "gateway").Body.Blocks {
		if b.Type == "dynamic" && slices.Equal(b.Labels, []string{"ephemeral_storage"}) {
			forEach = b.Body.Attributes["for_each"].Expr
		}
	}
	if forEach == nil {
		t.Fatal("the gateway's task definition sets no ephemeral_storage")
	}
	for gib, blocks := range map[int64]int{20: 0, 21: 1, 200: 1} {
		v, diags := forEach.Value(&hcl.EvalContext{Variables: map[string]cty.Value{"var": cty.ObjectVal(map[string]cty.Value{"gateway_ephemeral_storage_gib": cty.NumberIntVal(gib)})}})
		if diags.HasErrors() {
			t.Fatal(diags)
		}
		if v.LengthInt() != blocks {
			t.Errorf("gateway_ephemeral_storage_gib = %d gives %d ephemeral_storage blocks, want %d", gib, v.LengthInt(), blocks)
		}
	}
}

// TestIndexCredentialsOnlyInSecrets: an index URL with credentials reaches
// the gateway from the cloud's secret store, read by the identity that
// starts the gateway, never from the task definition or instance metadata.
func TestIndexCredentialsOnlyInSecrets(t *testing.T) {
	aws := load(t, "aws")
	secrets := items(t, aws.local(t, "gateway_secrets_map"))
	if e := secrets["GATEWAY_IMAGES_PIP_INDEX_URL"]; e == nil || !references(e, "aws_secretsmanager_secret.pip_index_url") {
		t.Error("terraform/aws: the task definition's secrets do not take GATEWAY_IMAGES_PIP_INDEX_URL from aws_secretsmanager_secret.pip_index_url")
	}
	if !references(aws.local(t, "gateway_secret_arns"), "aws_secretsmanager_secret.pip_index_url") {
		t.Error("terraform/aws: the gateway's execution role may not read the index URL's secret (local.gateway_secret_arns)")
	}
	if aws.block("resource", "aws_secretsmanager_secret_version", "pip_index_url") != nil {
		t.Error("terraform/aws: the index URL's secret gets its value from Terraform, which would keep it in the state")
	}

	// A URL given both ways is refused: the plain one could be the one with
	// credentials, in the task definition or the instance metadata.
	for _, tc := range []struct {
		dir      string
		resource []string
	}{{"aws", []string{"aws_ecs_task_definition", "gateway"}}, {"gcp", []string{"google_compute_instance_template", "gateway"}}} {
		m := load(t, tc.dir)
		cond := m.precondition(t, tc.resource, "var.pip_index_url_secret")
		for _, c := range []struct {
			url    cty.Value
			secret bool
			ok     bool
		}{
			{cty.NullVal(cty.String), false, true},
			{cty.StringVal("https://pypi.example.com/simple/"), false, true},
			{cty.NullVal(cty.String), true, true},
			{cty.StringVal("https://pypi.example.com/simple/"), true, false},
		} {
			v, diags := cond.Value(&hcl.EvalContext{Variables: map[string]cty.Value{"var": cty.ObjectVal(map[string]cty.Value{
				"pip_index_url": c.url, "pip_index_url_secret": cty.BoolVal(c.secret),
			})}})
			if diags.HasErrors() {
				t.Fatal(diags)
			}
			if v.True() != c.ok {
				t.Errorf("terraform/%s: pip_index_url = %s with pip_index_url_secret = %v passes: %v, want %v", tc.dir, c.url.GoString(), c.secret, v.True(), c.ok)
			}
		}
	}

	gcp := load(t, "gcp")
	if !references(gcp.local(t, "gateway_secrets"), "google_secret_manager_secret.pip_index_url") {
		t.Error("terraform/gcp: the gateway's service account is not granted the index URL's secret (local.gateway_secrets)")
	}
	script := gcp.text[filepath.Join("gcp", "startup.sh.tftpl")]
	if !strings.Contains(script, "readonly PIP_INDEX_URL_SECRET='${pip_index_url_secret}'") || !strings.Contains(script, `printf 'GATEWAY_IMAGES_PIP_INDEX_URL=%s\n' "$index_url" >>"$ENV_FILE"`) {
		t.Error("terraform/gcp: the startup script does not put the index URL from its secret into the container's environment file")
	}
	if !strings.Contains(gcp.text[filepath.Join("gcp", "compute.tf")], "pip_index_url_secret     = local.pip_index_url_secret_path") {
		t.Error("terraform/gcp: the startup script is not given the index URL's secret")
	}
}

// TestImageRepositories: every image repository the modules make drops
// untagged images (those a newer push of their tag replaced) after a week,
// and the Dask members may pull environments.
func TestImageRepositories(t *testing.T) {
	aws := load(t, "aws")
	policies := map[string]bool{}
	for _, b := range aws.blocks("resource") {
		if b.Labels[0] != "aws_ecr_lifecycle_policy" {
			continue
		}
		js, _ := evalString(t, b.Body.Attributes["policy"].Expr, &hcl.EvalContext{Functions: tfFuncs, Variables: map[string]cty.Value{
			"local": cty.ObjectVal(map[string]cty.Value{"expire_untagged_policy": mustEval(t, aws.local(t, "expire_untagged_policy"))}),
		}})
		var doc struct {
			Rules []struct {
				Selection struct {
					TagStatus   string `json:"tagStatus"`
					CountType   string `json:"countType"`
					CountNumber int    `json:"countNumber"`
				} `json:"selection"`
				Action struct {
					Type string `json:"type"`
				} `json:"action"`
			} `json:"rules"`
		}
		if err := json.Unmarshal([]byte(js), &doc); err != nil || len(doc.Rules) != 1 {
			t.Fatalf("%s: the lifecycle policy is not one rule: %v %s", b.DefRange(), err, js)
		}
		r := doc.Rules[0]
		if r.Selection.TagStatus != "untagged" || r.Selection.CountType != "sinceImagePushed" || r.Selection.CountNumber != 7 || r.Action.Type != "expire" {
			t.Errorf("%s: the lifecycle policy %s does not expire untagged images after 7 days", b.DefRange(), js)
		}
		for _, repo := range []string{"environments", "bases"} {
			if references(b.Body.Attributes["repository"].Expr, "aws_ecr_repository."+repo) {
				policies[repo] = true
			}
		}
	}
	for _, b := range aws.blocks("resource") {
		if b.Labels[0] == "aws_ecr_repository" && !policies[b.Labels[1]] {
			t.Errorf("%s: the repository %s has no lifecycle policy", b.DefRange(), b.Labels[1])
		}
	}
	// Members (EC2 instances, and ECS for Fargate tasks) pull environments.
	if !references(aws.local(t, "member_pull_repository_arns"), "aws_ecr_repository.environments") {
		t.Error("terraform/aws: local.member_pull_repository_arns lacks the environment repository")
	}
	for _, doc := range []string{"member", "dask_execution"} {
		found := false
		for _, st := range aws.block("data", "aws_iam_policy_document", doc).Body.Blocks {
			if res := st.Body.Attributes["resources"]; st.Type == "statement" && res != nil && references(res.Expr, "local.member_pull_repository_arns") {
				found = slices.Contains(literalStrings(t, st.Body.Attributes["actions"]), "ecr:BatchGetImage") &&
					slices.Contains(literalStrings(t, st.Body.Attributes["actions"]), "ecr:GetDownloadUrlForLayer")
			}
		}
		if !found {
			t.Errorf("terraform/aws: %s cannot pull from local.member_pull_repository_arns", doc)
		}
	}

	gcp := load(t, "gcp")
	for _, b := range gcp.blocks("resource") {
		if b.Labels[0] != "google_artifact_registry_repository" {
			continue
		}
		untagged := false
		for _, cp := range b.Body.Blocks {
			if cp.Type != "cleanup_policies" {
				continue
			}
			for _, c := range cp.Body.Blocks {
				if c.Type == "condition" && literalString(c.Body, "tag_state") == "UNTAGGED" && literalString(c.Body, "older_than") == "604800s" && literalString(cp.Body, "action") == "DELETE" {
					untagged = true
				}
			}
		}
		if !untagged {
			t.Errorf("%s: the repository %s does not delete untagged versions after 7 days", b.DefRange(), b.Labels[1])
		}
	}
}

func mustEval(t *testing.T, e hclsyntax.Expression) cty.Value {
	t.Helper()
	v, diags := e.Value(&hcl.EvalContext{Functions: tfFuncs})
	if diags.HasErrors() {
		t.Fatalf("%s: %s", e.Range(), diags.Error())
	}
	return v
}
