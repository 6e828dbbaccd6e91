package images

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"reflect"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"
)

func TestParseUserReference(t *testing.T) {
	id := strings.Repeat("46d0", 16)
	cases := []struct {
		raw  string
		want string // the full name; "" for refused
		isID bool
	}{
		{"ghcr.io/org/img:1", "ghcr.io/org/img:1", false},
		{"python:3.11", "index.docker.io/library/python:3.11", false},
		{"org/img", "index.docker.io/org/img:latest", false},
		{"127.0.0.1:5000/envs@sha256:" + id, "127.0.0.1:5000/envs@sha256:" + id, false},
		{"46d0", "", true},
		{id, "", true},
		{"sha256:" + id, "", true},
		{"sha256:46d0", "", true},
		{"SHA256:46D0", "", true},
		{"cafe:1", "", true},
		{"", "", false},
		{" ghcr.io/org/img:1", "", false},
		{"reg/UPPER:1", "", false},
		{"@sha256:" + id, "", false},
	}
	for _, c := range cases {
		ref, err := ParseUserReference(c.raw)
		if c.want == "" {
			if !errors.Is(err, ErrNotReference) || errors.Is(err, ErrImageID) != c.isID {
				t.Errorf("%q: %v, want refused (image ID: %v)", c.raw, err, c.isID)
			}
			continue
		}
		if err != nil || ref.Name() != c.want {
			t.Errorf("%q: %v %v, want %s", c.raw, ref, err, c.want)
		}
	}
}

func TestReferenceNames(t *testing.T) {
	for raw, want := range map[string][]string{
		"python:3.11": {"index.docker.io/library/python:3.11", "docker.io/library/python:3.11", "python:3.11"},
		"org/img@sha256:" + strings.Repeat("a", 64): {"index.docker.io/org/img@sha256:" + strings.Repeat("a", 64), "docker.io/org/img@sha256:" + strings.Repeat("a", 64), "org/img@sha256:" + strings.Repeat("a", 64)},
		"ghcr.io/org/img:1":                         {"ghcr.io/org/img:1"},
	} {
		ref, err := name.ParseReference(raw)
		if err != nil {
			t.Fatal(err)
		}
		if got := ReferenceNames(ref); !reflect.DeepEqual(got, want) {
			t.Errorf("%s: %q, want %q", raw, got, want)
		}
	}
}

func TestSummaries(t *testing.T) {
	body := "DISTINCTIVE body of the server"
	reg := []struct {
		err  error
		want string
	}{
		{&transport.Error{StatusCode: http.StatusInternalServerError, Errors: []transport.Diagnostic{{Code: "UNKNOWN", Message: body}}}, "registry refused the image: 500"},
		{&transport.Error{StatusCode: http.StatusNotFound}, "registry has no such image"},
		{&transport.Error{StatusCode: http.StatusUnauthorized}, "registry refused access to the image: 401"},
		{fmt.Errorf("get: %w", &net.OpError{Op: "dial", Err: errors.New("connection refused " + body)}), "registry could not be reached"},
		{errors.New(body), "registry did not answer as an image registry"},
	}
	for _, c := range reg {
		if got := SummarizeRegistryError(c.err); got != c.want {
			t.Errorf("%v: %q, want %q", c.err, got, c.want)
		}
	}
	pull := map[string]string{
		"manifest for x:1 not found: manifest unknown":                                      "registry has no such image",
		"pull access denied for x, repository does not exist or may require 'docker login'": "registry has no such image",
		"Get \"http://127.0.0.1:1/v2/\": dial tcp 127.0.0.1:1: connect: connection refused": "registry could not be reached",
		"error parsing HTTP 418 response body: invalid character 'D': \"" + body + "\"":     "registry refused the image: 418",
		"something else entirely: " + body:                                                  "the engine could not pull the image (the gateway's log has its message)",
	}
	for msg, want := range pull {
		if got := SummarizePullError(msg); got != want || strings.Contains(got, "DISTINCTIVE") {
			t.Errorf("%q: %q, want %q", msg, got, want)
		}
	}
}
