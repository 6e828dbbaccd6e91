package envs

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"sort"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"

	"github.com/gatewayhq/gateway/api/apitype"
	"github.com/gatewayhq/gateway/images"
	"github.com/gatewayhq/gateway/images/build"
	"github.com/gatewayhq/gateway/quota"
)

var (
	reHash      = regexp.MustCompile(`^[0-9a-f]{64}$`)
	reHexPrefix = regexp.MustCompile(`^[0-9a-f]+$`)
)

// CompileAllowed reads images.allowed_registries: globs over a full image
// reference, where * matches any run of characters (including '/') and ?
// one character.
func CompileAllowed(globs []string) ([]*regexp.Regexp, error) {
	var out []*regexp.Regexp
	for i, g := range globs {
		g = strings.TrimSpace(g)
		if g == "" || strings.ContainsAny(g, " \t\n") {
			return nil, fmt.Errorf("images.allowed_registries[%d] %q must be a glob over image references, like ghcr.io/myorg/*", i, g)
		}
		var sb strings.Builder
		sb.WriteString("^")
		for _, r := range g {
			switch r {
			case '*':
				sb.WriteString(".*")
			case '?':
				sb.WriteString(".")
			default:
				sb.WriteString(regexp.QuoteMeta(string(r)))
			}
		}
		sb.WriteString("$")
		out = append(out, regexp.MustCompile(sb.String()))
	}
	return out, nil
}

// validName reports whether name may be published: no spaces, '/' or ':',
// and not something that reads as an environment hash.
func validName(name string) bool {
	return name != "" && !strings.ContainsAny(name, " \t\n/:") && !reHash.MatchString(name)
}

