package server

import (
	"fmt"
	"time"

	"github.com/gatewayhq/gateway/internal/config"
	"github.com/gatewayhq/gateway/internal/crashpoint"
	"github.com/gatewayhq/gateway/providers"
	"github.com/gatewayhq/gateway/providers/docker"
	"github.com/gatewayhq/gateway/providers/ec2"
	"github.com/gatewayhq/gateway/providers/fargate"
	"github.com/gatewayhq/gateway/providers/gce"
	"github.com/gatewayhq/gateway/providers/local"
)

// Backends lists the backends this build offers, one line each: adding a
// backend is its folder and a line here. The first is the default
// provider; the order is that of the provider key's documentation, of the
// "available:" error and of the crash points.
func Backends() []providers.Registration {
	return []providers.Registration{
		local.Registration(),
		docker.Registration(),
		ec2.Registration(),
		fargate.Registration(),
		gce.Registration(),
	}
}

// ConfigSchema is the configuration with the backends' sections.
func ConfigSchema() *config.Schema {
	return schemaOf(Backends())
}

func schemaOf(backends []providers.Registration) *config.Schema {
	sections := make([]config.Section, len(backends))
	for i, b := range backends {
		sections[i] = b.Section
	}
	s, err := config.NewSchema(sections...)
	if err != nil {
		// The list is fixed at compile time, and TestBackendsRegister
		// builds it: this is a programming error, as a bad regexp literal is.
		panic(fmt.Sprintf("server: the backends' configuration: %v", err))
	}
	return s
}

// CrashPoints lists every crash point GATEWAY_CRASH_AT can name: the
// core's, then each backend's, in the order a cluster's life meets them.
func CrashPoints() []crashpoint.Name {
	return crashPointsOf(Backends())
}

func crashPointsOf(backends []providers.Registration) []crashpoint.Name {
	all := crashpoint.Core()
	for _, b := range backends {
		all = append(all, b.CrashPoints...)
	}
	return all
}

// TypicalStarts is, per backend, how long its clusters typically take to
// start (for benchmark estimates).
func TypicalStarts() map[string]time.Duration {
	out := map[string]time.Duration{}
	for _, b := range Backends() {
		out[b.Name] = b.TypicalStart
	}
	return out
}

// backend is the registration of the configured provider.
func backend(backends []providers.Registration, name string) (providers.Registration, error) {
	for _, b := range backends {
		if b.Name == name {
			return b, nil
		}
	}
	return providers.Registration{}, fmt.Errorf("gateway: unknown provider %q", name)
}
