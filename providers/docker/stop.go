package docker

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/container"

	"github.com/gatewayhq/gateway/providers"
)

// StopWorker implements providers.Provider: the worker's container is
// stopped and removed, its log saved first.
func (p *Provider) StopWorker(ctx context.Context, cluster, worker string) error {
	list, err := p.containers(ctx, cluster, worker)
	if err != nil {
		return err
	}
	var errs []error
	for _, c := range list {
		if err := p.stopMember(ctx, c, false); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// StopCluster implements providers.Provider: every container of the
// cluster is stopped and removed, workers first, then its network.
func (p *Provider) StopCluster(ctx context.Context, cluster string) error {
	list, err := p.containers(ctx, cluster, "")
	if err != nil {
		return err
	}
	// Mark every member before stopping any, so that a scheduler that
	// exits while its workers stop is not reported as having died.
	var workers, scheds []container.Summary
	for _, c := range list {
		done := p.markStopping(memberKey(cluster, c.Labels[labelMember]))
		defer done()
		if c.Labels[labelRole] == string(providers.RoleScheduler) {
			scheds = append(scheds, c)
		} else {
			workers = append(workers, c)
		}
	}
	var (
		mu   sync.Mutex
		errs []error
		wg   sync.WaitGroup
	)
	stop := func(c container.Summary) {
		if err := p.stopMember(ctx, c, true); err != nil {
			mu.Lock()
			errs = append(errs, err)
			mu.Unlock()
		}
	}
	// Workers first, while their scheduler can still release them: a
	// worker whose scheduler is already gone waits to reconnect instead of
	// exiting.
	for _, c := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			stop(c)
		}()
	}
	wg.Wait()
	for _, c := range scheds {
		stop(c)
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	// The network goes last, once nothing is attached to it.
	if err := p.removeNetworks(ctx, cluster); err != nil {
		return err
	}
	if len(list) > 0 {
		p.log.Info("stopped cluster", "cluster", cluster, "members", len(list))
	}
	return nil
}

// stopMember stops one container (SIGTERM, then SIGKILL after the grace
// period), saves its log and removes it. With noteEnd, when it ended is
// noted for StoppedAt (and saved) before the container, which holds the
// only other record of it, is removed.
func (p *Provider) stopMember(ctx context.Context, c container.Summary, noteEnd bool) error {
	cluster, member := c.Labels[labelCluster], c.Labels[labelMember]
	key := memberKey(cluster, member)
	done := p.markStopping(key)
	defer done()
	unlock, err := p.locks.Lock(ctx, key)
	if err != nil {
		return err
	}
	defer unlock()
	name := c.ID
	if len(c.Names) > 0 {
		name = strings.TrimPrefix(c.Names[0], "/")
	}
	grace := stopSeconds(p.cfg.StopGrace)
	// Signal is the image-independent SIGTERM that StopSignal set at
	// creation; engines before API 1.42 ignore it here.
	err = p.cli.ContainerStop(ctx, c.ID, container.StopOptions{Signal: "SIGTERM", Timeout: &grace})
	if cerrdefs.IsNotFound(err) {
		// Removed meanwhile, by whoever stopped it: what that one saved
		// stands, or the stop is dated when it is recorded.
		p.forget(c.ID)
		return nil
	}
	if err != nil {
		return fmt.Errorf("docker provider: stop %s of %s (%s): %w", member, cluster, name, err)
	}
	end := time.Now()
	if insp, err := p.cli.ContainerInspect(ctx, c.ID); err == nil {
		if t := parseTime(insp.State.FinishedAt); !t.IsZero() && t.Before(end) {
			end = t
		}
	}
	if noteEnd {
		p.ends.Note(cluster, member, end)
	}
	p.saveLog(ctx, cluster, member, c.ID)
	if err := p.cli.ContainerRemove(ctx, c.ID, container.RemoveOptions{Force: true, RemoveVolumes: true}); err != nil && !cerrdefs.IsNotFound(err) {
		if !strings.Contains(err.Error(), "already in progress") {
			return fmt.Errorf("docker provider: remove %s of %s (%s): %w", member, cluster, name, err)
		}
	}
	p.forget(c.ID)
	p.log.Info("stopped member", "cluster", cluster, "member", member, "container", name)
	return nil
}
