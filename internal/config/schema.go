package config

import (
	"fmt"
	"os"
	"reflect"
	"regexp"
	"sort"
	"strings"
	"time"

	"github.com/go-viper/mapstructure/v2"
	"github.com/spf13/viper"
)

// Section is a part of the configuration that a package outside this one
// owns: a backend's keys, providers.<Name>.*. Its keys, defaults,
// descriptions and environment variables come from its struct alone, so
// that adding a backend changes nothing in this package.
type Section struct {
	// Name is the key under providers: "ec2" owns providers.ec2.*, which
	// the environment sets as GATEWAY_PROVIDERS_EC2_*.
	Name string
	// Defaults returns a pointer to a new struct holding the section's
	// defaults. Its fields are tagged as Config's are: mapstructure (the
	// key), doc (what `gateway config keys` says of it) and secret:"true"
	// (redacted by Redacted).
	Defaults func() any
	// Problems says what is wrong with the decoded section (a pointer of
	// Defaults' type) when Name is the configured provider; dev is whether
	// the gateway runs in development mode. Nil checks nothing.
	Problems func(section any, dev bool) []string
}

// Schema is every key of the configuration: Config's own and those of the
// sections, in the order given (the first is the default provider).
type Schema struct {
	sections []Section
}

var sectionName = regexp.MustCompile(`^[a-z][a-z0-9_]*$`)

// NewSchema checks the sections: names unique, lower-case keys, and
// Defaults returning a pointer to a struct.
func NewSchema(sections ...Section) (*Schema, error) {
	seen := map[string]bool{}
	for _, sec := range sections {
		if !sectionName.MatchString(sec.Name) {
			return nil, fmt.Errorf("config: section name %q must be lower-case letters, digits and _", sec.Name)
		}
		if seen[sec.Name] {
			return nil, fmt.Errorf("config: section %s registered twice", sec.Name)
		}
		seen[sec.Name] = true
		if sec.Defaults == nil {
			return nil, fmt.Errorf("config: section %s has no Defaults", sec.Name)
		}
		if t := reflect.TypeOf(sec.Defaults()); t == nil || t.Kind() != reflect.Pointer || t.Elem().Kind() != reflect.Struct {
			return nil, fmt.Errorf("config: section %s: Defaults returns %v, want a pointer to a struct", sec.Name, t)
		}
	}
	return &Schema{sections: sections}, nil
}

// Names lists the sections' names in their order.
func (s *Schema) Names() []string {
	names := make([]string, len(s.sections))
	for i, sec := range s.sections {
		names[i] = sec.Name
	}
	return names
}

// defaults lists every key with its default value: the sections' in the
// form the file would give them (durations as text).
func (s *Schema) defaults() map[string]any {
	out := defaults()
	out["provider"] = ""
	if len(s.sections) > 0 {
		out["provider"] = s.sections[0].Name
	}
	for _, sec := range s.sections {
		flattenDefaults(reflect.ValueOf(sec.Defaults()).Elem(), "providers."+sec.Name+".", out)
	}
	return out
}

func flattenDefaults(v reflect.Value, prefix string, out map[string]any) {
	t := v.Type()
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		key := f.Tag.Get("mapstructure")
		if key == "" || key == "-" {
			continue
		}
		fv := v.Field(i)
		switch {
		case fv.Type() == reflect.TypeOf(time.Duration(0)):
			out[prefix+key] = fv.Interface().(time.Duration).String()
		case fv.Kind() == reflect.Struct:
			flattenDefaults(fv, prefix+key+".", out)
		case fv.Kind() == reflect.Slice && fv.IsNil():
			out[prefix+key] = reflect.MakeSlice(fv.Type(), 0, 0).Interface()
		default:
			out[prefix+key] = fv.Interface()
		}
	}
}

