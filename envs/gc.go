package envs

import (
	"context"
	"fmt"
	"time"

	"github.com/gatewayhq/gateway/clusteropts"
	"github.com/gatewayhq/gateway/images/build"
	"github.com/gatewayhq/gateway/store"
)

// ClusterLister is what the image garbage collector needs of the store.
type ClusterLister interface {
	ListClusters(ctx context.Context, f store.Filter) ([]*store.Cluster, error)
}

// ImagesInUse lists the images of the active clusters (those that hold or
// may soon hold containers).
func ImagesInUse(ctx context.Context, st ClusterLister) ([]string, error) {
	cls, err := st.ListClusters(ctx, store.Filter{Statuses: store.ActiveStatuses})
	if err != nil {
		return nil, err
	}
	var out []string
	for _, c := range cls {
		o, err := clusteropts.Decode([]byte(c.Options))
		if err != nil {
			// Collecting without knowing this cluster's image could
			// remove it: nothing is collected until the row is mended.
			return nil, fmt.Errorf("cluster %s: its stored options cannot be read: %w", c.Name, err)
		}
		if o.Image != "" {
			out = append(out, o.Image)
		}
	}
	return out, nil
}

// imageGCInterval is how often built images are collected.
const imageGCInterval = time.Hour

// StartImageGC removes, every hour, the built environment images that no
// active cluster uses and nobody asked for within retention.
func StartImageGC(b *build.Builder, st ClusterLister, retention time.Duration) {
	b.StartGC(imageGCInterval, retention, func(ctx context.Context) ([]string, error) { return ImagesInUse(ctx, st) })
}
