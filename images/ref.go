package images

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"regexp"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"
)

// ErrNotReference is wrapped by ParseUserReference's error for a string
// that is not a repository reference.
var ErrNotReference = errors.New("not an image reference")

// ErrImageID is wrapped (with ErrNotReference) by ParseUserReference's
// error for an image ID or a prefix of one.
var ErrImageID = errors.New("an image ID is not an image reference")

type imageIDError struct{ raw string }

func (e imageIDError) Error() string {
	return fmt.Sprintf("%v: %q looks like an image ID; name the image by repository and tag (registry/repository:tag)", ErrNotReference, e.raw)
}

func (e imageIDError) Is(target error) bool { return target == ErrNotReference || target == ErrImageID }

// reImageID is what a Docker engine may resolve as an image ID rather than
// a name: a whole ID or any prefix of one, with or without "sha256:" (the
// engine falls back to an ID prefix search when no image has that name).
var reImageID = regexp.MustCompile(`^(?i:sha256:)?[0-9a-fA-F]+$`)

// LooksLikeImageID reports whether a Docker engine could take s for an
// image ID or a prefix of one.
func LooksLikeImageID(s string) bool { return reImageID.MatchString(strings.TrimSpace(s)) }

// ParseUserReference parses an image reference that a user named: a
// repository, with a tag or a digest (":latest" when neither). Image IDs,
// their prefixes and "sha256:…" without a repository are refused, since an
// engine resolves those against every image it holds, whoever made it.
func ParseUserReference(raw string) (name.Reference, error) {
	s := strings.TrimSpace(raw)
	if s == "" || s != raw || len(s) > 512 {
		return nil, fmt.Errorf("%w: %q (want registry/repository:tag)", ErrNotReference, raw)
	}
	if LooksLikeImageID(s) || strings.HasPrefix(strings.ToLower(s), "sha256:") {
		return nil, imageIDError{raw}
	}
	ref, err := name.ParseReference(s)
	if err != nil {
		return nil, fmt.Errorf("%w: %q: %v", ErrNotReference, raw, err)
	}
	// The last path element alone could still be taken for an ID by an
	// engine that gets the familiar form: refuse a repository that is all
	// hex digits and has no namespace.
	repo := ref.Context().RepositoryStr()
	if strings.TrimPrefix(repo, "library/") != repo && LooksLikeImageID(strings.TrimPrefix(repo, "library/")) {
		return nil, imageIDError{raw}
	}
	return ref, nil
}

// ReferenceNames returns the names an engine or registry gives the image
// at ref: the full one (registry/repository:tag or @digest) and, for
// Docker Hub, its docker.io and familiar forms ("python:3.11",
// "myorg/img:1"). Allow-lists are matched against each.
func ReferenceNames(ref name.Reference) []string {
	delim := ":"
	if _, ok := ref.(name.Digest); ok {
		delim = "@"
	}
	id := delim + ref.Identifier()
	reg := ref.Context().RegistryStr()
	repo := ref.Context().RepositoryStr()
	out := []string{reg + "/" + repo + id}
	if reg == name.DefaultRegistry {
		out = append(out, "docker.io/"+repo+id)
		out = append(out, strings.TrimPrefix(repo, "library/")+id)
	}
	return out
}

// SummarizeRegistryError says why a registry did not give an image, in a
// few words and never with the registry's own answer (an arbitrary server
// chooses that text): "registry refused the image: 500", "registry has no
// such image", "registry could not be reached".
func SummarizeRegistryError(err error) string {
	if err == nil {
		return ""
	}
	var te *transport.Error
	if errors.As(err, &te) {
		switch {
		case IsNotFound(err):
			return "registry has no such image"
		case te.StatusCode == http.StatusUnauthorized || te.StatusCode == http.StatusForbidden:
			return fmt.Sprintf("registry refused access to the image: %d", te.StatusCode)
		case te.StatusCode != 0:
			return fmt.Sprintf("registry refused the image: %d", te.StatusCode)
		}
	}
	var ne net.Error
	var oe *net.OpError
	switch {
	case errors.As(err, &oe), errors.As(err, &ne):
		return "registry could not be reached"
	}
	return "registry did not answer as an image registry"
}

// SummarizePullError says why an engine could not pull an image, from the
// engine's message, without repeating what the registry answered.
func SummarizePullError(msg string) string {
	m := strings.ToLower(msg)
	switch {
	case strings.Contains(m, "manifest unknown") || strings.Contains(m, "not found") || strings.Contains(m, "does not exist"):
		return "registry has no such image"
	case strings.Contains(m, "denied") || strings.Contains(m, "unauthorized") || strings.Contains(m, "authentication required"):
		return "registry refused access to the image"
	case strings.Contains(m, "connection refused") || strings.Contains(m, "no such host") || strings.Contains(m, "timeout") || strings.Contains(m, "i/o timeout") || strings.Contains(m, "network is unreachable"):
		return "registry could not be reached"
	}
	if c := reHTTPStatus.FindStringSubmatch(msg); c != nil {
		return "registry refused the image: " + c[1]
	}
	return "the engine could not pull the image (the gateway's log has its message)"
}

var reHTTPStatus = regexp.MustCompile(`\b(?:HTTP|status(?: code)?)[ :]+([1-5][0-9]{2})\b`)
