package scheduler

import (
	"context"
	"errors"
	"fmt"
)

// errNoGenerations: the store does not count changes per owner.
var errNoGenerations = errors.New("scheduler: the store keeps no cluster generations")

// ClustersGeneration is a number that moves whenever one of the owner's
// clusters is created or changed, by any replica: the API keeps encoded
// lists while it stands still.
func (c *Core) ClustersGeneration(ctx context.Context, owner string) (int64, error) {
	g, ok := c.store.(interface {
		ClustersGeneration(ctx context.Context, owner string) (int64, error)
	})
	if !ok {
		return 0, errNoGenerations
	}
	gen, err := g.ClustersGeneration(ctx, owner)
	if err != nil {
		return 0, fmt.Errorf("scheduler: %w", err)
	}
	return gen, nil
}
