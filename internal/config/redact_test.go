package config

import (
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"
)

// settable is one configuration field a string can be put in.
type settable struct {
	key    string
	secret bool
	field  reflect.Value
}

// stringFields lists, by reflection, every field of c that can hold text:
// strings, lists of strings and lists of maps. A field of another kind that
// is not a number, a bool or a duration fails the test, so that a new kind
// of key cannot skip this check.
func stringFields(t *testing.T, v reflect.Value, prefix string) []settable {
	t.Helper()
	var out []settable
	for i := 0; i < v.NumField(); i++ {
		f := v.Type().Field(i)
		key := f.Tag.Get("mapstructure")
		if key == "" {
			continue
		}
		fv := v.Field(i)
		switch {
		case f.Type == reflect.TypeOf(time.Duration(0)):
		case f.Type.Kind() == reflect.Struct:
			out = append(out, stringFields(t, fv, prefix+key+".")...)
		case f.Type.Kind() == reflect.String,
			f.Type == reflect.TypeOf([]string(nil)),
			f.Type == reflect.TypeOf([]map[string]any(nil)):
			out = append(out, settable{key: prefix + key, secret: f.Tag.Get("secret") == "true", field: fv})
		case f.Type.Kind() == reflect.Bool, f.Type.Kind() == reflect.Int, f.Type.Kind() == reflect.Float64:
		default:
			t.Fatalf("%s%s is a %s: teach this test to put a credential in it", prefix, key, f.Type)
		}
	}
	return out
}

// configFields is stringFields of a Config holding the test schema's
// sections, whose keys follow Config's own.
func configFields(t *testing.T, c *Config) []settable {
	t.Helper()
	fields := stringFields(t, reflect.ValueOf(c).Elem(), "")
	c.providers = map[string]any{}
	for _, sec := range schema().sections {
		d := sec.Defaults()
		c.providers[sec.Name] = d
		fields = append(fields, stringFields(t, reflect.ValueOf(d).Elem(), "providers."+sec.Name+".")...)
	}
	return fields
}

// put stores s in a field of any kind stringFields lists: as the string,
// as a list's only element, or as a value of a list's map next to a
// secret-named entry.
func put(f settable, s, mapSecret string) {
	switch f.field.Kind() {
	case reflect.String:
		f.field.SetString(s)
	case reflect.Slice:
		if f.field.Type().Elem().Kind() == reflect.String {
			f.field.Set(reflect.ValueOf([]string{s}))
			return
		}
		f.field.Set(reflect.ValueOf([]map[string]any{{"image": s, "password": mapSecret, "Access_Token": mapSecret + "-2", "nested": []any{s}}}))
	}
}