// Keys lists every configuration key, sorted.
func (s *Schema) Keys() []string {
	d := s.defaults()
	keys := make([]string, 0, len(d))
	for k := range d {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// Docs returns each key with its description, for `gateway config keys`.
func (s *Schema) Docs() map[string]string {
	out := map[string]string{}
	docs(reflect.TypeOf(Config{}), "", out)
	out["provider"] = "backend for new clusters: " + orList(s.Names())
	for _, sec := range s.sections {
		docs(reflect.TypeOf(sec.Defaults()).Elem(), "providers."+sec.Name+".", out)
	}
	return out
}

// orList reads "a, b or c".
func orList(names []string) string {
	if len(names) < 2 {
		return strings.Join(names, "")
	}
	return strings.Join(names[:len(names)-1], ", ") + " or " + names[len(names)-1]
}

// New returns a viper instance with defaults and the environment layer set;
// callers bind their flags to it, then call Load.
func (s *Schema) New() *viper.Viper {
	v := viper.New()
	for k, val := range s.defaults() {
		v.SetDefault(k, val)
	}
	v.SetEnvPrefix(EnvPrefix)
	v.SetEnvKeyReplacer(strings.NewReplacer(".", "_"))
	v.AutomaticEnv()
	return v
}

// Load reads the optional file and decodes everything into a Config,
// refusing unknown keys so that a typo does not silently do nothing.
func (s *Schema) Load(v *viper.Viper, file string) (*Config, error) {
	if file == "" {
		file = os.Getenv(EnvPrefix + "_CONFIG")
	}
	if file != "" {
		v.SetConfigFile(file)
		v.SetConfigType("yaml")
		if err := v.ReadInConfig(); err != nil {
			return nil, fmt.Errorf("config: read %s: %w", file, err)
		}
		known := map[string]bool{}
		for _, k := range s.Keys() {
			known[k] = true
		}
		var unknown []string
		for _, k := range v.AllKeys() {
			if !known[k] {
				unknown = append(unknown, k)
			}
		}
		if len(unknown) > 0 {
			sort.Strings(unknown)
			return nil, fmt.Errorf("config: %s: unknown key(s) %s (run: gateway config keys)", file, strings.Join(unknown, ", "))
		}
	}
	// The sections are decoded from what viper gathered under providers
	// (defaults, file, environment and flags merged), each into its own
	// type.
	var whole struct {
		Config    `mapstructure:",squash"`
		Providers map[string]any `mapstructure:"providers"`
	}
	if err := v.Unmarshal(&whole, viper.DecoderConfigOption(setDecoding)); err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	c := whole.Config
	c.providers = map[string]any{}
	for _, sec := range s.sections {
		out := reflect.New(reflect.TypeOf(sec.Defaults()).Elem()).Interface()
		dc := &mapstructure.DecoderConfig{Result: out}
		setDecoding(dc)
		dec, err := mapstructure.NewDecoder(dc)
		if err != nil {
			return nil, fmt.Errorf("config: providers.%s: %w", sec.Name, err)
		}
		if err := dec.Decode(whole.Providers[sec.Name]); err != nil {
			return nil, fmt.Errorf("config: providers.%s: %w", sec.Name, err)
		}
		c.providers[sec.Name] = out
	}
	var unknown []string
	for name := range whole.Providers {
		if _, ok := c.providers[name]; !ok {
			unknown = append(unknown, "providers."+name)
		}
	}
	if len(unknown) > 0 {
		sort.Strings(unknown)
		return nil, fmt.Errorf("config: unknown key(s) %s (run: gateway config keys)", strings.Join(unknown, ", "))
	}
	if err := c.finish(s.sections); err != nil {
		return nil, err
	}
	return &c, nil
}

// setDecoding is how every part of the configuration is decoded: unknown
// keys refused, and text (from the environment) turned into lists,
// durations and lists of maps. WeaklyTypedInput is viper's own default.
func setDecoding(dc *mapstructure.DecoderConfig) {
	dc.ErrorUnused = true
	dc.WeaklyTypedInput = true
	dc.DecodeHook = mapstructure.ComposeDecodeHookFunc(
		jsonListOfMapsHook,
		mapstructure.StringToTimeDurationHookFunc(),
		mapstructure.StringToSliceHookFunc(","),
	)
}

// ProviderSection is the decoded section of the named backend (a pointer
// of the type its Section's Defaults returns), nil when none is registered
// under that name.
func (c *Config) ProviderSection(name string) any {
	return c.providers[name]
}

// sectionProblems checks that the configured provider is registered, and
// its section.
func (c *Config) sectionProblems(sections []Section) []string {
	var names []string
	for _, sec := range sections {
		names = append(names, sec.Name)
		if sec.Name != c.Provider {
			continue
		}
		if sec.Problems == nil {
			return nil
		}
		return sec.Problems(c.providers[sec.Name], c.Dev)
	}
	return []string{fmt.Sprintf("provider %q is not available in this version (available: %s)", c.Provider, strings.Join(names, ", "))}
}
