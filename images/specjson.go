package images

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
)

// Caps on a spec's lists and strings. A spec arrives from anyone who may
// build an environment, and decoding a list costs more than its bytes (a
// Package is five strings, 80 bytes, for the three bytes of "{},"): the
// caps bound what one spec can cost, whatever its shape. Real environments
// are far below them: a big conda or pip environment has 500 to 1,500
// packages, one channel or three, a code part per local package.
const (
	// MaxPackages bounds the packages of one spec.
	MaxPackages = 10_000
	// MaxChannels bounds the conda channels of one spec.
	MaxChannels = 100
	// MaxCodeParts bounds the code parts of one spec (and of one upload).
	MaxCodeParts = 1024
	// MaxStringBytes bounds each string of a spec: a name, version,
	// build, channel (URLs included), subdir or digest.
	MaxStringBytes = 1024
)

// UnmarshalJSON decodes a spec one list element at a time, checking each
// against the caps as it comes, so that a hostile spec is refused after
// costing a small multiple of the bytes it took to send. Keys match as
// encoding/json matches them (case-insensitively), unknown keys are
// skipped, and null leaves the spec as it is.
func (s *Spec) UnmarshalJSON(b []byte) error {
	if string(bytes.TrimSpace(b)) == "null" {
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	if err := openDelim(dec, '{', "", reflect.TypeFor[Spec]()); err != nil {
		return err
	}
	var out Spec
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return err
		}
		key, _ := t.(string)
		switch {
		case strings.EqualFold(key, "python"):
			err = decodeField(dec, key, &out.Python)
		case strings.EqualFold(key, "platform"):
			err = decodeField(dec, key, &out.Platform)
		case strings.EqualFold(key, "gpu"):
			err = decodeField(dec, key, &out.GPU)
		case strings.EqualFold(key, "packages"):
			out.Packages, err = decodeList(dec, "packages", MaxPackages, checkPackageJSON)
		case strings.EqualFold(key, "channels"):
			out.Channels, err = decodeList[string](dec, "channels", MaxChannels, nil)
		case strings.EqualFold(key, "code"):
			out.Code, err = decodeList(dec, "code", MaxCodeParts, checkCodePartJSON)
		default:
			// Skipped as encoding/json skips it, at the cost of one copy.
			var skip json.RawMessage
			err = dec.Decode(&skip)
		}
		if err != nil {
			return err
		}
	}
	if _, err := dec.Token(); err != nil {
		return err
	}
	*s = out
	return nil
}

// openDelim reads the opening '{' or '[' of a value of type typ, or
// answers the *json.UnmarshalTypeError the JSON decoder would.
func openDelim(dec *json.Decoder, want json.Delim, field string, typ reflect.Type) error {
	off := dec.InputOffset()
	t, err := dec.Token()
	if err != nil {
		return err
	}
	if d, ok := t.(json.Delim); ok && d == want {
		return nil
	}
	return &json.UnmarshalTypeError{Value: jsonKind(t), Type: typ, Offset: off, Field: field}
}

// jsonKind names a token's JSON kind, as json.UnmarshalTypeError.Value does.
func jsonKind(t json.Token) string {
	switch t.(type) {
	case json.Delim:
		if t == json.Delim('[') {
			return "array"
		}
		return "object"
	case string:
		return "string"
	case float64, json.Number:
		return "number"
	case bool:
		return "bool"
	}
	return "null"
}

// decodeField decodes one value into v, naming field in a type error.
func decodeField(dec *json.Decoder, field string, v any) error {
	err := dec.Decode(v)
	var ute *json.UnmarshalTypeError
	if errors.As(err, &ute) {
		ute.Field = joinField(field, ute.Field)
	}
	if s, ok := v.(*string); ok && err == nil {
		err = checkLen(field, *s)
	}
	return err
}

func joinField(parent, child string) string {
	if child == "" {
		return parent
	}
	return parent + "." + child
}

// decodeList decodes a JSON array (or null) of T element by element,
// refusing it past max elements or at the first element check (if any)
// refuses. A string element is checked against MaxStringBytes as it is
// decoded.
func decodeList[T any](dec *json.Decoder, field string, max int, check func(T) error) ([]T, error) {
	t, err := dec.Token()
	if err != nil {
		return nil, err
	}
	if t == nil {
		// A null list is no list, as encoding/json has it.
		return nil, nil
	}
	if d, ok := t.(json.Delim); !ok || d != '[' {
		return nil, &json.UnmarshalTypeError{Value: jsonKind(t), Type: reflect.TypeFor[[]T](), Offset: dec.InputOffset(), Field: field}
	}
	var out []T
	for dec.More() {
		if len(out) == max {
			return nil, errTooMany(field, max)
		}
		var v T
		if err := decodeField(dec, fmt.Sprintf("%s[%d]", field, len(out)), &v); err != nil {
			return nil, err
		}
		if check != nil {
			if err := check(v); err != nil {
				return nil, err
			}
		}
		out = append(out, v)
	}
	if _, err := dec.Token(); err != nil {
		return nil, err
	}
	return out, nil
}

// checkLen refuses a string over MaxStringBytes.
func checkLen(what, s string) error {
	if len(s) > MaxStringBytes {
		return fmt.Errorf("%w: %s is %d bytes long, over the limit of %d", ErrInvalidSpec, what, len(s), MaxStringBytes)
	}
	return nil
}

// checkPackageJSON refuses, as it is decoded, a package that Normalize
// would refuse for its empty name, or that carries a string over the cap:
// a list of empty objects then costs one element, not a million.
func checkPackageJSON(p Package) error {
	if strings.TrimSpace(p.Name) == "" {
		return errEmptyName(p)
	}
	return checkPackageLens(p)
}

func errEmptyName(p Package) error {
	return fmt.Errorf("%w: a package has an empty name (version %q)", ErrInvalidSpec, p.Version)
}

// checkPackageLens refuses a package with a string over MaxStringBytes.
func checkPackageLens(p Package) error {
	for _, f := range [...]struct{ what, s string }{
		{"a package name", p.Name}, {"a package version", p.Version}, {"a conda build", p.Build},
		{"a conda channel", p.Channel}, {"a conda subdir", p.Subdir},
	} {
		if err := checkLen(f.what, f.s); err != nil {
			return err
		}
	}
	return nil
}

func checkCodePartJSON(cp CodePart) error {
	if err := checkLen("a code part name", cp.Name); err != nil {
		return err
	}
	return checkLen("a code part digest", cp.Digest)
}

// checkCaps refuses a spec with lists longer than their caps, however it
// was made.
func (s Spec) checkCaps() error {
	for _, l := range [...]struct {
		what   string
		n, max int
	}{{"packages", len(s.Packages), MaxPackages}, {"channels", len(s.Channels), MaxChannels}, {"code", len(s.Code), MaxCodeParts}} {
		if l.n > l.max {
			return errTooMany(l.what, l.max)
		}
	}
	for _, c := range s.Channels {
		if err := checkLen("a conda channel", c); err != nil {
			return err
		}
	}
	for _, cp := range s.Code {
		if err := checkCodePartJSON(cp); err != nil {
			return err
		}
	}
	return nil
}

func errTooMany(what string, max int) error {
	return fmt.Errorf("%w: more than %d %s, the limit of one spec", ErrInvalidSpec, max, what)
}
