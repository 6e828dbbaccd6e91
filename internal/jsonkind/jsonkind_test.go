package jsonkind

import (
	"reflect"
	"testing"
)

func TestOf(t *testing.T) {
	for _, tc := range []struct {
		v    any
		want string
	}{
		{0, "a whole number"}, {uint8(0), "a whole number"}, {new(int), "a whole number"},
		{0.5, "a number"}, {"", "a string"}, {false, "true or false"},
		{[]int{}, "an array"}, {map[string]string{}, "a JSON object"}, {struct{}{}, "a JSON object"},
		{func() {}, "a different type"},
	} {
		if got := Of(reflect.TypeOf(tc.v)); got != tc.want {
			t.Errorf("Of(%T) = %q, want %q", tc.v, got, tc.want)
		}
	}
	if got := Of(nil); got != "a different type" {
		t.Errorf("Of(nil) = %q", got)
	}
}
