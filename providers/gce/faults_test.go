package gce

import (
	"strings"
	"testing"

	"github.com/gatewayhq/gateway/providers/gce/gcetest"
)

// TestFaultModes drives a cluster's whole life (scheduler, two workers, a
// worker stopped, the cluster stopped) through each fault the real APIs
// show, and counts what is left in the fake afterwards: one instance per
// member, however often an insert was repeated, and no instance, firewall
// rule or secret once the cluster is stopped. (Compute Engine has no
// counterpart of EC2's DependencyViolation: a firewall rule can be
// deleted while instances it targets still run.)
func TestFaultModes(t *testing.T) {
	tests := []struct {
		name        string
		start, stop func(s *gcetest.Server)
		injected    int
	}{{
		name:     "throttling burst",
		start:    func(s *gcetest.Server) { s.Throttle(3) },
		stop:     func(s *gcetest.Server) { s.Throttle(3) },
		injected: 6,
	}, {
		name: "answers lost after success",
		start: func(s *gcetest.Server) {
			s.LoseAnswersReset("POST", "/global/firewalls", 1)
			s.LoseAnswers("POST", "/secrets", 1)
			s.LoseAnswersReset("POST", "/zones/us-central1-a/instances", 2)
			s.LoseAnswers("POST", "/zones/us-central1-a/instances", 1)
		},
		stop: func(s *gcetest.Server) {
			s.LoseAnswersReset("DELETE", "/instances/", 2)
			s.LoseAnswers("DELETE", "/global/firewalls/", 1)
			s.LoseAnswersReset("DELETE", "/secrets/", 1)
		},
		injected: 9,
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, nil)
			const cluster = "5f1e2d3c4b5a6978"
			spec := testSpec(t, cluster, "ann@example.com")
			tc.start(e.srv)
			if err := e.p.StartScheduler(e.ctx, spec); err != nil {
				t.Fatalf("StartScheduler: %v", err)
			}
			sched := e.describe(cluster)["scheduler"]
			for _, w := range []string{"worker-0", "worker-1"} {
				if err := e.p.StartWorker(e.ctx, spec, w, sched.Address); err != nil {
					t.Fatalf("StartWorker %s: %v", w, err)
				}
			}
			var names []string
			for _, in := range e.srv.Instances() {
				if strings.Contains(in.Name, cluster) {
					names = append(names, in.Name)
				}
			}
			if len(names) != 3 {
				t.Errorf("instances %v, want scheduler and two workers once", names)
			}
			if n := len(e.srv.Secrets()); n != 1 {
				t.Errorf("%d secrets for one cluster", n)
			}

			tc.stop(e.srv)
			if err := e.p.StopWorker(e.ctx, cluster, "worker-1"); err != nil {
				t.Fatalf("StopWorker: %v", err)
			}
			if err := e.p.StopCluster(e.ctx, cluster); err != nil {
				t.Fatalf("StopCluster: %v", err)
			}
			for _, in := range e.srv.Instances() {
				if strings.Contains(in.Name, cluster) {
					t.Errorf("instance %s left (%s)", in.Name, in.Status)
				}
			}
			for _, f := range e.srv.Firewalls() {
				if strings.Contains(f.Name, cluster) {
					t.Errorf("firewall rule %s left", f.Name)
				}
			}
			if s := e.srv.Secrets(); len(s) != 0 {
				t.Errorf("secrets left: %v", s)
			}
			if n := e.srv.Injected(); n != tc.injected {
				t.Errorf("%d faults met, want %d", n, tc.injected)
			}
		})
	}
}
