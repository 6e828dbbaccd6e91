package ec2

import (
	"context"

	"github.com/gatewayhq/gateway/providers/internal/awsutil"
)

// terminateUnlisted terminates an instance this process launched that EC2
// does not list yet. Right after RunInstances, EC2's eventual consistency
// can answer InvalidInstanceID.NotFound for an instance that exists
// ("If you get an InvalidInstanceID.NotFound error after RunInstances,
// retry with exponential backoff"): that answer is retried, with backoff,
// while the stop's wait budget lasts, instead of failing the stop and
// leaving the instance to run until the next try.
func (p *Provider) terminateUnlisted(ctx context.Context, cluster, id string, b *budget) error {
	for attempt := 1; ; attempt++ {
		err := p.terminate(ctx, cluster, []string{id})
		if err == nil || awsutil.ErrorCode(err) != codeInstanceNotFound {
			return err
		}
		wait := max(p.backoff(attempt), p.cfg.PollInterval/2)
		if !b.spend(wait) {
			return err
		}
		p.log.Debug("instance not known to EC2 yet; waiting", "cluster", cluster, "instance", id, "wait", wait)
		if err := p.cfg.Sleep(ctx, wait); err != nil {
			return err
		}
	}
}
