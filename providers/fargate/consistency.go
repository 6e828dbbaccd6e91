package fargate

import (
	"context"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ecs"
	ecstypes "github.com/aws/aws-sdk-go-v2/service/ecs/types"
)

// unknownGrace is how long after RunTask a task that ECS does not know
// (DescribeTasks MISSING, StopTask "not found") is taken to be not known
// yet, ECS's API being eventually consistent, rather than long stopped and
// forgotten (which ECS does an hour or more after a task stops).
const unknownGrace = 5 * time.Minute

// young reports whether this process started the task less than
// unknownGrace ago.
func (p *Provider) young(arn string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.youngLocked(arn)
}

func (p *Provider) youngLocked(arn string) bool {
	at, ok := p.launchedAt[arn]
	return ok && time.Since(at) < unknownGrace
}

// unknownYet returns the cluster's tasks this process started moments ago
// that the description (tasks) left out, ECS not knowing them yet: ARN ->
// member.
func (p *Provider) unknownYet(cluster string, tasks []ecstypes.Task) map[string]string {
	described := map[string]bool{}
	for _, t := range tasks {
		described[aws.ToString(t.TaskArn)] = true
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	out := map[string]string{}
	for arn, member := range p.launched[cluster] {
		if !described[arn] && p.youngLocked(arn) {
			out[arn] = member
		}
	}
	return out
}

// stopUnknown stops a task ECS may not know yet: "not found" is waited out
// (PollInterval, while polls last) instead of being taken for a task
// already gone, which would leave it running.
func (p *Provider) stopUnknown(ctx context.Context, arn string, polls *int) error {
	for {
		_, err := call(ctx, p, "StopTask", func(ctx context.Context) (*ecs.StopTaskOutput, error) {
			return p.ecs.StopTask(ctx, &ecs.StopTaskInput{
				Cluster: aws.String(p.cfg.Cluster), Task: aws.String(arn), Reason: aws.String(stopReason),
			})
		})
		switch {
		case err == nil:
			return nil
		case !isNotFound(err):
			return fmt.Errorf("fargate provider: stop task %s: %w", arn, err)
		case *polls <= 0:
			return fmt.Errorf("fargate provider: task %s, started moments ago, is not known to ECS yet; stop it again later: %w", arn, err)
		}
		*polls--
		if err := p.cfg.Sleep(ctx, p.cfg.PollInterval); err != nil {
			return err
		}
	}
}
