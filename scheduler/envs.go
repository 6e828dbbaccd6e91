package scheduler

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/gatewayhq/gateway/images"
)

// ErrEnvMismatch is returned (wrapped, with the table of differences) when
// the image's software differs from the client's. 409.
var ErrEnvMismatch = errors.New("the image's software differs from the client's")

// EnvResolver turns a request's software options into an image.
type EnvResolver interface {
	// Resolve returns the image for an image reference or an environment
	// (a published name, or the hash of an environment built for it); both
	// empty means the backend's default image (ref ""). known says whether
	// the image's contents could be told.
	Resolve(ctx context.Context, who Who, image, env string) (ref string, contents images.Spec, known bool, err error)
}

// resolveSoftware sets o.Image from the software options and refuses an
// image whose checked packages differ from the client's (unless the
// request allows it).
func (c *Core) resolveSoftware(ctx context.Context, who Who, o *Options) error {
	if c.cfg.Envs == nil || (o.Image == "" && o.Env == "") {
		return nil
	}
	ref, contents, known, err := c.cfg.Envs.Resolve(ctx, who, o.Image, o.Env)
	if err != nil {
		return err
	}
	o.Image = ref
	if !known || len(o.ClientEnv) == 0 || o.AllowMismatch {
		return nil
	}
	if ms := images.CompareVersions(o.ClientEnv, contents); len(ms) > 0 {
		return fmt.Errorf("%w: %s has other versions than your Python (pass --allow-mismatch to run anyway, or let the gateway build your environment with --env auto):\n%s",
			ErrEnvMismatch, ref, images.FormatMismatches(ms))
	}
	return nil
}

// envExpect is what members check their software against at start.
func envExpect(o Options) string {
	if o.AllowMismatch || len(o.ClientEnv) == 0 {
		return ""
	}
	// The same keys and normal forms as the check before launch: a member
	// must not fail on what that check let through.
	b, _ := json.Marshal(images.ClientVersions(o.ClientEnv)) // a map of strings always encodes
	return string(b)
}