// TestRedactedEveryKey: whatever key holds a URL with credentials (issue
// 14, finding 6: images.pip_index_url's user-info and a password= in
// database.url's query were printed), `gateway config print` shows the URL
// without them; harmless values, and the harmless parts of URLs, still
// print.
func TestRedactedEveryKey(t *testing.T) {
	var c Config
	fields := configFields(t, &c)
	if len(fields) < 48 {
		t.Fatalf("found %03d text keys; the walk misses some", len(fields))
	}
	variants := []struct {
		name    string
		value   func(n int) string
		hidden  func(n int) []string
		visible func(n int) []string
	}{
		{
			name: "user-info and sensitive query parameters",
			value: func(n int) string {
				return fmt.Sprintf("https://user%03d:pw%03dsecret@host%03d.example:8443/simple/?PassWord=qpw%03d&sslpassword=sslpw%03d&X-Amz-Signature=sig%03d&access_token=at%03d&Token=tok%03d&pwd=pwd%03d&api_key=ak%03d&region=harmless%03d#frag%03d",
					n, n, n, n, n, n, n, n, n, n, n, n)
			},
			hidden: func(n int) []string {
				return []string{fmt.Sprintf("pw%03dsecret", n), fmt.Sprintf("qpw%03d", n), fmt.Sprintf("sslpw%03d", n), fmt.Sprintf("sig%03d", n),
					fmt.Sprintf("at%03d&", n), fmt.Sprintf("tok%03d", n), fmt.Sprintf("pwd%03d", n), fmt.Sprintf("ak%03d", n), fmt.Sprintf("mapsecret%03d", n)}
			},
			visible: func(n int) []string {
				return []string{fmt.Sprintf("user%03d:REDACTED@host%03d.example:8443/simple/", n, n), fmt.Sprintf("region=harmless%03d", n), fmt.Sprintf("#frag%03d", n)}
			},
		},
		{
			name:    "a token as the user name",
			value:   func(n int) string { return fmt.Sprintf("https://ghp%03dtoken@index%03d.example/simple", n, n) },
			hidden:  func(n int) []string { return []string{fmt.Sprintf("ghp%03dtoken", n), fmt.Sprintf("mapsecret%03d", n)} },
			visible: func(n int) []string { return []string{fmt.Sprintf("https://REDACTED@index%03d.example/simple", n)} },
		},
		{
			name:    "a token in the fragment",
			value:   func(n int) string { return fmt.Sprintf("https://idp%03d.example/cb#id_token=frag%03dtoken", n, n) },
			hidden:  func(n int) []string { return []string{fmt.Sprintf("frag%03dtoken", n)} },
			visible: func(n int) []string { return []string{fmt.Sprintf("https://idp%03d.example/cb", n)} },
		},
		{
			name: "a PostgreSQL URL",
			value: func(n int) string {
				return fmt.Sprintf("postgres://gw%03d:hunter%03d@db%03d.example/gw?sslmode=require&password=hunter%03dq", n, n, n, n)
			},
			hidden: func(n int) []string { return []string{fmt.Sprintf("hunter%03d", n)} },
			visible: func(n int) []string {
				return []string{fmt.Sprintf("postgres://gw%03d:REDACTED@db%03d.example/gw?sslmode=require&password=REDACTED", n, n)}
			},
		},
	}
	for _, vt := range variants {
		t.Run(vt.name, func(t *testing.T) {
			var c Config
			fields := configFields(t, &c)
			for n, f := range fields {
				put(f, vt.value(n), fmt.Sprintf("mapsecret%03d", n))
			}
			out := printed(t, &c)
			for n, f := range fields {
				for _, h := range vt.hidden(n) {
					if strings.Contains(out, h) {
						t.Errorf("%s: %q is printed", f.key, h)
					}
				}
				if f.secret {
					continue // a secret key may hide its URL whole
				}
				for _, v := range vt.visible(n) {
					if !strings.Contains(out, v) {
						t.Errorf("%s: %q is not printed", f.key, v)
					}
				}
			}
			if t.Failed() {
				t.Logf("printed:\n%s", out)
			}
		})
	}

	// Values that are not URLs print as they are, except secret keys'.
	t.Run("harmless values", func(t *testing.T) {
		var c Config
		fields := configFields(t, &c)
		for n, f := range fields {
			put(f, fmt.Sprintf("plain-value-%03d", n), "mapsecret")
		}
		out := printed(t, &c)
		for n, f := range fields {
			v := fmt.Sprintf("plain-value-%03d\n", n)
			if shown := strings.Contains(out, v); shown == f.secret {
				t.Errorf("%s (secret %v): printed %v", f.key, f.secret, shown)
			}
		}
	})
}

