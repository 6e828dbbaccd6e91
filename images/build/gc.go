package build

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/image"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"

	"github.com/gatewayhq/gateway/images"
)

// LabelBuilt marks the images this package built. The garbage collector
// removes images with this label only: never a base, a published image or
// anything else the engine holds.
const LabelBuilt = "io.gateway.env.built"

// withBuiltLabel returns img with LabelBuilt in its config.
func withBuiltLabel(img v1.Image) (v1.Image, error) {
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	if cf.Config.Labels == nil {
		cf.Config.Labels = map[string]string{}
	}
	cf.Config.Labels[LabelBuilt] = "1"
	return mutate.ConfigFile(img, cf)
}

// usedPath is the file whose modification time is when the environment of
// tag was last asked for or seen in use. It is kept on disk, so that a
// restarted gateway (or a replica sharing data_dir) knows it.
func (b *Builder) usedPath(tag string) string {
	return filepath.Join(b.cfg.LogDir, "used", tag)
}

// Used records that the environment of hash was asked for now: its image
// is kept for at least the garbage collector's retention from now.
func (b *Builder) Used(hash string) { b.touch(images.TagForHash(hash)) }

func (b *Builder) touch(tag string) {
	p := b.usedPath(tag)
	now := b.cfg.Now()
	if err := os.Chtimes(p, now, now); err == nil {
		return
	}
	if err := os.MkdirAll(filepath.Dir(p), 0o750); err != nil {
		b.logger.Warn("cannot record the use of an environment image", "tag", tag, "err", err)
		return
	}
	err := os.WriteFile(p, nil, 0o640)
	if err == nil {
		err = os.Chtimes(p, now, now)
	}
	if err != nil {
		b.logger.Warn("cannot record the use of an environment image", "tag", tag, "err", err)
	}
}

func (b *Builder) lastUsed(tag string) (time.Time, bool) {
	fi, err := os.Stat(b.usedPath(tag))
	if err != nil {
		return time.Time{}, false
	}
	return fi.ModTime(), true
}

// building reports whether a build of tag's environment has not ended.
func (b *Builder) building(tag string) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	for h, j := range b.jobs {
		if images.TagForHash(h) == tag && !j.finished() {
			return true
		}
	}
	return false
}

// CollectGarbage removes from the engine the environment images this
// package built (LabelBuilt, tagged in the environment repository) that no
// container uses, that are not among inUse (the images of active
// clusters, which may have no container yet) and that nobody asked for
// within retention. An image first seen here counts as used now. It logs
// each removal and returns the references removed. Images in use have
// their use recorded, so that they are kept for retention after their
// clusters stop. The engine refuses to remove an image a container uses,
// which backs the checks here.
func (b *Builder) CollectGarbage(ctx context.Context, retention time.Duration, inUse []string) ([]string, error) {
	if b.docker == nil || retention <= 0 {
		return nil, nil
	}
	envRepo, err := name.ParseReference(b.Ref(strings.Repeat("0", 64)))
	if err != nil {
		return nil, err
	}
	used := map[string]bool{}
	for _, r := range inUse {
		if ref, err := name.ParseReference(r); err == nil {
			used[ref.Name()] = true
		}
	}
	cs, err := b.docker.ContainerList(ctx, container.ListOptions{All: true})
	if err != nil {
		return nil, fmt.Errorf("docker engine: list containers: %w", err)
	}
	byContainer := map[string]bool{}
	for _, c := range cs {
		byContainer[c.ImageID] = true
	}
	list, err := b.docker.ImageList(ctx, image.ListOptions{Filters: filters.NewArgs(filters.Arg("label", LabelBuilt))})
	if err != nil {
		return nil, fmt.Errorf("docker engine: list images: %w", err)
	}
	now := b.cfg.Now()
	var removed []string
	var errs []error
	for _, im := range list {
		for _, rt := range im.RepoTags {
			ref, err := name.ParseReference(rt)
			if err != nil || ref.Context().Name() != envRepo.Context().Name() || !strings.HasPrefix(ref.Identifier(), "env-") {
				continue
			}
			tag := ref.Identifier()
			if used[ref.Name()] || byContainer[im.ID] {
				b.touch(tag)
				continue
			}
			if b.building(tag) {
				continue
			}
			last, ok := b.lastUsed(tag)
			if !ok {
				b.touch(tag)
				continue
			}
			if now.Sub(last) < retention {
				continue
			}
			if _, err := b.docker.ImageRemove(ctx, rt, image.RemoveOptions{PruneChildren: true}); err != nil {
				if !isEngineNotFound(err) {
					errs = append(errs, fmt.Errorf("remove %s: %w", rt, err))
				}
				continue
			}
			_ = os.Remove(b.usedPath(tag))
			removed = append(removed, rt)
			b.logger.Info("removed an environment image nobody used", "image", rt, "id", im.ID, "last_used", last.UTC().Format(time.RFC3339), "retention", retention)
		}
	}
	return removed, errors.Join(errs...)
}

// StartGC runs CollectGarbage every interval until the Builder closes,
// with the images inUse returns (an error skips that pass).
func (b *Builder) StartGC(interval, retention time.Duration, inUse func(context.Context) ([]string, error)) {
	if b.docker == nil || retention <= 0 || interval <= 0 {
		return
	}
	b.wg.Add(1)
	go func() {
		defer b.wg.Done()
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-b.ctx.Done():
				return
			case <-t.C:
			}
			refs, err := inUse(b.ctx)
			if err != nil {
				b.logger.Warn("environment image collection skipped: the images in use cannot be listed", "err", err)
				continue
			}
			if _, err := b.CollectGarbage(b.ctx, retention, refs); err != nil && b.ctx.Err() == nil {
				b.logger.Warn("environment image collection", "err", err)
			}
		}
	}()
}
