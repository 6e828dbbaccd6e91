package config

import (
	"reflect"
	"strings"
	"testing"
	"time"
)

// toySection is a made-up backend's section: this package's tests cannot
// import the real backends (internal/ is a leaf), and the mechanism is
// the same for any struct.
type toySection struct {
	Host       string        `mapstructure:"host" doc:"address the toy binds"`
	Grace      time.Duration `mapstructure:"grace" doc:"how long the toy waits"`
	Zones      []string      `mapstructure:"zones" doc:"where the toy runs"`
	Size       int           `mapstructure:"size" doc:"how big the toy is"`
	TrustUsers bool          `mapstructure:"trust_users" doc:"the toy runs users' code as the gateway"`
	Token      string        `mapstructure:"token" secret:"true" doc:"the toy's secret"`
}

type otherSection struct {
	Image string `mapstructure:"image" doc:"image the other runs"`
}

// schema is this package's tests' configuration: toy (the default
// provider, which wants trust_users outside dev) and other.
func schema() *Schema {
	s, err := NewSchema(
		Section{Name: "toy",
			Defaults: func() any { return &toySection{Host: "127.0.0.1", Grace: 10 * time.Second, Size: 3} },
			Problems: func(sec any, dev bool) []string {
				if s := sec.(*toySection); !dev && !s.TrustUsers {
					return []string{"set providers.toy.trust_users: true"}
				}
				return nil
			}},
		Section{Name: "other", Defaults: func() any { return &otherSection{} }},
	)
	if err != nil {
		panic(err) // the literal above is valid; TestNewSchema checks refusals
	}
	return s
}

// TestSections: a section's keys get their defaults, descriptions and
// environment variables from its struct; file and environment set them
// with the usual precedence; the decoded section is what Defaults' type
// holds, and its secrets are redacted.
func TestSections(t *testing.T) {
	s := schema()
	docs := s.Docs()
	for key, want := range map[string]string{
		"providers.toy.host": "address the toy binds", "providers.toy.grace": "how long the toy waits",
		"providers.other.image": "image the other runs", "provider": "backend for new clusters: toy or other",
	} {
		if docs[key] != want {
			t.Errorf("doc of %s = %q, want %q", key, docs[key], want)
		}
	}
	if got := EnvName("providers.toy.trust_users"); got != "GATEWAY_PROVIDERS_TOY_TRUST_USERS" {
		t.Errorf("EnvName = %s", got)
	}

	t.Setenv("GATEWAY_AUTH_OIDC_ISSUER", "https://idp.example")
	t.Setenv("GATEWAY_PROVIDERS_TOY_TRUST_USERS", "true")
	t.Setenv("GATEWAY_PROVIDERS_TOY_ZONES", "z1,z2")
	t.Setenv("GATEWAY_PROVIDERS_TOY_SIZE", "9")
	t.Setenv("GATEWAY_PROVIDERS_TOY_TOKEN", "tok-secret-value")
	file := writeFile(t, "providers:\n  toy:\n    size: 5\n    grace: 1m\n  other:\n    image: r.example/img:1\n")
	c, err := s.Load(s.New(), file)
	if err != nil {
		t.Fatal(err)
	}
	if c.Provider != "toy" {
		t.Errorf("provider = %q; want the first section, toy", c.Provider)
	}
	toy, ok := c.ProviderSection("toy").(*toySection)
	if !ok {
		t.Fatalf("providers.toy decoded as %T", c.ProviderSection("toy"))
	}
	want := toySection{Host: "127.0.0.1", Grace: time.Minute, Zones: []string{"z1", "z2"}, Size: 9, TrustUsers: true, Token: "tok-secret-value"}
	if !reflect.DeepEqual(*toy, want) {
		t.Errorf("providers.toy = %+v\nwant            %+v (default, file, environment over file)", *toy, want)
	}
	if other := c.ProviderSection("other").(*otherSection); other.Image != "r.example/img:1" {
		t.Errorf("providers.other.image = %q", other.Image)
	}
	if c.ProviderSection("nope") != nil {
		t.Error("a section nobody registered is not nil")
	}
	flat := strings.Join(flatten("", c.Redacted()), "\n")
	for _, w := range []string{"providers.toy.token=REDACTED", "providers.toy.grace=1m0s", "providers.toy.zones=[z1 z2]", "providers.other.image=r.example/img:1"} {
		if !strings.Contains(flat, w) {
			t.Errorf("redacted config lacks %q:\n%s", w, flat)
		}
	}
	if strings.Contains(flat, "tok-secret-value") {
		t.Error("the redacted config shows a section's secret")
	}

	// A key set outside the file (a flag, a test) under a section nobody
	// registered is refused like a typo in the file.
	v := s.New()
	v.Set("providers.nope.x", 1)
	if _, err := s.Load(v, ""); err == nil || !strings.Contains(err.Error(), "unknown key(s) providers.nope") {
		t.Errorf("Load with providers.nope.x = %v; want it refused", err)
	}
}

func TestNewSchema(t *testing.T) {
	toy := func() any { return &toySection{} }
	for _, tt := range []struct {
		name     string
		sections []Section
		want     string
	}{
		{"twice", []Section{{Name: "toy", Defaults: toy}, {Name: "toy", Defaults: toy}}, "section toy registered twice"},
		{"upper case", []Section{{Name: "Toy", Defaults: toy}}, `section name "Toy" must be lower-case`},
		{"no defaults", []Section{{Name: "toy"}}, "section toy has no Defaults"},
		{"not a pointer", []Section{{Name: "toy", Defaults: func() any { return toySection{} }}}, "want a pointer to a struct"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := NewSchema(tt.sections...); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("NewSchema = %v; want %q", err, tt.want)
			}
		})
	}
}
