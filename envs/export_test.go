package envs

import (
	"testing"

	"github.com/gatewayhq/gateway/images/build"
	"github.com/gatewayhq/gateway/quota"
)

// What the upload tests (package envs_test: they drive the service through
// the real API, which imports envs) need of this package's test helpers.

// NewTestService is newService over a fresh SQLite store.
func NewTestService(t *testing.T, b Builder, edit func(*Config)) *Service {
	return newService(t, sqliteStore(t), b, edit)
}

// FakeBuilder is the tests' builder.
type FakeBuilder = fakeBuilder

// NewFakeBuilder is newFakeBuilder.
func NewFakeBuilder() *FakeBuilder { return newFakeBuilder() }

// Finish marks hash's build ready.
func (f *fakeBuilder) Finish(hash string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	done := f.builds[hash]
	done.State = build.StateReady
	f.builds[hash] = done
}

// SameQuotas gives every user max_builds max, from src.
func SameQuotas(max *quota.Amount, src string) Quotas { return fakeQuotas{max, src} }
