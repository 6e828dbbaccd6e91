package docker

import (
	"context"
	"log/slog"
	"strings"
	"testing"

	"github.com/gatewayhq/gateway/providers"
)

// TestImageIDsNeverReachTheEngine: whatever the layers above let through,
// a member's image that the engine could resolve as an image ID (a prefix
// of one, sha256:…) is refused before the engine is asked, since it would
// match any image the engine holds, whoever built it (issue 14, finding 1).
// The provider here has no engine client: reaching it would panic.
func TestImageIDsNeverReachTheEngine(t *testing.T) {
	p := &Provider{cfg: Config{GatewayID: "gw", Image: "gateway-test/dask:bookworm-1", Network: NetworkHost}, log: slog.New(slog.DiscardHandler)}
	for _, img := range []string{"46d0", "sha256:46d0", strings.Repeat("ab", 32), "sha256:" + strings.Repeat("ab", 32)} {
		spec := providers.ClusterSpec{Name: "c1", Image: img, TLSCert: []byte("cert"), TLSKey: []byte("key")}
		err := p.start(context.Background(), spec, "scheduler", providers.RoleScheduler, nil)
		if err == nil || !strings.Contains(err.Error(), "looks like an image ID") {
			t.Errorf("image %q: %v, want refused as an image ID", img, err)
		}
	}
}
