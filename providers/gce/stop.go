package gce

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	compute "cloud.google.com/go/compute/apiv1"
	"cloud.google.com/go/compute/apiv1/computepb"
)

// stopParallelism bounds the deletions StopCluster runs at once, under the
// API's per-project rate limits.
const stopParallelism = 16

// markStopping records that the gateway asked the member to stop, so that
// Describe reports it stopped without a reason (a reason would count it as
// lost).
func (p *Provider) markStopping(f *found) {
	ms := f.state()
	p.mu.Lock()
	defer p.mu.Unlock()
	st := p.state(f.cluster)
	cur := st.members[f.member]
	if cur == nil || cur.id != ms.id {
		p.gen++
		ms.gen = p.gen
		cur = &ms
		st.members[f.member] = cur
	}
	cur.stopping, cur.lost = true, nil
}

// StopWorker implements providers.Provider. It returns once the deletion
// is accepted: Describe reports the worker stopped (STOPPING) at once, and
// gone when the deletion is done. A worker that is already gone, or that
// vanished on its own, is forgotten.
func (p *Provider) StopWorker(ctx context.Context, cluster, worker string) error {
	fs, err := p.listInstances(ctx, p.memberFilter(cluster, worker))
	if err != nil {
		return fmt.Errorf("gce provider: stop %s of %s: %w", worker, cluster, err)
	}
	var mine []*found
	for _, f := range fs {
		if f.cluster == cluster && f.member == worker {
			mine = append(mine, f)
		}
	}
	if len(mine) == 0 {
		p.mu.Lock()
		if st := p.clusters[cluster]; st != nil {
			delete(st.members, worker)
		}
		p.mu.Unlock()
		return nil
	}
	for _, f := range mine {
		p.markStopping(f)
		op, err := p.deleteInstance(ctx, f)
		if err != nil {
			return fmt.Errorf("gce provider: stop %s of %s: %w", worker, cluster, err)
		}
		if op != nil && op.Done() {
			if err := opError(op.Proto()); err != nil && !isGone(err) {
				return fmt.Errorf("gce provider: stop %s of %s: %w", worker, cluster, err)
			}
		}
		p.log.Info("stopping member", "cluster", cluster, "member", worker, "instance", f.inst.GetName(), "zone", f.zone)
	}
	return nil
}

// deleteInstance asks for the instance's deletion; nil when it is gone
// already.
func (p *Provider) deleteInstance(ctx context.Context, f *found) (*compute.Operation, error) {
	name := f.inst.GetName()
	var op *compute.Operation
	err := p.call(ctx, "delete "+name, func(ctx context.Context) error {
		var err error
		op, err = p.instances.Delete(ctx, &computepb.DeleteInstanceRequest{Project: p.cfg.Project, Zone: f.zone, Instance: name})
		return err
	})
	if isNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("delete instance %s in %s: %w", name, f.zone, err)
	}
	return op, nil
}

// StopCluster implements providers.Provider: it deletes every member and
// waits for the deletions, then deletes the firewall rules and the secret
// (after the instances: a member still booting needs them). An unknown or
// already stopped cluster is not an error. When some deletion fails, or
// some zone did not answer the listing (it may hold a member, which needs
// them), the rules and the secret stay, the members found are deleted, and
// the call fails: a repeated call finishes the job.
func (p *Provider) StopCluster(ctx context.Context, cluster string) error {
	all, unreachable, err := p.listReachable(ctx, p.clusterFilter(cluster))
	if err != nil {
		return fmt.Errorf("gce provider: stop cluster %s: %w", cluster, err)
	}
	fs := slices.DeleteFunc(all, func(f *found) bool { return f.cluster != cluster })
	for _, f := range fs {
		p.markStopping(f)
	}
	ends := make([]time.Time, len(fs))
	errs := make([]error, len(fs))
	sem := make(chan struct{}, stopParallelism)
	var wg sync.WaitGroup
	for i, f := range fs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			select {
			case sem <- struct{}{}:
				defer func() { <-sem }()
			case <-ctx.Done():
				errs[i] = ctx.Err()
				return
			}
			ends[i], errs[i] = p.deleteAndWait(ctx, f)
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("gce provider: stop cluster %s: %w", cluster, err)
	}
	for i, f := range fs {
		p.ends.Note(cluster, f.member, ends[i])
	}
	if len(unreachable) > 0 {
		return fmt.Errorf("gce provider: stop cluster %s: deleted the %d member(s) found; its firewall rules and secret are kept until every zone answers: %w",
			cluster, len(fs), &PartialListError{Scopes: unreachable})
	}
	for _, name := range []string{gatewayRuleName(cluster), internalRuleName(cluster)} {
		if err := p.deleteFirewall(ctx, cluster, name); err != nil {
			return fmt.Errorf("gce provider: stop cluster %s: %w", cluster, err)
		}
	}
	if err := p.deleteSecret(ctx, cluster); err != nil {
		return fmt.Errorf("gce provider: stop cluster %s: %w", cluster, err)
	}
	p.mu.Lock()
	if st := p.clusters[cluster]; st != nil {
		for _, ms := range st.members {
			delete(p.ready, ms.id)
			delete(p.reasons, ms.id)
		}
		delete(p.clusters, cluster)
	}
	p.mu.Unlock()
	if len(fs) > 0 {
		p.log.Info("stopped cluster", "cluster", cluster, "members", len(fs))
	}
	return nil
}

// deleteAndWait deletes one instance and returns when it ended: when it
// stopped on its own if it had, else when its deletion finished (the
// operation's end time, as Compute Engine recorded it).
func (p *Provider) deleteAndWait(ctx context.Context, f *found) (time.Time, error) {
	var end time.Time
	if f.inst.GetStatus() == "TERMINATED" {
		end = parseTime(f.inst.GetLastStopTimestamp())
	}
	op, err := p.deleteInstance(ctx, f)
	if err != nil {
		return end, err
	}
	if op != nil {
		done, err := p.waitZoneOp(ctx, f.zone, op.Proto(), "delete of "+f.inst.GetName())
		if err != nil {
			return end, err
		}
		if err := opError(done); err != nil && !isGone(err) {
			return end, err
		}
		if end.IsZero() {
			end = parseTime(done.GetEndTime())
		}
	}
	if end.IsZero() {
		end = time.Now()
	}
	return end, nil
}

// StoppedAt implements providers.StopTimes: when StopCluster saw the
// member end, once.
func (p *Provider) StoppedAt(cluster, member string) (time.Time, bool) {
	return p.ends.StoppedAt(cluster, member)
}
