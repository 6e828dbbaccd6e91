package server

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/gatewayhq/gateway/internal/config"
	"github.com/gatewayhq/gateway/providers"
)

// newProvider makes the configured backend through its registration.
// Cloud backends take their credentials from their SDK's usual places
// (environment, shared files, instance or workload identity), never from
// the gateway's configuration.
func newProvider(ctx context.Context, b providers.Registration, cfg *config.Config, gatewayID string, pullAuth func(context.Context, string) (string, error), log *slog.Logger) (providers.Provider, error) {
	p, err := b.New(ctx, cfg.ProviderSection(b.Name), providers.Deps{GatewayID: gatewayID, DataDir: cfg.DataDir, PullAuth: pullAuth, Logger: log})
	if err != nil && !b.NamesKeys {
		// The backends name their own fields; say where they live.
		return nil, fmt.Errorf("providers.%s.* (or %s_*): %w", b.Name, config.EnvName("providers."+strings.ToLower(b.Name)), err)
	}
	return p, err
}

// startTimeout is cluster.start_timeout, or the backend's default: cloud
// machines boot and pull the image before the scheduler answers.
func startTimeout(b providers.Registration, cfg *config.Config) time.Duration {
	if cfg.Cluster.StartTimeout > 0 {
		return cfg.Cluster.StartTimeout
	}
	return b.StartTimeout
}