// ParsePublished reads images.environments.
func ParsePublished(entries []map[string]any) ([]apitype.PublishedEnv, error) {
	var out []apitype.PublishedEnv
	seen := map[string]bool{}
	for i, e := range entries {
		var p apitype.PublishedEnv
		for k, v := range e {
			s, ok := v.(string)
			if !ok {
				return nil, fmt.Errorf("images.environments[%d].%s must be a string", i, k)
			}
			switch k {
			case "name":
				p.Name = s
			case "image":
				p.Image = s
			case "description":
				p.Description = s
			default:
				return nil, fmt.Errorf("images.environments[%d]: unknown key %q (known: name, image, description)", i, k)
			}
		}
		if p.Image == "" || !validName(p.Name) {
			return nil, fmt.Errorf("images.environments[%d] needs a name (no spaces, '/' or ':') and an image", i)
		}
		if seen[p.Name] {
			return nil, fmt.Errorf("images.environments: %q is published twice", p.Name)
		}
		seen[p.Name] = true
		out = append(out, p)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// numberLostZero reports whether a Python version read as a number is one
// whose minor version lost a trailing zero (3.10 read as 3.1): no Python 3
// the gateway can run has a one-digit minor version below 7.
func numberLostZero(s string) bool {
	_, minor, ok := strings.Cut(s, ".")
	return ok && len(minor) == 1 && minor < "7"
}

// ParseBases reads images.bases.
func ParseBases(entries []map[string]any) ([]build.Base, error) {
	var out []build.Base
	for i, e := range entries {
		var b build.Base
		for k, v := range e {
			switch k {
			case "python", "image", "platform":
				s := fmt.Sprint(v) // YAML reads 3.11 as a number
				if _, ok := v.(float64); ok && k == "python" && numberLostZero(s) {
					// 3.10 read as a number is 3.1: say how to write it.
					return nil, fmt.Errorf("images.bases[%d].python is the number %v: write the version as a string (python: \"3.10\"), since YAML and JSON read 3.10 as 3.1", i, v)
				}
				switch k {
				case "python":
					b.Python = s
				case "image":
					b.Image = s
				default:
					b.Platform = s
				}
			case "gpu":
				g, ok := v.(bool)
				if !ok {
					return nil, fmt.Errorf("images.bases[%d].gpu must be true or false", i)
				}
				b.GPU = g
			default:
				return nil, fmt.Errorf("images.bases[%d]: unknown key %q (known: python, image, gpu, platform)", i, k)
			}
		}
		if b.Python == "" || b.Image == "" {
			return nil, fmt.Errorf("images.bases[%d] needs python (like 3.11) and image", i)
		}
		out = append(out, b)
	}
	return out, nil
}

// mayRun is the one policy for images that users name: whether who may
// run raw, decided from the reference alone. raw must be a repository
// reference (never an image ID or a prefix of one, which an engine would
// resolve against every image it holds). An image of the environment
// repository holds users' code: it runs only for the users who asked for
// its environment, or for everyone when it is published; the allow-list
// does not open it. Published images and the backend's default image are
// always allowed; anything else only when images.allowed_registries
// matches it. Every refusal has the same message, whether the image
// exists or not.
func (s *Service) mayRun(ctx context.Context, who quota.Who, raw string) (name.Reference, error) {
	ref, err := images.ParseUserReference(raw)
	if errors.Is(err, images.ErrImageID) {
		return nil, fmt.Errorf("%w: an image ID or a prefix of one is not accepted as an image: name the image by repository and tag (registry/repository:tag)", ErrInvalid)
	}
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	// The same words for every refusal: they say nothing of whether the
	// image exists.
	refused := fmt.Errorf("%w: you may not run that image: name your own environment (--env auto), a published one (gateway env list), or an image that images.allowed_registries allows (ask an admin)", ErrInvalid)
	published, err := s.published(ctx)
	if err != nil {
		return nil, err
	}
	for _, p := range published {
		if sameImage(p.Image, ref) {
			return ref, nil
		}
	}
	if ref.Context().Name() == s.envRepoName() {
		_, ok, err := s.askedHash(ctx, who, ref.Identifier())
		if err != nil {
			return nil, err
		}
		if ok {
			return ref, nil
		}
		return nil, refused
	}
	if s.cfg.DefaultImage != "" && sameImage(s.cfg.DefaultImage, ref) {
		return ref, nil
	}
	for _, re := range s.cfg.Allowed {
		for _, n := range images.ReferenceNames(ref) {
			if re.MatchString(n) {
				return ref, nil
			}
		}
	}
	return nil, refused
}

// envRepoName is the environment repository's full name.
func (s *Service) envRepoName() string {
	repo := s.cfg.EnvRepo
	if s.builder != nil {
		repo = s.builder.Ref(strings.Repeat("0", 64))
	}
	r, err := name.ParseReference(repo)
	if err != nil {
		return build.LocalRepository // never empty: the local repository is always the environments'
	}
	return r.Context().Name()
}

// sameImage reports whether the configured reference cfg names ref.
func sameImage(cfg string, ref name.Reference) bool {
	c, err := name.ParseReference(cfg)
	return err == nil && c.Name() == ref.Name()
}

// ParseCondaChannels reads images.conda_channels: a list of {name, url}.
func ParseCondaChannels(entries []map[string]any) (map[string]string, error) {
	out := map[string]string{}
	for i, e := range entries {
		var name, u string
		for k, v := range e {
			s, ok := v.(string)
			if !ok {
				return nil, fmt.Errorf("images.conda_channels[%d].%s must be a string", i, k)
			}
			switch k {
			case "name":
				name = strings.TrimSpace(s)
			case "url":
				u = strings.TrimSpace(s)
			default:
				return nil, fmt.Errorf("images.conda_channels[%d]: unknown key %q (known: name, url)", i, k)
			}
		}
		if name == "" || u == "" {
			return nil, fmt.Errorf("images.conda_channels[%d] needs a name (as clients write it, like conda-forge) and a url", i)
		}
		if _, dup := out[name]; dup {
			return nil, fmt.Errorf("images.conda_channels: %q is listed twice", name)
		}
		out[name] = u
	}
	return out, nil
}
