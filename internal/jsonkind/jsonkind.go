// Package jsonkind names the JSON value a Go type decodes from, for
// messages about a value of the wrong type (json.UnmarshalTypeError) in
// JSON's terms rather than Go's.
package jsonkind

import "reflect"

// Of names the JSON value t decodes from: "a whole number", "a string",
// "a JSON object", ...
func Of(t reflect.Type) string {
	if t == nil {
		return "a different type"
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "a whole number"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	case reflect.Slice, reflect.Array:
		return "an array"
	case reflect.Map, reflect.Struct:
		return "a JSON object"
	}
	return "a different type"
}
