package sharing

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/gatewayhq/gateway/store"
)

func TestParseSetting(t *testing.T) {
	for in, want := range map[string]Setting{"off": Off, "Groups": Groups, " any ": Any, "": DefaultSetting} {
		if got, err := ParseSetting(in); err != nil || got != want {
			t.Errorf("ParseSetting(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	if _, err := ParseSetting("everyone"); err == nil || !strings.Contains(err.Error(), "off, groups or any") {
		t.Errorf("ParseSetting(everyone): %v", err)
	}
}

func TestParseTargetsAndActions(t *testing.T) {
	for _, tc := range []struct {
		in   []string
		want string // fmt of the targets, or the error's text
	}{
		{[]string{"group:ops,user:bob", "group:ops"}, "[group:ops user:bob]"},
		{[]string{"User:bob"}, "[user:bob]"},
		{[]string{" group:data-science ", ""}, "[group:data-science]"},
		{[]string{"user:oidc:abc"}, "[user:oidc:abc]"},
		{[]string{"bob"}, "name whom to share with as user:NAME or group:NAME"},
		{[]string{"team:ops"}, "name whom to share with"},
		{[]string{"group:"}, "a group name of 1 to 256 printable characters"},
		{[]string{"group:Data Science"}, "[group:Data Science]"},
		{[]string{"user:a\tb"}, "a user name of 1 to 256"},
		{manyGroups(MaxTargets + 1), "at most 100 users and groups at once"},
		{manyGroups(MaxTargets), "group:g99]"},
		{[]string{"group:" + strings.Repeat("x", 257)}, "a group name of 1 to 256"},
		{[]string{"group:a\x00b"}, "printable"},
	} {
		got, err := ParseTargets(tc.in)
		s := fmt.Sprint(got)
		if err != nil {
			s = err.Error()
			if !errors.Is(err, ErrInvalid) {
				t.Errorf("ParseTargets(%q): %v is not ErrInvalid", tc.in, err)
			}
		}
		if !strings.Contains(s, tc.want) {
			t.Errorf("ParseTargets(%q) = %s, want %s", tc.in, s, tc.want)
		}
	}
	for _, tc := range []struct {
		in   []string
		want string
	}{
		{[]string{"stop,scale", "scale"}, "[scale stop]"},
		{[]string{"VIEW"}, "[]"},
		{nil, "[]"},
		{[]string{"scale,delete"}, `unknown action "delete"`},
	} {
		got, err := ParseActions(tc.in)
		s := fmt.Sprint(got)
		if err != nil {
			s = err.Error()
		}
		if !strings.Contains(s, tc.want) {
			t.Errorf("ParseActions(%q) = %s, want %s", tc.in, s, tc.want)
		}
	}
}

// TestDecide: what each person may do with a cluster of ann's, shared
// with bob (scale) and with group ops (stop), which ann belonged to when
// sharing, and with group guests, which she did not, under each setting.
func TestDecide(t *testing.T) {
	shares := []store.Share{
		{Kind: "user", Subject: "oidc:bob", SubjectName: "bob", Allow: []string{"scale"}},
		{Kind: "group", Subject: "ops", Allow: []string{"stop"}, OwnerMember: true},
		{Kind: "group", Subject: "guests"},
	}
	type who struct {
		id     string
		groups []string
	}
	people := map[string]who{
		"owner":         {"oidc:ann", []string{"ops"}},
		"bob":           {"oidc:bob", nil},
		"bob in ops":    {"oidc:bob", []string{"ops"}},
		"carol in ops":  {"oidc:carol", []string{"ops", "x"}},
		"guest":         {"oidc:gus", []string{"guests"}},
		"nobody":        {"oidc:dave", []string{"x"}},
		"no id, bob's?": {"", nil},
	}
	// want: "owner", "-" (nothing), or the actions beyond view and the shares.
	for _, tc := range []struct {
		setting Setting
		want    map[string]string
	}{
		{Any, map[string]string{"owner": "owner", "bob": "[scale] via [user:bob]", "bob in ops": "[scale stop] via [user:bob group:ops]",
			"carol in ops": "[stop] via [group:ops]", "guest": "[] via [group:guests]", "nobody": "-", "no id, bob's?": "-"}},
		{Groups, map[string]string{"owner": "owner", "bob": "-", "bob in ops": "[stop] via [group:ops]",
			"carol in ops": "[stop] via [group:ops]", "guest": "-", "nobody": "-", "no id, bob's?": "-"}},
		{Off, map[string]string{"owner": "owner", "bob": "-", "bob in ops": "-", "carol in ops": "-", "guest": "-", "nobody": "-", "no id, bob's?": "-"}},
	} {
		for name, p := range people {
			g := Decide(tc.setting, "oidc:ann", shares, p.id, p.groups)
			got := "-"
			switch {
			case g.Owner:
				got = "owner"
			case g.Shared():
				got = fmt.Sprintf("%v via %v", Strings(g.Allow), g.Via)
			}
			if got != tc.want[name] {
				t.Errorf("%s, %s: %s, want %s", tc.setting, name, got, tc.want[name])
			}
			for _, a := range []Action{View, Scale, Stop} {
				want := got == "owner" || (got != "-" && (a == View || slices.Contains(g.Allow, a)))
				if g.May(a) != want {
					t.Errorf("%s, %s: May(%s) = %v", tc.setting, name, a, !want)
				}
			}
		}
	}
}

func manyGroups(n int) []string {
	var out []string
	for i := range n {
		out = append(out, fmt.Sprintf("group:g%d", i))
	}
	return out
}