// TestRedactedSecretURLs: a key marked secret whose value is a URL prints
// its scheme and host only (issue 32, finding 4: bench.alert_webhook's
// path, where a webhook keeps its secret, was printed whole). Every secret
// key, every place a URL may carry a secret.
func TestRedactedSecretURLs(t *testing.T) {
	var probe Config
	var secrets []string
	for _, f := range configFields(t, &probe) {
		if f.secret {
			secrets = append(secrets, f.key)
		}
	}
	if len(secrets) < 6 {
		t.Fatalf("found %d secret keys: %v; the walk misses some", len(secrets), secrets)
	}
	for _, tc := range []struct {
		name, value, hidden, shown string
	}{
		{"a webhook's path", "https://hooks.example/T000/B000/XXXXsecret", "XXXXsecret", "https://hooks.example/REDACTED"},
		{"a token as the user name", "https://ghp-token@index.example/simple", "ghp-token", "https://index.example/REDACTED"},
		{"a database's user, name and query", "postgres://gw-user:pw@db.example:5432/gwdb?sslmode=require", "gw-user", "postgres://db.example:5432/REDACTED"},
		{"a query parameter of any name", "https://hooks.example/?k=q-secret", "q-secret", "https://hooks.example/REDACTED"},
		{"a fragment", "https://hooks.example#f-secret", "f-secret", "https://hooks.example/REDACTED"},
		{"an opaque part", "https://hooks.example:8443/services/opaque-secret/", "opaque-secret", "https://hooks.example:8443/REDACTED"},
		{"no host", "sqlite:///var/lib/gateway/gw-secret.db", "gw-secret", "REDACTED"},
		{"a URL that does not parse", "https://hooks.example/%zz-secret", "zz-secret", "REDACTED"},
		{"scheme and host alone", "https://hooks.example/", "", "https://hooks.example"},
	} {
		for _, key := range secrets {
			t.Run(tc.name+"/"+key, func(t *testing.T) {
				var c Config
				for _, f := range configFields(t, &c) {
					if f.key == key {
						put(f, tc.value, "mapsecret")
					}
				}
				out := printed(t, &c)
				if tc.hidden != "" && strings.Contains(out, tc.hidden) {
					t.Errorf("%s = %s: %q is printed:\n%s", key, tc.value, tc.hidden, out)
				}
				leaf := key[strings.LastIndex(key, ".")+1:]
				if want := leaf + ": " + tc.shown + "\n"; !strings.Contains(out, want) {
					t.Errorf("%s = %s: %q is not printed:\n%s", key, tc.value, want, out)
				}
			})
		}
	}
}

// printed is what `gateway config print` writes for c.
func printed(t *testing.T, c *Config) string {
	t.Helper()
	b, err := yaml.Marshal(c.Redacted())
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestRedactURL(t *testing.T) {
	tests := []struct{ in, want string }{
		{"", ""},
		{"not a url", "not a url"},
		{"127.0.0.1:8000", "127.0.0.1:8000"},
		{"https://idp.example/realms/x", "https://idp.example/realms/x"},
		{"sqlite:///var/lib/gateway/gateway.db", "sqlite:///var/lib/gateway/gateway.db"},
		{"postgres://gw:pw@db/gw?sslmode=disable", "postgres://gw:REDACTED@db/gw?sslmode=disable"},
		{"postgres://gw@db/gw?sslmode=require&password=pw&PASSWD=x&sslpassword=k", "postgres://REDACTED@db/gw?sslmode=require&password=REDACTED&PASSWD=REDACTED&sslpassword=REDACTED"},
		{"https://b.s3.amazonaws.com/o?X-Amz-Credential=AKIA&X-Amz-Signature=abc&X-Amz-Security-Token=t&X-Amz-Expires=60",
			"https://b.s3.amazonaws.com/o?X-Amz-Credential=REDACTED&X-Amz-Signature=REDACTED&X-Amz-Security-Token=REDACTED&X-Amz-Expires=60"},
		{"https://a.blob.core.windows.net/c?sv=2020&sig=abc", "https://a.blob.core.windows.net/c?sv=2020&sig=REDACTED"},
		{"https://h/x?token", "https://h/x?REDACTED"},
		{"https://u:p%zz@h/", "REDACTED"},
	}
	for _, tt := range tests {
		if got := RedactURL(tt.in); got != tt.want {
			t.Errorf("RedactURL(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}
