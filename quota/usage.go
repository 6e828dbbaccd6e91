package quota

import (
	"maps"

	"github.com/gatewayhq/gateway/store"
)

// InUseOf is what the store's usage summary says an owner's live
// clusters hold, as quotas count it (the same sum as InUse.Add over the
// clusters, kept by the store with every cluster write).
func InUseOf(u store.Usage) InUse {
	out := InUse{Clusters: u.Clusters, VCPUs: u.VCPUs, MemoryGiB: u.MemoryGiB, GPUs: u.GPUs}
	if len(u.GPUsByType) > 0 {
		out.GPUsByType = maps.Clone(u.GPUsByType)
	}
	return out
}
