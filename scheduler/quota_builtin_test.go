package scheduler_test

import (
	"testing"

	"github.com/gatewayhq/gateway/quota"
	"github.com/gatewayhq/gateway/scheduler"
	"github.com/gatewayhq/gateway/store"
)

// TestQuotaBuiltinDefaults: with no quota entry at all, a user's sixth
// running cluster is refused with the usual message, naming the built-in
// default; a default entry in the configuration file or set through the
// admin API raises the limit (issue 14, finding 11).
func TestQuotaBuiltinDefaults(t *testing.T) {
	one := func(t *testing.T, config []quota.ConfigEntry) (*harness, *quota.Service) {
		ref := &quotaRef{}
		h := newHarness(t, func(c *scheduler.Config) { c.Quotas = ref })
		var err error
		if ref.s, err = quota.NewService(h.st, config, quota.Clamp); err != nil {
			t.Fatal(err)
		}
		h.start()
		return h, ref.s
	}

	t.Run("built-in", func(t *testing.T) {
		h, s := one(t, nil)
		for range 5 {
			h.create("alice", 1)
		}
		_, err := h.core.Create(h.ctx, who("alice"), nil)
		wantQuotaErr(t, err, "max_clusters", "would run 6 clusters of your 5", "from "+quota.BuiltinSource)
		// Others have their own five.
		h.create("bob", 1)

		// The admin raises the default through the API.
		six := quota.Amount(6)
		if _, err := s.Set(h.ctx, store.Actor{ID: "oidc:root", Name: "root"}, quota.DefaultSubject, quota.Limits{MaxClusters: &six}); err != nil {
			t.Fatal(err)
		}
		h.create("alice", 1)
		_, err = h.core.Create(h.ctx, who("alice"), nil)
		wantQuotaErr(t, err, "max_clusters", "would run 7 clusters of your 6", "default (api)")
	})

	t.Run("configuration file", func(t *testing.T) {
		eight := quota.Amount(8)
		h, _ := one(t, []quota.ConfigEntry{{Subject: quota.DefaultSubject, Limits: quota.Limits{MaxClusters: &eight}}})
		for range 8 {
			h.create("alice", 1)
		}
		_, err := h.core.Create(h.ctx, who("alice"), nil)
		wantQuotaErr(t, err, "max_clusters", "would run 9 clusters of your 8", "default (config)")
	})
}
