package scheduler

import (
	"context"
	"encoding/json"

	"github.com/gatewayhq/gateway/quota"
)

// Price is what a cluster with these options would run on and cost per
// hour, without creating it: the machines Create would choose for who,
// priced as the usage ledger prices them (PriceHour zero where the gateway
// has no price), and the workers it would start with. Benchmark runs use
// it to estimate their cost before any cluster starts.
func (c *Core) Price(ctx context.Context, who Who, raw map[string]json.RawMessage) (quota.Shape, int, error) {
	opts, err := c.cfg.Limits.ParseOptions(raw)
	if err != nil {
		return quota.Shape{}, 0, err
	}
	eff, err := c.effective(ctx, who)
	if err != nil {
		return quota.Shape{}, 0, err
	}
	sched, worker, err := c.machines(ctx, opts, eff)
	if err != nil {
		return quota.Shape{}, 0, err
	}
	return c.shape(sched, worker), opts.Workers, nil
}
